package sharding

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Keys placed only as the server reads them (review of issue 20): a
// negated string, integer date keys, a date rule on a TIMESTAMP column, a
// _binary literal against a latin1 key, integer keys of a hash rule whose
// key type is not known yet, and a collation's weights the server was
// slow to give. Schema k20b.

const k20bSchema = "k20b"

var (
	k20bF = &rule{schema: k20bSchema, table: "f", key: "id", algo: "mod", clusters: clusterNames, tables: 1,
		columns: "id INT NOT NULL PRIMARY KEY, n INT NOT NULL"}
	k20bG = &rule{schema: k20bSchema, table: "g", key: "sku", algo: "hash", clusters: clusterNames, tables: 2,
		columns: "sku VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, n INT NOT NULL"}
	k20bLat = &rule{schema: k20bSchema, table: "lat", key: "name", algo: "hash", clusters: clusterNames, tables: 2,
		columns: "name VARCHAR(16) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL PRIMARY KEY, n INT NOT NULL"}
	k20bEv = &rule{schema: k20bSchema, table: "ev", key: "d", algo: "date", dateUnit: "day", clusters: clusterNames, tables: 2,
		columns: "d DATE NOT NULL PRIMARY KEY, n INT NOT NULL"}
	k20bTZ = &rule{schema: k20bSchema, table: "tz", key: "ts", algo: "date", dateUnit: "day", clusters: clusterNames, tables: 2,
		columns: "id INT NOT NULL, ts TIMESTAMP NOT NULL, PRIMARY KEY (id, ts)"}
	// k20bLate's tables are created only after sluice started.
	k20bLate = &rule{schema: k20bSchema, table: "late", key: "sku", algo: "hash", clusters: clusterNames, tables: 2,
		columns: "sku VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, n INT NOT NULL"}
	k20bRules = []*rule{k20bF, k20bG, k20bLat, k20bEv, k20bTZ}
)

var k20bSeed = []string{
	"INSERT INTO f (id, n) VALUES (0, 0), (1, 1), (2, 2), (3, 3), (4, 4)",
	"INSERT INTO g (sku, n) VALUES ('abc', 1), ('0', 2), ('x1', 3), ('-abc', 4), ('7', 5)",
	"INSERT INTO lat (name, n) VALUES ('abc', 1), ('Ã©', 2), ('é', 3), ('Ã¨', 4)",
	"INSERT INTO ev (d, n) VALUES ('2024-01-05', 1), ('1970-01-05', 2), ('2024-01-06', 3), ('2024-01-07', 4), ('2012-12-12', 5)",
}

