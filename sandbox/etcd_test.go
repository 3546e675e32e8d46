package sandbox

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// startEtcdT starts an etcd cluster of n members for t, skipping the test
// only when etcd is not installed and CI is unset.
func startEtcdT(t *testing.T, n int) *EtcdCluster {
	t.Helper()
	if _, err := FindEtcdBinary(); errors.Is(err, ErrNoEtcd) && os.Getenv("CI") == "" {
		t.Skipf("skipping: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := StartEtcd(ctx, EtcdOptions{Members: n, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// TestEtcdClusterLosesAndRegainsQuorum: three members come up healthy on
// distinct ports; with one killed the other two keep a leader; with two
// killed the last one has none; started again on their data dirs, all
// three are healthy.
func TestEtcdClusterLosesAndRegainsQuorum(t *testing.T) {
	c := startEtcdT(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen := map[int]bool{}
	for _, m := range c.Members {
		if seen[m.ClientPort] || seen[m.PeerPort] {
			t.Fatalf("port reused: %+v", c.Members)
		}
		seen[m.ClientPort], seen[m.PeerPort] = true, true
		if err := m.Healthy(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Members[2].Kill(); err != nil {
		t.Fatal(err)
	}
	if c.Members[2].Running() {
		t.Fatal("etcd3 still running after Kill")
	}
	for _, m := range c.Members[:2] {
		if err := m.WaitHealthy(ctx, 0); err != nil {
			t.Fatalf("with one member down: %v", err)
		}
	}
	if err := c.Members[1].Kill(); err != nil {
		t.Fatal(err)
	}
	// The survivor notices the lost quorum after its election timeout.
	deadline := time.Now().Add(30 * time.Second)
	for c.Members[0].Healthy(ctx) == nil {
		if time.Now().After(deadline) {
			t.Fatal("etcd1 still healthy 30s after losing its quorum")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range c.Members[1:] {
		if _, err := m.StartNoWait(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c.Members {
		if err := m.WaitHealthy(ctx, 0); err != nil {
			t.Fatalf("after restart: %v", err)
		}
	}
}
