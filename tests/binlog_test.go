package tests

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/health/binlog"
	"github.com/sluice-proxy/sluice/internal/promtest"
)

// binlogChange is one OnChange call of a tailer.
type binlogChange struct {
	schema, table string
	ddl           bool
	at            time.Time
}

// binlogRecorder keeps what a tailer reported. Safe for concurrent use.
type binlogRecorder struct {
	mu      sync.Mutex
	changes []binlogChange
	resets  int
	// notify gets the changes as they come, when set (never blocks: a full
	// channel drops).
	notify chan binlogChange
}

func (r *binlogRecorder) change(schema, table string, ddl bool) {
	c := binlogChange{schema, table, ddl, time.Now()}
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
	if r.notify != nil {
		select {
		case r.notify <- c:
		default:
		}
	}
}

func (r *binlogRecorder) reset() {
	r.mu.Lock()
	r.resets++
	r.mu.Unlock()
}

// mark returns how many changes and resets were recorded so far.
func (r *binlogRecorder) mark() (changes, resets int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.changes), r.resets
}

// since returns the changes after the first n.
func (r *binlogRecorder) since(n int) []binlogChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.changes[n:])
}

// startTailer starts a tailer on the shared topology's master (or what
// master returns) with the service account, stopped at the test's end.
func startTailer(t *testing.T, master func() string) (*binlog.Tailer, *binlogRecorder, *prometheus.Registry) {
	t.Helper()
	rec := &binlogRecorder{}
	reg := prometheus.NewRegistry()
	metrics := binlog.NewMetrics(reg)
	metrics.Cluster("main")
	ctx, cancel := context.WithCancel(context.Background())
	o := env.topo.Opts
	tl := binlog.Start(ctx, binlog.Options{
		Cluster: "main", Master: master, User: o.ServiceUser, Password: o.ServicePassword,
		ServerID: binlog.DefaultServerID("main", t.Name()),
		OnChange: rec.change, OnReset: rec.reset, Log: testLog(), Metrics: metrics,
	})
	t.Cleanup(func() {
		cancel()
		<-tl.Done()
	})
	pollUntil(t, "the tailer attaches to the master", func() bool {
		_, resets := rec.mark()
		return tl.Stats().Master != "" && resets == 1
	})
	return tl, rec, reg
}

// binlogMetric is the value of a tailer metric of cluster "main".
func binlogMetric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	m := promtest.Sample(t, reg, name, map[string]string{"cluster": "main"})
	if m == nil {
		t.Fatalf("no %s{cluster=\"main\"}", name)
	}
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}

// testLog is a development logger when SLUICE_TEST_LOG is set, else nil.
func testLog() *zap.Logger {
	if os.Getenv("SLUICE_TEST_LOG") == "" {
		return nil
	}
	l, _ := zap.NewDevelopment()
	return l
}

