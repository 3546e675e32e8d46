package shard

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser/ast"

	"github.com/sluice-proxy/sluice/conf"
)

// Rules are the sharding rules of one configuration: which tables are
// sharded and how, which are broadcast, and which cluster holds the rest.
// New builds them; they are immutable afterwards except for the template
// cache and the id generator, which synchronise themselves, so any number
// of sessions may share one Rules.
type Rules struct {
	clusters     []string
	def          int
	maxMergeRows int
	sharded      map[tableKey]*rule
	broadcast    map[tableKey]bool
	// names holds the lower-case names of sharded and broadcast tables,
	// to tell whether a text the parser rejects may name one; labels their
	// "schema.table", plain whether a name is all identifier bytes.
	names  []string
	labels []string
	plain  []bool
	ids    *IDGenerator
	cache  templateCache
}

// tableKey is a lower-case schema and table name.
type tableKey struct{ schema, table string }

// New builds the rules of cfg, which should have passed conf validation;
// New still returns an error naming the rule for anything it cannot use.
func New(cfg *conf.Config) (*Rules, error) {
	r := &Rules{
		maxMergeRows: cfg.Sharding.MaxMergeRows,
		sharded:      make(map[tableKey]*rule, len(cfg.Shards)),
		broadcast:    make(map[tableKey]bool, len(cfg.Broadcast)),
		ids:          NewIDGenerator(cfg.Sharding.NodeID),
	}
	r.cache.init()
	index := make(map[string]int, len(cfg.Clusters))
	for i, c := range cfg.Clusters {
		r.clusters = append(r.clusters, c.Name)
		index[c.Name] = i
	}
	if len(r.clusters) == 0 {
		return nil, fmt.Errorf("shard: the configuration has no [[cluster]]")
	}
	def, ok := index[cfg.DefaultCluster()]
	if !ok {
		return nil, fmt.Errorf("shard: sharding.default_cluster: no [[cluster]] is named %q", cfg.DefaultCluster())
	}
	r.def = def
	if r.maxMergeRows <= 0 {
		r.maxMergeRows = conf.DefaultMaxMergeRows
	}
	for i, s := range cfg.Shards {
		label := fmt.Sprintf("shard[%d] (%s.%s)", i, s.Schema, s.Table)
		ru := &rule{
			schema:   s.Schema,
			table:    s.Table,
			key:      strings.ToLower(s.Key),
			idColumn: strings.ToLower(s.IDColumn),
			tables:   max(s.TablesPerCluster, 1),
			virtual:  s.VirtualShards,
			bounds:   s.Boundaries,
		}
		if s.Schema == "" || s.Table == "" || s.Key == "" {
			return nil, fmt.Errorf("shard: %s: schema, table and key are required", label)
		}
		for _, name := range s.Clusters {
			c, ok := index[name]
			if !ok {
				return nil, fmt.Errorf("shard: %s: clusters: no [[cluster]] is named %q", label, name)
			}
			ru.clusters = append(ru.clusters, c)
		}
		if len(ru.clusters) == 0 {
			return nil, fmt.Errorf("shard: %s: clusters must name at least one cluster", label)
		}
		ru.shards = len(ru.clusters) * ru.tables
		switch s.Algorithm {
		case "mod":
			ru.algo = algoMod
		case "hash":
			ru.algo = algoHash
		case "range":
			ru.algo = algoRange
			if len(s.Boundaries) != ru.shards+1 {
				return nil, fmt.Errorf("shard: %s: boundaries define %d ranges for %d physical tables", label, len(s.Boundaries)-1, ru.shards)
			}
			for j := 1; j < len(s.Boundaries); j++ {
				if s.Boundaries[j] <= s.Boundaries[j-1] {
					return nil, fmt.Errorf("shard: %s: boundaries must be strictly ascending", label)
				}
			}
		case "date":
			ru.algo = algoDate
			switch s.DateUnit {
			case "day":
				ru.unit = unitDay
			case "month":
				ru.unit = unitMonth
			case "year":
				ru.unit = unitYear
			default:
				return nil, fmt.Errorf("shard: %s: date_unit: unknown value %q", label, s.DateUnit)
			}
		default:
			return nil, fmt.Errorf("shard: %s: algorithm: unknown value %q", label, s.Algorithm)
		}
		if ru.virtual < 0 || ru.virtual > 0 && (ru.virtual%ru.shards != 0 || ru.algo == algoRange || ru.algo == algoDate) {
			return nil, fmt.Errorf("shard: %s: virtual_shards %d is not a multiple of %d physical tables of a mod or hash rule", label, ru.virtual, ru.shards)
		}
		k := tableKey{strings.ToLower(s.Schema), strings.ToLower(s.Table)}
		if _, dup := r.sharded[k]; dup {
			return nil, fmt.Errorf("shard: %s: table is already sharded", label)
		}
		ru.lower = k.schema + "." + k.table
		r.sharded[k] = ru
		r.addName(k, s.Schema+"."+s.Table)
	}
	for i, b := range cfg.Broadcast {
		k := tableKey{strings.ToLower(b.Schema), strings.ToLower(b.Table)}
		if _, dup := r.sharded[k]; dup {
			return nil, fmt.Errorf("shard: broadcast[%d] (%s.%s): table is also sharded", i, b.Schema, b.Table)
		}
		r.broadcast[k] = true
		r.addName(k, b.Schema+"."+b.Table)
	}
	return r, nil
}

