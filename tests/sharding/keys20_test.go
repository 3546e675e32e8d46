package sharding

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// Issue 20 items 7, 13 and the last case of 16: keys are routed as the
// server compares them, and global ids are decoded only in their range.
// Schema k20 holds, on both clusters, tables sharded by a string hash key
// under utf8mb4_general_ci (PAD SPACE), one under utf8mb4_bin, an integer
// mod key, an integer hash key and a rule with an id column; the reference
// holds the logical tables.

const k20Schema = "k20"

var (
	k20Items = &rule{schema: k20Schema, table: "items", key: "sku", algo: "hash", clusters: clusterNames, tables: 2,
		columns: "sku VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, n INT NOT NULL"}
	k20Bins = &rule{schema: k20Schema, table: "bins", key: "code", algo: "hash", clusters: clusterNames, tables: 2,
		columns: "code VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, n INT NOT NULL"}
	k20Accts = &rule{schema: k20Schema, table: "accts", key: "aid", algo: "mod", clusters: clusterNames, tables: 2,
		columns: "aid INT NOT NULL PRIMARY KEY, n INT NOT NULL"}
	k20Hints = &rule{schema: k20Schema, table: "hints", key: "hid", algo: "hash", clusters: clusterNames, tables: 2,
		columns: "hid BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL"}
	k20Orders = &rule{schema: k20Schema, table: "orders", key: "uid", algo: "mod", clusters: clusterNames, tables: 2,
		idColumn: "order_id", columns: "order_id BIGINT NOT NULL PRIMARY KEY, uid BIGINT NOT NULL, n INT NOT NULL"}
	// k20Latin's key is latin1_swedish_ci (MariaDB's default), one byte
	// of weight per character.
	k20Latin = &rule{schema: k20Schema, table: "latin", key: "name", algo: "hash", clusters: clusterNames, tables: 2,
		columns: "name VARCHAR(16) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL PRIMARY KEY, n INT NOT NULL"}
	// k20Uni's key collation weighs ß as two characters, which sluice does
	// not place by; k20Mixed's key column is an INT on c1 and a VARCHAR on
	// c2: both are refused.
	k20Uni = &rule{schema: k20Schema, table: "uni", key: "name", algo: "hash", clusters: clusterNames, tables: 1,
		columns: "name VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NOT NULL PRIMARY KEY"}
	k20Mixed = &rule{schema: k20Schema, table: "mixed", key: "k", algo: "hash", clusters: clusterNames, tables: 1}
	// k20Late's tables are created only after sluice started.
	k20Late = &rule{schema: k20Schema, table: "late", key: "sku", algo: "hash", clusters: clusterNames, tables: 2,
		columns: "sku VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, n INT NOT NULL"}
)

// k20Rules are the rules whose tables the reference holds too.
var k20Rules = []*rule{k20Items, k20Bins, k20Accts, k20Hints, k20Orders, k20Latin}

// k20Seed are the rows every test run starts from, on both sides.
var k20Seed = []string{
	"INSERT INTO items (sku, n) VALUES ('SKU-0001', 1), ('SKU-0002', 2), ('SKU-0003', 3), ('SKU-0004', 4), ('SKU-0005', 5), " +
		"('SKU-0006', 6), ('SKU-0007', 7), ('SKU-0008', 8), ('SKU-0009', 9), ('Straße', 10), ('Éclair', 11), ('naïve café', 12)",
	"INSERT INTO bins (code, n) VALUES ('SKU-0001', 1), ('SKU-0002', 2), ('SKU-0006', 6), ('Éclair', 11)",
	"INSERT INTO accts (aid, n) VALUES (1, 1), (7, 7), (42, 42), (43, 43), (1000, 1000)",
	"INSERT INTO hints (hid, n) VALUES (1, 1), (7, 7), (42, 42), (43, 43), (1000, 1000)",
	// 1048836 carries the version bit of a generated id (its shard bits
	// say 4), but it is an application's id of uid 1.
	"INSERT INTO orders (order_id, uid, n) VALUES (1048836, 1, 1), (77, 2, 2)",
	"INSERT INTO latin (name, n) VALUES ('Éclair', 1), ('Straße', 2), ('Ångström', 3), ('abc', 4), ('Œuvre €', 5)",
}

