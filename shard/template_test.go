package shard

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func route(t testing.TB, r *Rules, sql string, args ...Value) *Route {
	t.Helper()
	tm, err := r.Prepare("pay", sql)
	if err != nil {
		t.Fatalf("Prepare(%q): %v", sql, err)
	}
	rt, err := tm.Route(args)
	if err != nil {
		t.Fatalf("Route(%q): %v", sql, err)
	}
	return rt
}

func shardsOf(rt *Route) []int {
	var s []int
	for _, p := range rt.Parts {
		s = append(s, p.Shards...)
	}
	return s
}

func intv(n int64) Value { return Value{Kind: KindInt, I: n} }

func TestExtraction(t *testing.T) {
	r := testRules(t)
	all := make([]int, 80)
	for i := range all {
		all[i] = i
	}
	tests := []struct {
		sql  string
		args []Value
		want []int
	}{
		{"SELECT * FROM orders WHERE uid = 5", nil, []int{5}},
		{"SELECT * FROM orders WHERE 85 = uid", nil, []int{5}},
		{"SELECT * FROM orders WHERE uid = ?", []Value{intv(9527)}, []int{7}},
		{"SELECT * FROM orders o WHERE o.uid IN (1, 81, 2)", nil, []int{1, 2}},
		{"SELECT * FROM orders WHERE orders.uid = 3 AND status = 'x'", nil, []int{3}},
		{"SELECT * FROM orders WHERE uid IN (1, 2) AND uid IN (2, 3)", nil, []int{2}},
		{"SELECT * FROM orders WHERE uid = 1 OR uid = 4", nil, []int{1, 4}},
		{"SELECT * FROM orders WHERE uid = 1 OR status = 'x'", nil, all},
		{"SELECT * FROM orders WHERE (uid = 1 OR uid = 2) AND (uid = 2 OR uid = 3)", nil, []int{2}},
		{"SELECT * FROM orders WHERE uid = 1 + 1", nil, all},
		{"SELECT * FROM orders WHERE uid NOT IN (1)", nil, all},
		{"SELECT * FROM orders WHERE uid = -3", nil, []int{3}},
		{"SELECT * FROM orders WHERE uid = NULL", nil, []int{0}},
		{"SELECT * FROM orders WHERE uid = 1 AND uid = 2", nil, []int{0}},
		{"SELECT * FROM orders", nil, all},
		{"SELECT * FROM orders WHERE x.uid = 5", nil, all}, // not this table's column
		{"UPDATE orders SET amount = 1 WHERE uid IN (?, ?)", []Value{intv(10), intv(11)}, []int{10, 11}},
		{"DELETE FROM orders WHERE uid = 79", nil, []int{79}},
		{"SELECT * FROM orders o JOIN items i USING (uid) WHERE i.uid = 12", nil, []int{12}},
		{"SELECT * FROM orders WHERE id = ?", []Value{intv(NewIDGenerator(0).Next(33))}, []int{33}},
		{"SELECT * FROM orders WHERE id = 12345", nil, all}, // no shard in the id
		{"SELECT * FROM orders WHERE uid = 1 AND id IN (1, 2)", nil, []int{1}},
		{"SELECT * FROM config c JOIN orders o ON c.k = o.status WHERE o.uid = 6", nil, []int{6}},
	}
	for _, tc := range tests {
		rt := route(t, r, tc.sql, tc.args...)
		if got := shardsOf(rt); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: shards %v, want %v", tc.sql, got, tc.want)
		}
	}
}

