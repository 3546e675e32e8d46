package sharding

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/shard"
)

// The tests of this file check that sluice's rewrites of a statement mean
// what the statement means (issue 20 items 8, 9, 14 and 15): sluice on
// schema r20 (r20.t sharded by k over 2 tables on each cluster, so even a
// one-shard statement is rewritten) against the reference server, under
// each sql_mode that changes how a text is read, in both protocols.

const r20Schema = "r20"

var r20Rule = &rule{schema: r20Schema, table: "t", key: "k", algo: "mod", clusters: clusterNames, tables: 2,
	columns: "id BIGINT NOT NULL PRIMARY KEY, k BIGINT NOT NULL, qty INT NOT NULL, s VARCHAR(32) NOT NULL, " +
		"bin VARBINARY(16) NULL, dbl DOUBLE NULL, d DATETIME(6) NULL"}

// r20Strings are the values of s: backslashes and quotes read otherwise
// under NO_BACKSLASH_ESCAPES, letter case and LIKE's wildcards.
var r20Strings = []string{`x\y`, `x\\y`, "ab", "AB", "a%b", "it's", "xy"}

// r20Rows are the rows of r20.t, as VALUES tuples in the default sql_mode.
var r20Rows = func() []string {
	var rows []string
	for id := 1; id <= 40; id++ {
		s := r20Strings[id%len(r20Strings)]
		s = strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `''`)
		rows = append(rows, fmt.Sprintf("(%d, %d, %d, '%s', X'%02x41', %d/10, '2020-01-%02d 10:00:00.%06d')",
			id, id, id%7, s, id, id, id%28+1, id*1000))
	}
	return rows
}()

var r20Env struct {
	once sync.Once
	addr string
	err  error
}

// r20Setup creates r20 on the clusters and the reference (with t_0, a copy
// of t, for the restore tests) and starts this file's sluice.
func r20Setup(t *testing.T) string {
	t.Helper()
	r20Env.once.Do(func() { r20Env.addr, r20Env.err = startR20() })
	if r20Env.err != nil {
		t.Fatal(r20Env.err)
	}
	return r20Env.addr
}

func startR20() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*1e9)
	defer cancel()
	for name, topo := range env.clusters {
		stmts := []string{"CREATE DATABASE IF NOT EXISTS " + r20Schema}
		for s := range r20Rule.shards() {
			if r20Rule.cluster(s) == name {
				stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", r20Schema, r20Rule.physical(s), r20Rule.columns))
			}
		}
		if err := topo.Master.Exec(ctx, stmts...); err != nil {
			return "", err
		}
	}
	ins := func(table string) string {
		return "INSERT INTO " + r20Schema + "." + table + " (id, k, qty, s, bin, dbl, d) VALUES " + strings.Join(r20Rows, ", ")
	}
	if err := env.ref.Master.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+r20Schema,
		"CREATE TABLE "+r20Schema+".t ("+r20Rule.columns+")",
		"CREATE TABLE "+r20Schema+".t_0 ("+r20Rule.columns+")",
		ins("t"), ins("t_0")); err != nil {
		return "", err
	}
	for _, tp := range clusterTopos() {
		if err := tp.WaitReplicated(ctx); err != nil {
			return "", err
		}
	}
	srv, err := startSluice(named(clusterNames, clusterTopos()),
		fmt.Sprintf("[sharding]\ndefault_cluster = %q\n\n", defaultCluster)+r20Rule.toml())
	if err != nil {
		return "", err
	}
	// The server lives as long as the test process.
	addr := srv.Addr().String()
	o := env.ref.Opts
	db, err := sql.Open("mysql", dsn(o.AppUser, o.AppPassword, addr, r20Schema, false))
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, ins("t")); err != nil {
		return "", fmt.Errorf("loading r20.t through sluice: %w", err)
	}
	return addr, nil
}

// r20Result is what a client sees of a read: columns with their types,
// rows (sorted), or the error number.
type r20Result struct {
	cols []string
	rows []string
	code uint16
	err  string
}

func (r r20Result) String() string {
	if r.err != "" {
		return fmt.Sprintf("error %d: %s", r.code, r.err)
	}
	return fmt.Sprintf("%v %v", r.cols, r.rows)
}

func (r r20Result) equal(o r20Result) bool {
	if r.err != "" || o.err != "" {
		return r.code == o.code && r.code != 0
	}
	return slices.Equal(r.cols, o.cols) && slices.Equal(r.rows, o.rows)
}

func r20Query(ctx context.Context, q querier, query string, args ...any) r20Result {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return r20Result{code: errCode(err), err: err.Error()}
	}
	defer rows.Close()
	var r r20Result
	cts, err := rows.ColumnTypes()
	if err != nil {
		return r20Result{err: err.Error()}
	}
	for _, c := range cts {
		r.cols = append(r.cols, c.Name()+" "+c.DatabaseTypeName())
	}
	vals := make([]sql.RawBytes, len(cts))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	r.rows = []string{}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return r20Result{code: errCode(err), err: err.Error()}
		}
		var b strings.Builder
		for i, v := range vals {
			if i > 0 {
				b.WriteString(" | ")
			}
			if v == nil {
				b.WriteString("∅")
			} else {
				fmt.Fprintf(&b, "%q", v)
			}
		}
		r.rows = append(r.rows, b.String())
	}
	if err := rows.Err(); err != nil {
		return r20Result{code: errCode(err), err: err.Error()}
	}
	slices.Sort(r.rows)
	return r
}

// r20Modes are the sessions' sql_modes: the default and each mode that
// changes how the server reads a text.
var r20Modes = []string{"", "ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "PIPES_AS_CONCAT", "HIGH_NOT_PRECEDENCE",
	"ANSI_QUOTES,NO_BACKSLASH_ESCAPES,PIPES_AS_CONCAT,HIGH_NOT_PRECEDENCE"}

// r20Conns opens a sluice and a reference session in r20 under mode.
func r20Conns(t *testing.T, mode string, binary bool) (sl, ref *sql.Conn) {
	t.Helper()
	addr := r20Setup(t)
	sl, ref = conn(t, sluiceDB(t, addr, r20Schema, binary)), conn(t, refDB(t, r20Schema, binary))
	if mode != "" {
		for _, c := range []*sql.Conn{sl, ref} {
			if _, err := c.ExecContext(ctxT(t), "SET SESSION sql_mode = '"+mode+"'"); err != nil {
				t.Fatalf("SET sql_mode = %q: %v", mode, err)
			}
		}
	}
	return sl, ref
}

