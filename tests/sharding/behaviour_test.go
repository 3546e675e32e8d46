package sharding

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"
)

// insertOrder is the text of an INSERT of one orders row with a fixed amount.
func insertOrder(uid, orderID int64, country, note string) string {
	return fmt.Sprintf("INSERT INTO orders (uid, order_id, amount, status, country, note) VALUES (%d, %d, 1.00, 'new', '%s', '%s')",
		uid, orderID, country, note)
}

// TestShardTransactions: a transaction whose writes stay on one cluster
// (two of its physical tables) commits and is visible; a transaction that
// then writes to the other cluster gets 1235, and ROLLBACK leaves nothing of
// it on either cluster.
func TestShardTransactions(t *testing.T) {
	r := appRule(t, "orders")
	c := conn(t, sluiceDB(t, env.addr, appSchema, false))
	ctx := ctxT(t)
	a1 := keyOn(r, clusterNames[0], 10000)
	a2 := keyOn(r, clusterNames[0], a1+1)
	if shardOfKey(t, r, a1) == shardOfKey(t, r, a2) {
		t.Fatalf("uids %d and %d share a shard; the test wants two tables of one cluster", a1, a2)
	}
	for _, q := range []string{"BEGIN", insertOrder(a1, 10001, "DE", "tx"), insertOrder(a2, 10002, "DE", "tx"), "COMMIT"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var n int
	if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE uid IN (?, ?)", a1, a2).Scan(&n); err != nil || n != 2 {
		t.Errorf("committed rows seen through sluice: %d, %v; want 2", n, err)
	}
	for _, k := range []int64{a1, a2} {
		s := shardOfKey(t, r, k)
		if got := countOn(t, r.cluster(s), appSchema, r.physical(s), "uid = ?", k); got != 1 {
			t.Errorf("uid %d: %d rows in %s on %s, want 1", k, got, r.physical(s), r.cluster(s))
		}
	}

	b1 := keyOn(r, clusterNames[0], 20000)
	b2 := keyOn(r, clusterNames[1], 20000)
	for _, q := range []string{"BEGIN", insertOrder(b1, 20001, "DE", "tx"), "SELECT 1"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	q := insertOrder(b2, 20002, "DE", "tx")
	_, err := c.ExecContext(ctx, q)
	checkErr(t, "write to a second cluster in a transaction", q, err, 1235, "orders")
	if _, err := c.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatalf("ROLLBACK: %v", err)
	}
	for _, k := range []int64{b1, b2} {
		s := shardOfKey(t, r, k)
		if got := countOn(t, r.cluster(s), appSchema, r.physical(s), "uid = ?", k); got != 0 {
			t.Errorf("uid %d: %d rows in %s on %s after ROLLBACK, want 0", k, got, r.physical(s), r.cluster(s))
		}
	}
	if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE uid IN (?, ?)", b1, b2).Scan(&n); err != nil || n != 0 {
		t.Errorf("rolled-back rows seen through sluice: %d, %v; want 0", n, err)
	}
}

// TestCrossShardJoin: a JOIN of two differently sharded tables is refused
// naming both; a JOIN with the broadcast table and a self-JOIN of orders on
// uid for one key answer like one server would.
func TestCrossShardJoin(t *testing.T) {
	r := appRule(t, "orders")
	c := conn(t, sluiceDB(t, env.addr, appSchema, false))
	ctx := ctxT(t)
	q := "SELECT o.order_id, i.sku FROM orders o JOIN items i ON i.item_id = o.uid WHERE o.uid = 5"
	_, err := c.ExecContext(ctx, q)
	checkErr(t, "JOIN of differently sharded tables", q, err, 1235, "orders", "items")

	for _, q := range []string{
		"INSERT INTO countries (code, name, region) VALUES ('JP', 'Japan', 'as'), ('FR', 'France', 'eu')",
	} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, name := range clusterNames {
		if got := countOn(t, name, appSchema, "countries", "code IN ('JP', 'FR')"); got != 2 {
			t.Errorf("broadcast INSERT: %d rows on %s, want 2", got, name)
		}
	}
	u := keyOn(r, clusterNames[1], 50000)
	for i, q := range []string{insertOrder(u, 50001, "JP", "j"), insertOrder(u, 50002, "FR", "j"), insertOrder(u, 50003, "JP", "j")} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("row %d: %s: %v", i, q, err)
		}
	}
	got := queryStrings(t, c, "SELECT o.order_id, c.name FROM orders o JOIN countries c ON c.code = o.country WHERE o.uid = ? ORDER BY o.order_id", u)
	want := []string{"50001 | Japan", "50002 | France", "50003 | Japan"}
	if !slices.Equal(got, want) {
		t.Errorf("JOIN with the broadcast table: %v, want %v", got, want)
	}
	got = queryStrings(t, c, "SELECT a.order_id, b.order_id FROM orders a JOIN orders b ON a.uid = b.uid WHERE a.uid = ? AND a.order_id < b.order_id ORDER BY a.order_id, b.order_id", u)
	want = []string{"50001 | 50002", "50001 | 50003", "50002 | 50003"}
	if !slices.Equal(got, want) {
		t.Errorf("self-JOIN on uid: %v, want %v", got, want)
	}
}

