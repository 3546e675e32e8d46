package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// The query rules' actions that reach another cluster, and the timeout,
// end to end: route = "<cluster>" (text and prepared, reads and writes,
// the session's schema and variables carried over, refusals where the
// statement could not run there as on its own cluster), timeout = "1s"
// ending a SLEEP(5) with 3024, and mirror = "<cluster>" copying N inserts
// to the other cluster and, with a one-slot queue and a slow copy,
// dropping and counting. The second cluster ("other") is a sandbox
// topology of its own started by the test: a master without replicas.

// startOtherCluster starts the second cluster's topology, stopped when
// the test ends.
func startOtherCluster(t *testing.T) *sandbox.Topology {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: -1, NoAuth: true, Logf: t.Logf})
	if err != nil {
		t.Fatalf("cannot start the second cluster: %v", err)
	}
	t.Cleanup(func() { _ = topo.Stop() })
	return topo
}

// twoClusterSluice starts sluice on the shared topology ("main") and other
// with proxyKeys and rules, once main's replicas serve and other's master
// is up. It returns the server, a Close that may be called more than once,
// and the configuration file's path.
func twoClusterSluice(t *testing.T, other *sandbox.Topology, proxyKeys []string, rules string) (*server.Server, func() error, string) {
	t.Helper()
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: append([]string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`}, proxyKeys...)}
	text := sandbox.ShardedSluiceConfig(o, env.topo.Auth,
		[]sandbox.NamedTopology{{Name: "main", Topology: env.topo}, {Name: "other", Topology: other}}, rules)
	text += "\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
	path := filepath.Join(t.TempDir(), "sluice.toml")
	writeConfig(t, path, text)
	cfg, err := conf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var closeErr error
	closeSrv := func() error {
		once.Do(func() { closeErr = srv.Close() })
		return closeErr
	}
	t.Cleanup(func() { _ = closeSrv() })
	pollUntil(t, "main's replicas and other's master serve", func() bool {
		return scrapeFrom(t, srv, `sluice_cluster_serving_replicas{cluster="main"}`) == float64(len(env.topo.Replicas)) &&
			scrapeFrom(t, srv, `sluice_cluster_writable{cluster="other"}`) == 1
	})
	return srv, closeSrv, path
}

// rootOn opens a root pool on a server's TestDatabase.
func rootOn(t *testing.T, s *sandbox.Server) *sql.DB {
	t.Helper()
	db, err := s.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctxT(t), "CREATE DATABASE IF NOT EXISTS "+sandbox.TestDatabase); err != nil {
		t.Fatal(err)
	}
	return db
}

// mysqlErr checks that err is the MySQL error code whose message holds
// every part of want.
func mysqlErr(t *testing.T, what string, err error, code uint16, want ...string) {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != code {
		t.Errorf("%s: error %v, want %d", what, err, code)
		return
	}
	for _, w := range want {
		if !strings.Contains(me.Message, w) {
			t.Errorf("%s: message %q lacks %q", what, me.Message, w)
		}
	}
}

// TestRuleActionsClusters: a table-driven test per action — route to
// another cluster, timeout, mirror — with hit counts in SHOW RULES and the
// metric equal to the statements sent, and the mirror's drop counter.
func TestRuleActionsClusters(t *testing.T) {
	other := startOtherCluster(t)
	otherID := other.Master.ServerID
	otherRoot := rootOn(t, other.Master)
	mainRoot := rootOn(t, env.topo.Master)
	ctx := ctxT(t)
	for _, db := range []*sql.DB{mainRoot, otherRoot} {
		for _, q := range []string{
			"DROP TABLE IF EXISTS " + sandbox.TestDatabase + ".ra_routed",
			"CREATE TABLE " + sandbox.TestDatabase + ".ra_routed (id INT PRIMARY KEY)",
			"DROP TABLE IF EXISTS " + sandbox.TestDatabase + ".ra_mirror",
			"CREATE TABLE " + sandbox.TestDatabase + ".ra_mirror (id INT PRIMARY KEY, v VARCHAR(20))",
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	rules := `
[[rule]]
name = "to-other"
pattern = "to-other"
route = "other"

[[rule]]
name = "slow"
pattern = "rule-timeout"
timeout = "1s"

[[rule]]
name = "slow-long"
pattern = "long-timeout"
timeout = "10s"

[[rule]]
name = "copy-insert"
pattern = "^INSERT INTO ra_mirror"
kind = "write"
mirror = "other"

[[rule]]
name = "cached-other"
pattern = "cached-other"
kind = "read"
route = "other"
cache_ttl = "60s"

[limits]
query_timeout = "2s"
`
	srv, _, _ := twoClusterSluice(t, other, nil, rules)
	c := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	hits := map[string]int{}

	t.Run("route", func(t *testing.T) {
		testRuleRoute(t, srv, c, otherID, otherRoot, mainRoot, hits)
	})
	t.Run("timeout", func(t *testing.T) {
		testRuleTimeout(t, srv, c, hits)
	})
	t.Run("mirror", func(t *testing.T) {
		testRuleMirror(t, srv, c, otherRoot, mainRoot, hits)
	})
	t.Run("mirror under NO_BACKSLASH_ESCAPES", func(t *testing.T) {
		testMirrorNoBackslashEscapes(t, srv, otherRoot, hits)
	})
	t.Run("a mirrored write invalidates the cache of its cluster", func(t *testing.T) {
		testMirrorInvalidates(t, srv, c, otherRoot, hits)
	})
	checkRuleHits(t, srv, []string{"to-other", "slow", "slow-long", "copy-insert", "cached-other"}, hits)
	h, rows := adminRows(t, srv, "SHOW RULES")
	for name, want := range map[string]string{"to-other": "route=other", "slow": "timeout=1s", "copy-insert": "mirror=other"} {
		if got := rowWith(t, h, rows, "name", name)["actions"]; got != want {
			t.Errorf("SHOW RULES: rule %s actions %q, want %q", name, got, want)
		}
	}

	t.Run("mirror drops when its queue is full", func(t *testing.T) {
		testRuleMirrorDrops(t, other, otherID)
	})
}

// testRuleRoute: statements a rule routes to "other" run there (text,
// prepared, a write), with the session's schema and variables; the next
// statement runs on main again; inside a transaction or with a user
// variable the routed statement is refused naming the rule.
func testRuleRoute(t *testing.T, srv *server.Server, c *sql.Conn, otherID uint32, otherRoot, mainRoot *sql.DB, hits map[string]int) {
	ctx := ctxT(t)
	if _, err := c.ExecContext(ctx, "SET SESSION group_concat_max_len = 12345"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sql  string
		args []any
	}{
		{"text", "SELECT @@server_id, CONCAT(DATABASE(), ':', @@group_concat_max_len) /* to-other */", nil},
		{"prepared", "SELECT @@server_id, CONCAT(DATABASE(), ':', @@group_concat_max_len, ?) /* to-other */", []any{""}},
	} {
		for range ruleRuns {
			var id uint32
			var state string
			if err := c.QueryRowContext(ctx, tc.sql, tc.args...).Scan(&id, &state); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if id != otherID || state != sandbox.TestDatabase+":12345" {
				t.Errorf("%s: ran on server %d with schema:group_concat_max_len %q, want server %d (other's master) with %q",
					tc.name, id, state, otherID, sandbox.TestDatabase+":12345")
			}
			hits["to-other"]++
			// The next statement is the session's own cluster's again.
			var back uint32
			if err := c.QueryRowContext(ctx, "SELECT @@server_id").Scan(&back); err != nil {
				t.Fatal(err)
			}
			if w := where(back); w != "master" && w != "replica" {
				t.Errorf("%s: the statement after a routed one ran on %s, want main", tc.name, w)
			}
		}
	}
	// A write lands on other's master and not on main.
	for i := range ruleRuns {
		if _, err := c.ExecContext(ctx, fmt.Sprintf("INSERT INTO ra_routed VALUES (%d) /* to-other */", i)); err != nil {
			t.Fatal(err)
		}
		hits["to-other"]++
	}
	var onOther, onMain int
	if err := otherRoot.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+sandbox.TestDatabase+".ra_routed").Scan(&onOther); err != nil {
		t.Fatal(err)
	}
	if err := mainRoot.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+sandbox.TestDatabase+".ra_routed").Scan(&onMain); err != nil {
		t.Fatal(err)
	}
	if onOther != ruleRuns || onMain != 0 {
		t.Errorf("routed inserts: %d rows on other, %d on main; want %d and 0", onOther, onMain, ruleRuns)
	}

	// Where the session could not run it on other as on main: refused.
	tx := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	if _, err := tx.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var id uint32
	err := tx.QueryRowContext(ctx, "SELECT @@server_id /* to-other */").Scan(&id)
	mysqlErr(t, "routed inside a transaction", err, 1235, `query rule "to-other" routes this statement to cluster other`, "a transaction is open on cluster main")
	hits["to-other"]++
	if _, err := tx.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	uv := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	if _, err := uv.ExecContext(ctx, "SET @x = 1"); err != nil {
		t.Fatal(err)
	}
	err = uv.QueryRowContext(ctx, "SELECT @@server_id /* to-other */").Scan(&id)
	mysqlErr(t, "routed with a user variable set", err, 1235, `query rule "to-other"`, "user_variables")
	hits["to-other"]++
	fresh := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	err = fresh.QueryRowContext(ctx, "SELECT @y IS NULL, @@server_id /* to-other */").Scan(new(bool), &id)
	mysqlErr(t, "routed statement reading a user variable", err, 1235, `query rule "to-other"`)
	hits["to-other"]++
}

// testRuleTimeout: a SLEEP(5) a rule gives timeout = "1s" ends with 3024
// after about a second, text and prepared, and is counted as a query
// timeout; under a rule's timeout = "10s" the user's query_timeout = "2s"
// is the smaller and ends it; a SLEEP the rule does not match runs to its
// end.
func testRuleTimeout(t *testing.T, srv *server.Server, c *sql.Conn, hits map[string]int) {
	ctx := ctxT(t)
	before := scrapeFrom(t, srv, "sluice_query_timeouts_total")
	for _, tc := range []struct {
		name  string
		sql   string
		args  []any
		rule  string
		limit time.Duration
	}{
		{"text", "SELECT SLEEP(5) /* rule-timeout */", nil, "slow", time.Second},
		{"prepared", "SELECT SLEEP(?) /* rule-timeout */", []any{5}, "slow", time.Second},
		{"the user's query_timeout is smaller", "SELECT SLEEP(5) /* long-timeout */", nil, "slow-long", 2 * time.Second},
	} {
		start := time.Now()
		var v int
		err := c.QueryRowContext(ctx, tc.sql, tc.args...).Scan(&v)
		took := time.Since(start)
		hits[tc.rule]++
		mysqlErr(t, tc.name, err, 3024, "maximum statement execution time exceeded")
		t.Logf("%s: SELECT SLEEP(5) under a %v limit ended after %v", tc.name, tc.limit, took.Round(time.Millisecond))
		if took < tc.limit || took >= 5*time.Second {
			t.Errorf("%s: the statement ended after %v, want from its %v limit and before SLEEP's 5s", tc.name, took, tc.limit)
		}
	}
	if got := scrapeFrom(t, srv, "sluice_query_timeouts_total"); got != before+3 {
		t.Errorf("sluice_query_timeouts_total went from %v to %v, want +3", before, got)
	}
	// The session goes on; an unmatched sleep past 1s is not cut.
	var v int
	if err := c.QueryRowContext(ctx, "SELECT SLEEP(1.2)").Scan(&v); err != nil || v != 0 {
		t.Errorf("an unmatched SLEEP(1.2): %d, %v", v, err)
	}
}

// testMirrorNoBackslashEscapes: a session whose sql_mode has
// NO_BACKSLASH_ESCAPES writes values ending in a backslash. Prepared, the
// copies (the values written in as that session reads them) land on other
// exactly as on main: read the session's way, not the mirror connection's
// default way, where a backslash would end no string and a value could
// run as SQL. As text, sluice is in doubt how the server reads it, and it
// is not copied rather than copied wrong.
func testMirrorNoBackslashEscapes(t *testing.T, srv *server.Server, otherRoot *sql.DB, hits map[string]int) {
	ctx := ctxT(t)
	c := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	if _, err := c.ExecContext(ctx, "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')"); err != nil {
		t.Fatal(err)
	}
	mirrored := scrapeFrom(t, srv, `sluice_rule_mirrored_total{rule="copy-insert"}`)
	want := map[int]string{2000: `a\`, 2001: `b\', 'x`}
	for _, id := range []int{2000, 2001} {
		if _, err := c.ExecContext(ctx, "INSERT INTO ra_mirror VALUES (?, ?)", id, want[id]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ExecContext(ctx, `INSERT INTO ra_mirror VALUES (2002, 'c\')`); err != nil {
		t.Fatal(err)
	}
	hits["copy-insert"] += 3
	pollUntil(t, "the two prepared copies ran", func() bool {
		return scrapeFrom(t, srv, `sluice_rule_mirrored_total{rule="copy-insert"}`) == mirrored+2
	})
	got := map[int]string{}
	rows, err := otherRoot.QueryContext(ctx, "SELECT id, v FROM "+sandbox.TestDatabase+".ra_mirror WHERE id >= 2000 ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int
		var v string
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		got[id] = v
	}
	if len(got) != len(want) || got[2000] != want[2000] || got[2001] != want[2001] {
		t.Errorf("other holds %#v, want exactly %#v as the session wrote them", got, want)
	}
}

// testMirrorInvalidates: another session caches a read of ra_mirror on
// "other" while a mirrored insert waits there (a READ lock holds it): the
// session's own insert was acknowledged on main long before, so only the
// copy landing can tell the cache the answer changed. Once the lock goes,
// the copy lands and the cached count must follow, well before the
// rule's 60 s cache_ttl.
func testMirrorInvalidates(t *testing.T, srv *server.Server, c *sql.Conn, otherRoot *sql.DB, hits map[string]int) {
	ctx := ctxT(t)
	reader := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	count := func() int {
		var n int
		if err := reader.QueryRowContext(ctx, "SELECT COUNT(*) FROM ra_mirror /* cached-other */").Scan(&n); err != nil {
			t.Fatal(err)
		}
		hits["cached-other"]++
		return n
	}
	// Reads on other are cached once the probes have read its views (a
	// name sluice cannot tell from a view is never cached).
	pollUntil(t, "reads of other are cached", func() bool {
		h := scrapeFrom(t, srv, "sluice_cache_hits_total")
		count()
		return scrapeFrom(t, srv, "sluice_cache_hits_total") > h
	})
	before := mirrorRows(t, otherRoot)
	lock, err := otherRoot.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "LOCK TABLES "+sandbox.TestDatabase+".ra_mirror READ"); err != nil {
		t.Fatal(err)
	}
	mirrored := scrapeFrom(t, srv, `sluice_rule_mirrored_total{rule="copy-insert"}`)
	if _, err := c.ExecContext(ctx, "INSERT INTO ra_mirror VALUES (1000, 'held')"); err != nil {
		t.Fatal(err)
	}
	hits["copy-insert"]++
	hits0 := scrapeFrom(t, srv, "sluice_cache_hits_total")
	if n := count(); n != before {
		t.Fatalf("other answered %d rows while the copy waits, want %d", n, before)
	}
	if n := count(); n != before {
		t.Fatalf("the second read answered %d rows, want %d", n, before)
	}
	if h := scrapeFrom(t, srv, "sluice_cache_hits_total"); h <= hits0 {
		t.Fatalf("the second read was not a cache hit (hits %v then %v): the test shows nothing", hits0, h)
	}
	if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the copy ran on other", func() bool {
		return scrapeFrom(t, srv, `sluice_rule_mirrored_total{rule="copy-insert"}`) == mirrored+1
	})
	if n := count(); n != before+1 {
		t.Errorf("after the mirrored insert ran on other the cached read answers %d rows, want %d", n, before+1)
	}
}