// r20Case is one statement of the item tests; modes lists the sql_modes
// it runs under ("*" r20All of r20Modes).
type r20Case struct {
	item  string
	sql   string
	args  []any
	modes []string
}

func r20Compare(t *testing.T, cases []r20Case) {
	t.Helper()
	for _, binary := range []bool{false, true} {
		for _, mode := range r20Modes {
			sl, ref := r20Conns(t, mode, binary)
			for _, c := range cases {
				if c.modes[0] != "*" && !slices.Contains(c.modes, mode) {
					continue
				}
				got, want := r20Query(ctxT(t), sl, c.sql, c.args...), r20Query(ctxT(t), ref, c.sql, c.args...)
				if !got.equal(want) {
					t.Errorf("item %s, sql_mode %q, binary %v: %s %v\n sluice:    %s\n reference: %s",
						c.item, mode, binary, c.sql, c.args, got, want)
				}
			}
		}
	}
}

var r20All = []string{"*"}

// TestRewriteLiteralsAsWritten (item 8): hexadecimal, bit, introduced and
// exponent literals reach the shards as the client wrote them, on one
// shard and over several.
func TestRewriteLiteralsAsWritten(t *testing.T) {
	r20Compare(t, []r20Case{
		{"8", "SELECT id, s FROM t WHERE k = 0x0b", nil, r20All},
		{"8", "SELECT id FROM t WHERE k = X'0b'", nil, r20All},
		{"8", "SELECT k, 0x41+0, 0b1000001+0, b'1000001'+0 FROM t WHERE k = 3", nil, r20All},
		{"8", "SELECT k, X'41'+0, X'42' FROM t WHERE k = 3", nil, r20All},
		{"8", "SELECT k, 0x41+0 AS h FROM t WHERE k IN (1, 2, 3, 4)", nil, r20All},
		{"8", "SELECT COUNT(*) FROM t WHERE qty = 0x03", nil, r20All},
		{"8", "SELECT k, 1e0, 1.50, .5, 1E-1, 0x41 FROM t WHERE k = 5", nil, r20All},
		{"8", "SELECT k, _latin1 X'e9', _binary'ab', _utf8mb4'c' FROM t WHERE k = 6", nil, r20All},
		{"8", "SELECT id FROM t WHERE bin = 0x0141", nil, r20All},
		{"8", "SELECT id FROM t WHERE k < 0x03 ORDER BY id", nil, r20All},
		{"8", "UPDATE t SET qty = qty WHERE k = 0x07", nil, r20All},
	})
	// One value written both as 0x41 and as X'41' (a number and a string
	// to MariaDB, one literal to the parser): refused, not guessed.
	sl, _ := r20Conns(t, "", false)
	res := r20Query(ctxT(t), sl, "SELECT k, 0x41+0, X'41'+0 FROM t WHERE k = 3")
	if res.code != 1235 || !strings.Contains(res.err, "x'41'") {
		t.Errorf("SELECT k, 0x41+0, X'41'+0 ... on a sharded table: %s, want error 1235 naming the literal", res)
	}
}

// TestRewriteInsertLiterals (items 8, 9): a multi-row REPLACE split over
// shards writes the rows' values as the client spelled them, under each
// sql_mode, in both protocols.
func TestRewriteInsertLiterals(t *testing.T) {
	const (
		write = `REPLACE INTO t (id, k, qty, s, bin) VALUES (201, 201, 0x05, 'n\%', X'41'), (202, 202, 0x40+1, "m", 0x42), (203, 203, ?, ?, ?)`
		read  = "SELECT id, k, qty, s, HEX(bin) FROM t WHERE id > 200"
	)
	for _, binary := range []bool{false, true} {
		for _, mode := range r20Modes {
			sl, ref := r20Conns(t, mode, binary)
			// Each round is a new session, and reads are causal per
			// session: a REPLACE that finds the previous round's rows
			// unchanged writes nothing this session could wait for on a
			// replica. Start each round from no rows.
			mustExec(t, sl, "DELETE FROM t WHERE id > 200")
			mustExec(t, ref, "DELETE FROM t WHERE id > 200")
			args := []any{0.5, `p\q`, []byte("r\x00")}
			rs, errS := sl.ExecContext(ctxT(t), write, args...)
			rr, errR := ref.ExecContext(ctxT(t), write, args...)
			if errS != nil || errR != nil {
				if errCode(errS) != errCode(errR) || errCode(errS) == 0 {
					t.Errorf("sql_mode %q, binary %v: %s\n sluice:    %v\n reference: %v", mode, binary, write, errS, errR)
				}
				continue
			}
			ns, _ := rs.RowsAffected()
			nr, _ := rr.RowsAffected()
			got, want := r20Query(ctxT(t), sl, read), r20Query(ctxT(t), ref, read)
			if ns != nr || !got.equal(want) {
				t.Errorf("sql_mode %q, binary %v: %s\n sluice:    %d affected, %s\n reference: %d affected, %s", mode, binary, write, ns, got, nr, want)
			}
		}
	}
	// The restore tests compare t and t_0 on the reference: leave t as it was.
	sl, ref := r20Conns(t, "", false)
	mustExec(t, sl, "DELETE FROM t WHERE id > 200")
	mustExec(t, ref, "DELETE FROM t WHERE id > 200")
}

// TestRewriteUnderSQLMode (item 9): statements whose reading depends on
// the session's sql_mode are rewritten as the server reads them.
func TestRewriteUnderSQLMode(t *testing.T) {
	r20Compare(t, []r20Case{
		{"9 ANSI_QUOTES", `SELECT COUNT(*) FROM t WHERE "qty" > 3`, nil, r20All},
		{"9 ANSI_QUOTES", `SELECT id FROM t WHERE k = 4 AND "s" = s`, nil, r20All},
		{"9 NO_BACKSLASH_ESCAPES", `SELECT COUNT(*) FROM t WHERE s = 'x\\y'`, nil, r20All},
		{"9 NO_BACKSLASH_ESCAPES", `SELECT COUNT(*) FROM t WHERE s = 'x\y'`, nil, r20All},
		{"9 NO_BACKSLASH_ESCAPES", `SELECT id FROM t WHERE s LIKE 'a\%b' OR s LIKE 'x\%'`, nil, r20All},
		{"9 NO_BACKSLASH_ESCAPES", `SELECT id, s FROM t WHERE s LIKE 'x\\%' ORDER BY id`, nil, r20All},
		{"9 NO_BACKSLASH_ESCAPES", `SELECT id FROM t WHERE k = 1 AND s <> 'x\'y'`, nil, []string{""}},
		{"9 PIPES_AS_CONCAT", `SELECT k, 'x' || 'y' FROM t WHERE k IN (1, 2)`, nil, r20All},
		{"9 PIPES_AS_CONCAT", `SELECT COUNT(*) FROM t WHERE s = 'x' || 'y'`, nil, r20All},
		{"9 HIGH_NOT_PRECEDENCE", `SELECT COUNT(*) FROM t WHERE NOT qty BETWEEN 2 AND 4`, nil, r20All},
		{"9 HIGH_NOT_PRECEDENCE", `SELECT COUNT(*) FROM t WHERE NOT (qty BETWEEN 2 AND 4)`, nil, r20All},
		{"9 HIGH_NOT_PRECEDENCE", `SELECT COUNT(*) FROM t WHERE NOT qty = 3`, nil, r20All},
		{"9", `SELECT id FROM t WHERE k = ? AND s = ?`, []any{1, `x\y`}, r20All},
		{"9", `SELECT id FROM t WHERE s = ? ORDER BY id`, []any{`x\\y`}, r20All},
	})
}

