package sharding

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The issue 20 merge tests (items 1-5, 12 and 14b) run against a sluice of
// their own whose one rule covers m20.t, laid out on the shared clusters
// and, as a logical table, on the reference server, loaded with the same
// seeded rows: every answer is compared with what one MariaDB says.

const m20Schema = "m20"

// m20T is sharded by id mod over both clusters x 2 tables. Its text
// columns hold one collation each: latin1_swedish_ci (MariaDB's default),
// utf8mb4_unicode_ci, utf8mb4_general_ci (with emoji), utf8mb4_bin,
// utf8mb4_general_nopad_ci and a binary string; an ENUM and a SET.
var m20T = &rule{schema: m20Schema, table: "t", key: "id", algo: "mod", clusters: clusterNames, tables: 2,
	columns: "id BIGINT NOT NULL PRIMARY KEY, " +
		"sv VARCHAR(16) CHARACTER SET latin1 COLLATE latin1_swedish_ci NULL, " +
		"uc VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL, " +
		"gc VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL, " +
		"bn VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL, " +
		"np VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_nopad_ci NULL, " +
		"vb VARBINARY(16) NULL, " +
		"status ENUM('new','paid','shipped','cancelled','returned') NOT NULL, " +
		"tags SET('red','green','blue') NOT NULL, " +
		"qty INT NOT NULL, amount DECIMAL(10,2) NULL, dbl DOUBLE NULL, " +
		"note VARCHAR(32) NULL, country CHAR(2) CHARACTER SET latin1 NOT NULL, uu UUID NULL, " +
		"cs VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_as_cs NULL"}

// m20Words are spellings that differ in case, trailing spaces and accents,
// and the pairs whose order a rough case fold gets wrong ('-x' and '_x',
// 'å' and 'z' in Swedish); the latin1 column takes the first ones only.
var (
	m20Latin = []string{"a", "A", "a ", "A  ", "á", "b", "B", "-x", "_x", "x", "X ", "å", "Å", "ä", "z", "Z", "ö", "o", "ü", "y", "ss", "ß", "", " ", "é", "e", "E ", "\t", "a\t"}
	m20Wide  = append(slices.Clone(m20Latin), "😀", "😁", "🙂 ", "Ω", "ω", "ǅ", "Ǆ", "ǆ", "ﬁ", "fi", "１", "1")
	m20Enum  = []string{"new", "paid", "shipped", "cancelled", "returned"}
	m20Sets  = []string{"", "red", "green", "blue", "red,green", "green,blue", "red,blue", "red,green,blue"}
)

// m20Seed is the seed of the rows: SLUICE_M20_SEED or the clock.
func m20Seed() uint64 {
	if s := os.Getenv("SLUICE_M20_SEED"); s != "" {
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			return v
		}
	}
	return uint64(time.Now().UnixNano())
}

// m20Rows generates n rows from seed as SQL value lists.
func m20Rows(seed uint64, n int) []string {
	rng := rand.New(rand.NewPCG(seed, 20))
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	maybe := func(s string) string {
		if rng.IntN(12) == 0 {
			return "NULL"
		}
		return s
	}
	pick := func(w []string) string { return q(w[rng.IntN(len(w))]) }
	rows := make([]string, n)
	for i := range rows {
		vb := pick(m20Latin)
		rows[i] = fmt.Sprintf("(%d, %s, %s, %s, %s, %s, %s, %s, %s, %d, %s, %s, %s, %s, %s)",
			i*3+rng.IntN(3), maybe(pick(m20Latin)), maybe(pick(m20Wide)), maybe(pick(m20Wide)), maybe(pick(m20Wide)),
			maybe(pick(m20Wide)), maybe(vb), pick(m20Enum), pick(m20Sets), rng.IntN(15)-3,
			maybe(fmt.Sprintf("%d.%02d", rng.IntN(400)-100, rng.IntN(100))),
			maybe(fmt.Sprintf("%d.%d", rng.IntN(50)-10, []int{0, 25, 5, 75}[rng.IntN(4)])),
			maybe(q(strings.Repeat("n", rng.IntN(9)))), pick([]string{"SE", "se", "DE", "FI", "fi ", "NO"}), maybe(pick(m20Wide)))
	}
	return rows
}

var m20Env struct {
	once sync.Once
	addr string
	seed uint64
	err  error
}

