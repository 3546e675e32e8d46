package tests

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// These tests run the same per-session scripts directly on the sandbox
// master and through a sluice whose backends have 2 connections each, 50
// sessions at a time so that they share connections, and compare everything
// each session's client saw (issue 19, items 6 to 9: exact SET replay).

// replayStep is one statement of a session's script. prepare runs it as a
// binary prepared statement even without arguments (PHP PDO with emulation
// off); with arguments, the pools below use the binary protocol anyway.
type replayStep struct {
	q       string
	args    []any
	prepare bool
}

func st(q string, args ...any) replayStep         { return replayStep{q: q, args: args} }
func stPrepared(q string, args ...any) replayStep { return replayStep{q: q, args: args, prepare: true} }

// replaySessions is the number of concurrent sessions of each run.
const replaySessions = 50

// replayDBs returns a pool through a new sluice with pool_size = 2 and one
// directly on the master as the service account, both in the test database,
// without client-side interpolation (arguments go as binary prepared
// statements) and without idle client connections (each Conn is a new
// session).
func replayDBs(t *testing.T) (viaSluice, direct *sql.DB) {
	t.Helper()
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 2", `pool_wait_timeout = "20s"`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	o := env.topo.Opts
	open := func(dsn string) *sql.DB {
		d, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		d.SetMaxIdleConns(0)
		t.Cleanup(func() { d.Close() })
		return d
	}
	viaSluice = open(dsn(srv.Addr().String(), o.AppUser, o.AppPassword, sandbox.TestDatabase, nil))
	direct = open(env.topo.Master.DSN(o.ServiceUser, o.ServicePassword, sandbox.TestDatabase))
	return viaSluice, direct
}

// runScript runs steps on c and returns what the client saw of each: rows,
// affected rows and insert id, or the error.
func runScript(ctx context.Context, c *sql.Conn, steps []replayStep) []string {
	out := make([]string, 0, len(steps))
	for _, s := range steps {
		out = append(out, s.q+" => "+runStep(ctx, c, s))
	}
	return out
}

func runStep(ctx context.Context, c *sql.Conn, s replayStep) string {
	word := strings.ToUpper(strings.TrimSpace(s.q))
	if i := strings.Index(word, "*/"); strings.HasPrefix(word, "/*") && i > 0 {
		word = strings.TrimSpace(word[i+2:])
	}
	query := strings.HasPrefix(word, "SELECT") || strings.HasPrefix(word, "SHOW")
	var rows *sql.Rows
	var res sql.Result
	var err error
	if s.prepare {
		var ps *sql.Stmt
		if ps, err = c.PrepareContext(ctx, s.q); err == nil {
			defer ps.Close()
			if query {
				rows, err = ps.QueryContext(ctx, s.args...)
			} else {
				res, err = ps.ExecContext(ctx, s.args...)
			}
		}
	} else if query {
		rows, err = c.QueryContext(ctx, s.q, s.args...)
	} else {
		res, err = c.ExecContext(ctx, s.q, s.args...)
	}
	if err != nil {
		return describeErr(err)
	}
	if res != nil {
		n, _ := res.RowsAffected()
		id, _ := res.LastInsertId()
		return fmt.Sprintf("ok, %d affected, insert id %d", n, id)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return describeErr(err)
		}
		b.WriteString("[")
		for i, v := range vals {
			if i > 0 {
				b.WriteString(" | ")
			}
			if v.Valid {
				b.WriteString(v.String)
			} else {
				b.WriteString("NULL")
			}
		}
		b.WriteString("]")
	}
	if err := rows.Err(); err != nil {
		return describeErr(err)
	}
	return b.String()
}

// describeErr writes an error as the client sees it: a server ERR's code and
// message, or "connection closed" for a connection the other end closed.
func describeErr(err error) string {
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me):
		return fmt.Sprintf("ERR %d: %s", me.Number, me.Message)
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn), errors.Is(err, sql.ErrConnDone):
		return "connection closed"
	}
	return "error: " + err.Error()
}

// runSessions runs script(i) for replaySessions concurrent sessions of d.
func runSessions(t *testing.T, d *sql.DB, script func(i int) []replayStep) [][]string {
	t.Helper()
	ctx := ctxT(t)
	out := make([][]string, replaySessions)
	var wg sync.WaitGroup
	for i := range replaySessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.Conn(ctx)
			if err != nil {
				out[i] = []string{"connect: " + describeErr(err)}
				return
			}
			defer c.Close()
			out[i] = runScript(ctx, c, script(i))
		}()
	}
	wg.Wait()
	return out
}

