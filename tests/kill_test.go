package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
)

// killSluice starts a sluice whose backends have 2 connections each, so
// sessions share them; its session ids start at 1.
func killSluice(t *testing.T) string {
	t.Helper()
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 2", `pool_wait_timeout = "20s"`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv.Addr().String()
}

func masterAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(env.topo.Master.Port)) }

// killUsers creates two accounts without privileges, on the auth server
// (for sluice) and on the master (for the direct runs that are the
// oracle): neither may kill the other's threads.
func killUsers(t *testing.T) {
	t.Helper()
	stmts := []string{"CREATE USER IF NOT EXISTS 'kill_a'@'%' IDENTIFIED BY 'pw-a'",
		"CREATE USER IF NOT EXISTS 'kill_b'@'%' IDENTIFIED BY 'pw-b'"}
	if err := env.topo.Auth.Exec(ctxT(t), stmts...); err != nil {
		t.Fatal(err)
	}
	root := mustRoot(t, env.topo.Master)
	for _, q := range stmts {
		mustExec(t, root, q)
	}
	t.Cleanup(func() {
		_ = env.topo.Auth.Exec(ctxT(t), "DROP USER IF EXISTS 'kill_a'@'%'", "DROP USER IF EXISTS 'kill_b'@'%'")
		_, _ = root.ExecContext(ctxT(t), "DROP USER IF EXISTS 'kill_a'@'%', 'kill_b'@'%'")
	})
}

// userConn opens one connection of user (kill_a / kill_b) at addr.
func userConn(t *testing.T, addr, user string) *sql.Conn {
	t.Helper()
	d, err := sql.Open("mysql", dsn(addr, user, "pw-"+user[len(user)-1:], "", nil))
	if err != nil {
		t.Fatal(err)
	}
	d.SetMaxIdleConns(0)
	t.Cleanup(func() { d.Close() })
	return conn(t, d)
}

// ownID finds a connection's thread id in the process list, which both
// MariaDB and sluice show with the running statement's text: the row whose
// Info is this very query.
func ownID(t *testing.T, c *sql.Conn) uint64 {
	t.Helper()
	marker := fmt.Sprintf("whoami-%d", time.Now().UnixNano())
	q := "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%" + marker + "%' AND INFO LIKE 'SELECT ID%'"
	var id uint64
	if err := c.QueryRowContext(ctxT(t), q).Scan(&id); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return id
}

// rawLoginAs logs in at addr as user and returns the connection and the
// thread id of its greeting.
func rawLoginAs(t *testing.T, addr, user, password string) (*protocol.Conn, uint32) {
	t.Helper()
	c := rawDial(t, addr)
	g, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: user, Password: password, Capabilities: protocol.BackendCapabilities})
	if err != nil {
		t.Fatalf("login at %s: %v", addr, err)
	}
	return c, g.ConnectionID
}

