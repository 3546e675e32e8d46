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
	types    []string // type name(precision,scale) per column, when the statement compares types
	rows     []string // each row's values joined by " | ", NULL as ∅; collation columns as weights
	shown    []string // the rows as the server sent them, for messages
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
	rows := r.shown
	more := ""
	if len(rows) > most {
		rows, more = rows[:most], fmt.Sprintf("\n    ... %d more", len(r.shown)-most)
	}
	types := ""
	if r.types != nil {
		types = fmt.Sprintf(", types %v", r.types)
	}
	return fmt.Sprintf("columns %v%s, %d rows:\n    %s%s", r.cols, types, len(r.shown), strings.Join(rows, "\n    "), more)
}

// querier is a *sql.Conn or a *sql.DB.
type querier interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

// run executes s on q; a read's rows are sorted unless s has a total ORDER BY.
func run(ctx context.Context, q querier, s stmt) result { return runWith(ctx, q, s, nil) }

// runWith is run that, when w is not nil, replaces the values of s.colls's
// columns by their collation weights from w before sorting, so two spellings
// of one group compare equal.
func runWith(ctx context.Context, q querier, s stmt, w *weigher) result {
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
	if s.types {
		cts, err := rows.ColumnTypes()
		if err != nil {
			return result{err: err}
		}
		for _, ct := range cts {
			p, sc, _ := ct.DecimalSize()
			r.types = append(r.types, fmt.Sprintf("%s(%d,%d)", ct.DatabaseTypeName(), p, sc))
		}
	}
	type row struct{ key, shown string }
	var all []row
	vals := make([]sql.RawBytes, len(r.cols))
	ptrs := make([]any, len(vals))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var b, k strings.Builder
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return result{err: err}
		}
		b.Reset()
		k.Reset()
		for i, v := range vals {
			if i > 0 {
				b.WriteString(" | ")
				k.WriteString(" | ")
			}
			if v == nil {
				b.WriteString("∅")
				k.WriteString("∅")
				continue
			}
			b.Write(v)
			if coll, ok := s.colls[i]; ok && w != nil {
				wt, err := w.weight(ctx, coll, string(v))
				if err != nil {
					return result{err: err}
				}
				k.WriteString(wt)
			} else {
				k.Write(v)
			}
		}
		all = append(all, row{k.String(), b.String()})
	}
	if err := rows.Err(); err != nil {
		return result{err: err}
	}
	if !s.ordered {
		slices.SortFunc(all, func(x, y row) int { return strings.Compare(x.key, y.key) })
	}
	r.rows, r.shown = make([]string, len(all)), make([]string, len(all))
	for i, x := range all {
		r.rows[i], r.shown[i] = x.key, x.shown
	}
	return r
}

// weigher turns text values into the reference server's collation weights
// (of the value without trailing spaces: every collation the workload
// weighs pads with spaces), so the test never decides in Go which strings
// a collation holds equal. It is used by one goroutine.
type weigher struct {
	db    *sql.DB
	cache map[string]string
}

func newWeigher(db *sql.DB) *weigher { return &weigher{db: db, cache: map[string]string{}} }

// weight is v's weight under coll, or a constant for anyValue.
func (w *weigher) weight(ctx context.Context, coll, v string) (string, error) {
	if coll == anyValue {
		return "(any)", nil
	}
	key := coll + "\x00" + v
	if h, ok := w.cache[key]; ok {
		return h, nil
	}
	cs, _, _ := strings.Cut(coll, "_")
	var h sql.NullString
	q := fmt.Sprintf("SELECT HEX(WEIGHT_STRING(CONVERT(RTRIM(?) USING %s) COLLATE %s))", cs, coll)
	if err := w.db.QueryRowContext(ctx, q, v).Scan(&h); err != nil {
		return "", fmt.Errorf("weight of %q under %s: %w", v, coll, err)
	}
	wt := "≈" + h.String
	w.cache[key] = wt
	return wt, nil
}

// same reports whether sluice's result equals the reference's: both the
// same error number, or the same columns (and types, where compared) and
// rows, or the same affected rows.
func same(got, want result) bool {
	if got.err != nil || want.err != nil {
		return got.err != nil && want.err != nil && errCode(got.err) == errCode(want.err) && errCode(got.err) != 0
	}
	return slices.Equal(got.cols, want.cols) && slices.Equal(got.types, want.types) &&
		slices.Equal(got.rows, want.rows) && got.affected == want.affected
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
		t.Logf("differential seed %d (replay: go test ./tests/sharding -run 'TestDifferential|TestRowsWhereRuleSays' -shard.seed=%d; SLUICE_SHARD_ONLY=%q)",
			diffData.seed, diffData.seed, os.Getenv("SLUICE_SHARD_ONLY"))
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
const statementsPerProtocol = 2500

// maxMismatches is where a run stops, having shown enough:
// SLUICE_SHARD_MAX_MISMATCHES, 10 unless set (a survey of every category
// against unfinished code wants more).
func maxMismatches(t *testing.T) int {
	v := os.Getenv("SLUICE_SHARD_MAX_MISMATCHES")
	if v == "" {
		return 10
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("SLUICE_SHARD_MAX_MISMATCHES=%q: want a positive number", v)
	}
	return n
}

// onlyCategories is the set SLUICE_SHARD_ONLY names (comma-separated
// category names), nil for every category.
func onlyCategories(t *testing.T) map[string]bool {
	v := strings.TrimSpace(os.Getenv("SLUICE_SHARD_ONLY"))
	if v == "" {
		return nil
	}
	only := map[string]bool{}
	var known []string
	for _, c := range categories {
		known = append(known, c.name)
	}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(known, n) {
			t.Fatalf("SLUICE_SHARD_ONLY=%q: no category %q (categories: %s)", v, n, strings.Join(known, ","))
		}
		only[n] = true
	}
	return only
}

