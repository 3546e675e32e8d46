package dataplane

import (
	"testing"

	"github.com/sluice-proxy/sluice/cache"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/protocol/fakebackend"
	"github.com/sluice-proxy/sluice/router"
)

// TestCacheablePlan: which statements the result cache may store, by
// their plan alone; when in doubt, none.
func TestCacheablePlan(t *testing.T) {
	r := router.New(100)
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"SELECT COUNT(*) FROM t", true},
		{"SELECT v FROM db1.t WHERE id = 5", true},
		{"SELECT a FROM t JOIN u ON t.id = u.id WHERE x IN (SELECT y FROM w)", true},
		{"WITH c AS (SELECT a FROM t) SELECT * FROM c", true},
		{"SELECT now_col, `now` FROM t", true},
		{"SELECT 1", false},
		{"SELECT NOW() FROM t", false},
		{"SELECT now () FROM t", false},
		{"SELECT CURRENT_TIMESTAMP FROM t", false},
		{"SELECT a FROM t WHERE d < CURDATE()", false},
		{"SELECT RAND() FROM t", false},
		{"SELECT UUID() FROM t", false},
		{"SELECT UUID_SHORT() FROM t", false},
		{"SELECT CONNECTION_ID() FROM t", false},
		{"SELECT CURRENT_USER() FROM t", false},
		{"SELECT USER() FROM t", false},
		{"SELECT @x FROM t", false},
		{"SELECT @@sql_mode FROM t", false},
		{"SELECT NEXT VALUE FOR s", false},
		{"SELECT NEXTVAL(s)", false},
		{"SELECT a FROM t FOR UPDATE", false},
		{"SELECT a FROM t LOCK IN SHARE MODE", false},
		{"SELECT SQL_CALC_FOUND_ROWS a FROM t", false},
		{"SELECT a INTO @x FROM t", false},
		{"SELECT f(a) FROM t", false},
		{"SELECT a FROM t; SELECT b FROM u", false},
		{"SELECT LAST_INSERT_ID() FROM t", false},
		{"SELECT FOUND_ROWS() FROM t", false},
		{"SELECT GET_LOCK('x', 1) FROM t", false},
		{"SELECT SLEEP(1) FROM t", false},
		{"SELECT LOAD_FILE('/etc/passwd') FROM t", false},
		{"/* sluice:master */ SELECT a FROM t", false},
		{"SHOW TABLES", false},
		{"INSERT INTO t VALUES (1)", false},
		{"SELECT a FROM t WHERE", false},
	} {
		if got := cacheablePlan(r.Classify(tc.sql)); got != tc.want {
			t.Errorf("%s: cacheable %v, want %v", tc.sql, got, tc.want)
		}
	}
}

// TestMayWrite: what begins a write on the cache's counters.
func TestMayWrite(t *testing.T) {
	r := router.New(100)
	for _, tc := range []struct {
		sql  string
		want bool
	}{
		{"SELECT a FROM t", false},
		{"INSERT INTO t VALUES (1)", true},
		{"DELETE FROM t", true},
		{"ALTER TABLE t ADD c INT", true},
		{"SELECT f(a) FROM t", true}, // a stored function may write
		{"SET @x = f()", true},
		{"CALL p()", true},
		{"BEGIN", false},
		// XA COMMIT may make another session's prepared branch visible.
		{"XA COMMIT 'x'", true},
		{"XA START 'x'", false},
		{"XA PREPARE 'x'", false},
		{"xa rollback 'x'", true},
		{"USE db", false},
		{"SET NAMES utf8mb4", false},
	} {
		if got := mayWrite(r.Classify(tc.sql), false); got != tc.want {
			t.Errorf("%s: mayWrite %v, want %v", tc.sql, got, tc.want)
		}
	}
}