func TestRewrite(t *testing.T) {
	r := testRules(t)
	tests := []struct{ sql, want string }{
		{"select * from orders where uid = 9527", "SELECT * FROM `orders_7` AS `orders` WHERE `uid`=9527"},
		{"SELECT orders.amount FROM pay.orders WHERE orders.uid = 1",
			"SELECT `orders`.`amount` FROM `pay`.`orders_1` AS `orders` WHERE `orders`.`uid`=1"},
		{"SELECT o.amount FROM `orders` AS o WHERE o.uid = 1",
			"SELECT `o`.`amount` FROM `orders_1` AS `o` WHERE `o`.`uid`=1"},
		{"/* sluice:master */ SELECT * FROM ORDERS WHERE uid = 2",
			"/* sluice:master */ SELECT * FROM `ORDERS_2` AS `ORDERS` WHERE `uid`=2"},
		{"-- note\nSELECT * FROM orders WHERE uid = 2", "-- note\nSELECT * FROM `orders_2` AS `orders` WHERE `uid`=2"},
		{"SELECT 'it''s', \"a\\\\b\" FROM orders WHERE uid = 3",
			"SELECT 'it''s','a\\\\b' FROM `orders_3` AS `orders` WHERE `uid`=3"},
		{"DELETE FROM orders WHERE orders.uid = 5", "DELETE FROM `orders_5` WHERE `orders_5`.`uid`=5"},
		{"UPDATE orders SET amount = amount + 1 WHERE uid = 4",
			"UPDATE `orders_4` AS `orders` SET `amount`=`amount`+1 WHERE `uid`=4"},
		{"SELECT * FROM solo WHERE uid = 1", "SELECT * FROM solo WHERE uid = 1"}, // one table per cluster: text kept
		{"SELECT * FROM orders o JOIN items ON o.uid = items.uid WHERE o.uid = 11",
			"SELECT * FROM `orders_1` AS `o` JOIN `items_1` AS `items` ON `o`.`uid`=`items`.`uid` WHERE `o`.`uid`=11"},
	}
	for _, tc := range tests {
		rt := route(t, r, tc.sql)
		if len(rt.Parts) != 1 || rt.Parts[0].SQL != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.sql, rt.Parts[0].SQL, tc.want)
		}
	}
}

func TestInsertSplit(t *testing.T) {
	r := testRules(t)
	rt := route(t, r, "INSERT INTO items (uid, n) VALUES (1, ?), (81, ?), (2, 'x'), (9527, ?)", intv(0), intv(0), intv(0))
	type part struct {
		cluster int
		sql     string
		params  []int
	}
	var got []part
	for _, p := range rt.Parts {
		got = append(got, part{p.Cluster, p.SQL, p.Params})
	}
	want := []part{
		{1, "INSERT INTO `items_1` (`uid`,`n`) VALUES (1,?),(81,?)", []int{0, 1}},
		{1, "INSERT INTO `items_2` (`uid`,`n`) VALUES (2,'x')", []int{}},
		{1, "INSERT INTO `items_7` (`uid`,`n`) VALUES (9527,?)", []int{2}},
	}
	if !rt.Write || !reflect.DeepEqual(got, want) {
		t.Fatalf("parts\n got %+v\nwant %+v", got, want)
	}
	// One row, no id to fill: the cached single-shard route with the text.
	rt = route(t, r, "INSERT INTO items SET uid = ?, n = 1 ON DUPLICATE KEY UPDATE n = ?", intv(3), intv(4))
	if len(rt.Parts) != 1 || rt.Parts[0].SQL != "INSERT INTO `items_3` (`uid`,`n`) VALUES (?,1) ON DUPLICATE KEY UPDATE `n`=?" || rt.Parts[0].Params != nil {
		t.Fatalf("single row: %+v", rt.Parts)
	}
	// orders has id_column id: each row gets an id carrying its shard.
	rt = route(t, r, "INSERT INTO orders (uid, amount) VALUES (9527, 1), (5, 2)")
	if len(rt.Parts) != 2 {
		t.Fatalf("id fill: %+v", rt.Parts)
	}
	for _, p := range rt.Parts {
		i := strings.LastIndexByte(p.SQL, ',')
		idText := strings.TrimSuffix(p.SQL[i+1:], ")")
		var id int64
		for _, c := range idText {
			id = id*10 + int64(c-'0')
		}
		if s, ok := ShardOfID(id); !ok || s != p.Shards[0] || !strings.Contains(p.SQL, "(`uid`,`amount`,`id`)") {
			t.Errorf("part %q: id %d shard %d, %v; want shard %d", p.SQL, id, s, ok, p.Shards[0])
		}
	}
}

