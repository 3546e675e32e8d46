package tests

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/server"
)

// The protocol-level bad-input cases live in tests/badinput, on a topology
// of their own.

// TestBadInputReplicaDown kills one replica: reads keep working on the
// other, the dead one leaves rotation, and it returns once restarted.
func TestBadInputReplicaDown(t *testing.T) {
	victim := env.topo.Replicas[0]
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if !victim.Running() {
			if err := victim.Start(ctx); err != nil {
				t.Errorf("restart %s: %v", victim.Name, err)
			}
		}
		waitBackendUp(t, env.srv, victim.Addr())
	})
	d := appDB(t, "", nil)
	ctx := ctxT(t)
	for range 6 {
		c, err := d.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		id := serverID(t, ctx, c, "")
		if id == victim.ServerID {
			t.Fatalf("read served by the killed replica %d", id)
		}
		c.Raw(func(any) error { return driverBadConn })
		c.Close()
	}
	// A session whose replica dies under it is retried elsewhere.
	if err := victim.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitBackendUp(t, env.srv, victim.Addr())
	seen := map[uint32]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for !seen[victim.ServerID] && time.Now().Before(deadline) {
		c, err := d.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen[serverID(t, ctx, c, "")] = true
		c.Raw(func(any) error { return driverBadConn })
		c.Close()
	}
	if !seen[victim.ServerID] {
		t.Fatalf("restarted replica %d never served again (seen %v)", victim.ServerID, seen)
	}
	c := conn(t, d)
	if id := serverID(t, ctx, c, ""); id != victim.ServerID {
		// Make this session's replica the victim, then kill it.
		for id != victim.ServerID {
			c.Raw(func(any) error { return driverBadConn })
			c.Close()
			c = conn(t, d)
			id = serverID(t, ctx, c, "")
		}
	}
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	if id := serverID(t, ctx, c, ""); id == victim.ServerID || id == 0 {
		t.Fatalf("read after the replica died returned %d", id)
	}
}

// waitBackendUp polls until sluice considers addr up.
func waitBackendUp(t *testing.T, srv *server.Server, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, c := range srv.Topology().Current().Clusters {
			for _, b := range c.Backends() {
				if b.Address == addr && b.Up() {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("backend %s not up within 30s", addr)
}
