package fleet

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
)

// startEtcd starts a 3-member etcd cluster for t. It skips only when etcd
// is not installed and CI is unset; under CI a missing etcd fails.
func startEtcd(t *testing.T) *sandbox.EtcdCluster {
	t.Helper()
	return sandbox.StartEtcdFor(t, sandbox.EtcdOptions{Members: 3})
}

// join starts a Fleet named instance on the cluster, closed at the end of t.
func join(t *testing.T, c *sandbox.EtcdCluster, instance string, ttl time.Duration) *Fleet {
	t.Helper()
	return joinWith(t, c, instance, ttl, nil)
}

// joinWith is join with setup called on the Fleet before Start (hooks).
func joinWith(t *testing.T, c *sandbox.EtcdCluster, instance string, ttl time.Duration, setup func(*Fleet)) *Fleet {
	t.Helper()
	cfg := conf.Fleet{Etcd: c.Endpoints(), Prefix: "/sluice/test", DialTimeout: conf.Duration{Duration: 2 * time.Second},
		SessionTTL: conf.Duration{Duration: ttl}}
	f, err := New(&cfg, Member{Instance: instance, Address: instance + ":6033", AdminAddress: instance + ":6032",
		Version: "test", Started: time.Now()}, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)))
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(f)
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

// TestTLSAndAuth: against etcd that serves TLS, asks for a client
// certificate and has auth enabled, an instance with [fleet]'s CA,
// certificate, key, user and password joins; one with a wrong password
// starts all the same, joins nothing and logs the refused login.
func TestTLSAndAuth(t *testing.T) {
	c := sandbox.StartEtcdFor(t, sandbox.EtcdOptions{Members: 1, TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := conf.Fleet{Etcd: c.Endpoints(), Prefix: "/sluice/secure", EtcdCA: c.TLS.CA, EtcdCert: c.TLS.Cert, EtcdKey: c.TLS.Key,
		DialTimeout: conf.Duration{Duration: 2 * time.Second}, SessionTTL: conf.Duration{Duration: 5 * time.Second}}
	tlsConf, err := clientTLS(&base)
	if err != nil {
		t.Fatal(err)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), TLS: tlsConf, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	steps := []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "fleet"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "fleet", "/sluice/secure/", clientv3.GetPrefixRangeEnd("/sluice/secure/"),
				clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "sluice", "sluice-pw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "sluice", "fleet"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("etcd auth setup step %d: %v", i+1, err)
		}
	}

	good := base
	good.EtcdUser, good.EtcdPassword = "sluice", "sluice-pw"
	a, err := New(&good, Member{Instance: "a", Address: "a:6033", Started: time.Now()}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { _ = a.Close() })
	waitFor(t, "a registered over TLS with a user", 20*time.Second, func() bool { return a.Registered() && a.Up() })
	waitFor(t, "a in its view", 5*time.Second, func() bool { return slices.Equal(names(a.Members()), []string{"a"}) })

	bad := good
	bad.EtcdPassword = "wrong"
	core, logs := observer.New(zap.WarnLevel)
	b, err := New(&bad, Member{Instance: "b", Address: "b:6033", Started: time.Now()}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	t.Cleanup(func() { _ = b.Close() })
	waitFor(t, "b logs the refused login", 20*time.Second, func() bool {
		for _, e := range logs.FilterMessageSnippet("cannot log in to etcd").All() {
			if err, ok := e.ContextMap()["error"].(string); ok && strings.Contains(err, "authentication failed") {
				return true
			}
		}
		return false
	})
	if b.Registered() || b.Up() {
		t.Error("b joined with a wrong password")
	}
	if got := names(a.Members()); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a's view = %v, want only a", got)
	}
}

// TestDeletedKeyIsWrittenAgain: a membership key someone deletes (an
// operator's etcdctl del) comes back under the same lease, without a new
// registration.
func TestDeletedKeyIsWrittenAgain(t *testing.T) {
	c := startEtcd(t)
	a := join(t, c, "a", 10*time.Second)
	waitFor(t, "a registered", 20*time.Second, a.Registered)
	raw, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "/sluice/test/members/a"
	before, err := raw.Get(ctx, key)
	if err != nil || len(before.Kvs) != 1 {
		t.Fatalf("get %s: %v, %v", key, before, err)
	}
	if _, err := raw.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, "the key written again", 10*time.Second, func() bool {
		r, err := raw.Get(ctx, key)
		return err == nil && len(r.Kvs) == 1
	})
	t.Logf("deleted key back after %v", took)
	after, err := raw.Get(ctx, key)
	if err != nil || len(after.Kvs) != 1 || after.Kvs[0].Lease != before.Kvs[0].Lease {
		t.Fatalf("key after: %v, %v; want the lease %x", after, err, before.Kvs[0].Lease)
	}
	if n := a.Registrations(); n != 1 {
		t.Errorf("registrations = %d, want 1 (same lease, no new session)", n)
	}
	waitFor(t, "a in its view again", 5*time.Second, func() bool { return slices.Equal(names(a.Members()), []string{"a"}) })
}
