package health

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/conf"
)

// reloadConfigs returns the configuration of a testTopology with weights and
// a copy that edit changed.
func reloadConfigs(t *testing.T, weights []int, edit func(c *conf.Cluster)) (*Topology, *conf.Config, *conf.Config) {
	t.Helper()
	topo := testTopology(t, "round-robin", weights)
	old := configOf(t, weights)
	next := configOf(t, weights)
	edit(&next.Clusters[0])
	return topo, old, next
}

func configOf(t *testing.T, weights []int) *conf.Config {
	t.Helper()
	topo := testTopology(t, "round-robin", weights)
	c := topo.Current().Clusters[0]
	cfg := &conf.Config{Clusters: []conf.Cluster{{Name: "main", User: "u", Master: c.Master.Address, Balance: "round-robin",
		MaxReplicationLag: conf.Duration{Duration: conf.DefaultMaxReplicationLag}, ReadsFallBackToMaster: true}}}
	for _, r := range c.Replicas {
		cfg.Clusters[0].Replicas = append(cfg.Clusters[0].Replicas, conf.Replica{Address: r.Address, Weight: r.Weight})
	}
	return cfg
}

func addresses(bs []*Backend) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Address)
	}
	return out
}

func TestReconfigure(t *testing.T) {
	cases := []struct {
		name      string
		edit      func(c *conf.Cluster)
		failover  bool // promote 127.0.0.1:12 first
		replicas  []string
		kept      []string // replicas whose Backend is the old one
		notes     []string
		check     func(t *testing.T, before, after *Cluster)
		wantNotes int
	}{
		{name: "replica added", edit: func(c *conf.Cluster) {
			c.Replicas = append(c.Replicas, conf.Replica{Address: "127.0.0.1:20", Weight: 1})
		}, replicas: []string{"127.0.0.1:11", "127.0.0.1:12", "127.0.0.1:20"}, kept: []string{"127.0.0.1:11", "127.0.0.1:12"},
			check: func(t *testing.T, _, after *Cluster) {
				b := after.Replicas[2]
				if b.State() != StateDown || b.LastError() != addedReason || b.Role != RoleReplica {
					t.Errorf("new replica %s %q role %s, want down until probed", b.State(), b.LastError(), b.Role)
				}
				for range 10 {
					if p := after.PickReplica(nil); p == b {
						t.Fatal("an unprobed replica got a read")
					}
				}
			}},
		{name: "replica removed", edit: func(c *conf.Cluster) {
			c.Replicas = c.Replicas[1:]
		}, replicas: []string{"127.0.0.1:12"}, kept: []string{"127.0.0.1:12"},
			check: func(t *testing.T, before, after *Cluster) {
				gone := before.Replicas[0]
				if gone.State() != StateOffline {
					t.Errorf("removed replica is %s, want offline", gone.State())
				}
				if p := before.PickReplica(nil); p == gone {
					t.Error("the previous snapshot still picks the removed replica")
				}
			}},
		{name: "weight changed", edit: func(c *conf.Cluster) {
			c.Balance = "weighted"
			c.Replicas[1].Weight = 3
		}, replicas: []string{"127.0.0.1:11", "127.0.0.1:12"}, kept: []string{"127.0.0.1:11"},
			check: func(t *testing.T, before, after *Cluster) {
				if after.Replicas[1].Weight != 3 || before.Replicas[1].Weight != 1 {
					t.Errorf("weights after %d before %d, want 3 and 1 (Backends are not changed in place)", after.Replicas[1].Weight, before.Replicas[1].Weight)
				}
				if after.Replicas[1].Status() != before.Replicas[1].Status() || after.Replicas[1].State() != before.Replicas[1].State() {
					t.Error("re-weighted replica lost its status or state")
				}
				got := picks(after, 400, nil)
				if got["127.0.0.1:11"] != 100 || got["127.0.0.1:12"] != 300 {
					t.Errorf("picks %v, want 1:3", got)
				}
			}},
		{name: "cluster settings", edit: func(c *conf.Cluster) {
			c.MaxReplicationLag = conf.Duration{Duration: time.Minute}
			c.ReadsFallBackToMaster = false
		}, replicas: []string{"127.0.0.1:11", "127.0.0.1:12"}, kept: []string{"127.0.0.1:11", "127.0.0.1:12"},
			check: func(t *testing.T, _, after *Cluster) {
				if after.MaxReplicationLag != time.Minute || after.ReadsFallBackToMaster {
					t.Errorf("lag %v fallback %v, want 1m and false", after.MaxReplicationLag, after.ReadsFallBackToMaster)
				}
			}},
		{name: "promoted replica is not removed", failover: true, edit: func(c *conf.Cluster) {
			c.Replicas = c.Replicas[:1]
		}, replicas: []string{"127.0.0.1:11"}, kept: []string{"127.0.0.1:11"},
			notes: []string{"cluster main: replica 127.0.0.1:12 is not a replica now (the master since a failover); not removed"}},
		{name: "fenced old master is not added", failover: true, edit: func(c *conf.Cluster) {
			c.Replicas = append(c.Replicas, conf.Replica{Address: "127.0.0.1:10", Weight: 1})
		}, replicas: []string{"127.0.0.1:11"}, kept: []string{"127.0.0.1:11"},
			notes: []string{"cluster main: replica 127.0.0.1:10 is already in the cluster (an old master fenced by a failover); not added"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topo, old, next := reloadConfigs(t, []int{1, 1}, tc.edit)
			if tc.failover {
				if _, err := topo.Promote("main", "127.0.0.1:12", nil); err != nil {
					t.Fatal(err)
				}
			}
			for _, b := range topo.Current().Clusters[0].Replicas {
				setLoad(b, 1)
			}
			beforeSnap := topo.Current()
			before := beforeSnap.Clusters[0]
			changed := topo.Changed()
			snap, notes := topo.Reconfigure(old, next)
			select {
			case <-changed:
			default:
				t.Fatal("Reconfigure did not publish")
			}
			if snap != topo.Current() || snap.Epoch != beforeSnap.Epoch+1 {
				t.Fatalf("epoch %d (current %d), want %d", snap.Epoch, topo.Current().Epoch, beforeSnap.Epoch+1)
			}
			after := snap.Clusters[0]
			if got := addresses(after.Replicas); !slices.Equal(got, tc.replicas) {
				t.Errorf("replicas %v, want %v", got, tc.replicas)
			}
			if after.Master != before.Master {
				t.Error("the master Backend changed")
			}
			for _, addr := range tc.kept {
				i := slices.IndexFunc(after.Replicas, func(b *Backend) bool { return b.Address == addr })
				j := slices.IndexFunc(before.Replicas, func(b *Backend) bool { return b.Address == addr })
				if i < 0 || j < 0 || after.Replicas[i] != before.Replicas[j] {
					t.Errorf("replica %s did not keep its Backend", addr)
				}
			}
			if !slices.Equal(notes, tc.notes) {
				t.Errorf("notes %q, want %q", notes, tc.notes)
			}
			if tc.check != nil {
				tc.check(t, before, after)
			}
		})
	}
}