// tagCount is how often a refusal tag's statements ran and were refused.
type tagCount struct {
	total, refused           int
	answerable, answerRefuse int
}

// TestDifferential runs the same random workload through sluice on the
// sharded layout and straight on the reference, first as text (interpolated
// parameters) then as prepared statements (binary protocol), and requires
// every result to be the same: rows (in order where the statement has a
// total ORDER BY, as a multiset otherwise; columns whose spelling the
// server picks from any row of a group by their collation weight), column
// names, column types where the statement asks, affected rows and error
// numbers. A statement tagged with a documented refusal may get that
// refusal from sluice instead (the reference then does not run it, so a
// refused write changes neither side); the refusals are counted per tag,
// and a tag whose statements that one shard could answer were all refused
// fails. SLUICE_SHARD_ONLY=old,collation,... limits the categories.
func TestDifferential(t *testing.T) {
	seed := loadDiffData(t)
	only := onlyCategories(t)
	ctx := ctxT(t)
	begin := time.Now()
	w := newWeigher(refDB(t, diffSchema, false))
	tags := map[string]*tagCount{}
	perCat := map[string]int{}
	mismatches, skipped, most := 0, 0, maxMismatches(t)
	for i, binary := range []bool{false, true} {
		proto := "text"
		if binary {
			proto = "binary"
		}
		// One session per side, so causal reads see the session's own writes.
		sl := conn(t, sluiceDB(t, env.addr, diffSchema, binary))
		ref := conn(t, refDB(t, diffSchema, binary))
		g := newGen(seed + uint64(i) + 1)
		g.only = only
		// Ids beyond the loaded ones: the load's generator went first.
		g.nextOrder, g.nextLog, g.nextItem, g.note = idFirstLoad*2*(int64(i)+1), idFirstLoad*2*(int64(i)+1), itemSpace*(int64(i)+2), notesSpace*(int64(i)+2)
		g.nextPid = idFirstLoad * 2 * (int64(i) + 1)
		g.usedEvents = usedEvents(t, ref)
		g.people = knownPeople(t, ref)
		if err := ref.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&g.baseMode); err != nil {
			t.Fatal(err)
		}
		prevRefused := false
		for n := range statementsPerProtocol {
			s := g.next()
			if s.afterPrev && prevRefused {
				skipped++
				continue
			}
			prevRefused = false
			got := runWith(ctx, sl, s, w)
			if s.tag != "" {
				tc := tags[s.tag]
				if tc == nil {
					tc = &tagCount{}
					tags[s.tag] = tc
				}
				tc.total++
				if s.answerable {
					tc.answerable++
				}
				if errCode(got.err) == refusalCodes[s.tag] {
					tc.refused++
					if s.answerable {
						tc.answerRefuse++
					}
					prevRefused = true
					continue
				}
			}
			perCat[s.cat]++
			want := runWith(ctx, ref, s, w)
			if same(got, want) {
				continue
			}
			mismatches++
			what := s.cat
			if s.tag != "" {
				what += ", may be refused as " + s.tag
			}
			if s.session != "" {
				what += ", in a session after " + s.session
			}
			t.Errorf("%s protocol, statement %d [%s] (seed %d):\n  %s\n  sluice:    %v\n  reference: %v", proto, n, what, seed, clip(s), got, want)
			if mismatches == most {
				t.Fatalf("stopping after %d mismatches (seed %d; replay with -shard.seed=%d SLUICE_SHARD_ONLY=%q)",
					mismatches, seed, seed, os.Getenv("SLUICE_SHARD_ONLY"))
			}
		}
	}
	names := make([]string, 0, len(tags))
	for name := range tags {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		tc := tags[name]
		t.Logf("tag %s: %d statements, %d refused with %d (%d of them could reach one shard, %d of those refused)",
			name, tc.total, tc.refused, refusalCodes[name], tc.answerable, tc.answerRefuse)
		if tc.answerable > 0 && tc.answerRefuse == tc.answerable {
			t.Errorf("tag %s: all %d statements that reach one shard were refused; they must be answered", name, tc.answerable)
		}
	}
	t.Logf("statements compared per category: %v; %d skipped after a refusal", perCat, skipped)
	t.Logf("%d statements per protocol in %v (seed %d)", statementsPerProtocol, time.Since(begin).Round(time.Millisecond), seed)
}

// knownPeople returns the people rows the reference holds (pid and name),
// so the workload can insert collation-equal duplicates of them.
func knownPeople(t *testing.T, ref querier) []person {
	t.Helper()
	rows, err := ref.QueryContext(ctxT(t), "SELECT pid, name FROM people ORDER BY pid")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ps []person
	for rows.Next() {
		var p person
		if err := rows.Scan(&p.pid, &p.name); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ps
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
	// Collation-equal hash keys are one key unless SLUICE_SHARD_ONLY
	// leaves out both categories that test them.
	only := onlyCategories(t)
	byCollation := only == nil || only["collation"] || only["keys"]
	problems, rows, err := checkPlacement(ctx, allRules(), env.clusters, byCollation)
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
