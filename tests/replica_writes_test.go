package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// Issue 18: a write never lands on a replica. Every test here runs the same
// steps through sluice (database rw18) and straight against the master
// (database rw18_direct, the "single MariaDB server" oracle, identical
// objects), compares what the client sees, and then checks that both
// replicas applied the master's position, still replicate, and hold exactly
// the master's rw18 (CHECKSUM TABLE of every table, every sequence's state).

const (
	rwDB       = "rw18"
	rwDirectDB = "rw18_direct"
	// rwRefusals counts statements a replica refused with ERR 1792 and
	// sluice re-ran on the master.
	rwRefusals = "sluice_replica_write_refusals_total"
)

// rwObjects (re)creates db with the test objects. The sequence has no
// cache, so every NEXTVAL changes its row and a value handed out by a
// replica shows in SELECT * FROM s.
func rwObjects(db string) []string {
	stmts := []string{
		"DROP DATABASE IF EXISTS {db}",
		"CREATE DATABASE {db}",
		"CREATE TABLE {db}.w (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(64))",
		"INSERT INTO {db}.w (tag) VALUES ('seed')",
		// r is what a WHERE calling f_ins reads: a function may not write
		// a table its calling statement reads (ERR 1442), so the WHERE
		// case cannot read w itself.
		"CREATE TABLE {db}.r (id INT PRIMARY KEY)",
		"INSERT INTO {db}.r VALUES (1)",
		"CREATE SEQUENCE {db}.s NOCACHE",
		// DETERMINISTIC only because binary logging refuses to create a
		// writing function without it (log_bin_trust_function_creators off).
		"CREATE FUNCTION {db}.f_ins(x VARCHAR(64)) RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO w (tag) VALUES (x); RETURN 1; END",
		"CREATE FUNCTION {db}.f_ret(x VARCHAR(64)) RETURNS INT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO w (tag) VALUES (x); RETURN 100; END",
		// f_lie declares READS SQL DATA and writes nevertheless: only the
		// replica connection's read-only access mode stops it.
		"CREATE FUNCTION {db}.f_lie(x VARCHAR(64)) RETURNS INT READS SQL DATA BEGIN INSERT INTO w (tag) VALUES (x); RETURN 1; END",
		"CREATE FUNCTION {db}.f_ro() RETURNS INT READS SQL DATA RETURN (SELECT COUNT(*) FROM w)",
		// f_rw declares NO SQL and switches the connection that runs it
		// to READ WRITE: a replica connection must not stay so.
		"CREATE FUNCTION {db}.f_rw() RETURNS INT NO SQL BEGIN SET SESSION TRANSACTION READ WRITE; RETURN 1; END",
		"CREATE VIEW {db}.v AS SELECT {db}.f_ins('v') AS x",
	}
	for i, s := range stmts {
		stmts[i] = strings.ReplaceAll(s, "{db}", db)
	}
	return stmts
}

// rwEnv is one test's fixture: fresh rw18 and rw18_direct on the master,
// replicated.
type rwEnv struct {
	t *testing.T
}

// rwSetup recreates both databases on the master and waits until the
// replicas have them. When replication is broken (a replica diverged in an
// earlier test) it mends the replicas first. At the end of the test it
// mends them again if the test left them diverged or stopped, so one
// failing case does not break the rest of the package.
func rwSetup(t *testing.T) *rwEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := rwCreate(ctx); err != nil {
		t.Logf("setup: %v; repairing the replicas", err)
		if rerr := rwRepair(ctx); rerr != nil {
			t.Fatalf("setup: repairing the replicas: %v", rerr)
		}
		if err := rwCreate(ctx); err != nil {
			t.Fatalf("setup after repair: %v", err)
		}
	}
	// Until sluice sees the replicas up it sends reads to the master, and
	// no case here could fail.
	eventually(t, ctx, "sluice sees both replicas up", func() error { return rwReplicasUp(env.srv) })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if p := rwProblems(ctx, false); len(p) > 0 {
			t.Logf("cleanup: replicas diverged or stopped, repairing:\n  %s", strings.Join(p, "\n  "))
			if err := rwRepair(ctx); err != nil {
				t.Errorf("cleanup: repairing the replicas: %v", err)
			}
		}
	})
	return &rwEnv{t: t}
}