// TestReconfigureAddedReplicaComesUpWithProbe: the Prober starts watching a
// replica a reload added, and its first good probe brings it up; a removed
// one loses its worker (no more probes).
func TestReconfigureAddedReplicaComesUpWithProbe(t *testing.T) {
	topo, old, next := reloadConfigs(t, []int{1, 1}, func(c *conf.Cluster) {
		c.Replicas = append(c.Replicas[1:], conf.Replica{Address: "127.0.0.1:20", Weight: 1})
	})
	var mu sync.Mutex
	probes := map[string]int{}
	changes := make(chan string, 16)
	p := &Prober{Topology: topo, Interval: 5 * time.Millisecond, Timeout: time.Second, FailuresBeforeDown: 1,
		Check: func(ctx context.Context, b *Backend) (*Status, error) {
			mu.Lock()
			probes[b.Address]++
			mu.Unlock()
			return &Status{SecondsBehind: 0, Replicating: true, IORunning: true, SQLRunning: true}, nil
		},
		OnChange: func(b *Backend, from, to State, _ string) {
			changes <- b.Address + " " + from.String() + "->" + to.String()
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	count := func(addr string) int { mu.Lock(); defer mu.Unlock(); return probes[addr] }
	waitFor(t, "probes of the removed replica before the reload", func() bool { return count("127.0.0.1:11") > 0 })

	snap, _ := topo.Reconfigure(old, next)
	added := snap.Clusters[0].Replicas[1]
	select {
	case c := <-changes:
		if c != "127.0.0.1:20 down->up" {
			t.Fatalf("state change %q, want the added replica down->up", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the added replica did not come up within 10s")
	}
	if !added.Up() {
		t.Fatalf("added replica is %s after a good probe", added.State())
	}
	// The removed replica's worker stops: while the added one is probed
	// ten more times, the removed one is probed at most once more (a
	// probe under way at the reload).
	waitFor(t, "probes of the added replica", func() bool { return count("127.0.0.1:20") > 3 })
	removed, seen := count("127.0.0.1:11"), count("127.0.0.1:20")
	waitFor(t, "ten more probes of the added replica", func() bool { return count("127.0.0.1:20") >= seen+10 })
	if n := count("127.0.0.1:11"); n > removed+1 {
		t.Errorf("the removed replica was probed %d more times after the reload", n-removed)
	}
}
