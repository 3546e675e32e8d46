package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// Backend faults while a result streams (issue 8): these tests own their topology (master and
// one replica, so every read goes to that replica while it is up) and freeze or kill its
// replica in the middle of a 100k-row read.

// The health timings of the fault tests' sluice: a stall must end in an ERR within
// faultTimeout of the replica stopping, plus at most the wait for the next probe to start
// (faultInterval) and the watchdog's tick.
const (
	faultInterval = 500 * time.Millisecond
	faultTimeout  = time.Second
)

// bigRows is the row count of the streamed table; bigPad the width of its pad column, so the
// result (100 MB) is far larger than every buffer between the replica and the client
// (socket buffers grow to tens of MB on loopback).
const (
	bigRows = 100_000
	bigPad  = 1000
)

// faultTopology starts a master with one replica and a sluice in front (probes every
// faultInterval within faultTimeout, down after 3 failures, no automatic failover), with
// table sluice_test.big of bigRows rows replicated.
func faultTopology(t *testing.T) (*sandbox.Topology, *server.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Stop(); err != nil {
			t.Error(err)
		}
	})
	start := time.Now()
	if err := topo.Master.Exec(ctx,
		fmt.Sprintf("CREATE TABLE sluice_test.big (id INT PRIMARY KEY, pad VARCHAR(%d) NOT NULL)", bigPad),
		fmt.Sprintf("INSERT INTO sluice_test.big SELECT seq, REPEAT('x', %d) FROM sluice_test.seq_1_to_%d", bigPad, bigRows),
	); err != nil {
		t.Fatal(err)
	}
	if err := topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("table of %d rows (%d MB) on the replica in %v", bigRows, bigRows*bigPad>>20, time.Since(start).Round(time.Millisecond))
	srv, err := startProxyWith(topo, sandbox.SluiceOptions{HealthKeys: []string{
		fmt.Sprintf("interval = %q", faultInterval), fmt.Sprintf("timeout = %q", faultTimeout),
		"failures_before_down = 3", "auto_failover = false",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return topo, srv
}

// streamUntil runs SELECT * FROM big on c, reads 1,000 rows, calls fault, then reads the rest
// as fast as it can. It returns the error the stream ended with, how long after fault returned
// it came, and how many rows arrived after the fault. Every row must come from the replica.
func streamUntil(t *testing.T, ctx context.Context, c *sql.Conn, replicaID uint32, fault func()) (error, time.Duration, int) {
	t.Helper()
	rows, err := c.QueryContext(ctx, "SELECT id, pad, @@server_id FROM big")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var id, sid uint32
	var pad sql.RawBytes
	for n := 0; n < 1000; n++ {
		if !rows.Next() {
			t.Fatalf("the stream ended after %d rows: %v", n, rows.Err())
		}
		if err := rows.Scan(&id, &pad, &sid); err != nil {
			t.Fatal(err)
		}
		if sid != replicaID {
			t.Fatalf("row %d came from server %d, want the replica %d", n, sid, replicaID)
		}
	}
	fault()
	at := time.Now()
	after := 0
	for rows.Next() {
		after++
	}
	took := time.Since(at)
	if after >= bigRows-1000 {
		t.Fatalf("all %d rows arrived after the fault: the stream was not in progress", after)
	}
	return rows.Err(), took, after
}

// wantServerLost checks that err is ERR 2013 naming the replica at addr.
func wantServerLost(t *testing.T, err error, addr string) {
	t.Helper()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 2013 || !strings.Contains(me.Message, addr) {
		t.Fatalf("stream ended with %v, want ERR 2013 naming replica %s", err, addr)
	}
}

// TestReplicaStopMidStream (issue 8 Must show): the replica serving a 100k-row read is frozen
// (kill -STOP) mid-stream. The client gets ERR 2013 naming the replica within [health]
// timeout plus the wait for the next probe (plus slack for a loaded machine); the same client
// connection runs its next query at once (on the master); after kill -CONT the replica comes
// back up and serves reads again. A statement that is merely slow on a healthy replica
// (SELECT SLEEP past the timeout) is not cut. Then the replica is killed (kill -9) mid-stream:
// ERR 2013 again, and the session goes on.
func TestReplicaStopMidStream(t *testing.T) {
	topo, srv := faultTopology(t)
	replica := topo.Replicas[0]
	rb := srv.Topology().Current().Cluster("main").Replicas[0]
	o := topo.Opts
	db, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, sandbox.TestDatabase, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	t.Run("slow statement on a healthy replica is not cut", func(t *testing.T) {
		start := time.Now()
		var v, sid uint32
		if err := c.QueryRowContext(ctx, "SELECT SLEEP(2.5), @@server_id").Scan(&v, &sid); err != nil {
			t.Fatalf("SELECT SLEEP(2.5) with [health] timeout %v: %v", faultTimeout, err)
		}
		if sid != replica.ServerID || v != 0 {
			t.Fatalf("SLEEP answered %d by server %d, want 0 from the replica %d", v, sid, replica.ServerID)
		}
		t.Logf("SELECT SLEEP(2.5) on the replica took %v", time.Since(start).Round(time.Millisecond))
	})

	t.Run("kill -STOP", func(t *testing.T) {
		thawed := false
		thaw := func() {
			if !thawed {
				thawed = true
				if err := replica.Thaw(); err != nil {
					t.Error(err)
				}
			}
		}
		defer thaw()
		err, took, after := streamUntil(t, ctx, c, replica.ServerID, func() {
			if err := replica.Freeze(); err != nil {
				t.Fatal(err)
			}
		})
		wantServerLost(t, err, replica.Addr())
		t.Logf("frozen replica: ERR after %v (%d rows drained after the freeze): %v", took.Round(10*time.Microsecond), after, err)
		// The bound: the probe that finds the replica silent starts within an interval and
		// gives up after the timeout; the watchdog cuts within a tick of that. One more second
		// for a loaded machine.
		if limit := faultTimeout + faultInterval + time.Second; took > limit {
			t.Errorf("ERR %v after the freeze, want within %v", took, limit)
		}

		// The same client connection goes on, on the master, without waiting.
		start := time.Now()
		if id := serverID(t, ctx, c, ""); id != topo.Master.ServerID {
			t.Errorf("read after the stall answered by %d, want the master %d", id, topo.Master.ServerID)
		}
		if d := time.Since(start); d > faultTimeout {
			t.Errorf("the read after the stall took %v", d)
		}

		thaw()
		eventually(t, ctx, "the thawed replica up and serving reads", func() error {
			if s := rb.State(); s != health.StateUp {
				return fmt.Errorf("replica state %s", s)
			}
			if id := serverID(t, ctx, c, ""); id != replica.ServerID {
				return fmt.Errorf("read answered by %d", id)
			}
			return nil
		})
		// And it streams the whole table again.
		var n int
		if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT id, pad FROM big) b").Scan(&n); err != nil || n != bigRows {
			t.Fatalf("count after the thaw: %d, %v", n, err)
		}
	})

	t.Run("kill -9", func(t *testing.T) {
		err, took, after := streamUntil(t, ctx, c, replica.ServerID, func() {
			if err := replica.Kill(); err != nil {
				t.Fatal(err)
			}
		})
		wantServerLost(t, err, replica.Addr())
		t.Logf("killed replica: ERR after %v (%d rows drained after the kill): %v", took.Round(10*time.Microsecond), after, err)
		if limit := faultTimeout + faultInterval + time.Second; took > limit {
			t.Errorf("ERR %v after the kill, want within %v", took, limit)
		}
		if id := serverID(t, ctx, c, ""); id != topo.Master.ServerID {
			t.Errorf("read after the kill answered by %d, want the master %d", id, topo.Master.ServerID)
		}
		eventually(t, ctx, "the killed replica marked down", func() error {
			if s := rb.State(); s != health.StateDown {
				return fmt.Errorf("replica state %s", s)
			}
			return nil
		})
	})
}

