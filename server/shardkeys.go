package server

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/shard"
	"go.uber.org/zap"
)

// shardKeyState is the Server's cache of collation weight tables, learnt
// once per collation from a master (they are the server's, not the
// configuration's, so a reload keeps them).
type shardKeyState struct {
	mu      sync.Mutex
	weights map[string]*shard.Weights
}

// shardKeyRetry is how long the proxy waits before asking the masters
// again about key columns it could not learn; the wait doubles up to
// shardKeyRetryMax, so a table that stays missing costs little.
const (
	shardKeyRetry    = 3 * time.Second
	shardKeyRetryMax = time.Minute
)

// shardWeightsTimeout bounds the queries that learn a collation's weights.
const shardWeightsTimeout = 30 * time.Second

// errWeightsDiffer marks weights the server gave that are not one weight
// per character: a property of the collation, not a transient failure, so
// the rule is refused.
var errWeightsDiffer = errors.New("the collation's weights are not one per character")

// learnShardKeys asks the masters about the key columns of rules, hands
// each to the rules, logs rules refused because of them, and returns the
// rules it could not settle (a master unreachable, a table that exists
// on no master, or a collation's weights the server did not give in time).
func (srv *Server) learnShardKeys(ctx context.Context, rules *shard.Rules, quiet bool) (unsettled []string) {
	lookups := rules.KeyLookups()
	if len(lookups) == 0 {
		return nil
	}
	names := rules.Clusters()
	snap := srv.topo.Current()
	a := &keyColumnAnswers{
		found:  map[keyTable]shard.KeyColumn{},
		failed: map[int]error{},
		conns:  map[int]*health.ControlConn{},
	}
	defer a.close()
	srv.askKeyColumns(ctx, snap, names, keyColumnTuples(lookups), a)
	for _, l := range lookups {
		if srv.settleKeyColumn(rules, l, names, a) {
			unsettled = append(unsettled, l.Logical)
		}
	}
	if len(a.failed) > 0 && !quiet {
		errs := make([]string, 0, len(a.failed))
		for _, e := range a.failed {
			errs = append(errs, e.Error())
		}
		srv.log.Warn("could not read the shard key columns' types from every master; asking again",
			zap.Strings("errors", errs))
	}
	return unsettled
}

// keyTable names one physical table on one cluster, in lower case as the
// masters' answers are matched case-insensitively.
type keyTable struct {
	cluster       int
	schema, table string
}

// keyColumnAnswers is what the masters said about the key columns. The
// connections stay open until the rules are settled because a collation's
// weights are learnt over them.
type keyColumnAnswers struct {
	found  map[keyTable]shard.KeyColumn
	failed map[int]error // by cluster: its master could not be asked
	conns  map[int]*health.ControlConn
}

func (a *keyColumnAnswers) close() {
	for _, cc := range a.conns {
		cc.Close()
	}
}

// keyColumnTuples returns, by cluster, the (schema, table, column) tuples
// of every rule's key column there as SQL literals, so each master is asked
// one question for all its rules.
func keyColumnTuples(lookups []shard.KeyLookup) map[int][]string {
	byCluster := map[int][]string{}
	quote := func(v string) string {
		return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(v) + "'"
	}
	for _, l := range lookups {
		for _, pt := range l.Tables {
			byCluster[pt.Cluster] = append(byCluster[pt.Cluster],
				"("+quote(pt.Schema)+","+quote(pt.Table)+","+quote(l.Column)+")")
		}
	}
	return byCluster
}