// rwReplicasUp is nil once srv would send reads to every replica.
func rwReplicasUp(srv *server.Server) error {
	c := srv.Topology().Current().Cluster("main")
	if c == nil {
		return errors.New("no cluster main")
	}
	for _, r := range c.Replicas {
		if !r.Up() {
			return fmt.Errorf("replica %s is %s", r.Address, r.State())
		}
	}
	return nil
}

func rwCreate(ctx context.Context) error {
	if err := env.topo.Master.Exec(ctx, append(rwObjects(rwDB), rwObjects(rwDirectDB)...)...); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return env.topo.WaitReplicated(wctx)
}

// conns opens one session through the shared sluice (database rw18) and
// one straight to the master (rw18_direct, as sluice's service account),
// both with mod applied to the driver configuration.
func (e *rwEnv) conns(mod func(*mysql.Config)) (sl, dir *sql.Conn) {
	return e.connsVia(env.addr, mod)
}

func (e *rwEnv) connsVia(addr string, mod func(*mysql.Config)) (sl, dir *sql.Conn) {
	e.t.Helper()
	o := env.topo.Opts
	open := func(dsn string) *sql.Conn {
		d, err := sql.Open("mysql", dsn)
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { d.Close() })
		return conn(e.t, d)
	}
	sl = open(dsn(addr, o.AppUser, o.AppPassword, rwDB, mod))
	dir = open(dsn(env.topo.Master.Addr(), o.ServiceUser, o.ServicePassword, rwDirectDB, mod))
	return sl, dir
}

// rwStep is one statement of a case. {db} in q stands for the side's
// database; qDirect, when set, replaces q on the direct side.
type rwStep struct {
	q       string
	qDirect string
	args    []any
	exec    bool // ExecContext (affected rows) instead of QueryContext (columns and rows)
}

func rwQ(q string, args ...any) rwStep { return rwStep{q: q, args: args} }
func rwX(q string, args ...any) rwStep { return rwStep{q: q, args: args, exec: true} }

// rwOutcome is everything the client sees of one statement.
type rwOutcome struct {
	Cols     []string
	Rows     [][]string
	Err      string
	Affected int64
	Warnings string // @@warning_count right after the statement
}

func (o rwOutcome) String() string {
	if o.Err != "" {
		return fmt.Sprintf("error %s, warnings %s", o.Err, o.Warnings)
	}
	if o.Cols == nil && o.Rows == nil {
		return fmt.Sprintf("ok, %d affected, warnings %s", o.Affected, o.Warnings)
	}
	return fmt.Sprintf("columns %q rows %q, warnings %s", o.Cols, o.Rows, o.Warnings)
}

// rwErrString is a client error as the client sees it: code, SQLSTATE and
// message for a server error.
func rwErrString(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("%d (%s): %s", me.Number, string(me.SQLState[:]), me.Message)
	}
	return "client: " + err.Error()
}

// rwReadRows reads a whole result set as strings ("NULL" for NULL).
func rwReadRows(rows *sql.Rows) (cols []string, out [][]string, err error) {
	defer rows.Close()
	if cols, err = rows.Columns(); err != nil {
		return nil, nil, err
	}
	out = [][]string{}
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return cols, out, err
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			if v == nil {
				row[i] = "NULL"
			} else {
				row[i] = string(v)
			}
		}
		out = append(out, row)
	}
	return cols, out, rows.Err()
}

// rwRun runs s on c in database db and reads its outcome.
func rwRun(ctx context.Context, c *sql.Conn, q string, s rwStep) rwOutcome {
	var o rwOutcome
	if s.exec {
		res, err := c.ExecContext(ctx, q, s.args...)
		if err != nil {
			o.Err = rwErrString(err)
		} else {
			o.Affected, _ = res.RowsAffected()
		}
	} else {
		rows, err := c.QueryContext(ctx, q, s.args...)
		if err != nil {
			o.Err = rwErrString(err)
		} else if o.Cols, o.Rows, err = rwReadRows(rows); err != nil {
			o.Err = rwErrString(err)
		}
	}
	if err := c.QueryRowContext(ctx, "SELECT @@warning_count").Scan(&o.Warnings); err != nil {
		o.Warnings = "(" + rwErrString(err) + ")"
	}
	return o
}