// silentServer accepts TCP connections and never sends a byte (a backend whose process hangs
// before its greeting, or a port some other program holds). It counts the connections it
// accepted and those still open (a connection counts as closed once the peer closed it).
type silentServer struct {
	ln       net.Listener
	accepted atomic.Int64
	open     atomic.Int64
	maxOpen  atomic.Int64
	wg       sync.WaitGroup
}

func startSilentServer(t *testing.T) *silentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{ln: ln}
	var mu sync.Mutex
	var conns []net.Conn
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.accepted.Add(1)
			n := s.open.Add(1)
			for m := s.maxOpen.Load(); n > m && !s.maxOpen.CompareAndSwap(m, n); m = s.maxOpen.Load() {
			}
			s.wg.Go(func() {
				// Read (and drop) until the peer closes: nothing is ever answered.
				_, _ = io.Copy(io.Discard, c)
				s.open.Add(-1)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// TestSilentReplicaTimedOut (issue 8): a replica that accepts TCP but never answers the
// handshake. Reads that land on it while the probes still call it up wait at most
// connect_timeout for the pool's dial, which marks it down, and are served by the real replica;
// the probes time out on it within [health] timeout each and keep it down; and nothing piles up
// while they keep trying: sluice holds one probe connection to it at a time, and the process's
// goroutines stay level over many probe rounds.
func TestSilentReplicaTimedOut(t *testing.T) {
	silent := startSilentServer(t)
	addr := silent.ln.Addr().String()
	real := env.topo.Replicas[0]
	const connectTimeout = time.Second
	srv := startHealthProxy(t, env.topo, healthSetup{
		proxy:        []string{fmt.Sprintf("connect_timeout = %q", connectTimeout)},
		cluster:      []string{`balance = "round-robin"`},
		replicaAddrs: []string{addr, real.Addr()},
		// So many failures before down that only the data plane's failed dial marks it down
		// within the test: the pool's dial timeout is what is tested first.
		health: []string{`interval = "100ms"`, `timeout = "300ms"`, "failures_before_down = 1000"},
	})
	b := backendOf(t, srv, addr)
	d := appDBAt(t, srv.Addr().String())
	ctx := ctxT(t)
	// Round-robin sends one of the first reads to the silent replica.
	for i := 0; b.State() != health.StateDown; i++ {
		if i == 10 {
			t.Fatalf("10 reads and the silent replica is still %s (last error %q)", b.State(), b.LastError())
		}
		start := time.Now()
		var id uint32
		if err := d.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		took := time.Since(start)
		if id != real.ServerID {
			t.Fatalf("read %d answered by %d, want the real replica %d", i, id, real.ServerID)
		}
		if took > connectTimeout+time.Second {
			t.Fatalf("read %d took %v, want within connect_timeout %v (+1s)", i, took, connectTimeout)
		}
		t.Logf("read %d: %v", i, took.Round(time.Millisecond))
	}
	t.Logf("silent replica down: %s", b.LastError())

	// The probes go on timing out on it, one connection each; nothing accumulates.
	rounds := func() uint64 { return srv.Topology().Round() }
	settle := rounds() + 2
	eventually(t, ctx, "two probe rounds", func() error {
		if r := rounds(); r < settle {
			return fmt.Errorf("round %d", r)
		}
		return nil
	})
	goroutines, accepted := runtime.NumGoroutine(), silent.accepted.Load()
	// From here only the probes connect to it (nothing dials a down replica).
	silent.maxOpen.Store(silent.open.Load())
	until := rounds() + 10
	eventually(t, ctx, "ten more probe rounds", func() error {
		if r := rounds(); r < until {
			return fmt.Errorf("round %d", r)
		}
		return nil
	})
	probes := silent.accepted.Load() - accepted
	if probes < 5 {
		t.Errorf("%d connections to the silent replica in 10 probe rounds: the probes do not retry it", probes)
	}
	if b.State() != health.StateDown {
		t.Errorf("silent replica %s after the probes, want down", b.State())
	}
	// One probe's connection at a time, and the previous one while the silent server notices
	// that sluice closed it.
	if m := silent.maxOpen.Load(); m > 2 {
		t.Errorf("up to %d connections to the silent replica open at once over 10 probe rounds, want at most 2", m)
	}
	if g := runtime.NumGoroutine(); g > goroutines+10 {
		t.Errorf("goroutines %d -> %d over 10 probe rounds of the silent replica", goroutines, g)
	}
	t.Logf("%d probe connections in 10 rounds, at most %d open at once; goroutines %d -> %d; last error %q",
		probes, silent.maxOpen.Load(), goroutines, runtime.NumGoroutine(), b.LastError())
	// Reads keep going to the real replica.
	for range 5 {
		if id := serverID(t, ctx, d, ""); id != real.ServerID {
			t.Fatalf("read answered by %d, want the real replica %d", id, real.ServerID)
		}
	}
}

// poolLoad runs 8 sessions × 10 rounds of an INSERT (master) and a SELECT @@server_id (a
// replica) through d and returns the errors.
func poolLoad(ctx context.Context, d *sql.DB, table string) []error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				_, err := d.ExecContext(ctx, "INSERT INTO "+table+" (v) VALUES (1)")
				if err == nil {
					var id uint32
					err = d.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// threadsOf returns the ids of the server threads of user on s.
func threadsOf(t *testing.T, ctx context.Context, s *sandbox.Server, user string) []int64 {
	t.Helper()
	rows, err := mustRoot(t, s).QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", user)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// waitThreadsGone polls s until none of ids is in its process list.
func waitThreadsGone(t *testing.T, ctx context.Context, s *sandbox.Server, ids []int64) {
	t.Helper()
	eventually(t, ctx, "killed threads gone on "+s.Name, func() error {
		left := map[int64]bool{}
		for _, id := range threadsOf(t, ctx, s, env.topo.Opts.ServiceUser) {
			left[id] = true
		}
		for _, id := range ids {
			if left[id] {
				return fmt.Errorf("thread %d still there", id)
			}
		}
		return nil
	})
}

// poolCloses sums the closed-so-far counts of srv's pools.
func poolCloses(srv *server.Server) (idle, closes int) {
	for _, st := range srv.PoolStats() {
		idle += st[1]
		closes += st[2]
	}
	return idle, closes
}

// idleCheckWait is how long the test lets pooled connections rest before using them again:
// the pool trusts a connection given back less than a second ago (proxy idleCheckAfter) and
// checks an older one for a server-side close before lending it.
const idleCheckWait = 1500 * time.Millisecond

// restPastIdleCheck waits until idleCheckWait has passed since last.
func restPastIdleCheck(t *testing.T, ctx context.Context, last time.Time) {
	t.Helper()
	eventually(t, ctx, "pooled connections idle past the pool's idle check", func() error {
		if d := time.Since(last); d < idleCheckWait {
			return fmt.Errorf("idle for %v", d)
		}
		return nil
	})
}

// TestIdlePoolConnectionsKilled (issue 8): sluice's pooled data connections die while idle —
// a DBA kills every thread of the service account on every server, or the server's
// wait_timeout closes them — and the next statements through sluice all succeed: the pool
// finds the dead connections before lending them and dials fresh ones.
func TestIdlePoolConnectionsKilled(t *testing.T) {
	srv := startHealthProxy(t, env.topo, healthSetup{})
	d := appDBAt(t, srv.Addr().String())
	d.SetMaxIdleConns(8)
	ctx := ctxT(t)
	mustExec(t, d, "CREATE TABLE sluice_test.idle_kill (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS sluice_test.idle_kill") })

	t.Run("KILL", func(t *testing.T) {
		if errs := poolLoad(ctx, d, "sluice_test.idle_kill"); len(errs) > 0 {
			t.Fatalf("%d errors before the kill, first: %v", len(errs), errs[0])
		}
		last := time.Now()
		idle, closes := poolCloses(srv)
		if idle == 0 {
			t.Fatal("no idle pooled connection after the load")
		}
		killed := 0
		for _, s := range append([]*sandbox.Server{env.topo.Master}, env.topo.Replicas...) {
			ids := threadsOf(t, ctx, s, env.topo.Opts.ServiceUser)
			for _, id := range ids {
				// A thread may end by itself meanwhile (1094: unknown thread id).
				if err := s.Exec(ctx, fmt.Sprintf("KILL %d", id)); err != nil && !strings.Contains(err.Error(), "1094") {
					t.Fatal(err)
				}
			}
			waitThreadsGone(t, ctx, s, ids)
			killed += len(ids)
		}
		restPastIdleCheck(t, ctx, last)
		if errs := poolLoad(ctx, d, "sluice_test.idle_kill"); len(errs) > 0 {
			t.Fatalf("%d errors after killing %d service threads (%d idle pooled), first: %v", len(errs), killed, idle, errs[0])
		}
		_, after := poolCloses(srv)
		if after-closes < idle {
			t.Errorf("pools closed %d connections after the kill, want the %d dead idle ones", after-closes, idle)
		}
		t.Logf("killed %d service threads (%d idle in this sluice's pools); %d pooled connections dropped, no client error",
			killed, idle, after-closes)
	})

	t.Run("wait_timeout", func(t *testing.T) {
		c := conn(t, d)
		mustExecC(t, c, "SET SESSION wait_timeout = 1")
		// The session's connections to the master and a replica carry its wait_timeout.
		masterThread, _ := backendThread(t, ctx, c, "/* sluice:master */ SELECT SLEEP(0.5) /* wt-master */", "wt-master", env.topo.Master)
		replicaThread, replica := backendThread(t, ctx, c, "SELECT SLEEP(0.5) /* wt-replica */", "wt-replica", env.topo.Replicas...)
		last := time.Now()
		_, closes := poolCloses(srv)
		// The servers close them once idle for a second.
		waitThreadsGone(t, ctx, env.topo.Master, []int64{masterThread})
		waitThreadsGone(t, ctx, replica, []int64{replicaThread})
		restPastIdleCheck(t, ctx, last)
		if errs := poolLoad(ctx, d, "sluice_test.idle_kill"); len(errs) > 0 {
			t.Fatalf("%d errors after wait_timeout closed pooled connections, first: %v", len(errs), errs[0])
		}
		// The session that set it goes on too.
		mustExecC(t, c, "INSERT INTO sluice_test.idle_kill (v) VALUES (2)")
		if _, after := poolCloses(srv); after-closes < 2 {
			t.Errorf("pools closed %d connections, want at least the 2 the servers timed out", after-closes)
		}
	})
}