// queryStrings runs q and returns its rows as run formats them, in order.
func queryStrings(t *testing.T, q querier, sql string, args ...any) []string {
	t.Helper()
	res := run(ctxT(t), q, stmt{sql: sql, args: args, ordered: true})
	if res.err != nil {
		t.Fatalf("%s %v: %v", sql, args, res.err)
	}
	return res.rows
}

// TestPreparedRouting: one prepared SELECT executed with keys of both
// clusters reads each key's rows from its own cluster (the rows were written
// straight into the physical tables with the cluster's name as note), and a
// prepared multi-row INSERT whose rows belong to different shards puts each
// row in its own physical table.
func TestPreparedRouting(t *testing.T) {
	r := appRule(t, "orders")
	ctx := ctxT(t)
	u1 := keyOn(r, clusterNames[0], 30000)
	u2 := keyOn(r, clusterNames[1], 30000)
	want := map[int64][]string{}
	for i, u := range []int64{u1, u2} {
		s := shardOfKey(t, r, u)
		for j := range 2 {
			id := 30000 + int64(10*i+j)
			if err := env.clusters[r.cluster(s)].Master.Exec(ctx, fmt.Sprintf("INSERT INTO %s.%s (uid, order_id, amount, status, country, note) VALUES (%d, %d, 1.00, 'new', 'DE', '%s')",
				appSchema, r.physical(s), u, id, r.cluster(s))); err != nil {
				t.Fatal(err)
			}
			want[u] = append(want[u], fmt.Sprintf("%d | %s", id, r.cluster(s)))
		}
	}
	waitReplicated(t)

	c := conn(t, sluiceDB(t, env.addr, appSchema, true))
	ps, err := c.PrepareContext(ctx, "SELECT order_id, note FROM orders WHERE uid = ? ORDER BY order_id")
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	for _, u := range []int64{u1, u2, u1, u2} {
		res := run(ctx, stmtQuerier{ps}, stmt{args: []any{u}, ordered: true})
		if res.err != nil {
			t.Fatalf("uid %d: %v", u, res.err)
		}
		if !slices.Equal(res.rows, want[u]) {
			t.Errorf("uid %d: %v, want %v", u, res.rows, want[u])
		}
	}

	ins, err := c.PrepareContext(ctx, "INSERT INTO orders (uid, order_id, amount, status, country) VALUES (?, ?, ?, 'new', 'DE'), (?, ?, ?, 'new', 'DE'), (?, ?, ?, 'new', 'DE'), (?, ?, ?, 'new', 'DE')")
	if err != nil {
		t.Fatal(err)
	}
	defer ins.Close()
	keys := []int64{
		keyOn(r, clusterNames[0], 31000), keyOn(r, clusterNames[1], 31000),
		keyOn(r, clusterNames[0], 31003), keyOn(r, clusterNames[1], 31013),
	}
	var args []any
	for i, k := range keys {
		args = append(args, k, 31000+int64(i), "2.50")
	}
	res, err := ins.ExecContext(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(keys)) {
		t.Errorf("multi-row INSERT affected %d rows (%v), want %d", n, err, len(keys))
	}
	for i, k := range keys {
		s := shardOfKey(t, r, k)
		for o := range r.shards() {
			n := countOn(t, r.cluster(o), appSchema, r.physical(o), "order_id = ?", 31000+i)
			if wantN := map[bool]int{true: 1, false: 0}[o == s]; n != wantN {
				t.Errorf("row uid %d: %d copies in %s on %s, want %d", k, n, r.physical(o), r.cluster(o), wantN)
			}
		}
	}
}

// stmtQuerier lets run execute a prepared statement: the statement text
// run passes is ignored.
type stmtQuerier struct{ ps *sql.Stmt }

func (q stmtQuerier) ExecContext(ctx context.Context, _ string, args ...any) (sql.Result, error) {
	return q.ps.ExecContext(ctx, args...)
}

func (q stmtQuerier) QueryContext(ctx context.Context, _ string, args ...any) (*sql.Rows, error) {
	return q.ps.QueryContext(ctx, args...)
}

// Global id layout: 41 bits of milliseconds since idEpoch, 2 bits version,
// 5 bits node, 7 bits sequence, 8 bits shard (lowest).
var idEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type idParts struct {
	at                        time.Time
	version, node, seq, shard int64
}