func TestScatterMerge(t *testing.T) {
	r := testRules(t)
	// ws is the pair of hidden sort key columns of expression e: its
	// WEIGHT_STRING and the pad its collation compares with.
	ws := func(e string) string {
		return "WEIGHT_STRING(" + e + "),CONCAT(IF((" + e + ")=CONCAT((" + e + "), ' '), 'P', 'N'), WEIGHT_STRING(RIGHT(CONCAT((" + e + "), ' '), 1)))"
	}
	tests := []struct {
		sql   string
		part0 string
		merge Merge
	}{
		{"SELECT id, amount FROM orders ORDER BY amount DESC, created LIMIT 10 OFFSET 5",
			"SELECT `id`,`amount`," + ws("`amount`") + ",(`amount`)+0,`created`," + ws("`created`") + ",(`created`)+0 FROM `orders_0` AS `orders` ORDER BY `amount` DESC,`created` LIMIT 15",
			Merge{Visible: 2, Hidden: 7, OrderBy: []SortKey{{1, true}, {5, false}}, Offset: 5, Limit: 10,
				Weights: []Weight{{Column: 1, Weight: 2, Pad: 3, Position: 4}, {Column: 5, Weight: 6, Pad: 7, Position: 8}}}},
		{"SELECT COUNT(*), SUM(amount), MIN(a), MAX(b), AVG(c) FROM orders",
			"SELECT COUNT(1) AS `COUNT(*)`,SUM(`amount`) AS `SUM(amount)`,MIN(`a`) AS `MIN(a)`,MAX(`b`) AS `MAX(b)`,AVG(`c`) AS `AVG(c)`," +
				ws("MIN(`a`)") + "," + ws("MAX(`b`)") + ",SUM(`c`),COUNT(`c`) FROM `orders_0` AS `orders`",
			Merge{Visible: 5, Hidden: 6, Limit: -1, Aggregates: []Aggregate{{Column: 0, Func: AggCount}, {Column: 1, Func: AggSum}, {Column: 2, Func: AggMin}, {Column: 3, Func: AggMax}, {Column: 4, Func: AggAvg, SumColumn: 9, CountColumn: 10}},
				Weights: []Weight{{Column: 2, Weight: 5, Pad: 6}, {Column: 3, Weight: 7, Pad: 8}}}},
		{"SELECT status, COUNT(*) AS n FROM orders GROUP BY status, day DESC ORDER BY n DESC LIMIT 3",
			"SELECT `status`,COUNT(1) AS `n`," + ws("`status`") + ",(`status`)+0,`day`," + ws("`day`") + ",(`day`)+0 FROM `orders_0` AS `orders` GROUP BY `status`,`day` DESC ORDER BY `n` DESC",
			Merge{Visible: 2, Hidden: 7, GroupBy: []int{0, 5}, GroupDesc: []bool{false, true}, OrderBy: []SortKey{{1, true}}, Aggregates: []Aggregate{{Column: 1, Func: AggCount}}, Limit: 3,
				Weights: []Weight{{Column: 0, Weight: 2, Pad: 3, Position: 4}, {Column: 5, Weight: 6, Pad: 7, Position: 8}}}},
		{"SELECT DISTINCT status FROM orders ORDER BY 1",
			"SELECT DISTINCT `status`," + ws("`status`") + ",(`status`)+0 FROM `orders_0` AS `orders` ORDER BY 1",
			Merge{Visible: 1, Hidden: 3, Distinct: true, OrderBy: []SortKey{{0, false}}, Limit: -1, Weights: []Weight{{Column: 0, Weight: 1, Pad: 2, Position: 3}}}},
		{"SELECT * FROM orders ORDER BY created DESC LIMIT 2",
			"SELECT *,`created`," + ws("`created`") + ",(`created`)+0 FROM `orders_0` AS `orders` ORDER BY `created` DESC LIMIT 2",
			Merge{Visible: -1, Hidden: 4, OrderBy: []SortKey{{-4, true}}, Limit: 2, Weights: []Weight{{Column: -4, Weight: -3, Pad: -2, Position: -1}}}},
		{"SELECT MAX(id) FROM orders",
			"SELECT MAX(`id`) AS `MAX(id)`," + ws("MAX(`id`)") + " FROM `orders_0` AS `orders`",
			Merge{Visible: 1, Hidden: 2, Aggregates: []Aggregate{{Column: 0, Func: AggMax}}, Limit: -1, Weights: []Weight{{Column: 0, Weight: 1, Pad: 2}}}},
		// Item 5 of issue 20: GROUP BY a name that is an alias of another
		// expression groups by the column of that name when there is one,
		// which (SELECT name) resolves as the server does.
		{"SELECT CHAR_LENGTH(note) AS country, COUNT(*) FROM orders GROUP BY country",
			"SELECT CHAR_LENGTH(`note`) AS `country`,COUNT(1) AS `COUNT(*)`,(SELECT `country` FROM DUAL WHERE RAND() IS NOT NULL)," + ws("(SELECT `country` FROM DUAL WHERE RAND() IS NOT NULL)") + " FROM `orders_0` AS `orders` GROUP BY `country`",
			Merge{Visible: 2, Hidden: 3, GroupBy: []int{2}, GroupDesc: []bool{false}, Aggregates: []Aggregate{{Column: 1, Func: AggCount}}, Limit: -1,
				Weights: []Weight{{Column: 2, Weight: 3, Pad: 4}}}},
		// Item 14: an alias inside an ORDER BY expression.
		{"SELECT dbl AS x FROM orders ORDER BY x+0",
			"SELECT `dbl` AS `x`,(SELECT `x` FROM DUAL WHERE RAND() IS NOT NULL)+0," + ws("(SELECT `x` FROM DUAL WHERE RAND() IS NOT NULL)+0") + " FROM `orders_0` AS `orders` ORDER BY `x`+0",
			Merge{Visible: 1, Hidden: 3, OrderBy: []SortKey{{1, false}}, Limit: -1, Weights: []Weight{{Column: 1, Weight: 2, Pad: 3}}}},
	}
	for _, tc := range tests {
		rt := route(t, r, tc.sql)
		if len(rt.Parts) != 80 || rt.Merge == nil {
			t.Errorf("%s: %d parts, merge %v", tc.sql, len(rt.Parts), rt.Merge)
			continue
		}
		if rt.Parts[0].SQL != tc.part0 {
			t.Errorf("%s:\n got %q\nwant %q", tc.sql, rt.Parts[0].SQL, tc.part0)
		}
		if !reflect.DeepEqual(normMerge(*rt.Merge), normMerge(tc.merge)) {
			t.Errorf("%s: merge\n got %+v\nwant %+v", tc.sql, *rt.Merge, tc.merge)
		}
	}
	// LIMIT from parameters: Parts lose those markers and ask for offset+count.
	rt := route(t, r, "SELECT id FROM orders WHERE amount > ? ORDER BY id LIMIT ?, ?", intv(1), intv(4), intv(6))
	p := rt.Parts[0]
	if !strings.HasSuffix(p.SQL, "ORDER BY `id` LIMIT 10") || !reflect.DeepEqual(p.Params, []int{0}) ||
		rt.Merge.Offset != 4 || rt.Merge.Limit != 6 {
		t.Fatalf("param LIMIT: %q %v %+v", p.SQL, p.Params, rt.Merge)
	}
	m, err := route(t, r, "SELECT * FROM orders ORDER BY created").Merge.Resolve(6)
	if err != nil || m.Visible != 2 || m.OrderBy[0].Column != 2 || m.Weights[0] != (Weight{Column: 2, Weight: 3, Pad: 4, Position: 5}) {
		t.Fatalf("Resolve: %+v %v", m, err)
	}
}

