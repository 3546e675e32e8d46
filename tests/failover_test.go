package tests

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/sandbox"
)

// The failover tests drive health.Failover directly against sandbox topologies of their own
// (they kill and promote servers, so they never touch the shared one). failover_sluice_test.go
// puts sluice between the writers and the servers and lets it fail over by itself.

// failoverTopology starts a master, two replicas and an auth server for one test.
func failoverTopology(t *testing.T, semiSync bool) (*sandbox.Topology, health.Credentials) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: 2, SemiSync: semiSync})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Stop(); err != nil {
			t.Error(err)
		}
	})
	return topo, health.Credentials{User: topo.Opts.ServiceUser, Password: topo.Opts.ServicePassword, Timeout: time.Second}
}

func replicaAddrs(topo *sandbox.Topology) []string {
	var out []string
	for _, r := range topo.Replicas {
		out = append(out, r.Addr())
	}
	return out
}

func serverAt(t *testing.T, topo *sandbox.Topology, addr string) *sandbox.Server {
	t.Helper()
	for _, s := range topo.Servers() {
		if s.Addr() == addr {
			return s
		}
	}
	t.Fatalf("no sandbox server at %s", addr)
	return nil
}

// serviceDB opens a pool for the service account on s's test database.
func serviceDB(t *testing.T, topo *sandbox.Topology, s *sandbox.Server) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", s.DSN(topo.Opts.ServiceUser, topo.Opts.ServicePassword, sandbox.TestDatabase))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func controlState(t *testing.T, ctx context.Context, addr string, cred health.Credentials) health.ServerState {
	t.Helper()
	c, err := health.Dial(ctx, addr, cred)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// eventually calls cond until it returns nil or ctx ends, then fails with its last error.
