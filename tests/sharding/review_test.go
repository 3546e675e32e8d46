package sharding

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// The review tests run against a sluice of their own whose rules cover the
// schema revSchema only, laid out on the shared clusters and, as logical
// tables, on the reference server, so every answer can be compared with
// what one MariaDB says of the same rows.

const revSchema = "rev"

// revRules: t by id mod over both clusters x 2 tables (shard = id mod 4:
// ids 0,1 mod 4 on c1, 2,3 mod 4 on c2); ai by u, with an AUTO_INCREMENT id;
// half, whose physical table exists on c1 only.
var (
	revT = &rule{schema: revSchema, table: "t", key: "id", algo: "mod", clusters: clusterNames, tables: 2,
		columns: "id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL, name VARCHAR(32) NOT NULL, " +
			"bname VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, amt DECIMAL(10,2) NULL, " +
			"dt DATETIME NULL, f DOUBLE NULL, n INT NULL"}
	revAI = &rule{schema: revSchema, table: "ai", key: "u", algo: "mod", clusters: clusterNames, tables: 2,
		columns: "id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, u BIGINT NOT NULL, v INT NOT NULL"}
	revHalf = &rule{schema: revSchema, table: "half", key: "id", algo: "mod", clusters: clusterNames, tables: 1,
		columns: "id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL"}
)

const (
	revBroadcastColumns = "code CHAR(2) NOT NULL PRIMARY KEY, name VARCHAR(32) NOT NULL"
	revPlainColumns     = "id INT NOT NULL PRIMARY KEY, v INT NOT NULL"
)

// revRows are the rows of rev.t: names that differ in case only, a
// case-sensitive column, negative and NULL amounts, NULL dates and counts.
var revRows = func() []string {
	names := []string{"alpha", "Alpha", "ALPHA", "beta", "Beta", "gamma", "delta", "Delta"}
	var rows []string
	for i := range 24 {
		id := int64(i*5 + 1) // spreads over all four shards
		name := names[i%len(names)]
		amt := "NULL"
		if i%5 != 0 {
			amt = fmt.Sprintf("%d.%02d", (i*37)%200-100, (i*13)%100)
		}
		dt := "NULL"
		if i%4 != 3 {
			dt = fmt.Sprintf("'2025-%02d-%02d %02d:%02d:%02d'", i%12+1, i%28+1, i%24, (i*7)%60, (i*11)%60)
		}
		f := "NULL"
		if i%3 != 0 {
			f = fmt.Sprintf("%d.25", i-12)
		}
		n := "NULL"
		if i%6 < 3 {
			n = fmt.Sprint(i - 10)
		}
		rows = append(rows, fmt.Sprintf("(%d, %d, '%s', '%s', %s, %s, %s, %s)", id, i%3-1, name, name, amt, dt, f, n))
	}
	return rows
}()

var revEnv struct {
	once sync.Once
	addr string
	err  error
}

// revSetup creates the review schema on the clusters and the reference,
// starts the review sluice and loads rev.t through it and into the
// reference; it returns the sluice's address.
func revSetup(t *testing.T) string {
	t.Helper()
	revEnv.once.Do(func() { revEnv.addr, revEnv.err = startRev() })
	if revEnv.err != nil {
		t.Fatal(revEnv.err)
	}
	return revEnv.addr
}