// m20Setup creates m20 on the clusters and the reference, starts the
// test's sluice and loads the same rows through it and into the
// reference; it returns the sluice's address.
func m20Setup(t *testing.T) string {
	t.Helper()
	m20Env.once.Do(func() {
		m20Env.seed = m20Seed()
		m20Env.addr, m20Env.err = startM20(m20Env.seed)
	})
	t.Logf("rows of seed %d (SLUICE_M20_SEED replays them)", m20Env.seed)
	if m20Env.err != nil {
		t.Fatal(m20Env.err)
	}
	return m20Env.addr
}

func startM20(seed uint64) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, topo := range env.clusters {
		stmts := []string{"CREATE DATABASE IF NOT EXISTS " + m20Schema}
		for s := range m20T.shards() {
			if m20T.cluster(s) == name {
				stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", m20Schema, m20T.physical(s), m20T.columns))
			}
		}
		if err := topo.Master.Exec(ctx, stmts...); err != nil {
			return "", err
		}
	}
	rows := m20Rows(seed, 240)
	const cols = "(id, sv, uc, gc, bn, np, vb, status, tags, qty, amount, dbl, note, country, cs)"
	if err := env.ref.Master.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+m20Schema,
		"CREATE TABLE "+m20Schema+".t ("+m20T.columns+")"); err != nil {
		return "", err
	}
	for _, tp := range clusterTopos() {
		if err := tp.WaitReplicated(ctx); err != nil {
			return "", err
		}
	}
	srv, err := startSluice(named(clusterNames, clusterTopos()),
		fmt.Sprintf("[sharding]\ndefault_cluster = %q\nnode_id = 6\n\n", defaultCluster)+m20T.toml())
	if err != nil {
		return "", err
	}
	// The server lives as long as the test process.
	addr := srv.Addr().String()
	o := env.ref.Opts
	insert := "INSERT INTO t " + cols + " VALUES " + strings.Join(rows, ", ")
	for _, target := range []struct{ user, password, addr string }{
		{o.AppUser, o.AppPassword, addr}, {o.ServiceUser, o.ServicePassword, env.ref.Master.Addr()},
	} {
		db, err := sql.Open("mysql", dsn(target.user, target.password, target.addr, m20Schema, false))
		if err != nil {
			return "", err
		}
		_, err = db.ExecContext(ctx, insert)
		db.Close()
		if err != nil {
			return "", fmt.Errorf("loading m20.t at %s: %w", target.addr, err)
		}
	}
	return addr, nil
}

// m20Result is what one statement gave, with its column definitions as
// the driver reads them.
type m20Result struct {
	cols []string // name type length decimals, per column
	rows [][]*string
	err  error
}

func m20Query(ctx context.Context, c *sql.Conn, q string) m20Result {
	// The argument makes go-sql-driver prepare the statement when it does
	// not interpolate: the binary protocol.
	rows, err := c.QueryContext(ctx, q, 0)
	if err != nil {
		return m20Result{err: err}
	}
	defer rows.Close()
	var r m20Result
	types, err := rows.ColumnTypes()
	if err != nil {
		return m20Result{err: err}
	}
	for _, ct := range types {
		l, _ := ct.Length()
		p, s, _ := ct.DecimalSize()
		r.cols = append(r.cols, fmt.Sprintf("%s %s length %d decimals %d,%d", ct.Name(), ct.DatabaseTypeName(), l, p, s))
	}
	vals := make([]sql.RawBytes, len(types))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return m20Result{err: err}
		}
		row := make([]*string, len(vals))
		for i, v := range vals {
			if v != nil {
				s := string(v)
				row[i] = &s
			}
		}
		r.rows = append(r.rows, row)
	}
	if err := rows.Err(); err != nil {
		return m20Result{err: err}
	}
	return r
}

func m20Cell(v *string) string {
	if v == nil {
		return "NULL"
	}
	return strconv.Quote(*v)
}

func (r m20Result) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows, columns %q", len(r.rows), r.cols)
	for i, row := range r.rows {
		if i == 60 {
			fmt.Fprintf(&b, "\n    ... %d more", len(r.rows)-i)
			break
		}
		cells := make([]string, len(row))
		for j, v := range row {
			cells[j] = m20Cell(v)
		}
		fmt.Fprintf(&b, "\n    %s", strings.Join(cells, " | "))
	}
	return b.String()
}

