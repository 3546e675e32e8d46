package tests

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// The scale of TestPreparedStatementsDoNotPin: many more clients than
// pooled connections, each holding three open statements, and a backend
// statement cache small enough that the distinct texts (401 INSERTs on the
// master, 550 reads on the replicas, against 8 × 16 cached per backend)
// must be evicted over and over.
const (
	psClients    = 500
	psPoolSize   = 8
	psCacheBound = 16
	// psRounds is how many times each client runs its statements; under
	// the race detector, which slows sluice and the drivers several times,
	// psRoundsRace keeps the test within about half a minute. Clients go on
	// (up to 10 × the rounds) while the cursor and long-data cases, which
	// need other sessions busy around them, are still going.
	psRounds     = 20
	psRoundsRace = 5
	// psGroups: clients i and j share their range select's text when
	// i ≡ j (mod psGroups); every fifth client shares one INSERT text.
	psGroups   = 50
	psTableLen = 1000
)

// TestPreparedStatementsDoNotPin: psClients clients, all connected at once
// and each holding three open prepared statements (a per-client read, a
// read whose text a group of clients shares and a write), execute them in
// a loop through pool_size = psPoolSize with backend_statement_cache =
// psCacheBound. No client sees an error, every result is the one its
// parameters and its own writes call for, and no backend ever holds more
// than psPoolSize × psCacheBound statements of this sluice, nor more
// connections than its pool. Meanwhile a read-only cursor is fetched to its
// end in small batches and two sessions interleave COM_STMT_SEND_LONG_DATA
// chunks on one text; both get exactly their own rows and values back.
func TestPreparedStatementsDoNotPin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	psScaleSetup(t, ctx)
	servers := append([]*sandbox.Server{env.topo.Master}, env.topo.Replicas...)
	mon := newBackendMonitor(t, ctx, servers)
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{
		ProxyKeys: []string{fmt.Sprintf("backend_statement_cache = %d", psCacheBound),
			`connect_timeout = "15s"`, `handshake_timeout = "60s"`},
		ClusterKeys: []string{fmt.Sprintf("pool_size = %d", psPoolSize), `pool_wait_timeout = "10s"`},
	})
	if err != nil {
		t.Fatal(err)
	}
	closeSrv := sync.OnceFunc(func() { srv.Close() })
	t.Cleanup(closeSrv)
	mon.start(ctx, srv.PoolStats)
	defer mon.stop()
	addr := srv.Addr().String()
	db, conns := openClients(t, ctx, addr, psClients)
	t.Logf("%d clients logged in after %v", psClients, time.Since(start).Round(time.Millisecond))

	w := &psWorkers{clients: make([]*psClient, psClients), rounds: psRounds, begin: make(chan struct{}), finished: make(chan struct{})}
	if raceEnabled {
		w.rounds = psRoundsRace
	}
	for i, c := range conns {
		w.clients[i] = &psClient{i: i, conn: c}
	}
	// Stop the clients, then wait for them, however the test ends: they
	// report through t.
	defer w.done.Wait()
	defer cancel()
	w.run(t, ctx)
	w.prepared.Wait()
	if n := w.errs.Load(); n > 0 {
		close(w.begin)
		t.Fatalf("%d of %d clients could not prepare their statements (pool_size %d)", n, psClients, psPoolSize)
	}
	t.Logf("%d clients hold %d open statements after %v", psClients, 3*psClients, time.Since(start).Round(time.Millisecond))
	raw := psPrepareRawCases(t, addr)
	loopStart := time.Now()
	close(w.begin)
	raw.cursorCase(t, w)
	raw.longDataCase(t, w)
	w.special.Store(true)
	w.done.Wait()
	loopTime := time.Since(loopStart)
	mon.sample(ctx) // after the loop, with every session still open
	for _, c := range conns {
		c.Close()
	}
	db.Close()      // logs the clients out
	mon.sample(ctx) // as the sessions end
	mon.stop()
	if n := w.errs.Load(); n > 0 {
		t.Fatalf("%d errors in the clients' loops", n)
	}
	if ctx.Err() != nil || w.minRounds() < w.rounds {
		t.Fatalf("the clients ran out of time (%v): a client ran %d of %d rounds", ctx.Err(), w.minRounds(), w.rounds)
	}
	t.Logf("%d executes in %v (%d clients, %d-%d rounds each)", w.executes.Load(), loopTime.Round(time.Millisecond),
		psClients, w.minRounds(), w.maxRounds())
	psCheckWrites(t, ctx, w)
	mon.check(t, psPoolSize, psPoolSize*psCacheBound)
	// Closing sluice closes its backend connections and with them every
	// statement they held.
	closeSrv()
	waitPreparedAtMost(t, mon.basePrepared, "after sluice closed")
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// psScaleSetup creates the tables directly on the master: ps_scale_t, read
// by range (v = id × 7), and ps_scale_w, which the clients write.
func psScaleSetup(t *testing.T, ctx context.Context) {
	t.Helper()
	err := env.topo.Master.Exec(ctx,
		"DROP TABLE IF EXISTS sluice_test.ps_scale_t, sluice_test.ps_scale_w",
		"CREATE TABLE sluice_test.ps_scale_t (id INT PRIMARY KEY, v BIGINT NOT NULL)",
		fmt.Sprintf("INSERT INTO sluice_test.ps_scale_t SELECT seq, seq * 7 FROM sluice_test.seq_1_to_%d", psTableLen),
		"CREATE TABLE sluice_test.ps_scale_w (client INT, round INT, v BIGINT NOT NULL, PRIMARY KEY (client, round))")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := env.topo.Master.Exec(ctx, "DROP TABLE IF EXISTS sluice_test.ps_scale_t, sluice_test.ps_scale_w"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := env.topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
}

// openClients logs n clients in to sluice at addr as the application user,
// in waves of 100 so the auth server is not asked for them all at once,
// and returns their pool and one connection (one sluice session) each.
func openClients(t *testing.T, ctx context.Context, addr string, n int) (*sql.DB, []*sql.Conn) {
	t.Helper()
	db, err := sql.Open("mysql", dsn(addr, env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "sluice_test",
		func(c *mysql.Config) { c.Timeout = 15 * time.Second }))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	t.Cleanup(func() { db.Close() })
	conns := make([]*sql.Conn, n)
	var failed atomic.Int64
	for wave := 0; wave < n; wave += 100 {
		var wg sync.WaitGroup
		for i := wave; i < wave+100 && i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := db.Conn(ctx)
				if err != nil {
					if failed.Add(1) <= 3 {
						t.Errorf("client %d: login: %v", i, err)
					}
					return
				}
				conns[i] = c
			}()
		}
		wg.Wait()
	}
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	if failed.Load() > 0 {
		t.Fatalf("%d of %d clients could not log in", failed.Load(), n)
	}
	return db, conns
}

