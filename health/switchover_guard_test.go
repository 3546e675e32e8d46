package health

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
)

// Switchover.Guard, Commit and KillOthers against real servers: a Guard that refuses at each
// point stops the switchover there, and what it changed before is undone; a Commit that fails
// undoes it too; KillOthers cuts off a service-account transaction left open on the old master.

// swObserver reads a server's state over a connection of its own, dialled for each look, so
// that KillOthers never counts it among the old master's other sessions.
type swObserver struct {
	t    *testing.T
	ctx  context.Context
	cred Credentials
}

func (o swObserver) state(addr string) ServerState {
	o.t.Helper()
	cc, err := Dial(o.ctx, addr, o.cred)
	if err != nil {
		o.t.Fatalf("dial %s: %v", addr, err)
	}
	defer cc.Close()
	st, err := cc.State(o.ctx)
	if err != nil {
		o.t.Fatalf("state of %s: %v", addr, err)
	}
	return st
}

// replicatesFrom fails the test unless addr is a read-only replica of master with both
// threads running: what a switchover that was undone leaves the target as.
func (o swObserver) replicatesFrom(addr, master string) {
	o.t.Helper()
	st := o.state(addr)
	rs := st.Replica
	if !st.ReadOnly || !rs.Configured || rs.MasterPort == 0 || !strings.HasSuffix(master, fmt.Sprintf(":%d", rs.MasterPort)) || !rs.SQLRunning {
		o.t.Fatalf("%s: read_only %v, replicates from %s:%d (SQL thread running %v); want a read-only replica of %s",
			addr, st.ReadOnly, rs.MasterHost, rs.MasterPort, rs.SQLRunning, master)
	}
}

