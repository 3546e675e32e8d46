package tests

import (
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/health/binlog"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// The result cache fed by the binlog tailers ([cache] binlog_invalidation),
// end to end against the sandbox: a write made directly on the master (not
// through sluice) shows through a 60 s cache_ttl within 1 s, a DDL made
// there drops the table's entries, and without the tailers the same write
// stays hidden until cache_ttl. The tailers start and stop on reload and
// with the server.

// binlogCacheRules caches reads of the bc_* tables (routed to the master,
// so a miss never reads a lagging replica) for ttl.
func binlogCacheRules(ttl string) string {
	return `
[[rule]]
name = "binlog-cached"
pattern = "FROM bc_"
kind = "read"
route = "master"
cache_ttl = "` + ttl + `"
`
}

// binlogCacheConfig is the shared topology's configuration with the bc_*
// rule and [cache] binlog_invalidation as on says, with a server_id of
// the test's own (other tests tail the same master from this process).
func binlogCacheConfig(t *testing.T, ttl string, on bool) string {
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`}}
	text := sandbox.ShardedSluiceConfig(o, env.topo.Auth, []sandbox.NamedTopology{{Name: "main", Topology: env.topo}},
		binlogCacheRules(ttl))
	text += fmt.Sprintf("\n[cache]\nbinlog_invalidation = %v\nbinlog_server_id = %d\n", on,
		binlog.DefaultServerID("main", t.Name()))
	return text + "\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
}

// binlogCacheTables (re)creates the bc_* tables on the master, directly.
func binlogCacheTables(t *testing.T, root *sql.DB) {
	t.Helper()
	db := sandbox.TestDatabase
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + db + ".bc_row, " + db + ".bc_ddl",
		"CREATE TABLE " + db + ".bc_row (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE " + db + ".bc_ddl (id INT PRIMARY KEY) ENGINE=InnoDB",
		"INSERT INTO " + db + ".bc_row VALUES (1, 0)",
		"INSERT INTO " + db + ".bc_ddl VALUES (1)",
	} {
		mustExec(t, root, q)
	}
}

// binlogRounds is how many direct writes TestCacheBinlogInvalidation
// times: SLUICE_CACHE_BINLOG_ROUNDS, 100 by default.
func binlogRounds(t *testing.T) int {
	s := os.Getenv("SLUICE_CACHE_BINLOG_ROUNDS")
	if s == "" {
		return 100
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("SLUICE_CACHE_BINLOG_ROUNDS=%q: want a count ≥ 1", s)
	}
	return n
}

// cachedRead reads bc_row's v twice through c and fails unless the second
// read was answered from the cache; it returns the value.
func cachedRead(t *testing.T, srv *server.Server, c *sql.Conn, round int) string {
	t.Helper()
	first := readV(t, c)
	h0, _, _ := cacheStats(t, srv)
	second := readV(t, c)
	h1, _, _ := cacheStats(t, srv)
	if h1-h0 != 1 || second != first {
		t.Fatalf("round %d: the second read (%s after %s) made %v cache hits, want 1", round, second, first, h1-h0)
	}
	return second
}

// waitCaching waits until bc_row's reads are stored: sluice caches a table
// once its schema mirror has read the table's definition, which it does in
// the background after start.
func waitCaching(t *testing.T, srv *server.Server, c *sql.Conn) {
	t.Helper()
	pollUntil(t, "a repeated read of bc_row is a cache hit", func() bool {
		readV(t, c)
		h0, _, _ := cacheStats(t, srv)
		readV(t, c)
		h1, _, _ := cacheStats(t, srv)
		return h1 > h0
	})
}

func readV(t *testing.T, c *sql.Conn) string {
	t.Helper()
	var v string
	if err := c.QueryRowContext(ctxT(t), "SELECT v FROM bc_row WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// pollFresh reads through c until it sees want and returns when it first
// did; it fails after limit.
func pollFresh(t *testing.T, c *sql.Conn, want string, from time.Time, limit time.Duration) time.Time {
	t.Helper()
	for {
		got := readV(t, c)
		now := time.Now()
		if got == want {
			return now
		}
		if now.Sub(from) > limit {
			t.Fatalf("still %s, not %s, %v after the direct write", got, want, now.Sub(from))
		}
		// A short pause between reads, so the poll does not starve the
		// tailer on a loaded machine; it adds at most this to a figure.
		time.Sleep(2 * time.Millisecond)
	}
}

// slaveHost is the host the replica with server_id id registered with on
// the master (SHOW SLAVE HOSTS), "" when none did.
func slaveHost(t *testing.T, root *sql.DB, id uint32) string {
	t.Helper()
	rows, err := root.QueryContext(ctxT(t), "SHOW SLAVE HOSTS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[strings.ToLower(c)] = vals[i].String
		}
		if row["server_id"] == strconv.FormatUint(uint64(id), 10) {
			return row["host"]
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ""
}

// quantile is the q-quantile of sorted d.
func quantile(d []time.Duration, q float64) time.Duration { return d[int(q*float64(len(d)-1))] }

// directWriteRounds runs rounds of: a cached read (its repeat a hit), an
// UPDATE made directly on the master, reads through sluice until the new
// value shows. It returns the delays from each write's OK to the first
// fresh read, sorted, and fails a round slower than limit.
func directWriteRounds(t *testing.T, srv *server.Server, c *sql.Conn, root *sql.DB, rounds int, limit time.Duration) []time.Duration {
	t.Helper()
	delays := make([]time.Duration, 0, rounds)
	for round := range rounds {
		before := cachedRead(t, srv, c, round)
		n, err := strconv.Atoi(before)
		if err != nil {
			t.Fatalf("round %d: v = %q", round, before)
		}
		want := strconv.Itoa(n + 1)
		mustExec(t, root, "UPDATE "+sandbox.TestDatabase+".bc_row SET v = "+want+" WHERE id = 1")
		ok := time.Now()
		fresh := pollFresh(t, c, want, ok, 20*time.Second)
		d := fresh.Sub(ok)
		if d > limit {
			t.Errorf("round %d: the direct write showed %v after its OK, want ≤ %v", round, d, limit)
		}
		delays = append(delays, d)
	}
	slices.Sort(delays)
	return delays
}

// TestCacheBinlogInvalidation: with binlog_invalidation, a write made
// directly on the master shows through a 60 s cache_ttl within 1 s in
// every round, and a DDL made there drops the table's entries.
func TestCacheBinlogInvalidation(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	binlogCacheTables(t, root)
	srv, _, _ := rulesSluice(t, binlogCacheConfig(t, "60s", true))
	tls := srv.BinlogTailers()
	if len(tls) != 1 {
		t.Fatalf("%d binlog tailers, want 1 (one cluster)", len(tls))
	}
	pollUntil(t, "the tailer attaches to the master", func() bool { return tls[0].Stats().Master == env.topo.Master.Addr() })
	// It registered with the configured binlog_server_id.
	id := binlog.DefaultServerID("main", t.Name())
	pollUntil(t, fmt.Sprintf("SHOW SLAVE HOSTS lists server_id %d as sluice-main", id), func() bool {
		return slaveHost(t, root, id) == "sluice-main"
	})
	c := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	waitCaching(t, srv, c)

	t.Run("direct writes show within 1s", func(t *testing.T) {
		rounds := binlogRounds(t)
		events0 := scrapeFrom(t, srv, `sluice_binlog_events_total{cluster="main"}`)
		inv0 := scrapeFrom(t, srv, "sluice_cache_invalidations_total")
		delays := directWriteRounds(t, srv, c, root, rounds, time.Second)
		t.Logf("binlog invalidation through sluice, %d direct writes, write's OK to first fresh read (cache_ttl 60s): p50 %v, p99 %v, max %v",
			rounds, quantile(delays, 0.50), quantile(delays, 0.99), delays[len(delays)-1])
		// Each write is at least a GTID, a table map, a rows and an XID event.
		if ev := scrapeFrom(t, srv, `sluice_binlog_events_total{cluster="main"}`) - events0; ev < float64(4*rounds) {
			t.Errorf("sluice_binlog_events_total rose by %v over %d writes, want ≥ %d", ev, rounds, 4*rounds)
		}
		// A bumped entry is removed when it is next looked up.
		if inv := scrapeFrom(t, srv, "sluice_cache_invalidations_total") - inv0; inv < 1 {
			t.Errorf("sluice_cache_invalidations_total rose by %v over %d direct writes", inv, rounds)
		}
	})

	t.Run("direct DDL drops the entries", func(t *testing.T) {
		read := func() []string {
			t.Helper()
			rows, err := c.QueryContext(ctxT(t), "SELECT * FROM bc_ddl WHERE id = 1")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			cols, err := rows.Columns()
			if err != nil {
				t.Fatal(err)
			}
			return cols
		}
		read()
		h0, _, _ := cacheStats(t, srv)
		if cols := read(); len(cols) != 1 {
			t.Fatalf("columns %v before the DDL", cols)
		}
		if h1, _, _ := cacheStats(t, srv); h1-h0 != 1 {
			t.Fatalf("the repeated read made %v hits, want 1", h1-h0)
		}
		ddlTable := sandbox.TestDatabase + ".bc_ddl"
		if !cacheHasTable(t, srv, ddlTable) {
			t.Fatal("SHOW CACHE lists no entry of bc_ddl")
		}
		mustExec(t, root, "ALTER TABLE "+sandbox.TestDatabase+".bc_ddl ADD COLUMN extra INT NOT NULL DEFAULT 7")
		ok := time.Now()
		// The DDL removes the entry itself (not only its validity).
		pollUntil(t, "the DDL drops bc_ddl's entry", func() bool { return !cacheHasTable(t, srv, ddlTable) })
		dropped := time.Since(ok)
		if cols := read(); !slices.Equal(cols, []string{"id", "extra"}) {
			t.Fatalf("columns %v after the direct DDL, want [id extra]", cols)
		}
		t.Logf("a direct ALTER TABLE dropped the cached entry within %v of its OK", dropped)
		if dropped > time.Second {
			t.Errorf("the DDL's entry went %v after its OK, want ≤ 1s", dropped)
		}
	})

	t.Run("Close stops the tailer", func(t *testing.T) {
		srv.Close()
		select {
		case <-tls[0].Done():
		default:
			t.Fatal("the tailer still runs after Close returned")
		}
		if n := len(srv.BinlogTailers()); n != 0 {
			t.Fatalf("%d tailers listed after Close", n)
		}
		pollUntil(t, "the master has no dump thread of the tailer", func() bool { return len(dumpThreads(t)) == 0 })
	})
}

// TestCacheBinlogOff: without binlog_invalidation a direct write is served
// stale until cache_ttl, never later; RELOAD CONFIG turns the tailers on
// (the write then shows within 1 s) and off again.
func TestCacheBinlogOff(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	binlogCacheTables(t, root)
	const ttl = 2 * time.Second
	text := binlogCacheConfig(t, ttl.String(), false)
	srv, path, _ := rulesSluice(t, text)
	if n := len(srv.BinlogTailers()); n != 0 {
		t.Fatalf("%d binlog tailers with binlog_invalidation = false", n)
	}
	c := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	waitCaching(t, srv, c)

	t.Run("a direct write stays hidden until cache_ttl", func(t *testing.T) {
		staleReads := 0
		for round := range 3 {
			// The entry is stored by the first read after stored (the
			// cache is empty then); it lives cache_ttl from when its
			// query ran, which is later.
			adminExec(t, srv, "FLUSH CACHE")
			stored := time.Now()
			before := cachedRead(t, srv, c, round)
			want := strconv.Itoa(500 + round)
			mustExec(t, root, "UPDATE "+sandbox.TestDatabase+".bc_row SET v = "+want+" WHERE id = 1")
			ok := time.Now()
			stale := readV(t, c)
			staleAt := time.Since(stored)
			if stale == before {
				staleReads++
			}
			if stale != before && staleAt < ttl {
				t.Fatalf("round %d: the read %v after the flush before the entry's query saw the direct write (%s) without binlog invalidation", round, staleAt, stale)
			}
			fresh := pollFresh(t, c, want, ok, ttl+5*time.Second)
			age := fresh.Sub(stored)
			t.Logf("round %d: stale read (%s, want %s) %v after the flush before the entry's query; fresh %v after it (cache_ttl %v)", round, stale, want, staleAt, age, ttl)
			if age < ttl {
				t.Errorf("round %d: the direct write showed %v after the flush before the entry's query, before cache_ttl %v: something invalidated it", round, age, ttl)
			}
			// The poll's step and a loaded machine add a little.
			if d := fresh.Sub(ok); d > ttl+time.Second {
				t.Errorf("round %d: the direct write showed %v after its OK, cache_ttl is %v", round, d, ttl)
			}
		}
		if staleReads == 0 {
			t.Fatal("no round read the value the cache held after the direct write: the test did not exercise the cache")
		}
	})

	t.Run("reload turns the tailers on and off", func(t *testing.T) {
		writeConfig(t, path, strings.Replace(text, "binlog_invalidation = false", "binlog_invalidation = true", 1))
		if ch := strings.Join(mustReload(t, srv), "\n"); !strings.Contains(ch, "cache.binlog_invalidation") || strings.Contains(ch, "needs restart") {
			t.Fatalf("RELOAD CONFIG lists %q, want cache.binlog_invalidation live", ch)
		}
		tls := srv.BinlogTailers()
		if len(tls) != 1 {
			t.Fatalf("%d tailers after the reload turned binlog_invalidation on", len(tls))
		}
		pollUntil(t, "the tailer attaches", func() bool { return tls[0].Stats().Master == env.topo.Master.Addr() })
		delays := directWriteRounds(t, srv, c, root, 5, time.Second)
		t.Logf("after the reload, 5 direct writes showed within %v at worst (cache_ttl %v)", delays[len(delays)-1], ttl)
		writeConfig(t, path, text)
		mustReload(t, srv)
		select {
		case <-tls[0].Done():
		default:
			t.Fatal("the tailer still runs after the reload turned binlog_invalidation off")
		}
		if n := len(srv.BinlogTailers()); n != 0 {
			t.Fatalf("%d tailers after the reload turned binlog_invalidation off", n)
		}
		pollUntil(t, "the master has no dump thread of the tailer", func() bool { return len(dumpThreads(t)) == 0 })
	})
}
