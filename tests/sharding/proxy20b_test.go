package sharding

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// Tests of issue 20's review findings 1.1 (connection-scoped values under
// sharding) and 1.4 (prepared statements across RELOAD CONFIG), in schema
// p20b.

const p20bSchema = "p20b"

var (
	p20bF = &rule{schema: p20bSchema, table: "f", key: "id", algo: "mod", clusters: clusterNames, tables: 1,
		columns: "id INT NOT NULL PRIMARY KEY, g INT NULL"}
	p20bAW = &rule{schema: p20bSchema, table: "aw", key: "k", algo: "mod", clusters: clusterNames, tables: 1,
		columns: "id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, KEY (k)"}
	p20bT2 = &rule{schema: p20bSchema, table: "t2", key: "id", algo: "mod", clusters: clusterNames, tables: 2,
		columns: "id INT NOT NULL PRIMARY KEY"}
	p20bRules = []*rule{p20bF, p20bAW, p20bT2}
)

// p20bTables creates rules' physical tables on the clusters and their
// logical tables on the reference, in a fresh schema p20b.
func p20bTables(t *testing.T, rules ...*rule) {
	t.Helper()
	ctx := ctxT(t)
	for name, topo := range env.clusters {
		stmts := []string{"DROP DATABASE IF EXISTS " + p20bSchema, "CREATE DATABASE " + p20bSchema}
		for _, r := range rules {
			for s := range r.shards() {
				if r.cluster(s) == name {
					stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", r.schema, r.physical(s), r.columns))
				}
			}
		}
		if err := topo.Master.Exec(ctx, stmts...); err != nil {
			t.Fatal(err)
		}
	}
	stmts := []string{"DROP DATABASE IF EXISTS " + p20bSchema, "CREATE DATABASE " + p20bSchema}
	for _, r := range rules {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", r.schema, r.table, r.columns))
	}
	if err := env.ref.Master.Exec(ctx, stmts...); err != nil {
		t.Fatal(err)
	}
}

// p20bShardingTOML is the [sharding] table and rules' [[shard]] tables.
func p20bShardingTOML(rules ...*rule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[sharding]\ndefault_cluster = %q\n\n", defaultCluster)
	for _, r := range rules {
		b.WriteString(r.toml())
	}
	return b.String()
}