// m20Case is one statement of the tests. loose lists, per column, the
// collation a value is compared under instead of byte for byte: the
// server does not define which of several equal spellings a group,
// DISTINCT or MIN/MAX shows. skip lists columns whose value is not
// defined at all (a non-grouped column).
type m20Case struct {
	name, sql string
	loose     map[int]string
	skip      map[int]bool
	unordered bool // no ORDER BY that makes the order total: rows are compared as sets
}

// m20Collations maps a column name to its character set and collation.
var m20Collations = map[string][2]string{
	"sv": {"latin1", "latin1_swedish_ci"}, "uc": {"utf8mb4", "utf8mb4_unicode_ci"},
	"gc": {"utf8mb4", "utf8mb4_general_ci"}, "bn": {"utf8mb4", "utf8mb4_bin"},
	"np": {"utf8mb4", "utf8mb4_general_nopad_ci"},
}

// m20Same compares sluice's result with the reference's; loose values
// are asked of the reference whether they are equal in their collation.
func m20Same(ctx context.Context, ref *sql.Conn, c m20Case, got, want m20Result) (string, bool) {
	if got.err != nil || want.err != nil {
		if got.err != nil && want.err != nil && errCode(got.err) == errCode(want.err) && errCode(got.err) != 0 {
			return "", true
		}
		return "errors differ", false
	}
	if !slices.Equal(got.cols, want.cols) {
		return "column definitions differ", false
	}
	if len(got.rows) != len(want.rows) {
		return fmt.Sprintf("%d rows, want %d", len(got.rows), len(want.rows)), false
	}
	if c.unordered && len(c.loose) > 0 && len(got.cols) == 1 {
		return m20SameSet(ctx, ref, c.loose[0], got.rows, want.rows)
	}
	if c.unordered {
		key := func(r []*string) string {
			cells := make([]string, len(r))
			for i, v := range r {
				cells[i] = m20Cell(v)
			}
			return strings.Join(cells, "|")
		}
		slices.SortFunc(got.rows, func(a, b []*string) int { return strings.Compare(key(a), key(b)) })
		slices.SortFunc(want.rows, func(a, b []*string) int { return strings.Compare(key(a), key(b)) })
	}
	for i := range got.rows {
		for j := range got.rows[i] {
			g, w := got.rows[i][j], want.rows[i][j]
			if c.skip[j] || (g == nil && w == nil) {
				continue
			}
			if g == nil || w == nil {
				return fmt.Sprintf("row %d column %d: %s, want %s", i+1, j+1, m20Cell(g), m20Cell(w)), false
			}
			if *g == *w {
				continue
			}
			coll, ok := c.loose[j]
			if !ok {
				return fmt.Sprintf("row %d column %d: %s, want %s", i+1, j+1, m20Cell(g), m20Cell(w)), false
			}
			cs := m20Collations[coll]
			var eq sql.NullInt64
			q := fmt.Sprintf("SELECT CONVERT(? USING %s) COLLATE %s = CONVERT(? USING %s) COLLATE %s", cs[0], cs[1], cs[0], cs[1])
			if err := ref.QueryRowContext(ctx, q, *g, *w).Scan(&eq); err != nil || eq.Int64 != 1 {
				return fmt.Sprintf("row %d column %d: %s, want %s (%s equal: %v %v)", i+1, j+1, m20Cell(g), m20Cell(w), cs[1], eq.Int64, err), false
			}
		}
	}
	return "", true
}