// addName records a sharded or broadcast table for mayName.
func (r *Rules) addName(k tableKey, label string) {
	r.names = append(r.names, k.table)
	r.labels = append(r.labels, label)
	r.plain = append(r.plain, plainName(k.table))
}

// Enabled reports whether any table is sharded or broadcast; without, every
// statement runs unchanged on the default cluster.
func (r *Rules) Enabled() bool { return len(r.sharded) > 0 || len(r.broadcast) > 0 }

// Clusters returns every [[cluster]] name in configuration order;
// Part.Cluster indexes it. The caller must not modify it.
func (r *Rules) Clusters() []string { return r.clusters }

// DefaultCluster returns the index of the cluster holding unsharded tables.
func (r *Rules) DefaultCluster() int { return r.def }

// MaxMergeRows returns the most rows a merge may hold at once.
func (r *Rules) MaxMergeRows() int { return r.maxMergeRows }

// IDs returns the generator of the rules' global ids (node
// sharding.node_id).
func (r *Rules) IDs() *IDGenerator { return r.ids }

// lookup returns the rule of a sharded table, or whether the table is
// broadcast; schema and table are lower case.
func (r *Rules) lookup(schema, table string) (*rule, bool) {
	k := tableKey{schema, table}
	if ru, ok := r.sharded[k]; ok {
		return ru, false
	}
	return nil, r.broadcast[k]
}

// mayName returns the "schema.table" of a sharded or broadcast table whose
// name sql may hold as an identifier token, or "" when it holds none; it is
// for texts sluice does not read as the server will (the parser rejects
// them, or they carry SQL as a string). A name matches in any letter case,
// quoted or not, qualified or not, inside strings and comments too: a false
// match only costs a refusal, a missed one would send the statement to a
// cluster that holds a part of the table. A neighbouring non-ASCII byte or
// a leading digit counts as a boundary, since the server may read the text
// in a character set or lexer state where it is one.
func (r *Rules) mayName(sql string) string {
	if len(r.names) == 0 {
		return ""
	}
	l := strings.ToLower(sql)
	for i, n := range r.names {
		for from := 0; from < len(l); {
			j := strings.Index(l[from:], n)
			if j < 0 {
				break
			}
			j += from
			end := j + len(n)
			if !r.plain[i] || (j == 0 || !identLetter(l[j-1])) && (end == len(l) || !identByte(l[end])) {
				return r.labels[i]
			}
			from = j + 1
		}
	}
	return ""
}