// TestRewriteRefusesOracleMode (item 9): under sql_mode ORACLE, whose
// grammar sluice's parser does not know, a statement on a sharded table
// is refused, not rewritten.
func TestRewriteRefusesOracleMode(t *testing.T) {
	for _, binary := range []bool{false, true} {
		sl, _ := r20Conns(t, "ORACLE", binary)
		res := r20Query(ctxT(t), sl, "SELECT COUNT(*) FROM t WHERE k = 3")
		if res.code != 1235 || !strings.Contains(res.err, "sql_mode") {
			t.Errorf("binary %v: SELECT on a sharded table under sql_mode ORACLE: %s, want error 1235 naming the sql_mode", binary, res)
		}
	}
}

// TestRewriteFunctions (item 14, first half): constructs the parser writes
// back differently are written as MariaDB reads them, or refused.
func TestRewriteFunctions(t *testing.T) {
	r20Compare(t, []r20Case{
		{"14", "SELECT k, CHAR(65 USING utf8mb4) FROM t WHERE k = 1", nil, r20All},
		{"14", "SELECT k, CHAR(65, 66 USING latin1) AS c FROM t WHERE k IN (1, 2)", nil, r20All},
		{"14", "SELECT k, CHAR(65, 66) AS c FROM t WHERE k = 2", nil, r20All},
	})
	sl, _ := r20Conns(t, "", false)
	res := r20Query(ctxT(t), sl, "SELECT id FROM t WHERE k = 1 LOCK IN SHARE MODE")
	if res.code != 1235 || !strings.Contains(res.err, "LOCK IN SHARE MODE") {
		t.Errorf("SELECT ... LOCK IN SHARE MODE on a sharded table: %s, want error 1235 naming it", res)
	}
}

// TestRewritePreparedTypes (item 15): a parameter of a prepared statement
// that runs on several shards, written into the text, has the type the
// server gives the bound parameter.
func TestRewritePreparedTypes(t *testing.T) {
	const spread = "k IN (1, 2, 3, 4)"
	r20Compare(t, []r20Case{
		{"15 DOUBLE", "SELECT k, ? AS p, ? * 3 AS m FROM t WHERE " + spread, []any{0.1, 0.1}, r20All},
		{"15 DOUBLE", "SELECT id FROM t WHERE dbl = ? AND " + spread, []any{0.3}, r20All},
		{"15 DOUBLE", "SELECT k, ? + 0 AS p FROM t WHERE " + spread, []any{5e-324}, r20All},
		{"15 FLOAT", "SELECT k, ? + 0 AS p FROM t WHERE " + spread, []any{float32(0.1)}, r20All},
		{"15 integers", "SELECT k, ? + 0 AS p, ? AS q, ? AS r FROM t WHERE " + spread, []any{int64(-7), uint64(18446744073709551615), int64(-9223372036854775808)}, r20All},
		{"15 unaliased", "SELECT k, ? FROM t WHERE " + spread, []any{0.1}, r20All},
		{"15 strings", "SELECT k, CONCAT(?, s) AS p, ? AS n FROM t WHERE " + spread, []any{`it's \ é`, nil}, r20All},
		{"15 bytes", "SELECT k, HEX(?) AS p FROM t WHERE " + spread, []any{[]byte("a\x00'\\")}, r20All},
	})
}