// m20SameSet compares two one-column results as sets of values equal in
// collation coll: as many NULLs, as many classes in each as values, and
// no more classes in the two together.
func m20SameSet(ctx context.Context, ref *sql.Conn, coll string, got, want [][]*string) (string, bool) {
	cs := m20Collations[coll]
	classes := func(rows ...[][]*string) (int, int, error) {
		var parts []string
		var args []any
		nulls := 0
		for _, rs := range rows {
			for _, r := range rs {
				if r[0] == nil {
					nulls++
					continue
				}
				parts = append(parts, fmt.Sprintf("SELECT CONVERT(? USING %s) COLLATE %s AS v", cs[0], cs[1]))
				args = append(args, *r[0])
			}
		}
		if len(parts) == 0 {
			return 0, nulls, nil
		}
		var n int
		err := ref.QueryRowContext(ctx, "SELECT COUNT(DISTINCT v) FROM ("+strings.Join(parts, " UNION ALL ")+") u", args...).Scan(&n)
		return n, nulls, err
	}
	g, gn, err1 := classes(got)
	w, wn, err2 := classes(want)
	all, _, err3 := classes(got, want)
	switch {
	case err1 != nil || err2 != nil || err3 != nil:
		return fmt.Sprintf("asking the reference: %v %v %v", err1, err2, err3), false
	case gn != wn || g+gn != len(got) || w+wn != len(want) || all != w:
		return fmt.Sprintf("%d classes (%d NULL) of %d values, want %d (%d NULL) of %d; %d together", g, gn, len(got), w, wn, len(want), all), false
	}
	return "", true
}

// m20Run runs the cases through the test's sluice and on the reference,
// in the text protocol and in the binary one, after the session setup
// statements, and reports every difference.
func m20Run(t *testing.T, setup []string, cases []m20Case) {
	t.Helper()
	addr := m20Setup(t)
	for _, binary := range []bool{false, true} {
		proto := map[bool]string{false: "text", true: "binary"}[binary]
		sl := conn(t, sluiceDB(t, addr, m20Schema, binary))
		ref := conn(t, refDB(t, m20Schema, binary))
		for _, q := range []*sql.Conn{sl, ref} {
			mustExec(t, q, setup...)
		}
		for _, c := range cases {
			ctx := ctxT(t)
			got, want := m20Query(ctx, sl, c.sql), m20Query(ctx, ref, c.sql)
			if why, ok := m20Same(ctx, ref, c, got, want); !ok {
				t.Errorf("%s (%s protocol): %s\n  %s\nsluice:    %s\nreference: %s", c.name, proto, why, c.sql, got, want)
			}
		}
	}
}

// TestMergeCollations (issue 20 item 1): ORDER BY, GROUP BY, DISTINCT and
// MIN/MAX over several shards compare text as the column's collation does.
func TestMergeCollations(t *testing.T) {
	var cases []m20Case
	for _, col := range []string{"sv", "uc", "gc", "bn", "np", "vb"} {
		loose := map[int]string{0: col}
		if col == "vb" {
			loose = nil
		}
		cases = append(cases,
			m20Case{name: "ORDER BY " + col, sql: "SELECT " + col + ", id FROM t WHERE id >= ? ORDER BY " + col + ", id", loose: loose},
			m20Case{name: "ORDER BY " + col + " DESC LIMIT", sql: "SELECT " + col + ", id FROM t WHERE id >= ? ORDER BY " + col + " DESC, id LIMIT 5, 20", loose: loose},
			m20Case{name: "GROUP BY " + col, sql: "SELECT " + col + ", COUNT(*), MIN(id), MAX(qty) FROM t WHERE id >= ? GROUP BY " + col, loose: loose},
			m20Case{name: "DISTINCT " + col, sql: "SELECT DISTINCT " + col + " FROM t WHERE id >= ? ORDER BY " + col, loose: loose},
			m20Case{name: "DISTINCT " + col + " unordered", sql: "SELECT DISTINCT " + col + " FROM t WHERE id >= ?", loose: loose, unordered: true},
			m20Case{name: "MIN/MAX " + col, sql: "SELECT MIN(" + col + "), MAX(" + col + ") FROM t WHERE id >= ?",
				loose: map[int]string{0: col, 1: col}},
			m20Case{name: "MIN/MAX " + col + " by status", sql: "SELECT status, MIN(" + col + "), MAX(" + col + "), COUNT(*) FROM t WHERE id >= ? GROUP BY status",
				loose: map[int]string{1: col, 2: col}},
		)
	}
	cases = append(cases,
		m20Case{name: "GROUP BY two collations", sql: "SELECT sv, gc, COUNT(*) FROM t WHERE id >= ? GROUP BY sv, gc ORDER BY COUNT(*) DESC, sv, gc LIMIT 30",
			loose: map[int]string{0: "sv", 1: "gc"}},
		m20Case{name: "DISTINCT two columns", sql: "SELECT DISTINCT uc, status FROM t WHERE id >= ? ORDER BY status, uc", loose: map[int]string{0: "uc"}},
	)
	m20Run(t, nil, cases)
}