// normalize makes the direct side's outcome comparable: its database is
// named rw18_direct.
func (o rwOutcome) normalize() rwOutcome {
	r := strings.NewReplacer(rwDirectDB, rwDB)
	o.Err = r.Replace(o.Err)
	if o.Cols != nil {
		cols := make([]string, len(o.Cols))
		for i, c := range o.Cols {
			cols[i] = r.Replace(c)
		}
		o.Cols = cols
	}
	return o
}

// both runs each step through sluice and directly, fails the test when the
// client saw anything different, and returns sluice's outcomes.
func (e *rwEnv) both(sl, dir *sql.Conn, steps ...rwStep) []rwOutcome {
	e.t.Helper()
	ctx := ctxT(e.t)
	var out []rwOutcome
	for _, s := range steps {
		q := strings.ReplaceAll(s.q, "{db}", rwDB)
		qd := s.qDirect
		if qd == "" {
			qd = s.q
		}
		qd = strings.ReplaceAll(qd, "{db}", rwDirectDB)
		// sluice's reads are eventually consistent: a read after a write
		// may reach a replica that has not applied it yet. The single
		// server has no such lag, so the replicas catch up first.
		if err := env.topo.WaitReplicated(ctx); err != nil {
			e.t.Fatalf("replicas did not apply the master's position before %s: %v", rwHex(q), err)
		}
		got := rwRun(ctx, sl, q, s)
		want := rwRun(ctx, dir, qd, s).normalize()
		if got.String() != want.String() {
			e.t.Errorf("%s:\n  through sluice: %s\n  single server:  %s", rwHex(q), got, want)
		} else {
			e.t.Logf("%s: %s", rwHex(q), got)
		}
		out = append(out, got)
	}
	return out
}

// assertConsistent fails the test unless both replicas applied the
// master's position, replicate, and hold the master's rw18; with direct it
// also requires the master's rw18 (changed through sluice) to equal
// rw18_direct (changed by the same steps on the single server).
func (e *rwEnv) assertConsistent(direct bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	for _, p := range rwProblems(ctx, direct) {
		e.t.Error(p)
	}
}

