package sharding

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// result is what one statement gave on one side, in comparable form.
type result struct {
	cols     []string
	rows     []string // each row's values joined by " | ", NULL as ∅
	affected int64
	err      error
}

func (r result) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	if r.rows == nil && r.cols == nil {
		return fmt.Sprintf("OK, %d affected", r.affected)
	}
	const most = 20
	rows := r.rows
	more := ""
	if len(rows) > most {
		rows, more = rows[:most], fmt.Sprintf("\n    ... %d more", len(r.rows)-most)
	}
	return fmt.Sprintf("columns %v, %d rows:\n    %s%s", r.cols, len(r.rows), strings.Join(rows, "\n    "), more)
}

// querier is a *sql.Conn or a *sql.DB.
type querier interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

// run executes s on q; a read's rows are sorted unless s has a total ORDER BY.
func run(ctx context.Context, q querier, s stmt) result {
	if s.write {
		res, err := q.ExecContext(ctx, s.sql, s.args...)
		if err != nil {
			return result{err: err}
		}
		n, err := res.RowsAffected()
		return result{affected: n, err: err}
	}
	rows, err := q.QueryContext(ctx, s.sql, s.args...)
	if err != nil {
		return result{err: err}
	}
	defer rows.Close()
	var r result
	if r.cols, err = rows.Columns(); err != nil {
		return result{err: err}
	}
	r.rows = []string{}
	vals := make([]sql.RawBytes, len(r.cols))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var b strings.Builder
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return result{err: err}
		}
		b.Reset()
		for i, v := range vals {
			if i > 0 {
				b.WriteString(" | ")
			}
			if v == nil {
				b.WriteString("∅")
			} else {
				b.Write(v)
			}
		}
		r.rows = append(r.rows, b.String())
	}
	if err := rows.Err(); err != nil {
		return result{err: err}
	}
	if !s.ordered {
		slices.Sort(r.rows)
	}
	return r
}

// same reports whether sluice's result equals the reference's: both the
// same error number, or the same columns and rows, or the same affected rows.
func same(got, want result) bool {
	if got.err != nil || want.err != nil {
		return got.err != nil && want.err != nil && errCode(got.err) == errCode(want.err) && errCode(got.err) != 0
	}
	return slices.Equal(got.cols, want.cols) && slices.Equal(got.rows, want.rows) && got.affected == want.affected
}

// diffSeed is the generator seed: -shard.seed, SLUICE_SHARD_SEED, or the clock.
func diffSeed(t *testing.T) uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	if v := os.Getenv("SLUICE_SHARD_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_SHARD_SEED=%q: %v", v, err)
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

// diffData is the differential data set, loaded once through sluice and
// into the reference by whichever test needs it first.
var diffData struct {
	once sync.Once
	seed uint64
	err  error
}

// loadDiffData loads the seeded data set through sluice (text protocol) and
// into the reference; it fails t when either side refuses a statement.
func loadDiffData(t *testing.T) uint64 {
	t.Helper()
	diffData.once.Do(func() {
		diffData.seed = diffSeed(t)
		t.Logf("differential seed %d (replay: go test ./tests/sharding -run 'TestDifferential|TestRowsWhereRuleSays' -shard.seed=%d)",
			diffData.seed, diffData.seed)
		g := newGen(diffData.seed)
		ctx := ctxT(t)
		sl := conn(t, sluiceDB(t, env.addr, diffSchema, false))
		ref := conn(t, refDB(t, diffSchema, false))
		for _, s := range g.load() {
			if got, want := run(ctx, sl, s), run(ctx, ref, s); got.err != nil || want.err != nil || got.affected != want.affected {
				diffData.err = fmt.Errorf("loading (seed %d): %s\n  sluice:    %v\n  reference: %v", diffData.seed, clip(s), got, want)
				return
			}
		}
	})
	if diffData.err != nil {
		t.Fatal(diffData.err)
	}
	return diffData.seed
}

// clip shortens a statement for a message.
func clip(s stmt) string {
	txt := s.String()
	if len(txt) > 600 {
		return txt[:600] + " ..."
	}
	return txt
}

// statementsPerProtocol is the workload's length in each protocol.
const statementsPerProtocol = 1500