// TestKillQueryCancelsOwnStatementOnly: a Connector/J-style cancel (KILL
// QUERY <greeting id> on a second connection) ends the client's own
// SELECT SLEEP(30) within 1 s with MariaDB's 1317, and a root session
// running directly on the master whose thread id is that same number is
// not touched (issue 19, item 2). The id collision is arranged: the sluice
// and master id counters are advanced, whichever is behind, until a
// logged-in sluice session and a master connection share a number.
func TestKillQueryCancelsOwnStatementOnly(t *testing.T) {
	addr := killSluice(t)
	o := env.topo.Opts
	root := mustRoot(t, env.topo.Master)
	root.SetMaxIdleConns(0)

	var victim *protocol.Conn
	var vid uint32
	var rootConn *sql.Conn
	var rid uint32
	for step := 0; vid == 0 || vid != rid; step++ {
		if step > 20000 {
			t.Fatalf("no id collision arranged: sluice at %d, master at %d", vid, rid)
		}
		if victim == nil {
			victim, vid = rawLoginAs(t, addr, o.AppUser, o.AppPassword)
		}
		if rootConn == nil {
			c, err := root.Conn(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRowContext(ctxT(t), "SELECT CONNECTION_ID()").Scan(&rid); err != nil {
				t.Fatal(err)
			}
			rootConn = c
		}
		switch {
		case vid < rid:
			victim.NetConn().Close()
			victim = nil
		case rid < vid:
			rootConn.Close()
			rootConn = nil
		}
	}
	defer rootConn.Close()
	t.Logf("sluice session %d and master thread %d", vid, rid)

	rootDone := make(chan error, 1)
	go func() {
		var v int
		err := rootConn.QueryRowContext(context.Background(), "SELECT SLEEP(5)").Scan(&v)
		if err == nil && v != 0 {
			err = fmt.Errorf("SLEEP(5) returned %d: interrupted", v)
		}
		rootDone <- err
	}()
	waitFor(t, func() bool {
		var n int
		_ = root.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO = 'SELECT SLEEP(5)'", rid).Scan(&n)
		return n == 1
	}, "the root session's SLEEP(5) on the master")

	type result struct {
		sets [][][]string
		err  error
		at   time.Time
	}
	victimDone := make(chan result, 1)
	go func() {
		sets, err := rawQuery(t, victim, "SELECT SLEEP(30)")
		victimDone <- result{sets, err, time.Now()}
	}()
	killer := conn(t, appDBAt(t, addr))
	waitFor(t, func() bool {
		rows, err := killer.QueryContext(ctxT(t), "SHOW PROCESSLIST")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, tm int64
			var user, host, cmd string
			var db, state, info sql.NullString
			var progress float64
			if err := rows.Scan(&id, &user, &host, &db, &cmd, &tm, &state, &info, &progress); err != nil {
				t.Fatal(err)
			}
			if id == int64(vid) && info.String == "SELECT SLEEP(30)" && cmd == "Query" {
				return true
			}
		}
		return false
	}, "SHOW PROCESSLIST to show the victim's SLEEP(30)")

	start := time.Now()
	if _, err := killer.ExecContext(ctxT(t), fmt.Sprintf("KILL QUERY %d", vid)); err != nil {
		t.Fatalf("KILL QUERY %d: %v", vid, err)
	}
	var r result
	select {
	case r = <-victimDone:
	case <-time.After(3 * time.Second):
		victim.NetConn().Close()
		if err := <-rootDone; err != nil {
			t.Errorf("the root session on the master with thread id %d: %v", rid, err)
		}
		t.Fatalf("the SLEEP(30) of session %d still runs 3s after KILL QUERY %d", vid, vid)
	}
	e, _ := r.err.(*protocol.SQLError)
	if e == nil || e.Code != protocol.ERQueryInterrupted.Code {
		t.Fatalf("the cancelled SLEEP(30) gave %v %v, want ERR 1317", r.sets, r.err)
	}
	if d := r.at.Sub(start); d > time.Second {
		t.Errorf("the cancelled SLEEP(30) ended %v after KILL QUERY, want within 1s", d)
	}
	if want := directInterrupted(t); e.Message != want.Message || e.State != want.State {
		t.Errorf("the cancelled statement got %d (%s) %q; MariaDB gives %d (%s) %q", e.Code, e.State, e.Message, want.Code, want.State, want.Message)
	}
	if err := <-rootDone; err != nil {
		t.Errorf("the root session on the master with thread id %d: %v", rid, err)
	}
	// The victim's session goes on.
	if v := rawValue(t, victim, "SELECT 7"); v != "7" {
		t.Errorf("after the cancel, SELECT 7 gave %q", v)
	}
}

// directInterrupted is what MariaDB sends the client whose SLEEP another
// connection of the same user kills with KILL QUERY.
func directInterrupted(t *testing.T) *protocol.SQLError {
	t.Helper()
	root := mustRoot(t, env.topo.Master)
	a := conn(t, root)
	b := conn(t, root)
	var id int64
	if err := a.QueryRowContext(ctxT(t), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := a.ExecContext(context.Background(), "SELECT SLEEP(30)"); done <- err }()
	waitFor(t, func() bool {
		var n int
		_ = b.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO = 'SELECT SLEEP(30)'", id).Scan(&n)
		return n == 1
	}, "the direct SLEEP(30)")
	mustExecC(t, b, fmt.Sprintf("KILL QUERY %d", id))
	err := <-done
	me, ok := err.(*mysql.MySQLError)
	if !ok {
		t.Fatalf("direct KILL QUERY: the victim got %v", err)
	}
	return &protocol.SQLError{Code: me.Number, State: string(me.SQLState[:]), Message: me.Message}
}

// waitFor polls cond every 10ms for up to 10s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// outcome spells what a statement gave the client, with thread ids
// replaced by their role, for comparing a direct run with one through
// sluice.
func outcome(err error, ids map[uint64]string) string {
	s := "OK"
	if err != nil {
		s = err.Error()
	}
	return idPattern.ReplaceAllStringFunc(s, func(n string) string {
		id, _ := strconv.ParseUint(n, 10, 64)
		if name, ok := ids[id]; ok {
			return name
		}
		return n
	})
}

var idPattern = regexp.MustCompile(`\b[0-9]+\b`)

