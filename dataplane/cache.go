package dataplane

import (
	"bytes"
	"encoding/binary"
	"strings"
	"time"
	"unique"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-proxy/sluice/cache"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// The result cache, from the session's side. A statement a rule gives a
// cache_ttl is answered from the cache when it is cacheable (cacheRefs)
// and a valid answer is stored under its key (cacheKey); on a miss it runs
// on the master with its answer teed, and the answer is stored if no
// table it read changed from the moment it was sent (cache.Finish). Every
// statement that may change data begins a write on the counters of the
// tables it names before it is sent (noteWrites) and ends it once the
// session is outside a transaction again (endWrites): a write sluice
// acknowledged is never older than what the cache serves.

// keptBuffer is the largest tee or key buffer a session keeps between
// statements.
const keptBuffer = 64 << 10

// flightWait bounds how long a miss waits for another session's query of
// the same key before it runs its own.
const flightWait = 30 * time.Second

// cacheState is a session's part of the result cache. It belongs to the
// session.
type cacheState struct {
	// writes are the counters of the writes the session began and has not
	// ended: those of its open transaction, or of the statement just run.
	writes []*cache.Counter
	// recent are the tables the session wrote lately, for
	// own_writes_window.
	recent []recentWrite
	// key and tee are reused buffers; refs the counters of the statement
	// being looked up.
	key  []byte
	tee  protocol.Tee
	refs []cache.Ref
}

// recentWrite is a table the session wrote and when.
type recentWrite struct {
	c  *cache.Counter
	at time.Duration
}

// Cache is the result cache sessions fill and read; never nil.
func (e *Env) Cache() *cache.Cache { return e.cache }

// newCache makes the result cache of cfg and its metrics.
func (e *Env) newCache(cfg *conf.Config) {
	e.cache = cache.New(cfg.Cache.MaxMemory, cfg.Cache.MaxEntry)
	if e.metrics == nil || e.metrics.Reg == nil {
		return
	}
	c := e.cache
	counter := func(name, help string, v func(cache.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(c.Stats())) })
	}
	e.metrics.Reg.MustRegister(
		counter("sluice_cache_hits_total", "Statements answered from the result cache.", func(s cache.Stats) uint64 { return s.Hits }),
		counter("sluice_cache_misses_total", "Cacheable statements the result cache had no valid answer for.", func(s cache.Stats) uint64 { return s.Misses }),
		counter("sluice_cache_stores_total", "Answers stored in the result cache.", func(s cache.Stats) uint64 { return s.Stores }),
		counter("sluice_cache_evictions_total", "Result cache entries removed for room or because their cache_ttl passed.", func(s cache.Stats) uint64 { return s.Evictions }),
		counter("sluice_cache_invalidations_total", "Result cache entries removed because a table they read changed (a write, DDL or FLUSH CACHE).", func(s cache.Stats) uint64 { return s.Invalidations }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_cache_bytes", Help: "Bytes the result cache holds, keys and bookkeeping included."},
			func() float64 { return float64(c.Stats().Bytes) }),
	)
}

// mayWrite reports whether a statement of plan may change data, as far as
// the result cache is concerned.
func mayWrite(plan *router.Plan, doubt bool) bool {
	switch plan.Kind {
	case router.KindWrite:
		return true
	case router.KindUse:
		return false
	case router.KindTxn:
		// XA COMMIT of a branch another session prepared makes rows
		// visible that no write of this session named: it counts as a
		// write of unknown tables (so does XA ROLLBACK, to be safe). Not
		// XA START: its global write would stay in flight, keeping every
		// entry from being stored or served, until the branch ends.
		return xaEnd(plan)
	}
	// A read or SET that calls a stored function may write through it.
	return doubt || plan.Call || len(plan.Funcs) > 0
}

// isXA reports an XA statement (XA START, END, PREPARE, COMMIT,
// ROLLBACK, RECOVER); the digest quotes the word.
func isXA(plan *router.Plan) bool {
	return plan.Kind == router.KindTxn && (strings.HasPrefix(plan.Digest, "`xa` ") || strings.HasPrefix(plan.Digest, "xa "))
}