// mirrorRows is how many rows ra_mirror holds on db.
func mirrorRows(t *testing.T, db *sql.DB) int {
	var n int
	if err := db.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM "+sandbox.TestDatabase+".ra_mirror").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// testRuleMirror: N inserts the rule mirrors, text and prepared, land on
// main and, copied in the session's schema, on other with the same values;
// the counters say N mirrored, none dropped.
func testRuleMirror(t *testing.T, srv *server.Server, c *sql.Conn, otherRoot, mainRoot *sql.DB, hits map[string]int) {
	const n = 40
	ctx := ctxT(t)
	for i := range n {
		// Half as text, half as prepared statements whose executions are
		// copied with their values written in.
		var err error
		if i%2 == 0 {
			_, err = c.ExecContext(ctx, fmt.Sprintf("INSERT INTO ra_mirror VALUES (%d, 'row %d')", i, i))
		} else {
			_, err = c.ExecContext(ctx, "INSERT INTO ra_mirror VALUES (?, ?)", i, fmt.Sprintf("row %d", i))
		}
		if err != nil {
			t.Fatal(err)
		}
		hits["copy-insert"]++
	}
	if got := mirrorRows(t, mainRoot); got != n {
		t.Fatalf("main holds %d rows, want %d", got, n)
	}
	pollUntil(t, fmt.Sprintf("other holds the %d mirrored rows", n), func() bool { return mirrorRows(t, otherRoot) == n })
	pollUntil(t, "the mirror counted its copies", func() bool {
		return scrapeFrom(t, srv, `sluice_rule_mirrored_total{rule="copy-insert"}`) == n
	})
	if d := scrapeFrom(t, srv, `sluice_rule_mirror_dropped_total{rule="copy-insert"}`); d != 0 {
		t.Errorf("%v copies dropped with the default queue", d)
	}
	var digest string
	err := otherRoot.QueryRowContext(ctx, "SELECT GROUP_CONCAT(v ORDER BY id) FROM "+sandbox.TestDatabase+".ra_mirror").Scan(&digest)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("row %d", i))
	}
	if err != nil || digest != strings.Join(want, ",") {
		t.Errorf("other's rows %q (%v) differ from what the session inserted", digest, err)
	}
}

