package crash

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
	ft "github.com/sluice-proxy/sluice/tests/internal/failovertest"
	"github.com/sluice-proxy/sluice/tests/internal/sluicebin"
)

// Bounds of one crash-point case.
const (
	// dieWithin: from the master's kill -9 to the failpoint killing sluice (detection takes
	// about 1.4 s: probes every 500 ms, down after 3 failures).
	dieWithin = 20 * time.Second
	// convergeWithin: from the fresh sluice's start to a finished failover (issue 21).
	convergeWithin = 10 * time.Second
	// giveUpAfter: how long a case waits for convergence it already reports as late, to
	// tell "slow" from "never".
	giveUpAfter = 30 * time.Second
	writers     = 8
)

// crashCase is one step of a failover at which sluice dies.
type crashCase struct {
	point    string // SLUICE_FAILPOINT
	replicas int
}

// TestFailoverCrashPoints: 8 clients run transactions (BEGIN; INSERT; INSERT; UPDATE
// counter; COMMIT) through sluice, built with the failpoint tag, in front of a
// semi-synchronous topology; the master gets kill -9 and sluice dies by SIGKILL at one step of
// its failover (SLUICE_FAILPOINT). A fresh sluice started on the same configuration file and
// state directory must, within 10 s of its start: leave exactly one live server writable,
// every other live server replicating from it with both threads running, the state file
// naming it with the failover in its history and none in progress, and take writes. No
// acknowledged transaction is lost or torn on the new master or on the replicas. When the old
// master comes back it ends read-only, and reads through sluice never come from a replica
// that still follows it (issue 21, item 4: 20 of 20 reads missed an acknowledged write).
func TestFailoverCrashPoints(t *testing.T) {
	if os.Getenv(sandbox.ProxyKeysEnv) != "" {
		t.Skip("failover does not depend on how sessions run; the default run covers it")
	}
	bin := sluicebin.BuildTags(t, "failpoint")
	for _, c := range []crashCase{
		{"failover.chosen", 2},
		{"failover.stopped", 2},
		{"failover.reset", 2},
		{"failover.promoted", 2},
		{"failover.repointed#1", 2},
		{"failover.repointed#1", 3}, // one replica repointed, one not
		{"failover.recorded", 2},
	} {
		t.Run(fmt.Sprintf("%s/%d_replicas", c.point, c.replicas), func(t *testing.T) { crashAt(t, bin, c) })
	}
}

