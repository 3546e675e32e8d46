package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// switchSluice starts an in-process sluice in front of topo for switchover tests: probes every
// 500ms, a state directory of its own, auto_failover as given, switchover_timeout "2s".
func switchSluice(t *testing.T, topo *sandbox.Topology, autoFailover bool) (*server.Server, string) {
	t.Helper()
	dir := t.TempDir()
	cfg, err := conf.Parse([]byte(topo.SluiceConfigWith(sandbox.SluiceOptions{
		Listen: "127.0.0.1:0",
		ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`,
			fmt.Sprintf("state_dir = %q", dir)},
		HealthKeys: []string{`interval = "500ms"`, `failures_before_down = 3`, fmt.Sprintf("auto_failover = %v", autoFailover),
			`switchover_timeout = "2s"`},
	}) + "\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	logger := zap.NewNop()
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		dev, _ := zap.NewDevelopment()
		logger = zap.New(zapcore.NewTee(dev.Core()))
	}
	srv, err := server.New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, dir
}

// sluiceReaders runs n clients that read through sluice until stopped and counts the reads
// that succeeded and those that failed.
type sluiceReaders struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	last       error
	stop       context.CancelFunc
	wg         sync.WaitGroup
}

func startSluiceReaders(t *testing.T, ctx context.Context, db *sql.DB, n int) *sluiceReaders {
	r := &sluiceReaders{}
	rctx, stop := context.WithCancel(ctx)
	r.stop = stop
	for range n {
		r.wg.Go(func() {
			for rctx.Err() == nil {
				var c int
				err := db.QueryRowContext(rctx, "SELECT COUNT(*) FROM acked").Scan(&c)
				switch {
				case err == nil:
					r.ok.Add(1)
				case rctx.Err() == nil:
					r.failed.Add(1)
					r.mu.Lock()
					r.last = err
					r.mu.Unlock()
				}
				select {
				case <-time.After(5 * time.Millisecond):
				case <-rctx.Done():
				}
			}
		})
	}
	t.Cleanup(r.halt)
	return r
}

func (r *sluiceReaders) halt() { r.stop(); r.wg.Wait() }

// waitAcked waits until the writers have n more acknowledged inserts than now.
func waitAcked(t *testing.T, ctx context.Context, w *sluiceWriters, n int64, what string) {
	t.Helper()
	from := w.total.Load()
	eventually(t, ctx, what, func() error {
		if got := w.total.Load() - from; got < n {
			return fmt.Errorf("%d of %d inserts acknowledged", got, n)
		}
		return nil
	})
}

// TestSwitchover: 8 clients write and 2 read through sluice while the test asks for
// switchovers. Refusals (unknown cluster, a target that is not a replica, FAILOVER CLUSTER of a
// live master) change nothing. A target that cannot catch up (its SQL thread blocked by a
// global read lock) fails after switchover_timeout and the old master takes writes again; a
// target whose SQL thread is stopped is refused. The real switchover then loses no write and
// fails none (statements wait through it), the old master becomes a read-only replica of the
// new one that replicates, the other replica follows, reads never fail, and the state file and
// the metric record it.
func TestSwitchover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, cred, srv, dir, db := switchSetup(t, ctx, true)
	old := topo.Master
	db.SetMaxOpenConns(10)
	tp := srv.Topology()
	target, other := topo.Replicas[0], topo.Replicas[1]
	eventually(t, ctx, "every backend up", func() error {
		for _, b := range tp.Current().Cluster("main").Backends() {
			if !b.Up() {
				return fmt.Errorf("%s is %s", b.Address, b.State())
			}
		}
		return nil
	})

	w := startSluiceWriters(t, ctx, db, 8, 0)
	r := startSluiceReaders(t, ctx, db, 2)
	waitAcked(t, ctx, w, 200, "writers get going")

	t.Run("Refusals", func(t *testing.T) {
		epoch := tp.Current().Epoch
		for _, tc := range []struct {
			cluster, target, want string
		}{
			{"nope", target.Addr(), `no cluster "nope"`},
			{"main", "127.0.0.1:1", "127.0.0.1:1 is not a replica of cluster main"},
			{"main", old.Addr(), "is already the master of cluster main"},
		} {
			err := adminDo(t, srv, fmt.Sprintf("SWITCHOVER CLUSTER %s TO '%s'", tc.cluster, tc.target))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Switchover(%s, %s) = %v, want an error containing %q", tc.cluster, tc.target, err, tc.want)
			}
		}
		if err := adminDo(t, srv, "FAILOVER CLUSTER main"); err == nil || !strings.Contains(err.Error(), "use SWITCHOVER") {
			t.Errorf("FailoverCluster with a live master = %v, want a refusal pointing to SWITCHOVER", err)
		}
		if err := adminDo(t, srv, "FAILOVER CLUSTER nope"); err == nil || !strings.Contains(err.Error(), `no cluster "nope"`) {
			t.Errorf("FailoverCluster(nope) = %v", err)
		}
		if e := tp.Current().Epoch; e != epoch {
			t.Errorf("a refusal published a snapshot (epoch %d -> %d)", epoch, e)
		}
	})

	t.Run("TargetLagsUndone", func(t *testing.T) {
		root := mustRoot(t, target)
		lockConn, err := root.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lockConn.Close()
		// The replica's SQL thread keeps running but cannot apply while the lock is held.
		if _, err := lockConn.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
			t.Fatal(err)
		}
		waitAcked(t, ctx, w, 20, "writes the target cannot apply")
		start := time.Now()
		err = srv.Switchover(ctx, "main", target.Addr())
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "did not catch up") || !strings.Contains(err.Error(), "switchover_timeout") {
			t.Fatalf("Switchover to a lagging target = %v, want a catch-up timeout naming switchover_timeout", err)
		}
		t.Logf("refused after %v: %v", took.Round(time.Millisecond), err)
		// The server-side wait ends a few tens of milliseconds before the deadline.
		if took < 1900*time.Millisecond {
			t.Errorf("gave up after %v, before switchover_timeout 2s", took)
		}
		if _, err := lockConn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
			t.Fatal(err)
		}
		if readOnly(t, old) {
			t.Error("old master still read_only after the undo")
		}
		if c := tp.Current().Cluster("main"); c.Master.Address != old.Addr() || c.WritesHeld != "" {
			t.Errorf("after the undo: master %s, writes held %q", c.Master.Address, c.WritesHeld)
		}
		waitAcked(t, ctx, w, 50, "writes go on to the old master after the undo")
	})

	t.Run("TargetSQLThreadStopped", func(t *testing.T) {
		if err := target.Exec(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		err := srv.Switchover(ctx, "main", target.Addr())
		if err2 := target.Exec(ctx, "START SLAVE SQL_THREAD"); err2 != nil {
			t.Fatal(err2)
		}
		if err == nil || !strings.Contains(err.Error(), target.Addr()) {
			t.Fatalf("Switchover to a replica whose SQL thread is stopped = %v, want an error naming it", err)
		}
		t.Logf("refused: %v", err)
		if readOnly(t, old) {
			t.Error("old master read_only after a refused switchover")
		}
		waitAcked(t, ctx, w, 50, "writes go on to the old master")
	})

	// The target must be up (caught up) again before the real switchover.
	eventually(t, ctx, "target up again", func() error {
		if b := tp.Current().Cluster("main").Replicas[0]; !b.Up() {
			return fmt.Errorf("%s is %s", b.Address, b.State())
		}
		return nil
	})
	failedBefore := w.errors.Load()
	start := time.Now()
	if err := adminDo(t, srv, "SWITCHOVER CLUSTER main TO '"+target.Addr()+"'"); err != nil {
		t.Fatal(err)
	}
	t.Logf("switchover took %v", time.Since(start).Round(time.Millisecond))
	waitAcked(t, ctx, w, 200, "writes go on through the new master")
	w.halt()
	r.halt()

	t.Run("NoWriteFailed", func(t *testing.T) {
		t.Logf("%d inserts acknowledged, %d failed (%d during the switchover)", w.total.Load(), w.errors.Load(), w.errors.Load()-failedBefore)
		for msg, n := range w.errs {
			t.Errorf("%d inserts failed with: %s", n, msg)
		}
	})
	t.Run("EveryAcknowledgedWriteOnTheNewMaster", func(t *testing.T) {
		ids := w.ids()
		missing, rows := missingOn(t, ctx, serviceDB(t, topo, target), ids)
		t.Logf("%d acknowledged rows checked one by one; the new master holds %d rows", len(ids), rows)
		if len(missing) > 0 {
			t.Errorf("%d acknowledged inserts missing on the new master, first ones: %v", len(missing), missing[:min(len(missing), 10)])
		}
	})
	t.Run("ReadsKeptWorking", func(t *testing.T) {
		t.Logf("%d reads, %d failed", r.ok.Load(), r.failed.Load())
		if n := r.failed.Load(); n > 0 {
			t.Errorf("%d reads failed, the last with: %v", n, r.last)
		}
	})
	t.Run("Topology", func(t *testing.T) {
		c := tp.Current().Cluster("main")
		if c.Master.Address != target.Addr() || len(c.Fenced) != 0 || c.WritesHeld != "" || c.WritesRefused != "" {
			t.Errorf("master %s, fenced %d, held %q, refused %q", c.Master.Address, len(c.Fenced), c.WritesHeld, c.WritesRefused)
		}
		var addrs []string
		for _, b := range c.Replicas {
			addrs = append(addrs, b.Address)
		}
		if strings.Join(addrs, ",") != old.Addr()+","+other.Addr() {
			t.Errorf("replicas %v, want the old master in the target's place", addrs)
		}
	})
	t.Run("OldMasterReplicatesReadOnly", func(t *testing.T) {
		if !readOnly(t, old) {
			t.Error("old master writable after the switchover")
		}
		// Semi-sync moved with the master: the old one's applier must not wait for ACKs.
		for _, v := range []struct {
			s    *sandbox.Server
			want string
		}{{target, "ON"}, {old, "OFF"}} {
			if got, err := v.s.Variable(ctx, "rpl_semi_sync_master_enabled"); err != nil || got != v.want {
				t.Errorf("%s rpl_semi_sync_master_enabled = %q (%v), want %s", v.s.Name, got, err, v.want)
			}
		}
		for _, s := range []*sandbox.Server{old, other} {
			eventually(t, ctx, s.Name+" replicates from the new master", func() error {
				rs := controlState(t, ctx, s.Addr(), cred).Replica
				if rs.MasterPort != target.Port || !rs.IOConnected() || !rs.SQLRunning {
					return fmt.Errorf("master port %d, IO %s, SQL %v, errors %q %q", rs.MasterPort, rs.IORunning, rs.SQLRunning, rs.LastIOError, rs.LastSQLError)
				}
				return nil
			})
		}
		mustExec(t, db, "INSERT INTO acked (id, writer) VALUES (?, ?)", int64(42), -1)
		for _, s := range []*sandbox.Server{old, other} {
			sdb := serviceDB(t, topo, s)
			eventually(t, ctx, "a write through sluice reaches "+s.Name, func() error {
				var n int
				if err := sdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM acked WHERE id = 42").Scan(&n); err != nil {
					return err
				}
				if n != 1 {
					return errors.New("not there yet")
				}
				return nil
			})
		}
	})
	t.Run("StateFileAndMetric", func(t *testing.T) {
		st, ok, err := health.ReadFailoverState(dir, "main")
		if err != nil || !ok {
			t.Fatalf("state file: %v %v", ok, err)
		}
		if n := len(st.History); st.Master != target.Addr() || n != 1 || st.History[0].Outcome != health.OutcomeSwitchover ||
			len(st.Fenced) != 0 || !st.LastFailover.IsZero() {
			t.Errorf("state file: %+v", st)
		}
		resp, err := http.Get("http://" + srv.MetricsAddr().String() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`sluice_failovers_total{cluster="main",outcome="switchover"} 1`,
			`sluice_failovers_total{cluster="main",outcome="switchover_failed"} 2`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
	t.Run("SwitchBackWithOpenTransaction", func(t *testing.T) {
		switchBackWithOpenTransaction(t, ctx, srv, db, topo, old, target)
	})
}

// TestSwitchover (continued) switches back to the original master while a client holds a
// transaction open on the current one: the switchover waits switchover_timeout for it, then
// cuts it off; its COMMIT fails and its row is nowhere, while other writers fail nothing.
func switchBackWithOpenTransaction(t *testing.T, ctx context.Context, srv *server.Server, db *sql.DB, topo *sandbox.Topology, to, from *sandbox.Server) {
	tx, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	mustExecC(t, tx, "BEGIN")
	mustExecC(t, tx, "INSERT INTO acked (id, writer) VALUES (?, ?)", int64(77), -2)
	w := startSluiceWriters(t, ctx, db, 4, 5_000_000_000_000)
	waitAcked(t, ctx, w, 50, "writers get going")
	start := time.Now()
	if err := srv.Switchover(ctx, "main", to.Addr()); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	waitAcked(t, ctx, w, 50, "writes go on through the original master")
	w.halt()
	t.Logf("switched back in %v; %d inserts acknowledged, %d failed", took.Round(time.Millisecond), w.total.Load(), w.errors.Load())
	if took < 1900*time.Millisecond {
		t.Errorf("the switchover took %v: it did not wait switchover_timeout for the open transaction", took)
	}
	for msg, n := range w.errs {
		t.Errorf("%d inserts failed with: %s", n, msg)
	}
	if _, err := tx.ExecContext(ctx, "COMMIT"); err == nil {
		t.Error("COMMIT of a transaction cut off by the switchover succeeded")
	}
	for _, s := range []*sandbox.Server{to, from} {
		var n int
		if err := serviceDB(t, topo, s).QueryRowContext(ctx, "SELECT COUNT(*) FROM acked WHERE id = 77").Scan(&n); err != nil || n != 0 {
			t.Errorf("%s holds %d rows of the cut-off transaction (%v)", s.Name, n, err)
		}
	}
	missing, _ := missingOn(t, ctx, serviceDB(t, topo, to), w.ids())
	if len(missing) > 0 {
		t.Errorf("%d acknowledged inserts missing on %s", len(missing), to.Name)
	}
	if c := srv.Topology().Current().Cluster("main"); c.Master.Address != to.Addr() {
		t.Errorf("master %s, want %s", c.Master.Address, to.Addr())
	}
}

// TestFailoverClusterAfterKill: with auto_failover off, the master is killed with SIGKILL;
// once the probes mark it down, FailoverCluster promotes a replica, sluice switches to it and
// writes through sluice work again.
func TestFailoverClusterAfterKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topo, _, srv, dir, db := switchSetup(t, ctx, false)
	old := topo.Master
	mustExec(t, db, "INSERT INTO acked (id, writer) VALUES (1, 0)")
	tp := srv.Topology()
	oldBackend := tp.Current().Cluster("main").Master
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "sluice marks the master down", func() error {
		if s := oldBackend.State(); s != health.StateDown {
			return fmt.Errorf("old master %s", s)
		}
		return nil
	})
	if c := tp.Current().Cluster("main"); c.Master != oldBackend {
		t.Fatalf("the master changed to %s with auto_failover off", c.Master.Address)
	}
	if err := adminDo(t, srv, "FAILOVER CLUSTER main"); err != nil {
		t.Fatal(err)
	}
	c := tp.Current().Cluster("main")
	if c.Master.Address == old.Addr() {
		t.Fatal("the master did not change")
	}
	t.Logf("promoted %s", c.Master.Address)
	mustExec(t, db, "INSERT INTO acked (id, writer) VALUES (2, 0)")
	var n int
	if err := serviceDB(t, topo, serverAt(t, topo, c.Master.Address)).QueryRowContext(ctx, "SELECT COUNT(*) FROM acked").Scan(&n); err != nil || n != 2 {
		t.Errorf("new master holds %d rows (%v), want 2", n, err)
	}
	st, ok, err := health.ReadFailoverState(dir, "main")
	if err != nil || !ok || st.Master != c.Master.Address {
		t.Errorf("state file: %+v %v %v", st, ok, err)
	}
	if err := srv.FailoverCluster(ctx, "main"); err == nil || !strings.Contains(err.Error(), "use SWITCHOVER") {
		t.Errorf("a second FailoverCluster with the new master up = %v, want a refusal", err)
	}
}

// adminDo runs one admin command through the mariadb client on srv's admin
// port; a refusal comes back as an error carrying the client's message.
func adminDo(t *testing.T, srv *server.Server, sql string) error {
	t.Helper()
	_, errOut, err := adminCLI(t, srv, adminPassword, sql)
	if err != nil {
		return fmt.Errorf("%s: %v: %s", sql, err, errOut)
	}
	return nil
}

// switchSetup starts a semi-sync topology with the table sluice_test.acked
// replicated everywhere, a switchover sluice in front of it (auto_failover as
// given) and an application pool through that sluice, closed at the end of
// the test.
func switchSetup(t *testing.T, ctx context.Context, autoFailover bool) (*sandbox.Topology, health.Credentials, *server.Server, string, *sql.DB) {
	t.Helper()
	topo, cred := failoverTopology(t, true)
	if err := topo.Master.Exec(ctx, "CREATE TABLE sluice_test.acked (id BIGINT PRIMARY KEY, writer INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if err := topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	srv, dir := switchSluice(t, topo, autoFailover)
	quietDriver(t)
	o := topo.Opts
	db, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, sandbox.TestDatabase, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return topo, cred, srv, dir, db
}