// testRuleMirrorDrops: with mirror_queue = 1, one worker and a copy that
// sleeps 3 s on other only, a burst of statements fills the queue: the
// client's statements do not wait, the extra copies are dropped and
// counted, and every statement is either mirrored or dropped.
func testRuleMirrorDrops(t *testing.T, other *sandbox.Topology, otherID uint32) {
	const n = 10
	rules := `
[[rule]]
name = "copy-slow"
pattern = "mirror-slow"
kind = "read"
mirror = "other"
`
	srv, closeSrv, path := twoClusterSluice(t, other, []string{"mirror_queue = 1", "mirror_workers = 1"}, rules)
	c := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	ctx := ctxT(t)
	q := fmt.Sprintf("SELECT SLEEP(IF(@@server_id = %d, 3, 0)) /* mirror-slow */", otherID)
	start := time.Now()
	for range n {
		var v int
		if err := c.QueryRowContext(ctx, q).Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	mirrored := scrapeFrom(t, srv, `sluice_rule_mirrored_total{rule="copy-slow"}`)
	dropped := scrapeFrom(t, srv, `sluice_rule_mirror_dropped_total{rule="copy-slow"}`)
	t.Logf("%d statements whose copies sleep 3 s each took %v on the client; then %v mirrored, %v dropped",
		n, took.Round(time.Millisecond), mirrored, dropped)
	if dropped < 1 {
		t.Errorf("no copy dropped with a one-slot queue (%v mirrored)", mirrored)
	}
	pollUntil(t, "every copy is mirrored or dropped", func() bool {
		m := scrapeFrom(t, srv, `sluice_rule_mirrored_total{rule="copy-slow"}`)
		d := scrapeFrom(t, srv, `sluice_rule_mirror_dropped_total{rule="copy-slow"}`)
		return m+d == n && m >= 1
	})
	checkRuleHits(t, srv, []string{"copy-slow"}, map[string]int{"copy-slow": n})
	// A reload that renames the rule starts no worker and keeps the queue;
	// the renamed rule counts from 0.
	workers := mirrorWorkers()
	if workers < 1 {
		t.Fatalf("%d mirror workers run", workers)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeConfig(t, path, strings.Replace(string(text), `name = "copy-slow"`, `name = "copy-slow-2"`, 1))
	if _, err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := mirrorWorkers(); got != workers {
		t.Errorf("%d mirror workers after the reload, %d before", got, workers)
	}
	// Close with a copy in flight returns: the mirror's connection is
	// closed under it.
	var v int
	if err := c.QueryRowContext(ctx, q).Scan(&v); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the renamed rule's copy runs or is dropped", func() bool {
		return scrapeFrom(t, srv, `sluice_rule_mirrored_total{rule="copy-slow-2"}`)+
			scrapeFrom(t, srv, `sluice_rule_mirror_dropped_total{rule="copy-slow-2"}`) == 1
	})
	done := make(chan error, 1)
	go func() { done <- closeSrv() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return with a mirror copy in flight")
	}
	// Close waited for the worker: none of this sluice's is left.
	if after := mirrorWorkers(); after != workers-1 {
		t.Errorf("%d mirror workers run in the test process after Close, want %d (this sluice's one gone)", after, workers-1)
	}
}

// mirrorWorkers counts the goroutines of the test process running a
// mirror worker, of every in-process sluice.
func mirrorWorkers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "dataplane.(*mirror).work(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