// xaEnd reports XA COMMIT or XA ROLLBACK.
func xaEnd(plan *router.Plan) bool {
	d := plan.Digest
	return isXA(plan) && (strings.HasPrefix(d, "`xa` commit") || strings.HasPrefix(d, "`xa` rollback") ||
		strings.HasPrefix(d, "xa commit") || strings.HasPrefix(d, "xa rollback"))
}

// noteWrites begins a write on the counter of every table the statement
// of plan may change, before it is sent; on the global counter when sluice
// cannot name them for sure. Unqualified names are in schema: the
// session's current one for a text statement, the one a prepared
// statement was prepared in for its executions. A DDL also drops the
// entries of its tables. For a read it costs a switch.
func (s *Session) noteWrites(plan *router.Plan, doubt bool, schema string) {
	c := s.env.cache
	if c == nil || !mayWrite(plan, doubt) {
		return
	}
	start := len(s.cw.writes)
	known := !doubt && !plan.Opaque && !plan.Multi && plan.ParseErr == nil && !plan.Call && len(plan.Funcs) == 0 &&
		plan.Access != nil && !plan.Access.Unknown && plan.Access.Execute == "" && plan.Access.Inner == nil &&
		plan.Kind != router.KindTxn
	cat, ok := s.cacheCatalog()
	if !ok {
		known = false // a name may be a view
	}
	for i := 0; known && i < len(plan.Access.Needs); i++ {
		n := &plan.Access.Needs[i]
		switch n.Level {
		case router.NeedTable, router.NeedColumn:
			db := n.DB
			if db == "" {
				db = schema
			}
			if db == "" || mayBeView(cat, db, n.Table) {
				known = false
				break
			}
			k := c.V.Of(db, n.Table)
			if !containsCounter(s.cw.writes[start:], k) {
				s.cw.writes = append(s.cw.writes, k)
			}
		case router.NeedRoutine:
			if !n.Creates {
				known = false
			}
		default:
			// A database, a global privilege: not one table.
			known = false
		}
	}
	if !known || len(s.cw.writes) == start {
		// Tables unknown, or none named (EXECUTE of a PREPAREd text,
		// DO f()): everything may have changed.
		s.cw.writes = append(s.cw.writes[:start], c.V.Global())
	}
	// A table the open transaction already writes keeps its one write
	// in flight until the transaction ends: no reader stores meanwhile.
	now, n := mono.Now(), start
	for _, k := range s.cw.writes[start:] {
		s.noteRecent(k, now)
		if !containsCounter(s.cw.writes[:start], k) {
			k.Begin()
			s.cw.writes[n] = k
			n++
		}
	}
	clear(s.cw.writes[n:])
	s.cw.writes = s.cw.writes[:n]
	if plan.DDL {
		s.dropCached(plan, known, schema)
	}
}

// cacheViews are the views the result cache may trust for a statement:
// the catalog's on the clusters it is built from, else what the probes
// last read from the master of the session's cluster (a rule's route to
// another cluster). A value: looking it up allocates nothing.
type cacheViews struct {
	cat  *objectCatalog
	objs *health.Objects
}

// cacheCatalog returns the views of the session's cluster, and false
// when they cannot be trusted: none read yet, or a statement that may
// change views runs or ran since its master's probe last read them (a
// view just created would be taken for a table).
func (s *Session) cacheCatalog() (cacheViews, bool) {
	e := s.env
	if c := e.catalog(); c != nil && c.covers(s.clusterIdx) {
		return cacheViews{cat: c}, !e.catalogStale()
	}
	snap := e.topo.Current()
	if s.clusterIdx < 0 || s.clusterIdx >= len(snap.Clusters) || snap.Clusters[s.clusterIdx].Master == nil {
		return cacheViews{}, false
	}
	st := snap.Clusters[s.clusterIdx].Master.Status()
	if st == nil || st.Objects == nil || st.ObjectsAt.IsZero() ||
		e.catalogDDLs.Load() > 0 || e.ddlAt.Load() > st.ObjectsAt.UnixNano() {
		return cacheViews{}, false
	}
	return cacheViews{objs: st.Objects}, true
}

