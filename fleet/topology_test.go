package fleet

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-proxy/sluice/sandbox"
)

// follower records what a Fleet's topology hooks were given.
type follower struct {
	mu      sync.Mutex
	applied []TopologyRecord
	elected []Lead
}

func (w *follower) hooks() Hooks {
	return Hooks{
		Clusters: []string{"main"},
		Apply:    func(r TopologyRecord) { w.mu.Lock(); w.applied = append(w.applied, r); w.mu.Unlock() },
		Elected:  func(l Lead) { w.mu.Lock(); w.elected = append(w.elected, l); w.mu.Unlock() },
	}
}

func (w *follower) last() (TopologyRecord, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.applied) == 0 {
		return TopologyRecord{}, 0
	}
	return w.applied[len(w.applied)-1], len(w.applied)
}

func (w *follower) elections() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.elected)
}

// leaderOf returns which of fs leads main, failing when more than one does.
func leaderOf(t *testing.T, fs ...*Fleet) (int, Lead) {
	t.Helper()
	at, lead := -1, Lead{}
	for i, f := range fs {
		if l, ok := f.Leader("main"); ok {
			if at >= 0 {
				t.Fatalf("instances %d and %d both lead main", at, i)
			}
			at, lead = i, l
		}
	}
	return at, lead
}