// TestShardedScopedValuesAreTheSessions: a sharded statement that reads
// LAST_INSERT_ID() or ROW_COUNT() sees the session's own value on every
// Part, not the one another session left on the pooled connection the Part
// runs on, and a sharded INSERT leaves the session's values as the server
// reported them.
func TestShardedScopedValuesAreTheSessions(t *testing.T) {
	p20bTables(t, p20bRules...)
	srv, err := startSluice(named(clusterNames, clusterTopos()), p20bShardingTOML(p20bRules...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addr().String()
	seed := "INSERT INTO f (id, g) VALUES (1, 1), (2, 2), (3, 3), (4, 4)"
	mustExec(t, conn(t, sluiceDB(t, addr, p20bSchema, false)), seed)
	mustExec(t, conn(t, refDB(t, p20bSchema, false)), seed)
	waitReplicated(t)

	q := func(sql string) stmt { return stmt{sql: sql, ordered: true} }
	w := func(sql string) stmt { return stmt{sql: sql, write: true} }
	checks := []stmt{
		q("SELECT id FROM f WHERE id = LAST_INSERT_ID()"),
		q("SELECT COUNT(*) FROM f WHERE id <= LAST_INSERT_ID()"),
		q("SELECT id, LAST_INSERT_ID() FROM f ORDER BY id"),
		w("UPDATE f SET g = 100 WHERE id = LAST_INSERT_ID()"),
		q("SELECT id, ROW_COUNT() FROM f ORDER BY id"),
		q("SELECT id, g FROM f ORDER BY id"),
		w("DELETE FROM f WHERE id = LAST_INSERT_ID() + 1"),
		q("SELECT id, g FROM f ORDER BY id"),
		q("SELECT FOUND_ROWS()"),
		q("SELECT id, FOUND_ROWS() FROM f WHERE id > 1 ORDER BY id"),
		q("SELECT id, g FROM f WHERE g > 2 ORDER BY id LIMIT 1"),
		q("SELECT FOUND_ROWS(), ROW_COUNT()"),
	}
	var sides [2][]result
	for i, side := range []string{"sluice", "reference"} {
		db := refDB(t, p20bSchema, false)
		if side == "sluice" {
			db = sluiceDB(t, addr, p20bSchema, false)
		}
		a, b := conn(t, db), conn(t, db)
		// B leaves LAST_INSERT_ID() = 2 on the c1 connection it used
		// (aw's k = 2 is on c1).
		mustExec(t, b, "INSERT INTO aw (k) VALUES (2)", "INSERT INTO aw (k) VALUES (2)")
		b.Close()
		mustExec(t, a, "CREATE TABLE ai (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
			"INSERT INTO ai (v) VALUES (1)", "INSERT INTO ai (v) VALUES (1)", "INSERT INTO ai (v) VALUES (1)")
		for _, s := range checks {
			sides[i] = append(sides[i], run(ctxT(t), a, s))
		}
	}
	for i, s := range checks {
		if !same(sides[0][i], sides[1][i]) {
			t.Errorf("%s\n sluice:    %v\n reference: %v", s.sql, sides[0][i], sides[1][i])
		}
	}

	// A sharded INSERT of rows on both clusters: the session's
	// LAST_INSERT_ID() is the id the OK packet gave the client, its
	// ROW_COUNT() the rows inserted, and a sharded read of them sees those.
	a := conn(t, sluiceDB(t, addr, p20bSchema, false))
	res, err := a.ExecContext(ctxT(t), "INSERT INTO aw (k) VALUES (1), (2), (3)")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if got := queryStrings(t, a, "SELECT ROW_COUNT()"); len(got) != 1 || got[0] != "3" {
		t.Errorf("ROW_COUNT() after a 3-row sharded INSERT: %v", got)
	}
	if got := queryStrings(t, a, "SELECT LAST_INSERT_ID()"); len(got) != 1 || got[0] != fmt.Sprint(id) {
		t.Errorf("LAST_INSERT_ID() after a sharded INSERT: %v, the OK packet said %d", got, id)
	}
	if got := queryStrings(t, a, "SELECT LAST_INSERT_ID(), COUNT(*) FROM aw WHERE id >= 0"); len(got) != 1 || got[0] != fmt.Sprintf("%d | 5", id) {
		t.Errorf("LAST_INSERT_ID() in a scatter read after a sharded INSERT: %v, want %d | 5", got, id)
	}

	// LAST_INSERT_ID(expr) on several shards would set the value on each
	// Part's connection: refused, and nothing changes.
	_, err = a.ExecContext(ctxT(t), "UPDATE f SET g = LAST_INSERT_ID(g) + 1000 WHERE id > 0")
	if errCode(err) != 1235 || !strings.Contains(err.Error(), "LAST_INSERT_ID(expr)") {
		t.Errorf("UPDATE ... LAST_INSERT_ID(expr) over shards: %v, want ERR 1235 naming LAST_INSERT_ID(expr)", err)
	}
	if n := countRows(t, a, "f", "g >= 1000"); n != 0 {
		t.Errorf("the refused UPDATE changed %d rows", n)
	}
}

// TestShardedScopedPrepared: TestShardedScopedValuesAreTheSessions for
// prepared statements whose executions run as text on several shards.
func TestShardedScopedPrepared(t *testing.T) {
	p20bTables(t, p20bRules...)
	srv, err := startSluice(named(clusterNames, clusterTopos()), p20bShardingTOML(p20bRules...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addr().String()
	seed := "INSERT INTO f (id, g) VALUES (1, 1), (2, 2), (3, 3), (4, 4)"
	mustExec(t, conn(t, sluiceDB(t, addr, p20bSchema, false)), seed)
	mustExec(t, conn(t, refDB(t, p20bSchema, false)), seed)
	waitReplicated(t)
	q := func(sql string) stmt { return stmt{sql: sql, ordered: true, args: []any{0}} }
	w := func(sql string) stmt { return stmt{sql: sql, write: true, args: []any{0}} }
	checks := []stmt{
		q("SELECT id FROM f WHERE id = LAST_INSERT_ID() AND g > ?"),
		q("SELECT id, LAST_INSERT_ID() FROM f WHERE g > ? ORDER BY id"),
		w("UPDATE f SET g = 100 WHERE id = LAST_INSERT_ID() AND g > ?"),
		q("SELECT id, ROW_COUNT() FROM f WHERE g > ? ORDER BY id"),
		w("UPDATE f SET g = g + 1 WHERE id > ?"),
		{sql: "SELECT id, ROW_COUNT() FROM f WHERE id = ?", args: []any{2}},
		q("SELECT id, g FROM f WHERE g > ? ORDER BY id"),
	}
	var sides [2][]result
	for i, side := range []string{"sluice", "reference"} {
		db := refDB(t, p20bSchema, true)
		if side == "sluice" {
			db = sluiceDB(t, addr, p20bSchema, true)
		}
		a, b := conn(t, db), conn(t, db)
		mustExec(t, b, "INSERT INTO aw (k) VALUES (2)", "INSERT INTO aw (k) VALUES (2)")
		b.Close()
		mustExec(t, a, "CREATE TABLE ai (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
			"INSERT INTO ai (v) VALUES (1)", "INSERT INTO ai (v) VALUES (1)", "INSERT INTO ai (v) VALUES (1)")
		for _, s := range checks {
			sides[i] = append(sides[i], run(ctxT(t), a, s))
		}
	}
	for i, s := range checks {
		if !same(sides[0][i], sides[1][i]) {
			t.Errorf("%s\n sluice:    %v\n reference: %v", s.sql, sides[0][i], sides[1][i])
		}
	}

	// CONNECTION_ID() in a prepared statement whose one Part runs another
	// physical text (t2_0) is the session's id, as in a text query.
	a := conn(t, sluiceDB(t, addr, p20bSchema, true))
	mustExec(t, a, "INSERT INTO t2 (id) VALUES (1), (2)")
	want := queryStrings(t, a, "SELECT CONNECTION_ID()")
	for _, id := range []int{1, 2} {
		got := queryStrings(t, a, "SELECT CONNECTION_ID() FROM t2 WHERE id = ?", id)
		if len(got) != 1 || len(want) != 1 || got[0] != want[0] {
			t.Errorf("prepared SELECT CONNECTION_ID() FROM t2 WHERE id = %d: %v, the session's id is %v", id, got, want)
		}
	}
}

// TestPreparedAfterReloadFollowsNewRules: statements prepared before
// RELOAD CONFIG route their executions by the rules loaded since, not by
// those they were prepared under: rule rl (mod by id) over [c1, c2]
// becomes rl over [c2, c1], and id 2 goes to (and is read from) c2.
func TestPreparedAfterReloadFollowsNewRules(t *testing.T) {
	rl := &rule{schema: p20bSchema, table: "rl", key: "id", algo: "mod", clusters: clusterNames, tables: 1,
		columns: "id INT NOT NULL PRIMARY KEY, n INT NOT NULL"}
	p20bTables(t, rl)
	text := func(r *rule) string {
		o := sandbox.SluiceOptions{Listen: "127.0.0.1:0", ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`},
			ClusterKeys: []string{`consistency = "causal"`}}
		return sandbox.ShardedSluiceConfig(o, env.ref.Auth, named(clusterNames, clusterTopos()), p20bShardingTOML(r)) +
			"\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
	}
	path := filepath.Join(t.TempDir(), "sluice.toml")
	if err := os.WriteFile(path, []byte(text(rl)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(path)
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
	t.Cleanup(func() { srv.Close() })
	sl := conn(t, sluiceDB(t, srv.Addr().String(), p20bSchema, true))
	ins, err := sl.PrepareContext(ctxT(t), "INSERT INTO rl (id, n) VALUES (?, ?)")
	if err != nil {
		t.Fatal(err)
	}
	sel, err := sl.PrepareContext(ctxT(t), "SELECT n FROM rl WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	// Before the reload id 2 is c1's: the statements ran there once.
	if _, err := ins.ExecContext(ctxT(t), 2, 1); err != nil {
		t.Fatal(err)
	}
	if n := countOn(t, clusterNames[0], p20bSchema, "rl", "id = 2"); n != 1 {
		t.Fatalf("before the reload: %d rows of id 2 on %s, want 1", n, clusterNames[0])
	}
	var n int
	if err := sel.QueryRowContext(ctxT(t), 2).Scan(&n); err != nil {
		t.Fatal(err)
	}
	swapped := *rl
	swapped.clusters = []string{clusterNames[1], clusterNames[0]}
	if err := os.WriteFile(path, []byte(text(&swapped)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := ins.ExecContext(ctxT(t), 4, 7); err != nil {
		t.Fatal(err)
	}
	if got := countOn(t, clusterNames[1], p20bSchema, "rl", "id = 4"); got != 1 {
		t.Errorf("after the reload the prepared INSERT put id 4 on %s %d times, want 1 (the new rules place it there); %s has %d",
			clusterNames[1], got, clusterNames[0], countOn(t, clusterNames[0], p20bSchema, "rl", "id = 4"))
	}
	if err := sel.QueryRowContext(ctxT(t), 4).Scan(&n); err != nil || n != 7 {
		t.Errorf("after the reload the prepared SELECT of id 4: n %d, %v; want 7", n, err)
	}
}
