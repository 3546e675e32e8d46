package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// globalStatus reads one global status counter of a backend.
func globalStatus(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	var n string
	var v int64
	if err := db.QueryRowContext(ctxT(t), "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&n, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// preparedCounts returns Prepared_stmt_count of every backend.
func preparedCounts(t *testing.T) []int64 {
	var out []int64
	for _, s := range append([]*sandboxServer{env.topo.Master}, env.topo.Replicas...) {
		out = append(out, globalStatus(t, mustRoot(t, s), "Prepared_stmt_count"))
	}
	return out
}

func TestPreparedStatementsRouteAndBindTypes(t *testing.T) {
	// No interpolateParams: the binary protocol.
	d := appDB(t, "sluice_test", func(c *mysql.Config) { c.ParseTime = true })
	ctx := ctxT(t)
	mustExec(t, d, "CREATE TABLE ps_t (id INT PRIMARY KEY, sid INT, s VARCHAR(32), f DOUBLE, ts DATETIME(6), b BLOB, n INT)")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS ps_t") })
	c := conn(t, d)
	ins, err := c.PrepareContext(ctx, "INSERT INTO ps_t VALUES (?, @@server_id, ?, ?, ?, ?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	when := time.Date(2026, 11, 29, 10, 11, 12, 123456000, time.UTC)
	for i := range 3 {
		if _, err := ins.ExecContext(ctx, i, "row "+strconv.Itoa(i), 1.5*float64(i), when, []byte{0, 1, byte(i)}, nil); err != nil {
			t.Fatalf("execute %d: %v", i, err)
		}
	}
	var sid uint32
	var s string
	var f float64
	var ts time.Time
	var b []byte
	var n sql.NullInt64
	q := "/* sluice:master */ SELECT sid, s, f, ts, b, n FROM ps_t WHERE id = ?"
	if err := c.QueryRowContext(ctx, q, 2).Scan(&sid, &s, &f, &ts, &b, &n); err != nil {
		t.Fatal(err)
	}
	if sid != env.masterID || s != "row 2" || f != 3 || !ts.Equal(when) || !bytes.Equal(b, []byte{0, 1, 2}) || n.Valid {
		t.Fatalf("row 2 = %d %q %v %v % x %v", sid, s, f, ts, b, n)
	}
	// A prepared read runs on a replica.
	sel, err := c.PrepareContext(ctx, "SELECT @@server_id, ? + 1")
	if err != nil {
		t.Fatal(err)
	}
	defer sel.Close()
	var id uint32
	var plus int
	for i := range 3 {
		if err := sel.QueryRowContext(ctx, i).Scan(&id, &plus); err != nil {
			t.Fatal(err)
		}
		if !env.replicaIDs[id] || plus != i+1 {
			t.Fatalf("prepared read: server %d, %d", id, plus)
		}
	}
	// Inside a transaction the same statement is prepared on the master.
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.StmtContext(ctx, sel).QueryRowContext(ctx, 41).Scan(&id, &plus); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if id != env.masterID || plus != 42 {
		t.Fatalf("prepared read in a transaction: server %d, %d", id, plus)
	}
}

// TestPreparedStatementCyclesLeaveNoBackendStatements: 10,000 prepare /
// execute / close cycles of two texts through a sluice whose backend
// connections cache 2 statements each leave every backend's
// Prepared_stmt_count at most pool_size × 2 above where it started, and so
// does a session that leaves with statements still open: nothing leaks per
// cycle or per session, and the cache is shared, not per client.
func TestPreparedStatementCyclesLeaveNoBackendStatements(t *testing.T) {
	const poolSize, cache = 4, 2
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ProxyKeys: []string{"backend_statement_cache = " + strconv.Itoa(cache)},
		ClusterKeys: []string{"pool_size = " + strconv.Itoa(poolSize)}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	o := env.topo.Opts
	d, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before := preparedCounts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := conn(t, d)
	for i := range 10000 {
		q := "SELECT ? + 0"
		if i%2 == 1 {
			q = "/* sluice:master */ SELECT ? + 0"
		}
		st, err := c.PrepareContext(ctx, q)
		if err != nil {
			t.Fatalf("cycle %d prepare: %v", i, err)
		}
		var v int
		if err := st.QueryRowContext(ctx, i).Scan(&v); err != nil || v != i {
			t.Fatalf("cycle %d execute: %d, %v", i, v, err)
		}
		if err := st.Close(); err != nil {
			t.Fatalf("cycle %d close: %v", i, err)
		}
	}
	checkPreparedGrowth(t, before, poolSize*cache, "after 10,000 cycles")
	// Statements left open when the client goes away stay within the
	// bound too.
	c2, err := d.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		st, err := c2.PrepareContext(ctx, "SELECT ?, "+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		_ = st // left open on purpose
	}
	c2.Raw(func(any) error { return driverBadConn })
	c2.Close()
	checkPreparedGrowth(t, before, poolSize*cache, "after the client left")
}

// checkPreparedGrowth fails unless every backend's Prepared_stmt_count is
// at most bound above before. COM_STMT_CLOSE has no answer, so a close
// sluice sent may still be on its way: it polls until the deadline.
func checkPreparedGrowth(t *testing.T, before []int64, bound int64, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := preparedCounts(t)
		over := false
		for i := range now {
			over = over || now[i]-before[i] > bound
		}
		if !over {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prepared_stmt_count %s = %v, started at %v: more than %d above", when, now, before, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPreparedStatementMaxPerSession(t *testing.T) {
	srv, err := startProxy(env.topo, `max_prepared_statements = 3`)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	d, _ := sql.Open("mysql", dsn(srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "", nil))
	defer d.Close()
	c := conn(t, d)
	ctx := ctxT(t)
	var open []*sql.Stmt
	for i := range 3 {
		st, err := c.PrepareContext(ctx, "SELECT "+strconv.Itoa(i)+" + ?")
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, st)
	}
	_, err = c.PrepareContext(ctx, "SELECT 9 + ?")
	if mysqlErrNumber(err) != 1461 {
		t.Fatalf("4th statement: %v, want 1461", err)
	}
	open[0].Close()
	st, err := c.PrepareContext(ctx, "SELECT 9 + ?")
	if err != nil {
		t.Fatalf("after closing one: %v", err)
	}
	st.Close()
}

// TestPreparedStatementSurvivesReplicaLoss: a statement prepared on a
// replica still executes after that replica dies (re-prepared elsewhere).
func TestPreparedStatementSurvivesReplicaLoss(t *testing.T) {
	d := appDB(t, "", nil)
	ctx := ctxT(t)
	c := conn(t, d)
	st, err := c.PrepareContext(ctx, "SELECT @@server_id, ?")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var id uint32
	var v string
	if err := st.QueryRowContext(ctx, "a").Scan(&id, &v); err != nil || !env.replicaIDs[id] {
		t.Fatalf("first execute on %d: %v", id, err)
	}
	var victim *sandboxServer
	for _, r := range env.topo.Replicas {
		if r.ServerID == id {
			victim = r
		}
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := victim.Start(ctx); err != nil {
			t.Errorf("restart: %v", err)
		}
		waitBackendUp(t, env.srv, victim.Addr())
	})
	for i := range 3 {
		if err := st.QueryRowContext(ctx, "b").Scan(&id, &v); err != nil {
			t.Fatalf("execute %d after the replica died: %v", i, err)
		}
		if id == victim.ServerID || v != "b" {
			t.Fatalf("execute %d after the replica died: server %d, %q", i, id, v)
		}
	}
}

// TestPreparedStatementLongData5MB: a 5 MB parameter sent with
// COM_STMT_SEND_LONG_DATA round-trips.
func TestPreparedStatementLongData5MB(t *testing.T) {
	// A small max_allowed_packet makes the driver send the value in
	// COM_STMT_SEND_LONG_DATA chunks.
	d := appDB(t, "sluice_test", func(c *mysql.Config) { c.MaxAllowedPacket = 4 << 20 })
	ctx := ctxT(t)
	mustExec(t, d, "CREATE TABLE ld_t (id INT PRIMARY KEY, b LONGBLOB)")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS ld_t") })
	blob := make([]byte, 5<<20)
	rand.Read(blob)
	master := mustRoot(t, env.topo.Master)
	before := globalStatus(t, master, "Com_stmt_send_long_data")
	if _, err := d.ExecContext(ctx, "INSERT INTO ld_t VALUES (?, ?)", 1, blob); err != nil {
		t.Fatal(err)
	}
	if globalStatus(t, master, "Com_stmt_send_long_data") == before {
		t.Fatal("the driver did not use COM_STMT_SEND_LONG_DATA; the test proves nothing")
	}
	var got []byte
	if err := d.QueryRowContext(ctx, "/* sluice:master */ SELECT b FROM ld_t WHERE id = ?", 1).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, blob) {
		t.Fatalf("5 MB parameter came back as %d different bytes", len(got))
	}
}

func TestSQLLevelPrepareExecute(t *testing.T) {
	c := conn(t, appDB(t, "", nil))
	ctx := ctxT(t)
	mustExecC(t, c, "PREPARE s1 FROM 'SELECT @@server_id, ? * 2'")
	mustExecC(t, c, "SET @a = 21")
	var id uint32
	var v int
	if err := c.QueryRowContext(ctx, "EXECUTE s1 USING @a").Scan(&id, &v); err != nil {
		t.Fatal(err)
	}
	if v != 42 || id != env.masterID {
		t.Fatalf("EXECUTE s1 = %d on %d, want 42 on the master that holds s1", v, id)
	}
	mustExecC(t, c, "DEALLOCATE PREPARE s1")
	if _, err := c.ExecContext(ctx, "EXECUTE s1 USING @a"); mysqlErrNumber(err) != 1243 {
		t.Fatalf("EXECUTE after DEALLOCATE: %v, want 1243", err)
	}
}

// TestPreparedStatementKeepsItsSchema: a statement's unqualified tables
// name the schema of its PREPARE, after the session moves to another one
// and wherever sluice runs it, as on a single server; and two sessions
// preparing the same text in different schemas, or under different
// sql_modes, do not share it. The same
// steps run on a direct connection to the master and through sluice.
func TestPreparedStatementKeepsItsSchema(t *testing.T) {
	ctx := ctxT(t)
	root := mustRoot(t, env.topo.Master)
	for i, db := range []string{"ps_schema_a", "ps_schema_b"} {
		mustExec(t, root, "CREATE DATABASE IF NOT EXISTS "+db)
		mustExec(t, root, "CREATE OR REPLACE TABLE "+db+".t (v VARCHAR(8))")
		mustExec(t, root, "INSERT INTO "+db+".t VALUES (?)", fmt.Sprintf("from-%c", 'a'+i))
	}
	t.Cleanup(func() {
		mustExec(t, root, "DROP DATABASE IF EXISTS ps_schema_a")
		mustExec(t, root, "DROP DATABASE IF EXISTS ps_schema_b")
	})
	for _, r := range env.topo.Replicas {
		d := mustRoot(t, r)
		deadline := time.Now().Add(10 * time.Second)
		for n := 0; n != 1; {
			if time.Now().After(deadline) {
				t.Fatalf("replica %s lacks ps_schema_b.t", r.Addr())
			}
			_ = d.QueryRowContext(ctx, "SELECT COUNT(*) FROM ps_schema_b.t").Scan(&n)
			if n != 1 {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	steps := func(a, b *sql.Conn) []string {
		var out []string
		get := func(st *sql.Stmt) {
			var v string
			err := st.QueryRowContext(ctx).Scan(&v)
			out = append(out, fmt.Sprint(v, " ", mysqlErrNumber(err)))
		}
		mustExecC(t, a, "USE ps_schema_a")
		mustExecC(t, b, "USE ps_schema_b")
		sa, err := a.PrepareContext(ctx, "SELECT v FROM t")
		if err != nil {
			t.Fatal(err)
		}
		defer sa.Close()
		sb, err := b.PrepareContext(ctx, "SELECT v FROM t")
		if err != nil {
			t.Fatal(err)
		}
		defer sb.Close()
		for range 4 {
			get(sa)
			get(sb)
		}
		mustExecC(t, a, "USE ps_schema_b")
		mustExecC(t, b, "USE ps_schema_a")
		for range 4 {
			get(sa)
			get(sb)
		}
		// Under ANSI_QUOTES "v" is the column, else a string: the
		// same text is two statements.
		mustExecC(t, a, "SET SESSION sql_mode = 'ANSI_QUOTES'")
		qa, err := a.PrepareContext(ctx, `SELECT "v" FROM t`)
		if err != nil {
			t.Fatal(err)
		}
		defer qa.Close()
		qb, err := b.PrepareContext(ctx, `SELECT "v" FROM t`)
		if err != nil {
			t.Fatal(err)
		}
		defer qb.Close()
		for range 4 {
			get(qa)
			get(qb)
		}
		return out
	}
	o := env.topo.Opts
	direct, err := sql.Open("mysql", dsn(env.topo.Master.Addr(), "root", "", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	want := steps(conn(t, direct), conn(t, direct))
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	via, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer via.Close()
	got := steps(conn(t, via), conn(t, via))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("through sluice %v\ndirect         %v", got, want)
	}
}
