package sharding

import (
	"fmt"
	"strings"
	"testing"
)

// TestShardOf pins the placement the checker expects, for each algorithm
// whose function the test restates.
func TestShardOf(t *testing.T) {
	pay := &rule{table: "orders", algo: "mod", clusters: []string{"db1", "db2", "db3", "db4", "db5", "db6", "db7", "db8"}, tables: 10}
	events := &rule{table: "events", algo: "range", clusters: []string{"a", "b"}, tables: 2, boundaries: []int64{0, 1000, 2000, 3000, 4000}}
	logs := &rule{table: "logs", algo: "date", dateUnit: "month", clusters: []string{"a", "b"}, tables: 3}
	cases := []struct {
		r            *rule
		key          string
		cluster, tbl string
	}{
		{pay, "9527", "db1", "orders_7"},
		{pay, "81", "db1", "orders_1"},
		{pay, "123", "db5", "orders_3"},
		{pay, "7779", "db2", "orders_9"},
		{events, "0", "a", "events_0"},
		{events, "1999", "a", "events_1"},
		{events, "2000", "b", "events_0"},
		{events, "3999", "b", "events_1"},
		// month number = year*12 + month-1; 2025-01 is 24300, 24300 % 6 = 0.
		{logs, "2025-01-31", "a", "logs_0"},
		{logs, "2025-04-01", "b", "logs_0"},
		{logs, "2025-06-15 10:00:00", "b", "logs_2"},
	}
	for _, c := range cases {
		s, err := c.r.shardOf(c.key)
		if err != nil {
			t.Errorf("%s %s: %v", c.r.table, c.key, err)
			continue
		}
		if c.r.cluster(s) != c.cluster || c.r.physical(s) != c.tbl {
			t.Errorf("%s %s: shard %d = %s.%s, want %s.%s", c.r.table, c.key, s, c.r.cluster(s), c.r.physical(s), c.cluster, c.tbl)
		}
	}
	for _, bad := range []string{"-1", "4000", "x"} {
		if _, err := events.shardOf(bad); err == nil {
			t.Errorf("events %s: no error for a key outside every range", bad)
		}
	}
}

// TestPlacementChecker: the checker finds a row put into the wrong
// physical table, a hash-rule key present in two places, and two text keys
// that the column's collation holds equal ('Anna', 'anna ') in two places,
// and nothing else among correctly placed rows (collation-equal keys in one
// place are fine).
func TestPlacementChecker(t *testing.T) {
	ctx := ctxT(t)
	mod := &rule{schema: "chk", table: "m", key: "k", algo: "mod", clusters: clusterNames, tables: 2, columns: "k BIGINT NOT NULL"}
	hash := &rule{schema: "chk", table: "h", key: "k", algo: "hash", clusters: clusterNames, tables: 1, columns: "k BIGINT NOT NULL"}
	text := &rule{schema: "chk", table: "s", key: "k", algo: "hash", clusters: clusterNames, tables: 1,
		columns: "k VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL"}
	for _, name := range clusterNames {
		stmts := []string{"CREATE DATABASE chk"}
		for _, r := range []*rule{mod, hash, text} {
			for s := range r.shards() {
				if r.cluster(s) == name {
					stmts = append(stmts, fmt.Sprintf("CREATE TABLE chk.%s (%s)", r.physical(s), r.columns))
				}
			}
		}
		if err := env.clusters[name].Master.Exec(ctx, stmts...); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, name := range clusterNames {
			env.clusters[name].Master.Exec(ctxT(t), "DROP DATABASE chk")
		}
	})
	// Keys 0..7 each where the mod rule says, plus 6 (shard 2: c2 m_0) also in c1 m_0.
	for k := range int64(8) {
		s := shardOfKey(t, mod, k)
		if err := env.clusters[mod.cluster(s)].Master.Exec(ctx, fmt.Sprintf("INSERT INTO chk.%s VALUES (%d)", mod.physical(s), k)); err != nil {
			t.Fatal(err)
		}
	}
	c1, c2 := env.clusters[clusterNames[0]].Master, env.clusters[clusterNames[1]].Master
	if err := c1.Exec(ctx, "INSERT INTO chk.m_0 VALUES (6)", "INSERT INTO chk.h VALUES (1), (2)",
		"INSERT INTO chk.s VALUES ('Anna'), ('bob'), ('BOB ')"); err != nil {
		t.Fatal(err)
	}
	if err := c2.Exec(ctx, "INSERT INTO chk.h VALUES (3), (2)", "INSERT INTO chk.s VALUES ('anna '), ('carl')"); err != nil {
		t.Fatal(err)
	}
	problems, rows, err := checkPlacement(ctx, []*rule{mod, hash, text}, env.clusters, true)
	if err != nil {
		t.Fatal(err)
	}
	if rows["chk.m"] != 9 || rows["chk.h"] != 4 || rows["chk.s"] != 5 {
		t.Errorf("rows read %v, want chk.m 9, chk.h 4 and chk.s 5", rows)
	}
	// The misplaced 6 is reported as misplaced and as found twice.
	if len(problems) != 4 || !strings.Contains(problems[0], "k = 6 is on cluster c1 table m_0; the rule says cluster c2 table m_0") ||
		!strings.Contains(problems[1], "k = 6 is both on cluster c1 table m_0 and on cluster c2 table m_0") ||
		!strings.Contains(problems[2], "k = 2 is both on cluster c1 table h and on cluster c2 table h") ||
		!strings.Contains(problems[3], `k = "anna " (equal to "Anna" under the column's collation) is both on cluster c1 table s and on cluster c2 table s`) {
		t.Errorf("problems:\n%s\nwant the misplaced k = 6 (twice), the doubled k = 2 and the collation-equal 'Anna' / 'anna '", strings.Join(problems, "\n"))
	}
	// Compared by text, 'Anna' and 'anna ' are two keys.
	problems, _, err = checkPlacement(ctx, []*rule{text}, env.clusters, false)
	if err != nil || len(problems) != 0 {
		t.Errorf("by text: problems %v (err %v), want none", problems, err)
	}
}