// k20bSetup creates schema k20b on the clusters and the reference, starts
// a sluice with its rules (and k20bLate's, whose tables do not exist yet),
// loads the seed rows through it and on the reference, and returns the
// sluice's address.
func k20bSetup(t *testing.T) string {
	t.Helper()
	ctx := ctxT(t)
	for name, topo := range env.clusters {
		stmts := []string{"DROP DATABASE IF EXISTS " + k20bSchema, "CREATE DATABASE " + k20bSchema}
		for _, r := range k20bRules {
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
	stmts := []string{"DROP DATABASE IF EXISTS " + k20bSchema, "CREATE DATABASE " + k20bSchema}
	for _, r := range k20bRules {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", r.schema, r.table, r.columns))
	}
	if err := env.ref.Master.Exec(ctx, stmts...); err != nil {
		t.Fatal(err)
	}
	mustExec(t, refDB(t, k20bSchema, false), k20bSeed...)
	for _, tp := range clusterTopos() {
		if err := tp.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[sharding]\ndefault_cluster = %q\nnode_id = 13\n\n", defaultCluster)
	for _, r := range append(k20bRules, k20bLate) {
		b.WriteString(r.toml())
	}
	srv, err := startSluice(named(clusterNames, clusterTopos()), b.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addr().String()
	mustExec(t, conn(t, sluiceDB(t, addr, k20bSchema, false)), k20bSeed...)
	waitReplicated(t)
	return addr
}

// TestKeysAsServerReads: reads by keys the server reads otherwise than
// their text return the reference's rows (text and binary protocol), and
// INSERTs of such keys are refused.
func TestKeysAsServerReads(t *testing.T) {
	addr := k20bSetup(t)
	q := func(sql string) stmt { return stmt{sql: sql, ordered: true} }
	stmts := []stmt{
		// -'' and -'abc' are the number 0 (2.1, 1.6).
		q("SELECT id, n FROM f WHERE id = -''"),
		q("SELECT id, n FROM f WHERE id IN (-'', 4)"),
		q("SELECT sku, n FROM g WHERE sku = -'abc' ORDER BY n"),
		q("SELECT sku, n FROM g WHERE sku = -'-7' ORDER BY n"),
		// 240105 is 2024-01-05 to the server (1.2).
		q("SELECT d, n FROM ev WHERE d = 240105"),
		q("SELECT d, n FROM ev WHERE d = 700105"),
		q("SELECT d, n FROM ev WHERE d = 121212"),
		q("SELECT d, n FROM ev WHERE d = 240107000000"),
		q("SELECT d, n FROM ev WHERE d = 20240106"),
		q("SELECT d, n FROM ev WHERE d = '24-01-05'"),
		q("SELECT d, n FROM ev WHERE d = '2024-1-6'"),
		q("SELECT d, n FROM ev WHERE d = '2024/01/07'"),
		// _binary's bytes against latin1 ones (1.10).
		q("SELECT name, n FROM lat WHERE name = _binary'é'"),
		q("SELECT name, n FROM lat WHERE name = _binary'è'"),
		q("SELECT name, n FROM lat WHERE name = 'é' ORDER BY n"),
	}
	for _, binary := range []bool{false, true} {
		sl := conn(t, sluiceDB(t, addr, k20bSchema, binary))
		ref := conn(t, refDB(t, k20bSchema, binary))
		for _, s := range stmts {
			if got, want := run(ctxT(t), sl, s), run(ctxT(t), ref, s); !same(got, want) {
				t.Errorf("binary=%v: %s\n sluice:    %v\n reference: %v", binary, s.sql, got, want)
			}
		}
	}
	sl := conn(t, sluiceDB(t, addr, k20bSchema, false))
	for _, c := range []struct {
		sql   string
		names []string
	}{
		{"INSERT INTO f (id, n) VALUES (-'', 9)", []string{"k20b.f", "id"}},
		{"INSERT INTO g (sku, n) VALUES (-'abc', 9)", []string{"k20b.g", "sku"}},
		{"INSERT INTO ev (d, n) VALUES (240108, 9)", []string{"k20b.ev", "240108"}},
		{"INSERT INTO lat (name, n) VALUES (_binary'ü', 9)", []string{"k20b.lat", "_binary"}},
	} {
		_, err := sl.ExecContext(ctxT(t), c.sql)
		checkErr(t, "a key sluice cannot place", c.sql, err, 1366, c.names...)
	}
	// A TIMESTAMP date key names a day that depends on the session's
	// time_zone: the rule is refused (1.3).
	for _, s := range []string{"INSERT INTO tz (id, ts) VALUES (1, '2024-01-05 23:30:00')", "SELECT id FROM tz WHERE ts = '2024-01-05 23:30:00'"} {
		_, err := sl.ExecContext(ctxT(t), s)
		checkErr(t, "a date rule on a TIMESTAMP key", s, err, 1235, "k20b.tz", "TIMESTAMP", "time_zone")
	}
}

// TestHashKeyUnknownRefusesIntegers: while a hash rule's key column type
// is not known (its tables were created after sluice started), an INSERT
// of an integer key is refused, not placed by its text; once the column
// turns out to be a _ci string, every key inserted is found (1.5).
func TestHashKeyUnknownRefusesIntegers(t *testing.T) {
	addr := k20bSetup(t)
	sl := conn(t, sluiceDB(t, addr, k20bSchema, false))
	for name, topo := range env.clusters {
		var stmts []string
		for s := range k20bLate.shards() {
			if k20bLate.cluster(s) == name {
				stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", k20bLate.schema, k20bLate.physical(s), k20bLate.columns))
			}
		}
		if err := topo.Master.Exec(ctxT(t), stmts...); err != nil {
			t.Fatal(err)
		}
	}
	inserted := map[int]bool{}
	refused := 0
	for k := 10; k < 20; k++ {
		q := fmt.Sprintf("INSERT INTO late (sku, n) VALUES (%d, 1)", k)
		_, err := sl.ExecContext(ctxT(t), q)
		if err == nil {
			inserted[k] = true
			continue
		}
		refused++
		checkErr(t, "an integer key while the key type is unknown", q, err, 1235, "k20b.late", "not known yet")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := sl.ExecContext(ctxT(t), "INSERT INTO late (sku, n) VALUES ('abc', 1)")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late key column was not learnt in 30 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d integer INSERTs refused before the key column was learnt", refused)
	for k := 10; k < 20; k++ {
		want := 0
		if inserted[k] {
			want = 1
		}
		if n := countRows(t, sl, "late", "sku = ?", fmt.Sprint(k)); n != want {
			t.Errorf("late: sku = '%d' found %d rows, want %d (its INSERT succeeded: %v)", k, n, want, inserted[k])
		}
	}
}

// TestWeightsLearntAfterTransientFailure: when the query that learns a
// key collation's weights fails (here: the masters' max_join_size refuses
// its 65,536-row scan, as a slow or loaded server's timeout would), the
// rule is not refused for good: INSERTs wait for the weights (1235 "not
// known yet") and succeed once a retry learns them (3.1).
func TestWeightsLearntAfterTransientFailure(t *testing.T) {
	const schema = "k20bw"
	r := &rule{schema: schema, table: "w", key: "sku", algo: "hash", clusters: clusterNames, tables: 1,
		columns: "sku VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY, n INT NOT NULL"}
	for _, topo := range env.clusters {
		if err := topo.Master.Exec(ctxT(t), "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema,
			fmt.Sprintf("CREATE TABLE %s.%s (%s)", schema, r.physical(0), r.columns)); err != nil {
			t.Fatal(err)
		}
	}
	setJoinSize := func(v string) {
		for _, topo := range env.clusters {
			if err := topo.Master.Exec(ctxT(t), "SET GLOBAL max_join_size = "+v); err != nil {
				t.Fatal(err)
			}
		}
	}
	setJoinSize("1000")
	t.Cleanup(func() { setJoinSize("DEFAULT") })
	srv, err := startSluice(named(clusterNames, clusterTopos()),
		fmt.Sprintf("[sharding]\ndefault_cluster = %q\nnode_id = 14\n\n%s", defaultCluster, r.toml()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	setJoinSize("DEFAULT")
	sl := conn(t, sluiceDB(t, srv.Addr().String(), schema, false))
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := sl.ExecContext(ctxT(t), "INSERT INTO w (sku, n) VALUES ('Abc ', 1)")
		if err == nil {
			break
		}
		if me := mysqlErr(err); me == nil || me.Number != 1235 || !strings.Contains(me.Message, "not known yet") {
			t.Fatalf("INSERT before the weights are learnt: %v, want 1235 (not known yet) until a retry learns them", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rule's key collation was not learnt in 30 s after the masters could answer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := countRows(t, sl, "w", "sku = 'aBC'"); n != 1 {
		t.Errorf("sku = 'aBC' found %d rows, want 1", n)
	}
}
