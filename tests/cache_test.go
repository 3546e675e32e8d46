package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// The result cache end to end, against the sandbox: reads a cache_ttl
// rule matches are answered from the cache, never older than a write made
// through sluice (the consistency soak), a write made directly on the
// master shows within cache_ttl, DDL drops entries, SHOW CACHE and FLUSH
// CACHE, transactions bypass the cache, and non-deterministic statements
// are never stored.

// cacheTTL is the rules' cache_ttl: long enough that entries would be
// served stale for a long time if invalidation failed.
const cacheTTL = 3 * time.Second

// cacheRules caches every read of a cache_* table (cache_direct with its
// own, shorter rule first). They also route those reads to the master:
// a read the cache does not answer (its session wrote the table within
// own_writes_window, say) would otherwise go to a replica, whose lag is
// not what these tests measure.
const cacheRules = `
[[rule]]
name = "cache-direct"
pattern = "FROM cache_direct"
kind = "read"
route = "master"
cache_ttl = "1500ms"

[[rule]]
name = "cache-all"
pattern = "FROM cache_"
kind = "read"
route = "master"
cache_ttl = "3s"
`

// cacheSluice starts sluice with the cache rules and the test tables;
// proxyKeys are extra lines for its [proxy] table.
func cacheSluice(t *testing.T, proxyKeys ...string) (*server.Server, *sql.DB) {
	t.Helper()
	srv, _, db := cacheSluiceFile(t, cacheConfig(proxyKeys...))
	return srv, db
}