func normMerge(m Merge) Merge {
	if len(m.OrderBy) == 0 {
		m.OrderBy = nil
	}
	if len(m.GroupBy) == 0 {
		m.GroupBy = nil
	}
	if len(m.Aggregates) == 0 {
		m.Aggregates = nil
	}
	return m
}

func TestBroadcastAndPassthrough(t *testing.T) {
	r := testRules(t)
	rt := route(t, r, "SELECT * FROM config WHERE k = 1")
	if !rt.AnyOne || rt.Write || len(rt.Parts) != len(r.Clusters()) {
		t.Fatalf("broadcast read: %+v", rt)
	}
	rt = route(t, r, "UPDATE config SET v = 2")
	if rt.AnyOne || !rt.Write || len(rt.Parts) != len(r.Clusters()) || rt.Parts[3].SQL != "UPDATE config SET v = 2" {
		t.Fatalf("broadcast write: %+v", rt)
	}
	for _, q := range []string{"SELECT 1", "SET NAMES utf8mb4", "USE pay", "BEGIN", "SHOW TABLES",
		"SELECT * FROM other.orders WHERE uid = 1", "SELECT * FROM accounts JOIN config", "XA START 'x'"} {
		rt := route(t, r, q)
		if len(rt.Parts) != 1 || rt.Parts[0].Cluster != r.DefaultCluster() || rt.Parts[0].SQL != q || rt.Merge != nil {
			t.Errorf("%s: %+v", q, rt)
		}
	}
	tm, err := r.Prepare("", "SELECT * FROM orders WHERE uid = 1")
	if err != nil || tm.kind != kindFixed {
		t.Errorf("without a current database orders is not pay.orders: %v", err)
	}
}