// TestWritesInFlight: a write begins on the cache's counters before it is
// sent and ends when its transaction does (at once in autocommit, at
// COMMIT inside one), so no read stores meanwhile; without a catalog of
// the master's views sluice cannot tell a table from a view, and the
// global counter, which every entry depends on, takes the write.
func TestWritesInFlight(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	const auto = protocol.StatusAutocommit
	fc.master.OnQuery("BEGIN", fakebackend.Result{Status: auto | protocol.StatusInTrans})
	fc.master.OnQuery("COMMIT", fakebackend.Result{Status: auto})
	fc.master.OnPattern("^INSERT", fakebackend.OK(1, 0))
	g := fc.env.Cache().V.Global()
	w0 := g.Load()

	fc.query("INSERT INTO db.t VALUES (1)")
	if w := g.Load(); cache.Pending(w) != 0 || w == w0 {
		t.Fatalf("after an autocommit INSERT: word %x (was %x), want changed with nothing in flight", w, w0)
	}
	fc.query("BEGIN")
	w1 := g.Load()
	fc.query("INSERT INTO db.t VALUES (2)")
	fc.query("INSERT INTO db.t VALUES (3)")
	if w := g.Load(); cache.Pending(w) != 1 {
		t.Fatalf("inside a transaction that wrote twice: %d writes in flight, want 1", cache.Pending(w))
	}
	fc.query("COMMIT")
	if w := g.Load(); cache.Pending(w) != 0 || w == w1 {
		t.Fatalf("after COMMIT: word %x, want changed with nothing in flight", w)
	}
	// A session that ends inside a transaction ends its writes too.
	fc.query("BEGIN")
	fc.query("INSERT INTO db.t VALUES (4)")
	fc.s.close()
	if w := g.Load(); cache.Pending(w) != 0 {
		t.Fatalf("after the session ended: %d writes in flight", cache.Pending(w))
	}
}

// TestCacheCatalogNames: a view is found by its name and, for a server
// with lower_case_table_names = 1 (names stored in lower case), by the
// statement's name in lower case; the catalog covers only the clusters
// it was read from.
func TestCacheCatalogNames(t *testing.T) {
	c := &objectCatalog{def: 0, order: []int{0}, from: []*health.Objects{{}, nil},
		parts: []map[health.ObjectKey]*catalogEntry{{health.ObjectKeyOf("app", "v", health.KindView): {}}, nil}, known: true}
	for _, tc := range []struct {
		db, name string
		want     bool
	}{
		{"app", "v", true},
		{"app", "V", true},
		{"APP", "v", true},
		{"app", "t", false},
		{"other", "v", false},
	} {
		if got := mayBeView(cacheViews{cat: c}, tc.db, tc.name); got != tc.want {
			t.Errorf("%s.%s: may be a view %v, want %v", tc.db, tc.name, got, tc.want)
		}
	}
	if !c.covers(0) || c.covers(1) || c.covers(2) {
		t.Errorf("covers: cluster 0 %v, 1 %v, 2 %v; want only 0", c.covers(0), c.covers(1), c.covers(2))
	}
}

// TestNoteWritesStaleCatalog: a write names its table's counter while the
// catalog of views holds, and the global counter while a DDL that may
// create a view runs or ran since the probes read the catalog (the name
// may be a view just created) and on a cluster the catalog is not read
// from.
func TestNoteWritesStaleCatalog(t *testing.T) {
	e := offlineServer(t, "", 1)
	snap := e.topo.Current()
	e.objects.Store(&objectCatalog{def: 0, order: []int{0}, from: make([]*health.Objects, len(snap.Clusters)),
		parts: make([]map[health.ObjectKey]*catalogEntry, len(snap.Clusters)), known: true})
	e.objects.Load().from[0] = &health.Objects{}
	s := withLegs(&Session{env: e})
	s.cluster = snap.Clusters[0]
	plan := e.router.Classify("UPDATE t SET a = 1 WHERE id = 2")
	wrote := func() *cache.Counter {
		t.Helper()
		s.noteWrites(plan, false, "app")
		defer s.endWrites(true)
		if len(s.cw.writes) != 1 {
			t.Fatalf("%d counters begun, want 1", len(s.cw.writes))
		}
		return s.cw.writes[0]
	}
	if k := wrote(); k != e.cache.V.Of("app", "t") {
		t.Fatal("with a fresh catalog the write did not name app.t's counter")
	}
	e.catalogDDLs.Add(1)
	if k := wrote(); k != e.cache.V.Global() {
		t.Fatal("while a DDL that may create a view runs, the write named a table's counter")
	}
	e.catalogDDLs.Add(-1)
	s.clusterIdx = 1
	if k := wrote(); k != e.cache.V.Global() {
		t.Fatal("on a cluster the catalog is not read from, the write named a table's counter")
	}
}
