package health

import (
	"errors"
	"sync"
	"testing"
	"time"
)

func TestPromotePublishesNewSnapshot(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1, 1})
	before := topo.Current()
	c0 := before.Cluster("main")
	oldMaster, r0, r1 := c0.Master, c0.Replicas[0], c0.Replicas[1]
	changed := topo.Changed()

	s, err := topo.Promote("main", r1.Address, &Result{Epoch: before.Epoch + 1})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Changed() not closed by Promote")
	}
	if s != topo.Current() || s.Epoch != before.Epoch+1 {
		t.Fatalf("Current epoch %d, returned %d, want %d", topo.Current().Epoch, s.Epoch, before.Epoch+1)
	}
	c := s.Cluster("main")
	if c.Master.Address != r1.Address || c.Master.Role != RoleMaster || c.Master == r1 {
		t.Fatalf("new master %+v: want a new master Backend for %s", c.Master, r1.Address)
	}
	if r1.Role != RoleReplica {
		t.Fatal("the promoted replica's old Backend changed role in place")
	}
	if len(c.Replicas) != 1 || c.Replicas[0] != r0 {
		t.Fatalf("replicas %v, want only the untouched %s", c.Replicas, r0.Address)
	}
	if len(c.Fenced) != 1 || c.Fenced[0] != oldMaster || oldMaster.State() != StateFenced {
		t.Fatalf("fenced %v (old master state %s), want the old master held fenced", c.Fenced, oldMaster.State())
	}
	if w := c.Watched(); len(w) != 3 {
		t.Fatalf("watched %d backends, want master, replica and fenced old master", len(w))
	}
	// The old snapshot is untouched.
	if c0.Master != oldMaster || len(c0.Replicas) != 2 || len(c0.Fenced) != 0 {
		t.Fatal("Promote changed the previous snapshot")
	}
	// Reads go to the remaining replica only.
	for range 10 {
		if b := c.PickReplica(nil); b != r0 {
			t.Fatalf("picked %v, want %s", b, r0.Address)
		}
	}
}

func TestPromoteTakesHigherEpochFromResult(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1})
	r := topo.Current().Cluster("main").Replicas[0]
	s, err := topo.Promote("main", r.Address, &Result{Epoch: 7})
	if err != nil {
		t.Fatal(err)
	}
	if s.Epoch != 7 {
		t.Fatalf("epoch %d, want 7 from the Result", s.Epoch)
	}
}

func TestPromoteCurrentMasterIsNoOp(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1})
	before := topo.Current()
	s, err := topo.Promote("main", before.Cluster("main").Master.Address, nil)
	if err != nil || s != before {
		t.Fatalf("Promote of the master: %v, snapshot changed %v", err, s != before)
	}
}

func TestPromoteUnknownBackend(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1})
	if _, err := topo.Promote("main", "127.0.0.1:99", nil); !errors.Is(err, ErrUnknownBackend) {
		t.Fatalf("err = %v, want ErrUnknownBackend", err)
	}
	if _, err := topo.Promote("nope", "127.0.0.1:11", nil); err == nil {
		t.Fatal("Promote of an unknown cluster succeeded")
	}
	if topo.Current().Epoch != 1 {
		t.Fatal("a failed Promote published")
	}
}

func TestRefuseWritesAndPromoteLiftsIt(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1})
	s, err := topo.RefuseWrites("main", "two masters")
	if err != nil || s.Cluster("main").WritesRefused != "two masters" || s.Epoch != 2 {
		t.Fatalf("RefuseWrites: %v %+v", err, s)
	}
	s, err = topo.Promote("main", s.Cluster("main").Master.Address, nil)
	if err != nil || s.Cluster("main").WritesRefused != "" {
		t.Fatalf("Promote of the master did not lift the refusal: %v", err)
	}
}

// TestPromoteConcurrentReaders runs readers of the snapshot and its backends against a
// promotion; -race checks nothing is written in place.
func TestPromoteConcurrentReaders(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1, 1})
	r := topo.Current().Cluster("main").Replicas[0]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c := topo.Current().Cluster("main")
				_ = c.Master.Role
				_ = c.Master.State()
				for _, b := range c.Watched() {
					_ = b.Role
					_ = b.Up()
				}
				_ = c.PickReplica(nil)
			}
		})
	}
	ch := topo.Changed()
	if _, err := topo.Promote("main", r.Address, nil); err != nil {
		t.Fatal(err)
	}
	<-ch
	close(stop)
	wg.Wait()
}

func TestProberFollowsPromotion(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1, 1})
	c := topo.Current().Cluster("main")
	oldMaster, r := c.Master, c.Replicas[1]
	f, _, _ := startProber(t, topo, 1)
	f.set(oldMaster.Address, func() (*Status, error) { return nil, errors.New("refused") })
	waitFor(t, "old master down", func() bool { return oldMaster.State() == StateDown })

	s, err := topo.Promote("main", r.Address, nil)
	if err != nil {
		t.Fatal(err)
	}
	nm := s.Cluster("main").Master
	promotedAt := time.Now()
	waitFor(t, "new master probed", func() bool { st := nm.Status(); return st != nil && st.Time.After(promotedAt) })
	// The fenced old master is still probed, and stays fenced once it answers.
	f.set(oldMaster.Address, nil)
	n := f.count(oldMaster.Address)
	waitFor(t, "old master probed again", func() bool { return f.count(oldMaster.Address) > n+2 })
	if oldMaster.State() != StateFenced {
		t.Fatalf("old master %s after it answered, want fenced", oldMaster.State())
	}
	if nm.State() != StateUp {
		t.Fatalf("new master %s, want up", nm.State())
	}
}

func TestOnPublishRunsBeforeTheSnapshotIsCurrent(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1})
	var seen *Snapshot
	topo.OnPublish = func(s *Snapshot) {
		if topo.Current() == s {
			t.Error("OnPublish called after the snapshot became current")
		}
		seen = s
	}
	s, err := topo.Promote("main", "127.0.0.1:11", nil)
	if err != nil {
		t.Fatal(err)
	}
	if seen != s {
		t.Fatal("OnPublish did not get the published snapshot")
	}
}