// TestMergeEnumSetOrder (issue 20 item 2): ENUM sorts by its index, SET
// by its bits, in ORDER BY, GROUP BY and DISTINCT.
func TestMergeEnumSetOrder(t *testing.T) {
	m20Run(t, nil, []m20Case{
		{name: "DISTINCT ENUM ORDER BY", sql: "SELECT DISTINCT status FROM t WHERE id >= ? ORDER BY status"},
		{name: "ENUM ORDER BY DESC", sql: "SELECT status, id FROM t WHERE id >= ? ORDER BY status DESC, id LIMIT 40"},
		{name: "GROUP BY ENUM", sql: "SELECT status, COUNT(*) FROM t WHERE id >= ? GROUP BY status"},
		{name: "DISTINCT SET ORDER BY", sql: "SELECT DISTINCT tags FROM t WHERE id >= ? ORDER BY tags"},
		{name: "GROUP BY SET", sql: "SELECT tags, COUNT(*), SUM(qty) FROM t WHERE id >= ? GROUP BY tags"},
		{name: "MIN/MAX ENUM and SET (as text)", sql: "SELECT MIN(status), MAX(status), MIN(tags), MAX(tags) FROM t WHERE id >= ?"},
	})
}

// TestMergeMinMaxEmpty (issue 20 item 3): MIN/MAX whose winner is the
// empty string return it, not NULL.
func TestMergeMinMaxEmpty(t *testing.T) {
	m20Run(t, nil, []m20Case{
		// '' and ' ' are equal under utf8mb4_bin (PAD SPACE): which one
		// MIN shows is not defined, '' against NULL is.
		{name: "MIN of binary and _bin with ''", sql: "SELECT MIN(vb), MIN(bn), MIN(note) FROM t WHERE id >= ?", loose: map[int]string{1: "bn"}},
		{name: "MIN '' per group", sql: "SELECT country, MIN(vb), MIN(note) FROM t WHERE id >= ? GROUP BY country", loose: map[int]string{0: "sv"}},
		{name: "MIN over only ''", sql: "SELECT MIN(note), MAX(note) FROM t WHERE id >= ? AND note = ''"},
	})
}

// TestMergeGroupByDesc (issue 20 item 4): GROUP BY x DESC sorts the groups
// down, before a LIMIT takes the first ones.
func TestMergeGroupByDesc(t *testing.T) {
	m20Run(t, nil, []m20Case{
		{name: "GROUP BY DESC", sql: "SELECT qty, COUNT(*) FROM t WHERE id >= ? GROUP BY qty DESC"},
		{name: "GROUP BY DESC LIMIT", sql: "SELECT qty, COUNT(*) FROM t WHERE id >= ? GROUP BY qty DESC LIMIT 3"},
		{name: "GROUP BY two, one DESC", sql: "SELECT status, qty, COUNT(*) FROM t WHERE id >= ? GROUP BY status DESC, qty LIMIT 12"},
		{name: "GROUP BY text DESC", sql: "SELECT gc, COUNT(*) FROM t WHERE id >= ? GROUP BY gc DESC LIMIT 6", loose: map[int]string{0: "gc"}},
	})
}

// TestMergeGroupByShadowingAlias (issue 20 item 5): GROUP BY a name that
// is an alias and a column groups by the column (ORDER BY a bare name
// takes the alias); an alias that is no column still groups by the alias.
func TestMergeGroupByShadowingAlias(t *testing.T) {
	m20Run(t, nil, []m20Case{
		{name: "GROUP BY alias shadowing a column", sql: "SELECT COUNT(*), CHAR_LENGTH(note) AS country FROM t WHERE id >= ? GROUP BY country",
			skip: map[int]bool{1: true}},
		{name: "GROUP BY alias shadowing a column, DESC", sql: "SELECT COUNT(*), qty+100 AS qty FROM t WHERE id >= ? GROUP BY qty DESC",
			skip: map[int]bool{1: true}},
		{name: "GROUP BY an alias only", sql: "SELECT CHAR_LENGTH(note) AS len, COUNT(*) FROM t WHERE id >= ? GROUP BY len"},
		{name: "ORDER BY a bare alias shadowing a column", sql: "SELECT -qty AS qty, id FROM t WHERE id >= ? ORDER BY qty, id"},
	})
}