// isView reports whether db.name is one of v's views.
func (v cacheViews) isView(db, name string) bool {
	if v.cat != nil {
		return v.cat.Object(db, name, 't') != nil
	}
	return v.objs.Find(db, name, health.KindView) != nil
}

// mayBeView reports whether db.name may be one of cat's views: by its name, or
// by its name in lower case, as a server with lower_case_table_names = 1
// stores it (on one that compares case, a table whose lower-case name is a
// view's is then taken for a view too: its writes count as unknown tables,
// its reads are not cached). Only a name with an upper-case letter costs
// an allocation.
func mayBeView(cat cacheViews, db, name string) bool {
	if cat.isView(db, name) {
		return true
	}
	if !hasUpper(db) && !hasUpper(name) {
		return false
	}
	return cat.isView(strings.ToLower(db), strings.ToLower(name))
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// dropCached removes the entries a DDL's tables invalidate (all of them
// when its tables are not known), so they do not wait for eviction.
func (s *Session) dropCached(plan *router.Plan, known bool, schema string) {
	if !known {
		s.env.cache.Flush()
		return
	}
	for _, n := range plan.Access.Needs {
		if n.Level == router.NeedTable {
			db := n.DB
			if db == "" {
				db = schema
			}
			s.env.cache.Drop(db, n.Table)
		}
	}
}

func containsCounter(l []*cache.Counter, k *cache.Counter) bool {
	for _, c := range l {
		if c == k {
			return true
		}
	}
	return false
}

// noteRecent records that the session wrote k at now, for
// own_writes_window.
func (s *Session) noteRecent(k *cache.Counter, now time.Duration) {
	for i := range s.cw.recent {
		if s.cw.recent[i].c == k {
			s.cw.recent[i].at = now
			return
		}
	}
	window := s.env.config().Cache.OwnWritesWindow.Duration
	// Forget what is out of the window before growing.
	kept := s.cw.recent[:0]
	for _, r := range s.cw.recent {
		if now-r.at < window {
			kept = append(kept, r)
		}
	}
	s.cw.recent = append(kept, recentWrite{c: k, at: now})
}

// endWrites ends the writes the session began once no transaction holds
// them: after an autocommit statement, a COMMIT or ROLLBACK, a lost
// connection, the session's end.
func (s *Session) endWrites(force bool) {
	// The counters are the Env's cache's: s.cw.writes is empty without one.
	if len(s.cw.writes) == 0 || (!force && s.txOpen()) {
		return
	}
	for _, k := range s.cw.writes {
		k.End()
	}
	clear(s.cw.writes)
	s.cw.writes = s.cw.writes[:0]
}

// cacheBypassPins are the session states under which a statement's answer
// may differ from another session's: a temporary table may shadow a
// table, LOCK TABLES limits what may be read, a role changes grants, and
// untracked state may be anything. (User variables, SQL-level PREPARE and
// SQL_CALC_FOUND_ROWS do not matter to a statement that names none.)
const cacheBypassPins = router.PinTempTable | router.PinLocks | router.PinUntracked | router.PinRole

// systemSchemas change without a write through sluice: never cached.
var systemSchemas = map[string]bool{"information_schema": true, "performance_schema": true, "mysql": true, "sys": true}

// cacheRefs decides whether the statement of plan, whose unqualified
// tables are in schema, may be answered from the cache in the session's
// present state and, if so, fills s.cw.refs with the counters of the
// tables it reads (the global one first) and their words now. When in
// doubt: not cacheable.
func (s *Session) cacheRefs(plan *router.Plan, schema string) bool {
	if !cacheablePlan(plan) || s.pins&cacheBypassPins != 0 || s.holdWarnings || s.txBegin != "" || s.inTransaction() ||
		s.env.shards() != nil || s.lexDoubt(plan) {
		return false
	}
	for i := range s.vars {
		if s.vars[i].Name == "autocommit" {
			// Every statement would be in a transaction of its own.
			return false
		}
	}
	cat, ok := s.cacheCatalog()
	if !ok {
		return false
	}
	c := s.env.cache
	g := c.V.Global()
	s.cw.refs = append(s.cw.refs[:0], cache.Ref{C: g})
	for i := range plan.Access.Needs {
		n := &plan.Access.Needs[i]
		switch n.Level {
		case router.NeedTable, router.NeedColumn:
		default:
			return false
		}
		db := n.DB
		if db == "" {
			db = schema
		}
		if db == "" || systemSchemas[strings.ToLower(db)] || mayBeView(cat, db, n.Table) {
			return false
		}
		k := c.V.Of(db, n.Table)
		if !containsRef(s.cw.refs, k) {
			s.cw.refs = append(s.cw.refs, cache.Ref{C: k})
		}
	}
	if len(s.cw.refs) == 1 {
		return false // names no table
	}
	if window := s.env.config().Cache.OwnWritesWindow.Duration; window > 0 {
		now := mono.Now()
		for _, r := range s.cw.recent {
			if now-r.at < window && (r.c == g || containsRef(s.cw.refs, r.c)) {
				return false
			}
		}
	}
	for i := range s.cw.refs {
		s.cw.refs[i].W = s.cw.refs[i].C.Load()
	}
	return true
}

func containsRef(refs []cache.Ref, k *cache.Counter) bool {
	for i := range refs {
		if refs[i].C == k {
			return true
		}
	}
	return false
}

// cacheablePlan reports whether a statement of plan is, by its text, a
// deterministic SELECT of tables whose answer may be cached: fully parsed,
// one statement, reading no session or connection state, calling no
// stored function and nothing whose answer changes by itself (NOW(),
// RAND(), UUID(), sequences, locks, @@variables, @variables).
func cacheablePlan(plan *router.Plan) bool {
	if plan.Kind != router.KindRead || plan.ParseErr != nil || plan.Multi || plan.Opaque || plan.Scoped != nil ||
		plan.Local != router.LocalNone || len(plan.Funcs) > 0 || plan.FollowsPrevious || plan.Pins != 0 ||
		plan.Call || plan.DDL || plan.NoTables || plan.Access == nil || plan.Access.Unknown || plan.Hint == router.HintMaster {
		return false
	}
	d := plan.Digest
	if !strings.HasPrefix(d, "select ") && !strings.HasPrefix(d, "with ") && !strings.HasPrefix(d, "( select ") {
		return false
	}
	if strings.IndexByte(d, '@') >= 0 {
		return false
	}
	// Walk the digest's words: a bare keyword or a call of a function
	// whose answer is not a function of the tables refuses.
	for rest := d; rest != ""; {
		var w string
		w, rest, _ = strings.Cut(rest, " ")
		name := strings.Trim(w, "`")
		if volatileKeywords[name] && name == w {
			return false
		}
		if strings.HasPrefix(rest, "( ") && volatileFuncs[name] {
			return false
		}
	}
	return true
}

// volatileFuncs are built-in functions whose answer may change without a
// write to the tables (time, randomness, the connection, locks, sequences,
// files, the server's state). Names are as the digest prints them.
var volatileFuncs = setOf("now", "sysdate", "curdate", "curtime", "current_date", "current_time", "current_timestamp",
	"localtime", "localtimestamp", "utc_date", "utc_time", "utc_timestamp", "unix_timestamp", "rand", "uuid", "uuid_short",
	"sys_guid", "random_bytes", "connection_id", "current_user", "current_role", "user", "session_user", "system_user",
	"database", "schema", "last_insert_id", "row_count", "found_rows", "sleep", "benchmark", "get_lock", "release_lock",
	"release_all_locks", "is_free_lock", "is_used_lock", "master_pos_wait", "master_gtid_wait", "nextval", "lastval",
	"setval", "load_file", "encrypt", "version", "binlog_gtid_pos", "wsrep_last_seen_gtid", "wsrep_last_written_gtid",
	"wsrep_sync_wait_upto_gtid", "des_encrypt", "get_format_uuid")

// volatileKeywords are the same read without parentheses, and the
// sequence syntax (NEXT VALUE FOR, PREVIOUS VALUE FOR).
var volatileKeywords = setOf("current_timestamp", "current_date", "current_time", "localtime", "localtimestamp",
	"utc_date", "utc_time", "utc_timestamp", "current_user", "current_role", "next", "previous", "lastval", "nextval")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// cacheKey appends to k what an answer depends on besides the tables
// and the statement: the cluster and its master (after a failover the
// new master may lack the old one's last transactions: what the old one
// answered is not reused), the user, the schema, the client's
// capabilities (the packets' form), the connection's collation, every
// session variable the session set (character sets, sql_mode, time_zone,
// …).
func (s *Session) cacheKey(k []byte) []byte {
	k = append(k, s.clusterName()...)
	k = append(k, 0)
	if c := s.env.topo.Current().Clusters[s.clusterIdx]; c.Master != nil {
		k = append(k, c.Master.Address...)
	}
	k = append(k, 0)
	k = append(k, s.user...)
	k = append(k, 0)
	k = append(k, s.schema...)
	k = append(k, 0)
	k = binary.LittleEndian.AppendUint32(k, s.caps)
	k = append(k, s.key.collation)
	if s.key.foundRows {
		k = append(k, 1)
	} else {
		k = append(k, 0)
	}
	for i := range s.vars {
		k = append(k, s.vars[i].SQL...)
		k = append(k, 0)
	}
	return append(k, 0)
}

// cachedQuery answers a COM_QUERY p of plan that a rule caches for ttl:
// from the cache, or by running it on the master and storing its answer.
// done is false when the statement is not cacheable now: the caller runs
// it as usual.
func (s *Session) cachedQuery(plan *router.Plan, p []byte, resp protocol.ResponseKind, ttl time.Duration) (done bool, err error) {
	// A client that allows local files is answered alike: a SELECT never
	// asks for one (an answer that did is not stored), and the key holds
	// the capability flags.
	if (resp != protocol.ResponseResult && resp != protocol.ResponseResultLocalInfile) || !s.env.cache.Enabled() || !s.cacheRefs(plan, s.schema) {
		return false, nil
	}
	s.cw.key = append(s.cacheKey(s.cw.key[:0]), p[1:]...)
	return s.fromCache(plan, s.schema, ttl, func(took func(*BackendConn, protocol.RelayResult)) error {
		return s.forward(router.TargetMaster, p, resp, took)
	})
}

// cachedExecute is cachedQuery for the execution p of prepared statement
// st (parsed as ex): its key holds the statement's text, the schema and
// state it was prepared under and the packet's parameters. An execution
// that opens a cursor, sends long data or runs another text than st's
// (variant) is not cached.
func (s *Session) cachedExecute(st *preparedStmt, p []byte, ex protocol.Execute, variant string, ttl time.Duration) (done bool, err error) {
	if ex.Flags != 0 || variant != "" || len(st.longData) > 0 || !s.env.cache.Enabled() || !s.cacheRefs(st.plan, st.schema) {
		return false, nil
	}
	k := append(s.cacheKey(s.cw.key[:0]), 1)
	k = append(k, st.schema...)
	k = append(k, 0)
	if st.state != (unique.Handle[string]{}) {
		k = append(k, st.state.Value()...)
	}
	k = append(k, 0)
	k = append(k, st.sql...)
	k = append(k, 0)
	k = append(k, st.types...)
	k = append(k, 0)
	s.cw.key = append(k, p[10:]...)
	return s.fromCache(st.plan, st.schema, ttl, func(took func(*BackendConn, protocol.RelayResult)) error {
		return s.executeOn(router.TargetMaster, st, p, ex, variant, took)
	})
}

// fromCache answers a cacheable statement of plan whose key is in
// s.cw.key and whose tables' counters cacheRefs put in s.cw.refs: a hit
// is written to the client; a miss either waits for another session's
// query of the key or leads one, run by run (on the master, never a
// replica: a replica's lag would be stored and served as if it were
// fresh), teeing its answer and storing it when it may be.
func (s *Session) fromCache(plan *router.Plan, schema string, ttl time.Duration,
	run func(took func(*BackendConn, protocol.RelayResult)) error) (done bool, err error) {
	defer s.trimKey()
	c := s.env.cache
	// The rule's ttl now, not the one the entry was stored under, bounds
	// its age: a reload that lowers it shortens entries already stored.
	now := mono.Now()
	a, f, lead := c.GetSince(s.cw.key, int64(now), int64(now-ttl), true)
	if a.Data == nil && f != nil && !lead {
		// Another session runs this query: wait for its answer.
		if s.waitFlight(f) {
			now = mono.Now()
			a = c.Recheck(s.cw.key, int64(now), int64(now-ttl))
		}
		if a.Data == nil {
			return false, nil
		}
	}
	if a.Data != nil {
		return true, s.cacheHit(a)
	}
	landed := false
	defer func() {
		if !landed {
			c.Abandon(f)
		}
	}()
	refs := append([]cache.Ref(nil), s.cw.refs...)
	sent := mono.Now()
	s.cw.tee = protocol.Tee{Buf: s.cw.tee.Buf[:0], Max: int(c.MaxEntry())}
	s.client.SetTee(&s.cw.tee)
	var res protocol.RelayResult
	ran := false
	err = run(func(_ *BackendConn, r protocol.RelayResult) { res, ran = r, true })
	s.client.SetTee(nil)
	if err == nil && ran && storable(&res) && !s.cw.tee.Over {
		c.Finish(f, cache.Entry{Data: bytes.Clone(s.cw.tee.Buf), Rows: res.Rows, Refs: refs,
			Expires: int64(sent + ttl), Sent: int64(sent), Digest: plan.Digest, Tables: tableNames(plan, schema)})
		landed = true
	}
	if cap(s.cw.tee.Buf) > keptBuffer {
		// An idle session keeps no big answer's buffer.
		s.cw.tee.Buf = nil
	}
	return true, err
}

// trimKey drops a big key buffer: an idle session keeps none.
func (s *Session) trimKey() {
	if cap(s.cw.key) > keptBuffer {
		s.cw.key = nil
	}
}

// waitFlight waits, off the session's event loop, for another session's
// query of the same key.
func (s *Session) waitFlight(f *cache.Flight) bool {
	if s.task.Detach() {
		defer s.task.Attach()
	}
	return f.Wait(&s.cmd, flightWait)
}

// storable reports whether an answer may be stored: one result set,
// complete, without warnings, outside a transaction.
func storable(res *protocol.RelayResult) bool {
	return res.Columns && res.Err == nil && res.Warnings == 0 && res.HasStatus && !res.Torn &&
		res.Status&(protocol.StatusMoreResultsExists|protocol.StatusInTrans) == 0 && res.LocalInfileFiles == 0
}

// cacheHit writes a stored answer to the client and takes note of it as
// of a SELECT that ran.
func (s *Session) cacheHit(a cache.Answer) error {
	err := s.client.WriteStored(a.Data)
	s.rec.toClient += int64(len(a.Data))
	s.rec.resultSet = true
	s.answeredLocally(a.Rows)
	return err
}

// tableNames names the tables a plan reads, for SHOW CACHE.
func tableNames(plan *router.Plan, schema string) []string {
	var out []string
	for _, n := range plan.Access.Needs {
		if n.Level != router.NeedTable {
			continue
		}
		db := n.DB
		if db == "" {
			db = schema
		}
		name := db + "." + n.Table
		if !containsString(out, name) {
			out = append(out, name)
		}
	}
	return out
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