// askKeyColumns asks the master of each cluster in byCluster about its
// tuples and records the answers, or why the master could not answer, in a.
func (srv *Server) askKeyColumns(ctx context.Context, snap *health.Snapshot, names []string, byCluster map[int][]string, a *keyColumnAnswers) {
	for ci, tuples := range byCluster {
		c := snap.Cluster(names[ci])
		if c == nil || c.Master == nil {
			a.failed[ci] = fmt.Errorf("cluster %s has no master", names[ci])
			continue
		}
		addr := c.Master.Address
		cc, err := health.Dial(ctx, addr, srv.failover.credentials(c.Name, addr))
		if err != nil {
			a.failed[ci] = fmt.Errorf("cluster %s master %s: %w", c.Name, addr, err)
			continue
		}
		a.conns[ci] = cc
		q := "SELECT TABLE_SCHEMA, TABLE_NAME, DATA_TYPE, COLUMN_TYPE, IFNULL(COLLATION_NAME, ''), IFNULL(CHARACTER_MAXIMUM_LENGTH, 0) " +
			"FROM information_schema.COLUMNS WHERE (TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME) IN (" + strings.Join(tuples, ",") + ")"
		rows, err := cc.Rows(ctx, q)
		if err != nil {
			a.failed[ci] = fmt.Errorf("cluster %s master %s: %w", c.Name, addr, err)
			continue
		}
		for _, r := range rows {
			n, _ := strconv.ParseInt(r[5], 10, 64)
			a.found[keyTable{ci, strings.ToLower(r[0]), strings.ToLower(r[1])}] = shard.KeyColumn{
				DataType: strings.ToLower(r[2]), ColumnType: strings.ToLower(r[3]), Collation: strings.ToLower(r[4]), MaxChars: n}
		}
	}
}

// settleKeyColumn hands rule l the key column its physical tables agree
// on, with the collation's weights when they can be learnt, or refuses the
// rule when the tables disagree. It reports whether l stays unsettled: no
// master knew its tables, a master could not be asked, or the weights were
// not given in time.
func (srv *Server) settleKeyColumn(rules *shard.Rules, l shard.KeyLookup, names []string, a *keyColumnAnswers) (unsettled bool) {
	have, where, src, pending := a.columnsOf(l, names)
	if len(have) == 0 {
		return true
	}
	kc, differ := agreedKeyColumn(have)
	if differ {
		why := "the key column's type or collation differs between physical tables (" + strings.Join(where, "; ") +
			"), so equal keys could be placed differently; make them equal on every cluster and RELOAD CONFIG"
		rules.RefuseKey(l.Logical, why)
		srv.log.Error("shard rule refused: its statements get ERR 1235", zap.String("rule", l.Logical), zap.String("reason", why))
		return false
	}
	w, ok := srv.keyWeights(l, kc, a.conns[src])
	if !ok {
		return true
	}
	if err := rules.SetKeyColumn(l.Logical, kc, w); err != nil {
		srv.log.Error("shard rule refused: its statements get ERR 1235", zap.String("rule", l.Logical), zap.Error(err))
	}
	return pending
}

// columnsOf returns the key columns the masters gave for l's physical
// tables, each described for a log line in where, the cluster of the first
// (src, -1 if none), and whether a table's master could not be asked.
func (a *keyColumnAnswers) columnsOf(l shard.KeyLookup, names []string) (have []shard.KeyColumn, where []string, src int, pending bool) {
	src = -1
	for _, pt := range l.Tables {
		if a.failed[pt.Cluster] != nil {
			pending = true
			continue
		}
		kc, ok := a.found[keyTable{pt.Cluster, strings.ToLower(pt.Schema), strings.ToLower(pt.Table)}]
		if !ok {
			continue
		}
		if src < 0 {
			src = pt.Cluster
		}
		have = append(have, kc)
		where = append(where, names[pt.Cluster]+"."+pt.Table+": "+kc.String())
	}
	return have, where, src, pending
}

// agreedKeyColumn returns the first of have, its length cut to the
// shortest positive length of the others, and whether any of have stores or
// compares keys differently: the shortest length bounds the keys every
// physical table can hold.
func agreedKeyColumn(have []shard.KeyColumn) (kc shard.KeyColumn, differ bool) {
	kc = have[0]
	for _, o := range have[1:] {
		differ = differ || !sameKeyColumn(kc, o)
		if o.MaxChars > 0 && o.MaxChars < kc.MaxChars {
			kc.MaxChars = o.MaxChars
		}
	}
	return kc, differ
}

