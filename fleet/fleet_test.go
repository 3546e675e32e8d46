package fleet

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
)

// startEtcd starts a 3-member etcd cluster for t. It skips only when etcd
// is not installed and CI is unset; under CI a missing etcd fails.
func startEtcd(t *testing.T) *sandbox.EtcdCluster {
	t.Helper()
	if _, err := sandbox.FindEtcdBinary(); errors.Is(err, sandbox.ErrNoEtcd) && os.Getenv("CI") == "" {
		t.Skipf("skipping: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := sandbox.StartEtcd(ctx, sandbox.EtcdOptions{Members: 3, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// join starts a Fleet named instance on the cluster, closed at the end of t.
func join(t *testing.T, c *sandbox.EtcdCluster, instance string, ttl time.Duration) *Fleet {
	t.Helper()
	cfg := conf.Fleet{Etcd: c.Endpoints(), Prefix: "/sluice/test", DialTimeout: conf.Duration{Duration: 2 * time.Second},
		SessionTTL: conf.Duration{Duration: ttl}}
	f, err := New(&cfg, Member{Instance: instance, Address: instance + ":6033", AdminAddress: instance + ":6032",
		Version: "test", Started: time.Now()}, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)))
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// waitFor polls cond every 10ms until it holds or limit passes, and
// returns how long it took.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

func names(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Instance)
	}
	return out
}

// TestMembership: two instances see each other with their records; the
// one that closes leaves the other's view within a second (its lease is
// revoked, not left to expire).
func TestMembership(t *testing.T) {
	c := startEtcd(t)
	a := join(t, c, "a", 10*time.Second)
	b := join(t, c, "b", 10*time.Second)
	both := func(f *Fleet) func() bool {
		return func() bool { return slices.Equal(names(f.Members()), []string{"a", "b"}) }
	}
	waitFor(t, "a sees a and b", 20*time.Second, both(a))
	waitFor(t, "b sees a and b", 20*time.Second, both(b))
	if !a.Up() && !b.Up() {
		waitFor(t, "etcd up", 5*time.Second, func() bool { return a.Up() && b.Up() })
	}
	m := a.Members()[1]
	if m.Address != "b:6033" || m.AdminAddress != "b:6032" || m.Version != "test" || m.Lease == 0 || m.Started.IsZero() {
		t.Errorf("b's record as a sees it: %+v", m)
	}
	ttl, err := a.LeaseTTL(context.Background(), m.Lease)
	if err != nil || ttl <= 0 || ttl > 10*time.Second {
		t.Errorf("b's lease TTL = %v, %v", ttl, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, "b leaves a's view", time.Second, func() bool { return slices.Equal(names(a.Members()), []string{"a"}) })
	t.Logf("b left a's view %v after its Close returned", took)
	if _, err := a.LeaseTTL(context.Background(), m.Lease); err == nil {
		t.Error("b's lease still alive after Close")
	}
}

// TestRejoinAfterQuorumLoss: with two of three members killed for longer
// than the lease, the instance reports etcd down and loses its lease; with
// them back it registers again, without a restart.
func TestRejoinAfterQuorumLoss(t *testing.T) {
	c := startEtcd(t)
	a := join(t, c, "a", 2*time.Second)
	waitFor(t, "a registered", 20*time.Second, a.Registered)
	waitFor(t, "etcd up", 20*time.Second, a.Up)
	for _, m := range c.Members[1:] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "etcd down", 30*time.Second, func() bool { return !a.Up() })
	waitFor(t, "lease lost", 30*time.Second, func() bool { return !a.Registered() })
	for _, m := range c.Members[1:] {
		if _, err := m.StartNoWait(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "etcd up again", 60*time.Second, a.Up)
	waitFor(t, "registered again", 30*time.Second, a.Registered)
	if n := a.Registrations(); n < 2 {
		t.Errorf("registrations = %d, want at least 2 (joined, then again after the lost lease)", n)
	}
	waitFor(t, "a in its own view", 10*time.Second, func() bool { return slices.Equal(names(a.Members()), []string{"a"}) })
}
