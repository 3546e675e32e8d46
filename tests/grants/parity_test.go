package grants

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// defaultStatements is the corpus size; defaultShare the share of it each
// account runs (1: all of it).
const (
	defaultStatements = 2000
	defaultShare      = 1.0
	// listLimit is how many differences of each kind the test lists
	// unless verboseEnv is set.
	listLimit = 60
)

// denialCodes are the errors MariaDB 10.11 answers a statement with when
// the account lacks a privilege (errmsg-utf8.txt). A statement is denied on
// a side when its answer is one of them, and allowed otherwise (success, or
// any other error: a missing table, a duplicate key, a syntax error).
var denialCodes = map[uint16]string{
	1044: "ER_DBACCESS_DENIED_ERROR",            // database: USE, CREATE/DROP DATABASE, LOCK TABLES, CREATE TEMPORARY TABLE, CREATE ROUTINE, GRANT without the option
	1045: "ER_ACCESS_DENIED_ERROR",              // also LOAD DATA INFILE without FILE
	1095: "ER_KILL_DENIED_ERROR",                // KILL [QUERY] of another account's thread
	1131: "ER_PASSWORD_ANONYMOUS_USER",          // an anonymous user changing a password
	1132: "ER_PASSWORD_NOT_ALLOWED",             // changing another account's password
	1142: "ER_TABLEACCESS_DENIED_ERROR",         // a table or view privilege
	1143: "ER_COLUMNACCESS_DENIED_ERROR",        // a column privilege
	1211: "ER_NO_PERMISSION_TO_CREATE_USER",     // GRANT creating an account
	1227: "ER_SPECIFIC_ACCESS_DENIED_ERROR",     // a global privilege (FILE, SUPER, PROCESS, CREATE USER, BINLOG ADMIN, ...)
	1345: "ER_VIEW_NO_EXPLAIN",                  // EXPLAIN/SHOW of a view without rights on its tables
	1356: "ER_VIEW_INVALID",                     // an invoker view whose tables the invoker may not read (every view's tables exist here)
	1370: "ER_PROCACCESS_DENIED_ERROR",          // a routine privilege
	1410: "ER_CANT_CREATE_USER_WITH_GRANT",      // GRANT to a missing account
	1419: "ER_BINLOG_CREATE_ROUTINE_NEED_SUPER", // CREATE FUNCTION not DETERMINISTIC without SUPER, binary log on
	1448: "ER_VIEW_OTHER_USER",                  // a view with another definer without SUPER
	1698: "ER_ACCESS_DENIED_NO_PASSWORD_ERROR",  // login
	1873: "ER_ACCESS_DENIED_CHANGE_USER_ERROR",  // COM_CHANGE_USER
	1959: "ER_INVALID_ROLE",                     // SET ROLE of a role not granted to the account
	1979: "ER_KILL_QUERY_DENIED_ERROR",          // KILL QUERY ID of another account's query
}

// denied reports whether a is a privilege denial.
func (a answer) denied() bool {
	_, ok := denialCodes[a.code]
	return ok && a.transport == ""
}

// TestGrantsParity runs the corpus as every account on the reference and on
// the target and compares which statements each denies: the target may
// deny nothing the reference allows beyond 1% of the runs, must deny
// everything the reference denies, with the same error code every time and
// the same message in 99% of the runs both deny.
func TestGrantsParity(t *testing.T) {
	seed := paritySeed(t)
	n := envInt(t, statementsEnv, defaultStatements)
	share := envFloat(t, shareEnv, defaultShare)
	stmts := corpus(seed, n)
	t.Logf("seed %d (replay: %s=%d), %d statements, each account runs a share of %.2f, target %s",
		seed, seedEnv, seed, len(stmts), share, env.target)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := fileDir(t)
	sides := [2]*side{
		{name: "reference", addr: env.ref.Master.Addr(), dir: dir},
		{name: env.target, addr: env.targetAddr, dir: dir},
	}
	for _, sd := range sides {
		db, err := openDB(victim, sd.addr)
		if err != nil {
			t.Fatal(err)
		}
		sd.victim = &victimSession{db: db}
		t.Cleanup(func() {
			sd.victim.drop()
			db.Close()
		})
	}
	start := time.Now()
	records, reconnects := runAccounts(ctx, t, sides, seed, share, stmts)
	t.Logf("%d runs in %v (%d reconnections after transport errors)", len(records), time.Since(start).Round(time.Millisecond), reconnects)
	dump(t, records)
	report(t, tally(records))
}

// dump writes every record to the file dumpEnv names, if any.
func dump(t *testing.T, records []record) {
	path := os.Getenv(dumpEnv)
	if path == "" {
		return
	}
	var b strings.Builder
	for _, r := range records {
		fmt.Fprintf(&b, "%s\t%d\t%s\t%v\t%v\t%s\n", r.acct, r.idx, r.kind, r.ans[0], r.ans[1], r.sql[0])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Errorf("%s: %v", dumpEnv, err)
	}
}