// TestDifferential runs the same random workload through sluice on the
// sharded layout and straight on the reference, first as text (interpolated
// parameters) then as prepared statements (binary protocol), and requires
// every result to be the same: rows (in order where the statement has a
// total ORDER BY, as a multiset otherwise), column names, affected rows and
// error numbers.
func TestDifferential(t *testing.T) {
	seed := loadDiffData(t)
	ctx := ctxT(t)
	begin := time.Now()
	for i, binary := range []bool{false, true} {
		proto := "text"
		if binary {
			proto = "binary"
		}
		// One session per side, so causal reads see the session's own writes.
		sl := conn(t, sluiceDB(t, env.addr, diffSchema, binary))
		ref := conn(t, refDB(t, diffSchema, binary))
		g := newGen(seed + uint64(i) + 1)
		// Ids beyond the loaded ones: the load's generator went first.
		g.nextOrder, g.nextLog, g.nextItem, g.note = idFirstLoad*2*(int64(i)+1), idFirstLoad*2*(int64(i)+1), itemSpace*(int64(i)+2), notesSpace*(int64(i)+2)
		g.usedEvents = usedEvents(t, ref)
		mismatches := 0
		for n := range statementsPerProtocol {
			s := g.next()
			got, want := run(ctx, sl, s), run(ctx, ref, s)
			if same(got, want) {
				continue
			}
			mismatches++
			t.Errorf("%s protocol, statement %d (seed %d):\n  %s\n  sluice:    %v\n  reference: %v", proto, n, seed, clip(s), got, want)
			if mismatches == 5 {
				t.Fatalf("stopping after %d mismatches (seed %d)", mismatches, seed)
			}
		}
	}
	t.Logf("%d statements per protocol compared in %v (seed %d)", statementsPerProtocol, time.Since(begin).Round(time.Millisecond), seed)
}

// usedEvents returns the event ids the reference holds, so new events do not
// collide with them.
func usedEvents(t *testing.T, ref querier) map[int64]bool {
	t.Helper()
	rows, err := ref.QueryContext(ctxT(t), "SELECT eid FROM events")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	used := map[int64]bool{}
	for rows.Next() {
		var k int64
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		used[k] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return used
}

// TestRowsWhereRuleSays reads every physical table on every cluster master
// (after the differential workload when it ran first, else after the load)
// and checks each row's key against its rule; the broadcast table must be
// the same on both clusters and the unsharded table must exist only on the
// default cluster.
func TestRowsWhereRuleSays(t *testing.T) {
	loadDiffData(t)
	ctx := ctxT(t)
	problems, rows, err := checkPlacement(ctx, allRules(), env.clusters)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	for _, r := range rulesFor(diffSchema) {
		if rows[r.schema+"."+r.table] == 0 {
			t.Errorf("%s.%s: no rows in any physical table, so nothing was checked", r.schema, r.table)
		}
	}
	t.Logf("rows checked per table: %v", rows)

	var copies []string
	for _, name := range clusterNames {
		db, err := env.clusters[name].Master.RootDB()
		if err != nil {
			t.Fatal(err)
		}
		res := run(ctx, db, stmt{sql: "SELECT code, name, region FROM " + diffSchema + ".countries ORDER BY code", ordered: true})
		if res.err != nil {
			t.Fatal(res.err)
		}
		if len(res.rows) != len(countries) {
			t.Errorf("cluster %s: %d broadcast rows, want %d", name, len(res.rows), len(countries))
		}
		copies = append(copies, strings.Join(res.rows, "\n"))
		var n int
		q := "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = 'notes'"
		if err := db.QueryRowContext(ctx, q, diffSchema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[name == defaultCluster]; n != want {
			t.Errorf("cluster %s has %d notes tables, want %d", name, n, want)
		}
	}
	if copies[0] != copies[1] {
		t.Errorf("broadcast table differs between clusters:\n%s:\n%s\n%s:\n%s", clusterNames[0], copies[0], clusterNames[1], copies[1])
	}
	var notes int
	db, err := env.clusters[defaultCluster].Master.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+diffSchema+".notes").Scan(&notes); err != nil || notes < loadNotes {
		t.Errorf("default cluster %s holds %d notes (err %v), want at least the %d loaded", defaultCluster, notes, err, loadNotes)
	}
}