// killScenario runs the KILL cases against addr (the master directly, or
// sluice) and returns what each gave.
func killScenario(t *testing.T, addr string) []string {
	a1 := userConn(t, addr, "kill_a")
	a2 := userConn(t, addr, "kill_a")
	b := userConn(t, addr, "kill_b")
	id1, idb := ownID(t, a1), ownID(t, b)
	ids := map[uint64]string{id1: "<a1>", idb: "<b>"}
	var out []string
	exec := func(c *sql.Conn, q string) {
		_, err := c.ExecContext(ctxT(t), q)
		out = append(out, idPattern.ReplaceAllStringFunc(q, func(n string) string {
			id, _ := strconv.ParseUint(n, 10, 64)
			if name, ok := ids[id]; ok {
				return name
			}
			return n
		})+" -> "+outcome(err, ids))
	}
	exec(b, fmt.Sprintf("KILL %d", id1))
	exec(b, fmt.Sprintf("KILL QUERY %d", id1))
	exec(a2, "KILL 3999999999")
	exec(a2, "KILL QUERY 3999999999")
	exec(a2, fmt.Sprintf("KILL QUERY %d", id1)) // idle: nothing to kill
	exec(a1, "SELECT 'alive'")
	exec(a2, "KILL USER kill_b") // not a2's to kill: nothing happens
	exec(b, "SELECT 'alive'")
	exec(a2, fmt.Sprintf("KILL CONNECTION %d", id1))
	waitFor(t, func() bool {
		var n int
		_ = a2.QueryRowContext(ctxT(t), fmt.Sprintf("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %d", id1)).Scan(&n)
		return n == 0
	}, "the killed session to leave the process list")
	exec(a1, "SELECT 'alive'")
	exec(a2, "KILL QUERY CONNECTION_ID()")
	exec(a2, "SELECT 'alive'")
	exec(a2, "KILL CONNECTION_ID()")
	exec(a2, "SELECT 'alive'")
	return out
}

// TestKillAnswersAsMariaDB: KILL of another user's session (1095), of an
// unknown id (1094), of an idle session's query, of a session, and of the
// client's own query and connection give the client what a single MariaDB
// server gives it (issue 19, item 2).
func TestKillAnswersAsMariaDB(t *testing.T) {
	killUsers(t)
	addr := killSluice(t)
	direct := killScenario(t, masterAddr())
	through := killScenario(t, addr)
	for i := range max(len(direct), len(through)) {
		var d, s string
		if i < len(direct) {
			d = direct[i]
		}
		if i < len(through) {
			s = through[i]
		}
		if d != s {
			t.Errorf("step %d: through sluice %q, MariaDB %q", i, s, d)
		}
	}
	t.Logf("%q", through)
}