func startRev() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*1e9)
	defer cancel()
	for name, topo := range env.clusters {
		stmts := []string{"CREATE DATABASE IF NOT EXISTS " + revSchema,
			"CREATE TABLE " + revSchema + ".bc (" + revBroadcastColumns + ")"}
		if name == defaultCluster {
			stmts = append(stmts, "CREATE TABLE "+revSchema+".plain ("+revPlainColumns+")")
		}
		for _, r := range []*rule{revT, revAI, revHalf} {
			for s := range r.shards() {
				if r.cluster(s) != name || r == revHalf && name != clusterNames[0] {
					continue
				}
				stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", r.schema, r.physical(s), r.columns))
			}
		}
		if name == clusterNames[1] {
			// The second cluster's ai ids start elsewhere, so an id tells
			// which physical table made it.
			stmts = append(stmts, "ALTER TABLE "+revSchema+"."+revAI.physical(2)+" AUTO_INCREMENT = 1000",
				"ALTER TABLE "+revSchema+"."+revAI.physical(3)+" AUTO_INCREMENT = 2000")
		}
		if err := topo.Master.Exec(ctx, stmts...); err != nil {
			return "", err
		}
	}
	if err := env.ref.Master.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+revSchema,
		"CREATE TABLE "+revSchema+".t ("+revT.columns+")",
		"CREATE TABLE "+revSchema+".bc ("+revBroadcastColumns+")",
		"CREATE TABLE "+revSchema+".plain ("+revPlainColumns+")",
		"INSERT INTO "+revSchema+".t (id, k, name, bname, amt, dt, f, n) VALUES "+strings.Join(revRows, ", ")); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[sharding]\ndefault_cluster = %q\nnode_id = 5\n\n", defaultCluster)
	for _, r := range []*rule{revT, revAI, revHalf} {
		b.WriteString(r.toml())
	}
	fmt.Fprintf(&b, "[[broadcast]]\nschema = %q\ntable = \"bc\"\n", revSchema)
	for _, tp := range clusterTopos() {
		if err := tp.WaitReplicated(ctx); err != nil {
			return "", err
		}
	}
	srv, err := startSluice(named(clusterNames, clusterTopos()), b.String())
	if err != nil {
		return "", err
	}
	// The server lives as long as the test process.
	addr := srv.Addr().String()
	o := env.ref.Opts
	db, err := sql.Open("mysql", dsn(o.AppUser, o.AppPassword, addr, revSchema, false))
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "INSERT INTO t (id, k, name, bname, amt, dt, f, n) VALUES "+strings.Join(revRows, ", ")); err != nil {
		return "", fmt.Errorf("loading rev.t through sluice: %w", err)
	}
	// Other sessions read from the replicas: they must have the rows.
	for _, tp := range clusterTopos() {
		if err := tp.WaitReplicated(ctx); err != nil {
			return "", err
		}
	}
	return addr, nil
}

// revSluice is one session of the review sluice in revSchema.
func revSluice(t *testing.T, binary bool) *sql.Conn {
	t.Helper()
	return conn(t, sluiceDB(t, revSetup(t), revSchema, binary))
}

// revRef is one session of the reference in revSchema.
func revRef(t *testing.T, binary bool) *sql.Conn {
	t.Helper()
	revSetup(t)
	return conn(t, refDB(t, revSchema, binary))
}