func crashAt(t *testing.T, bin string, c crashCase) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: c.replicas, SemiSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := ft.CreateSchema(ctx, topo); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	cfg := sluicebin.WriteConfig(t, ft.Config(topo, "127.0.0.1:0", stateDir))
	first, err := ft.StartSluice(t, bin, cfg, "sluice1", c.point)
	if err != nil {
		t.Fatal(err)
	}
	w1, err := ft.StartWriters(ctx, ft.ClientDSN(topo, first.Addr), writers, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Halt()
	if err := ft.Eventually(ctx, 30*time.Second, "writers get going", func() error {
		if n := w1.Total(); n < 200 {
			return fmt.Errorf("%d transactions acknowledged", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	old := topo.Master
	killedAt := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.Done():
	case <-time.After(dieWithin):
		t.Fatalf("sluice still runs %v after the master's kill -9: the failover never passed %s (log tail:\n%s)",
			dieWithin, c.point, first.Log.Tail(20))
	}
	died := time.Since(killedAt)
	w1.Halt()
	if sig := first.Signal(); sig != syscall.SIGKILL {
		t.Fatalf("sluice exited with %v, want death by SIGKILL at %s; log tail:\n%s", first.Err(), c.point, first.Log.Tail(20))
	}
	if want := ft.FailpointLine(c.point); len(first.Log.Grep(want)) != 1 {
		t.Fatalf("sluice's output has no line %q; log tail:\n%s", want, first.Log.Tail(20))
	}
	t.Logf("sluice died at %s %v after the kill; %d transactions acknowledged, %d attempts failed",
		c.point, died.Round(time.Millisecond), w1.Total(), w1.Failed())
	live := topo.Replicas
	t.Logf("servers at the crash:\n%s", ft.Describe(ft.LookAll(ctx, live)))

	// The fresh sluice: no failpoint, same configuration and state directory.
	second, err := ft.StartSluice(t, bin, cfg, "sluice2", "")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := ft.StartWriters(ctx, ft.ClientDSN(topo, second.Addr), writers, writers)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Halt()
	var master *sandbox.Server
	var firstWrite time.Duration
	converge := func() error {
		acked := w2.Total()
		if firstWrite == 0 && acked > 0 {
			firstWrite = time.Since(second.Started)
		}
		views := ft.LookAll(ctx, live)
		w := ft.Writable(views)
		if len(w) != 1 {
			return fmt.Errorf("%d writable servers:\n%s", len(w), ft.Describe(views))
		}
		master = w[0]
		for _, v := range views {
			if v.Server == master {
				continue
			}
			if err := v.ReplicatesFrom(master); err != nil {
				return fmt.Errorf("%w:\n%s", err, ft.Describe(views))
			}
		}
		st, ok, err := ft.ReadStateFile(stateDir)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("no state file; servers:\n%s", ft.Describe(views))
		}
		if err := st.RecordsFailoverTo(master.Addr()); err != nil {
			return err
		}
		if acked == 0 {
			return fmt.Errorf("no write through the fresh sluice acknowledged yet (%d failed: %v)", w2.Failed(), ft.First(w2.Errors(), 3))
		}
		return nil
	}
	err = ft.Eventually(ctx, giveUpAfter, "the fresh sluice finishes the failover", converge)
	converged := time.Since(second.Started)
	if err != nil {
		t.Fatalf("%v\nfresh sluice's log tail:\n%s", err, second.Log.Tail(30))
	}
	t.Logf("fresh sluice: serving %v after its start, first write acknowledged after %v, failover finished (servers and state file) after %v; new master %s",
		second.Ready.Sub(second.Started).Round(time.Millisecond), firstWrite.Round(time.Millisecond), converged.Round(time.Millisecond), master.Name)
	if converged > convergeWithin {
		t.Errorf("the failover finished %v after the fresh sluice's start, want within %v", converged.Round(time.Millisecond), convergeWithin)
	}
	if master == old {
		t.Fatal("the old master is writable again")
	}

	if err := ft.Eventually(ctx, 15*time.Second, "writes through the fresh sluice", func() error {
		if n := w2.Total(); n < 200 {
			return fmt.Errorf("%d transactions acknowledged", n)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	w2.Halt()
	acked := append(w1.IDs(), w2.IDs()...)
	t.Logf("%d + %d transactions acknowledged before and after the crash; failed attempts through the fresh sluice: %v",
		len(w1.IDs()), len(w2.IDs()), ft.First(w2.Errors(), 3))

	// Every acknowledged transaction, whole, on the new master and on every replica.
	pos, err := ft.BinlogPos(ctx, master)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range live {
		if s != master {
			if err := ft.Eventually(ctx, 10*time.Second, s.Name+" applies the new master's binlog", func() error {
				ok, err := ft.Applied(ctx, s, pos, 0)
				if !ok {
					return fmt.Errorf("not at %s (%v): %s", pos, err, ft.Look(ctx, s))
				}
				return nil
			}); err != nil {
				t.Error(err)
				continue
			}
		}
		cont, err := ft.ReadContents(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if missing := cont.Missing(acked); len(missing) > 0 {
			t.Errorf("%s lacks %d of %d acknowledged transactions, first: %v", s.Name, len(missing), len(acked), ft.First(missing, 10))
		}
		if torn := cont.Torn(); len(torn) > 0 {
			t.Errorf("%s holds %d torn transactions, first: %v", s.Name, len(torn), ft.First(torn, 5))
		}
	}

	// The old master comes back as it was (writable): it must end read-only, and no read is
	// served by a replica that follows it.
	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ft.Eventually(ctx, 15*time.Second, "the restarted old master is fenced (read-only)", func() error {
		if v := ft.Look(ctx, old); v.Err != nil || !v.ReadOnly {
			return fmt.Errorf("%s", v)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	var followers []*sandbox.Server
	for _, v := range ft.LookAll(ctx, live) {
		if v.Server != master && v.ReplicatesFrom(master) == nil {
			followers = append(followers, v.Server)
		}
	}
	rc, err := ft.ReadsSee(ctx, ft.ClientDSN(topo, second.Addr), master, followers, 1, 20, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("20 reads after a write through sluice: served by %v (server_id: reads), missed %v, errors %v", rc.Served, rc.Missed, rc.Errors)
	if rc.Misses() > 0 {
		t.Errorf("%d of 20 reads through sluice did not see a write acknowledged before them (misses by server_id %v, errors %v); servers:\n%s",
			rc.Misses(), rc.Missed, rc.Errors, ft.Describe(ft.LookAll(ctx, append([]*sandbox.Server{old}, live...))))
	}
	if v := ft.Look(ctx, old); v.Err != nil || !v.ReadOnly {
		t.Errorf("the old master at the end: %s, want read-only", v)
	}
	if t.Failed() {
		t.Logf("fresh sluice's log tail:\n%s", second.Log.Tail(40))
	}
}
