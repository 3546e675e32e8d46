package sharding

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
)

// TestSeedFormula is the payment system's layout: orders over 8 clusters x
// 10 tables by uid, cluster = (uid / 10) % 8 and table = uid % 10, on 8
// masters of their own. Each uid inserted through sluice is found in exactly
// the place the formula names and nowhere else; uid 9527 is in the first
// cluster's orders_7.
func TestSeedFormula(t *testing.T) {
	const clusters, tables = 8, 10
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := make([]sandbox.Options, clusters)
	names := make([]string, clusters)
	for i := range opts {
		opts[i] = sandbox.Options{Replicas: -1, NoAuth: true}
		names[i] = fmt.Sprintf("db%d", i+1)
	}
	topos, err := sandbox.StartAll(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tp := range topos {
			tp.Stop()
		}
	})
	for _, tp := range topos {
		stmts := []string{"CREATE DATABASE pay"}
		for j := range tables {
			stmts = append(stmts, fmt.Sprintf("CREATE TABLE pay.orders_%d (%s)", j, ordersColumns))
		}
		if err := tp.Master.Exec(ctx, stmts...); err != nil {
			t.Fatal(err)
		}
	}
	q := make([]string, clusters)
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	srv, err := startSluice(named(names, topos), fmt.Sprintf(
		"[[shard]]\nschema = \"pay\"\ntable = \"orders\"\nkey = \"uid\"\nalgorithm = \"mod\"\nclusters = [%s]\ntables_per_cluster = %d\n",
		strings.Join(q, ", "), tables))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c := conn(t, sluiceDB(t, srv.Addr().String(), "pay", false))

	uids := []int64{9527, 0, 81, 123, 7779, 88888, 1639}
	for i, u := range uids {
		if _, err := c.ExecContext(ctx, insertOrder(u, int64(i+1), "DE", "seed")); err != nil {
			t.Fatalf("uid %d: %v", u, err)
		}
	}
	// Where each uid is, from every physical table of every master.
	found := map[int64][]string{}
	for i, tp := range topos {
		db, err := tp.Master.RootDB()
		if err != nil {
			t.Fatal(err)
		}
		for j := range tables {
			rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT uid FROM pay.orders_%d", j))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var u int64
				if err := rows.Scan(&u); err != nil {
					t.Fatal(err)
				}
				found[u] = append(found[u], fmt.Sprintf("%s.orders_%d", names[i], j))
			}
			rows.Close()
		}
	}
	for _, u := range uids {
		want := fmt.Sprintf("%s.orders_%d", names[(u/10)%clusters], u%tables)
		if got := found[u]; len(got) != 1 || got[0] != want {
			t.Errorf("uid %d is in %v, want only %s", u, got, want)
		}
	}
	if got := found[9527]; len(got) != 1 || got[0] != names[0]+".orders_7" {
		t.Errorf("uid 9527 is in %v, want the first cluster's orders_7 (%s.orders_7)", got, names[0])
	}
	for _, u := range uids {
		var n int
		if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE uid = ?", u).Scan(&n); err != nil || n != 1 {
			t.Errorf("uid %d through sluice: %d rows, %v; want 1", u, n, err)
		}
	}
}