// psWorkers runs every client: each prepares its statements, waits at
// begin until all have, then loops.
type psWorkers struct {
	clients  []*psClient
	rounds   int
	prepared sync.WaitGroup
	done     sync.WaitGroup
	// finished is closed once every client is done.
	finished chan struct{}
	begin    chan struct{}
	// special is set once the cursor and long-data cases are over; until
	// then clients go on past rounds (up to 10 × rounds).
	special  atomic.Bool
	errs     atomic.Int64
	executes atomic.Int64
}

func (w *psWorkers) run(t *testing.T, ctx context.Context) {
	for _, c := range w.clients {
		w.prepared.Add(1)
		w.done.Add(1)
		go func() {
			defer w.done.Done()
			err := c.prepare(ctx)
			w.prepared.Done()
			if err != nil {
				w.fail(t, ctx, c, err)
				return
			}
			defer c.close()
			select {
			case <-w.begin:
			case <-ctx.Done():
				return
			}
			for r := 0; r < w.rounds || (!w.special.Load() && r < 10*w.rounds); r++ {
				if ctx.Err() != nil {
					return
				}
				if err := c.round(ctx, r); err != nil {
					w.fail(t, ctx, c, err)
					return
				}
				w.executes.Add(3)
			}
		}()
	}
	go func() { w.done.Wait(); close(w.finished) }()
}

// fail counts a client's error and reports the first few; errors of a
// test already ending (its context canceled) are not the clients'.
func (w *psWorkers) fail(t *testing.T, ctx context.Context, c *psClient, err error) {
	if ctx.Err() != nil {
		return
	}
	if w.errs.Add(1) <= 5 {
		t.Errorf("client %d (round %d): %v", c.i, c.rounds, err)
	}
}

func (w *psWorkers) minRounds() int {
	m := 10 * w.rounds
	for _, c := range w.clients {
		m = min(m, c.rounds)
	}
	return m
}

func (w *psWorkers) maxRounds() int {
	m := 0
	for _, c := range w.clients {
		m = max(m, c.rounds)
	}
	return m
}

// psClient is one client session and its three statements.
type psClient struct {
	i     int
	conn  *sql.Conn
	add   *sql.Stmt // SELECT ? + i: a text of its own, read on a replica
	rng   *sql.Stmt // a range select whose text psGroups clients share
	ins   *sql.Stmt // its INSERT: a text of its own, or one every fifth client shares
	group int
	// rounds is how many rounds completed; sum the sum of v it wrote.
	rounds int
	sum    int64
}

// psRangeText is the range select of group g (the cursor case uses group
// 0's text too).
func psRangeText(g int) string {
	return "SELECT id, v + " + strconv.Itoa(g) + " FROM sluice_test.ps_scale_t WHERE id BETWEEN ? AND ?"
}

