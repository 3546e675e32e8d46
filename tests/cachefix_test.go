package tests

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// The result cache's stale-read holes (issue 26), end to end: each test
// stores an answer under a long cache_ttl, changes the row the way the
// hole allowed, and reads again through another session: an answer
// older than the change fails it. A long ttl makes a missed invalidation
// a stale read for a minute, not a race the test may lose.

// cacheFixRules cache every read of a cache_* table for a minute (ttl),
// on the master.
func cacheFixRules(ttl string) string {
	return `
[[rule]]
name = "cache-long"
pattern = "FROM cache_"
kind = "read"
route = "master"
cache_ttl = "` + ttl + `"
`
}

// cacheFixConfig is the shared topology with cacheFixRules(ttl) and extra
// text.
func cacheFixConfig(ttl, extra string, proxyKeys ...string) string {
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: append([]string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`}, proxyKeys...)}
	text := sandbox.ShardedSluiceConfig(o, env.topo.Auth, []sandbox.NamedTopology{{Name: "main", Topology: env.topo}}, cacheFixRules(ttl)+extra)
	return text + "\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
}

// fixReadV reads v of cache_b's row id on c.
func fixReadV(t *testing.T, c *sql.Conn, id int) int {
	t.Helper()
	var v int
	// Text, not a prepared statement: the text path is what most clients
	// (and CLIENT_LOCAL_FILES) take.
	if err := c.QueryRowContext(ctxT(t), "SELECT v FROM cache_b WHERE id = "+strconv.Itoa(id)).Scan(&v); err != nil {
		t.Fatalf("read cache_b row %d: %v", id, err)
	}
	return v
}

// cachedV reads row id of cache_b on c until a read is a hit (right after
// a DDL that may create a view nothing is cached until the probes read
// the views again): the answer is in the cache.
func cachedV(t *testing.T, srv *server.Server, c *sql.Conn, id int) int {
	t.Helper()
	v := fixReadV(t, c, id)
	pollUntil(t, "a read of cache_b is a hit", func() bool {
		h0, _, _ := cacheStats(t, srv)
		if w := fixReadV(t, c, id); w != v {
			t.Fatalf("two reads of row %d: %d then %d", id, v, w)
		}
		h1, _, _ := cacheStats(t, srv)
		return h1-h0 == 1
	})
	return v
}

// TestCacheFixPreparedWriteAfterUse: a prepared UPDATE runs in the
// schema it was prepared in; executed after USE of another schema it
// still invalidates the answers of the table it changed.
func TestCacheFixPreparedWriteAfterUse(t *testing.T) {
	srv, _, db := cacheSluiceFile(t, cacheFixConfig("60s", ""))
	const other = "cachefix_other"
	mustExec(t, db, "CREATE DATABASE IF NOT EXISTS "+other)
	t.Cleanup(func() { env.topo.Master.Exec(context.Background(), "DROP DATABASE IF EXISTS "+other) })
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS "+other+".cache_b (id INT PRIMARY KEY, v INT NOT NULL)")
	r := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	if v := cachedV(t, srv, r, 0); v != 0 {
		t.Fatalf("row 0 starts at %d", v)
	}
	w := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	st, err := w.PrepareContext(ctxT(t), "UPDATE cache_b SET v = ? WHERE id = 0")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mustExecC(t, w, "USE "+other)
	if _, err := st.ExecContext(ctxT(t), 41); err != nil {
		t.Fatal(err)
	}
	if v := fixReadV(t, r, 0); v != 41 {
		t.Fatalf("after a prepared UPDATE executed under USE %s, the read answers %d, want 41", other, v)
	}
}

// TestCacheFixWriteThroughNewView: an UPDATE through a view created the
// moment before, which the catalog of views may not hold yet, still
// invalidates the answers of the view's base table.
func TestCacheFixWriteThroughNewView(t *testing.T) {
	srv, _, db := cacheSluiceFile(t, cacheFixConfig("60s", ""))
	t.Cleanup(func() {
		env.topo.Master.Exec(context.Background(), "DROP VIEW IF EXISTS "+sandbox.TestDatabase+".cachefix_v")
	})
	r := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	w := conn(t, db)
	for i := range 5 {
		id := 1 + i
		mustExecC(t, w, "DROP VIEW IF EXISTS cachefix_v")
		// The DDL drops cache_b's entries: the read is stored after it.
		mustExecC(t, w, "CREATE VIEW cachefix_v AS SELECT id, v FROM cache_b")
		before := cachedV(t, srv, r, id)
		mustExecC(t, w, "UPDATE cachefix_v SET v = v + 100 WHERE id = ?", id)
		if v := fixReadV(t, r, id); v != before+100 {
			t.Fatalf("round %d: after an UPDATE through a view just created, the read of its base table answers %d, want %d", i, v, before+100)
		}
	}
}

// TestCacheFixXACommitElsewhere: the rows of an XA branch one session
// prepared and left show, once another session commits the branch, in
// the cached reads; and the prepared branch's connection does not go back
// to the pool (the table stays usable through sluice).
func TestCacheFixXACommitElsewhere(t *testing.T) {
	srv, _, db := cacheSluiceFile(t, cacheFixConfig("60s", ""))
	t.Cleanup(func() {
		if c, err := mustRoot(t, env.topo.Master).Conn(context.Background()); err == nil {
			c.ExecContext(context.Background(), "XA ROLLBACK 'cachefix'")
			c.Close()
		}
	})
	r := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	if v := cachedV(t, srv, r, 2); v != 0 {
		t.Fatalf("row 2 starts at %d", v)
	}
	x := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	for _, q := range []string{"XA START 'cachefix'", "UPDATE cache_b SET v = 77 WHERE id = 2", "XA END 'cachefix'", "XA PREPARE 'cachefix'"} {
		mustExecC(t, x, q)
	}
	// The session ends with its branch prepared, uncommitted.
	x.Raw(func(any) error { return driverBadConn })
	x.Close()
	if v := fixReadV(t, r, 2); v != 0 {
		t.Fatalf("a prepared, uncommitted branch shows: %d", v)
	}
	cm := conn(t, db)
	pollUntil(t, "XA COMMIT of the left branch", func() bool {
		_, err := cm.ExecContext(ctxT(t), "XA COMMIT 'cachefix'")
		if err != nil {
			t.Logf("XA COMMIT: %v", err)
		}
		return err == nil
	})
	if v := fixReadV(t, r, 2); v != 77 {
		t.Fatalf("after XA COMMIT from another session the read answers %d, want 77", v)
	}
	// Every pooled connection still runs statements on the table.
	for i := range 20 {
		c := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
		mustExecC(t, c, "UPDATE cache_b SET v = v WHERE id = 3")
		var v int
		if err := c.QueryRowContext(ctxT(t), "SELECT v FROM "+sandbox.TestDatabase+".cache_b WHERE id = 3 FOR UPDATE").Scan(&v); err != nil {
			t.Fatalf("statement %d after the XA branch: %v", i, err)
		}
		c.Close()
	}
}

// TestCacheFixTTLLoweredByReload: a reload that lowers cache_ttl bounds the
// entries already stored: a write made directly on the master (no
// invalidation) shows within the new ttl, not the old one.
func TestCacheFixTTLLoweredByReload(t *testing.T) {
	srv, path, _ := cacheSluiceFile(t, cacheFixConfig("600s", ""))
	r := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	if v := cachedV(t, srv, r, 4); v != 0 {
		t.Fatalf("row 4 starts at %d", v)
	}
	writeConfig(t, path, cacheFixConfig("1s", ""))
	mustReload(t, srv)
	root := mustRoot(t, env.topo.Master)
	if _, err := root.ExecContext(ctxT(t), "UPDATE "+sandbox.TestDatabase+".cache_b SET v = 9 WHERE id = 4"); err != nil {
		t.Fatal(err)
	}
	// pollUntil allows 20 s; the old ttl would serve the old row for 600.
	pollUntil(t, "the direct write shows under the lowered cache_ttl", func() bool { return fixReadV(t, r, 4) == 9 })
}

// TestCacheFixShardingOnThenOff: writes under [[shard]] rules begin no
// write on the cache's counters; a reload that adds the rules and one
// that removes them leave no answer stored before to be served after.
func TestCacheFixShardingOnThenOff(t *testing.T) {
	srv, path, _ := cacheSluiceFile(t, cacheFixConfig("60s", ""))
	r := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	if v := cachedV(t, srv, r, 5); v != 0 {
		t.Fatalf("row 5 starts at %d", v)
	}
	const rule = "\n[[shard]]\nschema = \"cachefix_sharded\"\ntable = \"items\"\nkey = \"id\"\nalgorithm = \"mod\"\nclusters = [\"main\"]\ntables_per_cluster = 2\n"
	writeConfig(t, path, cacheFixConfig("60s", rule))
	mustReload(t, srv)
	w := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	mustExecC(t, w, "UPDATE cache_b SET v = 55 WHERE id = 5")
	w.Close()
	writeConfig(t, path, cacheFixConfig("60s", ""))
	mustReload(t, srv)
	if v := fixReadV(t, r, 5); v != 55 {
		t.Fatalf("after sharding on then off, the read answers %d, want 55", v)
	}
	h0, _, _ := cacheStats(t, srv)
	fixReadV(t, r, 5)
	h1, _, _ := cacheStats(t, srv)
	t.Logf("after the rules were removed: %v hits of one read", h1-h0)
}

// TestCacheFixViewOnRoutedCluster: the grants' catalog of views is read
// from the default cluster only; on a cluster a rule routes to, the cache
// looks names up in what the probes read from that cluster's master. An
// UPDATE through a view of that cluster must not leave the cached reads of
// its base table stale.
func TestCacheFixViewOnRoutedCluster(t *testing.T) {
	other := startOtherCluster(t)
	odb := rootOn(t, other.Master)
	for _, q := range []string{
		"CREATE TABLE " + sandbox.TestDatabase + ".ocache_t (id INT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO " + sandbox.TestDatabase + ".ocache_t VALUES (1, 0)",
		"CREATE VIEW " + sandbox.TestDatabase + ".ocache_v AS SELECT id, v FROM " + sandbox.TestDatabase + ".ocache_t",
	} {
		if _, err := odb.ExecContext(ctxT(t), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	const rules = `
[[rule]]
name = "other-read"
pattern = "FROM ocache_"
kind = "read"
route = "other"
cache_ttl = "60s"

[[rule]]
name = "other-write"
pattern = "ocache_"
route = "other"
`
	srv, _, _ := twoClusterSluice(t, other, nil, rules)
	r := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	w := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	read := func() int {
		t.Helper()
		var v int
		if err := r.QueryRowContext(ctxT(t), "SELECT v FROM ocache_t WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Nothing is cached until the probes have read the cluster's views.
	pollUntil(t, "a read of the routed cluster is a hit", func() bool {
		h0, _, _ := cacheStats(t, srv)
		read()
		h1, _, _ := cacheStats(t, srv)
		return h1-h0 == 1
	})
	mustExecC(t, w, "UPDATE ocache_v SET v = 12 WHERE id = 1")
	if v := read(); v != 12 {
		t.Fatalf("after an UPDATE through a view of the routed cluster, the read answers %d, want 12", v)
	}
}

// TestCacheFixLocalFilesClient: with local_infile on, a client that
// announces CLIENT_LOCAL_FILES (go-sql-driver always does, as the MariaDB
// CLI and C connector do) has its SELECTs cached like any other, and a
// write through sluice still shows at once.
func TestCacheFixLocalFilesClient(t *testing.T) {
	srv, _, _ := cacheSluiceFile(t, cacheFixConfig("60s", "", "local_infile = true"))
	r := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	before := cachedV(t, srv, r, 6)
	w := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	mustExecC(t, w, "UPDATE cache_b SET v = v + 3 WHERE id = 6")
	if v := fixReadV(t, r, 6); v != before+3 {
		t.Fatalf("after an UPDATE the read answers %d, want %d", v, before+3)
	}
}