// rwProblems lists what is wrong with the replicas (and, with direct, the
// master's rw18 against rw18_direct); nil when all is well.
func rwProblems(ctx context.Context, direct bool) []string {
	var probs []string
	mroot, err := env.topo.Master.RootDB()
	if err != nil {
		return []string{err.Error()}
	}
	var pos string
	if err := mroot.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
		return []string{"master: reading gtid_binlog_pos: " + err.Error()}
	}
	want, err := rwSnapshot(ctx, mroot, rwDB)
	if err != nil {
		return []string{"master: " + err.Error()}
	}
	if direct {
		d, err := rwSnapshot(ctx, mroot, rwDirectDB)
		if err != nil {
			probs = append(probs, "master: "+err.Error())
		} else if d != want {
			probs = append(probs, fmt.Sprintf("master: the data sluice's statements left differs from the single server's:\n    %s (through sluice)\n    %s (single server)", want, d))
		}
	}
	for _, r := range env.topo.Replicas {
		root, err := r.RootDB()
		if err != nil {
			probs = append(probs, err.Error())
			continue
		}
		if err := rwWaitGTID(ctx, r, root, pos); err != nil {
			probs = append(probs, err.Error())
		}
		st, err := r.ReplicaStatus(ctx)
		switch {
		case err != nil:
			probs = append(probs, err.Error())
		case st == nil:
			probs = append(probs, r.Name+": not a replica")
		case st["Slave_IO_Running"] != "Yes" || st["Slave_SQL_Running"] != "Yes":
			probs = append(probs, fmt.Sprintf("%s: Slave_IO_Running=%s Slave_SQL_Running=%s Last_SQL_Errno=%s Last_SQL_Error=%q Last_IO_Error=%q",
				r.Name, st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Last_SQL_Errno"], st["Last_SQL_Error"], st["Last_IO_Error"]))
		}
		got, err := rwSnapshot(ctx, root, rwDB)
		if err != nil {
			probs = append(probs, r.Name+": "+err.Error())
		} else if got != want {
			probs = append(probs, fmt.Sprintf("%s diverged from the master:\n    %s (%s)\n    %s (master)", r.Name, got, r.Name, want))
		}
	}
	return probs
}

// rwWaitGTID waits until replica r has applied the master's position pos,
// giving up early when its SQL thread stopped.
func rwWaitGTID(ctx context.Context, r *sandbox.Server, root *sql.DB, pos string) error {
	if pos == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	q := "SELECT MASTER_GTID_WAIT('" + pos + "', 0.5)"
	for {
		var res sql.NullInt64
		err := root.QueryRowContext(ctx, q).Scan(&res)
		if err == nil && res.Valid && res.Int64 == 0 {
			return nil
		}
		st, serr := r.ReplicaStatus(ctx)
		if serr == nil && st != nil && st["Slave_SQL_Running"] == "No" {
			return fmt.Errorf("%s: SQL thread stopped before applying %s: %s %s", r.Name, pos, st["Last_SQL_Errno"], st["Last_SQL_Error"])
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s did not apply the master's position %s: last %v", r.Name, pos, err)
		}
	}
}

// rwSnapshot describes schema on one server: every table with its
// CHECKSUM TABLE, every sequence with its row, every view by name.
func rwSnapshot(ctx context.Context, db *sql.DB, schema string) (string, error) {
	rows, err := db.QueryContext(ctx, "SELECT TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA = '"+schema+"' ORDER BY TABLE_NAME")
	if err != nil {
		return "", err
	}
	_, list, err := rwReadRows(rows)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, tt := range list {
		name, typ := tt[0], tt[1]
		full := "`" + schema + "`.`" + name + "`"
		switch typ {
		case "BASE TABLE":
			var tbl string
			var sum sql.NullString
			if err := db.QueryRowContext(ctx, "CHECKSUM TABLE "+full).Scan(&tbl, &sum); err != nil {
				return "", err
			}
			parts = append(parts, name+" checksum "+sum.String)
		case "SEQUENCE":
			rows, err := db.QueryContext(ctx, "SELECT * FROM "+full)
			if err != nil {
				return "", err
			}
			_, r, err := rwReadRows(rows)
			if err != nil {
				return "", err
			}
			parts = append(parts, fmt.Sprintf("sequence %s %v", name, r))
		default:
			parts = append(parts, strings.ToLower(typ)+" "+name)
		}
	}
	if len(parts) == 0 {
		return "(no " + schema + ")", nil
	}
	return strings.Join(parts, "; "), nil
}

// rwRepair brings diverged or stopped replicas back: with gtid_strict_mode
// a write a replica made itself stops replication at the master's next
// transaction. The master's next GTID is moved past every sequence number
// a replica has used, the test databases are dropped everywhere, and each
// replica restarts from the master's position (the setup recreates them).
func rwRepair(ctx context.Context) error {
	mroot, err := env.topo.Master.RootDB()
	if err != nil {
		return err
	}
	var domain uint64
	if err := mroot.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_domain_id").Scan(&domain); err != nil {
		return err
	}
	var maxSeq uint64
	scan := func(db *sql.DB, q string) error {
		var s sql.NullString
		if err := db.QueryRowContext(ctx, q).Scan(&s); err != nil {
			return err
		}
		for _, g := range strings.Split(strings.ReplaceAll(s.String, "\n", ""), ",") {
			f := strings.Split(strings.TrimSpace(g), "-")
			if len(f) != 3 {
				continue
			}
			d, _ := strconv.ParseUint(f[0], 10, 64)
			n, _ := strconv.ParseUint(f[2], 10, 64)
			if d == domain && n > maxSeq {
				maxSeq = n
			}
		}
		return nil
	}
	if err := scan(mroot, "SELECT @@GLOBAL.gtid_binlog_state"); err != nil {
		return err
	}
	for _, r := range env.topo.Replicas {
		root, err := r.RootDB()
		if err != nil {
			return err
		}
		for _, q := range []string{"SELECT @@GLOBAL.gtid_binlog_state", "SELECT @@GLOBAL.gtid_slave_pos"} {
			if err := scan(root, q); err != nil {
				return fmt.Errorf("%s: %s: %w", r.Name, q, err)
			}
		}
	}
	if err := env.topo.Master.Exec(ctx,
		fmt.Sprintf("SET SESSION gtid_seq_no = %d", maxSeq+1),
		"CREATE DATABASE IF NOT EXISTS "+rwDB,
		"DROP DATABASE "+rwDB,
		"DROP DATABASE IF EXISTS "+rwDirectDB,
	); err != nil {
		return err
	}
	var pos string
	if err := mroot.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
		return err
	}
	for _, r := range env.topo.Replicas {
		if err := r.Exec(ctx,
			"STOP SLAVE",
			"SET SESSION sql_log_bin = 0",
			"DROP DATABASE IF EXISTS "+rwDB,
			"DROP DATABASE IF EXISTS "+rwDirectDB,
			"SET GLOBAL gtid_slave_pos = '"+pos+"'",
			"START SLAVE",
		); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return env.topo.WaitReplicated(wctx)
}

