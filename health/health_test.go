package health

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/conf"
)

func testTopology(t *testing.T) *Topology {
	t.Helper()
	cfg, err := conf.Parse([]byte(`
[auth]
address = "127.0.0.1:1"
[[cluster]]
name = "main"
user = "u"
master = "127.0.0.1:10"
  [[cluster.replica]]
  address = "127.0.0.1:11"
  weight = 1
  [[cluster.replica]]
  address = "127.0.0.1:12"
  weight = 3
`))
	if err != nil {
		t.Fatal(err)
	}
	return NewTopology(cfg)
}

func TestPickReplicaWeighted(t *testing.T) {
	c := testTopology(t).Current().Cluster("main")
	counts := map[string]int{}
	for range 400 {
		counts[c.PickReplica(nil).Address]++
	}
	if counts["127.0.0.1:11"] != 100 || counts["127.0.0.1:12"] != 300 {
		t.Fatalf("weights 1:3 gave %v", counts)
	}
}

func TestPickReplicaSkipsDownAndSkip(t *testing.T) {
	c := testTopology(t).Current().Cluster("main")
	r1, r2 := c.Replicas[0], c.Replicas[1]
	for range 20 {
		if got := c.PickReplica(r2); got != r1 {
			t.Fatalf("skip r2 gave %v", got.Address)
		}
	}
	r1.ReportFailure(errors.New("refused"))
	if got := c.PickReplica(r2); got != nil {
		t.Fatalf("with r1 down and r2 skipped got %s, want nil", got.Address)
	}
	if !r1.ReportSuccess() || !r1.Up() {
		t.Fatal("r1 did not come back up")
	}
}

func TestProberMarksDownAfterFailuresAndUpAgain(t *testing.T) {
	topo := testTopology(t)
	c := topo.Current().Cluster("main")
	var failing atomic.Bool
	failing.Store(true)
	var checks atomic.Int32
	changes := make(chan bool, 16)
	p := &Prober{
		Topology:           topo,
		Interval:           5 * time.Millisecond,
		FailuresBeforeDown: 3,
		Check: func(_ context.Context, b *Backend) error {
			if b != c.Replicas[0] {
				return nil
			}
			checks.Add(1)
			if failing.Load() {
				return errors.New("probe failed")
			}
			return nil
		},
		OnChange: func(b *Backend, up bool, _ string) { changes <- up },
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)
	select {
	case up := <-changes:
		if up {
			t.Fatal("first change was up")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replica never went down")
	}
	if n := checks.Load(); n < 3 {
		t.Fatalf("went down after %d checks, want >= 3", n)
	}
	failing.Store(false)
	select {
	case up := <-changes:
		if !up {
			t.Fatal("second change was down")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replica never came back")
	}
}