func eventually(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (%v)", what, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// probeUntilDown pings addr every interval, as sluice's prober does, and returns when failures
// probes in a row have failed: the moment sluice would declare the master down.
func probeUntilDown(ctx context.Context, addr string, cred health.Credentials, interval time.Duration, failures int) (time.Time, error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failed := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, cred.Timeout)
		c, err := health.Dial(pctx, addr, cred)
		if err == nil {
			err = c.Ping(pctx)
			c.Close()
		}
		cancel()
		if err != nil {
			failed++
		} else {
			failed = 0
		}
		if failed >= failures {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// TestFailoverKillMaster is the failover drill (make failover-drill): 8 clients write to the
// master of a semi-synchronous topology and record every insert that was acknowledged; the
// master is killed with SIGKILL; a prober (500ms x 3) declares it down; the failover sequence
// promotes a replica and the clients switch to it. Then: every acknowledged row is on the new
// master, row by row; the other replica replicates from the new master and receives a new
// write; the old master, restarted, is writable and replicates from no one, so Discover
// refuses to guess the master until the failover record settles it; fenced, it is read-only;
// the state file names the new master. The measured times are logged, not asserted.
func TestFailoverKillMaster(t *testing.T) {
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

	// The driver logs every connection the kill breaks; the drill's output is its timings.
	mysql.SetLogger(log.New(io.Discard, "", 0))
	defer mysql.SetLogger(log.New(os.Stderr, "[mysql] ", log.Ldate|log.Ltime|log.Lshortfile))

	const writers = 8
	oldDB := serviceDB(t, topo, old)
	var target atomic.Pointer[sql.DB]
	target.Store(oldDB)
	promoted := make(chan struct{})
	var firstWrite atomic.Int64 // unix nanos of the first write acknowledged by the new master
	var total, afterFailover atomic.Int64
	acked := make([][]int64, writers)
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := int64(1); wctx.Err() == nil; i++ {
				id := int64(w+1)*1_000_000_000 + i // a fresh id per attempt: a failed insert may still have committed
				db := target.Load()
				sctx, cancel := context.WithTimeout(wctx, 10*time.Second)
				_, err := db.ExecContext(sctx, "INSERT INTO acked (id, writer) VALUES (?, ?)", id, w)
				cancel()
				if err == nil {
					acked[w] = append(acked[w], id)
					total.Add(1)
					if db != oldDB {
						firstWrite.CompareAndSwap(0, time.Now().UnixNano())
						afterFailover.Add(1)
					}
					continue
				}
				// The master is gone: wait for the new one, then pace retries.
				select {
				case <-promoted:
				case <-wctx.Done():
					return
				}
				select {
				case <-time.After(20 * time.Millisecond):
				case <-wctx.Done():
				}
			}
		})
	}
	defer func() { stopWriters(); wg.Wait() }()

	eventually(t, ctx, "writers get going", func() error {
		if n := total.Load(); n < 200 {
			return fmt.Errorf("%d acknowledged inserts", n)
		}
		return nil
	})

	type detection struct {
		at  time.Time
		err error
	}
	detected := make(chan detection, 1)
	go func() {
		at, err := probeUntilDown(ctx, old.Addr(), cred, 500*time.Millisecond, 3)
		detected <- detection{at, err}
	}()
	killedAt := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	ackedBeforeKill := total.Load()
	d := <-detected
	if d.err != nil {
		t.Fatal(d.err)
	}

	f := &health.Failover{Cluster: "main", Master: old.Addr(), Replicas: replicaAddrs(topo), Credentials: cred,
		Epoch: 1, Block: 10 * time.Minute}
	res, err := f.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	promotedAt := time.Now()
	newMaster := serverAt(t, topo, res.NewMaster)
	target.Store(serviceDB(t, topo, newMaster))
	close(promoted)
	eventually(t, ctx, "writes resume on the new master", func() error {
		if n := afterFailover.Load(); n < 100 {
			return fmt.Errorf("%d acknowledged inserts on the new master", n)
		}
		return nil
	})
	stopWriters()
	wg.Wait()

	first := time.Unix(0, firstWrite.Load())
	t.Logf("drill: %d writers, %d inserts acknowledged before the kill, %d in all", writers, ackedBeforeKill, total.Load())
	t.Logf("drill: detection %v after kill -9 (probes every 500ms, down after 3 failures)", d.at.Sub(killedAt).Round(time.Millisecond))
	t.Logf("drill: promotion %v (%s)", promotedAt.Sub(d.at).Round(time.Millisecond), stepsString(res))
	t.Logf("drill: first acknowledged write on the new master %v after the kill", first.Sub(killedAt).Round(time.Millisecond))
	t.Logf("drill: old master %s, new master %s, repointed %v, promoted at %s", res.OldMaster, res.NewMaster, res.Repointed, res.PromotedAt)

	if res.Outcome != health.OutcomePromoted || res.Epoch != 2 || res.OldMaster != old.Addr() {
		t.Errorf("result: %+v", res)
	}
	var other *sandbox.Server
	for _, r := range topo.Replicas {
		if r != newMaster {
			other = r
		}
	}
	if !slices.Equal(res.Repointed, []string{other.Addr()}) || len(res.NotRepointed) != 0 {
		t.Errorf("repointed %v, not repointed %v", res.Repointed, res.NotRepointed)
	}

	t.Run("EveryAcknowledgedWriteOnTheNewMaster", func(t *testing.T) {
		have := map[int64]bool{}
		rows, err := serviceDB(t, topo, newMaster).QueryContext(ctx, "SELECT id FROM acked")
		if err != nil {
			t.Fatal(err)
		}
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
		rows.Close()
		var missing []int64
		n := 0
		for _, ids := range acked {
			for _, id := range ids {
				n++
				if !have[id] {
					missing = append(missing, id)
				}
			}
		}
		t.Logf("%d acknowledged rows checked one by one; the new master holds %d rows", n, len(have))
		if len(missing) > 0 {
			t.Errorf("%d acknowledged inserts missing on the new master, first ones: %v", len(missing), missing[:min(len(missing), 10)])
		}
	})

	t.Run("OtherReplicaFollows", func(t *testing.T) {
		eventually(t, ctx, other.Name+" replicates from the new master", func() error {
			rs := controlState(t, ctx, other.Addr(), cred).Replica
			if rs.MasterPort != newMaster.Port || !rs.IOConnected() {
				return fmt.Errorf("master port %d, IO %s, error %d %s", rs.MasterPort, rs.IORunning, rs.LastIOErrno, rs.LastIOError)
			}
			return nil
		})
		if _, err := serviceDB(t, topo, newMaster).ExecContext(ctx, "INSERT INTO acked (id, writer) VALUES (-1, -1)"); err != nil {
			t.Fatal(err)
		}
		// A semi-sync cluster stays one: the new master waits for the other replica's
		// acknowledgement, as the old one did.
		if v, err := newMaster.Variable(ctx, "rpl_semi_sync_master_enabled"); err != nil || v != "ON" {
			t.Errorf("new master rpl_semi_sync_master_enabled = %q (%v), want ON", v, err)
		}
		eventually(t, ctx, other.Name+" acknowledges the new master semi-synchronously", func() error {
			v, err := newMaster.Status(ctx, "Rpl_semi_sync_master_clients")
			if err != nil || v != "1" {
				return fmt.Errorf("Rpl_semi_sync_master_clients = %q (%v)", v, err)
			}
			return nil
		})
		otherDB := serviceDB(t, topo, other)
		eventually(t, ctx, "the new write reaches "+other.Name, func() error {
			var n int
			if err := otherDB.QueryRowContext(ctx, "SELECT COUNT(*) FROM acked WHERE id = -1").Scan(&n); err != nil {
				return err
			}
			if n != 1 {
				return errors.New("not there yet")
			}
			return nil
		})
	})

	t.Run("OldMasterFenced", func(t *testing.T) {
		if err := old.Start(ctx); err != nil {
			t.Fatal(err)
		}
		all := []string{old.Addr(), topo.Replicas[0].Addr(), topo.Replicas[1].Addr()}
		// Back from the dead it is writable and replicates from no one, like the new master:
		// without the failover record nobody can tell which is the master.
		if _, err := health.Discover(ctx, "main", all, "", cred); !errors.Is(err, health.ErrAmbiguousMaster) {
			t.Errorf("Discover without a record: %v, want ErrAmbiguousMaster", err)
		}
		disc, err := health.Discover(ctx, "main", all, res.NewMaster, cred)
		if err != nil || disc.Master != res.NewMaster || !slices.Equal(disc.Stale, []string{old.Addr()}) {
			t.Errorf("Discover with the record: %+v, %v", disc, err)
		}

		pos, err := res.PromotedPosition()
		if err != nil {
			t.Fatal(err)
		}
		fr, err := health.FenceOldMaster(ctx, old.Addr(), cred, pos)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("old master: binlog %s, errant transactions: %q", fr.BinlogPos, fr.Errant)
		if !fr.WasWritable {
			t.Error("the restarted old master was already read-only")
		}
		if ro, err := old.Variable(ctx, "read_only"); err != nil || ro != "ON" {
			t.Errorf("old master read_only = %q (%v)", ro, err)
		}
		disc, err = health.Discover(ctx, "main", all, "", cred)
		if err != nil || disc.Master != res.NewMaster || len(disc.Stale) != 0 {
			t.Errorf("Discover after fencing: %+v, %v", disc, err)
		}

		dir := t.TempDir()
		var st health.FailoverState
		st.Record(res)
		st.RecordFence(fr)
		if err := health.WriteFailoverState(dir, st); err != nil {
			t.Fatal(err)
		}
		back, ok, err := health.ReadFailoverState(dir, "main")
		if err != nil || !ok || back.Master != res.NewMaster || !slices.Equal(back.Fenced, []string{old.Addr()}) || back.Epoch != 2 {
			t.Errorf("state file: %+v, %v, %v", back, ok, err)
		}
	})
}