// masterConn is one root connection to the sandbox master (so session
// settings such as binlog_format hold for its statements).
func masterConn(t *testing.T) *sql.Conn {
	t.Helper()
	db, err := env.topo.Master.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func binlogExec(t *testing.T, c *sql.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := c.ExecContext(ctxT(t), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// barrier writes the marker table and waits until the tailer reported it:
// every event the master logged before it has been read by then. It
// returns the changes to tables of schema reported since n, without the
// marker's.
func barrier(t *testing.T, c *sql.Conn, rec *binlogRecorder, schema string, n int) []binlogChange {
	t.Helper()
	binlogExec(t, c, "INSERT INTO "+schema+".marker VALUES ()")
	var got []binlogChange
	pollUntil(t, "the tailer reports the marker", func() bool {
		got = rec.since(n)
		return slices.ContainsFunc(got, func(x binlogChange) bool { return x.table == "marker" })
	})
	// Writes of other schemas (another test's, the proxy's) are not the
	// step's.
	return slices.DeleteFunc(got, func(x binlogChange) bool { return x.table == "marker" || x.schema != schema })
}

// tableSet renders changes as sorted "schema.table" (with "ddl:" before a
// definition change), each once.
func tableSet(cs []binlogChange) []string {
	var out []string
	for _, c := range cs {
		s := c.schema + "." + c.table
		if c.ddl {
			s = "ddl:" + s
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// TestBinlogTailerTables: writes made directly on the master, in row,
// statement and mixed format, are reported for exactly the tables they
// write: single-table INSERT/UPDATE/DELETE, upserts, a multi-table UPDATE
// and DELETE that write one of their two tables, a trigger writing another
// table, and
// CREATE/ALTER/DROP TABLE as definition changes; none of them resets.
func TestBinlogTailerTables(t *testing.T) {
	const db = "binlog_tables"
	c := masterConn(t)
	binlogExec(t, c, "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db,
		"CREATE TABLE "+db+".a (id INT PRIMARY KEY, x INT, s VARCHAR(20))",
		"CREATE TABLE "+db+".b (id INT PRIMARY KEY, x INT)",
		"CREATE TABLE "+db+".c (id INT PRIMARY KEY)",
		"CREATE TABLE "+db+".marker (id INT AUTO_INCREMENT PRIMARY KEY)",
		"CREATE TRIGGER "+db+".c_ai AFTER INSERT ON "+db+".c FOR EACH ROW INSERT INTO b VALUES (NEW.id + 1000, NEW.id)",
		"USE "+db)
	t.Cleanup(func() { env.topo.Master.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	_, rec, _ := startTailer(t, env.topo.Master.Addr)

	type step struct {
		name  string
		stmts []string
		want  []string
	}
	a, b, cc := db+".a", db+".b", db+".c"
	var steps []step
	for i, format := range []string{"ROW", "STATEMENT", "MIXED"} {
		base := (i + 1) * 100
		n := func(k int) string { return fmt.Sprint(base + k) }
		steps = append(steps,
			step{format + " insert", []string{"SET SESSION binlog_format=" + format,
				"INSERT INTO a VALUES (" + n(1) + ", 1, 'x'), (" + n(2) + ", 2, 'y')"}, []string{a}},
			step{format + " update", []string{"UPDATE a SET x = x + 1 WHERE id = " + n(1)}, []string{a}},
			step{format + " delete", []string{"DELETE FROM a WHERE id = " + n(2)}, []string{a}},
			step{format + " multi-table update", []string{"INSERT INTO b VALUES (" + n(1) + ", 50)",
				"BEGIN", "UPDATE a JOIN b ON a.id = b.id SET a.x = b.x + " + n(0) + " WHERE a.id = " + n(1), "COMMIT"},
				[]string{a, b}}, // b by its INSERT
			step{format + " multi-table update alone", []string{
				"UPDATE a JOIN b ON a.id = b.id SET a.x = b.x + 1 + " + n(0) + " WHERE a.id = " + n(1)}, []string{a}},
			step{format + " multi-table delete", []string{
				"DELETE b FROM b JOIN a ON a.id = b.id WHERE a.id = " + n(1)}, []string{b}},
			step{format + " upsert", []string{"INSERT INTO a VALUES (" + n(1) + ", 7, 'u') ON DUPLICATE KEY UPDATE x = 7",
				"REPLACE INTO a VALUES (" + n(4) + ", 8, 'r')"}, []string{a}},
			step{format + " trigger", []string{"INSERT INTO c VALUES (" + n(1) + ")"}, []string{b, cc}},
			step{format + " qualified from another schema", []string{"USE mysql",
				"INSERT INTO " + db + ".a VALUES (" + n(3) + ", 3, 'z')", "USE " + db}, []string{a}},
		)
	}
	steps = append(steps,
		step{"ANSI_QUOTES statement", []string{"SET SESSION binlog_format=STATEMENT",
			"SET SESSION sql_mode='ANSI_QUOTES'", `INSERT INTO "a" VALUES (900, 1, 'q')`, "SET SESSION sql_mode=DEFAULT"},
			[]string{a}},
		step{"NO_BACKSLASH_ESCAPES statement", []string{"SET SESSION sql_mode='NO_BACKSLASH_ESCAPES'",
			`INSERT INTO b VALUES (901, LENGTH('x\'))`, "SET SESSION sql_mode=DEFAULT", "SET SESSION binlog_format=ROW"},
			[]string{b}},
		step{"create table", []string{"CREATE TABLE d (id INT)"}, []string{"ddl:" + db + ".d"}},
		step{"alter table", []string{"ALTER TABLE d ADD COLUMN y INT"}, []string{"ddl:" + db + ".d"}},
		step{"rename table", []string{"RENAME TABLE d TO e"}, []string{"ddl:" + db + ".d", "ddl:" + db + ".e"}},
		step{"drop table", []string{"DROP TABLE e"}, []string{"ddl:" + db + ".e"}},
		step{"truncate", []string{"TRUNCATE TABLE a"}, []string{"ddl:" + a}},
	)
	barrier(t, c, rec, db, 0)
	for _, s := range steps {
		n, resets := rec.mark()
		binlogExec(t, c, s.stmts...)
		got := tableSet(barrier(t, c, rec, db, n))
		sort.Strings(s.want)
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: reported %v, want %v", s.name, got, s.want)
		}
		if _, r := rec.mark(); r != resets {
			t.Errorf("%s: %d resets, want none", s.name, r-resets)
		}
	}
}

// TestBinlogTailerLatency: 200 writes made directly on the master, one at
// a time, each reported within 1 s of the write's OK at the 99th
// percentile (the bar); the figures are logged.
func TestBinlogTailerLatency(t *testing.T) {
	const db = "binlog_latency"
	c := masterConn(t)
	binlogExec(t, c, "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db,
		"CREATE TABLE "+db+".w (id INT PRIMARY KEY)")
	t.Cleanup(func() { env.topo.Master.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	tl, rec, reg := startTailer(t, env.topo.Master.Addr)
	events := binlogMetric(t, reg, "sluice_binlog_events_total")
	ch := make(chan binlogChange, 16)
	rec.mu.Lock()
	rec.notify = ch
	rec.mu.Unlock()
	const writes = 200
	lat := make([]time.Duration, 0, writes)
	fromSend := make([]time.Duration, 0, writes)
	for i := range writes {
		sent := time.Now()
		binlogExec(t, c, fmt.Sprintf("INSERT INTO %s.w VALUES (%d)", db, i))
		ok := time.Now()
	wait:
		for {
			select {
			case x := <-ch:
				if x.table == "w" {
					lat = append(lat, max(x.at.Sub(ok), 0))
					fromSend = append(fromSend, x.at.Sub(sent))
					break wait
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("write %d not reported within 20s", i)
			}
		}
	}
	slices.Sort(lat)
	slices.Sort(fromSend)
	p := func(d []time.Duration, q float64) time.Duration { return d[int(q*float64(len(d)-1))] }
	t.Logf("binlog invalidation delay over %d writes, OK to callback (0 when the callback came first): p50 %v, p90 %v, p99 %v, max %v",
		writes, p(lat, 0.50), p(lat, 0.90), p(lat, 0.99), lat[len(lat)-1])
	t.Logf("write sent to callback: p50 %v, p90 %v, p99 %v, max %v",
		p(fromSend, 0.50), p(fromSend, 0.90), p(fromSend, 0.99), fromSend[len(fromSend)-1])
	if p(lat, 0.99) > time.Second {
		t.Errorf("p99 %v, want ≤ 1s", p(lat, 0.99))
	}
	// Each write is at least a GTID, a table map, a rows and an XID event.
	if got := binlogMetric(t, reg, "sluice_binlog_events_total") - events; got < 4*writes {
		t.Errorf("sluice_binlog_events_total rose by %v over %d writes, want ≥ %d", got, writes, 4*writes)
	}
	if st := tl.Stats(); st.Events < 4*writes {
		t.Errorf("Stats().Events %d, want ≥ %d", st.Events, 4*writes)
	}
	// Caught up: the lag is that of the last write, or 0 after a heartbeat.
	if lag := binlogMetric(t, reg, "sluice_binlog_lag_seconds"); lag > 5 {
		t.Errorf("sluice_binlog_lag_seconds %v after the tailer read every write", lag)
	}
}

// TestBinlogTailerIdle: an idle master sends heartbeats (one a second), so
// the tailer keeps its connection (it takes 5 s of silence as a dead one)
// and shows no lag.
func TestBinlogTailerIdle(t *testing.T) {
	tl, _, reg := startTailer(t, env.topo.Master.Addr)
	pollUntil(t, "6 heartbeats", func() bool { return tl.Stats().Heartbeats >= 6 })
	if st := tl.Stats(); st.Reconnects != 0 {
		t.Errorf("Stats %+v: an idle master's connection was replaced", st)
	}
	// 0 after a heartbeat; under 1 after a write read at once (the binary
	// log stores whole seconds).
	if lag := binlogMetric(t, reg, "sluice_binlog_lag_seconds"); lag >= 2 {
		t.Errorf("sluice_binlog_lag_seconds %v while caught up", lag)
	}
}

// dumpThreads lists the ids of the master's binlog dump threads of the
// service account (the tailers'; the replicas use another account).
func dumpThreads(t *testing.T) []int64 {
	t.Helper()
	db, err := env.topo.Master.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctxT(t), "SELECT ID FROM information_schema.PROCESSLIST"+
		" WHERE COMMAND LIKE 'Binlog Dump%' AND USER = ?", env.topo.Opts.ServiceUser)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestBinlogTailerReconnect: the master's dump thread is killed and rows
// are written while the tailer is away; it reconnects, resumes from the
// last GTID it read (no reset) and reports every write.
func TestBinlogTailerReconnect(t *testing.T) {
	const db = "binlog_reconnect"
	c := masterConn(t)
	binlogExec(t, c, "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db,
		"CREATE TABLE "+db+".marker (id INT AUTO_INCREMENT PRIMARY KEY)")
	for i := range 5 {
		binlogExec(t, c, fmt.Sprintf("CREATE TABLE %s.t%d (id INT)", db, i))
	}
	t.Cleanup(func() { env.topo.Master.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	tl, rec, reg := startTailer(t, env.topo.Master.Addr)
	barrier(t, c, rec, db, 0)
	if v := binlogMetric(t, reg, "sluice_binlog_reconnects_total"); v != 0 {
		t.Fatalf("sluice_binlog_reconnects_total %v before the kill", v)
	}
	var before []int64
	pollUntil(t, "one dump thread of the tailer", func() bool { before = dumpThreads(t); return len(before) == 1 })
	n, resets := rec.mark()
	binlogExec(t, c, fmt.Sprintf("KILL %d", before[0]))
	for i := range 5 {
		binlogExec(t, c, fmt.Sprintf("INSERT INTO %s.t%d VALUES (%d)", db, i, i))
	}
	got := tableSet(barrier(t, c, rec, db, n))
	want := []string{db + ".t0", db + ".t1", db + ".t2", db + ".t3", db + ".t4"}
	if !slices.Equal(got, want) {
		t.Errorf("after the kill: reported %v, want %v", got, want)
	}
	if st := tl.Stats(); st.Reconnects < 1 {
		t.Errorf("Stats %+v: no reconnect counted", st)
	}
	if v := binlogMetric(t, reg, "sluice_binlog_reconnects_total"); v < 1 {
		t.Errorf("sluice_binlog_reconnects_total %v after the kill", v)
	}
	if _, r := rec.mark(); r != resets {
		t.Errorf("%d resets after the kill, want none (resumed from the last GTID)", r-resets)
	}
	after := dumpThreads(t)
	if len(after) != 1 || after[0] == before[0] {
		t.Errorf("dump threads %v after the kill of %d, want one new", after, before[0])
	}
}

// TestBinlogTailerFollowsMaster: when the cluster's master address
// changes, the tailer leaves the old server, resets, and reads the new
// one's binary log (here a replica, which logs what it replicates).
func TestBinlogTailerFollowsMaster(t *testing.T) {
	const db = "binlog_follow"
	c := masterConn(t)
	binlogExec(t, c, "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db,
		"CREATE TABLE "+db+".marker (id INT AUTO_INCREMENT PRIMARY KEY)", "CREATE TABLE "+db+".x (id INT)")
	t.Cleanup(func() { env.topo.Master.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })
	var addr atomic.Pointer[string]
	m := env.topo.Master.Addr()
	addr.Store(&m)
	tl, rec, _ := startTailer(t, func() string { return *addr.Load() })
	barrier(t, c, rec, db, 0)
	r := env.topo.Replicas[0].Addr()
	addr.Store(&r)
	pollUntil(t, "the tailer attaches to the replica", func() bool {
		_, resets := rec.mark()
		return tl.Stats().Master == r && resets == 2
	})
	if ids := dumpThreads(t); len(ids) != 0 {
		t.Errorf("the old master still has the tailer's dump threads %v", ids)
	}
	n, _ := rec.mark()
	binlogExec(t, c, "INSERT INTO "+db+".x VALUES (1)")
	if got := tableSet(barrier(t, c, rec, db, n)); !slices.Equal(got, []string{db + ".x"}) {
		t.Errorf("through the replica's log: reported %v, want [%s.x]", got, db)
	}
}

// TestBinlogTailerStops: cancelling the tailer's context ends it: Done is
// closed, its goroutines are gone and the master has no dump thread of it
// left; a tailer whose master is down stops as well.
func TestBinlogTailerStops(t *testing.T) {
	if n := tailerGoroutines(); n != 0 {
		t.Fatalf("%d tailer goroutines before the test", n)
	}
	for _, master := range []func() string{env.topo.Master.Addr, func() string { return "127.0.0.1:1" }} {
		rec := &binlogRecorder{}
		ctx, cancel := context.WithCancel(context.Background())
		o := env.topo.Opts
		tl := binlog.Start(ctx, binlog.Options{Cluster: "main", Master: master, User: o.ServiceUser,
			Password: o.ServicePassword, ServerID: binlog.DefaultServerID("main", t.Name()),
			OnChange: rec.change, OnReset: rec.reset})
		pollUntil(t, "the tailer attaches or retries", func() bool {
			st := tl.Stats()
			return st.Master != "" || st.Reconnects >= 2
		})
		cancel()
		select {
		case <-tl.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the tailer did not stop within 20s of its context's end")
		}
	}
	pollUntil(t, "the tailer's goroutines end", func() bool { return tailerGoroutines() == 0 })
	pollUntil(t, "the master has no dump thread of the tailer", func() bool { return len(dumpThreads(t)) == 0 })
}

// TestBinlogTailerGrants: an account with only REPLICATION SLAVE (the
// least docs/operations.md asks an operator to grant) can run the tailer:
// it reads row-format writes; without TRIGGER it cannot see the master's
// triggers, so a statement-format write resets instead.
func TestBinlogTailerGrants(t *testing.T) {
	const db = "binlog_grants"
	c := masterConn(t)
	binlogExec(t, c, "DROP USER IF EXISTS 'binlog_only'@'%'", "CREATE USER 'binlog_only'@'%' IDENTIFIED BY 'pw'",
		"GRANT REPLICATION SLAVE ON *.* TO 'binlog_only'@'%'",
		"DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db, "CREATE TABLE "+db+".marker (id INT AUTO_INCREMENT PRIMARY KEY)",
		"CREATE TABLE "+db+".t (id INT)")
	t.Cleanup(func() {
		env.topo.Master.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db, "DROP USER IF EXISTS 'binlog_only'@'%'")
	})
	rec := &binlogRecorder{}
	ctx, cancel := context.WithCancel(context.Background())
	tl := binlog.Start(ctx, binlog.Options{Cluster: "main", Master: env.topo.Master.Addr, User: "binlog_only",
		Password: "pw", ServerID: binlog.DefaultServerID("main", t.Name()), OnChange: rec.change, OnReset: rec.reset,
		Log: testLog()})
	defer func() { cancel(); <-tl.Done() }()
	pollUntil(t, "the tailer attaches with REPLICATION SLAVE only", func() bool { return tl.Stats().Master != "" })
	barrier(t, c, rec, db, 0)
	n, resets := rec.mark()
	binlogExec(t, c, "SET SESSION binlog_format=ROW", "INSERT INTO "+db+".t VALUES (1)")
	if got := tableSet(barrier(t, c, rec, db, n)); !slices.Equal(got, []string{db + ".t"}) {
		t.Errorf("row format: reported %v, want [%s.t]", got, db)
	}
	if _, r := rec.mark(); r != resets {
		t.Errorf("row format: %d resets, want none", r-resets)
	}
	binlogExec(t, c, "SET SESSION binlog_format=STATEMENT", "INSERT INTO "+db+".t VALUES (2)", "SET SESSION binlog_format=ROW")
	pollUntil(t, "a statement-format write resets the blind tailer", func() bool {
		_, r := rec.mark()
		return r > resets
	})
	if st := tl.Stats(); st.Reconnects != 0 {
		t.Errorf("Stats %+v: reconnects with REPLICATION SLAVE only", st)
	}
}

// tailerGoroutines counts the goroutines running the tailer's code or
// go-mysql's replication package.
func tailerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sluice/health/binlog.") || strings.Contains(g, "go-mysql/replication.") {
			count++
		}
	}
	return count
}