// r20Rules are the sharding rules of this file's table, for the restore
// tests that call the shard package directly.
func r20Rules(t *testing.T) *shard.Rules {
	t.Helper()
	cfg := &conf.Config{Sharding: conf.Sharding{DefaultCluster: defaultCluster}}
	for _, n := range clusterNames {
		cfg.Clusters = append(cfg.Clusters, conf.Cluster{Name: n})
	}
	cfg.Shards = []conf.Shard{{Schema: r20Schema, Table: "t", Key: "k", Algorithm: "mod", Clusters: clusterNames, TablesPerCluster: 2}}
	r, err := shard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// r20ShardMode is the shard package's reading of an sql_mode of r20Modes.
func r20ShardMode(mode string) shard.SQLMode {
	var m shard.SQLMode
	for w := range strings.SplitSeq(mode, ",") {
		switch w {
		case "ANSI_QUOTES":
			m |= shard.ModeANSIQuotes
		case "NO_BACKSLASH_ESCAPES":
			m |= shard.ModeNoBackslashEscapes
		case "PIPES_AS_CONCAT":
			m |= shard.ModePipesAsConcat
		case "HIGH_NOT_PRECEDENCE":
			m |= shard.ModeHighNotPrecedence
		}
	}
	return m
}

// r20RestoreCheck prepares q under mode and runs it and its rewrite for shard
// 0 (which reads t_0, a copy of t) on the reference: the two must answer
// alike. It returns whether sluice refused the statement.
func r20RestoreCheck(t *testing.T, r *shard.Rules, ref *sql.Conn, mode, q string) (refused bool) {
	t.Helper()
	tpl, err := r.PrepareMode(r20Schema, q, r20ShardMode(mode))
	if err != nil {
		if !errors.Is(err, shard.ErrUnsupported) && !errors.Is(err, shard.ErrCrossShardJoin) {
			t.Errorf("sql_mode %q: %s: %v, want a result or a refusal (1235)", mode, q, err)
		}
		for _, gap := range []string{"reads back otherwise", "does not parse again", "spells the literal"} {
			if strings.Contains(err.Error(), gap) {
				// Refused, so safe; but parse, restore, parse, restore
				// did not come back to the same text: a gap of the
				// restorer to close (or to refuse before restoring).
				t.Errorf("sql_mode %q: %s: the round trip failed: %v", mode, q, err)
			}
		}
		if testing.Verbose() {
			t.Logf("refused: sql_mode %q: %s: %v", mode, q, err)
		}
		return true
	}
	rewritten := tpl.Sample().SQL
	want, got := r20Query(ctxT(t), ref, q), r20Query(ctxT(t), ref, rewritten)
	if !got.equal(want) {
		t.Errorf("sql_mode %q:\n statement: %s\n rewrite:   %s\n statement answers %s\n rewrite answers   %s", mode, q, rewritten, want, got)
	}
	return false
}

// r20Corpus are expressions over t's columns: MariaDB's operators,
// functions and literal forms, to find what the restorer writes otherwise.
var r20Corpus = []string{
	"0x41+0", "X'41'", "b'101'+0", "0b101", "_latin1'é'", "N'x'", "_binary'ab'", "_latin1 0x41", "1e0", "-1.5e-3", ".5", "00.50",
	"18446744073709551616", "-9223372036854775808", "TRUE", "FALSE", "NULL", "'a' 'b'", "'it''s'", `'a\'b'`, `'a\\b'`, `"dq"`,
	"DATE '2020-01-02'", "TIME '10:11:12.5'", "TIMESTAMP '2020-01-02 03:04:05'", "{d '2020-01-02'}",
	"CHAR(65 USING utf8mb4)", "CHAR(65, 66)", "CONVERT(s USING latin1)", "CONVERT(s, CHAR(3))", "CAST(qty AS CHAR(3) CHARACTER SET latin1)",
	"CAST(dbl AS DECIMAL(10,3))", "CAST(qty AS SIGNED)", "CAST(qty AS UNSIGNED)", "CAST(s AS BINARY)", "CAST(qty AS DOUBLE)", "CAST(qty AS FLOAT)",
	"CAST(d AS DATE)", "CAST(d AS TIME(2))", "CAST(d AS DATETIME(3))", "CAST(s AS JSON)", "BINARY s", "s COLLATE utf8mb4_bin",
	"qty DIV 2", "qty MOD 3", "qty % 3", "-qty", "- -qty", "~qty", "qty << 2", "qty >> 1", "qty ^ 5", "qty | 8", "qty & 3",
	"NOT qty", "!qty", "NOT qty = 3", "NOT qty BETWEEN 1 AND 3", "qty IS TRUE", "qty IS NOT FALSE", "qty IS UNKNOWN", "s IS NULL",
	"qty <=> NULL", "qty XOR 1", "qty && 1", "qty || 0", "s || 'z'", "s LIKE 'a%'", "s LIKE 'a!%' ESCAPE '!'", "s NOT LIKE '%b'",
	"s REGEXP '^x'", "s RLIKE 'b$'", "s SOUNDS LIKE 'ab'", "qty IN (1, 2)", "qty NOT IN (3)", "ROW(qty, k) = ROW(3, 3)", "(qty, k) IN ((1, 1), (3, 3))",
	"qty BETWEEN 1 AND 3", "qty NOT BETWEEN 1 AND 3", "CASE qty WHEN 1 THEN 'a' ELSE 'b' END", "CASE WHEN qty > 2 THEN 1 END",
	"IF(qty > 2, 'y', 'n')", "IFNULL(bin, 'z')", "NULLIF(qty, 3)", "COALESCE(NULL, qty)", "GREATEST(qty, 3)", "LEAST(qty, 3)",
	"INTERVAL(qty, 1, 3, 5)", "d + INTERVAL 1 DAY", "INTERVAL 1 DAY + d", "d - INTERVAL '1:30' HOUR_MINUTE", "DATE_ADD(d, INTERVAL 2 MONTH)",
	"DATE_SUB(d, INTERVAL 1 YEAR)", "ADDDATE(d, 3)", "SUBDATE(d, INTERVAL 3 DAY)", "EXTRACT(YEAR_MONTH FROM d)", "TIMESTAMPADD(MINUTE, 5, d)",
	"TIMESTAMPDIFF(DAY, d, '2020-02-01')", "DATE_FORMAT(d, '%Y %b')", "GET_FORMAT(DATE, 'EUR')", "STR_TO_DATE('01,5,2013', '%d,%m,%Y')",
	"TRIM(s)", "TRIM(LEADING 'a' FROM s)", "TRIM(BOTH 'x' FROM s)", "TRIM(TRAILING FROM s)", "LTRIM(s)", "SUBSTRING(s, 2)", "SUBSTRING(s FROM 2 FOR 1)",
	"SUBSTR(s, 1, 2)", "MID(s, 1, 1)", "POSITION('b' IN s)", "LOCATE('b', s)", "INSTR(s, 'b')", "LEFT(s, 1)", "RIGHT(s, 1)", "REPEAT(s, 2)",
	"REPLACE(s, 'a', 'z')", "REVERSE(s)", "LPAD(s, 5, '*')", "RPAD(s, 5, '*')", "CONCAT_WS('-', s, qty)", "CONCAT(s, qty)", "LENGTH(s)",
	"CHAR_LENGTH(s)", "OCTET_LENGTH(s)", "BIT_LENGTH(s)", "UPPER(s)", "LOWER(s)", "UCASE(s)", "LCASE(s)", "HEX(s)", "UNHEX('41')", "ASCII(s)", "ORD(s)",
	"BIN(qty)", "OCT(qty)", "CONV(qty, 10, 2)", "FORMAT(dbl, 2)", "FORMAT(dbl, 2, 'de_DE')", "QUOTE(s)", "SPACE(2)", "INSERT(s, 1, 1, 'Q')",
	"ELT(2, 'a', 'b')", "FIELD(s, 'ab', 'xy')", "FIND_IN_SET('b', 'a,b')", "MAKE_SET(qty, 'a', 'b', 'c')", "EXPORT_SET(5, 'Y', 'N', ',', 4)",
	"SOUNDEX(s)", "WEIGHT_STRING(s)", "WEIGHT_STRING(s AS CHAR(3))", "CHARSET(s)", "COLLATION(s)", "COERCIBILITY(s)", "MD5(s)", "SHA1(s)", "SHA2(s, 256)",
	"CRC32(s)", "TO_BASE64(s)", "FROM_BASE64('YQ==')", "REGEXP_REPLACE(s, 'a', 'b')", "REGEXP_SUBSTR(s, '[a-z]')", "REGEXP_INSTR(s, 'b')",
	"ABS(-qty)", "CEIL(dbl)", "CEILING(dbl)", "FLOOR(dbl)", "ROUND(dbl, 1)", "TRUNCATE(dbl, 1)", "SIGN(qty - 3)", "SQRT(qty)", "POW(qty, 2)", "POWER(2, qty)",
	"EXP(1)", "LN(2)", "LOG(2)", "LOG(2, 8)", "LOG2(8)", "LOG10(100)", "MOD(qty, 3)", "PI()", "DEGREES(1)", "RADIANS(90)", "SIN(qty)", "ATAN(1, 2)",
	"ATAN2(1, 2)", "CRC32('a')", "RAND(1) < 2", "YEAR(d)", "MONTH(d)", "DAY(d)", "DAYOFMONTH(d)", "DAYOFWEEK(d)", "DAYOFYEAR(d)", "WEEK(d)",
	"WEEK(d, 3)", "YEARWEEK(d)", "WEEKDAY(d)", "WEEKOFYEAR(d)", "QUARTER(d)", "HOUR(d)", "MINUTE(d)", "SECOND(d)", "MICROSECOND(d)",
	"DAYNAME(d)", "MONTHNAME(d)", "LAST_DAY(d)", "TO_DAYS(d)", "FROM_DAYS(737000)", "DATEDIFF(d, '2020-01-01')", "TIMEDIFF(d, '2020-01-01')",
	"TIME_TO_SEC('01:00:00')", "SEC_TO_TIME(3600)", "MAKEDATE(2020, 40)", "MAKETIME(1, 2, 3)", "UNIX_TIMESTAMP('2020-01-01 00:00:00') > 0",
	"FROM_UNIXTIME(0) IS NOT NULL", "DATE(d)", "TIME(d)", "TIMESTAMP(d)", "TIMESTAMP(d, '01:00:00')", "CONVERT_TZ(d, '+00:00', '+01:00')",
	"PERIOD_ADD(202001, 2)", "PERIOD_DIFF(202003, 202001)", "TO_SECONDS(d)", "JSON_OBJECT('a', qty)", "JSON_ARRAY(qty, s)",
	"JSON_EXTRACT('{\"a\": 1}', '$.a')", "JSON_UNQUOTE('\"x\"')", "JSON_VALUE('{\"a\": 2}', '$.a')", "JSON_CONTAINS('[1, 2]', '1')",
	"JSON_LENGTH('[1, 2]')", "JSON_TYPE('[]')", "JSON_VALID('{}')", "JSON_KEYS('{\"a\": 1}')", "JSON_SET('{}', '$.b', qty)",
	"JSON_QUOTE(s)", "JSON_MERGE_PATCH('{}', '{\"a\": 1}')", "INET_ATON('10.0.0.1')", "INET_NTOA(167772161)", "IS_IPV4('1.2.3.4')",
	"BIT_COUNT(qty)", "LAST_INSERT_ID() >= 0", "ISNULL(bin)", "CHARSET(CONVERT(s USING latin1))", "DEFAULT(qty)", "VALUES(qty)",
	"EXISTS (SELECT 1)", "qty IN (SELECT 3)", "(SELECT 1) + qty", "qty = ANY (SELECT 3)", "qty > ALL (SELECT 2)", "@r20v", "@@session.div_precision_increment",
	"@@sql_mode IS NOT NULL", "DATABASE()", "SCHEMA()", "VERSION() IS NOT NULL", "CURRENT_DATE() IS NOT NULL", "CURRENT_TIMESTAMP IS NOT NULL",
	"NOW(3) IS NOT NULL", "UTC_DATE IS NOT NULL", "LOCALTIMESTAMP IS NOT NULL", "CURDATE() IS NOT NULL", "CURTIME(2) IS NOT NULL",
	"SYSDATE() IS NOT NULL", "UUID() IS NOT NULL", "COLUMN_CREATE('a', 1) IS NOT NULL", "MATCH (s) AGAINST ('x')", "s->'$.a'", "s->>'$.a'",
	"NEXT VALUE FOR seq", "NEXTVAL(seq)", "LASTVAL(seq)", "SETVAL(seq, 1)", "qty := 3", "@x := qty", "ST_ASTEXT(POINT(1, 2))",
	"BENCHMARK(1, 1)", "SLEEP(0)", "GET_LOCK('x', 0) IS NOT NULL", "COMPRESS('a') IS NOT NULL", "DECODE_HISTOGRAM('SINGLE_PREC_HB', '')",
	"LAST_VALUE(qty, s)", "SFORMAT('{}', qty)", "NATURAL_SORT_KEY(s)", "KDF('a', 'b') IS NOT NULL", "TO_CHAR(d, 'YYYY')", "ADD_MONTHS(d, 1)",
	"CHR(65)", "LENGTHB(s)", "SUBSTR(s, -1)", "ROWNUM()", "SYS_GUID() IS NOT NULL", "JSON_TABLE", "s MEMBER OF ('[\"ab\"]')",
}

// r20CorpusStatements are whole statements: comments the server reads as
// code, hints, clauses around the expressions.
var r20CorpusStatements = []string{
	"SELECT id /*!50000 , qty */ FROM t WHERE k = 3",
	"SELECT id /*!99999 , qty */ FROM t WHERE k = 3",
	"SELECT id /*M!100000 , qty */ FROM t WHERE k = 3",
	"SELECT id /*M!999999 , qty */ FROM t WHERE k = 3",
	"SELECT /*+ MAX_EXECUTION_TIME(1000) */ id FROM t WHERE k = 3",
	"SELECT /* plain */ id FROM t WHERE k = 3 -- trailing",
	"SELECT id FROM t WHERE k = 3 # trailing",
	"SELECT DISTINCT qty FROM t WHERE k IN (1, 2, 3)",
	"SELECT SQL_NO_CACHE id FROM t WHERE k = 3",
	"SELECT STRAIGHT_JOIN id FROM t WHERE k = 3",
	"SELECT HIGH_PRIORITY id FROM t WHERE k = 3",
	"SELECT SQL_BIG_RESULT qty, COUNT(*) FROM t WHERE k IN (1, 2) GROUP BY qty",
	"SELECT id FROM t USE INDEX (PRIMARY) WHERE k = 3",
	"SELECT id FROM t FORCE INDEX FOR JOIN (PRIMARY) WHERE k = 3",
	"SELECT id FROM t IGNORE INDEX (PRIMARY) WHERE k = 3",
	"SELECT id FROM t WHERE k = 3 FOR UPDATE",
	"SELECT id FROM t WHERE k = 3 FOR UPDATE NOWAIT",
	"SELECT id FROM t WHERE k = 3 FOR UPDATE SKIP LOCKED",
	"SELECT id FROM t WHERE k = 3 LOCK IN SHARE MODE",
	"SELECT id FROM t WHERE k = 3 LIMIT 1 OFFSET 0",
	"SELECT id FROM t WHERE k = 3 LIMIT 0, 1",
	"SELECT id FROM t WHERE k = 3 ORDER BY id DESC LIMIT 1",
	"SELECT id FROM t WHERE k = 3 ORDER BY qty COLLATE utf8mb4_bin",
	"SELECT qty, COUNT(*) FROM t WHERE k IN (1, 2) GROUP BY qty WITH ROLLUP",
	"SELECT qty FROM t WHERE k = 3 UNION SELECT qty FROM t WHERE k = 3",
	"SELECT qty FROM t WHERE k = 3 UNION ALL SELECT 1",
	"(SELECT id FROM t WHERE k = 3)",
	"SELECT * FROM (SELECT id, qty FROM t WHERE k = 3) AS d",
	"WITH c AS (SELECT id FROM t WHERE k = 3) SELECT * FROM c",
	"SELECT id, (SELECT MAX(qty) FROM t WHERE k = 3) FROM t WHERE k = 3",
	"SELECT t.id FROM t AS t WHERE t.k = 3",
	"SELECT `t`.`id` FROM `t` WHERE `t`.`k` = 3",
	"SELECT r20.t.id FROM r20.t WHERE r20.t.k = 3",
	"SELECT id, ROW_NUMBER() OVER (ORDER BY id) FROM t WHERE k = 3",
	"SELECT id, SUM(qty) OVER w FROM t WHERE k = 3 WINDOW w AS (ORDER BY id)",
	"SELECT id FROM t WHERE k = 3 INTO @r20x",
	"SELECT id, qty FROM t WHERE k = 3 AND (id, qty) = (3, 3)",
	"SELECT id FROM t WHERE k = 3 AND s = _utf8mb4'xy' COLLATE utf8mb4_bin",
	"SELECT id FROM t WHERE k = 3 AND s = 'a' 'b'",
	"SELECT id, 'a' 'b' FROM t WHERE k = 3",
	"SELECT (qty), ((s)), (t.k), (2.5e-1), ('x'), (0x41), (-1), -(1), (1+2) FROM t WHERE k = 3",
	"SELECT (qty), (2.5e-1) FROM t WHERE k IN (3, 5) ORDER BY (qty)",
	"SELECT (NULL), (TRUE), (_latin1'x'), (N'y'), (1e0), (1.50), (18446744073709551615), ('a' 'b'), (b'1') FROM t WHERE k = 3",
	"SELECT id, 'a' \"b\" FROM t WHERE k = 3",
	"SELECT id, 1 + + 1, 1 - - 1, - - 1 FROM t WHERE k = 3",
	"SELECT id, 9223372036854775807 + 1 FROM t WHERE k = 3",
	"SELECT id, -9223372036854775808, 18446744073709551615, 18446744073709551616 FROM t WHERE k = 3",
	"SELECT id, 1.0e309 FROM t WHERE k = 3",
	"SELECT id, 123456789012345678901234567890.123 FROM t WHERE k = 3",
	"SELECT id, 0.000000000000000000000000000001 FROM t WHERE k = 3",
	"SELECT id, 1., .1e1, 1.e1 FROM t WHERE k = 3",
	"SELECT id, 0x FROM t WHERE k = 3",
	"SELECT id, 0xg FROM t WHERE k = 3",
	"SELECT id, x'' , b'' FROM t WHERE k = 3",
	"SELECT id, 0x00ff, X'00FF' + 0 FROM t WHERE k = 3",
	"SELECT id, _latin1 b'1000001', _binary 0x41 FROM t WHERE k = 3",
	"SELECT id, N'a' 'b' FROM t WHERE k = 3",
	"SELECT id, '\\0\\Z\\b\\n\\r\\t\\%\\_\\x' FROM t WHERE k = 3",
	"SELECT id FROM t WHERE k = 3 AND s LIKE '%\\%%'",
	"UPDATE t SET qty = qty + 0 WHERE k = 3",
	"DELETE FROM t WHERE k = 3 AND qty < 0",
}

// TestRewriteCorpus (item 14, first half): every construct of the corpus,
// in the select list and in WHERE, is either rewritten to a statement the
// reference answers exactly as the original, or refused with 1235.
func TestRewriteCorpus(t *testing.T) {
	r20Setup(t)
	r := r20Rules(t)
	refused, n := 0, 0
	for _, mode := range r20Modes {
		ref := conn(t, refDB(t, r20Schema, false))
		if mode != "" {
			if _, err := ref.ExecContext(ctxT(t), "SET SESSION sql_mode = '"+mode+"'"); err != nil {
				t.Fatal(err)
			}
		}
		for i, e := range append(r20Corpus, r20CorpusStatements...) {
			qs := []string{
				"SELECT id, " + e + " FROM t WHERE k = 3",
				"SELECT id FROM t WHERE k IN (3, 5) AND (" + e + ") IS NOT NULL",
			}
			if i >= len(r20Corpus) {
				qs = []string{e}
			}
			for _, q := range qs {
				n++
				if r20RestoreCheck(t, r, ref, mode, q) {
					refused++
				}
			}
		}
	}
	t.Logf("%d of %d corpus statements refused", refused, n)
}

// TestRewriteRoundTripFuzz: seeded statements made of random expressions,
// under each sql_mode, parsed, rewritten, parsed and rewritten again by
// sluice (the template's own check) and run as written and as rewritten on
// the reference: the answers must be the same.
func TestRewriteRoundTripFuzz(t *testing.T) {
	r20Setup(t)
	r := r20Rules(t)
	seed := diffSeed(t)
	t.Logf("seed %d (replay with -shard.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 20))
	n, refused := 0, 0
	for _, mode := range r20Modes {
		ref := conn(t, refDB(t, r20Schema, false))
		if mode != "" {
			if _, err := ref.ExecContext(ctxT(t), "SET SESSION sql_mode = '"+mode+"'"); err != nil {
				t.Fatal(err)
			}
		}
		for range 400 {
			g := &r20Gen{rng: rng}
			q := fmt.Sprintf("SELECT id, %s AS a, %s AS b FROM t WHERE k = %d AND (%s)", g.expr(3), g.expr(3), rng.IntN(45), g.expr(3))
			if rng.IntN(3) == 0 {
				q = fmt.Sprintf("SELECT id, %s AS a FROM t WHERE (%s) ORDER BY id", g.expr(2), g.expr(3))
			}
			n++
			if r20RestoreCheck(t, r, ref, mode, q) {
				refused++
			}
		}
	}
	t.Logf("%d statements, %d refused", n, refused)
	if refused*4 > n {
		t.Errorf("%d of %d statements refused: the generator or the rewrite is off", refused, n)
	}
}

// r20Gen makes random expressions over t's columns.
type r20Gen struct {
	rng *rand.Rand
	// params: some literals become ? markers, their values in args.
	params bool
	args   []any
}

var r20GenLiterals = []string{"0", "1", "-3", "7", "0x0b", "0x41", "X'41'", "X'0b'", "b'101'", "0b11", "1e0", "2.5e-1", ".5", "1.50",
	"'ab'", "'AB'", `'x\y'`, `'x\\y'`, `"ab"`, `'it''s'`, "_latin1'ab'", "_binary'ab'", "N'xy'", "NULL", "TRUE", "FALSE",
	"DATE '2020-01-05'", "'%b'", "18446744073709551615", "-9223372036854775808"}
var r20GenColumns = []string{"qty", "k", "s", "bin", "dbl", "d", "id", `"s"`, `"qty"`}
var r20GenBinary = []string{"+", "-", "*", "/", "DIV", "MOD", "=", "<>", "<", ">=", "<=>", "AND", "OR", "XOR", "||", "&&", "LIKE", "REGEXP", "|", "&", "^", "<<"}
var r20GenFuncs = []string{"CONCAT(%s, %s)", "IF(%s, %s, 0)", "COALESCE(%s, %s)", "GREATEST(%s, %s)", "IFNULL(%s, %s)", "NULLIF(%s, %s)",
	"CHAR(%s, %s USING latin1)", "LEFT(%s, %s)", "HEX(%s)", "LENGTH(%s)", "UPPER(%s)", "CAST(%s AS SIGNED)", "CAST(%s AS CHAR)", "ABS(%s)",
	"%s IS NULL", "NOT %s", "!%s", "-%s", "~%s", "%s BETWEEN %s AND 5", "%s IN (%s, 3)", "(%s)", "%s IS TRUE", "CASE WHEN %s THEN %s END"}

func (g *r20Gen) expr(depth int) string {
	if depth == 0 || g.rng.IntN(4) == 0 {
		if g.params && g.rng.IntN(5) == 0 {
			g.args = append(g.args, r20GenArgs[g.rng.IntN(len(r20GenArgs))])
			return "?"
		}
		if g.rng.IntN(2) == 0 {
			return r20GenLiterals[g.rng.IntN(len(r20GenLiterals))]
		}
		return r20GenColumns[g.rng.IntN(len(r20GenColumns))]
	}
	// Half the compound operands go in parentheses: the rest tests how
	// operators bind, and makes statements neither parser accepts.
	sub := func() string {
		e := g.expr(depth - 1)
		if g.rng.IntN(2) == 0 {
			return "(" + e + ")"
		}
		return e
	}
	if g.rng.IntN(2) == 0 {
		return sub() + " " + r20GenBinary[g.rng.IntN(len(r20GenBinary))] + " " + sub()
	}
	f := r20GenFuncs[g.rng.IntN(len(r20GenFuncs))]
	args := make([]any, strings.Count(f, "%s"))
	for i := range args {
		args[i] = sub()
	}
	return fmt.Sprintf(f, args...)
}

// r20RawQuery prepares q on a go-mysql client connection to addr and
// executes it with args (typed as the client library types them: float32
// as FLOAT, mysql.TypedBytes as their type), returning each column's
// name, type and decimals and the rows (sorted). Column lengths are left
// out: a literal's differs from a parameter's (see docs/sharding.md).
func r20RawQuery(t *testing.T, addr, user, password, q string, args ...any) r20Result {
	t.Helper()
	c, err := client.Connect(addr, user, password, r20Schema)
	if err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	defer c.Close()
	st, err := c.Prepare(q)
	if err != nil {
		return r20Result{code: errCode(err), err: err.Error()}
	}
	defer st.Close()
	res, err := st.Execute(args...)
	if err != nil {
		var me *gomysql.MyError
		if errors.As(err, &me) {
			return r20Result{code: me.Code, err: me.Message}
		}
		return r20Result{err: err.Error()}
	}
	defer res.Close()
	var r r20Result
	for _, f := range res.Fields {
		r.cols = append(r.cols, fmt.Sprintf("%s type %d decimals %d", f.Name, f.Type, f.Decimal))
	}
	r.rows = []string{}
	for i := range res.Values {
		var b strings.Builder
		for j := range res.Fields {
			v, _ := res.GetString(i, j)
			fmt.Fprintf(&b, "%q ", v)
		}
		r.rows = append(r.rows, b.String())
	}
	slices.Sort(r.rows)
	return r
}

// TestRewritePreparedTypesRaw (item 15): parameters bound as FLOAT,
// DOUBLE, DECIMAL, DATE, DATETIME, TIMESTAMP, TIME and BLOB, in a
// statement over several shards, come back with the type, decimals and
// value the reference gives the bound parameter.
func TestRewritePreparedTypesRaw(t *testing.T) {
	addr := r20Setup(t)
	o := env.ref.Opts
	datetime := []byte{0xe4, 0x07, 1, 2, 3, 4, 5, 0x20, 0xa1, 0x07, 0} // 2020-01-02 03:04:05.500000
	cases := []struct {
		name string
		arg  any
	}{
		{"FLOAT", float32(0.1)},
		{"FLOAT negative", float32(-1.5e-7)},
		{"DOUBLE", 0.1},
		{"DOUBLE max", 1.7976931348623157e308},
		{"DOUBLE denormal", 5e-324},
		{"DECIMAL", gomysql.TypedBytes{Type: gomysql.MYSQL_TYPE_NEWDECIMAL, Bytes: []byte("-12.50")}},
		{"DATE", gomysql.TypedBytes{Type: gomysql.MYSQL_TYPE_DATE, Bytes: []byte{0xe4, 0x07, 1, 2}}},
		{"DATETIME", gomysql.TypedBytes{Type: gomysql.MYSQL_TYPE_DATETIME, Bytes: datetime}},
		{"DATETIME whole", gomysql.TypedBytes{Type: gomysql.MYSQL_TYPE_DATETIME, Bytes: datetime[:7]}},
		{"TIME", gomysql.TypedBytes{Type: gomysql.MYSQL_TYPE_TIME, Bytes: []byte{1, 1, 0, 0, 0, 2, 3, 4, 0x20, 0xa1, 0x07, 0}}},
		{"BLOB", gomysql.TypedBytes{Type: gomysql.MYSQL_TYPE_BLOB, Bytes: []byte("a\x00'\\")}},
		{"VARCHAR", gomysql.TypedBytes{Type: gomysql.MYSQL_TYPE_VAR_STRING, Bytes: []byte(`it's \ é`)}},
		{"TINYINT", int8(-7)},
		{"SMALLINT", int16(-7)},
		{"INT", int32(-7)},
		{"BIGINT", int64(-7)},
		{"BIGINT max", int64(9223372036854775807)},
		{"BIGINT min", int64(-9223372036854775808)},
	}
	for _, q := range []string{
		"SELECT k, ? AS p FROM t WHERE k IN (1, 2, 3, 4)",
		"SELECT k, ? * 3 AS p, CONCAT(?, '') AS c FROM t WHERE k IN (1, 2, 3, 4)",
	} {
		for _, c := range cases {
			args := []any{c.arg}
			if strings.Count(q, "?") == 2 {
				args = append(args, c.arg)
			}
			got := r20RawQuery(t, addr, o.AppUser, o.AppPassword, q, args...)
			want := r20RawQuery(t, env.ref.Master.Addr(), o.ServiceUser, o.ServicePassword, q, args...)
			if bare := strings.Contains(q, "? AS p"); bare && (strings.HasPrefix(c.name, "FLOAT") || c.name == "BLOB" ||
				c.name == "TINYINT" || c.name == "SMALLINT" || c.name == "INT") {
				// Known and documented: no literal has the type of a bare
				// FLOAT parameter (FLOAT, printed as the double it holds),
				// BLOB parameter (BLOB) or TINYINT, SMALLINT or INT
				// parameter; the value and decimals agree.
				for _, r := range []*r20Result{&got, &want} {
					for i := range r.cols {
						r.cols[i] = strings.Join(strings.Fields(r.cols[i])[:1], "")
					}
				}
			}
			if !got.equal(want) {
				t.Errorf("item 15, %s: %s\n sluice:    %s\n reference: %s", c.name, q, got, want)
			}
		}
	}
}

// r20SkipBuiltins are built-ins a generated call must not run: they wait,
// lock, or read the server's files.
var r20SkipBuiltins = map[string]bool{"sleep": true, "benchmark": true, "master_pos_wait": true, "master_gtid_wait": true,
	"get_lock": true, "release_lock": true, "release_all_locks": true, "is_free_lock": true, "is_used_lock": true,
	"load_file": true, "setval": true, "nextval": true, "lastval": true}

// r20BuiltinArgs are the argument lists tried with every built-in.
var r20BuiltinArgs = []string{"()", "(qty)", "(s)", "(dbl)", "(d)", "(bin)", "(qty, 2)", "(s, 'a')", "(d, 1)", "(s, 1, 2)",
	"(qty, qty, qty)", "('2020-01-02', '%Y')", "('{\"a\": [1, 2]}', '$.a')", "(0x41)", "(X'41')"}

// TestRewriteBuiltins (item 14, first half): a call of every MariaDB
// built-in function the router knows, with each of a few argument lists,
// is either rewritten to a statement the reference answers exactly as the
// original (as long as the original answers the same twice), or refused.
func TestRewriteBuiltins(t *testing.T) {
	r20Setup(t)
	r := r20Rules(t)
	n, refused, unstable := 0, 0, 0
	for _, mode := range []string{"", r20Modes[len(r20Modes)-1]} {
		ref := conn(t, refDB(t, r20Schema, false))
		if _, err := ref.ExecContext(ctxT(t), "SET SESSION sql_mode = '"+mode+"'"); err != nil {
			t.Fatal(err)
		}
		for _, name := range router.BuiltinFuncNames() {
			if r20SkipBuiltins[name] || strings.ContainsAny(name, "'`(") {
				continue
			}
			for _, args := range r20BuiltinArgs {
				q := "SELECT id, " + name + args + " FROM t WHERE k = 3"
				first := r20Query(ctxT(t), ref, q)
				if again := r20Query(ctxT(t), ref, q); !again.equal(first) {
					unstable++
					continue
				}
				n++
				if r20RestoreCheck(t, r, ref, mode, q) {
					refused++
				}
			}
		}
	}
	t.Logf("%d calls checked, %d refused, %d left out as answering differently each time", n, refused, unstable)
}

// r20GenArgs are values the through-sluice fuzz binds to its parameters.
var r20GenArgs = []any{int64(3), int64(-7), 0.1, 2.5e-1, "ab", `x\y`, "it's", []byte("A\x00"), nil, uint64(18446744073709551615), float32(0.5)}

// TestRewriteFuzzThroughSluice: seeded statements over every shard (no
// key), some with parameters, run through sluice (text and binary
// protocol, under each sql_mode) and on the reference: sluice answers
// alike or refuses with 1235.
func TestRewriteFuzzThroughSluice(t *testing.T) {
	seed := diffSeed(t)
	t.Logf("seed %d (replay with -shard.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 21))
	r := r20Rules(t)
	n, refused, unparsed := 0, 0, 0
	for _, binary := range []bool{false, true} {
		for _, mode := range r20Modes {
			sl, ref := r20Conns(t, mode, binary)
			for range 40 {
				g := &r20Gen{rng: rng, params: true}
				a := g.expr(2)
				if a == "?" {
					// A bare parameter's type is not a literal's (see
					// TestRewritePreparedTypesRaw).
					a = "COALESCE(?)"
				}
				q := fmt.Sprintf("SELECT id, %s AS a FROM t WHERE (%s) ORDER BY id", a, g.expr(3))
				if _, err := r.PrepareMode(r20Schema, q, r20ShardMode(mode)); err != nil && strings.Contains(err.Error(), "cannot parse") {
					// What sluice cannot parse is item 10's (refused, or
					// sent whole to the default cluster), not a rewrite.
					unparsed++
					continue
				}
				got, want := r20Query(ctxT(t), sl, q, g.args...), r20Query(ctxT(t), ref, q, g.args...)
				n++
				if binary {
					// A string parameter sent as MYSQL_TYPE_STRING is a
					// CHAR to the server, and no literal is (documented).
					for _, res := range []*r20Result{&got, &want} {
						for i, c := range res.cols {
							res.cols[i] = strings.Replace(c, " CHAR", " VARCHAR", 1)
						}
					}
				}
				if got.code == 1235 {
					// Refused: the statement did not parse as the server
					// reads it (the server may reject it too), or sluice
					// cannot rewrite it exactly.
					refused++
					continue
				}
				if !got.equal(want) {
					t.Errorf("sql_mode %q, binary %v: %s %v\n sluice:    %s\n reference: %s", mode, binary, q, g.args, got, want)
				}
			}
		}
	}
	t.Logf("%d statements, %d refused, %d left out as not parsed", n, refused, unparsed)
}
