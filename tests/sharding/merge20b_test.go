package sharding

import (
	"fmt"
	"strings"
	"testing"
)

// The hostile review's merge findings on issue 20 (1.7: FLOAT compared by
// its rounded text; 3.2: LIMIT 18446744073709551615) run against a sluice
// of their own whose rule covers m20b.f, laid out on the shared clusters
// and, as a logical table, on the reference server.

const m20bSchema = "m20b"

var m20bF = &rule{schema: m20bSchema, table: "f", key: "id", algo: "mod", clusters: clusterNames, tables: 1,
	columns: "id INT NOT NULL PRIMARY KEY, x FLOAT NULL, d DOUBLE NULL, e ENUM('b','a','c') NULL, g INT NULL, uu UUID NULL"}

// m20bSeed puts 1.0000002, 1.0000001 and 1, which the server prints alike
// as "1", on different shards.
var m20bSeed = "INSERT INTO f (id, x, d, e, g) VALUES (1, 1.0000002, 0.1, 'a', 1), (2, 1.0000001, 0.2, 'b', 1), " +
	"(3, 1, 0.3, 'c', 2), (4, 2, 1e16, NULL, 2), (5, NULL, NULL, 'a', 3), (6, 1.0000001, 0.2, 'b', 3)"

func m20bSetup(t *testing.T) string {
	t.Helper()
	ctx := ctxT(t)
	for name, topo := range env.clusters {
		stmts := []string{"DROP DATABASE IF EXISTS " + m20bSchema, "CREATE DATABASE " + m20bSchema}
		for s := range m20bF.shards() {
			if m20bF.cluster(s) == name {
				stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", m20bSchema, m20bF.physical(s), m20bF.columns))
			}
		}
		if err := topo.Master.Exec(ctx, stmts...); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.ref.Master.Exec(ctx, "DROP DATABASE IF EXISTS "+m20bSchema, "CREATE DATABASE "+m20bSchema,
		fmt.Sprintf("CREATE TABLE %s.f (%s)", m20bSchema, m20bF.columns)); err != nil {
		t.Fatal(err)
	}
	mustExec(t, refDB(t, m20bSchema, false), m20bSeed)
	for _, tp := range clusterTopos() {
		if err := tp.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := startSluice(named(clusterNames, clusterTopos()),
		fmt.Sprintf("[sharding]\ndefault_cluster = %q\n\n%s", defaultCluster, m20bF.toml()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addr().String()
	mustExec(t, conn(t, sluiceDB(t, addr, m20bSchema, false)), m20bSeed)
	waitReplicated(t)
	return addr
}

// m20bCompare runs stmts through sluice and on the reference, in the text
// and the binary protocol (or in those given), and reports every
// difference.
func m20bCompare(t *testing.T, addr string, stmts []stmt, protocols ...bool) {
	t.Helper()
	if protocols == nil {
		protocols = []bool{false, true}
	}
	for _, binary := range protocols {
		sl := conn(t, sluiceDB(t, addr, m20bSchema, binary))
		ref := conn(t, refDB(t, m20bSchema, binary))
		for _, s := range stmts {
			got, want := run(ctxT(t), sl, s), run(ctxT(t), ref, s)
			if !same(got, want) {
				t.Errorf("binary=%v: %s %v\n sluice:    %v\n reference: %v", binary, s.sql, s.args, got, want)
			}
		}
	}
}

// TestMerge20bFloatExact is finding 1.7: a FLOAT column is ordered,
// grouped and told apart by its exact value, not by the 6 significant
// digits the server prints.
func TestMerge20bFloatExact(t *testing.T) {
	addr := m20bSetup(t)
	q := func(sql string) stmt { return stmt{sql: sql, ordered: true} }
	u := func(sql string) stmt { return stmt{sql: sql} }
	m20bCompare(t, addr, []stmt{
		u("SELECT x, COUNT(*) FROM f GROUP BY x"),
		q("SELECT x, COUNT(*) FROM f GROUP BY x ORDER BY x DESC"),
		u("SELECT DISTINCT x FROM f"),
		u("SELECT DISTINCT x, g FROM f"),
		q("SELECT id, x FROM f ORDER BY x, id"),
		q("SELECT id FROM f ORDER BY x LIMIT 1"),
		q("SELECT id FROM f ORDER BY x DESC, id LIMIT 3"),
		q("SELECT id FROM f ORDER BY x, id LIMIT 2"),
		q("SELECT MIN(x), MAX(x) FROM f"),
		q("SELECT g, MIN(x), MAX(x) FROM f GROUP BY g ORDER BY g"),
		// DOUBLE prints exactly and needs nothing more.
		u("SELECT d, COUNT(*) FROM f GROUP BY d"),
		q("SELECT id FROM f ORDER BY d, id"),
		// DISTINCT of an ENUM now compares its position: still its value.
		u("SELECT DISTINCT e FROM f"),
		q("SELECT DISTINCT e FROM f ORDER BY e"),
	})
	// A FLOAT expression has no exact value beside it: refused, not
	// compared by its rounded text.
	sl := conn(t, sluiceDB(t, addr, m20bSchema, false))
	got := run(ctxT(t), sl, stmt{sql: "SELECT id FROM f ORDER BY COALESCE(x), id"})
	if errCode(got.err) != 1235 || !strings.Contains(got.err.Error(), "FLOAT") {
		t.Errorf("ORDER BY a FLOAT expression: got %v, want error 1235 naming FLOAT", got)
	}
	// DISTINCT gives each column its e+0, which a UUID has not: refused,
	// as ORDER BY and GROUP BY of one are.
	got = run(ctxT(t), sl, stmt{sql: "SELECT DISTINCT uu FROM f"})
	if errCode(got.err) != 1235 || !strings.Contains(got.err.Error(), "DISTINCT") {
		t.Errorf("DISTINCT a UUID column: got %v, want error 1235 naming DISTINCT", got)
	}
}

// TestMerge20bLimitToTheEnd is finding 3.2: LIMIT 18446744073709551615,
// the documented idiom for "to the end", and any count or offset up to
// 2^64-1, as text or as parameters, answer as on the server.
func TestMerge20bLimitToTheEnd(t *testing.T) {
	addr := m20bSetup(t)
	q := func(sql string, args ...any) stmt { return stmt{sql: sql, args: args, ordered: true} }
	const max64 = "18446744073709551615"
	m20bCompare(t, addr, []stmt{
		q("SELECT id FROM f ORDER BY id LIMIT " + max64),
		q("SELECT id FROM f ORDER BY id LIMIT 2, " + max64),
		q("SELECT id FROM f ORDER BY id LIMIT " + max64 + " OFFSET 3"),
		q("SELECT id FROM f ORDER BY id LIMIT 1 OFFSET " + max64),
		q("SELECT id FROM f ORDER BY id LIMIT " + max64 + " OFFSET " + max64),
		q("SELECT id FROM f ORDER BY id LIMIT 4611686018427387905"),
		q("SELECT g, COUNT(*) FROM f GROUP BY g ORDER BY g LIMIT " + max64),
		q("SELECT g, COUNT(*) FROM f GROUP BY g ORDER BY g LIMIT 1 OFFSET " + max64),
		q("SELECT id FROM f ORDER BY id LIMIT ?, ?", uint64(1), uint64(1<<64-1)),
		q("SELECT id FROM f ORDER BY id LIMIT ?, ?", uint64(1<<64-1), uint64(2)),
	})
	// A negative parameter is read as unsigned, a NULL one as 0 (in the
	// text protocol they are written into the text: a syntax error).
	m20bCompare(t, addr, []stmt{
		q("SELECT id FROM f ORDER BY id LIMIT ?, ?", int64(-1), int64(2)),
		q("SELECT id FROM f ORDER BY id LIMIT ?, ?", int64(1), int64(-2)),
		q("SELECT id FROM f ORDER BY id LIMIT ?, ?", int64(1), "-1"),
		q("SELECT id FROM f ORDER BY id LIMIT ?, ?", nil, int64(2)),
		q("SELECT id FROM f ORDER BY id LIMIT ?, ?", int64(1), nil),
	}, true)
}