func TestErrors(t *testing.T) {
	r := testRules(t)
	tests := []struct {
		sql  string
		args []Value
		err  error
		in   string // the message names it
	}{
		{"SELECT * FROM orders o JOIN users u ON o.uid = u.id", nil, ErrCrossShardJoin, "pay.users"},
		{"SELECT * FROM orders o JOIN items i ON o.id = i.uid", nil, ErrCrossShardJoin, "pay.items"},
		{"SELECT * FROM orders o JOIN accounts a ON a.uid = o.uid", nil, ErrCrossShardJoin, "accounts"},
		{"INSERT INTO orders (amount) VALUES (1)", nil, ErrMissingKey, "uid"},
		{"INSERT INTO orders VALUES (1, 2)", nil, ErrMissingKey, "column list"},
		{"INSERT INTO orders (uid) VALUES (NULL)", nil, ErrNullKey, "uid"},
		{"INSERT INTO orders (uid) VALUES (?)", []Value{{Kind: KindNull}}, ErrNullKey, "uid"},
		{"INSERT INTO orders (uid) VALUES (1+1)", nil, ErrBadKeyValue, "uid"},
		{"INSERT INTO orders (uid) SELECT uid FROM items", nil, ErrUnsupported, "SELECT"},
		{"INSERT INTO orders (uid) VALUES ('abc')", nil, ErrBadKeyValue, `"abc"`},
		{"INSERT INTO ranges (k) VALUES (500)", nil, ErrKeyOutOfRange, "500"},
		{"INSERT INTO events (day) VALUES ('2026-13-01')", nil, ErrBadKeyValue, "2026-13-01"},
		{"UPDATE orders SET uid = 2 WHERE uid = 1", nil, ErrShardKeyUpdate, "uid"},
		{"INSERT INTO orders (uid) VALUES (1) ON DUPLICATE KEY UPDATE uid = 2", nil, ErrShardKeyUpdate, "uid"},
		{"SELECT SUM(amount) + 1 FROM orders", nil, ErrUnsupported, "SUM"},
		{"SELECT status FROM orders GROUP BY status HAVING COUNT(*) > 1", nil, ErrUnsupported, "HAVING"},
		{"SELECT GROUP_CONCAT(id) FROM orders", nil, ErrUnsupported, "GROUP_CONCAT"},
		{"SELECT COUNT(DISTINCT uid) FROM orders", nil, ErrUnsupported, "COUNT(DISTINCT)"},
		{"SELECT * FROM orders WHERE id IN (SELECT id FROM items)", nil, ErrUnsupported, "subquery"},
		{"SELECT * FROM orders WHERE uid = 1 UNION SELECT * FROM orders WHERE uid = 2", nil, ErrUnsupported, "UNION"},
		{"DELETE FROM orders LIMIT 1", nil, ErrUnsupported, "LIMIT"},
		{"INSERT INTO orders (uid) VALUES ('42abc')", nil, ErrBadKeyValue, `"42abc"`},
		{"SELECT NEXT_ID('accounts')", nil, ErrNotSharded, "accounts"},
		{"SELEC * FROM orders", nil, ErrUnsupported, "parse"},
		{"SELECT 1; SELECT * FROM orders", nil, ErrUnsupported, "several statements"},
	}
	for _, tc := range tests {
		tm, err := r.Prepare("pay", tc.sql)
		if err == nil {
			_, err = tm.Route(tc.args)
		}
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.in) {
			t.Errorf("%s: error %v, want %v naming %q", tc.sql, err, tc.err, tc.in)
		}
	}
	// A WHERE key outside every range matches no row (no INSERT could
	// have put one there): one shard answers the empty result, as the
	// server does, where an INSERT of the same key is refused.
	for _, q := range []string{"SELECT * FROM ranges WHERE k = 500", "SELECT * FROM ranges WHERE k IN (-1, 500)",
		"UPDATE ranges SET v = 1 WHERE k = 500", "DELETE FROM ranges WHERE k = 300 OR k = 400"} {
		if rt := route(t, r, q); len(rt.Parts) != 1 {
			t.Errorf("%s: %d parts, want one (no row can match)", q, len(rt.Parts))
		}
	}
	if rt := route(t, r, "SELECT * FROM ranges WHERE k = 500 OR k = 150"); len(rt.Parts) != 1 || rt.Parts[0].Shards[0] != 1 {
		t.Errorf("k = 500 OR k = 150: %+v, want shard 1 only", rt.Parts)
	}
	// HAVING is fine on one shard.
	if rt := route(t, r, "SELECT status FROM orders WHERE uid = 3 GROUP BY status HAVING COUNT(*) > 1"); len(rt.Parts) != 1 {
		t.Fatalf("single-shard HAVING: %+v", rt)
	}
	// A subquery of the same key on one shard is fine too.
	if rt := route(t, r, "SELECT * FROM orders WHERE uid = 3 AND id IN (SELECT oid FROM items WHERE uid = 3)"); len(rt.Parts) != 1 {
		t.Fatalf("single-shard subquery: %+v", rt)
	}
}