// runAccounts runs every account's share concurrently and returns all
// records, in account order, and the reconnections.
func runAccounts(ctx context.Context, t *testing.T, sides [2]*side, seed uint64, share float64, stmts []stmt) ([]record, int) {
	t.Helper()
	runs := make([][]record, len(runners))
	errs := make([]error, len(runners))
	reconnects := make([]int, len(runners))
	// Every account logs in on both sides before any statement runs.
	rs := make([]*runner, len(runners))
	for i, a := range runners {
		r, err := newRunner(ctx, a, sides)
		if err != nil {
			for _, r := range rs[:i] {
				r.close()
			}
			t.Fatal(err)
		}
		rs[i] = r
	}
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() {
			defer r.close()
			runs[i], errs[i] = r.runAll(ctx, seed, share, stmts)
			reconnects[i] = r.reconnects
		})
	}
	wg.Wait()
	var all []record
	total := 0
	for i := range runners {
		if errs[i] != nil {
			t.Fatalf("%s: %v", runners[i].name, errs[i])
		}
		all = append(all, runs[i]...)
		total += reconnects[i]
	}
	return all, total
}

// counts are the totals of one row of the report.
type counts struct {
	runs, allowBoth, denyBoth int
	targetAllows              int // the target allows, the reference denies (a)
	targetDenies              int // the reference allows, the target denies (b)
	codeDiff, textDiff        int // among denyBoth (c)
	refAllow, refDeny         int // the reference's own answers
	transport                 int
}

// tallied is a run's totals and the differences to list.
type tallied struct {
	all                counts
	byAccount, byKind  map[string]*counts
	targetAllows       []record // (a)
	targetDenies       []record // (b)
	codeDiff, textDiff []record // (c)
	transport          []record
	deniedCodes        map[uint16]int // (c) by the reference's code
}

// outcome names how the two sides' answers to one run compare.
type outcome int

const (
	allowBoth    outcome = iota
	denyBoth             // (c)
	targetAllows         // (a): the reference denies, the target allows
	targetDenies         // (b): the reference allows, the target denies
	transport            // either side failed without a server's answer
)

// outcomeOf compares r's two answers.
func outcomeOf(r record) outcome {
	ref, tgt := r.ans[0], r.ans[1]
	switch {
	case ref.transport != "" || tgt.transport != "":
		return transport
	case ref.denied() && tgt.denied():
		return denyBoth
	case ref.denied():
		return targetAllows
	case tgt.denied():
		return targetDenies
	default:
		return allowBoth
	}
}

// add counts r, whose outcome is o.
func (c *counts) add(r record, o outcome) {
	c.runs++
	switch o {
	case allowBoth:
		c.allowBoth++
	case denyBoth:
		c.denyBoth++
		if r.ans[0].code != r.ans[1].code {
			c.codeDiff++
		}
		if r.norms[0] != r.norms[1] {
			c.textDiff++
		}
	case targetAllows:
		c.targetAllows++
	case targetDenies:
		c.targetDenies++
	case transport:
		c.transport++
	}
	if r.ans[0].denied() {
		c.refDeny++
	} else {
		c.refAllow++
	}
}

func tally(records []record) *tallied {
	tl := &tallied{byAccount: map[string]*counts{}, byKind: map[string]*counts{}, deniedCodes: map[uint16]int{}}
	for _, r := range records {
		o := outcomeOf(r)
		for _, c := range []*counts{&tl.all, row(tl.byAccount, r.acct), row(tl.byKind, r.kind)} {
			c.add(r, o)
		}
		switch o {
		case denyBoth:
			tl.deniedCodes[r.ans[0].code]++
			if r.ans[0].code != r.ans[1].code {
				tl.codeDiff = append(tl.codeDiff, r)
			}
			if r.norms[0] != r.norms[1] {
				tl.textDiff = append(tl.textDiff, r)
			}
		case targetAllows:
			tl.targetAllows = append(tl.targetAllows, r)
		case targetDenies:
			tl.targetDenies = append(tl.targetDenies, r)
		case transport:
			tl.transport = append(tl.transport, r)
		}
	}
	return tl
}

func row(m map[string]*counts, k string) *counts {
	c := m[k]
	if c == nil {
		c = &counts{}
		m[k] = c
	}
	return c
}

