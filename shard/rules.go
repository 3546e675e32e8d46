package shard

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"

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
	// to tell whether a text the parser rejects may name one.
	names []string
	ids   *IDGenerator
	cache templateCache
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
		r.names = append(r.names, k.table)
	}
	for i, b := range cfg.Broadcast {
		k := tableKey{strings.ToLower(b.Schema), strings.ToLower(b.Table)}
		if _, dup := r.sharded[k]; dup {
			return nil, fmt.Errorf("shard: broadcast[%d] (%s.%s): table is also sharded", i, b.Schema, b.Table)
		}
		r.broadcast[k] = true
		r.names = append(r.names, k.table)
	}
	return r, nil
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

// mayName reports whether sql may name a sharded or broadcast table: a
// case-insensitive search for their names, for texts the parser rejects.
func (r *Rules) mayName(sql string) bool {
	l := strings.ToLower(sql)
	for _, n := range r.names {
		if strings.Contains(l, n) {
			return true
		}
	}
	return false
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