func decodeID(id int64) idParts {
	return idParts{
		at:      idEpoch.Add(time.Duration(id>>22) * time.Millisecond),
		version: id >> 20 & 3,
		node:    id >> 15 & 31,
		seq:     id >> 8 & 127,
		shard:   id & 255,
	}
}

// TestGlobalIDs: NEXT_ID gives BIGINT ids that increase and carry this
// sluice's node id and the time; without a key they are version 0 (no
// shard: they route nowhere), with one (NEXT_ID('orders', uid)) version 1
// and the uid's shard; an INSERT that omits order_id
// gets one embedding the row's shard; a SELECT by order_id alone finds the
// row on that shard only (a decoy row with the same id on another shard
// stays unseen).
func TestGlobalIDs(t *testing.T) {
	r := appRule(t, "orders")
	ctx := ctxT(t)
	c := conn(t, sluiceDB(t, env.addr, appSchema, false))
	before := time.Now().Add(-time.Second)
	var ids []int64
	for range 5 {
		rows, err := c.QueryContext(ctx, "SELECT NEXT_ID('orders')")
		if err != nil {
			t.Fatal(err)
		}
		types, err := rows.ColumnTypes()
		if err != nil || len(types) != 1 || types[0].DatabaseTypeName() != "BIGINT" {
			t.Errorf("NEXT_ID column types %v (%v), want one BIGINT", types, err)
		}
		var id int64
		for rows.Next() {
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
		}
		rows.Close()
		ids = append(ids, id)
	}
	after := time.Now().Add(time.Second)
	for i, id := range ids {
		p := decodeID(id)
		if i > 0 && id <= ids[i-1] {
			t.Errorf("NEXT_ID %d after %d: not increasing", id, ids[i-1])
		}
		if p.version != 0 || p.shard != 0 || p.node != testNodeID || p.at.Before(before) || p.at.After(after) {
			t.Errorf("NEXT_ID %d decodes to %+v; want version 0, shard 0, node %d, time in [%v, %v]", id, p, testNodeID, before, after)
		}
	}
	for _, u := range []int64{keyOn(r, clusterNames[0], 42000), keyOn(r, clusterNames[1], 42000)} {
		var id int64
		if err := c.QueryRowContext(ctx, fmt.Sprintf("SELECT NEXT_ID('orders', %d)", u)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if p, s := decodeID(id), shardOfKey(t, r, u); p.version != 1 || p.shard != int64(s) || p.node != testNodeID {
			t.Errorf("NEXT_ID('orders', %d) = %d decodes to %+v; want version 1, shard %d, node %d", u, id, p, s, testNodeID)
		}
	}

	keys := []int64{keyOn(r, clusterNames[0], 40000), keyOn(r, clusterNames[1], 40000)}
	for _, u := range keys {
		q := fmt.Sprintf("INSERT INTO orders (uid, amount, status, country) VALUES (%d, 3.00, 'new', 'DE')", u)
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var id int64
		if err := c.QueryRowContext(ctx, "SELECT order_id FROM orders WHERE uid = ?", u).Scan(&id); err != nil {
			t.Fatalf("order_id of uid %d: %v", u, err)
		}
		s := shardOfKey(t, r, u)
		if p := decodeID(id); p.shard != int64(s) || p.version != 1 || p.node != testNodeID {
			t.Errorf("uid %d got order_id %d = %+v; want shard %d, version 1, node %d", u, id, p, s, testNodeID)
		}
		if n := countOn(t, r.cluster(s), appSchema, r.physical(s), "uid = ? AND order_id = ?", u, id); n != 1 {
			t.Errorf("uid %d order_id %d: %d rows in %s on %s, want 1", u, id, n, r.physical(s), r.cluster(s))
		}
		// A decoy with the same id on another cluster: only a SELECT routed
		// by the id's shard misses it.
		other := (s + r.tables) % r.shards()
		decoy := keyOn(r, r.cluster(other), 41000)
		if err := env.clusters[r.cluster(other)].Master.Exec(ctx, fmt.Sprintf(
			"INSERT INTO %s.%s (uid, order_id, amount, status, country) VALUES (%d, %d, 9.00, 'new', 'DE')",
			appSchema, r.physical(shardOfKey(t, r, decoy)), decoy, id)); err != nil {
			t.Fatal(err)
		}
		waitReplicated(t)
		got := queryStrings(t, c, "SELECT uid FROM orders WHERE order_id = ?", id)
		if want := []string{fmt.Sprint(u)}; !slices.Equal(got, want) {
			t.Errorf("SELECT by order_id %d: uids %v, want %v (from shard %d only)", id, got, want, s)
		}
	}
}