// mustExec runs each statement on q, failing t at the first error.
func mustExec(t *testing.T, q querier, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := q.ExecContext(ctxT(t), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// countRows is SELECT COUNT(*) of q's table where cond, through q.
func countRows(t *testing.T, q querier, table, cond string, args ...any) int {
	t.Helper()
	res := run(ctxT(t), q, stmt{sql: "SELECT COUNT(*) FROM " + table + " WHERE " + cond, args: args})
	if res.err != nil || len(res.rows) != 1 {
		t.Fatalf("COUNT of %s where %s %v: %v", table, cond, args, res)
	}
	var n int
	fmt.Sscan(res.rows[0], &n)
	return n
}

// revIDOn returns an id of rev.t's shard s not used by revRows, from start.
func revIDOn(s int, start int64) int64 {
	for id := start; ; id++ {
		if int(id%int64(revT.shards())) == s {
			return id
		}
	}
}

// revReads are scatter-gather reads of rev.t whose answers the reference
// gives too; ordered ones have a total ORDER BY.
var revReads = []stmt{
	{sql: "SELECT COUNT(*) FROM t WHERE k > 5"},
	{sql: "SELECT COUNT(*), SUM(n), AVG(n), MIN(n), MAX(n) FROM t WHERE k > 5"},
	{sql: "SELECT SUM(n), COUNT(n), AVG(n) FROM t WHERE n IS NULL"},
	{sql: "SELECT COUNT(*), SUM(amt), AVG(amt), MIN(amt), MAX(amt), MIN(dt), MAX(dt) FROM t"},
	{sql: "SELECT SUM(f), AVG(f), MIN(f), MAX(f) FROM t"},
	{sql: "SELECT MAX(id), MIN(id) FROM t"},
	{sql: "SELECT id, amt, dt, f, n FROM t ORDER BY amt, id", ordered: true},
	{sql: "SELECT id, amt FROM t ORDER BY amt DESC, id LIMIT 5 OFFSET 3", ordered: true},
	{sql: "SELECT id FROM t ORDER BY dt DESC, id LIMIT 4 OFFSET 2", ordered: true},
	{sql: "SELECT id FROM t ORDER BY n, id LIMIT 6", ordered: true},
	{sql: "SELECT * FROM t ORDER BY f DESC, id LIMIT 5", ordered: true},
	{sql: "SELECT id, name FROM t ORDER BY name, id", ordered: true},
	{sql: "SELECT id, bname FROM t ORDER BY bname, id", ordered: true},
	{sql: "SELECT COUNT(*) AS c FROM t GROUP BY name ORDER BY c, MIN(id)", ordered: true},
	{sql: "SELECT COUNT(*) AS c FROM t GROUP BY bname ORDER BY c, MIN(id)", ordered: true},
	{sql: "SELECT DISTINCT LOWER(name) FROM t ORDER BY 1", ordered: true},
	{sql: "SELECT DISTINCT bname FROM t ORDER BY 1", ordered: true},
	{sql: "SELECT k, COUNT(*), SUM(amt), AVG(f) FROM t GROUP BY k ORDER BY k DESC LIMIT 2", ordered: true},
	{sql: "SELECT k, COUNT(*) AS c FROM t GROUP BY k ORDER BY c DESC, k LIMIT 1 OFFSET 1", ordered: true},
	{sql: "SELECT DISTINCT k FROM t ORDER BY k DESC LIMIT 2", ordered: true},
	{sql: "SELECT k, SUM(n) FROM t GROUP BY k", ordered: false},
	{sql: "SELECT k, COUNT(*) FROM t WHERE k > 5 GROUP BY k"},
	{sql: "SELECT id FROM t WHERE id IN (1, 6, 11, 16, 21, 26, 31, 36) ORDER BY id DESC LIMIT 3", ordered: true},
	{sql: "SELECT id, amt FROM t WHERE id IN (1, 6, 11, 16, 21, 26, 31, 36)"},
	{sql: "SELECT id FROM t ORDER BY id LIMIT 0", ordered: true},
}

// TestReviewScatterMatchesReference: every revReads statement gives on
// the review sluice what the reference gives, in the text protocol and as
// prepared statements (binary-protocol rows built by the merge).
func TestReviewScatterMatchesReference(t *testing.T) {
	for _, binary := range []bool{false, true} {
		sl, ref := revSluice(t, binary), revRef(t, binary)
		ctx := ctxT(t)
		for _, s := range revReads {
			var got, want result
			if binary {
				got, want = runPrepared(ctx, sl, s), runPrepared(ctx, ref, s)
			} else {
				got, want = run(ctx, sl, s), run(ctx, ref, s)
			}
			if !same(got, want) {
				t.Errorf("binary=%v %s\n  sluice:    %v\n  reference: %v", binary, s.sql, got, want)
			}
		}
	}
}

// runPrepared runs s as a server-side prepared statement on c (binary
// rows even without parameters).
func runPrepared(ctx context.Context, c *sql.Conn, s stmt) result {
	ps, err := c.PrepareContext(ctx, s.sql)
	if err != nil {
		return result{err: err}
	}
	defer ps.Close()
	return run(ctx, stmtQuerier{ps}, s)
}

// TestReviewTxnScatterSeesOwnWrites: inside a transaction, a read over
// two physical tables of one cluster sees the transaction's own
// uncommitted rows in both, as one server does, and SELECT ... FOR UPDATE
// over them runs inside the transaction.
func TestReviewTxnScatterSeesOwnWrites(t *testing.T) {
	c := revSluice(t, false)
	a, b := revIDOn(0, 5000), revIDOn(1, 5000) // both on c1, tables t_0 and t_1
	ins := func(id int64) string {
		return fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 50, 'tx', 'tx')", id)
	}
	mustExec(t, c, "BEGIN", ins(a), ins(b))
	defer c.ExecContext(ctxT(t), "ROLLBACK")
	if n := countRows(t, c, "t", "id IN (?, ?)", a, b); n != 2 {
		t.Errorf("BEGIN; two INSERTs on one cluster; SELECT COUNT(*) over both tables = %d, want 2 (the transaction's own rows)", n)
	}
	if n := countRows(t, c, "t", "k = 50"); n != 2 {
		t.Errorf("BEGIN; two INSERTs on one cluster; scatter COUNT(*) WHERE k = 50 = %d, want 2", n)
	}
	mustExec(t, c, "ROLLBACK")
	if n := countRows(t, c, "t", "k = 50"); n != 0 {
		t.Errorf("after ROLLBACK: %d rows with k = 50, want 0", n)
	}
}

// TestReviewSavepointBeforeFirstWrite: BEGIN; SAVEPOINT s; INSERT (on a
// cluster other than the default one); ROLLBACK TO SAVEPOINT s undoes the
// INSERT, and COMMIT leaves nothing.
func TestReviewSavepointBeforeFirstWrite(t *testing.T) {
	c := revSluice(t, false)
	a := revIDOn(0, 5100) // c1; the default cluster is c2
	mustExec(t, c, "BEGIN", "SAVEPOINT s1",
		fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 51, 'sp', 'sp')", a))
	if _, err := c.ExecContext(ctxT(t), "ROLLBACK TO SAVEPOINT s1"); err != nil {
		t.Errorf("ROLLBACK TO SAVEPOINT s1 after BEGIN; SAVEPOINT s1; INSERT: %v (want OK)", err)
	}
	mustExec(t, c, "COMMIT")
	if n := countRows(t, c, "t", "k = 51"); n != 0 {
		t.Errorf("after ROLLBACK TO SAVEPOINT and COMMIT: %d rows, want 0", n)
	}
	mustExec(t, c, fmt.Sprintf("DELETE FROM t WHERE id = %d", a))
}

// TestReviewSavepointAfterWrite: a savepoint taken after a write on one
// cluster rolls back later writes of that cluster only.
func TestReviewSavepointAfterWrite(t *testing.T) {
	c := revSluice(t, false)
	a, b := revIDOn(0, 5200), revIDOn(1, 5200)
	ins := func(id int64) string {
		return fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 52, 'sp', 'sp')", id)
	}
	mustExec(t, c, "BEGIN", ins(a), "SAVEPOINT s1", ins(b), "ROLLBACK TO SAVEPOINT s1", "COMMIT")
	if n := countRows(t, c, "t", "k = 52"); n != 1 {
		t.Errorf("rows after ROLLBACK TO SAVEPOINT: %d, want 1", n)
	}
	mustExec(t, c, "DELETE FROM t WHERE k = 52")
}