// TestCompareByCollation: the comparison holds two spellings of one group
// equal only in the columns the statement names, only when the reference
// server's collation says they are equal, and still tells different rows,
// order and column types apart.
func TestCompareByCollation(t *testing.T) {
	ctx := ctxT(t)
	ref := refDB(t, diffSchema, false)
	w := newWeigher(ref)
	q := func(sql string, colls map[int]string, ordered, types bool) result {
		t.Helper()
		r := runWith(ctx, ref, stmt{sql: sql, colls: colls, ordered: ordered, types: types}, w)
		if r.err != nil {
			t.Fatalf("%s: %v", sql, r.err)
		}
		return r
	}
	cases := []struct {
		a, b  string
		colls map[int]string
		same  bool
	}{
		{"SELECT 'Anna' AS v, 1 AS n", "SELECT 'anna  ' AS v, 1 AS n", map[int]string{0: collName}, true},
		{"SELECT 'Anna' AS v, 1 AS n", "SELECT 'anna  ' AS v, 1 AS n", nil, false},
		{"SELECT 'Anna' AS v, 1 AS n", "SELECT 'Anne' AS v, 1 AS n", map[int]string{0: collName}, false},
		{"SELECT 'smile😀' AS v, 1 AS n", "SELECT 'SMILE🎉' AS v, 1 AS n", map[int]string{0: collName}, true},
		{"SELECT 'Zürich' AS v, 1 AS n", "SELECT 'zyrich ' AS v, 1 AS n", map[int]string{0: collCity}, true},
		{"SELECT 'Zürich' AS v, 1 AS n", "SELECT 'zurich' AS v, 1 AS n", map[int]string{0: collCity}, false},
		{"SELECT 'Straße' AS v, 1 AS n", "SELECT 'STRASSE' AS v, 1 AS n", map[int]string{0: collTitle}, true},
		{"SELECT 'a' AS v, 1 AS n", "SELECT 'a ' AS v, 1 AS n", map[int]string{0: collCode}, true},
		{"SELECT 'a' AS v, 1 AS n", "SELECT 'A' AS v, 1 AS n", map[int]string{0: collCode}, false},
		{"SELECT 'Anna' AS v, 1 AS n", "SELECT 'anna' AS v, 2 AS n", map[int]string{0: collName}, false},
		{"SELECT NULL AS v, 1 AS n", "SELECT '' AS v, 1 AS n", map[int]string{0: collCode}, false},
		{"SELECT 'x' AS v, 1 AS n", "SELECT 'y' AS v, 1 AS n", map[int]string{0: anyValue}, true},
	}
	for _, c := range cases {
		if got := same(q(c.a, c.colls, false, false), q(c.b, c.colls, false, false)); got != c.same {
			t.Errorf("%s vs %s with collations %v: same = %v, want %v", c.a, c.b, c.colls, got, c.same)
		}
	}
	if same(q("SELECT 1 AS n UNION ALL SELECT 2", nil, true, false), q("SELECT 2 AS n UNION ALL SELECT 1", nil, true, false)) {
		t.Error("rows in another order compare equal under a total ORDER BY")
	}
	if !same(q("SELECT 1 AS n UNION ALL SELECT 2", nil, false, false), q("SELECT 2 AS n UNION ALL SELECT 1", nil, false, false)) {
		t.Error("rows in another order differ without an ORDER BY")
	}
	if same(q("SELECT CAST(1 AS DECIMAL(10,2)) AS d", nil, false, true), q("SELECT CAST(1 AS DECIMAL(12,2)) AS d", nil, false, true)) {
		t.Error("DECIMAL(10,2) and DECIMAL(12,2) compare equal when types are compared")
	}
}