// rwHex shows a statement with its non-printable and non-ASCII bytes
// hex-escaped.
func rwHex(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}

// TestReplicaWriteStoredFunctionSelect: SELECT of a stored function that
// writes runs on the master only.
func TestReplicaWriteStoredFunctionSelect(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	e.both(sl, dir, rwQ("SELECT f_ins('x')"), rwQ("SELECT COUNT(*) FROM w"))
	e.assertConsistent(true)
}

// TestReplicaWriteStoredFunctionWhere: the writing function in a WHERE.
// The statement reads r, not w: MariaDB refuses (ERR 1442, both ways, no
// write) a function that writes a table its calling statement reads, so
// "FROM w WHERE f_ins('y') = 1" could not show a write at all; it runs
// too, last.
func TestReplicaWriteStoredFunctionWhere(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	e.both(sl, dir,
		rwQ("SELECT COUNT(*) FROM r WHERE f_ins('y') = 1"),
		rwQ("SELECT id, tag FROM w ORDER BY id"),
		rwQ("SELECT COUNT(*) FROM w WHERE f_ins('y') = 1"),
	)
	e.assertConsistent(true)
}

// TestReplicaWriteStoredFunctionView: the writing function behind a view.
func TestReplicaWriteStoredFunctionView(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	e.both(sl, dir, rwQ("SELECT * FROM v"))
	e.assertConsistent(true)
}

// TestReplicaWriteStoredFunctionHinted: the replica hint does not make a
// writing function run on a replica.
func TestReplicaWriteStoredFunctionHinted(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	e.both(sl, dir, rwQ("/* sluice:replica */ SELECT f_ins('h')"))
	e.assertConsistent(true)
}

// TestReplicaWriteStoredFunctionPrepared: the writing function as a binary
// prepared statement (no interpolateParams: the driver prepares).
func TestReplicaWriteStoredFunctionPrepared(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(func(c *mysql.Config) { c.InterpolateParams = false })
	e.both(sl, dir, rwQ("SELECT f_ins(?)", "p"), rwQ("SELECT f_ins(?)", "p2"))
	e.assertConsistent(true)
}

// TestReplicaWriteTiDBCommentInsert: /*T! ... */ is a plain comment for
// MariaDB, so the INSERT after it runs; it must run on the master.
func TestReplicaWriteTiDBCommentInsert(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	e.both(sl, dir, rwX(`/*T! SELECT 'x */ INSERT INTO w (tag) VALUES ("t") /*' */`), rwQ("SELECT id, tag FROM w ORDER BY id"))
	e.assertConsistent(true)
}

// TestReplicaWriteTiDBCommentDDL: DDL smuggled behind /*T! runs on the
// master only; the replicas' tables match the master's.
func TestReplicaWriteTiDBCommentDDL(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	e.both(sl, dir, rwX(`/*T! SELECT 'x */ CREATE TABLE w_smuggled (a INT) /*' */`))
	e.assertConsistent(true)
	ctx := ctxT(t)
	tables := func(s *sandbox.Server) string {
		rows, err := mustRoot(t, s).QueryContext(ctx, "SHOW TABLES FROM "+rwDB)
		if err != nil {
			t.Fatal(err)
		}
		_, r, err := rwReadRows(rows)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(r)
	}
	want := tables(env.topo.Master)
	if !strings.Contains(want, "w_smuggled") {
		t.Errorf("master tables %s: the smuggled CREATE TABLE did not run on the master", want)
	}
	for _, r := range env.topo.Replicas {
		if got := tables(r); got != want {
			t.Errorf("SHOW TABLES on %s = %s, master %s", r.Name, got, want)
		}
	}
}

// TestReplicaWriteTiDBCommentNextval: NEXTVAL behind /*T! is handed out by
// the master only.
func TestReplicaWriteTiDBCommentNextval(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	e.both(sl, dir, rwQ(`/*T! SELECT 'x */ SELECT NEXTVAL(s) /*' */`), rwQ(`/*T! SELECT 'x */ SELECT NEXTVAL(s) /*' */`))
	e.assertConsistent(true)
}

