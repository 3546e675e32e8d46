package dataplane

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/protocol/fakebackend"
)

// backendFor's choices when a backend cannot serve. Backend states are set
// by the tests, as no prober runs.

// TestBackendForReplicaOut: a read finds the replica out of rotation
// (down after a failure, or held offline) and runs on the master; the
// replica is not even dialled. With reads_fall_back_to_master = false the
// read fails with ERR 2003 instead, and the master sees nothing of it.
func TestBackendForReplicaOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  func(b *health.Backend)
	}{
		{"down", func(b *health.Backend) { b.ReportFailure(errors.New("probe: connection refused")) }},
		{"offline", func(b *health.Backend) { b.Hold(health.StateOffline) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeCluster(t, "", "")
			fc.master.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{"master"}))
			tc.out(fc.replicaBackend())
			wantRows(t, "SELECT", fc.query("SELECT a FROM t"), []string{"master"})
			wantReceived(t, "master", fc.master, "COM_QUERY SELECT a FROM t")
			if n := logins(fc.replica); n != 0 {
				t.Fatalf("%d connections opened to a replica that is %s", n, tc.name)
			}
		})
		t.Run(tc.name+" without fallback", func(t *testing.T) {
			fc := newFakeCluster(t, "", "reads_fall_back_to_master = false")
			tc.out(fc.replicaBackend())
			wantErr(t, "SELECT", fc.query("SELECT a FROM t"), protocol.CRCouldNotConnect.Code,
				"no replica of cluster main can serve the read", "reads_fall_back_to_master is false")
			wantReceived(t, "master", fc.master)
			// A write is not a read: the master takes it.
			fc.master.OnQuery("UPDATE t SET a = 1", fakebackend.OK(1, 0))
			if r := fc.query("UPDATE t SET a = 1"); r.ok == nil {
				t.Fatalf("UPDATE with no replica serving: %v", r)
			}
		})
	}
}

// TestBackendForReplicaUnreachable: a replica sluice cannot connect to is
// taken out of rotation at once (no waiting for the probes), and the read
// runs on the master.
func TestBackendForReplicaUnreachable(t *testing.T) {
	fc := newFakeClusterWith(t, "", "", "replica")
	fc.master.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{"master"}))
	wantRows(t, "SELECT", fc.query("SELECT a FROM t"), []string{"master"})
	if st := fc.replicaBackend().State(); st != health.StateDown {
		t.Fatalf("the unreachable replica is %s, want down", st)
	}
	wantReceived(t, "master", fc.master, "COM_QUERY SELECT a FROM t")
}

// TestBackendForMasterDown: a write for a master that is down waits
// failover_write_wait for a failover, then fails with ERR 2003 naming the
// cluster, the master's state and the wait; it never dials the master.
// Reads still run on the replica meanwhile.
func TestBackendForMasterDown(t *testing.T) {
	const wait = 40 * time.Millisecond
	fc := newFakeCluster(t, `failover_write_wait = "40ms"`, "")
	fc.replica.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{"replica"}))
	fc.masterBackend().ReportFailure(errors.New("probe: connection refused"))

	t0 := time.Now()
	r := fc.query("UPDATE t SET a = 1")
	took := time.Since(t0)
	wantErr(t, "UPDATE", r, protocol.CRCouldNotConnect.Code, "cluster main has no master",
		"master "+fc.master.Addr()+" is down (probe: connection refused)", "failover_write_wait 40ms")
	if took < wait {
		t.Fatalf("the write failed after %v, before failover_write_wait %v", took, wait)
	}
	if n := logins(fc.master); n != 0 {
		t.Fatalf("%d connections opened to a master that is down", n)
	}
	wantRows(t, "SELECT", fc.query("SELECT a FROM t"), []string{"replica"})
}

// TestBackendForMasterUnreachable: a master that is up as far as the
// probes know but refuses the connection fails the write with ERR 2003 at
// once without auto_failover, and after failover_write_wait with it.
func TestBackendForMasterUnreachable(t *testing.T) {
	for _, tc := range []struct {
		healthKeys string
		want       func(addr string) []string
		minWait    time.Duration
	}{
		{"auto_failover = false", func(addr string) []string {
			return []string{"cannot connect to master " + addr + " of cluster main"}
		}, 0},
		{`failover_write_wait = "40ms"`, func(addr string) []string {
			return []string{"cluster main has no master", "cannot connect to master " + addr,
				"no failover gave it a master within failover_write_wait 40ms"}
		}, 40 * time.Millisecond},
	} {
		t.Run(tc.healthKeys, func(t *testing.T) {
			fc := newFakeClusterWith(t, tc.healthKeys, "", "master")
			addr := fc.masterBackend().Address
			t0 := time.Now()
			r := fc.query("UPDATE t SET a = 1")
			took := time.Since(t0)
			wantErr(t, "UPDATE", r, protocol.CRCouldNotConnect.Code, tc.want(addr)...)
			if took < tc.minWait {
				t.Fatalf("the write failed after %v, want a wait of %v", took, tc.minWait)
			}
		})
	}
}

// TestBackendForMasterPromotedDuringWait: a write that waits for a master
// that is down runs on the replica a failover promotes meanwhile, as a
// master: no read-only setup on the new connection.
func TestBackendForMasterPromotedDuringWait(t *testing.T) {
	fc := newFakeCluster(t, `failover_write_wait = "10s"`, "")
	fc.replica.OnQuery("UPDATE t SET a = 1", fakebackend.OK(7, 0))
	fc.masterBackend().ReportFailure(errors.New("probe: connection refused"))
	// As the server does: the pools follow a snapshot before the data
	// plane sees it, so the promoted server's connections are lent as the
	// master's.
	fc.env.topo.OnPublish = func(snap *health.Snapshot) {
		for _, b := range snap.Clusters[0].Backends() {
			fc.env.pool(b.Address).SetBackend(b)
		}
	}

	done := make(chan error, 1)
	go func() { done <- fc.run(comQuery("UPDATE t SET a = 1")) }()
	// Promote once the write waits; should it never, promote anyway so
	// that it ends before the test does.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(allStacks(), ").awaitMaster("); {
		if time.Now().After(deadline) {
			t.Error("the write did not wait for a master")
			break
		}
		time.Sleep(time.Millisecond)
	}

	if _, err := fc.env.topo.Promote("main", fc.replica.Addr(), nil); err != nil {
		t.Error(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the write ended the session: %v", err)
	}
	if r := oneReply(t, "UPDATE", fc.client.take(t)); r.ok == nil || r.ok.AffectedRows != 7 {
		t.Fatalf("UPDATE: %v, want the promoted server's OK", r)
	}
	wantReceived(t, "promoted replica", fc.replica, "COM_QUERY UPDATE t SET a = 1")
	if n := logins(fc.master); n != 0 {
		t.Fatalf("%d connections opened to the old master", n)
	}
}