// TestReviewAutocommitOff: with autocommit=0 a write is undone by
// ROLLBACK, and a write to a second cluster is refused with 1235 without
// half-writing; COMMIT makes the first cluster's write stay.
func TestReviewAutocommitOff(t *testing.T) {
	c := revSluice(t, false)
	a, b := revIDOn(0, 5300), revIDOn(2, 5300) // c1, c2
	ins := func(id int64) string {
		return fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 53, 'ac', 'ac')", id)
	}
	mustExec(t, c, "SET autocommit = 0", ins(a), "ROLLBACK")
	if n := countRows(t, c, "t", "k = 53"); n != 0 {
		t.Errorf("autocommit=0; INSERT; ROLLBACK: %d rows, want 0", n)
	}
	mustExec(t, c, ins(a))
	_, err := c.ExecContext(ctxT(t), ins(b))
	checkErr(t, "autocommit=0, write to a second cluster", ins(b), err, 1235)
	mustExec(t, c, "COMMIT", "SET autocommit = 1")
	if n := countRows(t, c, "t", "k = 53"); n != 1 {
		t.Errorf("after COMMIT: %d rows with k = 53, want 1", n)
	}
	mustExec(t, c, "DELETE FROM t WHERE k = 53")
}

// TestReviewReadOtherClusterThenWrite: BEGIN, a read on cluster A, a write
// on cluster B and COMMIT work; an empty BEGIN; COMMIT is fine; the
// session then runs autocommit statements normally.
func TestReviewReadOtherClusterThenWrite(t *testing.T) {
	c := revSluice(t, false)
	a := revIDOn(2, 5400) // c2
	mustExec(t, c, "BEGIN", "COMMIT", "BEGIN")
	if n := countRows(t, c, "t", "id = 1"); n != 1 { // c1
		t.Errorf("read in transaction: %d, want 1", n)
	}
	mustExec(t, c, fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 54, 'rw', 'rw')", a), "COMMIT")
	if n := countRows(t, c, "t", "k = 54"); n != 1 {
		t.Errorf("after COMMIT: %d rows, want 1", n)
	}
	mustExec(t, c, "DELETE FROM t WHERE k = 54")
}

// TestReviewFailedWriteDoesNotClaimCluster: inside a transaction, a write
// that fails (duplicate key) changed nothing, so the transaction may still
// write to another cluster, as on one server.
func TestReviewFailedWriteDoesNotClaimCluster(t *testing.T) {
	c := revSluice(t, false)
	b := revIDOn(2, 5500) // c2
	mustExec(t, c, "BEGIN")
	defer c.ExecContext(ctxT(t), "ROLLBACK")
	_, err := c.ExecContext(ctxT(t), "INSERT INTO t (id, k, name, bname) VALUES (1, 55, 'dup', 'dup')") // id 1 exists, on c1
	if errCode(err) != 1062 {
		t.Fatalf("duplicate INSERT: %v, want 1062", err)
	}
	if _, err := c.ExecContext(ctxT(t), fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 55, 'ok', 'ok')", b)); err != nil {
		t.Errorf("INSERT on c2 after a failed INSERT on c1 in one transaction: %v, want OK (the transaction wrote nothing on c1)", err)
	}
	mustExec(t, c, "ROLLBACK")
}