func TestNextID(t *testing.T) {
	r := testRules(t)
	tm, err := r.Prepare("pay", "SELECT NEXT_ID('pay.users', ?) AS nid")
	if err != nil || tm.Local() != LocalNextID || tm.LocalColumn() != "nid" || tm.Params() != 1 {
		t.Fatalf("Prepare: %v %v %q", err, tm, tm.LocalColumn())
	}
	id, err := tm.NextID([]Value{{Kind: KindString, S: []byte("alice")}}, ClientUTF8MB4)
	want, _ := ruleOf(t, r, "users").place(Value{Kind: KindString, S: []byte("alice")}, true, ClientUTF8MB4)
	if s, ok := ShardOfID(id); err != nil || !ok || s != want {
		t.Fatalf("NextID: %d (shard %d, %v) %v; want shard %d", id, s, ok, err, want)
	}
	// The id routes a statement that gives only the id column.
	rt := route(t, r, "SELECT * FROM users WHERE id = ?", intv(id))
	if got := shardsOf(rt); len(got) != 1 || got[0] != want%4 {
		t.Fatalf("route by id: shards %v, want %d", got, want%4)
	}
	tm, _ = r.Prepare("pay", "SELECT NEXT_ID('orders')")
	if id, err := tm.NextID(nil, ClientUTF8MB4); err != nil || id <= 0 || tm.LocalColumn() != "NEXT_ID('orders')" {
		t.Fatalf("plain NEXT_ID: %d %v %q", id, err, tm.LocalColumn())
	}
}

func TestCacheHitSameTemplate(t *testing.T) {
	r := testRules(t)
	a, _ := r.Prepare("pay", "SELECT * FROM orders WHERE uid = ?")
	b, _ := r.Prepare("pay", "SELECT * FROM orders WHERE uid = ?")
	c, _ := r.Prepare("other", "SELECT * FROM orders WHERE uid = ?")
	if a != b || a == c {
		t.Fatal("cache keyed by schema and text")
	}
	args := []Value{intv(9527)}
	if n := testing.AllocsPerRun(100, func() {
		tm, _ := r.Prepare("pay", "SELECT * FROM orders WHERE uid = ?")
		if _, err := tm.Route(args); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("cached point select: %v allocs, want 0", n)
	}
}

func BenchmarkPlanShardedPointSelect(b *testing.B) {
	r := testRules(b)
	const q = "SELECT id, amount FROM orders WHERE uid = ?"
	args := []Value{intv(9527)}
	b.ReportAllocs()
	for b.Loop() {
		tm, err := r.Prepare("pay", q)
		if err != nil {
			b.Fatal(err)
		}
		rt, err := tm.Route(args)
		if err != nil || len(rt.Parts[0].SQL) == 0 {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlanShardedPointSelectMiss(b *testing.B) {
	r := testRules(b)
	const q = "SELECT id, amount FROM orders WHERE uid = ?"
	args := []Value{intv(9527)}
	b.ReportAllocs()
	for b.Loop() {
		tm, err := r.prepare("pay", q)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tm.Route(args); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzPrepare(f *testing.F) {
	for _, s := range []string{"SELECT * FROM orders WHERE uid = ?", "INSERT INTO orders (uid, id) VALUES (1, 2), (?, 3)",
		"SELECT AVG(x) FROM orders GROUP BY y ORDER BY 2 LIMIT ?, ?", "UPDATE config SET a = 1", "SELECT NEXT_ID('orders', ?)",
		"DELETE o FROM orders o JOIN items i USING (uid) WHERE o.uid IN (1, 2)", "SELECT * FROM orders o, items i WHERE o.uid = i.uid",
		"SELECT * FROM orders WHERE uid = -''", "INSERT INTO orders (uid) VALUES (-'')", "SELECT * FROM users WHERE name IN (-'abc', -(''))"} {
		f.Add(s)
	}
	r, err := New(testConfig())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		tm, err := r.Prepare("pay", sql)
		if err != nil {
			return
		}
		args := make([]Value, tm.Params())
		for i := range args {
			args[i] = intv(int64(i))
		}
		if tm.Local() == LocalNextID {
			_, _ = tm.NextID(args, ClientUTF8MB4)
			return
		}
		_, _ = tm.Route(args)
	})
}