func TestSwitchoverGuardAndCommit(t *testing.T) {
	topo, cred := startTopology(t, sandbox.Options{Replicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	obs := swObserver{t: t, ctx: ctx, cred: cred}
	master, target, other := topo.Master.Addr(), topo.Replicas[0].Addr(), topo.Replicas[1].Addr()
	if err := topo.Master.Exec(ctx, "CREATE TABLE "+sandbox.TestDatabase+".sw_guard (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	lateWrite := false
	newSwitchover := func(calls *[]string, refuseGuard int, commitErr error) *Switchover {
		sw := &Switchover{Cluster: "main", Master: master, Target: target, Replicas: []string{target, other},
			Credentials: cred, Epoch: 7, Timeout: 20 * time.Second}
		sw.Hold = func(context.Context) error { *calls = append(*calls, "hold"); return nil }
		n, epoch := 0, uint64(8)
		sw.Guard = func(_ context.Context, r *Result) error {
			n++
			// What must be true of the servers at each guarded point: the change it announces
			// has not been made yet, the ones before it have.
			m, tg := obs.state(master), obs.state(target)
			*calls = append(*calls, fmt.Sprintf("guard%d(master ro %v, target ro %v)", n, m.ReadOnly, tg.ReadOnly))
			if r.NewMaster != target || r.OldMaster != master || r.Outcome != OutcomeSwitchover || r.Epoch != epoch {
				t.Errorf("guard %d saw %+v; want the switchover %s -> %s at epoch %d", n, r, master, target, epoch)
			}
			if n == refuseGuard {
				return errors.New("leadership lost (test)")
			}
			if n == 2 && lateWrite {
				// Another instance dialled the old master again after the kill and commits
				// there after its final position was read: read_only does not stop it.
				late := dial(t, ctx, master, cred)
				if err := late.exec(ctx, "INSERT INTO "+sandbox.TestDatabase+".sw_guard VALUES (43)"); err != nil {
					t.Errorf("late write on the read-only old master: %v", err)
				}
			}
			return nil
		}
		sw.Commit = func(_ context.Context, r *Result) error {
			m, tg := obs.state(master), obs.state(target)
			*calls = append(*calls, fmt.Sprintf("commit(master ro %v, target ro %v, caught up %v)", m.ReadOnly, tg.ReadOnly,
				tg.Replica.Executed.Contains(m.BinlogPos)))
			if commitErr != nil {
				return commitErr
			}
			r.Epoch, epoch = 1000, 1000 // the fleet's record revision
			return nil
		}
		return sw
	}

	for _, tc := range []struct {
		name        string
		refuseGuard int
		commitErr   error
		want        []string
	}{
		{"refused before the demote", 1, nil, []string{"hold", "guard1(master ro false, target ro true)"}},
		{"refused before the promotion", 2, nil, []string{"hold", "guard1(master ro false, target ro true)", "guard2(master ro true, target ro true)"}},
		{"commit refused", 0, errors.New("etcd: topology moved (test)"), []string{"hold", "guard1(master ro false, target ro true)",
			"guard2(master ro true, target ro true)", "commit(master ro true, target ro true, caught up true)"}},
	} {
		var calls []string
		if err := topo.Master.Exec(ctx, "INSERT INTO "+sandbox.TestDatabase+".sw_guard VALUES (1)", "DELETE FROM "+sandbox.TestDatabase+".sw_guard"); err != nil {
			t.Fatal(err)
		}
		res, err := newSwitchover(&calls, tc.refuseGuard, tc.commitErr).Run(ctx)
		if err == nil || !errors.Is(err, ErrNotLeader) || res != nil {
			t.Fatalf("%s: Run = %+v, %v; want an error wrapping ErrNotLeader", tc.name, res, err)
		}
		if !slices.Equal(calls, tc.want) {
			t.Errorf("%s: calls\n %q\nwant\n %q", tc.name, calls, tc.want)
		}
		// Undone (or never done): the master takes writes, the target still follows it.
		if st := obs.state(master); st.ReadOnly || st.Replica.Configured {
			t.Errorf("%s: master %s read_only %v, replicates %v; want it writable, a master", tc.name, master, st.ReadOnly, st.Replica.Configured)
		}
		obs.replicatesFrom(target, master)
		obs.replicatesFrom(other, master)
		t.Logf("%s: %v", tc.name, err)
	}

	// A service-account transaction left open on the master (another sluice instance's pool
	// connection, which no Hold of this one drains) is killed after the demote, before the
	// final position is read; a write committed there after that (lateWrite) is found before
	// Commit and waited for on the target; a Guard refusing at the first repoint leaves the
	// target the master all the same and stops the repoints.
	straggler := dial(t, ctx, master, cred)
	if err := straggler.exec(ctx, "BEGIN", "INSERT INTO "+sandbox.TestDatabase+".sw_guard VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	var calls []string
	sw := newSwitchover(&calls, 3, nil)
	sw.KillOthers, lateWrite = true, true
	res, err := sw.Run(ctx)
	if err != nil {
		t.Fatalf("switchover with a guard refusing at the first repoint: %v", err)
	}
	want := []string{"hold", "guard1(master ro false, target ro true)", "guard2(master ro true, target ro true)",
		"commit(master ro true, target ro true, caught up true)", "guard3(master ro true, target ro false)"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls\n %q\nwant\n %q", calls, want)
	}
	if res.NewMaster != target || res.Epoch != 1000 || len(res.Repointed) != 0 || len(res.NotRepointed) != 2 ||
		!strings.Contains(res.NotRepointed[master], "leadership lost") || !strings.Contains(res.NotRepointed[other], "leadership lost") {
		t.Errorf("result %+v; want %s the master at epoch 1000 (Commit's), %s and %s not repointed", res, target, master, other)
	}
	// At least the straggler; the observer's connections may linger a moment after they quit.
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.HasPrefix(w, "killed ") && strings.Contains(w, "other connection") }) {
		t.Errorf("warnings %q; want one saying connections were killed", res.Warnings)
	}
	if err := straggler.exec(ctx, "COMMIT"); err == nil {
		t.Fatal("the transaction left open on the old master committed after the switchover")
	}
	m, tg := obs.state(master), obs.state(target)
	if !m.ReadOnly || m.Replica.Configured || tg.ReadOnly || tg.Replica.Configured {
		t.Errorf("old master read_only %v replicates %v, new master read_only %v replicates %v; want the old one read-only and left alone, the new one a writable master",
			m.ReadOnly, m.Replica.Configured, tg.ReadOnly, tg.Replica.Configured)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "after its final position was read") }) {
		t.Errorf("warnings %q; want one naming the late write", res.Warnings)
	}
	rows, err := dial(t, ctx, target, cred).Rows(ctx, "SELECT id FROM "+sandbox.TestDatabase+".sw_guard")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0][0] != "43" {
		t.Errorf("new master's rows %q; want the late write (43) alone, not the killed transaction's (42)", rows)
	}
	if !tg.BinlogPos.Contains(m.BinlogPos) {
		t.Errorf("old master %s has %s, which new master %s lacks", master, m.BinlogPos.Missing(tg.BinlogPos), target)
	}
	t.Logf("killed the straggler; old master at %s, new master at %s", m.BinlogPos, tg.BinlogPos)
}