// revBoth runs each statement on the review sluice and on the reference
// and fails t unless both give the same answer.
func revBoth(t *testing.T, sl, ref querier, stmts ...stmt) {
	t.Helper()
	ctx := ctxT(t)
	for _, s := range stmts {
		got, want := run(ctx, sl, s), run(ctx, ref, s)
		if !same(got, want) {
			t.Errorf("%s\n  sluice:    %v\n  reference: %v", s, got, want)
		}
	}
}

// TestReviewWritesMatchReference: multi-row INSERT over every shard, the
// same rows again with ON DUPLICATE KEY UPDATE, UPDATE and DELETE without
// the key: affected rows and resulting rows as on the reference.
func TestReviewWritesMatchReference(t *testing.T) {
	sl, ref := revSluice(t, false), revRef(t, false)
	w := func(q string) stmt { return stmt{sql: q, write: true} }
	// Reads go to the masters: TestReviewCausalAfterMultiShardWrite is
	// about what replicas show after these writes.
	r := func(q string) stmt { return stmt{sql: "/* sluice:master */ " + q, ordered: true} }
	revBoth(t, sl, ref,
		w("INSERT INTO t (id, k, name, bname, amt, n) VALUES (6000, 60, 'w', 'w', 1.50, 1), (6001, 60, 'w', 'w', 2.50, 2), (6002, 60, 'w', 'w', -3.25, NULL), (6003, 60, 'w', 'w', NULL, 4), (6004, 60, 'w', 'w', 5.00, 5)"),
		w("INSERT INTO t (id, k, name, bname, amt, n) VALUES (6000, 60, 'w', 'w', 1.50, 1), (6001, 60, 'w', 'w', 9.50, 2), (6006, 60, 'w', 'w', 7.00, 7), (6007, 60, 'w', 'w', 8.00, 8) ON DUPLICATE KEY UPDATE amt = VALUES(amt), n = n + 10"),
		r("SELECT id, amt, n FROM t WHERE k = 60 ORDER BY id"),
		w("UPDATE t SET n = 100 WHERE k = 60 AND n > 5"),
		w("UPDATE t SET n = 100 WHERE k = 60"),
		w("REPLACE INTO t (id, k, name, bname, amt) VALUES (6002, 60, 'r', 'r', 0.00), (6008, 60, 'r', 'r', 0.00)"),
		r("SELECT id, name, amt, n FROM t WHERE k = 60 ORDER BY id"),
		w("DELETE FROM t WHERE k = 60 AND amt > 2"),
		r("SELECT id FROM t WHERE k = 60 ORDER BY id"),
		w("DELETE FROM t WHERE k = 60"),
	)
}

// TestReviewBroadcast: broadcast writes change every copy and report the
// reference's affected rows; reads answer like the reference.
func TestReviewBroadcast(t *testing.T) {
	sl, ref := revSluice(t, false), revRef(t, false)
	w := func(q string) stmt { return stmt{sql: q, write: true} }
	revBoth(t, sl, ref,
		w("INSERT INTO bc (code, name) VALUES ('DE', 'Germany'), ('FR', 'France'), ('JP', 'Japan')"),
		w("UPDATE bc SET name = UPPER(name) WHERE code IN ('DE', 'FR', 'XX')"),
		stmt{sql: "/* sluice:master */ SELECT code, name FROM bc ORDER BY code", ordered: true},
		w("DELETE FROM bc WHERE code = 'JP'"),
		stmt{sql: "/* sluice:master */ SELECT COUNT(*) FROM bc"},
	)
	for _, name := range clusterNames {
		if n := countOn(t, name, revSchema, "bc", "name IN ('GERMANY', 'FRANCE')"); n != 2 {
			t.Errorf("cluster %s: %d updated broadcast rows, want 2", name, n)
		}
	}
	revBoth(t, sl, ref, w("DELETE FROM bc"))
}