// TestReplicaWriteGBKLexerBytes: under SET NAMES gbk, 0x85 0x40 is one
// character for MariaDB (so "--" starts no comment and NEXTVAL runs), while
// TiDB's lexer takes 0x85 for whitespace and sees a comment.
func TestReplicaWriteGBKLexerBytes(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	out := e.both(sl, dir,
		rwX("SET NAMES gbk"),
		rwQ("SELECT 1 --\x85\x40, NEXTVAL(s) FROM (SELECT 1 AS \x85\x40) x"),
	)
	if len(out[1].Cols) != 2 {
		t.Errorf("the gbk statement returned columns %q, want 2 (1, NEXTVAL)", out[1].Cols)
	}
	e.assertConsistent(true)
}

// TestReplicaWriteOracleModeSequence: in ORACLE mode s.nextval and
// schema-qualified rw18.s.nextval are sequence calls; s.currval afterwards
// is the value just handed out, as on a single server.
func TestReplicaWriteOracleModeSequence(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	out := e.both(sl, dir,
		rwX("SET sql_mode='ORACLE'"),
		rwQ("SELECT s.nextval FROM dual"),
		rwQ("SELECT {db}.s.nextval FROM dual"),
		rwQ("SELECT s.currval FROM dual"),
	)
	last, cur := out[2].Rows, out[3].Rows
	if len(last) != 1 || len(cur) != 1 || cur[0][0] == "NULL" || cur[0][0] != last[0][0] {
		t.Errorf("s.currval = %v after rw18.s.nextval = %v, want the same value (errors: %q, %q)", cur, last, out[2].Err, out[3].Err)
	}
	e.assertConsistent(true)
}

// TestReplicaWriteGlobalNoBackslashEscapes: with NO_BACKSLASH_ESCAPES in
// the servers' global sql_mode, a new session's very first statement
// SELECT 'a\', NEXTVAL(s) -- ' calls NEXTVAL; sluice must know the mode
// from the start and must not let a replica hand the value out.
func TestReplicaWriteGlobalNoBackslashEscapes(t *testing.T) {
	e := rwSetup(t)
	ctx := ctxT(t)
	for _, s := range append([]*sandbox.Server{env.topo.Master}, env.topo.Replicas...) {
		root := mustRoot(t, s)
		var old string
		if err := root.QueryRowContext(ctx, "SELECT @@GLOBAL.sql_mode").Scan(&old); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := root.ExecContext(ctx, "SET GLOBAL sql_mode = '"+old+"'"); err != nil {
				t.Errorf("%s: restoring the global sql_mode: %v", s.Name, err)
			}
			// Root connections opened meanwhile carry the changed mode:
			// drop them from the shared pool.
			root.SetMaxIdleConns(0)
			root.SetMaxIdleConns(4)
		})
		if _, err := root.ExecContext(ctx, "SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',NO_BACKSLASH_ESCAPES')"); err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
	}
	// A fresh sluice, so nothing it knows predates the change; wait until
	// it would send reads to both replicas.
	srv, err := startProxy(env.topo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	eventually(t, ctx, "the new sluice sees both replicas up", func() error { return rwReplicasUp(srv) })
	sl, dir := e.connsVia(srv.Addr().String(), nil)
	out := e.both(sl, dir, rwQ(`SELECT 'a\', NEXTVAL(s) -- '`))
	if len(out[0].Cols) != 2 {
		t.Errorf("through sluice the statement returned columns %q, want 2 ('a\\' and NEXTVAL)", out[0].Cols)
	}
	e.assertConsistent(true)
}

// TestReplicaWriteSetSessionFunction: SET SESSION x = f() where f writes
// runs once, on the master, pins the session and is not replayed on the
// connections later reads use.
func TestReplicaWriteSetSessionFunction(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	e.both(sl, dir,
		rwX("SET SESSION wait_timeout = f_ret('x')"),
		rwQ("SELECT COUNT(*) FROM w"),
		rwQ("SELECT @@wait_timeout"),
		rwQ("SELECT @@server_id"),
		rwQ("SELECT COUNT(*), MAX(tag) FROM w"),
		rwQ("SELECT @@wait_timeout, COUNT(*) FROM w"),
	)
	e.assertConsistent(true)
}

