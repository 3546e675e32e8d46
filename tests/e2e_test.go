package tests

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestLoginCorrectPassword(t *testing.T) {
	d := appDB(t, "", nil)
	ctx := ctxT(t)
	var one int
	if err := d.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	var user string
	if err := d.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&user); err != nil {
		t.Fatal(err)
	}
	// Data connections use the service account, but the client sees its
	// own account, as on a direct connection ([auth] enforce_grants).
	if want := env.topo.Opts.AppUser + "@%"; user != want {
		t.Fatalf("CURRENT_USER() = %q, want %q", user, want)
	}
}

func TestLoginWrongPasswordGets1045FromAuthServer(t *testing.T) {
	d, err := sql.Open("mysql", dsn(env.addr, env.topo.Opts.AppUser, "not-the-password", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.PingContext(ctxT(t))
	if mysqlErrNumber(err) != 1045 {
		t.Fatalf("err = %v, want 1045", err)
	}
	// The auth server's own message, relayed unchanged.
	if !strings.Contains(err.Error(), "Access denied for user '"+env.topo.Opts.AppUser+"'") {
		t.Fatalf("message %q does not come from the auth server", err)
	}
}

func TestUserCreatedLaterCanLogIn(t *testing.T) {
	ctx := ctxT(t)
	if err := env.topo.Auth.Exec(ctx, "CREATE USER 'late'@'%' IDENTIFIED BY 'late-pw'", "GRANT ALL ON *.* TO 'late'@'%'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.topo.Auth.Exec(ctxT(t), "DROP USER IF EXISTS 'late'@'%'") })
	d, err := sql.Open("mysql", dsn(env.addr, "late", "late-pw", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var one int
	if err := d.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("new user cannot log in through sluice: %v", err)
	}
}

func TestUnknownSchemaFailsLoginWith1049(t *testing.T) {
	d := appDB(t, "no_such_schema", nil)
	err := d.PingContext(ctxT(t))
	if mysqlErrNumber(err) != 1049 {
		t.Fatalf("err = %v, want 1049 Unknown database", err)
	}
}

func TestReadsRotateAcrossReplicas(t *testing.T) {
	d := appDB(t, "", nil)
	ctx := ctxT(t)
	seen := map[uint32]int{}
	// Each session keeps one replica connection; sessions rotate.
	for range 8 {
		c, err := d.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[serverID(t, ctx, c, "")]++
		c.Raw(func(any) error { return driverBadConn })
		c.Close()
	}
	for id := range seen {
		if !env.replicaIDs[id] {
			t.Fatalf("a read landed on server %d, which is not a replica (seen %v)", id, seen)
		}
	}
	if len(seen) != len(env.replicaIDs) {
		t.Fatalf("reads reached %d replicas, want all %d: %v", len(seen), len(env.replicaIDs), seen)
	}
}

func TestWritesAndDDLLandOnMaster(t *testing.T) {
	d := appDB(t, "sluice_test", nil)
	ctx := ctxT(t)
	mustExec(t, d, "CREATE TABLE w_land (id INT PRIMARY KEY, sid INT)")
	t.Cleanup(func() { _, _ = d.ExecContext(ctxT(t), "DROP TABLE IF EXISTS w_land") })
	// DDL run on a replica would never reach the master.
	var n int
	if err := mustRoot(t, env.topo.Master).QueryRowContext(ctx,
		"SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='sluice_test' AND table_name='w_land'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("table on master: %d, %v", n, err)
	}
	// @@server_id evaluated by the server that runs the write.
	mustExec(t, d, "INSERT INTO w_land VALUES (1, @@server_id)")
	mustExec(t, d, "INSERT INTO w_land VALUES (2, 0)")
	mustExec(t, d, "UPDATE w_land SET sid = @@server_id WHERE id = 2")
	res, err := d.ExecContext(ctx, "DELETE FROM w_land WHERE id = 2 AND sid = @@server_id")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("DELETE ... sid = @@server_id affected %d rows, want 1 (UPDATE ran elsewhere?)", n)
	}
	var sid uint32
	if err := mustRoot(t, env.topo.Master).QueryRowContext(ctx, "SELECT sid FROM sluice_test.w_land WHERE id = 1").Scan(&sid); err != nil {
		t.Fatal(err)
	}
	if sid != env.masterID {
		t.Fatalf("INSERT ran on server %d, want master %d", sid, env.masterID)
	}
}

func TestTransactionRunsOnMaster(t *testing.T) {
	d := appDB(t, "", nil)
	ctx := ctxT(t)
	c := conn(t, d)
	if id := serverID(t, ctx, c, ""); !env.replicaIDs[id] {
		t.Fatalf("read before the transaction on %d, want a replica", id)
	}
	mustExecC(t, c, "BEGIN")
	if id := serverID(t, ctx, c, ""); id != env.masterID {
		t.Fatalf("SELECT inside BEGIN ran on %d, want master %d", id, env.masterID)
	}
	mustExecC(t, c, "COMMIT")
	if id := serverID(t, ctx, c, ""); !env.replicaIDs[id] {
		t.Fatalf("read after COMMIT on %d, want a replica", id)
	}
	// autocommit=0 keeps every statement on the master until it is back on.
	mustExecC(t, c, "SET autocommit = 0")
	if id := serverID(t, ctx, c, ""); id != env.masterID {
		t.Fatalf("SELECT with autocommit=0 ran on %d, want master", id)
	}
	mustExecC(t, c, "COMMIT")
	if id := serverID(t, ctx, c, ""); id != env.masterID {
		t.Fatalf("SELECT with autocommit=0 after COMMIT ran on %d, want master", id)
	}
	mustExecC(t, c, "SET autocommit = 1")
	if id := serverID(t, ctx, c, ""); !env.replicaIDs[id] {
		t.Fatalf("read after autocommit=1 on %d, want a replica", id)
	}
	// A transaction begun by the driver (BeginTx sends START TRANSACTION).
	tx, err := d.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if id := serverID(t, ctx, tx, ""); id != env.masterID {
		t.Fatalf("SELECT in BeginTx ran on %d, want master", id)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestHintsForceTheTarget(t *testing.T) {
	d := appDB(t, "", nil)
	ctx := ctxT(t)
	c := conn(t, d)
	if id := serverID(t, ctx, c, "/* sluice:master */ "); id != env.masterID {
		t.Fatalf("/* sluice:master */ SELECT ran on %d, want master %d", id, env.masterID)
	}
	if id := serverID(t, ctx, c, "/*sluice:replica*/ "); !env.replicaIDs[id] {
		t.Fatalf("/* sluice:replica */ SELECT ran on %d, want a replica", id)
	}
}

func TestSessionStateFollowsToReplica(t *testing.T) {
	d := appDB(t, "", nil)
	ctx := ctxT(t)
	c := conn(t, d)
	mustExecC(t, c, "USE sluice_test")
	mustExecC(t, c, "SET NAMES utf8mb4 COLLATE utf8mb4_bin")
	mustExecC(t, c, "SET SESSION sql_mode = 'ANSI_QUOTES,NO_ENGINE_SUBSTITUTION'")
	mustExecC(t, c, "SET @@session.time_zone = '+05:30'")
	var db, cs, coll, mode, tz string
	var id uint32
	err := c.QueryRowContext(ctx, "SELECT DATABASE(), @@character_set_client, @@collation_connection, @@sql_mode, @@time_zone, @@server_id").
		Scan(&db, &cs, &coll, &mode, &tz, &id)
	if err != nil {
		t.Fatal(err)
	}
	if !env.replicaIDs[id] {
		t.Fatalf("the read ran on %d, want a replica", id)
	}
	if db != "sluice_test" || cs != "utf8mb4" || coll != "utf8mb4_bin" || mode != "ANSI_QUOTES,NO_ENGINE_SUBSTITUTION" || tz != "+05:30" {
		t.Fatalf("replica session state: db=%q charset=%q collation=%q sql_mode=%q time_zone=%q", db, cs, coll, mode, tz)
	}
	// COM_INIT_DB (the driver's own) is tracked too.
	c2 := conn(t, appDB(t, "sluice_test", nil))
	if err := c2.QueryRowContext(ctx, "SELECT DATABASE(), @@server_id").Scan(&db, &id); err != nil || db != "sluice_test" || !env.replicaIDs[id] {
		t.Fatalf("schema from the handshake: %q on %d, %v", db, id, err)
	}
}

func TestBlob20MBRoundTrips(t *testing.T) {
	// Binary prepared statements arrive with the client-matrix issue: the
	// driver interpolates the 20 MB parameter into the query text.
	d := appDB(t, "sluice_test", func(c *mysql.Config) { c.InterpolateParams = true })
	ctx := ctxT(t)
	mustExec(t, d, "CREATE TABLE blob20 (id INT PRIMARY KEY, b LONGBLOB)")
	t.Cleanup(func() { _, _ = d.ExecContext(ctxT(t), "DROP TABLE IF EXISTS blob20") })
	blob := make([]byte, 20<<20)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ExecContext(ctx, "INSERT INTO blob20 VALUES (1, ?)", blob); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := d.QueryRowContext(ctx, "/* sluice:master */ SELECT b FROM blob20 WHERE id = 1").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, blob) {
		t.Fatalf("blob from master differs: %d bytes", len(got))
	}
	if err := env.topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := d.QueryRowContext(ctx, "SELECT b FROM blob20 WHERE id = 1").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, blob) {
		t.Fatalf("blob from replica differs: %d bytes", len(got))
	}
}

func TestMultiStatementReturnsAllResultSets(t *testing.T) {
	d := appDB(t, "", func(c *mysql.Config) { c.MultiStatements = true })
	ctx := ctxT(t)
	rows, err := d.QueryContext(ctx, "SELECT 1; SELECT 2, 3; SELECT @@server_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sets [][]string
	for {
		cols, _ := rows.Columns()
		var set []string
		for rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				set = append(set, string(v))
			}
		}
		sets = append(sets, set)
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(sets) != 3 || fmt.Sprint(sets[0]) != "[1]" || fmt.Sprint(sets[1]) != "[2 3]" {
		t.Fatalf("result sets = %v", sets)
	}
	// Multi-statement text may mix reads and writes: it runs on the master.
	if sets[2][0] != fmt.Sprint(env.masterID) {
		t.Fatalf("multi-statement ran on %s, want master %d", sets[2][0], env.masterID)
	}
}

// TestNoBackslashEscapesSendsAmbiguousTextToMaster: under
// NO_BACKSLASH_ESCAPES a backslash does not escape, so a text that is one
// harmless SELECT in the default mode may hide a second statement. Such a
// text runs on the master, never on a replica.
func TestNoBackslashEscapesSendsAmbiguousTextToMaster(t *testing.T) {
	d := appDB(t, "sluice_test", func(c *mysql.Config) { c.MultiStatements = true })
	mustExec(t, d, "CREATE TABLE nbe_t (sid INT)")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS nbe_t") })
	c := conn(t, d)
	ctx := ctxT(t)
	mustExecC(t, c, "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'")
	rows, err := c.QueryContext(ctx, `SELECT 'a\'; INSERT INTO nbe_t VALUES (@@server_id); -- '`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
	}
	for rows.NextResultSet() {
	}
	rows.Close()
	var sid uint32
	if err := mustRoot(t, env.topo.Master).QueryRowContext(ctx, "SELECT sid FROM sluice_test.nbe_t").Scan(&sid); err != nil {
		t.Fatalf("the hidden INSERT did not run on the master: %v", err)
	}
	if sid != env.masterID {
		t.Fatalf("hidden INSERT ran on %d", sid)
	}
	// What such a text changed is unknown: the session stays on the
	// master, where it ran.
	if id := serverID(t, ctx, c, ""); id != env.masterID {
		t.Fatalf("a read after the ambiguous text went to %d, want the master", id)
	}
}

// TestMasterLostInsideTransactionClosesSession: when the master connection
// of an open transaction dies, the client gets 2013 and its connection is
// closed; nothing after it can run in autocommit mode and commit half a
// transaction.
func TestMasterLostInsideTransactionClosesSession(t *testing.T) {
	d := appDB(t, "sluice_test", nil)
	mustExec(t, d, "CREATE TABLE lost_tx (id INT PRIMARY KEY)")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS lost_tx") })
	c := conn(t, d)
	ctx := ctxT(t)
	mustExecC(t, c, "BEGIN")
	mustExecC(t, c, "INSERT INTO lost_tx VALUES (1)")
	backendID, _ := backendThread(t, ctx, c, "SELECT SLEEP(0.5) /* lost-tx */", "lost-tx", env.topo.Master)
	if err := env.topo.Master.Exec(ctx, fmt.Sprintf("KILL %d", backendID)); err != nil {
		t.Fatal(err)
	}
	_, err := c.ExecContext(ctx, "INSERT INTO lost_tx VALUES (2)")
	if mysqlErrNumber(err) != 2013 {
		t.Fatalf("statement after the master connection died: %v, want 2013", err)
	}
	// The session is gone: the driver sees a dead connection.
	if _, err := c.ExecContext(ctx, "INSERT INTO lost_tx VALUES (3)"); err == nil {
		t.Fatal("the session accepted a statement after losing its transaction")
	}
	var n int
	if err := mustRoot(t, env.topo.Master).QueryRowContext(ctx, "SELECT COUNT(*) FROM sluice_test.lost_tx").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows committed: %d, %v; want none", n, err)
	}
}

// TestShowWarningsAsksThePreviousBackend: SHOW WARNINGS after a read that
// ran on a replica is answered by that replica, which holds the warnings.
func TestShowWarningsAsksThePreviousBackend(t *testing.T) {
	c := conn(t, appDB(t, "", nil))
	ctx := ctxT(t)
	for _, prefix := range []string{"", "/* sluice:master */ "} {
		var v int
		if err := c.QueryRowContext(ctx, prefix+"SELECT CAST('12abc' AS SIGNED)").Scan(&v); err != nil || v != 12 {
			t.Fatalf("%sCAST: %d %v", prefix, v, err)
		}
		var level, msg string
		var code int
		if err := c.QueryRowContext(ctx, "SHOW WARNINGS").Scan(&level, &code, &msg); err != nil {
			t.Fatalf("SHOW WARNINGS after %q: %v", prefix+"SELECT", err)
		}
		if code != 1292 {
			t.Fatalf("SHOW WARNINGS after %q: %s %d %s", prefix+"SELECT", level, code, msg)
		}
		// After an error, SHOW ERRORS asks the connection that failed.
		if _, err := c.ExecContext(ctx, prefix+"SELECT * FROM no_such_db.no_such_table"); err == nil {
			t.Fatal("selecting from a missing table succeeded")
		}
		var ecode int
		if err := c.QueryRowContext(ctx, "SHOW ERRORS").Scan(&level, &ecode, &msg); err != nil || ecode != 1146 {
			t.Fatalf("SHOW ERRORS after a failed %q: %d %q %v", prefix+"SELECT", ecode, msg, err)
		}
		var n int
		if err := c.QueryRowContext(ctx, prefix+"SELECT CAST('7x' AS SIGNED)").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "SELECT @@warning_count").Scan(&n); err != nil || n != 1 {
			t.Fatalf("@@warning_count after %q: %d %v", prefix+"SELECT", n, err)
		}
	}
}