// TestReviewUseAndShow: USE of another schema, then qualified names of
// the sharded table; DESCRIBE and SHOW CREATE TABLE of a sharded table
// show the logical table.
func TestReviewUseAndShow(t *testing.T) {
	sl, ref := revSluice(t, false), revRef(t, false)
	revBoth(t, sl, ref,
		stmt{sql: "USE " + diffSchema, write: true},
		stmt{sql: "SELECT COUNT(*), SUM(amt) FROM rev.t"},
		stmt{sql: "SELECT x.id, x.name FROM rev.t x WHERE x.id IN (1, 6, 11) ORDER BY x.id", ordered: true},
		stmt{sql: "SELECT id FROM rev.t ORDER BY id DESC LIMIT 2", ordered: true},
		stmt{sql: "USE " + revSchema, write: true},
		stmt{sql: "SELECT COUNT(*) FROM t"},
		stmt{sql: "DESCRIBE t", ordered: true},
		stmt{sql: "SHOW COLUMNS FROM t", ordered: true},
	)
}

// TestReviewShowCreateTable: SHOW CREATE TABLE of a sharded table names
// the logical table, as the reference does: schema tools and ORMs read
// the name and the DDL from it.
func TestReviewShowCreateTable(t *testing.T) {
	revBoth(t, revSluice(t, false), revRef(t, false), stmt{sql: "SHOW CREATE TABLE t", ordered: true})
}

// TestReviewScatterEarlyStopReuse: scatter reads that stop at LIMIT
// before reading every shard's rows leave the session's connections
// clean: the next statements, text and prepared, in and out of a
// transaction, answer like the reference.
func TestReviewScatterEarlyStopReuse(t *testing.T) {
	for _, binary := range []bool{false, true} {
		sl, ref := revSluice(t, binary), revRef(t, binary)
		reads := []stmt{
			{sql: "SELECT id FROM t LIMIT 1"},
			{sql: "SELECT COUNT(*) FROM t"},
			{sql: "SELECT id, name FROM t ORDER BY id LIMIT 2", ordered: true},
			{sql: "SELECT id FROM t WHERE id = 6"},
			{sql: "SELECT DISTINCT k FROM t LIMIT 1"},
			{sql: "SELECT id, amt FROM t ORDER BY amt DESC, id LIMIT 3", ordered: true},
		}
		if binary {
			for _, s := range reads {
				got, want := runPrepared(ctxT(t), sl, s), runPrepared(ctxT(t), ref, s)
				if s.sql == "SELECT id FROM t LIMIT 1" || s.sql == "SELECT DISTINCT k FROM t LIMIT 1" {
					got.rows, want.rows = got.rows[:0], want.rows[:0] // any row
				}
				if !same(got, want) {
					t.Errorf("prepared %s\n  sluice:    %v\n  reference: %v", s, got, want)
				}
			}
			continue
		}
		for _, inTx := range []bool{false, true} {
			if inTx {
				mustExec(t, sl, "BEGIN")
				mustExec(t, ref, "BEGIN")
			}
			for _, s := range reads {
				got, want := run(ctxT(t), sl, s), run(ctxT(t), ref, s)
				if s.sql == "SELECT id FROM t LIMIT 1" || s.sql == "SELECT DISTINCT k FROM t LIMIT 1" {
					if len(got.rows) != 1 || got.err != nil {
						t.Errorf("%s (transaction %v): %v, want one row", s, inTx, got)
					}
					continue
				}
				if !same(got, want) {
					t.Errorf("%s (transaction %v)\n  sluice:    %v\n  reference: %v", s, inTx, got, want)
				}
			}
			if inTx {
				mustExec(t, sl, "COMMIT")
				mustExec(t, ref, "COMMIT")
			}
		}
	}
}

// TestReviewShardTableMissing: a scatter read reaching a physical table
// that one cluster lacks fails with 1146 naming it, in the text protocol
// and as a prepared statement, and the session's next statements answer
// like the reference.
func TestReviewShardTableMissing(t *testing.T) {
	for _, binary := range []bool{false, true} {
		sl, ref := revSluice(t, binary), revRef(t, binary)
		for _, q := range []string{"SELECT COUNT(*) FROM half", "SELECT id FROM half ORDER BY id LIMIT 3"} {
			var res result
			if binary {
				res = runPrepared(ctxT(t), sl, stmt{sql: q})
			} else {
				res = run(ctxT(t), sl, stmt{sql: q})
			}
			if errCode(res.err) != 1146 || !strings.Contains(res.err.Error(), "half") {
				t.Errorf("binary=%v %s: %v, want error 1146 naming half", binary, q, res)
			}
			s := stmt{sql: "SELECT id, amt FROM t ORDER BY id LIMIT 4", ordered: true}
			var got, want result
			if binary {
				got, want = runPrepared(ctxT(t), sl, s), runPrepared(ctxT(t), ref, s)
			} else {
				got, want = run(ctxT(t), sl, s), run(ctxT(t), ref, s)
			}
			if !same(got, want) {
				t.Errorf("binary=%v after %s: %s\n  sluice:    %v\n  reference: %v", binary, q, s, got, want)
			}
		}
	}
}

