package tests

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// fuzzDefaultSeed is the seed without SLUICE_FUZZ_SEED.
const fuzzDefaultSeed = 18

var (
	fuzzCharsets = []string{"utf8mb4", "latin1", "gbk", "sjis", "big5"}
	// "" keeps the server's sql_mode.
	fuzzModes = []string{"", "ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "PIPES_AS_CONCAT", "ANSI", "ORACLE"}

	// fuzzEffects each change data when MariaDB runs them.
	fuzzEffects = []string{
		"NEXTVAL(s)", "nextval(s)", "NEXTVAL(rw18.s)", "NEXT VALUE FOR s", "s.nextval", "rw18.s.nextval",
		"f_ins('z')", "F_INS('z')", "rw18.f_ins('z')", "f_ins(\"z\")", "f_lie('z')", "f_ret('z')",
	}

	// fuzzOdd are bytes the two lexers may read differently: 0x85 and 0xA0
	// (whitespace to a Unicode-minded lexer), UTF-8 NBSP and friends,
	// gbk/sjis/big5 double-byte characters whose trail byte is 0x5C (a
	// backslash to an ASCII lexer), lone lead bytes, control characters.
	fuzzOdd = []string{
		"\x85", "\xa0", "\xc2\xa0", "\xc2\x85", "\x85\x40", "\x85\x5c",
		"\x95\x5c", "\x81\x5c", "\x83\x5c", "\x94\x5c", "\xa5\x5c", "\xb3\x5c",
		"\xe3\x80\x80", "\xe2\x80\xa8", "\x5c", "\x0b", "\x0c", "\x1a", "\xff", "\x81",
	}

	// fuzzTemplates place %E (a side effect) where one lexer may see a
	// comment or a string and the other code; %O is one odd byte string
	// from fuzzOdd (the same one throughout a statement).
	fuzzTemplates = []string{
		`/*T! SELECT 'x */ SELECT %E /*' */`,
		`/*T![clustered_index] SELECT 'x */ SELECT %E /*' */`,
		`SELECT 1 /*T! , 'x */ , %E /*' */`,
		`SELECT 1 /*T![auto_rand] , 'x */ , %E /*' */`,
		`/*T! SELECT 'x */ INSERT INTO w (tag) VALUES ('t') /*' */`,
		`SELECT 1 /*!, %E */`,
		`SELECT 1 /*!50001 , %E */`,
		`SELECT 1 /*!99999 , 'x */ , %E /*' */`,
		`SELECT 1 /*M!, %E */`,
		`SELECT 1 /*M!100100 , %E */`,
		`SELECT 1 /*M!999999 , 'x */ , %E /*' */`,
		`/*M! SELECT 'x */ SELECT %E /*' */`,
		"SELECT 1 --%O, %E FROM (SELECT 1 AS %O) x",
		"SELECT 1 --%O, %E",
		"SELECT 1 --%O\n, %E",
		"SELECT 1 -- %O\n, %E",
		"SELECT 1 -- %O\r, %E",
		"SELECT 1 --\t, %E",
		"SELECT 1 --\x0b, %E",
		"SELECT 1 --\x85, %E",
		"SELECT 1 --\xc2\xa0, %E",
		"SELECT 1 #%O\n, %E",
		"SELECT 1 # , %E",
		`SELECT '%O\', %E -- '`,
		`SELECT 'a\', %E -- '`,
		`SELECT "a\", %E -- "`,
		`SELECT "%O\", %E # "`,
		`SELECT 'it''s', %E`,
		`SELECT 'x''', %E -- '`,
		`SELECT "a"" -- ", %E`,
		"SELECT 1 AS `a`` -- `, %E",
		"SELECT 1 AS `a\\`, %E -- `",
		"SELECT 1 AS `%O`, %E",
		`SELECT 'a' || %E`,
		`SELECT 'a' || %E || 'b' -- `,
		`SELECT %E FROM dual`,
		`SELECT 1 FROM dual WHERE '%O' = '%O' OR %E = 1`,
		`/* sluice:replica */ SELECT %E`,
		`/* sluice:replica */ SELECT '%O\', %E -- '`,
		`SELECT 1 /* %O */ , %E`,
		`SELECT 1 /*%O*/, %E /*`,
		`SELECT _gbk '%O\', %E -- '`,
		`SELECT _sjis '%O\', %E -- '`,
		`SELECT _big5 '%O\', %E -- '`,
		`SELECT N'%O\', %E -- '`,
		`SELECT X'41', %E`,
		`DO %E`,
		`DO 1 /*T! , 'x */ , %E /*' */`,
		`SELECT * FROM (SELECT %E AS c) x WHERE c > 0`,
		`SELECT 1 UNION ALL SELECT %E`,
		`WITH t AS (SELECT %E AS c) SELECT * FROM t`,
		`SELECT x FROM v`,
		`SELECT 1 FROM v WHERE x = 1 -- %O`,
		`SELECT '\\', %E -- '`,
		`SELECT "'", %E, "'"`,
		`SELECT '"', %E -- "`,
		`SELECT COUNT(*) FROM w WHERE %E = 1`,
		"SELECT%O%E",
		"SELECT 1,%O%E",
	}

	fuzzPrefixes = []string{"", "", " ", "\n", "\t", "/**/", "/* c */ ", "-- c\n", "# c\n", "/*!*/ ", "/*T!*/ ", "/*M!*/ "}
	fuzzSuffixes = []string{"", "", " ", "\n", ";", " -- t", " #t", " /* t */", " /*T! t */", "%O"}
)

// fuzzStatement generates one statement with a side effect.
func fuzzStatement(rng *rand.Rand) string {
	odd := fuzzOdd[rng.IntN(len(fuzzOdd))]
	if rng.IntN(4) == 0 {
		odd += fuzzOdd[rng.IntN(len(fuzzOdd))]
	}
	s := fuzzPrefixes[rng.IntN(len(fuzzPrefixes))] +
		fuzzTemplates[rng.IntN(len(fuzzTemplates))] +
		fuzzSuffixes[rng.IntN(len(fuzzSuffixes))]
	s = strings.ReplaceAll(s, "%E", fuzzEffects[rng.IntN(len(fuzzEffects))])
	s = strings.ReplaceAll(s, "%O", odd)
	if rng.IntN(5) == 0 { // an odd byte string somewhere
		i := rng.IntN(len(s) + 1)
		s = s[:i] + fuzzOdd[rng.IntN(len(fuzzOdd))] + s[i:]
	}
	if rng.IntN(6) == 0 {
		s = strings.ToLower(s)
	}
	return s
}

// TestReplicaWriteDifferentialFuzz runs generated statements, each with a
// side effect (NEXTVAL, a writing function) where TiDB's lexer and
// MariaDB's may disagree about comments, strings and bytes, through sluice
// under generated character sets and sql_modes. Errors are expected; what
// must hold is that the replicas never diverge from the master and
// replication never stops. SLUICE_FUZZ_SEED picks the seed.
func TestReplicaWriteDifferentialFuzz(t *testing.T) {
	seed := uint64(fuzzDefaultSeed)
	if v := os.Getenv("SLUICE_FUZZ_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_FUZZ_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("seed %d (SLUICE_FUZZ_SEED=%d reproduces this run)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed18))

	rwSetup(t)
	d := appDB(t, rwDB, nil)
	const (
		total      = 400
		checkEvery = 100
		budget     = 25 * time.Second
	)
	type ran struct{ session, stmt string }
	var last []ran
	report := func(what string) {
		var b strings.Builder
		for _, r := range last {
			fmt.Fprintf(&b, "\n  [%s] %s", r.session, rwHex(r.stmt))
		}
		t.Errorf("%s\nseed %d (SLUICE_FUZZ_SEED=%d); the last %d statements:%s", what, seed, seed, len(last), b.String())
	}
	check := func(n int) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		defer cancel()
		if p := rwProblems(ctx, false); len(p) > 0 {
			report(fmt.Sprintf("after %d statements:\n  %s", n, strings.Join(p, "\n  ")))
			return false
		}
		return true
	}

	// session opens a new sluice session with the batch's character set
	// and sql_mode.
	session := func(cs, mode string) *sql.Conn {
		ctx := ctxT(t)
		c, err := d.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		setup := []string{"SET NAMES " + cs}
		if mode != "" {
			setup = append(setup, "SET SESSION sql_mode = '"+mode+"'")
		}
		for _, q := range setup {
			if _, err := c.ExecContext(ctx, q); err != nil {
				c.Close()
				t.Fatalf("%s: %v", q, err)
			}
		}
		return c
	}

	// ownGTIDs lists, per replica, the GTIDs in its binlog that it made
	// itself (its own server id): a write sluice let reach a replica adds
	// one at once, so each statement can be checked cheaply.
	ownGTIDs := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var b strings.Builder
		for _, r := range env.topo.Replicas {
			var st string
			if err := mustRoot(t, r).QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_state").Scan(&st); err != nil {
				t.Fatalf("%s: gtid_binlog_state: %v", r.Name, err)
			}
			fmt.Fprintf(&b, "%s:", r.Name)
			for _, g := range strings.Split(strings.ReplaceAll(st, "\n", ""), ",") {
				if f := strings.Split(strings.TrimSpace(g), "-"); len(f) == 3 && f[1] == strconv.FormatUint(uint64(r.ServerID), 10) {
					b.WriteString(" " + strings.TrimSpace(g))
				}
			}
			b.WriteString("; ")
		}
		return b.String()
	}
	baseline := ownGTIDs()

	// discard ends a session: the pool must not hand its connection (the
	// same sluice session) to the next batch.
	discard := func(c *sql.Conn) {
		_ = c.Raw(func(any) error { return driverBadConn })
		c.Close()
	}

	start := time.Now()
	n, failed := 0, 0
	for n < total && time.Since(start) < budget {
		cs := fuzzCharsets[rng.IntN(len(fuzzCharsets))]
		mode := fuzzModes[rng.IntN(len(fuzzModes))]
		name := cs + "/" + mode
		if mode == "" {
			name = cs + "/default"
		}
		c := session(cs, mode)
		// Short batches: sluice may keep a session on the master after
		// its first write, and then the statements after it test nothing.
		for batch := 1 + rng.IntN(3); batch > 0 && n < total; batch-- {
			q := fuzzStatement(rng)
			if last = append(last, ran{name, q}); len(last) > 25 {
				last = last[1:]
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			rows, err := c.QueryContext(ctx, q)
			if err == nil {
				for rows.Next() {
				}
				err = rows.Err()
				rows.Close()
			}
			cancel()
			n++
			if err != nil {
				failed++
				var me *mysql.MySQLError
				if !errors.As(err, &me) {
					// The connection is gone (the statement broke it, or a
					// timeout): go on in a new session of the same kind.
					if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, context.DeadlineExceeded) {
						t.Logf("[%s] %s: %v; new session", name, rwHex(q), err)
						discard(c)
						c = session(cs, mode)
					}
				}
			}
			if now := ownGTIDs(); now != baseline {
				report(fmt.Sprintf("statement %d wrote on a replica (the replicas' own GTIDs went from %q to %q): [%s] %s", n, baseline, now, name, rwHex(q)))
				discard(c)
				return
			}
			if n%checkEvery == 0 && !check(n) {
				discard(c)
				return
			}
		}
		discard(c)
	}
	t.Logf("%d statements (%d errors) in %v", n, failed, time.Since(start).Round(time.Millisecond))
	if n%checkEvery != 0 {
		check(n)
	}
}