// identByte reports an ASCII byte the server reads as part of an unquoted
// identifier; identLetter the same without digits.
func identByte(c byte) bool { return identLetter(c) || c >= '0' && c <= '9' }

func identLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

// plainName reports a name made of identifier bytes only, whose matches
// mayName checks for token boundaries; any other name matches anywhere.
func plainName(n string) bool {
	for i := 0; i < len(n); i++ {
		if !identByte(n[i]) {
			return false
		}
	}
	return n != ""
}

// CheckOpaque returns an error wrapping ErrUnsupported and naming the
// table when sql, a text the proxy cannot be sure it reads as the server
// will (executable comments such as /*M! ... */, which the server runs and
// the parser skips or reads otherwise, several statements, bytes the two
// lexers split differently), may name a sharded or broadcast table: what
// the parser found in it says nothing sure about where it must run.
func (r *Rules) CheckOpaque(sql string) error {
	if n := r.mayName(sql); n != "" {
		return fmt.Errorf("%w: sluice cannot be sure it reads this text as the server will (it does not parse it, it holds several statements, or executable comments /*! */ or /*M! */), and the text may name table %s, which is sharded or broadcast", ErrUnsupported, n)
	}
	return nil
}

// errModeUnsure stands for a parse that cannot be tried: the session's
// sql_mode is not one the parser follows.
var errModeUnsure = errors.New("the session's sql_mode is not one sluice's parser follows")

// CheckDefault returns an error wrapping ErrUnsupported and naming the
// table when sql, which the proxy means to send unchanged to the default
// cluster without a Template (a text its parser rejects, a SET), may reach
// a sharded table, or a broadcast table other than for reading it. It
// returns nil when the default cluster answers the text exactly.
//
// mode is the session's sql_mode, under which the text is read; with
// ModeUnsure any text that may name a rule's table is refused.
func (r *Rules) CheckDefault(schema, sql string, mode SQLMode) error {
	// Every table the parser finds is a token of the text: a text without
	// one of the rules' names needs no parse.
	n := r.mayName(sql)
	if n == "" {
		return nil
	}
	var stmts []ast.StmtNode
	err := errModeUnsure
	if mode&ModeUnsure == 0 {
		stmts, err = parse(sql, mode)
	}
	if err != nil {
		return fmt.Errorf("%w: sluice cannot parse this statement, and its text may name table %s, which is sharded or broadcast (sluice cannot tell which shards it needs)", ErrUnsupported, n)
	}
	schema = strings.ToLower(schema)
	for _, st := range stmts {
		if err := r.hiddenSQL(st); err != nil {
			return err
		}
		c := r.collect(st, schema)
		if c.cteShadow != "" {
			return cteShadowError(c.cteShadow)
		}
		if len(c.order) > 0 {
			return fmt.Errorf("%w: %s naming sharded table %s runs on the default cluster only", ErrUnsupported, stmtName(st), c.order[0].Name.O)
		}
		if c.broadcast > 0 && !isRead(st) {
			if _, set := st.(*ast.SetStmt); !set {
				return fmt.Errorf("%w: %s naming broadcast table %s would change one copy only", ErrUnsupported, stmtName(st), c.broadcastName)
			}
		}
	}
	return nil
}

// Prepare returns the Template of sql as run with the session's current
// database schema ("" when none) under the server's default sql_mode; see
// PrepareMode.
func (r *Rules) Prepare(schema, sql string) (*Template, error) {
	return r.PrepareMode(schema, sql, 0)
}

