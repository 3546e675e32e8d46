package sharding

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestShardingBadInput: each statement sluice must refuse gets its MySQL
// error code and a message naming the table, column and value, and the
// session answers the next statement normally.
func TestShardingBadInput(t *testing.T) {
	ghostShard, err := ghostRule.shardOf("3")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		sql   string
		code  uint16
		names []string // each must appear in the message (case-insensitive)
	}{
		{"key of the wrong type", "INSERT INTO orders (uid, order_id, amount, status, country) VALUES ('abc', 1, 1.00, 'new', 'DE')",
			1366, []string{"orders", "uid", "abc"}},
		{"date key that is no date", "INSERT INTO logs (lid, day, level, msg) VALUES (1, 'not a date', 1, 'x')",
			1366, []string{"logs", "day", "not a date"}},
		{"NULL key on INSERT", "INSERT INTO orders (uid, order_id, amount, status, country) VALUES (NULL, 2, 1.00, 'new', 'DE')",
			1048, []string{"orders", "uid"}},
		{"range key outside all ranges", fmt.Sprintf("INSERT INTO events (eid, uid, kind, val) VALUES (%d, 1, 'click', 1)", eventsEnd+1000),
			1526, []string{"events", "eid", fmt.Sprint(eventsEnd + 1000)}},
		{"range key below the first range", "INSERT INTO events (eid, uid, kind, val) VALUES (-5, 1, 'click', 1)",
			1526, []string{"events", "eid", "-5"}},
		{"INSERT without the key column", "INSERT INTO orders (order_id, amount, status, country) VALUES (3, 1.00, 'new', 'DE')",
			1364, []string{"orders", "uid"}},
		{"UPDATE of the shard key", "UPDATE orders SET uid = 7 WHERE uid = 5",
			1235, []string{"orders", "uid"}},
		{"unsupported scatter aggregate", "SELECT GROUP_CONCAT(status) FROM orders",
			1235, []string{"group_concat"}},
		{"unsupported scatter COUNT(DISTINCT)", "SELECT COUNT(DISTINCT status) FROM orders",
			1235, []string{"distinct"}},
		{"cross-shard JOIN", "SELECT o.order_id, i.sku FROM orders o JOIN items i ON i.item_id = o.uid",
			1235, []string{"orders", "items"}},
		{"physical table missing", "SELECT * FROM ghost WHERE id = 3",
			1146, []string{ghostRule.physical(ghostShard)}},
	}
	c := conn(t, sluiceDB(t, env.addr, appSchema, false))
	ctx := ctxT(t)
	for _, tc := range cases {
		_, err := c.ExecContext(ctx, tc.sql)
		checkErr(t, tc.name, tc.sql, err, tc.code, tc.names...)
		var n int
		if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE uid = 5").Scan(&n); err != nil {
			t.Errorf("%s: the session is not usable afterwards: %v", tc.name, err)
		}
	}
}

// checkErr fails t unless err is MySQL error code whose message names every
// one of names.
func checkErr(t *testing.T, what, sql string, err error, code uint16, names ...string) {
	t.Helper()
	me := mysqlErr(err)
	if me == nil {
		t.Errorf("%s: %s: got %v, want error %d", what, sql, err, code)
		return
	}
	if me.Number != code {
		t.Errorf("%s: %s: error %d %q, want %d", what, sql, me.Number, me.Message, code)
	}
	for _, n := range names {
		if !strings.Contains(strings.ToLower(me.Message), strings.ToLower(n)) {
			t.Errorf("%s: %s: message %q does not name %q", what, sql, me.Message, n)
		}
	}
}

// TestMaxMergeRows: a scatter-gather read that has to hold more rows than
// [sharding] max_merge_rows fails with 1104 naming the limit, and the
// session goes on; a sluice with that small limit runs next to the shared one.
func TestMaxMergeRows(t *testing.T) {
	const limit = 5
	srv, err := startSluice(named(clusterNames, clusterTopos()),
		shardingTOML(fmt.Sprintf("max_merge_rows = %d", limit)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	r := appRule(t, "orders")
	ctx := ctxT(t)
	// More distinct uids than the limit, written straight into their physical tables.
	const first = 900000
	for uid := int64(first); uid < first+3*limit; uid++ {
		s := shardOfKey(t, r, uid)
		if err := env.clusters[r.cluster(s)].Master.Exec(ctx, fmt.Sprintf(
			"INSERT INTO %s.%s (uid, order_id, amount, status, country) VALUES (%d, %d, 1.00, 'new', 'DE')",
			appSchema, r.physical(s), uid, uid)); err != nil {
			t.Fatal(err)
		}
	}
	waitReplicated(t)
	c := conn(t, sluiceDB(t, srv.Addr().String(), appSchema, false))
	for _, q := range []string{"SELECT DISTINCT uid FROM orders", "SELECT uid, COUNT(*) FROM orders GROUP BY uid"} {
		_, err := c.ExecContext(ctx, q)
		checkErr(t, "over max_merge_rows", q, err, 1104)
		if me := mysqlErr(err); me != nil && !regexp.MustCompile(fmt.Sprintf(`\b%d\b`, limit)).MatchString(me.Message) {
			t.Errorf("%s: message %q does not name the limit %d", q, me.Message, limit)
		}
		var n int
		if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE uid = ?", first).Scan(&n); err != nil || n != 1 {
			t.Errorf("after %s: COUNT for one uid = %d, %v; want 1", q, n, err)
		}
	}
}

// waitReplicated waits until both clusters' replicas applied their masters' writes.
func waitReplicated(t *testing.T) {
	t.Helper()
	for _, name := range clusterNames {
		if err := env.clusters[name].WaitReplicated(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMissingShardTablesReported: the start-up check of the rules' physical
// tables names every table of the rule whose tables were never created, on
// each cluster, and no table that exists.
func TestMissingShardTablesReported(t *testing.T) {
	missing, err := env.srv.MissingShardTables(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for s := range ghostRule.shards() {
		want = append(want, fmt.Sprintf("%s: %s.%s (rule %s.%s)", ghostRule.cluster(s), ghostRule.schema,
			ghostRule.physical(s), ghostRule.schema, ghostRule.table))
	}
	slices.Sort(want)
	slices.Sort(missing)
	if !slices.Equal(missing, want) {
		t.Errorf("missing physical tables reported: %q\nwant %q", missing, want)
	}
}