func (c *psClient) sharesInsert() bool { return c.i%5 == 0 }

func (c *psClient) prepare(ctx context.Context) error {
	c.group = c.i % psGroups
	insText := "INSERT INTO sluice_test.ps_scale_w (client, round, v) VALUES (" + strconv.Itoa(c.i) + ", ?, ?)"
	if c.sharesInsert() {
		insText = "INSERT INTO sluice_test.ps_scale_w (client, round, v) VALUES (?, ?, ?)"
	}
	var err error
	if c.add, err = c.conn.PrepareContext(ctx, "SELECT ? + "+strconv.Itoa(c.i)); err != nil {
		return fmt.Errorf("prepare the read: %w", err)
	}
	if c.rng, err = c.conn.PrepareContext(ctx, psRangeText(c.group)); err != nil {
		return fmt.Errorf("prepare the range read: %w", err)
	}
	if c.ins, err = c.conn.PrepareContext(ctx, insText); err != nil {
		return fmt.Errorf("prepare the write: %w", err)
	}
	return nil
}

func (c *psClient) close() {
	for _, st := range []*sql.Stmt{c.add, c.rng, c.ins} {
		if st != nil {
			st.Close()
		}
	}
}

// round executes the three statements once, with parameters that vary by
// client and round, and checks every answer.
func (c *psClient) round(ctx context.Context, r int) error {
	p := int64(r*1009 + c.i)
	var got int64
	if err := c.add.QueryRowContext(ctx, p).Scan(&got); err != nil {
		return fmt.Errorf("SELECT ? + %d with %d: %w", c.i, p, err)
	}
	if got != p+int64(c.i) {
		return fmt.Errorf("SELECT ? + %d with %d = %d", c.i, p, got)
	}
	a := (c.i*31+r*17)%(psTableLen-10) + 1
	if err := c.checkRange(ctx, a, a+2); err != nil {
		return err
	}
	v := int64(c.i)*100000 + int64(r)*7 + 1
	var res sql.Result
	var err error
	if c.sharesInsert() {
		res, err = c.ins.ExecContext(ctx, c.i, r, v)
	} else {
		res, err = c.ins.ExecContext(ctx, r, v)
	}
	if err != nil {
		return fmt.Errorf("insert round %d: %w", r, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("insert round %d: %d rows affected (%v)", r, n, err)
	}
	c.sum += v
	c.rounds = r + 1
	return nil
}

// checkRange runs the range select for ids a..b and checks each row.
func (c *psClient) checkRange(ctx context.Context, a, b int) error {
	rows, err := c.rng.QueryContext(ctx, a, b)
	if err != nil {
		return fmt.Errorf("range %d..%d: %w", a, b, err)
	}
	defer rows.Close()
	want := a
	for rows.Next() {
		var id, v int64
		if err := rows.Scan(&id, &v); err != nil {
			return fmt.Errorf("range %d..%d: %w", a, b, err)
		}
		if id != int64(want) || v != id*7+int64(c.group) {
			return fmt.Errorf("range %d..%d (group %d): row (%d, %d), want (%d, %d)", a, b, c.group, id, v, want, want*7+c.group)
		}
		want++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("range %d..%d: %w", a, b, err)
	}
	if want != b+1 {
		return fmt.Errorf("range %d..%d: %d rows", a, b, want-a)
	}
	return nil
}

// waitProgress returns once the clients have executed at least n more
// statements, or they have all finished: whatever the calling session does
// next, other sessions have used the pool in between.
func (w *psWorkers) waitProgress(t *testing.T, n int64) {
	t.Helper()
	from := w.executes.Load()
	deadline := time.Now().Add(30 * time.Second)
	for w.executes.Load() < from+n {
		select {
		case <-w.finished:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the clients executed %d statements in 30 s, waiting for %d", w.executes.Load()-from, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// psCheckWrites reads every client's rows directly on the master: exactly
// the rounds it ran, with the values it wrote.
func psCheckWrites(t *testing.T, ctx context.Context, w *psWorkers) {
	t.Helper()
	rows, err := mustRoot(t, env.topo.Master).QueryContext(ctx,
		"SELECT client, COUNT(*), SUM(v) FROM sluice_test.ps_scale_w GROUP BY client")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var client, n int
		var sum int64
		if err := rows.Scan(&client, &n, &sum); err != nil {
			t.Fatal(err)
		}
		if client < 0 || client >= len(w.clients) {
			t.Fatalf("rows of an unknown client %d", client)
		}
		c := w.clients[client]
		if n != c.rounds || sum != c.sum {
			t.Errorf("client %d: master holds %d rows summing to %d; it wrote %d summing to %d", client, n, sum, c.rounds, c.sum)
		}
		seen++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(w.clients) {
		t.Errorf("the master holds rows of %d clients, want %d", seen, len(w.clients))
	}
}
