package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// These tests put sluice between the writers and a sandbox topology of their own and let it
// fail over by itself: probes every 500ms, down after 3 failures, auto_failover on.

// failoverSluice starts an in-process sluice in front of topo with automatic failover and a
// state directory of its own; its log is recorded (and printed with SLUICE_TEST_LOG).
// failover_write_wait is writeWait ("10s" when empty).
func failoverSluice(t *testing.T, topo *sandbox.Topology, writeWait ...string) (*server.Server, *observer.ObservedLogs, string) {
	t.Helper()
	dir := t.TempDir()
	wait := "10s"
	if len(writeWait) > 0 {
		wait = writeWait[0]
	}
	srv, logs := failoverSluiceIn(t, topo, dir, wait)
	return srv, logs, dir
}

// failoverSluiceIn is failoverSluice with state_dir dir ("" for none) and failover_write_wait wait.
func failoverSluiceIn(t *testing.T, topo *sandbox.Topology, dir, wait string) (*server.Server, *observer.ObservedLogs) {
	t.Helper()
	cfg, err := conf.Parse([]byte(topo.SluiceConfigWith(sandbox.SluiceOptions{
		Listen: "127.0.0.1:0",
		ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`,
			fmt.Sprintf("state_dir = %q", dir)},
		HealthKeys: []string{`interval = "500ms"`, `failures_before_down = 3`, `auto_failover = true`,
			fmt.Sprintf("failover_write_wait = %q", wait)},
	}) + "\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	logger := zap.New(core)
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		dev, _ := zap.NewDevelopment()
		logger = zap.New(zapcore.NewTee(core, dev.Core()))
	}
	srv, err := server.New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, logs
}

// sluiceWriters runs n clients that insert through sluice at addr until stopped, each with
// fresh ids per attempt (a failed insert may still have committed), and records what was
// acknowledged and when.
type sluiceWriters struct {
	acked    [][]int64
	total    atomic.Int64
	killedAt atomic.Int64 // unix nanos, 0 before the kill
	// firstAfter is when the first insert that started after the kill was acknowledged.
	firstAfter atomic.Int64
	errors     atomic.Int64
	// errs counts the failed attempts by message.
	errMu sync.Mutex
	errs  map[string]int
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func startSluiceWriters(t *testing.T, ctx context.Context, db *sql.DB, n int, base int64) *sluiceWriters {
	t.Helper()
	w := &sluiceWriters{acked: make([][]int64, n), errs: map[string]int{}}
	wctx, stop := context.WithCancel(ctx)
	w.stop = stop
	for i := range n {
		w.wg.Go(func() {
			for k := int64(1); wctx.Err() == nil; k++ {
				id := base + int64(i+1)*1_000_000_000 + k
				start := time.Now().UnixNano()
				sctx, cancel := context.WithTimeout(wctx, 15*time.Second)
				_, err := db.ExecContext(sctx, "INSERT INTO acked (id, writer) VALUES (?, ?)", id, i)
				cancel()
				if err == nil {
					w.acked[i] = append(w.acked[i], id)
					w.total.Add(1)
					if k := w.killedAt.Load(); k != 0 && start > k {
						w.firstAfter.CompareAndSwap(0, time.Now().UnixNano())
					}
					continue
				}
				if wctx.Err() != nil {
					return
				}
				w.errors.Add(1)
				w.errMu.Lock()
				w.errs[err.Error()]++
				w.errMu.Unlock()
				select {
				case <-time.After(20 * time.Millisecond):
				case <-wctx.Done():
				}
			}
		})
	}
	t.Cleanup(w.halt)
	return w
}

func (w *sluiceWriters) halt() { w.stop(); w.wg.Wait() }

func (w *sluiceWriters) ids() []int64 {
	var out []int64
	for _, l := range w.acked {
		out = append(out, l...)
	}
	return out
}

// missingOn returns the ids that db's acked table lacks.
func missingOn(t *testing.T, ctx context.Context, db *sql.DB, ids []int64) ([]int64, int) {
	t.Helper()
	have := map[int64]bool{}
	rows, err := db.QueryContext(ctx, "SELECT id FROM acked")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var missing []int64
	for _, id := range ids {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	return missing, len(have)
}

// recordedFailover waits until sluice has written a failover to its state file under dir
// (right after it published the new master, so possibly after writes resumed) and returns it.
func recordedFailover(t *testing.T, ctx context.Context, dir string) health.FailoverState {
	t.Helper()
	var st health.FailoverState
	eventually(t, ctx, "the failover in the state file", func() error {
		var ok bool
		var err error
		st, ok, err = health.ReadFailoverState(dir, "main")
		switch {
		case err != nil:
			return err
		case !ok || len(st.History) == 0:
			return errors.New("no failover recorded yet")
		}
		return nil
	})
	return st
}

func countRows(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM acked").Scan(&n)
	return n, err
}

func quietDriver(t *testing.T) {
	mysql.SetLogger(log.New(io.Discard, "", 0))
	t.Cleanup(func() { mysql.SetLogger(log.New(os.Stderr, "[mysql] ", log.Ldate|log.Ltime|log.Lshortfile)) })
}

// TestFailoverThroughSluice: 8 clients write through sluice; the master is killed with
// SIGKILL; sluice detects it, promotes a replica by itself and the clients' writes succeed
// again. Every acknowledged insert is on the new master, row by row; the other replica
// replicates from it; the old master, restarted, is fenced by sluice (read-only, logged,
// state fenced) and gets none of the writes that go on; the state file names the new master.
// Detection, promotion and first-write times are logged (make failover-drill prints them).
func TestFailoverThroughSluice(t *testing.T) {
	topo, cred := failoverTopology(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	old := topo.Master
	if err := old.Exec(ctx, "CREATE TABLE sluice_test.acked (id BIGINT PRIMARY KEY, writer INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if err := topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	srv, logs, dir := failoverSluice(t, topo)
	quietDriver(t)
	o := topo.Opts
	db, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, sandbox.TestDatabase, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(8)

	const writers = 8
	w := startSluiceWriters(t, ctx, db, writers, 0)
	eventually(t, ctx, "writers get going", func() error {
		if n := w.total.Load(); n < 200 {
			return fmt.Errorf("%d acknowledged inserts", n)
		}
		return nil
	})

	tp := srv.Topology()
	oldBackend := tp.Current().Cluster("main").Master
	epoch := tp.Current().Epoch
	killedAt := time.Now()
	w.killedAt.Store(killedAt.UnixNano())
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	ackedBeforeKill := w.total.Load()
	var detectedAt, promotedAt time.Time
	eventually(t, ctx, "sluice marks the master down", func() error {
		if s := oldBackend.State(); s != health.StateDown && s != health.StateFenced {
			return fmt.Errorf("old master %s", s)
		}
		detectedAt = time.Now()
		return nil
	})
	eventually(t, ctx, "sluice publishes a new master", func() error {
		if tp.Current().Epoch == epoch {
			return errors.New("same epoch")
		}
		promotedAt = time.Now()
		return nil
	})
	eventually(t, ctx, "writes resume through sluice", func() error {
		if w.firstAfter.Load() == 0 {
			return errors.New("no insert started after the kill acknowledged yet")
		}
		if n := w.total.Load(); n < ackedBeforeKill+100 {
			return fmt.Errorf("%d inserts acknowledged since the kill", n-ackedBeforeKill)
		}
		return nil
	})
	w.halt()

	c := tp.Current().Cluster("main")
	newMaster := serverAt(t, topo, c.Master.Address)
	firstWrite := time.Unix(0, w.firstAfter.Load())
	t.Logf("drill: %d writers through sluice, %d inserts acknowledged before the kill, %d in all, %d failed attempts",
		writers, ackedBeforeKill, w.total.Load(), w.errors.Load())
	for msg, n := range w.errs {
		t.Logf("drill: %d attempts failed with: %s", n, msg)
	}
	// sluice's own record times detection (the failover starts when the probes mark the
	// master down) and promotion; the test's polling (every 20ms) only bounds them.
	st := recordedFailover(t, ctx, dir)
	res := st.History[len(st.History)-1]
	t.Logf("drill: detection %v after kill -9 (probes every 500ms, down after 3 failures; seen by the test at %v)",
		res.Started.Sub(killedAt).Round(time.Millisecond), detectedAt.Sub(killedAt).Round(time.Millisecond))
	t.Logf("drill: promotion took %v (%s), published %v after the kill (seen by the test at %v)",
		res.Finished.Sub(res.Started).Round(time.Millisecond), stepsString(&res),
		res.Finished.Sub(killedAt).Round(time.Millisecond), promotedAt.Sub(killedAt).Round(time.Millisecond))
	t.Logf("drill: first acknowledged write %v after the kill", firstWrite.Sub(killedAt).Round(time.Millisecond))
	t.Logf("drill: old master %s, new master %s, epoch %d", old.Addr(), newMaster.Addr(), tp.Current().Epoch)
	if newMaster == old {
		t.Fatal("the master did not change")
	}

	t.Run("EveryAcknowledgedWriteOnTheNewMaster", func(t *testing.T) {
		ids := w.ids()
		missing, rows := missingOn(t, ctx, serviceDB(t, topo, newMaster), ids)
		t.Logf("%d acknowledged rows checked one by one; the new master holds %d rows", len(ids), rows)
		if len(missing) > 0 {
			t.Errorf("%d acknowledged inserts missing on the new master, first ones: %v", len(missing), missing[:min(len(missing), 10)])
		}
	})

	t.Run("OtherReplicaFollows", func(t *testing.T) {
		var other *sandbox.Server
		for _, r := range topo.Replicas {
			if r != newMaster {
				other = r
			}
		}
		eventually(t, ctx, other.Name+" replicates from the new master", func() error {
			rs := controlState(t, ctx, other.Addr(), cred).Replica
			if rs.MasterPort != newMaster.Port || !rs.IOConnected() {
				return fmt.Errorf("master port %d, IO %s, error %d %s", rs.MasterPort, rs.IORunning, rs.LastIOErrno, rs.LastIOError)
			}
			return nil
		})
		if len(c.Replicas) != 1 || c.Replicas[0].Address != other.Addr() {
			t.Errorf("sluice's replicas after the failover: %v", c.ReplicaStates())
		}
	})

	t.Run("StateFile", func(t *testing.T) {
		st, ok, err := health.ReadFailoverState(dir, "main")
		if err != nil || !ok {
			t.Fatalf("state file: %v %v", ok, err)
		}
		if st.Master != newMaster.Addr() || len(st.History) != 1 || st.History[0].Outcome != health.OutcomePromoted {
			t.Errorf("state file: %+v", st)
		}
	})

	t.Run("OldMasterFenced", func(t *testing.T) {
		if err := old.Start(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, ctx, "sluice fences the restarted old master", func() error {
			if ro, err := old.Variable(ctx, "read_only"); err != nil || ro != "ON" {
				return fmt.Errorf("read_only %q (%v)", ro, err)
			}
			if logs.FilterMessageSnippet("fenced").FilterField(zap.String("backend", old.Addr())).Len() == 0 {
				return errors.New("no fenced log line")
			}
			return nil
		})
		if s := oldBackend.State(); s != health.StateFenced {
			t.Errorf("old master's state %s, want fenced", s)
		}
		if n := scrapeFrom(t, srv, fmt.Sprintf(`sluice_backend_state_changes_total{backend=%q,cluster="main",to="fenced"}`, old.Addr())); n != 1 {
			t.Errorf("state changes of the old master to fenced counted %v, want 1", n)
		}
		oldDB := serviceDB(t, topo, old)
		before, err := countRows(ctx, oldDB)
		if err != nil {
			t.Fatal(err)
		}
		w2 := startSluiceWriters(t, ctx, db, 4, 100_000_000_000)
		eventually(t, ctx, "writes go on", func() error {
			if n := w2.total.Load(); n < 100 {
				return fmt.Errorf("%d inserts", n)
			}
			return nil
		})
		w2.halt()
		after, err := countRows(ctx, oldDB)
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Errorf("the fenced old master's rows went from %d to %d while writes went on", before, after)
		}
		if missing, _ := missingOn(t, ctx, serviceDB(t, topo, newMaster), w2.ids()); len(missing) > 0 {
			t.Errorf("%d writes after the fence missing on the new master", len(missing))
		}
		st, _, err := health.ReadFailoverState(dir, "main")
		if err != nil || len(st.Fenced) != 1 || st.Fenced[0] != old.Addr() {
			t.Errorf("state file after the fence: %+v, %v", st, err)
		}
	})

	// A restarted sluice (same configuration, naming the old master) starts from the state
	// file's master, and keeps the old master fenced.
	t.Run("RestartUsesStateFile", func(t *testing.T) {
		srv.Close()
		srv2, _ := failoverSluiceIn(t, topo, dir, "10s")
		c := srv2.Topology().Current().Cluster("main")
		if c.Master.Address != newMaster.Addr() || len(c.Fenced) != 1 || c.Fenced[0].Address != old.Addr() ||
			c.Fenced[0].State() != health.StateFenced {
			t.Fatalf("after restart: master %s, fenced %v", c.Master.Address, c.Fenced)
		}
		db2, err := sql.Open("mysql", dsn(srv2.Addr().String(), o.AppUser, o.AppPassword, sandbox.TestDatabase, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer db2.Close()
		mustExec(t, db2, "INSERT INTO acked (id, writer) VALUES (-2, -2)")
		if missing, _ := missingOn(t, ctx, serviceDB(t, topo, newMaster), []int64{-2}); len(missing) > 0 {
			t.Error("the write after the restart is not on the new master")
		}
	})

	// Without a state file, two writable servers that replicate from no one leave sluice
	// unable to tell the master: it refuses writes rather than guess.
	t.Run("AmbiguousAtStartRefusesWrites", func(t *testing.T) {
		if err := old.Exec(ctx, "SET GLOBAL read_only = OFF"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := old.Exec(ctx, "SET GLOBAL read_only = ON"); err != nil {
				t.Error(err)
			}
		}()
		srv3, _ := failoverSluiceIn(t, topo, "", "1s")
		db3, err := sql.Open("mysql", dsn(srv3.Addr().String(), o.AppUser, o.AppPassword, sandbox.TestDatabase, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer db3.Close()
		_, err = db3.ExecContext(ctx, "INSERT INTO acked (id, writer) VALUES (-3, -3)")
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 2003 || !strings.Contains(me.Message, "cluster main") ||
			!strings.Contains(me.Message, "cannot tell which server is the master") {
			t.Fatalf("write with two writable masters: %v, want ERR 2003 refusing to guess", err)
		}
		t.Logf("refused: %v", err)
		if err := db3.QueryRowContext(ctx, "SELECT 1").Scan(new(int)); err != nil {
			t.Errorf("reads with writes refused: %v", err)
		}
	})
}

// TestTwoSluicesOnePromotion: two sluice instances in front of one topology, each with
// writers; the master is killed. Exactly one instance promotes, the other follows, and both
// send their writes to the same new master.
func TestTwoSluicesOnePromotion(t *testing.T) {
	topo, _ := failoverTopology(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := topo.Master.Exec(ctx, "CREATE TABLE sluice_test.acked (id BIGINT PRIMARY KEY, writer INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if err := topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	quietDriver(t)
	o := topo.Opts
	type instance struct {
		srv *server.Server
		dir string
		db  *sql.DB
		w   *sluiceWriters
	}
	var inst [2]*instance
	for i := range inst {
		srv, _, dir := failoverSluice(t, topo)
		db, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, sandbox.TestDatabase, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		inst[i] = &instance{srv: srv, dir: dir, db: db}
		inst[i].w = startSluiceWriters(t, ctx, db, 4, int64(i)*100_000_000_000)
	}
	eventually(t, ctx, "writers get going", func() error {
		for i, in := range inst {
			if n := in.w.total.Load(); n < 50 {
				return fmt.Errorf("instance %d: %d inserts", i, n)
			}
		}
		return nil
	})
	old := topo.Master
	for _, in := range inst {
		in.w.killedAt.Store(time.Now().UnixNano())
	}
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "both instances switch master", func() error {
		for i, in := range inst {
			if m := in.srv.Topology().Current().Cluster("main").Master.Address; m == old.Addr() {
				return fmt.Errorf("instance %d still uses %s", i, m)
			}
		}
		return nil
	})
	eventually(t, ctx, "writes resume through both", func() error {
		for i, in := range inst {
			if in.w.firstAfter.Load() == 0 {
				return fmt.Errorf("instance %d: no write since the kill", i)
			}
		}
		return nil
	})
	for _, in := range inst {
		in.w.halt()
	}
	m0 := inst[0].srv.Topology().Current().Cluster("main").Master.Address
	m1 := inst[1].srv.Topology().Current().Cluster("main").Master.Address
	if m0 != m1 {
		t.Fatalf("instance 0 writes to %s, instance 1 to %s", m0, m1)
	}
	outcomes := map[health.Outcome]int{}
	for i, in := range inst {
		st := recordedFailover(t, ctx, in.dir)
		if st.Master != m0 || len(st.History) != 1 {
			t.Fatalf("instance %d state: %+v", i, st)
		}
		outcomes[st.History[0].Outcome]++
		t.Logf("instance %d: %s %s -> %s, epoch %d", i, st.History[0].Outcome, st.History[0].OldMaster, st.History[0].NewMaster, st.Epoch)
	}
	if outcomes[health.OutcomePromoted] != 1 || outcomes[health.OutcomeFollowed] != 1 {
		t.Errorf("outcomes %v, want one promoted and one followed", outcomes)
	}
	// The counter follows the state file write.
	eventually(t, ctx, "sluice_failovers_total counts one promoted and one followed over both instances", func() error {
		var promoted, followed float64
		for _, in := range inst {
			promoted += scrapeFrom(t, in.srv, `sluice_failovers_total{cluster="main",outcome="promoted"}`)
			followed += scrapeFrom(t, in.srv, `sluice_failovers_total{cluster="main",outcome="followed"}`)
		}
		if promoted != 1 || followed != 1 {
			return fmt.Errorf("%v promoted, %v followed", promoted, followed)
		}
		return nil
	})
	newMaster := serverAt(t, topo, m0)
	var all []int64
	for _, in := range inst {
		all = append(all, in.w.ids()...)
	}
	if missing, rows := missingOn(t, ctx, serviceDB(t, topo, newMaster), all); len(missing) > 0 {
		t.Errorf("%d of %d acknowledged inserts missing on the new master (%d rows), first: %v", len(missing), len(all), rows, missing[:min(len(missing), 10)])
	}
}

// TestFrozenMasterStatementsFail: the master hangs (SIGSTOP: its sockets stay open, nothing
// answers). A statement already sent to it through sluice does not hang: once it has waited
// [health] timeout on a master that fails its probes, the stall watchdog cuts it and the
// client gets ERR 2013 (had it not, the master going down would close what sluice lent it).
// The replicas still hold their connections to the frozen master, so nothing is promoted; a
// new write waits failover_write_wait and then fails with ERR 2003 naming the cluster. Thawed,
// the master takes writes again.
func TestFrozenMasterStatementsFail(t *testing.T) {
	topo, _ := failoverTopology(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := topo.Master.Exec(ctx, "CREATE TABLE sluice_test.acked (id BIGINT PRIMARY KEY, writer INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	srv, _, _ := failoverSluice(t, topo, "2s")
	quietDriver(t)
	o := topo.Opts
	db, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, sandbox.TestDatabase, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustExec(t, db, "INSERT INTO acked (id, writer) VALUES (1, 0)")
	epoch := srv.Topology().Current().Epoch
	master := srv.Topology().Current().Cluster("main").Master

	if err := topo.Master.Freeze(); err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := topo.Master.Thaw(); err != nil {
				t.Error(err)
			}
		}
	}
	defer thaw()

	// The client's own read timeout (30 s in dsn) is far beyond detection (3 probes of 1 s).
	_, err = db.ExecContext(ctx, "INSERT INTO acked (id, writer) VALUES (2, 0)")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 2013 {
		t.Fatalf("statement in flight on the frozen master: %v, want ERR 2013 from sluice", err)
	}
	t.Logf("in flight: %v", err)
	eventually(t, ctx, "the frozen master marked down", func() error {
		if s := master.State(); s != health.StateDown {
			return fmt.Errorf("master state %s", s)
		}
		return nil
	})

	_, err = db.ExecContext(ctx, "INSERT INTO acked (id, writer) VALUES (3, 0)")
	if !errors.As(err, &me) || me.Number != 2003 || !strings.Contains(me.Message, "cluster main") ||
		!strings.Contains(me.Message, "failover_write_wait 2s") {
		t.Fatalf("new write with the master down: %v, want ERR 2003 naming the cluster", err)
	}
	t.Logf("new write: %v", err)
	if e := srv.Topology().Current().Epoch; e != epoch {
		t.Errorf("epoch %d -> %d: a failover happened although the replicas still see the master", epoch, e)
	}

	thaw()
	eventually(t, ctx, "writes through sluice again", func() error {
		_, err := db.ExecContext(ctx, "INSERT INTO acked (id, writer) VALUES (4, 0)")
		return err
	})
	if srv.Topology().Current().Cluster("main").Master != master {
		t.Error("the master changed")
	}
}