// k20Setup creates schema k20 on the clusters and the reference, starts a
// sluice with its rules, loads the seed rows through it and on the
// reference, and returns the sluice's address.
func k20Setup(t *testing.T) string {
	t.Helper()
	ctx := ctxT(t)
	for name, topo := range env.clusters {
		stmts := []string{"DROP DATABASE IF EXISTS " + k20Schema, "CREATE DATABASE " + k20Schema}
		for _, r := range append(k20Rules, k20Uni) {
			for s := range r.shards() {
				if r.cluster(s) == name {
					stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", r.schema, r.physical(s), r.columns))
				}
			}
		}
		mixed := "k INT NOT NULL PRIMARY KEY"
		if name == clusterNames[1] {
			mixed = "k VARCHAR(8) NOT NULL PRIMARY KEY"
		}
		stmts = append(stmts, "CREATE TABLE "+k20Schema+".mixed ("+mixed+")")
		if err := topo.Master.Exec(ctx, stmts...); err != nil {
			t.Fatal(err)
		}
	}
	stmts := []string{"DROP DATABASE IF EXISTS " + k20Schema, "CREATE DATABASE " + k20Schema}
	for _, r := range k20Rules {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", r.schema, r.table, r.columns))
	}
	if err := env.ref.Master.Exec(ctx, stmts...); err != nil {
		t.Fatal(err)
	}
	mustExec(t, refDB(t, k20Schema, false), k20Seed...)
	for _, tp := range clusterTopos() {
		if err := tp.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[sharding]\ndefault_cluster = %q\nnode_id = 9\n\n", defaultCluster)
	for _, r := range append(k20Rules, k20Uni, k20Mixed, k20Late) {
		b.WriteString(r.toml())
	}
	srv, err := startSluice(named(clusterNames, clusterTopos()), b.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addr().String()
	mustExec(t, conn(t, sluiceDB(t, addr, k20Schema, false)), k20Seed...)
	return addr
}

// k20Statements are compared with the reference in order, once per
// protocol; the writes leave both sides as they found them, so the binary
// round sees the text round's data. Keys are spelled in every way the
// server finds equal to a stored one.
func k20Statements() []stmt {
	q := func(sql string, args ...any) stmt { return stmt{sql: sql, args: args, ordered: true} }
	w := func(sql string, args ...any) stmt { return stmt{sql: sql, args: args, write: true} }
	return []stmt{
		// A string hash key under utf8mb4_general_ci: case, trailing
		// spaces, accents and ß weigh alike.
		q("SELECT sku, n FROM items WHERE sku = 'sKU-0008'"),
		q("SELECT sku, n FROM items WHERE sku = 'SKU-0006 '"),
		q("SELECT sku, n FROM items WHERE sku = 'sku-0003    '"),
		q("SELECT sku, n FROM items WHERE sku = ?", "Sku-0007  "),
		q("SELECT sku, n FROM items WHERE sku IN ('sku-0001', 'SKU-0002 ', 'nope') ORDER BY n"),
		q("SELECT sku, n FROM items WHERE sku = 'STRASSE'"),
		q("SELECT sku, n FROM items WHERE sku = 'strase'"),
		q("SELECT sku, n FROM items WHERE sku = 'eclair'"),
		q("SELECT sku, n FROM items WHERE sku = ?", "NAIVE CAFE "),
		q("SELECT COUNT(*) FROM items WHERE sku = 0"), // compared as numbers: every non-numeric sku
		q("SELECT COUNT(*) FROM items WHERE sku = 'SKU-0008\t'"),
		w("UPDATE items SET n = n + 100 WHERE sku = 'sku-0005 '"),
		q("SELECT sku, n FROM items WHERE sku = 'SKU-0005'"),
		w("UPDATE items SET n = n - 100 WHERE sku = ?", "SKU-0005   "),
		w("INSERT INTO items (sku, n) VALUES ('Sku-0004 ', 40)"), // 1062
		w("INSERT INTO items (sku, n) VALUES (?, 40)", "sku-0004"),
		w("INSERT INTO items (sku, n) VALUES ('STRASE', 40)"),
		w("DELETE FROM items WHERE sku = 'sku-0009  '"),
		w("INSERT INTO items (sku, n) VALUES ('sku-0009', 9)"),
		q("SELECT sku, n FROM items WHERE sku = 'SKU-0009'"),
		w("DELETE FROM items WHERE sku = ?", "SKU-0009"),
		w("INSERT INTO items (sku, n) VALUES ('SKU-0009', 9)"),
		// utf8mb4_bin pads with spaces too, but case counts.
		q("SELECT code, n FROM bins WHERE code = 'SKU-0006 '"),
		q("SELECT code, n FROM bins WHERE code = 'sku-0006'"),
		q("SELECT code, n FROM bins WHERE code = ?", "Éclair "),
		w("INSERT INTO bins (code, n) VALUES ('SKU-0002  ', 2)"), // 1062
		w("INSERT INTO bins (code, n) VALUES ('sku-0002', 2)"),
		w("DELETE FROM bins WHERE code = 'sku-0002'"),
		w("UPDATE bins SET n = n + 1 WHERE code = 'SKU-0001 '"),
		w("UPDATE bins SET n = n - 1 WHERE code = ?", "SKU-0001 "),
		// latin1_swedish_ci: É weighs as E, ß as itself, Å as itself.
		q("SELECT name, n FROM latin WHERE name = 'ECLAIR '"),
		q("SELECT name, n FROM latin WHERE name = ?", "éclair"),
		q("SELECT name, n FROM latin WHERE name = 'STRASE'"),
		q("SELECT name, n FROM latin WHERE name = 'STRASSE'"),
		q("SELECT name, n FROM latin WHERE name = 'straße  '"),
		q("SELECT name, n FROM latin WHERE name = 'ångström'"),
		q("SELECT name, n FROM latin WHERE name = 'œuvre €'"),
		q("SELECT name, n FROM latin WHERE name = 'ABC'"),
		q("SELECT name, n FROM latin WHERE name = '日本'"),
		w("INSERT INTO latin (name, n) VALUES ('eclair  ', 1)"), // 1062
		w("INSERT INTO latin (name, n) VALUES ('日本', 1)"),       // 1366 from both
		w("UPDATE latin SET n = n + 1 WHERE name = 'ABC '"),
		w("UPDATE latin SET n = n - 1 WHERE name = ?", "aBc"),
		// An integer hash key: '042', ' 42', 42.0 are 42.
		q("SELECT hid, n FROM hints WHERE hid = '042'"),
		q("SELECT hid, n FROM hints WHERE hid = ' 42'"),
		q("SELECT hid, n FROM hints WHERE hid = 42.0"),
		q("SELECT hid, n FROM hints WHERE hid = '42.000'"),
		q("SELECT hid, n FROM hints WHERE hid = '+42 '"),
		q("SELECT hid, n FROM hints WHERE hid = ?", "042"),
		q("SELECT hid, n FROM hints WHERE hid = ?", 42.0),
		q("SELECT hid, n FROM hints WHERE hid = ?", int64(42)),
		q("SELECT hid, n FROM hints WHERE hid IN ('07', ' 1', 43.0) ORDER BY hid"),
		q("SELECT hid, n FROM hints WHERE hid = 42.5"),
		q("SELECT hid, n FROM hints WHERE hid = 18446744073709551616"),
		q("SELECT hid, n FROM hints WHERE hid = -18446744073709551616"),
		q("SELECT hid, n FROM hints WHERE hid = 99999999999999999999999"),
		w("UPDATE hints SET n = n + 1 WHERE hid = '042'"),
		w("UPDATE hints SET n = n - 1 WHERE hid = ?", " 42"),
		w("INSERT INTO hints (hid, n) VALUES ('042', 1)"), // 1062
		w("INSERT INTO hints (hid, n) VALUES (43.0, 1)"),  // 1062
		w("INSERT INTO hints (hid, n) VALUES (?, 1)", "0007"),
		w("DELETE FROM hints WHERE hid = '1000.0'"),
		w("INSERT INTO hints (hid, n) VALUES ('1000', 1000)"),
		// An integer mod key.
		q("SELECT aid, n FROM accts WHERE aid = '042'"),
		q("SELECT aid, n FROM accts WHERE aid = 42.0"),
		q("SELECT aid, n FROM accts WHERE aid = ?", " 42"),
		q("SELECT aid, n FROM accts WHERE aid = 42.5"),
		q("SELECT aid, n FROM accts WHERE aid = 18446744073709551616"),
		q("SELECT aid, n FROM accts WHERE aid = ?", 7.0),
		w("UPDATE accts SET n = n + 1 WHERE aid = '0043'"),
		w("UPDATE accts SET n = n - 1 WHERE aid = 43.0"),
		w("INSERT INTO accts (aid, n) VALUES ('07', 7)"), // 1062
		// An explicit id that carries the version bit is no generated id.
		q("SELECT order_id, uid, n FROM orders WHERE order_id = 1048836"),
		q("SELECT order_id, uid, n FROM orders WHERE order_id = ?", int64(1048836)),
		q("SELECT order_id, uid, n FROM orders WHERE order_id IN (1048836, 77) ORDER BY order_id"),
		w("UPDATE orders SET n = n + 1 WHERE order_id = 1048836"),
		w("UPDATE orders SET n = n - 1 WHERE order_id = ?", int64(1048836)),
		w("DELETE FROM orders WHERE order_id = 1048836"),
		w("INSERT INTO orders (order_id, uid, n) VALUES (1048836, 1, 1)"),
	}
}

func TestKeysRoutedAsServerCompares(t *testing.T) {
	addr := k20Setup(t)
	for _, binary := range []bool{false, true} {
		proto := map[bool]string{false: "text", true: "binary"}[binary]
		waitReplicated(t) // a new session may read from a replica
		sl := conn(t, sluiceDB(t, addr, k20Schema, binary))
		ref := conn(t, refDB(t, k20Schema, binary))
		for _, s := range k20Statements() {
			got, want := run(ctxT(t), sl, s), run(ctxT(t), ref, s)
			if !same(got, want) {
				t.Errorf("%s protocol: %s\n sluice:    %v\n reference: %v", proto, s, got, want)
			}
		}
	}
	// A session whose character set is latin1: the driver's UTF-8 bytes are
	// other characters to the server; sluice scatters rather than place them.
	for _, binary := range []bool{false, true} {
		waitReplicated(t)
		sl := conn(t, sluiceDB(t, addr, k20Schema, binary))
		ref := conn(t, refDB(t, k20Schema, binary))
		for _, s := range []stmt{
			{sql: "SET NAMES latin1", write: true},
			{sql: "SELECT sku, n FROM items WHERE sku = 'ÉCLAIR'", ordered: true},
			{sql: "SELECT sku, n FROM items WHERE sku = ?", args: []any{"naïve café"}, ordered: true},
			{sql: "SELECT sku, n FROM items WHERE sku = ?", args: []any{"sku-0001 "}, ordered: true},
			{sql: "SELECT code, n FROM bins WHERE code = 'Éclair'", ordered: true},
		} {
			if got, want := run(ctxT(t), sl, s), run(ctxT(t), ref, s); !same(got, want) {
				t.Errorf("latin1 session, binary=%v: %s\n sluice:    %v\n reference: %v", binary, s, got, want)
			}
		}
	}
	// No two keys the collation finds equal are stored in two places (each
	// physical table's primary key sees only its own).
	for r, space := range map[*rule]string{k20Items: "0020", k20Bins: "000020", k20Latin: "20"} {
		seen := map[string]string{}
		for s := range r.shards() {
			db, err := env.clusters[r.cluster(s)].Master.RootDB()
			if err != nil {
				t.Fatal(err)
			}
			where := r.cluster(s) + "." + r.physical(s)
			for _, k := range queryStrings(t, db, fmt.Sprintf("SELECT HEX(WEIGHT_STRING(%s)) FROM %s.%s", r.key, r.schema, r.physical(s))) {
				for strings.HasSuffix(k, space) { // PAD SPACE: trailing spaces' weights
					k = k[:len(k)-len(space)]
				}
				if prev, dup := seen[k]; dup {
					t.Errorf("%s: equal keys on %s and %s", r.table, prev, where)
				}
				seen[k] = where
			}
		}
	}
}

// TestKeyRefusals: what sluice cannot place exactly is refused with an
// error naming the table, column and value, or why.
func TestKeyRefusals(t *testing.T) {
	addr := k20Setup(t)
	for _, binary := range []bool{false, true} {
		sl := conn(t, sluiceDB(t, addr, k20Schema, binary))
		for _, tc := range []struct {
			sql   string
			args  []any
			code  uint16
			names []string
		}{
			// The INSERT's key must be the value the column stores.
			{"INSERT INTO hints (hid, n) VALUES ('42abc', 1)", nil, 1366, []string{"k20.hints", "hid", "42abc"}},
			{"INSERT INTO hints (hid, n) VALUES (42.5, 1)", nil, 1366, []string{"hid", "42.5"}},
			{"INSERT INTO accts (aid, n) VALUES (?, 1)", []any{"4294967296"}, 1366, []string{"aid", "out of the range"}},
			{"INSERT INTO items (sku, n) VALUES (?, 1)", []any{strings.Repeat("x", 33)}, 1366, []string{"sku", "32 characters"}},
			{"INSERT INTO items (sku, n) VALUES (4.5, 1)", nil, 1366, []string{"sku", "4.5"}},
			// An id in the generated range must name the row's shard.
			{fmt.Sprintf("INSERT INTO orders (order_id, uid, n) VALUES (%d, 1, 1)", k20GeneratedID(k20Orders, 2)), nil, 1366,
				[]string{"order_id", "generated ids", "shard 2"}},
			// Key columns sluice cannot place by, or that differ between clusters.
			{"SELECT * FROM uni WHERE name = 'x'", nil, 1235, []string{"k20.uni", "name", "utf8mb4_unicode_ci"}},
			{"INSERT INTO uni (name) VALUES ('x')", nil, 1235, []string{"k20.uni", "collation"}},
			{"SELECT * FROM mixed WHERE k = 1", nil, 1235, []string{"k20.mixed", "differs between", "c1.mixed: int", "c2.mixed: varchar"}},
		} {
			_, err := sl.ExecContext(ctxT(t), tc.sql, tc.args...)
			checkErr(t, fmt.Sprintf("binary=%v", binary), tc.sql, err, tc.code, tc.names...)
		}
		// An id in range that names the row's shard goes in, and a lookup by
		// it alone finds the row on that one shard.
		id := k20GeneratedID(k20Orders, 1)
		if binary {
			id += 1 << 8 // another sequence number
		}
		mustExec(t, sl, fmt.Sprintf("INSERT INTO orders (order_id, uid, n) VALUES (%d, 5, 1)", id))
		if n := countRows(t, sl, "orders", "order_id = ?", id); n != 1 {
			t.Errorf("binary=%v: order %d found %d times, want 1", binary, id, n)
		}
	}
	// Nothing of the refused INSERTs was written (a new session may read
	// from a replica: wait for the replicas first).
	waitReplicated(t)
	sl := conn(t, sluiceDB(t, addr, k20Schema, false))
	for table, want := range map[string]string{"hints": "5", "items": "12", "accts": "5", "orders": "4"} {
		if got := queryStrings(t, sl, "SELECT COUNT(*) FROM "+table); got[0] != want {
			t.Errorf("%s holds %s rows, want %s", table, got[0], want)
		}
	}
}

// k20GeneratedID is an id in the generated range (made an hour ago) whose
// shard bits say shard s of r.
func k20GeneratedID(r *rule, s int) int64 {
	ms := time.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).Milliseconds() - time.Hour.Milliseconds()
	return ms<<22 | 1<<20 | 5<<15 | int64(s)
}

// TestKeyColumnLearntLater: a rule whose tables exist nowhere when sluice
// starts cannot place a string key (an INSERT is refused, 1235); sluice asks
// the masters again, and once the tables exist it places keys by the
// collation's weights.
func TestKeyColumnLearntLater(t *testing.T) {
	addr := k20Setup(t)
	sl := conn(t, sluiceDB(t, addr, k20Schema, false))
	_, err := sl.ExecContext(ctxT(t), "INSERT INTO late (sku, n) VALUES ('abc', 1)")
	checkErr(t, "before the tables exist", "INSERT INTO late", err, 1235, "k20.late", "not known yet")
	for name, topo := range env.clusters {
		var stmts []string
		for s := range k20Late.shards() {
			if k20Late.cluster(s) == name {
				stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", k20Late.schema, k20Late.physical(s), k20Late.columns))
			}
		}
		if err := topo.Master.Exec(ctxT(t), stmts...); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err = sl.ExecContext(ctxT(t), "INSERT INTO late (sku, n) VALUES ('abc', 1)")
		if err == nil || errCode(err) != 1235 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("INSERT after the tables were created: %v", err)
	}
	for _, k := range []string{"ABC", "abc   ", "Abc "} {
		if n := countRows(t, sl, "late", "sku = ?", k); n != 1 {
			t.Errorf("late: %q found %d rows, want 1", k, n)
		}
	}
	_, err = sl.ExecContext(ctxT(t), "INSERT INTO late (sku, n) VALUES ('ABC ', 2)")
	if errCode(err) != 1062 {
		t.Errorf("INSERT of a collation-equal duplicate: %v, want 1062", err)
	}
}

// TestKeyColumnsLearntOnReload: a rule a reload adds has its key column
// learnt before the reload returns, so its first string INSERT is placed by
// the collation's weights rather than refused as not known yet.
func TestKeyColumnsLearntOnReload(t *testing.T) {
	k20Setup(t)
	for name, topo := range env.clusters {
		stmts := []string{"DROP TABLE IF EXISTS k20.late_0", "DROP TABLE IF EXISTS k20.late_1"}
		for s := range k20Late.shards() {
			if k20Late.cluster(s) == name {
				stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", k20Late.schema, k20Late.physical(s), k20Late.columns))
			}
		}
		if err := topo.Master.Exec(ctxT(t), stmts...); err != nil {
			t.Fatal(err)
		}
	}
	text := func(rules ...*rule) string {
		var b strings.Builder
		fmt.Fprintf(&b, "[sharding]\ndefault_cluster = %q\nnode_id = 10\n\n", defaultCluster)
		for _, r := range rules {
			b.WriteString(r.toml())
		}
		o := sandbox.SluiceOptions{Listen: "127.0.0.1:0", ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`},
			ClusterKeys: []string{`consistency = "causal"`}}
		return sandbox.ShardedSluiceConfig(o, env.ref.Auth, named(clusterNames, clusterTopos()), b.String()) +
			"\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
	}
	path := filepath.Join(t.TempDir(), "sluice.toml")
	if err := os.WriteFile(path, []byte(text(k20Items)), 0o600); err != nil {
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
	sl := conn(t, sluiceDB(t, srv.Addr().String(), k20Schema, false))
	if err := os.WriteFile(path, []byte(text(k20Items, k20Late)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	mustExec(t, sl, "INSERT INTO late (sku, n) VALUES ('Reloaded', 1)")
	for _, k := range []string{"RELOADED  ", "reloaded", "ReLoAdEd ", "rELOADED   "} {
		if n := countRows(t, sl, "late", "sku = ?", k); n != 1 {
			t.Errorf("late: %q found %d rows, want 1", k, n)
		}
	}
}