// report logs the totals and the differences and fails the test on a
// difference the rules do not allow.
func report(t *testing.T, tl *tallied) {
	t.Helper()
	a := tl.all
	tgt := env.target
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-44s %7d\n", "runs (statement x account)", a.runs)
	fmt.Fprintf(&b, "%-44s %7d\n", "both allow", a.allowBoth)
	fmt.Fprintf(&b, "%-44s %7d   code equal %d, text equal %d (%s)\n", "both deny (c)", a.denyBoth,
		a.denyBoth-a.codeDiff, a.denyBoth-a.textDiff, pct(a.denyBoth-a.textDiff, a.denyBoth))
	fmt.Fprintf(&b, "%-44s %7d   (must be 0)\n", "(a) "+tgt+" allows, reference denies", a.targetAllows)
	fmt.Fprintf(&b, "%-44s %7d   (%s of runs, at most 1%%)\n", "(b) reference allows, "+tgt+" denies", a.targetDenies, pct(a.targetDenies, a.runs))
	fmt.Fprintf(&b, "%-44s %7d   (must be 0)\n", "transport errors (either side)", a.transport)
	fmt.Fprintf(&b, "reference: %d allowed, %d denied; denial codes both sides gave: %s\n", a.refAllow, a.refDeny, codeList(tl.deniedCodes))
	b.WriteString("\nallow, deny: both sides; refdeny: the reference denies; (a), (b): as above; code≠, text≠: among both deny\n")
	b.WriteString(table("account", tl.byAccount))
	b.WriteString(table("kind", tl.byKind))
	t.Log(b.String())

	list(t, "(a) "+tgt+" allows, reference denies", tl.targetAllows)
	list(t, "(b) reference allows, "+tgt+" denies", tl.targetDenies)
	list(t, "(c) both deny, different codes", tl.codeDiff)
	list(t, "(c) both deny, different texts", tl.textDiff)
	list(t, "transport errors", tl.transport)

	// The harness itself: every account is allowed something and denied
	// something on the reference, or the fixture is not what it claims.
	for _, acct := range runners {
		c := tl.byAccount[acct.name]
		if c == nil || c.refAllow == 0 || c.refDeny == 0 {
			t.Errorf("%s: the reference allowed %d and denied %d of its statements: the fixture or the corpus is broken", acct.name, orZero(c).refAllow, orZero(c).refDeny)
		}
	}
	if a.targetAllows > 0 {
		t.Errorf("%d runs that %s allows and the reference denies (must be 0)", a.targetAllows, tgt)
	}
	if a.targetDenies*100 > a.runs {
		t.Errorf("%d runs (%s) that the reference allows and %s denies: more than 1%%", a.targetDenies, pct(a.targetDenies, a.runs), tgt)
	}
	if a.codeDiff > 0 {
		t.Errorf("%d runs both deny with different error codes (must be 0)", a.codeDiff)
	}
	if a.textDiff*100 > a.denyBoth {
		t.Errorf("%d of %d runs both deny with different texts: under 99%% equal", a.textDiff, a.denyBoth)
	}
	if a.transport > 0 {
		t.Errorf("%d runs with a transport error", a.transport)
	}
}

func orZero(c *counts) counts {
	if c == nil {
		return counts{}
	}
	return *c
}

// table formats per-key totals.
func table(title string, m map[string]*counts) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-16s %6s %6s %6s %6s %6s %6s %6s %6s %6s\n", title, "runs", "allow", "deny", "refdeny", "(a)", "(b)", "code≠", "text≠", "transp")
	for _, k := range keys {
		c := m[k]
		fmt.Fprintf(&b, "%-16s %6d %6d %6d %6d %6d %6d %6d %6d %6d\n", k, c.runs, c.allowBoth, c.denyBoth, c.refDeny,
			c.targetAllows, c.targetDenies, c.codeDiff, c.textDiff, c.transport)
	}
	return b.String()
}

// list logs the records of one kind of difference, all of them under
// verboseEnv, else the first listLimit.
func list(t *testing.T, title string, rs []record) {
	t.Helper()
	if len(rs) == 0 {
		return
	}
	n := len(rs)
	if os.Getenv(verboseEnv) == "" {
		n = min(n, listLimit)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d\n", title, len(rs))
	for _, r := range rs[:n] {
		fmt.Fprintf(&b, "  #%d %s: %s\n", r.idx, r.acct, r.sql[0])
		if r.sql[1] != r.sql[0] {
			fmt.Fprintf(&b, "      (%s: %s)\n", env.target, r.sql[1])
		}
		fmt.Fprintf(&b, "      reference: %v\n      %s: %v\n", r.ans[0], env.target, r.ans[1])
	}
	if n < len(rs) {
		fmt.Fprintf(&b, "  ... %d more (%s=1 lists them all)\n", len(rs)-n, verboseEnv)
	}
	t.Log(b.String())
}

func codeList(m map[uint16]int) string {
	codes := make([]int, 0, len(m))
	for c := range m {
		codes = append(codes, int(c))
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d×%d", c, m[uint16(c)]))
	}
	return strings.Join(parts, " ")
}

func pct(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", float64(n)*100/float64(of))
}

// paritySeed is -grants.seed, seedEnv, or the clock.
func paritySeed(t *testing.T) uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	if v := os.Getenv(seedEnv); v != "" && v != "0" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, v, err)
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func envFloat(t *testing.T, name string, def float64) float64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1 {
		t.Fatalf("%s=%q: want a number in (0, 1]", name, v)
	}
	return f
}

// fileDir makes the directory INTO OUTFILE writes to and LOAD DATA reads
// from (the servers run on this host), with the file to load, and removes
// it, with every file the servers wrote there, when the test ends.
func fileDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "sluice-grants-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The servers may run as another user than the test.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(loadFile(dir), []byte(loadRows), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
