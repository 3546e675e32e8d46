package tests

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// threadsConnected reads a backend's Threads_connected.
func threadsConnected(ctx context.Context, s *sandbox.Server) (int64, error) {
	d, err := s.RootDB()
	if err != nil {
		return 0, err
	}
	var name string
	var v int64
	err = d.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &v)
	return v, err
}

// TestMultiplexManyClientsSmallPool: 2,000 clients connected at once run
// point selects through a pool of 64 connections per backend: no errors,
// and no backend ever sees more connections than the pool allows (plus the
// probe, replication and the test's own monitoring connections).
func TestMultiplexManyClientsSmallPool(t *testing.T) {
	const clients, poolSize = 2000, 64
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{
		// Logins come in waves of 100; on a loaded 2-core machine the auth
		// server may take a while to accept them all.
		ProxyKeys:   []string{`connect_timeout = "15s"`, `handshake_timeout = "60s"`},
		ClusterKeys: []string{fmt.Sprintf("pool_size = %d", poolSize), `pool_wait_timeout = "20s"`},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := appDB(t, "sluice_test", nil)
	mustExec(t, d, "CREATE TABLE IF NOT EXISTS mux_t (id INT PRIMARY KEY, v INT)")
	mustExec(t, d, "REPLACE INTO mux_t SELECT seq, seq * 2 FROM seq_1_to_100")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS mux_t") })
	if err := env.topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	// Baselines: what each backend has before sluice's pool fills.
	base := map[*sandbox.Server]int64{}
	for _, s := range append([]*sandbox.Server{env.topo.Master}, env.topo.Replicas...) {
		n, err := threadsConnected(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		base[s] = n
	}
	var peak, peakOpen sync.Map
	stop := make(chan struct{})
	var monitor sync.WaitGroup
	monitor.Add(1)
	go func() {
		defer monitor.Done()
		for {
			for addr, st := range srv.PoolStats() {
				if old, ok := peakOpen.Load(addr); !ok || st[0] > old.(int) {
					peakOpen.Store(addr, st[0])
				}
			}
			for s := range base {
				if n, err := threadsConnected(ctx, s); err == nil {
					if old, ok := peak.Load(s); !ok || n > old.(int64) {
						peak.Store(s, n)
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	// Open every client first (in waves, so the auth server is not asked
	// for 2,000 logins at once), then run the point selects.
	conns := make([]*sql.Conn, clients)
	db, err := sql.Open("mysql", dsn(srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "sluice_test",
		func(c *mysql.Config) { c.InterpolateParams = true }))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(clients)
	db.SetMaxIdleConns(clients)
	t.Cleanup(func() { db.Close() })
	var openErrs atomic.Int64
	for wave := 0; wave < clients; wave += 100 {
		var wg sync.WaitGroup
		for i := wave; i < wave+100 && i < clients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := db.Conn(ctx)
				if err != nil {
					openErrs.Add(1)
					t.Errorf("client %d: %v", i, err)
					return
				}
				conns[i] = c
			}()
		}
		wg.Wait()
	}
	if openErrs.Load() > 0 {
		t.Fatalf("%d clients could not connect", openErrs.Load())
	}
	var errs, done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				id := (i*5+j)%100 + 1
				var v int
				if err := c.QueryRowContext(ctx, "SELECT v FROM mux_t WHERE id = ?", id).Scan(&v); err != nil || v != id*2 {
					if errs.Add(1) <= 5 {
						t.Errorf("client %d: v=%d err=%v", i, v, err)
					}
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	monitor.Wait()
	for _, c := range conns {
		c.Close()
	}
	if errs.Load() > 0 {
		t.Fatalf("%d of %d clients failed", errs.Load(), clients)
	}
	t.Logf("%d point selects from %d concurrent clients in %v through pools of %d", done.Load(), clients, elapsed.Round(time.Millisecond), poolSize)
	for addr, st := range srv.PoolStats() {
		t.Logf("pool %s: %d open, %d idle, %d closed", addr, st[0], st[1], st[2])
	}
	peakOpen.Range(func(k, v any) bool {
		t.Logf("pool %v: peak open %v", k, v)
		if v.(int) > poolSize {
			t.Errorf("pool %v opened %v connections, more than pool_size %d", k, v, poolSize)
		}
		return true
	})
	for s, b := range base {
		p, _ := peak.Load(s)
		t.Logf("%s: Threads_connected %d before, peak %v", s.Name, b, p)
		// Besides the pool: both sluices' health probes (a short login
		// every 500 ms each), this test's monitoring connection, and
		// server threads of just-closed connections that have not yet
		// noticed the close.
		const others = 4
		if p.(int64) > b+poolSize+others {
			t.Errorf("%s: Threads_connected peaked at %v, above %d before + pool %d + %d", s.Name, p, b, poolSize, others)
		}
	}
}

// TestMultiplexSessionState: what one client sets never leaks into another
// client's statements on shared connections, and each client's own state
// follows it from connection to connection.
func TestMultiplexSessionState(t *testing.T) {
	addr, open := smallPoolProxy(t, 2)
	ctx := ctxT(t)
	a, b := open(), open()
	mustExecC(t, a, "SET SESSION sql_mode = 'ANSI_QUOTES'")
	mustExecC(t, a, "SET time_zone = '+03:00'")
	mustExecC(t, a, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
	var defMode string
	if err := b.QueryRowContext(ctx, "SELECT @@sql_mode").Scan(&defMode); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		var mode, tz, iso string
		if err := a.QueryRowContext(ctx, "SELECT @@sql_mode, @@time_zone, @@tx_isolation").Scan(&mode, &tz, &iso); err != nil {
			t.Fatal(err)
		}
		if mode != "ANSI_QUOTES" || tz != "+03:00" || iso != "READ-COMMITTED" {
			t.Fatalf("round %d: client A sees sql_mode=%q time_zone=%q isolation=%q", i, mode, tz, iso)
		}
		if err := b.QueryRowContext(ctx, "SELECT @@sql_mode, @@time_zone, @@tx_isolation").Scan(&mode, &tz, &iso); err != nil {
			t.Fatal(err)
		}
		if mode != defMode || tz == "+03:00" || iso == "READ-COMMITTED" {
			t.Fatalf("round %d: client A's state leaked to client B: sql_mode=%q time_zone=%q isolation=%q", i, mode, tz, iso)
		}
	}
	// State changed in ways sluice does not track one by one (inside
	// multi-statement text, SET TRANSACTION) keeps that client on its
	// connection instead of leaking into the pool.
	m := conn(t, openAt(t, addr, env.topo.Opts.AppPassword, func(c *mysql.Config) {
		c.DBName = "sluice_test"
		c.MultiStatements = true
	}))
	mustExecC(t, m, "SET SESSION sql_mode = 'ANSI_QUOTES,NO_ZERO_DATE'; DO 1")
	mustExecC(t, m, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
	for i := range 10 {
		var mode string
		if err := b.QueryRowContext(ctx, "SELECT @@sql_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if mode != defMode {
			t.Fatalf("round %d: another client's multi-statement SET leaked: sql_mode=%q", i, mode)
		}
		if err := m.QueryRowContext(ctx, "SELECT @@sql_mode").Scan(&mode); err != nil || mode != "ANSI_QUOTES,NO_ZERO_DATE" {
			t.Fatalf("round %d: the client lost its own multi-statement SET: %q %v", i, mode, err)
		}
	}
	// A client without a schema never inherits another's default schema.
	c := conn(t, openAt(t, addr, env.topo.Opts.AppPassword, nil))
	for range 10 {
		var db sql.NullString
		if err := c.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&db); err != nil {
			t.Fatal(err)
		}
		if db.Valid {
			t.Fatalf("a client without a schema sees DATABASE() = %q", db.String)
		}
	}
}

// TestMultiplexPinnedState: state that cannot be replayed keeps the
// session on its connection: user variables, temporary tables, GET_LOCK.
func TestMultiplexPinnedState(t *testing.T) {
	_, open := smallPoolProxy(t, 3)
	ctx := ctxT(t)
	a, other := open(), open()
	mustExecC(t, a, "SET @secret = 42")
	mustExecC(t, a, "CREATE TEMPORARY TABLE tmp_mux (id INT)")
	mustExecC(t, a, "INSERT INTO tmp_mux VALUES (1), (2)")
	var got int
	if err := a.QueryRowContext(ctx, "SELECT GET_LOCK('mux_lock', 5)").Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK: %d %v", got, err)
	}
	for range 10 {
		// Another client's statements use the shared connections meanwhile.
		var x sql.NullInt64
		if err := other.QueryRowContext(ctx, "SELECT @secret").Scan(&x); err != nil || x.Valid {
			t.Fatalf("another client sees @secret = %v (%v)", x, err)
		}
		if err := a.QueryRowContext(ctx, "SELECT @secret").Scan(&got); err != nil || got != 42 {
			t.Fatalf("@secret = %d, %v", got, err)
		}
		if err := a.QueryRowContext(ctx, "SELECT COUNT(*) FROM tmp_mux").Scan(&got); err != nil || got != 2 {
			t.Fatalf("temporary table: %d, %v", got, err)
		}
	}
	if err := other.QueryRowContext(ctx, "SELECT IS_FREE_LOCK('mux_lock')").Scan(&got); err != nil || got != 0 {
		t.Fatalf("the lock is free while client A holds it: %d %v", got, err)
	}
	if err := a.QueryRowContext(ctx, "SELECT RELEASE_LOCK('mux_lock')").Scan(&got); err != nil || got != 1 {
		t.Fatalf("RELEASE_LOCK on the connection that holds it: %d %v", got, err)
	}
}

// TestMultiplexLastInsertID: 50 sessions inserting concurrently each get
// their own LAST_INSERT_ID() and ROW_COUNT(), though connections are shared.
func TestMultiplexLastInsertID(t *testing.T) {
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 4"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	d := openAt(t, srv.Addr().String(), env.topo.Opts.AppPassword, func(c *mysql.Config) { c.DBName = "sluice_test"; c.InterpolateParams = true })
	d.SetMaxOpenConns(50)
	mustExec(t, d, "CREATE TABLE lid_t (id INT AUTO_INCREMENT PRIMARY KEY, owner INT)")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS lid_t") })
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for s := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.Conn(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for range 10 {
				res, err := c.ExecContext(ctx, "INSERT INTO lid_t (owner) VALUES (?), (?)", s, s)
				if err != nil {
					t.Error(err)
					return
				}
				want, _ := res.LastInsertId()
				var rc int64
				if err := c.QueryRowContext(ctx, "SELECT ROW_COUNT()").Scan(&rc); err != nil || rc != 2 {
					t.Errorf("session %d: ROW_COUNT() = %d, %v; want 2", s, rc, err)
					return
				}
				var got int64
				if err := c.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&got); err != nil || got != want {
					t.Errorf("session %d: LAST_INSERT_ID() = %d, %v; the INSERT said %d", s, got, err, want)
					return
				}
				var owner int
				if err := c.QueryRowContext(ctx, "/* sluice:master */ SELECT owner FROM lid_t WHERE id = ?", got).Scan(&owner); err != nil || owner != s {
					t.Errorf("session %d: row %d belongs to %d (%v)", s, got, owner, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// smallPoolProxy starts a sluice whose pools hold size connections per
// backend, and returns its address and a way to open one client session
// with sluice_test as schema.
func smallPoolProxy(t *testing.T, size int) (string, func() *sql.Conn) {
	t.Helper()
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{fmt.Sprintf("pool_size = %d", size)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addr().String()
	return addr, func() *sql.Conn {
		return conn(t, openAt(t, addr, env.topo.Opts.AppPassword, func(c *mysql.Config) { c.DBName = "sluice_test" }))
	}
}