// compareReplay runs the sessions' scripts directly on the master and then
// through sluice (setup runs before each run) and fails on the first
// difference of each session.
func compareReplay(t *testing.T, setup func(d *sql.DB), script func(i int) []replayStep) {
	t.Helper()
	viaSluice, direct := replayDBs(t)
	if setup != nil {
		setup(direct)
	}
	want := runSessions(t, direct, script)
	if setup != nil {
		setup(direct)
	}
	got := runSessions(t, viaSluice, script)
	bad := 0
	for i := range want {
		for j := 0; j < max(len(want[i]), len(got[i])); j++ {
			w, g := "(nothing)", "(nothing)"
			if j < len(want[i]) {
				w = want[i][j]
			}
			if j < len(got[i]) {
				g = got[i][j]
			}
			if w != g {
				bad++
				if bad <= 10 {
					t.Errorf("session %d, step %d:\n  direct: %s\n  sluice: %s", i, j, w, g)
				}
				break
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d sessions saw something else through sluice than directly", bad, len(want))
	}
}

// TestPreparedSetIsTracked: a SET sent as a binary prepared statement (with
// parameters, or without as PDO does with emulation off) changes the
// session as the text one does, on every connection its later statements
// run on, and no other session's (issue 19, item 6).
func TestPreparedSetIsTracked(t *testing.T) {
	compareReplay(t, nil, func(i int) []replayStep {
		tz := fmt.Sprintf("+%02d:%02d", i%13, i%4*15)
		check := []replayStep{
			st("SELECT @@time_zone, @@sql_mode, @@wait_timeout"),
			st("/* sluice:master */ SELECT @@time_zone, @@sql_mode, @@wait_timeout"),
			st("SELECT @@time_zone, ? + 0", i),
		}
		steps := append([]replayStep{}, check...)
		switch i % 3 {
		case 0:
			steps = append(steps, st("SET SESSION time_zone = ?", tz), st("SET sql_mode = ?, wait_timeout = ?", "ANSI_QUOTES", 1000+i))
		case 1:
			steps = append(steps, stPrepared("SET time_zone = '"+tz+"'"), stPrepared("SET @@SESSION.wait_timeout = 2000"))
		}
		for range 3 {
			steps = append(steps, check...)
		}
		return steps
	})
}

// TestSetFromVariablesReplaysTheValue: a SET whose value reads a variable
// (the same one, or another) replays the value it gave, not the
// expression: two CONCAT(@@sql_mode, ...) in a row keep both modes on every
// connection (issue 19, item 7).
func TestSetFromVariablesReplaysTheValue(t *testing.T) {
	compareReplay(t, nil, func(i int) []replayStep {
		check := []replayStep{
			st("SELECT @@sql_mode, @@wait_timeout, @@time_zone, @@character_set_results IS NULL"),
			st("/* sluice:master */ SELECT @@sql_mode, @@wait_timeout, @@time_zone"),
		}
		steps := append([]replayStep{}, check...)
		if i%2 == 0 {
			steps = append(steps,
				st("SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')"),
				st("SET sql_mode = CONCAT(@@sql_mode, ',PIPES_AS_CONCAT')"),
				st("SET SESSION wait_timeout = @@wait_timeout + 1"),
				st("SET SESSION wait_timeout = @@SESSION.wait_timeout + 1"),
				st("SET time_zone = (SELECT '+03:00'), character_set_results = IF(1, NULL, 'utf8mb4')"),
				st(`SELECT "a" || "b"`),
			)
		}
		for range 3 {
			steps = append(steps, check...)
		}
		return steps
	})
}

// TestOneShotVariables: insert_id applies to the next INSERT that generates
// an id, on the connection that set it; SET last_insert_id / identity sets
// the session's LAST_INSERT_ID(); timestamp stays until DEFAULT; the RAND()
// seeds are the state of one connection's generator. Through sluice each
// session sees what it would see alone on a server (issue 19, item 8).
func TestOneShotVariables(t *testing.T) {
	setup := func(d *sql.DB) {
		for i := range replaySessions {
			mustExec(t, d, fmt.Sprintf("CREATE OR REPLACE TABLE oneshot_%d (id INT AUTO_INCREMENT PRIMARY KEY, s INT)", i))
		}
	}
	t.Cleanup(func() {
		root := mustRoot(t, env.topo.Master)
		for i := range replaySessions {
			mustExec(t, root, fmt.Sprintf("DROP TABLE IF EXISTS %s.oneshot_%d", sandbox.TestDatabase, i))
		}
	})
	compareReplay(t, setup, func(i int) []replayStep {
		table := fmt.Sprintf("oneshot_%d", i)
		insert := st("INSERT INTO " + table + " (s) VALUES (1)")
		// (LAST_INSERT_ID() inside a statement is item 3's: it is read
		// alone here, where sluice answers it.)
		check := st("SELECT @@insert_id, NOW() > '2020-01-01'")
		var steps []replayStep
		switch i % 5 {
		case 0:
			steps = append(steps, st("SET SESSION insert_id = 1000"), check,
				st("INSERT INTO "+table+" (id, s) VALUES (5, 0)"), check)
		case 1:
			steps = append(steps, st("SET last_insert_id = 77"), st("SELECT LAST_INSERT_ID()"),
				st("SET @@identity = 88"), st("SELECT LAST_INSERT_ID()"))
		case 2:
			steps = append(steps, st("SET timestamp = 1000000000"), st("SELECT NOW(), UNIX_TIMESTAMP()"),
				st("/* sluice:master */ SELECT NOW()"))
		case 3:
			steps = append(steps, st("SET rand_seed1 = 12345, rand_seed2 = 67890"),
				st("SELECT ROUND(RAND(), 12)"), st("SELECT ROUND(RAND(), 12)"))
		}
		for range 20 {
			steps = append(steps, insert, check)
		}
		if i%5 == 2 {
			steps = append(steps, st("SET timestamp = DEFAULT"), st("SELECT NOW() > '2020-01-01'"))
		}
		return steps
	})
}

// TestCommitReleaseEndsTheSession: COMMIT RELEASE, ROLLBACK RELEASE and a
// COMMIT under completion_type = RELEASE end the client's connection after
// the OK, as the server does; the backend connection the server closed
// serves nobody else (issue 19, item 9).
func TestCommitReleaseEndsTheSession(t *testing.T) {
	compareReplay(t, nil, func(i int) []replayStep {
		var steps []replayStep
		for range 5 {
			steps = append(steps, st("SELECT 1"), st("/* sluice:master */ SELECT @@completion_type"))
		}
		switch i % 6 {
		case 0:
			steps = append(steps, st("BEGIN"), st("SELECT 2"), st("COMMIT RELEASE"))
		case 1:
			steps = append(steps, st("ROLLBACK WORK AND NO CHAIN RELEASE"))
		case 2:
			steps = append(steps, st("SET completion_type = 2"), st("BEGIN"), st("COMMIT NO RELEASE"),
				st("BEGIN"), st("COMMIT"))
		case 3:
			steps = append(steps, st("SET completion_type = 'RELEASE'"), st("SET completion_type = DEFAULT"),
				st("BEGIN"), st("COMMIT"))
		case 4:
			steps = append(steps, stPrepared("COMMIT RELEASE"))
		}
		for range 5 {
			steps = append(steps, st("SELECT 3"), st("/* sluice:master */ SELECT @@completion_type"))
		}
		return steps
	})
}

// TestSetDefaultRoleDoesNotReachTheServiceAccount: SET DEFAULT ROLE changes
// the current account's default role for its next logins and nothing in
// the session. Run on a backend, the account is sluice's service account:
// every connection sluice opens afterwards would run with the role, for
// every session of every user. sluice refuses it (issue 19, item 8).
func TestSetDefaultRoleDoesNotReachTheServiceAccount(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	svc := "'" + env.topo.Opts.ServiceUser + "'@'%'"
	mustExec(t, root, "CREATE ROLE IF NOT EXISTS r19d")
	mustExec(t, root, "GRANT r19d TO "+svc)
	t.Cleanup(func() {
		mustExec(t, root, "SET DEFAULT ROLE NONE FOR "+svc)
		mustExec(t, root, "DROP ROLE IF EXISTS r19d")
	})
	viaSluice, _ := replayDBs(t)
	ctx := ctxT(t)
	c, err := viaSluice.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := runStep(ctx, c, st("SET DEFAULT ROLE r19d"))
	c.Close()
	if !strings.HasPrefix(got, "ERR 1235: ") {
		t.Errorf("SET DEFAULT ROLE r19d through sluice: %s, want ERR 1235", got)
	}
	var def sql.NullString
	if err := root.QueryRowContext(ctx, "SELECT default_role FROM mysql.user WHERE user = ? AND host = '%'", env.topo.Opts.ServiceUser).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if def.String != "" {
		t.Errorf("the service account's default role is now %q", def.String)
	}
	for i, lines := range runSessions(t, viaSluice, func(int) []replayStep {
		return []replayStep{st("/* sluice:master */ SELECT CURRENT_ROLE()"), st("SELECT CURRENT_ROLE()")}
	}) {
		for _, l := range lines {
			if !strings.HasSuffix(l, "=> [NULL]") {
				t.Errorf("session %d: %s", i, l)
				break
			}
		}
	}
}