// TestReviewSessionEndsInTransaction: a session that ends inside a
// transaction leaves nothing of it, and the connections it held serve
// later sessions in autocommit mode.
func TestReviewSessionEndsInTransaction(t *testing.T) {
	d := sluiceDB(t, revSetup(t), revSchema, false)
	a, b := revIDOn(0, 5600), revIDOn(2, 5600)
	c1, err := d.Conn(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, c1, "BEGIN", fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 56, 'gone', 'gone')", a),
		"SELECT COUNT(*) FROM t WHERE k = 56")
	// Close the client's connection without a COMMIT or ROLLBACK.
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	d.SetMaxIdleConns(0)
	for range 4 {
		c := conn(t, d)
		mustExec(t, c, fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 56, 'kept', 'kept') ON DUPLICATE KEY UPDATE name = 'kept'", b),
			fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 56, 'kept', 'kept') ON DUPLICATE KEY UPDATE name = 'kept'", a))
		c.Close()
	}
	for _, id := range []int64{a, b} {
		s := int(id % int64(revT.shards()))
		if n := countOn(t, revT.cluster(s), revSchema, revT.physical(s), "id = ? AND name = 'kept'", id); n != 1 {
			t.Errorf("id %d: %d committed rows on %s, want 1", id, n, revT.cluster(s))
		}
	}
	mustExec(t, conn(t, d), "DELETE FROM t WHERE k = 56")
}