// TestMergeAggregateMetadata (issue 20 item 12): aggregates carry the
// server's values and column definitions (type, length, scale), AVG under
// the session's div_precision_increment.
func TestMergeAggregateMetadata(t *testing.T) {
	cases := []m20Case{
		{name: "aggregates", sql: "SELECT AVG(qty), AVG(amount), AVG(dbl), SUM(qty), SUM(amount), SUM(dbl), COUNT(*), COUNT(amount), MIN(qty), MAX(amount), MIN(dbl) FROM t WHERE id >= ?"},
		{name: "aggregates by group", sql: "SELECT status, AVG(qty), AVG(amount), SUM(qty), MAX(amount) FROM t WHERE id >= ? GROUP BY status"},
		{name: "ORDER BY AVG", sql: "SELECT country, AVG(qty) AS a FROM t WHERE id >= ? GROUP BY country ORDER BY a DESC, country", loose: map[int]string{0: "sv"}},
		{name: "AVG of nothing", sql: "SELECT AVG(qty), AVG(amount), SUM(qty), MIN(sv) FROM t WHERE id >= ? AND qty > 1000"},
	}
	for _, dpi := range []int{4, 8, 0, 30} {
		t.Run(fmt.Sprintf("div_precision_increment=%d", dpi), func(t *testing.T) {
			m20Run(t, []string{fmt.Sprintf("SET div_precision_increment = %d", dpi)}, cases)
		})
	}
}

// TestMergeOrderByAliasExpression (issue 20 item 14b): ORDER BY an
// expression over an alias; a name that is both a column and an alias is
// the column inside an expression, as on the server.
func TestMergeOrderByAliasExpression(t *testing.T) {
	m20Run(t, nil, []m20Case{
		{name: "alias in an expression", sql: "SELECT dbl AS x, id FROM t WHERE id >= ? ORDER BY x+0, id"},
		{name: "alias in an expression, DESC LIMIT", sql: "SELECT amount AS x, id FROM t WHERE id >= ? ORDER BY -x DESC, id LIMIT 10"},
		{name: "shadowing alias in an expression is the column", sql: "SELECT -qty AS amount, id FROM t WHERE id >= ? ORDER BY amount+0, id"},
		{name: "alias of text in an expression", sql: "SELECT gc AS g, id FROM t WHERE id >= ? ORDER BY CONCAT(g, 'x'), id", loose: map[int]string{0: "gc"}},
	})
}

// TestMergeRefusesUnorderedType: a sort key of a type sluice cannot order
// (UUID: no position, and no text order the server sorts by) or text of a
// collation whose sort keys hold several levels is refused with 1235
// naming what, not answered in a guessed order; the session goes on.
func TestMergeRefusesUnorderedType(t *testing.T) {
	addr := m20Setup(t)
	for _, binary := range []bool{false, true} {
		sl := conn(t, sluiceDB(t, addr, m20Schema, binary))
		res := m20Query(ctxT(t), sl, "SELECT id, uu FROM t WHERE id >= ? ORDER BY uu, id")
		if errCode(res.err) != 1235 || !strings.Contains(res.err.Error(), "cannot order") {
			t.Errorf("binary %v: ORDER BY a UUID column: %v, want 1235 naming the column type", binary, res)
		}
		// A collation that compares at several levels (accents, then
		// case): its sort key cannot be compared byte for byte with
		// padding.
		for _, q := range []string{"SELECT cs, COUNT(*) FROM t WHERE id >= ? GROUP BY cs", "SELECT cs, id FROM t WHERE id >= ? ORDER BY cs DESC, id LIMIT 5",
			"SELECT DISTINCT cs FROM t WHERE id >= ?", "SELECT MIN(cs) FROM t WHERE id >= ?"} {
			res := m20Query(ctxT(t), sl, q)
			if errCode(res.err) != 1235 || !strings.Contains(res.err.Error(), "several levels") {
				t.Errorf("binary %v: %s: %v, want 1235 naming the collation's levels", binary, q, res)
			}
		}
		if res := m20Query(ctxT(t), sl, "SELECT COUNT(*) FROM t WHERE id >= ?"); res.err != nil {
			t.Errorf("binary %v: the session after the refusal: %v", binary, res.err)
		}
	}
}