// cacheConfig is the shared topology's configuration with the cache rules.
func cacheConfig(proxyKeys ...string) string {
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: append([]string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`}, proxyKeys...)}
	text := sandbox.ShardedSluiceConfig(o, env.topo.Auth, []sandbox.NamedTopology{{Name: "main", Topology: env.topo}}, cacheRules)
	return text + "\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
}

// cacheSluiceFile starts sluice from a file holding text and makes the
// test tables; it returns the file's path.
func cacheSluiceFile(t *testing.T, text string) (*server.Server, string, *sql.DB) {
	t.Helper()
	srv, path, _ := rulesSluice(t, text)
	db := reloadDB(t, srv, sandbox.TestDatabase)
	for _, q := range []string{
		"DROP TABLE IF EXISTS cache_a, cache_b, cache_static, cache_direct, cache_ddl, cache_tx",
		"CREATE TABLE cache_a (id INT AUTO_INCREMENT PRIMARY KEY, g INT NOT NULL, n INT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE cache_b (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE cache_static (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE cache_direct (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE cache_ddl (id INT PRIMARY KEY) ENGINE=InnoDB",
		"CREATE TABLE cache_tx (id INT PRIMARY KEY) ENGINE=InnoDB",
		"INSERT INTO cache_direct VALUES (1, 1)",
		"INSERT INTO cache_ddl VALUES (1)",
	} {
		mustExec(t, db, q)
	}
	var rows []string
	for i := 1; i <= 50; i++ {
		rows = append(rows, fmt.Sprintf("(%d, 'static-%d')", i, i))
	}
	mustExec(t, db, "INSERT INTO cache_static VALUES "+strings.Join(rows, ","))
	var cb []string
	for g := range cacheWriters {
		cb = append(cb, fmt.Sprintf("(%d, 0)", g))
	}
	mustExec(t, db, "INSERT INTO cache_b VALUES "+strings.Join(cb, ","))
	// Reads no rule sends to the master may reach a replica: they must
	// find the tables and rows there.
	if err := env.topo.WaitReplicated(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	return srv, path, db
}

// TestCacheReload: [cache] max_memory changes on RELOAD CONFIG: 0 drops
// every entry and stores nothing more; a size again caches again.
func TestCacheReload(t *testing.T) {
	text := cacheConfig()
	srv, path, _ := cacheSluiceFile(t, text)
	c := conn(t, reloadDB(t, srv, sandbox.TestDatabase))
	read := func() {
		t.Helper()
		var v string
		if err := c.QueryRowContext(ctxT(t), "SELECT v FROM cache_static WHERE id = 3").Scan(&v); err != nil || v != "static-3" {
			t.Fatalf("read %q, %v", v, err)
		}
	}
	hitsOf := func(n int) float64 {
		t.Helper()
		h0, _, _ := cacheStats(t, srv)
		for range n {
			read()
		}
		h1, _, _ := cacheStats(t, srv)
		return h1 - h0
	}
	if h := hitsOf(3); h != 2 {
		t.Fatalf("3 reads, %v hits, want 2", h)
	}
	for _, step := range []struct {
		memory string
		hits   float64
	}{{"0", 0}, {"1048576", 2}} {
		writeConfig(t, path, text+"\n[cache]\nmax_memory = "+step.memory+"\n")
		changes := mustReload(t, srv)
		if !strings.Contains(strings.Join(changes, "\n"), "cache.max_memory") {
			t.Fatalf("RELOAD CONFIG to max_memory = %s lists %q", step.memory, changes)
		}
		if h := hitsOf(3); h != step.hits {
			t.Fatalf("max_memory = %s: 3 reads, %v hits, want %v", step.memory, h, step.hits)
		}
	}
}

const cacheWriters = 16

// cacheStats reads the sluice_cache_* counters.
func cacheStats(t *testing.T, srv *server.Server) (hits, misses, stores float64) {
	return scrapeFrom(t, srv, "sluice_cache_hits_total"), scrapeFrom(t, srv, "sluice_cache_misses_total"),
		scrapeFrom(t, srv, "sluice_cache_stores_total")
}

// soakDuration is how long the consistency soak runs:
// SLUICE_CACHE_SOAK (a Go duration), 60s by default.
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("SLUICE_CACHE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SLUICE_CACHE_SOAK: %v", err)
		}
		return d
	}
	return 60 * time.Second
}

// soakState is what the writers acknowledged, for the readers' checks.
type soakState struct {
	// acked counts the inserts into cache_a acknowledged to their writer;
	// maxID is the highest id among them.
	acked, maxID atomic.Int64
	// bv[g] is the last value of cache_b row g acknowledged.
	bv [cacheWriters]atomic.Int64
	// ids are acknowledged ids of cache_a.
	mu  sync.Mutex
	ids []int64

	reads, stale atomic.Int64
	staleMsg     atomic.Pointer[string]
}

func (st *soakState) fail(format string, args ...any) {
	st.stale.Add(1)
	m := fmt.Sprintf(format, args...)
	st.staleMsg.CompareAndSwap(nil, &m)
}

// TestCacheConsistency is the must-show: cacheWriters goroutines, each
// with a writing session and a reading session of its own, insert into
// and update shared tables (in autocommit and in transactions) and read
// them back through cached statements: SELECT COUNT(*) and SELECT ...
// WHERE id = N. Each read knows what had been acknowledged before it was
// sent and must not see less: 0 reads older than an acknowledged write.
// Reads of a table nobody writes mix in, so the cache hits.
func TestCacheConsistency(t *testing.T) {
	srv, _ := cacheSluice(t)
	dur := soakDuration(t)
	var st soakState
	ctx, cancel := context.WithTimeout(context.Background(), dur+2*time.Minute)
	defer cancel()
	stopAt := time.Now().Add(dur)
	h0, m0, s0 := cacheStats(t, srv)
	var wg sync.WaitGroup
	errs := make(chan error, 2*cacheWriters)
	for g := range cacheWriters {
		wdb, rdb := reloadDB(t, srv, sandbox.TestDatabase), reloadDB(t, srv, sandbox.TestDatabase)
		wdb.SetMaxOpenConns(1)
		rdb.SetMaxOpenConns(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := soakWriter(ctx, wdb, rdb, g, &st, stopAt); err != nil {
				errs <- fmt.Errorf("goroutine %d: %w", g, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h1, m1, s1 := cacheStats(t, srv)
	hits, misses, stores := h1-h0, m1-m0, s1-s0
	ratio := hits / (hits + misses)
	t.Logf("consistency soak: %v, %d goroutines, %d writes acknowledged, %d checked reads, %d stale; cache hits %.0f misses %.0f stores %.0f: hit ratio %.3f",
		dur, cacheWriters, st.acked.Load(), st.reads.Load(), st.stale.Load(), hits, misses, stores, ratio)
	if n := st.stale.Load(); n != 0 {
		t.Fatalf("%d reads older than an acknowledged write; first: %s", n, *st.staleMsg.Load())
	}
	if st.reads.Load() == 0 || st.acked.Load() == 0 {
		t.Fatal("the soak checked nothing")
	}
	if hits == 0 || ratio < 0.2 {
		t.Fatalf("hit ratio %.3f (%v hits): the cache did not serve the soak", ratio, hits)
	}
}

// soakWriter is one goroutine of the soak: write on wdb, read on rdb.
func soakWriter(ctx context.Context, wdb, rdb *sql.DB, g int, st *soakState, stopAt time.Time) error {
	rng := rand.New(rand.NewPCG(uint64(g), 26))
	for i := 0; time.Now().Before(stopAt); i++ {
		if ctx.Err() != nil {
			return nil
		}
		if err := soakWrite(ctx, wdb, g, i, st); err != nil {
			return err
		}
		for range 4 {
			if err := soakRead(ctx, rdb, rng, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// soakWrite inserts a row into cache_a and bumps cache_b's row g, in
// autocommit or, every third time, in one transaction; once acknowledged
// (the OK or the COMMIT's OK arrived) both are published.
func soakWrite(ctx context.Context, wdb *sql.DB, g, i int, st *soakState) error {
	var id int64
	if i%3 == 2 {
		tx, err := wdb.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO cache_a (g, n) VALUES (%d, %d)", g, i))
		if err == nil {
			id, err = r.LastInsertId()
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, fmt.Sprintf("UPDATE cache_b SET v = %d WHERE id = %d", i+1, g))
		}
		if err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	} else {
		r, err := wdb.ExecContext(ctx, fmt.Sprintf("INSERT INTO cache_a (g, n) VALUES (%d, %d)", g, i))
		if err != nil {
			return err
		}
		if id, err = r.LastInsertId(); err != nil {
			return err
		}
		if _, err := wdb.ExecContext(ctx, fmt.Sprintf("UPDATE cache_b SET v = %d WHERE id = %d", i+1, g)); err != nil {
			return err
		}
	}
	st.acked.Add(1)
	for {
		m := st.maxID.Load()
		if id <= m || st.maxID.CompareAndSwap(m, id) {
			break
		}
	}
	st.bv[g].Store(int64(i + 1))
	st.mu.Lock()
	st.ids = append(st.ids, id)
	st.mu.Unlock()
	return nil
}

// soakRead runs one cached read and checks it against what was
// acknowledged before it was sent.
func soakRead(ctx context.Context, rdb *sql.DB, rng *rand.Rand, st *soakState) error {
	switch k := rng.IntN(10); {
	case k < 2:
		acked := st.acked.Load()
		var n int64
		if err := rdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM cache_a").Scan(&n); err != nil {
			return err
		}
		st.reads.Add(1)
		if n < acked {
			st.fail("SELECT COUNT(*) FROM cache_a gave %d after %d inserts were acknowledged", n, acked)
		}
	case k < 4:
		// An acknowledged id, or one just past the highest (which may not
		// exist yet: its empty answer is cached, and must not outlive
		// the insert).
		st.mu.Lock()
		var id int64
		if len(st.ids) > 0 && k == 2 {
			id = st.ids[rng.IntN(len(st.ids))]
		}
		st.mu.Unlock()
		known := id != 0
		if !known {
			id = st.maxID.Load() + int64(rng.IntN(3))
		}
		var g int
		var err error
		if rng.IntN(2) == 0 {
			err = rdb.QueryRowContext(ctx, fmt.Sprintf("SELECT g FROM cache_a WHERE id = %d", id)).Scan(&g)
		} else {
			// A prepared statement, executed in the binary protocol.
			err = rdb.QueryRowContext(ctx, "SELECT g FROM cache_a WHERE id = ?", id).Scan(&g)
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		st.reads.Add(1)
		if known && err != nil {
			st.fail("SELECT g FROM cache_a WHERE id = %d found no row after its insert was acknowledged", id)
		}
	case k < 6:
		g := rng.IntN(cacheWriters)
		want := st.bv[g].Load()
		var v int64
		q, args := fmt.Sprintf("SELECT v FROM cache_b WHERE id = %d", g), []any(nil)
		if rng.IntN(2) == 0 {
			q, args = "SELECT v FROM cache_b WHERE id = ?", []any{g}
		}
		if err := rdb.QueryRowContext(ctx, q, args...).Scan(&v); err != nil {
			return err
		}
		st.reads.Add(1)
		if v < want {
			st.fail("SELECT v FROM cache_b WHERE id = %d gave %d after %d was acknowledged", g, v, want)
		}
	default:
		id := 1 + rng.IntN(10)
		var v string
		if err := rdb.QueryRowContext(ctx, fmt.Sprintf("SELECT v FROM cache_static WHERE id = %d", id)).Scan(&v); err != nil {
			return err
		}
		if v != "static-"+strconv.Itoa(id) {
			return fmt.Errorf("cache_static row %d reads %q", id, v)
		}
	}
	return nil
}

// TestCacheBehaviour checks the cache's other promises on one sluice.
func TestCacheBehaviour(t *testing.T) {
	srv, _ := cacheSluice(t)
	// A session of its own: the one that created the tables reads them
	// from the backend for own_writes_window.
	db := reloadDB(t, srv, sandbox.TestDatabase)
	c := conn(t, db)
	on := func(c *sql.Conn, q string) string {
		t.Helper()
		var v string
		if err := c.QueryRowContext(ctxT(t), q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	one := func(q string) string { t.Helper(); return on(c, q) }

	t.Run("hit", func(t *testing.T) {
		h0, _, s0 := cacheStats(t, srv)
		for range 5 {
			if v := one("SELECT v FROM cache_static WHERE id = 7"); v != "static-7" {
				t.Fatalf("got %q", v)
			}
		}
		h1, _, s1 := cacheStats(t, srv)
		if s1-s0 != 1 || h1-h0 != 4 {
			t.Fatalf("5 reads: %v stores and %v hits, want 1 and 4", s1-s0, h1-h0)
		}
	})

	t.Run("hit latency (reported, not checked)", func(t *testing.T) {
		// The same row through the cache and, named with its schema (no
		// rule matches), from a backend; medians of 300 each.
		median := func(q string) time.Duration {
			d := make([]time.Duration, 300)
			for i := range d {
				start := time.Now()
				one(q)
				d[i] = time.Since(start)
			}
			slices.Sort(d)
			return d[len(d)/2]
		}
		cached := median("SELECT v FROM cache_static WHERE id = 5")
		backend := median("SELECT v FROM " + sandbox.TestDatabase + ".cache_static WHERE id = 5")
		t.Logf("median round trip of a point select: %v from the cache, %v from a backend", cached, backend)
	})

	t.Run("prepared statements", func(t *testing.T) {
		// go-sql-driver prepares a statement with arguments, executes it
		// in the binary protocol and closes it.
		h0, _, s0 := cacheStats(t, srv)
		for i := range 6 {
			id := 9 + i%2
			var v string
			if err := c.QueryRowContext(ctxT(t), "SELECT v FROM cache_static WHERE id = ?", id).Scan(&v); err != nil {
				t.Fatal(err)
			}
			if v != "static-"+strconv.Itoa(id) {
				t.Fatalf("id %d read %q", id, v)
			}
		}
		h1, _, s1 := cacheStats(t, srv)
		if s1-s0 != 2 || h1-h0 != 4 {
			t.Fatalf("6 executions of 2 parameter values: %v stores and %v hits, want 2 and 4", s1-s0, h1-h0)
		}
	})

	t.Run("non-deterministic statements are never stored", func(t *testing.T) {
		for _, q := range []string{
			"SELECT CONCAT(NOW(6), v) FROM cache_static WHERE id = 1",
			"SELECT CONCAT(RAND(), v) FROM cache_static WHERE id = 1",
			"SELECT CONCAT(UUID(), v) FROM cache_static WHERE id = 1",
			"SELECT CONCAT(CURRENT_TIMESTAMP, v) FROM cache_static WHERE id = 1",
			"SELECT CONCAT(@@sql_mode, v) FROM cache_static WHERE id = 1",
			"SELECT CONCAT(IFNULL(@cache_var, 'x'), v) FROM cache_static WHERE id = 1",
			"SELECT CONCAT(CONNECTION_ID(), v) FROM cache_static WHERE id = 1",
			"SELECT v FROM cache_static WHERE id = 1 FOR UPDATE",
			"SELECT v FROM cache_static, information_schema.ENGINES WHERE id = 1 LIMIT 1",
		} {
			h0, _, s0 := cacheStats(t, srv)
			first := one(q)
			var second string
			if strings.Contains(q, "NOW(6)") {
				// Another microsecond: a stored answer would repeat it.
				pollUntil(t, "NOW(6) moves", func() bool { second = one(q); return second != first })
			} else {
				second = one(q)
			}
			h1, _, s1 := cacheStats(t, srv)
			if s1 != s0 || h1 != h0 {
				t.Errorf("%s: %v stores, %v hits, want none", q, s1-s0, h1-h0)
			}
			if strings.Contains(q, "RAND()") && first == second {
				t.Errorf("%s answered %q twice", q, first)
			}
		}
	})

	t.Run("bypassed inside a transaction", func(t *testing.T) {
		q := "SELECT COUNT(*) FROM cache_tx"
		tc := conn(t, db)
		if v := on(tc, q); v != "0" {
			t.Fatalf("cache_tx holds %s rows", v)
		}
		on(tc, q) // stored and hit
		h0, m0, _ := cacheStats(t, srv)
		mustExecC(t, tc, "BEGIN")
		mustExecC(t, tc, "INSERT INTO cache_tx VALUES (1)")
		if v := on(tc, q); v != "1" {
			t.Fatalf("inside the transaction %s read %s, want its own insert (1)", q, v)
		}
		if v := on(tc, "SELECT COUNT(*) FROM cache_static"); v != "50" {
			t.Fatalf("cache_static: %s", v)
		}
		h1, m1, _ := cacheStats(t, srv)
		if h1 != h0 || m1 != m0 {
			t.Fatalf("inside a transaction the cache was consulted: %v hits, %v misses", h1-h0, m1-m0)
		}
		// Another session does not see the uncommitted row, from the
		// cache or not; after the ROLLBACK nobody does.
		other := conn(t, db)
		var n string
		if err := other.QueryRowContext(ctxT(t), q).Scan(&n); err != nil || n != "0" {
			t.Fatalf("another session read %s (%v), want 0", n, err)
		}
		mustExecC(t, tc, "ROLLBACK")
		if v := on(tc, q); v != "0" {
			t.Fatalf("after ROLLBACK %s read %s", q, v)
		}
	})

	t.Run("DDL drops entries", func(t *testing.T) {
		q := "SELECT * FROM cache_ddl WHERE id = 1"
		cols := func() int {
			rows, err := c.QueryContext(ctxT(t), q)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			names, _ := rows.Columns()
			for rows.Next() {
			}
			return len(names)
		}
		cols()
		if n := cols(); n != 1 {
			t.Fatalf("%d columns", n)
		}
		if !cacheHasTable(t, srv, sandbox.TestDatabase+".cache_ddl") {
			t.Fatal("SHOW CACHE lists no entry of cache_ddl after two reads")
		}
		mustExecC(t, c, "ALTER TABLE cache_ddl ADD COLUMN extra INT NOT NULL DEFAULT 5")
		if cacheHasTable(t, srv, sandbox.TestDatabase+".cache_ddl") {
			t.Fatal("SHOW CACHE still lists an entry of cache_ddl after ALTER TABLE")
		}
		if n := cols(); n != 2 {
			t.Fatalf("after ALTER TABLE ADD COLUMN the read has %d columns, want 2", n)
		}
	})

	t.Run("SHOW CACHE and FLUSH CACHE", func(t *testing.T) {
		one("SELECT v FROM cache_static WHERE id = 8")
		one("SELECT COUNT(*) FROM cache_tx")
		if !cacheHasTable(t, srv, sandbox.TestDatabase+".cache_static") || !cacheHasTable(t, srv, sandbox.TestDatabase+".cache_tx") {
			t.Fatal("SHOW CACHE lacks the entries just stored")
		}
		header, rows := adminRows(t, srv, "SHOW CACHE")
		if kinds := column(t, header, rows, "kind"); kinds[0] != "summary" {
			t.Fatalf("SHOW CACHE's first row is %q", kinds[0])
		}
		adminExec(t, srv, "FLUSH CACHE "+sandbox.TestDatabase+".cache_static")
		if cacheHasTable(t, srv, sandbox.TestDatabase+".cache_static") {
			t.Fatal("FLUSH CACHE db.cache_static left its entries")
		}
		if !cacheHasTable(t, srv, sandbox.TestDatabase+".cache_tx") {
			t.Fatal("FLUSH CACHE db.cache_static dropped an entry of cache_tx")
		}
		adminExec(t, srv, "FLUSH CACHE")
		header, rows = adminRows(t, srv, "SHOW CACHE")
		if entries := column(t, header, rows, "entries"); entries[0] != "0" || len(rows) != 1 {
			t.Fatalf("after FLUSH CACHE: %d rows, %s entries", len(rows), entries[0])
		}
		h0, _, _ := cacheStats(t, srv)
		one("SELECT v FROM cache_static WHERE id = 8")
		if h1, _, _ := cacheStats(t, srv); h1 != h0 {
			t.Fatal("a read right after FLUSH CACHE was a hit")
		}
	})

	t.Run("a write on the master directly shows within cache_ttl", func(t *testing.T) {
		root := mustRoot(t, env.topo.Master)
		q := "SELECT v FROM cache_direct WHERE id = 1"
		ttl := 1500 * time.Millisecond
		var worst time.Duration
		served := 0 // rounds whose first read after the write came from the cache
		for round := range 5 {
			before := one(q)
			one(q) // stored now at the latest
			want := strconv.Itoa(100 + round)
			if _, err := root.ExecContext(ctxT(t), "UPDATE "+sandbox.TestDatabase+".cache_direct SET v = ? WHERE id = 1", want); err != nil {
				t.Fatal(err)
			}
			written := time.Now()
			if one(q) == before {
				served++
			}
			for one(q) != want {
				if time.Since(written) > ttl+2*time.Second {
					t.Fatalf("round %d: still %q %v after the direct write (cache_ttl %v)", round, before, time.Since(written), ttl)
				}
				time.Sleep(10 * time.Millisecond)
			}
			worst = max(worst, time.Since(written))
		}
		t.Logf("a direct write showed through the cache within %v at worst (cache_ttl %v); %d of 5 rounds read the cached value first", worst, ttl, served)
		if served == 0 {
			t.Fatal("no round read the value the cache held: the test did not exercise the cache")
		}
		// Visible within the TTL, measured from when the stored answer's
		// query ran; the poll's own step and a loaded machine add a little.
		if worst > ttl+time.Second {
			t.Fatalf("a direct write took %v to show, cache_ttl is %v", worst, ttl)
		}
	})
}

// TestCacheNoStampede: sessions that miss the same key at once wait for
// one backend query instead of each running their own.
// It runs with a goroutine per session and on event loops, where the
// sessions that wait must step off their loop.
func TestCacheNoStampede(t *testing.T) {
	for _, mode := range []struct {
		name string
		keys []string
	}{{"goroutines", nil}, {"event loops", []string{"event_loop = true", "threads = 2"}}} {
		t.Run(mode.name, func(t *testing.T) {
			if mode.keys != nil && strings.Contains(os.Getenv(sandbox.ProxyKeysEnv), "event_loop") {
				// The whole suite runs on event loops: the first mode was this one.
				t.Skipf("%s already puts every sluice of this run on event loops", sandbox.ProxyKeysEnv)
			}
			noStampede(t, mode.keys)
		})
	}
}

func noStampede(t *testing.T, proxyKeys []string) {
	srv, _ := cacheSluice(t, proxyKeys...)
	// A deterministic read slow enough for the others to arrive while it
	// runs: 50^4 rows joined.
	const q = "SELECT COUNT(*) FROM cache_static a, cache_static b, cache_static c, cache_static d"
	const sessions = 16
	dbs := make([]*sql.Conn, sessions)
	for i := range dbs {
		dbs[i] = conn(t, reloadDB(t, srv, sandbox.TestDatabase))
		var one int
		if err := dbs[i].QueryRowContext(ctxT(t), "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
	}
	backend0 := scrapeFrom(t, srv, `sluice_statements_total{route="master",type="read"}`)
	h0, m0, s0 := cacheStats(t, srv)
	start := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]string, sessions)
	errs := make([]error, sessions)
	for i := range dbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = dbs[i].QueryRowContext(context.Background(), q).Scan(&got[i])
		}()
	}
	close(start)
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != "6250000" {
			t.Fatalf("session %d: %q, %v", i, got[i], errs[i])
		}
	}
	backend := scrapeFrom(t, srv, `sluice_statements_total{route="master",type="read"}`) - backend0
	h1, m1, s1 := cacheStats(t, srv)
	t.Logf("%d sessions at once: %v backend queries, %v misses (of which all but one waited), %v hits, %v stores", sessions, backend, m1-m0, h1-h0, s1-s0)
	if backend != 1 || s1-s0 != 1 {
		t.Fatalf("%d sessions missing one key ran %v backend queries and stored %v answers, want 1 and 1", sessions, backend, s1-s0)
	}
}

// adminExec runs an admin command that answers OK.
func adminExec(t *testing.T, srv *server.Server, sql string) {
	t.Helper()
	if _, errOut, err := adminCLI(t, srv, adminPassword, sql); err != nil {
		t.Fatalf("%s: %v: %s", sql, err, errOut)
	}
}

// cacheHasTable reports whether SHOW CACHE lists an entry that read table.
func cacheHasTable(t *testing.T, srv *server.Server, table string) bool {
	header, rows := adminRows(t, srv, "SHOW CACHE LIMIT 1000")
	kinds, tables := column(t, header, rows, "kind"), column(t, header, rows, "tables")
	for i := range rows {
		if kinds[i] == "entry" && strings.Contains(","+tables[i]+",", ","+table+",") {
			return true
		}
	}
	return false
}