func stepsString(r *health.Result) string {
	var parts []string
	for _, s := range r.Steps {
		parts = append(parts, s.Name+" "+s.Took.Round(100*time.Microsecond).String())
	}
	return strings.Join(parts, ", ")
}

// TestFailoverPartitionDoesNotPromote: the failover caller reaches the master through a TCP
// relay; with the relay cut, the master is unreachable for the caller alone. The replicas
// still receive from it, so the sequence refuses (ErrNotConfirmed) and nothing changes.
func TestFailoverPartitionDoesNotPromote(t *testing.T) {
	topo, cred := failoverTopology(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	relay := newTCPRelay(t, topo.Master.Addr())
	f := &health.Failover{Cluster: "main", Master: relay.Addr(), Replicas: replicaAddrs(topo), Credentials: cred,
		Epoch: 1, ConfirmWait: 500 * time.Millisecond}

	if _, err := f.Run(ctx); !errors.Is(err, health.ErrMasterReachable) {
		t.Fatalf("Run with the master reachable: %v, want ErrMasterReachable", err)
	}
	relay.Cut()
	if _, err := health.Dial(ctx, relay.Addr(), cred); err == nil {
		t.Fatal("the master is still reachable through the cut relay")
	}
	_, err := f.Run(ctx)
	if !errors.Is(err, health.ErrNotConfirmed) || !strings.Contains(err.Error(), "still receives from the master") {
		t.Fatalf("Run with sluice alone cut off: %v, want ErrNotConfirmed", err)
	}
	t.Logf("refused: %v", err)

	for _, r := range topo.Replicas {
		st := controlState(t, ctx, r.Addr(), cred)
		if !st.ReadOnly || !st.Replica.IOConnected() || st.Replica.MasterPort != topo.Master.Port {
			t.Errorf("%s changed: %+v", r.Name, st)
		}
	}
	if err := topo.Master.Exec(ctx, "CREATE TABLE sluice_test.still_master (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	// The refused sequence left no lock behind.
	c, err := health.Dial(ctx, topo.Replicas[0].Addr(), cred)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, err := c.TryLock(ctx, health.FailoverLockName("main")); err != nil || !ok {
		t.Errorf("failover lock after a refused run: %v, %v", ok, err)
	}
}

// TestFailoverRaceOnePromotion: two sluice instances run the sequence at the same moment
// after the master died. Exactly one promotes; the other finds the lock taken
// (ErrInProgress) or the promotion done (OutcomeFollowed), and once the winner is done it
// follows the same new master.
func TestFailoverRaceOnePromotion(t *testing.T) {
	topo, cred := failoverTopology(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topo.Master.Exec(ctx, "CREATE TABLE sluice_test.race (id INT PRIMARY KEY)", "INSERT INTO sluice_test.race VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	if err := topo.Master.Kill(); err != nil {
		t.Fatal(err)
	}
	instance := func() *health.Failover {
		return &health.Failover{Cluster: "main", Master: topo.Master.Addr(), Replicas: replicaAddrs(topo), Credentials: cred, Epoch: 1}
	}

	var results [2]*health.Result
	var errs [2]error
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			<-start
			results[i], errs[i] = instance().Run(ctx)
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i := range 2 {
		switch {
		case errs[i] == nil && results[i].Outcome == health.OutcomePromoted:
			if winner >= 0 {
				t.Fatalf("both instances promoted: %s and %s", results[winner].NewMaster, results[i].NewMaster)
			}
			winner = i
		case errs[i] == nil && results[i].Outcome == health.OutcomeFollowed:
		case errors.Is(errs[i], health.ErrInProgress):
		default:
			t.Fatalf("instance %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if winner < 0 {
		t.Fatalf("nobody promoted: %v / %v", errs[0], errs[1])
	}
	newMaster := results[winner].NewMaster
	loser := 1 - winner
	t.Logf("instance %d promoted %s; instance %d: %v", winner, newMaster, loser, func() any {
		if errs[loser] != nil {
			return errs[loser]
		}
		return results[loser].Outcome
	}())

	// The loser, run again (its next probe round), follows the same master.
	follow := results[loser]
	if errs[loser] != nil {
		eventually(t, ctx, "the other instance follows", func() error {
			r, err := instance().Run(ctx)
			if err != nil {
				return err
			}
			follow = r
			return nil
		})
	}
	if follow.Outcome != health.OutcomeFollowed || follow.NewMaster != newMaster || follow.Epoch != 2 {
		t.Errorf("the other instance: %+v", follow)
	}

	// Exactly one promotion: one replica is a master, the other replicates from it.
	masters := 0
	for _, r := range topo.Replicas {
		st := controlState(t, ctx, r.Addr(), cred)
		if !st.ReadOnly && !st.Replica.Configured {
			masters++
			if r.Addr() != newMaster {
				t.Errorf("%s is a master too", r.Addr())
			}
			continue
		}
		if want := strconv.Itoa(serverAt(t, topo, newMaster).Port); strconv.Itoa(st.Replica.MasterPort) != want {
			t.Errorf("%s replicates from port %d, want %s", r.Addr(), st.Replica.MasterPort, want)
		}
	}
	if masters != 1 {
		t.Errorf("%d masters among the replicas", masters)
	}
}
