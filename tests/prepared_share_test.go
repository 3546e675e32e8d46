package tests

import (
	"database/sql"
	"fmt"
	"strconv"
	"testing"

	"github.com/sluice-proxy/sluice/sandbox"
)

// Reproducers from the review of backend statement sharing (commit
// 734bfc9): each runs the same client steps on direct connections to the
// master and through a sluice, and requires the client to see the same.

// compareDirect runs steps once with connections opened directly on the
// master (as root) and once through a fresh sluice with o's keys (as the app
// user), and fails when the two transcripts differ.
func compareDirect(t *testing.T, o sandbox.SluiceOptions, steps func(open func() *sql.Conn) []string) {
	t.Helper()
	direct, err := sql.Open("mysql", dsn(env.topo.Master.Addr(), "root", "", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	want := steps(func() *sql.Conn { return conn(t, direct) })
	srv, err := startProxyWith(env.topo, o)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	via, err := sql.Open("mysql", dsn(srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer via.Close()
	got := steps(func() *sql.Conn { return conn(t, via) })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("through sluice %q\ndirect         %q", got, want)
	}
}

// stmtValue executes st (no parameters) and returns its one value, or the
// error number.
func stmtValue(t *testing.T, st *sql.Stmt, args ...any) string {
	t.Helper()
	var v sql.NullString
	if err := st.QueryRowContext(ctxT(t), args...).Scan(&v); err != nil {
		if n := mysqlErrNumber(err); n != 0 {
			return "ERR " + strconv.Itoa(int(n))
		}
		return "error " + err.Error()
	}
	if !v.Valid {
		return "NULL"
	}
	return v.String
}

func mustPrepare(t *testing.T, c *sql.Conn, q string) *sql.Stmt {
	t.Helper()
	st, err := c.PrepareContext(ctxT(t), q)
	if err != nil {
		t.Fatalf("prepare %q: %v", q, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// pipesText reads as 1 OR 2 (1) unless sql_mode has PIPES_AS_CONCAT when
// it is prepared ('12'); the server parses a statement once, at its
// PREPARE. It raises no warning (a held warning would pin the session).
const pipesText = "/* sluice:master */ SELECT 1 || 2"

// TestPreparedSQLModeOverwriteSharesStale: a session prepares the same text
// under one setting and then, after a SET of the same variable, once more.
// The second SET replaces the first in the replayed list, so the
// connection's count of replayed SETs (the cache key's "state") stays 1,
// and the second PREPARE's backend statement replaces the first one in the
// cache: the first statement then runs the second's parse.
func TestPreparedSQLModeOverwriteSharesStale(t *testing.T) {
	for _, c := range []struct{ first, second, text string }{
		{"SET SESSION sql_mode = ''", "SET SESSION sql_mode = 'PIPES_AS_CONCAT'", pipesText},
		{"SET NAMES latin1", "SET NAMES utf8mb4", "/* sluice:master */ SELECT CHARSET('x')"},
	} {
		t.Run(c.second, func(t *testing.T) {
			compareDirect(t, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 1"}}, func(open func() *sql.Conn) []string {
				conn := open()
				mustExecC(t, conn, c.first)
				s1 := mustPrepare(t, conn, c.text)
				mustExecC(t, conn, c.second)
				s2 := mustPrepare(t, conn, c.text)
				return []string{stmtValue(t, s1), stmtValue(t, s2)}
			})
		})
	}
}

// TestPreparedReprepareUsesCurrentSQLMode: a statement prepared under
// an empty sql_mode is executed after the session set PIPES_AS_CONCAT, on a
// connection that has to prepare it again (another session's different
// state reset it meanwhile). sluice prepares it under the session's
// current sql_mode, not the one of its PREPARE.
func TestPreparedReprepareUsesCurrentSQLMode(t *testing.T) {
	compareDirect(t, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 1"}}, func(open func() *sql.Conn) []string {
		a, b := open(), open()
		mustExecC(t, a, "SET SESSION sql_mode = ''")
		s := mustPrepare(t, a, pipesText)
		out := []string{stmtValue(t, s)}
		mustExecC(t, a, "SET SESSION sql_mode = 'PIPES_AS_CONCAT'")
		// b's state (no SET) is not a's: sluice resets the one
		// connection for b, and a's statement goes with the reset.
		var one int
		if err := b.QueryRowContext(ctxT(t), "/* sluice:master */ SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
		return append(out, stmtValue(t, s))
	})
}

// TestPreparedRowCountAfterOtherSession: ROW_COUNT() and FOUND_ROWS() in a
// prepared statement are left to the backend connection that runs it
// (dataplane/scoped.go connIDText), so a session that prepares one keeps
// its connections from then on; otherwise another session's statement may
// run on that connection in between, and the prepared SELECT ROW_COUNT() /
// FOUND_ROWS() reads that session's value. (pool_size 2: a keeps one.)
func TestPreparedRowCountAfterOtherSession(t *testing.T) {
	o := sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 2", `consistency = "strong"`}}
	compareDirect(t, o, func(open func() *sql.Conn) []string {
		a, b := open(), open()
		root := mustRoot(t, env.topo.Master)
		mustExec(t, root, "CREATE OR REPLACE TABLE sluice_test.ps_rc (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
		t.Cleanup(func() { mustExec(t, root, "DROP TABLE IF EXISTS sluice_test.ps_rc") })
		mustExecC(t, a, "INSERT INTO sluice_test.ps_rc (v) VALUES (1), (2), (3)")
		rc := mustPrepare(t, a, "SELECT ROW_COUNT()")
		fr := mustPrepare(t, a, "SELECT FOUND_ROWS()")
		lid := mustPrepare(t, a, "SELECT LAST_INSERT_ID()")
		var out []string
		mustExecC(t, a, "UPDATE sluice_test.ps_rc SET v = v + 1")
		// b runs a statement of its own: through sluice on the one
		// pooled connection, directly on its own.
		mustExecC(t, b, "DELETE FROM sluice_test.ps_rc WHERE id = 999")
		out = append(out, "row_count "+stmtValue(t, rc))
		rows, err := a.QueryContext(ctxT(t), "SELECT id FROM sluice_test.ps_rc")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
		}
		rows.Close()
		var one int
		if err := b.QueryRowContext(ctxT(t), "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
		out = append(out, "found_rows "+stmtValue(t, fr))
		mustExecC(t, a, "INSERT INTO sluice_test.ps_rc (v) VALUES (4)")
		mustExecC(t, b, "INSERT INTO sluice_test.ps_rc (v) VALUES (5)")
		return append(out, "last_insert_id "+stmtValue(t, lid))
	})
}

// TestPreparedSchemaDroppedBeforeReprepare: a statement that names no
// table, prepared in a schema that is dropped afterwards, still executes on
// a server. sluice prepares it again under that schema on a connection that
// lost it (evicted by another session's statement, backend_statement_cache
// = 1); COM_INIT_DB of the dropped schema fails there, and a statement
// that names no table is then prepared in the current one.
func TestPreparedSchemaDroppedBeforeReprepare(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	o := sandbox.SluiceOptions{ProxyKeys: []string{"backend_statement_cache = 1"},
		ClusterKeys: []string{"pool_size = 1", `consistency = "strong"`}}
	compareDirect(t, o, func(open func() *sql.Conn) []string {
		mustExec(t, root, "CREATE DATABASE IF NOT EXISTS ps_drop_x")
		mustExec(t, root, "CREATE DATABASE IF NOT EXISTS ps_drop_y")
		t.Cleanup(func() {
			mustExec(t, root, "DROP DATABASE IF EXISTS ps_drop_x")
			mustExec(t, root, "DROP DATABASE IF EXISTS ps_drop_y")
		})
		a, b := open(), open()
		mustExecC(t, a, "USE ps_drop_x")
		s := mustPrepare(t, a, "SELECT ? + 1")
		out := []string{stmtValue(t, s, 1)}
		mustExecC(t, a, "USE ps_drop_y")
		mustExec(t, root, "DROP DATABASE ps_drop_x")
		mustExecC(t, b, "USE ps_drop_y")
		other := mustPrepare(t, b, "SELECT ? + 2")
		out = append(out, stmtValue(t, other, 1))
		return append(out, stmtValue(t, s, 2))
	})
}

// TestPreparedClosedStatementsCountOnServer: a client that prepares and
// closes statements one at a time never holds more than one on the server.
// Through sluice the closed ones stay prepared in the connection's cache,
// and a server whose max_prepared_stmt_count leaves room for a few gets
// 1461 at a PREPARE the client could make directly: sluice does not make
// room in its cache when the server is full.
func TestPreparedClosedStatementsCountOnServer(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	var old int64
	if err := root.QueryRowContext(ctxT(t), "SELECT @@GLOBAL.max_prepared_stmt_count").Scan(&old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mustExec(t, root, "SET GLOBAL max_prepared_stmt_count = "+strconv.FormatInt(old, 10)) })
	o := sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 1", `consistency = "strong"`}}
	compareDirect(t, o, func(open func() *sql.Conn) []string {
		c := open()
		base := globalStatus(t, root, "Prepared_stmt_count")
		mustExec(t, root, "SET GLOBAL max_prepared_stmt_count = "+strconv.FormatInt(base+2, 10))
		defer mustExec(t, root, "SET GLOBAL max_prepared_stmt_count = "+strconv.FormatInt(old, 10))
		var out []string
		for i := range 4 {
			st, err := c.PrepareContext(ctxT(t), "SELECT "+strconv.Itoa(i)+" + ?")
			if err != nil {
				out = append(out, fmt.Sprintf("prepare %d: ERR %d", i, mysqlErrNumber(err)))
				continue
			}
			out = append(out, stmtValue(t, st, 1))
			st.Close()
		}
		return out
	})
}

// TestPreparedStaleStatementServesOtherSession: the overwritten-SET stale
// entry of TestPreparedSQLModeOverwriteSharesStale poisons other sessions.
// Session a prepares "SELECT 1 || 2" on the master under an empty sql_mode,
// then sets PIPES_AS_CONCAT: the connection's replayed list is now
// [PIPES_AS_CONCAT], one entry as before, and the cached statement (parsed
// as OR) keeps its key. Session c, which set PIPES_AS_CONCAT and prepared
// the text on a replica, executes it inside a transaction on that master
// connection (its state matches, no reset) and runs a's parse.
func TestPreparedStaleStatementServesOtherSession(t *testing.T) {
	compareDirect(t, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 1"}}, func(open func() *sql.Conn) []string {
		const text = "SELECT 1 || 2"
		a, c := open(), open()
		mustExecC(t, c, "SET SESSION sql_mode = 'PIPES_AS_CONCAT'")
		mustExecC(t, a, "SET SESSION sql_mode = ''")
		mustExecC(t, a, "BEGIN")
		sa := mustPrepare(t, a, text)
		out := []string{stmtValue(t, sa)}
		mustExecC(t, a, "COMMIT")
		mustExecC(t, a, "SET SESSION sql_mode = 'PIPES_AS_CONCAT'")
		sc := mustPrepare(t, c, text)
		mustExecC(t, c, "BEGIN")
		out = append(out, stmtValue(t, sc))
		mustExecC(t, c, "COMMIT")
		return out
	})
}