// keyWeights returns the weights of kc's collation learnt over cc, nil for
// a collation that needs none or does not weigh one character at a time.
// It reports false when the server did not give them, so l stays unsettled.
func (srv *Server) keyWeights(l shard.KeyLookup, kc shard.KeyColumn, cc *health.ControlConn) (*shard.Weights, bool) {
	var w *shard.Weights
	if cs, ok := shard.WeighedCharset(kc.Collation); ok {
		// The weights are learnt once per collation with one query
		// over 63,488 characters, which a loaded server may answer
		// slower than a health probe: it gets a deadline of its own.
		wctx, cancel := context.WithTimeout(srv.ctx, shardWeightsTimeout)
		var err error
		w, err = srv.collationWeights(wctx, cc, l.Schema, cs, kc.Collation)
		cancel()
		if err != nil && !errors.Is(err, errWeightsDiffer) {
			// A failed or slow query says nothing about the
			// collation: the rule stays unsettled (reads scatter,
			// INSERTs are refused) and is asked again.
			srv.log.Warn("could not learn a collation's weights from the server; asking again", zap.String("rule", l.Logical),
				zap.String("collation", kc.Collation), zap.Error(err))
			return nil, false
		}
		if err != nil {
			srv.log.Error("a collation does not weigh one character at a time on the server", zap.String("rule", l.Logical),
				zap.String("collation", kc.Collation), zap.Error(err))
			w = nil
		}
	}
	return w, true
}

// sameKeyColumn reports whether two clusters' key columns store and
// compare keys alike: the same type, signedness and collation (display
// widths and lengths may differ).
func sameKeyColumn(a, b shard.KeyColumn) bool {
	return a.DataType == b.DataType && a.Collation == b.Collation &&
		strings.Contains(a.ColumnType, "unsigned") == strings.Contains(b.ColumnType, "unsigned")
}

// collationWeights returns the weight table of collation (of charset cs),
// learnt from the server of cc with one query over the sequence engine in
// schema, and checked: every character's weight is one 16-bit unit, the
// character survives the conversion to cs, and strings weigh the sum of
// their characters.
func (srv *Server) collationWeights(ctx context.Context, cc *health.ControlConn, schema, cs, collation string) (*shard.Weights, error) {
	srv.shardKeys.mu.Lock()
	defer srv.shardKeys.mu.Unlock()
	if w := srv.shardKeys.weights[collation]; w != nil {
		return w, nil
	}
	if cc == nil {
		return nil, fmt.Errorf("no master connection")
	}
	db := "`" + strings.ReplaceAll(schema, "`", "``") + "`"
	conv := "CONVERT(CHAR(seq USING utf32) USING " + cs + ")"
	rows, err := cc.Rows(ctx, "SELECT seq, HEX(WEIGHT_STRING("+conv+" COLLATE "+collation+")), HEX(CONVERT("+conv+" USING utf32)) FROM "+
		db+".seq_0_to_65535 WHERE seq < 55296 OR seq > 57343")
	if err != nil {
		return nil, err
	}
	if len(rows) != 0x10000-0x800 {
		// A server setting (sql_select_limit) can cut the answer short.
		return nil, fmt.Errorf("%d characters weighed, want %d", len(rows), 0x10000-0x800)
	}
	w := shard.NewWeights(collation)
	for _, r := range rows {
		cp, err := strconv.Atoi(r[0])
		if err != nil {
			return nil, err
		}
		if r[2] != fmt.Sprintf("%08X", cp) {
			continue // the character does not survive the conversion
		}
		b, err := hex.DecodeString(r[1])
		if err != nil {
			return nil, err
		}
		w.Set(cp, b)
	}
	if cs == "utf8mb4" {
		rows, err := cc.Rows(ctx, "SELECT HEX(WEIGHT_STRING("+conv+" COLLATE "+collation+")) w FROM "+
			db+".seq_65536_to_1114111 GROUP BY w")
		if err != nil {
			return nil, err
		}
		if len(rows) == 1 {
			if b, err := hex.DecodeString(rows[0][0]); err == nil {
				w.SetSupplementary(b)
			}
		}
	}
	samples := []string{"Aa zZ", "ßsSs ẞ", "Éeé ÀÅåa", "Straße strasse", "ǅǆǄ ﬁ fi", "Ωω 日本 한국어 ١٢٣", "x  \t "}
	if cs == "latin1" {
		samples = []string{"Aa zZ", "ßsSs", "Éeé ÀÅåa äÄ", "Straße strasse", "æÆ øØ ÿ € Œœ", "x  \t "}
	}
	for _, sample := range samples {
		rows, err := cc.Rows(ctx, "SELECT HEX(WEIGHT_STRING(CONVERT(_utf8mb4 X'"+hex.EncodeToString([]byte(sample))+"' USING "+cs+") COLLATE "+collation+"))")
		if err != nil {
			return nil, err
		}
		b, err := hex.DecodeString(rows[0][0])
		if err != nil {
			return nil, err
		}
		if err := w.Check(sample, b); err != nil {
			return nil, fmt.Errorf("%w: %w", errWeightsDiffer, err)
		}
	}
	if srv.shardKeys.weights == nil {
		srv.shardKeys.weights = map[string]*shard.Weights{}
	}
	srv.shardKeys.weights[collation] = w
	return w, nil
}