func rawClient(t *testing.T, c *sandbox.EtcdCluster) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// TestLeaderAndTopology: two instances elect one prober-leader; its guarded topology write is
// applied by the other (and not again by itself); a write under a lead that is not held, or
// from a stale topology revision, is refused with the sentinel that says so; the pending
// failover is readable until the topology moves past it or it is dropped; a leader key
// deleted by hand ends the leadership at its next guarded write, and an instance campaigns
// and leads again; a leader that closes hands over at once.
func TestLeaderAndTopology(t *testing.T) {
	c := startEtcd(t)
	raw := rawClient(t, c)
	ctx := context.Background()
	var wa, wb follower
	a := joinWith(t, c, "a", 2*time.Second, func(f *Fleet) { f.OnTopology(wa.hooks()) })
	b := joinWith(t, c, "b", 2*time.Second, func(f *Fleet) { f.OnTopology(wb.hooks()) })
	fs, ws := []*Fleet{a, b}, []*follower{&wa, &wb}
	waitFor(t, "one leader", 20*time.Second, func() bool { i, _ := leaderOf(t, fs...); return i >= 0 })
	li, lead := leaderOf(t, fs...)
	leader, other := fs[li], fs[1-li]
	if ws[li].elections() != 1 || ws[1-li].elections() != 0 {
		t.Fatalf("Elected calls: leader %d, other %d; want 1 and 0", ws[li].elections(), ws[1-li].elections())
	}

	rev, err := leader.WriteTopology(ctx, lead, TopologyRecord{Master: "m1:3306", Outcome: OutcomeInitial})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other applies the record", 2*time.Second, func() bool { r, _ := ws[1-li].last(); return r.Revision == rev })
	if r, _ := ws[1-li].last(); r.Master != "m1:3306" || r.By != leader.Self().Instance || other.TopologyRevision("main") != rev {
		t.Fatalf("applied %+v (revision %d), want m1:3306 by the leader at %d", r, other.TopologyRevision("main"), rev)
	}
	if _, n := ws[li].last(); n != 0 {
		t.Errorf("the leader's own write was applied again by its watch (%d applies)", n)
	}
	hist, err := raw.Get(ctx, "/sluice/test/clusters/main/history/", clientv3.WithPrefix())
	if err != nil || len(hist.Kvs) != 1 || string(hist.Kvs[0].Key) != "/sluice/test/clusters/main/history/00000000000000000000" {
		t.Fatalf("history after the first write: %v %v", hist, err)
	}

	// Not held: the other instance's key is not the leader's.
	fake := Lead{Cluster: "main", Key: lead.Key, Rev: lead.Rev + 1000}
	if _, err := other.WriteTopology(ctx, fake, TopologyRecord{Master: "m2:3306"}); !errors.Is(err, ErrLostLeadership) {
		t.Fatalf("write under a lead not held: %v, want ErrLostLeadership", err)
	}
	// Stale: the leader believes in an older revision than etcd holds.
	leader.topoMu.Lock()
	leader.topoRev["main"] = rev - 1
	leader.topoMu.Unlock()
	if _, err := leader.WriteTopology(ctx, lead, TopologyRecord{Master: "m2:3306"}); !errors.Is(err, ErrTopologyMoved) {
		t.Fatalf("write from a stale revision: %v, want ErrTopologyMoved", err)
	}
	if err := leader.WritePending(ctx, lead, []byte(`{"x":1}`)); !errors.Is(err, ErrTopologyMoved) {
		t.Fatalf("pending from a stale revision: %v, want ErrTopologyMoved", err)
	}
	leader.topoMu.Lock()
	leader.topoRev["main"] = rev
	leader.topoMu.Unlock()

	// The pending failover: read back, dropped, and ignored once the topology moved on.
	if err := leader.WritePending(ctx, lead, []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	if p, err := other.Pending(ctx, "main"); err != nil || string(p) != `{"x":1}` {
		t.Fatalf("Pending on the other: %q %v", p, err)
	}
	if err := leader.DropPending(ctx, lead); err != nil {
		t.Fatal(err)
	}
	if p, err := other.Pending(ctx, "main"); err != nil || p != nil {
		t.Fatalf("Pending after DropPending: %q %v", p, err)
	}
	if err := leader.WritePending(ctx, lead, []byte(`{"x":2}`)); err != nil {
		t.Fatal(err)
	}
	rev2, err := leader.WriteTopology(ctx, lead, TopologyRecord{Master: "m2:3306", OldMaster: "m1:3306", Outcome: "promoted"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the other applies the second record", 2*time.Second, func() bool { return other.TopologyRevision("main") == rev2 })
	if p, err := other.Pending(ctx, "main"); err != nil || p != nil {
		t.Fatalf("Pending after the topology write: %q %v (the write deletes it)", p, err)
	}

	// A leader key deleted by hand: the next guarded write ends the leadership.
	if _, err := raw.Delete(ctx, lead.Key); err != nil {
		t.Fatal(err)
	}
	if err := leader.WritePending(ctx, lead, []byte(`{}`)); !errors.Is(err, ErrLostLeadership) {
		t.Fatalf("guarded write after the key was deleted: %v, want ErrLostLeadership", err)
	}
	select {
	case <-lead.Done:
	case <-time.After(2 * time.Second):
		t.Fatal("the lead's Done did not close after its key was found gone")
	}
	waitFor(t, "a leader again", 10*time.Second, func() bool { i, _ := leaderOf(t, fs...); return i >= 0 })
	li, _ = leaderOf(t, fs...)
	start := time.Now()
	if err := fs[li].Close(); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, "the other leads after the leader closed", 2*time.Second, func() bool { _, ok := fs[1-li].Leader("main"); return ok })
	t.Logf("handover after Close: %v (Close took %v)", took, time.Since(start)-took)
}

// TestTopologyBadValues: a topology key whose value is not a record (written by hand with
// etcdctl), or one that names no master, is logged and ignored: the instance keeps the record
// it applied, and a later good record is applied. A pending key that is not a record reaches
// no hook, and Pending reports it as an error rather than a failover.
func TestTopologyBadValues(t *testing.T) {
	c := startEtcd(t)
	raw := rawClient(t, c)
	ctx := context.Background()
	var w follower
	pendings := 0
	f := joinWith(t, c, "a", 2*time.Second, func(f *Fleet) {
		h := w.hooks()
		h.Clusters = nil // nobody campaigns: the test writes the keys itself
		h.Pending = func(string, string, time.Time, []byte) { w.mu.Lock(); pendings++; w.mu.Unlock() }
		f.OnTopology(h)
	})
	key := "/sluice/test/clusters/main/topology"
	put := func(v string) int64 {
		t.Helper()
		r, err := raw.Put(ctx, key, v)
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	good := put(`{"master":"m1:3306","outcome":"initial","by":"x"}`)
	waitFor(t, "the good record applied", 5*time.Second, func() bool { return f.TopologyRevision("main") == good })
	put(`not json`)
	put(`{"outcome":"promoted"}`)
	if _, err := raw.Put(ctx, "/sluice/test/clusters/main/pending", `{{{`); err != nil {
		t.Fatal(err)
	}
	next := put(`{"master":"m2:3306","outcome":"promoted","by":"x"}`)
	waitFor(t, "the next good record applied", 5*time.Second, func() bool { return f.TopologyRevision("main") == next })
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.applied) != 2 || w.applied[0].Master != "m1:3306" || w.applied[1].Master != "m2:3306" {
		t.Fatalf("applied %+v; want only the two good records", w.applied)
	}
	if pendings != 0 {
		t.Errorf("a malformed pending key reached the Pending hook %d times", pendings)
	}
	if _, err := f.Pending(ctx, "main"); err == nil {
		t.Error("Pending of a malformed record: no error")
	}
}