// processRows reads SHOW [FULL] PROCESSLIST as (User, Command, Info) rows,
// without ids, hosts and times, and the column types.
func processRows(t *testing.T, c *sql.Conn, q string) ([]string, []string) {
	t.Helper()
	rows, err := c.QueryContext(ctxT(t), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cts, _ := rows.ColumnTypes()
	var types []string
	for _, ct := range cts {
		types = append(types, ct.Name()+" "+ct.DatabaseTypeName())
	}
	var out []string
	for rows.Next() {
		var id, tm int64
		var user, host, cmd string
		var db, state, info sql.NullString
		var progress float64
		if err := rows.Scan(&id, &user, &host, &db, &cmd, &tm, &state, &info, &progress); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s|%s|%v|%s", user, cmd, info.Valid, info.String))
	}
	slices.Sort(out)
	return out, types
}

// processScenario: kill_a runs SELECT SLEEP(30) on one connection and asks
// for the process list on another while kill_b idles; returns the lists
// SHOW PROCESSLIST, SHOW FULL PROCESSLIST and information_schema give.
func processScenario(t *testing.T, addr string) []string {
	a1 := userConn(t, addr, "kill_a")
	a2 := userConn(t, addr, "kill_a")
	b := userConn(t, addr, "kill_b")
	if err := b.PingContext(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	id1 := ownID(t, a1)
	done := make(chan error, 1)
	go func() { _, err := a1.ExecContext(context.Background(), "SELECT SLEEP(30)"); done <- err }()
	var list, types []string
	waitFor(t, func() bool {
		list, types = processRows(t, a2, "SHOW PROCESSLIST")
		return slices.Contains(list, "kill_a|Query|true|SELECT SLEEP(30)")
	}, "SHOW PROCESSLIST to show the running SLEEP(30)")
	out := append([]string{"SHOW PROCESSLIST"}, list...)
	out = append(out, types...)
	full, _ := processRows(t, a2, "SHOW FULL PROCESSLIST")
	out = append(append(out, "SHOW FULL PROCESSLIST"), full...)
	q := "SELECT USER, COMMAND, INFO, TIME >= 0, TIME_MS >= 0 FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Daemon' ORDER BY INFO"
	rows, err := a2.QueryContext(ctxT(t), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	cts, _ := rows.ColumnTypes()
	for _, ct := range cts {
		out = append(out, ct.Name()+" "+ct.DatabaseTypeName())
	}
	for rows.Next() {
		var user, cmd string
		var info sql.NullString
		var t1, t2 int
		if err := rows.Scan(&user, &cmd, &info, &t1, &t2); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s|%s|%v|%s|%d|%d", user, cmd, info.Valid, info.String, t1, t2))
	}
	rows.Close()
	mustExecC(t, a2, fmt.Sprintf("KILL QUERY %d", id1))
	if err := <-done; mysqlErrNumber(err) != protocol.ERQueryInterrupted.Code {
		t.Errorf("the killed SLEEP(30) gave %v, want 1317", err)
	}
	return out
}

// TestProcesslistListsOwnSessions: through sluice, SHOW [FULL]
// PROCESSLIST and information_schema.PROCESSLIST list the user's own
// sessions with their running statements, as a single MariaDB lists a
// user's own threads, and not the backends' service-account threads
// (issue 19, item 2).
func TestProcesslistListsOwnSessions(t *testing.T) {
	killUsers(t)
	addr := killSluice(t)
	direct := processScenario(t, masterAddr())
	through := processScenario(t, addr)
	if !slices.Equal(direct, through) {
		t.Errorf("through sluice:\n  %s\nMariaDB:\n  %s", strings.Join(through, "\n  "), strings.Join(direct, "\n  "))
	}
}

// TestThreadPlanNeverForwarded: SHOW EXPLAIN FOR n and the like name a
// connection by id; through sluice the id is a session's, so the statement
// must never reach a backend, where n names an unrelated thread whose plan
// (and query) it would show. A root thread on the master runs a statement
// under that number.
func TestThreadPlanNeverForwarded(t *testing.T) {
	addr := killSluice(t)
	root := mustRoot(t, env.topo.Master)
	c, err := root.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var rid uint32
	if err := c.QueryRowContext(ctxT(t), "SELECT CONNECTION_ID()").Scan(&rid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(ctxT(t), "SELECT SLEEP(2) FROM mysql.user LIMIT 1")
		done <- err
	}()
	eventually(t, ctxT(t), "the root thread running", func() error {
		var n int
		if err := root.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE 'SELECT SLEEP(2)%'", rid).Scan(&n); err != nil || n == 0 {
			return fmt.Errorf("not yet (%v)", err)
		}
		return nil
	})
	o := env.topo.Opts
	client, _ := rawLoginAs(t, addr, o.AppUser, o.AppPassword)
	for _, q := range []string{"SHOW EXPLAIN FOR %d", "SHOW ANALYZE FOR %d", "EXPLAIN FOR CONNECTION %d", "SHOW EXPLAIN FORMAT=JSON FOR %d"} {
		sets, err := rawQuery(t, client, fmt.Sprintf(q, rid))
		var se *protocol.SQLError
		if !errors.As(err, &se) || se.Code != protocol.ERNotSupportedYet.Code {
			t.Errorf("%s through sluice: %v %v, want ERR %d", fmt.Sprintf(q, rid), sets, err, protocol.ERNotSupportedYet.Code)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestCancelWhilePoolsAreBusy: a driver's cancel connection logs in with
// the application's default schema while the one pooled master connection
// runs the statement to cancel (pool_size = 1, no replicas). The login
// must not wait for a pooled connection to check the schema (the master's
// probe lists it), so the cancel reaches the statement, which ends with
// 1317 instead of running its 30 s.
func TestCancelWhilePoolsAreBusy(t *testing.T) {
	masterOnly := *env.topo
	masterOnly.Replicas = nil
	srv, err := startProxyWith(&masterOnly, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 1", `pool_wait_timeout = "40s"`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	// The master's probe lists the schema once its first round has run.
	eventually(t, ctxT(t), "the master's probe listing sluice_test", func() error {
		c := srv.Topology().Current().Cluster("main")
		if st := c.Master.Status(); st == nil || !st.Schemas.Has("sluice_test") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	addr := srv.Addr().String()
	o := env.topo.Opts
	victim, vid := rawLoginAs(t, addr, o.AppUser, o.AppPassword)
	_ = victim.NetConn().SetDeadline(time.Now().Add(60 * time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := rawQuery(t, victim, "SELECT SLEEP(30) /* busy-pool */")
		done <- err
	}()
	eventually(t, ctxT(t), "the statement running on the master", func() error {
		var n int
		if err := mustRoot(t, env.topo.Master).QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(30) /* busy-pool */'").Scan(&n); err != nil || n == 0 {
			return fmt.Errorf("not yet (%v)", err)
		}
		return nil
	})
	// The cancel connection, as Connector/J opens it: the same URL,
	// default schema included.
	c := rawDial(t, addr)
	_ = c.NetConn().SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: o.AppUser, Password: o.AppPassword, Database: "sluice_test",
		Capabilities: protocol.BackendCapabilities | protocol.ClientConnectWithDB}); err != nil {
		t.Fatalf("the cancel connection's login: %v", err)
	}
	if _, err := rawQuery(t, c, fmt.Sprintf("KILL QUERY %d", vid)); err != nil {
		t.Fatalf("KILL QUERY %d: %v", vid, err)
	}
	err = <-done
	var se *protocol.SQLError
	if !errors.As(err, &se) || se.Code != protocol.ERQueryInterrupted.Code {
		t.Fatalf("the cancelled statement ended with %v, want ERR %d", err, protocol.ERQueryInterrupted.Code)
	}
}

// TestConnectionCommandsNeverReachBackends: statements whose effect on
// connections by id sluice cannot see, or which would change the account
// every backend connection uses, are refused with 1235 before reaching a
// backend, where the service account could kill or list any thread (the
// hostile review of issue 19): dynamic SQL from a variable or an
// expression, KILL and the process list in text the parser does not read
// as the server does, SET PASSWORD / ALTER USER / SET DEFAULT ROLE of the
// current account (a comment cannot hide a FOR), a view over the process
// list. A KILL with a trailing comment is still a KILL (1094 for an id of
// no session, as MariaDB).
func TestConnectionCommandsNeverReachBackends(t *testing.T) {
	addr := killSluice(t)
	o := env.topo.Opts
	c, _ := rawLoginAs(t, addr, o.AppUser, o.AppPassword)
	if _, err := rawQuery(t, c, "USE sluice_test"); err != nil {
		t.Fatal(err)
	}
	before := serviceHash(t)
	for _, q := range []string{
		"EXECUTE IMMEDIATE 'KILL 5'",
		"EXECUTE IMMEDIATE CONCAT('KI', 'LL 5')",
		"PREPARE s FROM @q",
		"PREPARE s FROM CONCAT('KI', 'LL 5')",
		"SELECT id, info FROM information_schema.PROCESSLIST /*T! */",
		"SHOW FULL PROCESSLIST /*T! */",
		"SELECT id, info FROM information_schema.PROCESSLIST LIMIT ROWS EXAMINED 1000",
		"SHOW EXPLAIN FOR 5",
		"SET DEFAULT ROLE r19kill # FOR x\n",
		"SET PASSWORD = PASSWORD('owned')",
		"SET PASSWORD FOR CURRENT_USER() = PASSWORD('owned')",
		"ALTER USER CURRENT_USER() IDENTIFIED BY 'owned'",
		"ALTER USER '" + o.ServiceUser + "'@'%' ACCOUNT LOCK",
		"CREATE OR REPLACE VIEW pv19 AS SELECT id, info FROM information_schema.PROCESSLIST",
	} {
		_, err := rawQuery(t, c, q)
		var se *protocol.SQLError
		if !errors.As(err, &se) || se.Code != protocol.ERNotSupportedYet.Code {
			t.Errorf("%q: %v, want ERR %d", q, err, protocol.ERNotSupportedYet.Code)
		}
	}
	if after := serviceHash(t); after != before {
		t.Errorf("the service account's password hash changed: %s -> %s", before, after)
	}
	for _, q := range []string{"KILL QUERY 999999 /* action='cancel' */", "KILL 999999 # c\n"} {
		_, err := rawQuery(t, c, q)
		var se *protocol.SQLError
		if !errors.As(err, &se) || se.Code != 1094 {
			t.Errorf("%q: %v, want ERR 1094", q, err)
		}
	}
}

// serviceHash is the service account's password hash on the master.
func serviceHash(t *testing.T) string {
	var h string
	if err := mustRoot(t, env.topo.Master).QueryRowContext(ctxT(t), "SELECT Password FROM mysql.user WHERE User = ? LIMIT 1", env.topo.Opts.ServiceUser).Scan(&h); err != nil {
		t.Fatalf("reading the service account's hash: %v", err)
	}
	return h
}
