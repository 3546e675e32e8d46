package sharding

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// tableColumns is "name type" per column of schema.table on db, in order.
func tableColumns(t *testing.T, ctx context.Context, db *sql.DB, schema, table string) []string {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", schema, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n, typ string
		if err := rows.Scan(&n, &typ); err != nil {
			t.Fatal(err)
		}
		out = append(out, n+" "+typ)
	}
	return out
}

// TestMirrorShardedSchema: with [auth] mirror_schema over the two shared
// clusters, the auth server holds the union of the clusters' tables: every
// physical table, the broadcast and unsharded tables, and each rule's
// logical table, whose columns equal the reference's logical table (what
// grants name). A table created through sluice arrives too.
func TestMirrorShardedSchema(t *testing.T) {
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys:   []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`},
		ClusterKeys: []string{`consistency = "causal"`},
		AuthKeys:    []string{"mirror_schema = true"}}
	cfg, err := conf.Parse([]byte(sandbox.ShardedSluiceConfig(o, env.ref.Auth, named(clusterNames, clusterTopos()), shardingTOML())))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	auth, err := env.ref.Auth.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := env.ref.Master.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	type check struct{ table, like string } // auth's table, and the reference's with the same columns
	var checks []check
	for _, r := range rulesFor(diffSchema) {
		checks = append(checks, check{r.table, r.table})
		for s := range r.shards() {
			checks = append(checks, check{r.physical(s), r.table})
		}
	}
	checks = append(checks, check{"countries", "countries"}, check{"notes", "notes"}, check{"mirror_new", ""})
	app := sluiceDB(t, srv.Addr().String(), diffSchema, false)
	if _, err := app.ExecContext(ctx, "CREATE TABLE mirror_new (a int, b varchar(3))"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = app.ExecContext(context.Background(), "DROP TABLE IF EXISTS mirror_new") }()
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range checks {
		want := []string{"a int(11)", "b varchar(3)"}
		if c.like != "" {
			want = tableColumns(t, ctx, ref, diffSchema, c.like)
		}
		for {
			got := tableColumns(t, ctx, auth, diffSchema, c.table)
			if len(want) > 0 && slices.Equal(got, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("auth server's %s.%s: columns\n  %s\nwant (the reference's %s)\n  %s", diffSchema, c.table,
					strings.Join(got, "\n  "), c.like, strings.Join(want, "\n  "))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