// settleShardKeys learns the key columns of rules now (bounded by the
// health timeout, so a master that is down delays start-up or a reload by
// that much at most; a collation's weights, learnt once, by
// shardWeightsTimeout), and keeps asking in the background about those it
// could not settle while rules are the running ones.
func (srv *Server) settleShardKeys(rules *shard.Rules) {
	if rules == nil {
		return
	}
	budget := 2*srv.config().Health.Timeout.Duration + time.Second
	ctx, cancel := context.WithTimeout(srv.ctx, budget)
	left := srv.learnShardKeys(ctx, rules, false)
	cancel()
	if len(left) == 0 {
		return
	}
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		wait := shardKeyRetry
		t := time.NewTimer(wait)
		defer t.Stop()
		for len(left) > 0 {
			select {
			case <-srv.ctx.Done():
				return
			case <-t.C:
			}
			wait = min(2*wait, shardKeyRetryMax)
			t.Reset(wait)
			if srv.shards() != rules {
				return // replaced by a reload, which settles its own
			}
			ctx, cancel := context.WithTimeout(srv.ctx, budget)
			left = srv.learnShardKeys(ctx, rules, true)
			cancel()
		}
		srv.log.Info("shard key columns learnt from every master")
	}()
}

// MissingShardTables asks every cluster's master which of the physical
// tables the shard and broadcast rules expect it does not have, and returns
// them as "cluster: schema.table (rule schema.table)". Statements that reach
// a missing table fail with the server's ERR 1146 naming it; Start logs the
// list once so a DBA sees a rule that names the wrong table before the first
// client does. A master that cannot be asked is reported in the error.
func (srv *Server) MissingShardTables(ctx context.Context) ([]string, error) {
	if srv.shards() == nil {
		return nil, nil
	}
	names := srv.shards().Clusters()
	type key struct {
		cluster int
		schema  string
	}
	have := make(map[key]map[string]bool)
	var missing []string
	var errs []error
	snap := srv.topo.Current()
	for _, pt := range srv.shards().PhysicalTables() {
		k := key{pt.Cluster, strings.ToLower(pt.Schema)}
		tables, asked := have[k]
		if !asked {
			c := snap.Cluster(names[pt.Cluster])
			if c == nil {
				continue
			}
			addr := c.Master.Address
			list, err := func() ([]string, error) {
				cc, err := health.Dial(ctx, addr, srv.failover.credentials(c.Name, addr))
				if err != nil {
					return nil, err
				}
				defer cc.Close()
				return cc.Tables(ctx, pt.Schema)
			}()
			if err != nil {
				errs = append(errs, fmt.Errorf("cluster %s master %s: %w", c.Name, addr, err))
				tables = nil
			} else {
				tables = make(map[string]bool, len(list))
				for _, t := range list {
					tables[strings.ToLower(t)] = true
				}
			}
			have[k] = tables
		}
		if tables != nil && !tables[strings.ToLower(pt.Table)] {
			missing = append(missing, fmt.Sprintf("%s: %s.%s (rule %s)", names[pt.Cluster], pt.Schema, pt.Table, pt.Logical))
		}
	}
	return missing, errors.Join(errs...)
}

// checkShardTables logs the physical tables the rules expect but the
// clusters lack.
func (srv *Server) checkShardTables() {
	ctx, cancel := context.WithTimeout(srv.ctx, 4*srv.config().Health.Timeout.Duration+5*time.Second)
	defer cancel()
	missing, err := srv.MissingShardTables(ctx)
	if err != nil {
		srv.log.Warn("could not check the physical tables of the shard rules", zap.Error(err))
	}
	if len(missing) > 0 {
		const show = 20
		srv.log.Error("physical tables of shard rules are missing; statements that reach them fail with ERR 1146",
			zap.Int("missing", len(missing)), zap.Strings("tables", missing[:min(len(missing), show)]))
	}
}