// TestReviewLastInsertID: LAST_INSERT_ID() and the OK packet's insert id
// after INSERTs into a sharded table with an AUTO_INCREMENT column are
// the id of the statement's first row, as on one server.
func TestReviewLastInsertID(t *testing.T) {
	c := revSluice(t, false)
	ctx := ctxT(t)
	u1, u2 := int64(9002), int64(9001) // shard 2 (c2, ai_0, ids from 1000) and shard 1 (c1, ai_1)
	lastID := func() int64 {
		var id int64
		if err := c.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	idOf := func(u int64, v int) int64 {
		var id int64
		if err := c.QueryRowContext(ctx, "SELECT id FROM ai WHERE u = ? AND v = ?", u, v).Scan(&id); err != nil {
			t.Fatalf("id of u %d v %d: %v", u, v, err)
		}
		return id
	}
	res, err := c.ExecContext(ctx, fmt.Sprintf("INSERT INTO ai (u, v) VALUES (%d, 1)", u1))
	if err != nil {
		t.Fatal(err)
	}
	want := idOf(u1, 1)
	if got, _ := res.LastInsertId(); got != want {
		t.Errorf("single-row INSERT: OK insert id %d, want %d", got, want)
	}
	if got := lastID(); got != want {
		t.Errorf("single-row INSERT: LAST_INSERT_ID() = %d, want %d", got, want)
	}
	res, err = c.ExecContext(ctx, fmt.Sprintf("INSERT INTO ai (u, v) VALUES (%d, 2), (%d, 2)", u1, u2))
	if err != nil {
		t.Fatal(err)
	}
	want = idOf(u1, 2)
	if got, _ := res.LastInsertId(); got != want {
		t.Errorf("INSERT of rows on two shards, first row on shard 2: OK insert id %d, want the first row's %d", got, want)
	}
	if got := lastID(); got != want {
		t.Errorf("INSERT of rows on two shards, first row on shard 2: LAST_INSERT_ID() = %d, want the first row's %d", got, want)
	}
}

// TestReviewPreparedParams: prepared reads whose parameters spread them
// over several shards (IN lists, LIMIT ?, ranges) answer like the
// reference in the binary protocol, each execution with its own values.
func TestReviewPreparedParams(t *testing.T) {
	sl, ref := revSluice(t, true), revRef(t, true)
	ctx := ctxT(t)
	cases := []struct {
		sql     string
		ordered bool
		args    [][]any
	}{
		{"SELECT id, amt, dt, n FROM t WHERE id IN (?, ?, ?, ?) ORDER BY id", true,
			[][]any{{1, 6, 11, 16}, {21, 21, 21, 21}, {26, 999, -4, 31}}},
		{"SELECT id, name FROM t WHERE k = ? ORDER BY id LIMIT ? OFFSET ?", true,
			[][]any{{0, 3, 1}, {-1, 2, 0}, {1, 100, 5}}},
		{"SELECT k, COUNT(*), SUM(amt), MIN(dt) FROM t WHERE id BETWEEN ? AND ? GROUP BY k", false,
			[][]any{{1, 60}, {50, 120}, {200, 300}}},
		{"SELECT COUNT(*), AVG(f) FROM t WHERE amt < ?", false,
			[][]any{{"-10.5"}, {0}, {-1000}}},
	}
	for _, tc := range cases {
		ps1, err := sl.PrepareContext(ctx, tc.sql)
		if err != nil {
			t.Fatalf("prepare %s on sluice: %v", tc.sql, err)
		}
		ps2, err := ref.PrepareContext(ctx, tc.sql)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range tc.args {
			s := stmt{sql: tc.sql, args: a, ordered: tc.ordered}
			got, want := run(ctx, stmtQuerier{ps1}, s), run(ctx, stmtQuerier{ps2}, s)
			if !same(got, want) {
				t.Errorf("%s\n  sluice:    %v\n  reference: %v", s, got, want)
			}
		}
		ps1.Close()
		ps2.Close()
	}
}

// TestReviewCausalAfterMultiShardWrite: with consistency = "causal" a
// session reads its own writes. The replica of c1 stops applying, so a
// read that goes to it instead of waiting for it (or going to the master)
// misses the write: after an INSERT split over shards, after a broadcast
// DELETE, and after a COMMIT whose writing cluster was not the session's
// active one.
func TestReviewCausalAfterMultiShardWrite(t *testing.T) {
	c := revSluice(t, false)
	replica := env.clusters[clusterNames[0]].Replicas[0]
	ctx := ctxT(t)
	mustExec(t, c, "INSERT INTO bc (code, name) VALUES ('AA', 'a'), ('BB', 'b')")
	waitReplicated(t)
	if err := replica.Exec(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := replica.Exec(ctxT(t), "START SLAVE SQL_THREAD"); err != nil {
			t.Error(err)
		}
		waitReplicated(t)
		mustExec(t, c, "DELETE FROM t WHERE k = 70", "DELETE FROM bc")
	}()
	a, b, d := revIDOn(0, 7000), revIDOn(1, 7000), revIDOn(2, 7000)
	mustExec(t, c, fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 70, 'c', 'c'), (%d, 70, 'c', 'c'), (%d, 70, 'c', 'c')", a, b, d))
	if n := countRows(t, c, "t", "k = 70"); n != 3 {
		t.Errorf("after an INSERT over three shards: SELECT COUNT(*) = %d, want 3 (read your writes)", n)
	}
	mustExec(t, c, "DELETE FROM bc WHERE code = 'AA'")
	countRows(t, c, "t", "id = 1") // on c1: the broadcast read below picks c1's copy
	if n := countRows(t, c, "bc", "code = 'AA'"); n != 0 {
		t.Errorf("after a broadcast DELETE: %d rows still read, want 0", n)
	}
	e := revIDOn(0, 7100)
	mustExec(t, c, "BEGIN", fmt.Sprintf("INSERT INTO t (id, k, name, bname) VALUES (%d, 70, 'c', 'c')", e),
		"SELECT COUNT(*) FROM plain", "COMMIT")
	if n := countRows(t, c, "t", "id = ?", e); n != 1 {
		t.Errorf("BEGIN; INSERT on c1; read on c2; COMMIT; then SELECT on c1: %d rows, want 1", n)
	}
}

// TestReviewAccentsGroupTogether: utf8mb4_general_ci (the servers'
// default) compares 'e' and 'é' equal, so GROUP BY and DISTINCT over
// shards must put them in one group, as the reference does.
func TestReviewAccentsGroupTogether(t *testing.T) {
	sl, ref := revSluice(t, false), revRef(t, false)
	w := func(q string) stmt { return stmt{sql: q, write: true} }
	revBoth(t, sl, ref,
		w("INSERT INTO t (id, k, name, bname) VALUES (8000, 80, 'cafe', 'x'), (8001, 80, 'café', 'x'), (8002, 80, 'CAFÉ', 'x'), (8003, 80, 'Cafe', 'x')"),
		stmt{sql: "/* sluice:master */ SELECT COUNT(*) FROM t WHERE k = 80 GROUP BY name"},
		w("DELETE FROM t WHERE k = 80"),
	)
}