// PrepareMode returns the Template of sql as run with the session's
// current database schema ("" when none) under the sql_mode flags mode:
// the text is parsed as the server reads it under them, and rewritten so
// the server reads the rewrite alike. Templates are cached by schema, text
// and mode, and a cache hit does not allocate. The error, also cached,
// wraps one of the package's sentinels.
func (r *Rules) PrepareMode(schema, sql string, mode SQLMode) (*Template, error) {
	if e, ok := r.cache.get(schema, sql, mode); ok {
		return e.t, e.err
	}
	// The Template and the cache outlive the caller's text: keep a copy.
	schema, sql = strings.Clone(schema), strings.Clone(sql)
	t, err := r.prepareMode(schema, sql, mode)
	r.cache.put(schema, sql, mode, cacheEntry{t, err})
	return t, err
}

// Template cache sizing: a full shard is emptied, which keeps the cache
// bounded without bookkeeping on the hit path.
const (
	cacheShards   = 16
	cacheShardCap = 512
)

type cacheKey struct {
	schema, sql string
	mode        SQLMode
}

type cacheEntry struct {
	t   *Template
	err error
}

// templateCache is a bounded, sharded map from (schema, text, mode) to the
// Template or error PrepareMode made of it; safe for concurrent use.
type templateCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[cacheKey]cacheEntry
	_  [40]byte // keep shards' locks on separate cache lines
}

func (c *templateCache) init() {
	c.seed = maphash.MakeSeed()
	for i := range c.shards {
		c.shards[i].m = make(map[cacheKey]cacheEntry)
	}
}

func (c *templateCache) shard(sql string) *cacheShard {
	return &c.shards[maphash.String(c.seed, sql)%cacheShards]
}

func (c *templateCache) get(schema, sql string, mode SQLMode) (cacheEntry, bool) {
	s := c.shard(sql)
	s.mu.RLock()
	e, ok := s.m[cacheKey{schema, sql, mode}]
	s.mu.RUnlock()
	return e, ok
}

// clear empties the cache: templates made before a change of the rules'
// key information may hold checks that depend on it.
func (c *templateCache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.mu.Unlock()
	}
}

func (c *templateCache) put(schema, sql string, mode SQLMode, e cacheEntry) {
	s := c.shard(sql)
	k := cacheKey{schema, sql, mode}
	s.mu.Lock()
	if len(s.m) >= cacheShardCap {
		clear(s.m)
	}
	s.m[k] = e
	s.mu.Unlock()
}

// PhysicalTable is a table the rules expect on a cluster: one shard of a
// [[shard]] rule, or a [[broadcast]] table's copy.
type PhysicalTable struct {
	// Cluster indexes Clusters().
	Cluster int
	// Schema and Table name the physical table; Logical is the rule's
	// "schema.table".
	Schema, Table, Logical string
}

// PhysicalTables lists every physical table of every rule and every
// broadcast table's copy on each cluster, ordered by logical name and
// shard, so the proxy can check at start-up that they exist.
func (r *Rules) PhysicalTables() []PhysicalTable {
	var out []PhysicalTable
	rules := make([]*rule, 0, len(r.sharded))
	for _, ru := range r.sharded {
		rules = append(rules, ru)
	}
	slices.SortFunc(rules, func(a, b *rule) int { return strings.Compare(a.lower, b.lower) })
	for _, ru := range rules {
		for s := range ru.shards {
			name := ru.table
			if ru.tables > 1 {
				name += "_" + strconv.Itoa(s%ru.tables)
			}
			out = append(out, PhysicalTable{Cluster: ru.cluster(s), Schema: ru.schema, Table: name, Logical: ru.schema + "." + ru.table})
		}
	}
	keys := make([]tableKey, 0, len(r.broadcast))
	for k := range r.broadcast {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tableKey) int {
		return strings.Compare(a.schema+"."+a.table, b.schema+"."+b.table)
	})
	for _, k := range keys {
		for c := range r.clusters {
			out = append(out, PhysicalTable{Cluster: c, Schema: k.schema, Table: k.table, Logical: k.schema + "." + k.table})
		}
	}
	return out
}