// TestReplicaWriteIntoOutfileHinted: SELECT ... INTO OUTFILE writes a file
// on the server that runs it; with the replica hint it still runs on the
// master.
func TestReplicaWriteIntoOutfileHinted(t *testing.T) {
	e := rwSetup(t)
	ctx := ctxT(t)
	privOf := func(s *sandbox.Server) sql.NullString {
		var p sql.NullString
		if err := mustRoot(t, s).QueryRowContext(ctx, "SELECT @@GLOBAL.secure_file_priv").Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	priv := privOf(env.topo.Master)
	for _, r := range env.topo.Replicas {
		if p := privOf(r); p != priv {
			t.Logf("%s: secure_file_priv %v, master %v", r.Name, p, priv)
		}
	}
	sl, dir := e.conns(nil)
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	// MariaDB: secure_file_priv NULL or "" puts no limit on the path (a
	// directory limits files to it). The mysqld runs as this user on this
	// host, so a temporary directory of the test will do.
	base := t.TempDir()
	if priv.Valid && priv.String != "" {
		base = priv.String
	}
	slPath := filepath.Join(base, "rw18_outfile_"+stamp+"_sluice.txt")
	dirPath := filepath.Join(base, "rw18_outfile_"+stamp+"_direct.txt")
	t.Cleanup(func() { os.Remove(slPath); os.Remove(dirPath) })
	q := "/* sluice:replica */ SELECT @@server_id INTO OUTFILE '%s'"
	out := e.both(sl, dir, rwStep{q: fmt.Sprintf(q, slPath), qDirect: fmt.Sprintf(q, dirPath), exec: true})
	if _, err := os.Stat(dirPath); err != nil {
		// The single server could not write its file either: then the
		// client must get the same error (checked by both above).
		t.Logf("the single server wrote no file (%v): compared the errors only (%s)", err, out[0])
	} else {
		b, err := os.ReadFile(slPath)
		if err != nil {
			t.Errorf("reading the file sluice's statement wrote: %v", err)
		} else if got, want := strings.TrimSpace(string(b)), strconv.FormatUint(uint64(env.masterID), 10); got != want {
			t.Errorf("INTO OUTFILE through sluice wrote server id %q, want the master's %s (replicas %v)", got, want, env.replicaIDs)
		}
	}
	e.assertConsistent(true)
}

// rwRefusalCount reads sluice_replica_write_refusals_total of the shared
// sluice's cluster.
func rwRefusalCount(t *testing.T) float64 {
	t.Helper()
	return scrapeAll(t, env.srv).value(rwRefusals, map[string]string{"cluster": "main"})
}

// rwRefusedSince waits briefly for the refusal counter to pass before.
func rwRefusedSince(t *testing.T, before float64, within time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if rwRefusalCount(t) > before {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicaWriteRefusedAndRerun: a function that declares READS SQL DATA
// but writes is sent to a replica, refused there (ERR 1792, the replica
// connection is read-only), re-run on the master and counted; a client's
// own SET SESSION TRANSACTION READ WRITE / tx_read_only = 0 does not make
// the replica connection writable.
func TestReplicaWriteRefusedAndRerun(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	// sluice learns rw18's function declarations on a probe cadence; until
	// it has, f_lie goes to the master as an unknown function. Repeat the
	// call (on both sides) until a replica has refused it once.
	before := rwRefusalCount(t)
	deadline := time.Now().Add(20 * time.Second)
	for !rwRefusedSince(t, before, 300*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("SELECT f_lie('l') was never refused by a replica: %s did not grow from %v", rwRefusals, before)
		}
		e.both(sl, dir, rwQ("SELECT f_lie('l')"))
		if t.Failed() {
			break
		}
	}
	e.assertConsistent(true)

	e.both(sl, dir,
		rwX("SET SESSION TRANSACTION READ WRITE"),
		rwX("SET SESSION tx_read_only = 0"),
	)
	mid := rwRefusalCount(t)
	e.both(sl, dir, rwQ("SELECT f_lie('rw')"))
	if !rwRefusedSince(t, mid, 5*time.Second) {
		t.Errorf("after SET SESSION TRANSACTION READ WRITE and tx_read_only = 0, SELECT f_lie('rw') was not refused by a replica (%s stayed %v)", rwRefusals, mid)
	}
	e.assertConsistent(true)
}

// TestReplicaWriteFunctionTurnsReadWrite: a read calling a function that
// switches its connection to READ WRITE (declared NO SQL, so it runs on a
// replica) does not leave that replica connection writable: the server
// flags the change, sluice resets the connection and makes it read-only
// again, and the next misjudged write is still refused there. The session
// holds its replica connection (a user variable pins it), so both reads
// run on the same one.
func TestReplicaWriteFunctionTurnsReadWrite(t *testing.T) {
	e := rwSetup(t)
	sl, dir := e.conns(nil)
	before := rwRefusalCount(t)
	deadline := time.Now().Add(20 * time.Second)
	for !rwRefusedSince(t, before, 300*time.Millisecond) {
		// Until sluice knows rw18's declarations, f_lie runs on the master.
		if time.Now().After(deadline) {
			t.Fatalf("SELECT f_lie('l') was never refused by a replica: %s did not grow from %v", rwRefusals, before)
		}
		e.both(sl, dir, rwQ("SELECT f_lie('l')"))
		if t.Failed() {
			return
		}
	}
	e.both(sl, dir,
		rwQ("/* sluice:replica */ SELECT @pin"),
		rwQ("SELECT f_rw()"),
	)
	mid := rwRefusalCount(t)
	e.both(sl, dir, rwQ("SELECT f_lie('after_rw')"))
	if !rwRefusedSince(t, mid, 5*time.Second) {
		t.Errorf("after SELECT f_rw() on the replica, SELECT f_lie('after_rw') was not refused there (%s stayed %v)", rwRefusals, mid)
	}
	e.assertConsistent(true)
}

// TestReplicaWriteNumericSQLMode: an sql_mode set as a number (4 is
// ANSI_QUOTES) or an expression is read back from the master, so a text
// that MariaDB reads otherwise under it stays on the master: here the
// double-quoted part is an alias under ANSI_QUOTES and NEXTVAL runs.
func TestReplicaWriteNumericSQLMode(t *testing.T) {
	e := rwSetup(t)
	for _, set := range []string{"SET sql_mode = 4", "SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')"} {
		sl, dir := e.conns(nil)
		before := rwRefusalCount(t)
		e.both(sl, dir,
			rwX(set),
			rwQ(`SELECT 1 AS "a\", NEXTVAL(s) -- "`),
			rwQ("SELECT @@sql_mode"),
		)
		e.assertConsistent(true)
		// The read-only replica connection would refuse NEXTVAL too; the
		// statement must not have needed that backstop.
		if n := rwRefusalCount(t); n != before {
			t.Errorf("after %s the statement went to a replica and was refused there (%s %v -> %v): sluice misread the session's sql_mode", set, rwRefusals, before, n)
		}
	}
}

// TestReplicaWriteReadsStillOnReplica: the fix does not send everything to
// the master: built-in reads and a function declared READS SQL DATA run on
// a replica.
func TestReplicaWriteReadsStillOnReplica(t *testing.T) {
	e := rwSetup(t)
	d := appDB(t, rwDB, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	eventually(t, ctx, "SELECT @@server_id, CONCAT('a','b'), NOW() IS NOT NULL runs on a replica", func() error {
		var id uint32
		var ab string
		var now int
		if err := d.QueryRowContext(ctx, "SELECT @@server_id, CONCAT('a','b'), NOW() IS NOT NULL").Scan(&id, &ab, &now); err != nil {
			return err
		}
		if ab != "ab" || now != 1 {
			return fmt.Errorf("got %q, %d", ab, now)
		}
		if !env.replicaIDs[id] {
			return fmt.Errorf("served by server %d (master %d)", id, env.masterID)
		}
		return nil
	})
	// f_ro is read-only by its declaration; sluice reads the declarations
	// on a cadence, so poll.
	eventually(t, ctx, "SELECT @@server_id, f_ro() runs on a replica", func() error {
		var id uint32
		var n int
		if err := d.QueryRowContext(ctx, "SELECT @@server_id, f_ro()").Scan(&id, &n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("f_ro() = %d, want 1 (the seed row)", n)
		}
		if !env.replicaIDs[id] {
			return fmt.Errorf("served by server %d (master %d)", id, env.masterID)
		}
		return nil
	})
	e.assertConsistent(false)
}
