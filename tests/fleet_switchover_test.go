package tests

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-proxy/sluice/fleet"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/sandbox"
)

// TestFleetSwitchoverCutsOtherInstances: a fleet switchover drains only the leader's sessions,
// and read_only does not stop the service account (it has SUPER), so a transaction another
// instance holds open on the old master could commit after the switchover read the old
// master's final position, acknowledged and then lost. Two such transactions are held open
// through the switchover: one through a non-leader sluice, one on a connection of the
// service account made straight to the old master (another instance's pool connection). Both
// must fail at COMMIT after the switchover, and the old master must hold no transaction the
// new master lacks.
func TestFleetSwitchoverCutsOtherInstances(t *testing.T) {
	lf := startLeaderFleet(t, "/sluice/switchover-kill-test")
	lf.ready(t)
	lead := lf.leader(t)
	other := (lead + 1) % 3
	o := lf.topo.Opts
	oldMaster, target := lf.topo.Master, lf.topo.Replicas[0]

	through, err := sql.Open("mysql", dsn(lf.srvs[other].Addr().String(), o.AppUser, o.AppPassword, "sluice_test", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer through.Close()
	viaSluice, err := through.BeginTx(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := viaSluice.ExecContext(ctxT(t), "INSERT INTO fleet_leader VALUES (900)"); err != nil {
		t.Fatalf("insert through sluice-%d: %v", other+1, err)
	}
	svc, err := sql.Open("mysql", oldMaster.DSN(o.ServiceUser, o.ServicePassword, sandbox.TestDatabase))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	direct, err := svc.BeginTx(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.ExecContext(ctxT(t), "INSERT INTO fleet_leader VALUES (901)"); err != nil {
		t.Fatal(err)
	}

	admin := adminDB(t, lf.srvs[lead], adminPassword)
	start := time.Now()
	if _, err := admin.ExecContext(ctxT(t), fmt.Sprintf("SWITCHOVER CLUSTER main TO '%s'", target.Addr())); err != nil {
		t.Fatalf("SWITCHOVER on the leader sluice-%d: %v", lead+1, err)
	}
	t.Logf("SWITCHOVER on the leader sluice-%d took %v", lead+1, time.Since(start).Round(time.Millisecond))

	// The switchover has read the old master's final position long ago: neither may commit.
	if err := viaSluice.Commit(); err == nil {
		t.Errorf("a transaction held open through non-leader sluice-%d committed after the switchover", other+1)
	} else {
		t.Logf("COMMIT through sluice-%d: %v", other+1, err)
	}
	if err := direct.Commit(); err == nil {
		t.Error("a transaction of the service account held open on the old master committed after the switchover")
	} else {
		t.Logf("COMMIT straight on the old master: %v", err)
	}

	gtid := func(s *sandbox.Server, v string) health.GTIDSet {
		t.Helper()
		var text string
		if err := mustRoot(t, s).QueryRowContext(ctxT(t), "SELECT @@GLOBAL."+v).Scan(&text); err != nil {
			t.Fatal(err)
		}
		g, err := health.ParseGTID(health.FlavorMariaDB, text)
		if err != nil {
			t.Fatalf("%s of %s: %v", v, s.Addr(), err)
		}
		return g
	}
	was, now := gtid(oldMaster, "gtid_binlog_pos"), gtid(target, "gtid_current_pos")
	if !now.Contains(was) {
		t.Fatalf("the old master %s holds %s, which the new master %s lacks (old %s, new %s)",
			oldMaster.Addr(), was.Missing(now), target.Addr(), was, now)
	}
	var n int
	for _, s := range []*sandbox.Server{oldMaster, target} {
		if err := mustRoot(t, s).QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM sluice_test.fleet_leader WHERE id IN (900, 901)").Scan(&n); err != nil || n != 0 {
			t.Errorf("%s holds %d of the rows of the killed transactions (%v); want none", s.Addr(), n, err)
		}
	}
	t.Logf("old master at %s, new master at %s", was, now)

	if h := lf.history(t); len(h) != 2 || h[1].Outcome != fleet.OutcomeSwitchover || h[1].Master != target.Addr() {
		t.Fatalf("history %+v; want the initial record and the switchover to %s", h, target.Addr())
	}
	if p := lf.etcdGet(t, "/clusters/main/pending"); len(p) != 0 {
		t.Errorf("pending record left after the switchover: %s", p[0].Value)
	}
	lf.followAll(t, target.Addr(), 2*time.Second)
	lf.writeThroughAll(t, 300)
}

// etcdGet reads the keys under the fleet's prefix + key, oldest CreateRevision first.
func (lf *leaderFleet) etcdGet(t *testing.T, key string) []*mvccKV {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: lf.etcd.Endpoints(), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Get(ctxT(t), lf.prefix+key, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*mvccKV, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = &mvccKV{Key: string(kv.Key), Value: string(kv.Value), Lease: kv.Lease}
	}
	return out
}

type mvccKV struct {
	Key, Value string
	Lease      int64
}

// TestFleetSwitchoverLeadershipLost: the leader loses its etcd session while its switchover
// drains a transaction of its own on the old master. The switchover must fail with nothing
// changed: the old master writable, the target still its replica, no new topology record,
// and the transaction free to commit on the old master.
func TestFleetSwitchoverLeadershipLost(t *testing.T) {
	lf := startLeaderFleet(t, "/sluice/switchover-lost-test")
	lf.ready(t)
	lead := lf.leader(t)
	o := lf.topo.Opts
	oldMaster, target := lf.topo.Master, lf.topo.Replicas[0]

	d, err := sql.Open("mysql", dsn(lf.srvs[lead].Addr().String(), o.AppUser, o.AppPassword, "sluice_test", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tx, err := d.BeginTx(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctxT(t), "INSERT INTO fleet_leader VALUES (700)"); err != nil {
		t.Fatal(err)
	}

	admin := adminDB(t, lf.srvs[lead], adminPassword)
	done := make(chan error, 1)
	go func() {
		_, err := admin.ExecContext(ctxT(t), fmt.Sprintf("SWITCHOVER CLUSTER main TO '%s'", target.Addr()))
		done <- err
	}()
	// The drain waits for the open transaction (switchover_timeout, 10s): the leadership is
	// taken away meanwhile by revoking the lease of the leader's election key.
	waitUntil(t, "the leader holds the cluster's writes", 5*time.Second, func() bool {
		return lf.srvs[lead].Topology().Current().Cluster("main").WritesHeld != ""
	})
	keys := lf.etcdGet(t, "/clusters/main/leader/")
	if len(keys) == 0 {
		t.Fatal("no election key in etcd")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: lf.etcd.Endpoints(), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lost := time.Now()
	if _, err := c.Revoke(ctxT(t), clientv3.LeaseID(keys[0].Lease)); err != nil {
		t.Fatal(err)
	}
	var swErr error
	select {
	case swErr = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the switchover did not end within 20s of the leadership loss")
	}
	if swErr == nil || !strings.Contains(swErr.Error(), "leadership of cluster main was lost") {
		t.Fatalf("SWITCHOVER after the leadership was lost = %v; want it failed naming the lost leadership", swErr)
	}
	t.Logf("SWITCHOVER ended %v after the lease was revoked: %v", time.Since(lost).Round(time.Millisecond), swErr)

	var ro int
	if err := mustRoot(t, oldMaster).QueryRowContext(ctxT(t), "SELECT @@GLOBAL.read_only").Scan(&ro); err != nil || ro != 0 {
		t.Errorf("old master read_only = %d (%v); want 0: a switchover that lost its leadership changes nothing", ro, err)
	}
	row := mustRoot(t, target).QueryRowContext(ctxT(t), "SELECT @@GLOBAL.read_only, (SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'system user')")
	var sys int
	if err := row.Scan(&ro, &sys); err != nil || ro != 1 || sys == 0 {
		t.Errorf("target read_only = %d, %d replication threads (%v); want a read-only replica", ro, sys, err)
	}
	if h := lf.history(t); len(h) != 1 || h[0].Outcome != fleet.OutcomeInitial {
		t.Errorf("history %+v; want only the initial record", h)
	}
	if err := tx.Commit(); err != nil {
		t.Errorf("the leader's own transaction on the old master: %v; want it committed once writes resumed", err)
	}
	var n int
	waitUntil(t, "the committed row reaches the target", 5*time.Second, func() bool {
		return mustRoot(t, target).QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM sluice_test.fleet_leader WHERE id = 700").Scan(&n) == nil && n == 1
	})
}

// TestFleetSwitchoverHoldsOtherInstances: while the leader's switchover is under way (its
// drain waits for a transaction open on the leader), the other instances hold the cluster's
// writes too, instead of sending them to the old master: an autocommit INSERT through a
// non-leader is answered only after the switchover, and it is on the new master.
func TestFleetSwitchoverHoldsOtherInstances(t *testing.T) {
	lf := startLeaderFleet(t, "/sluice/switchover-hold-test")
	lf.ready(t)
	lead := lf.leader(t)
	other := (lead + 1) % 3
	o := lf.topo.Opts
	target := lf.topo.Replicas[0]
	open := func(i int) *sql.DB {
		d, err := sql.Open("mysql", dsn(lf.srvs[i].Addr().String(), o.AppUser, o.AppPassword, "sluice_test", nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	tx, err := open(lead).BeginTx(ctxT(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctxT(t), "INSERT INTO fleet_leader VALUES (800)"); err != nil {
		t.Fatal(err)
	}
	admin := adminDB(t, lf.srvs[lead], adminPassword)
	switched := make(chan time.Time, 1)
	go func() {
		if _, err := admin.ExecContext(ctxT(t), fmt.Sprintf("SWITCHOVER CLUSTER main TO '%s'", target.Addr())); err != nil {
			t.Errorf("SWITCHOVER: %v", err)
		}
		switched <- time.Now()
	}()
	took := waitUntil(t, "sluice-"+fmt.Sprint(other+1)+" holds the cluster's writes", 2*time.Second, func() bool {
		return lf.srvs[other].Topology().Current().Cluster("main").WritesHeld != ""
	})
	t.Logf("the non-leader holds its writes %v after the SWITCHOVER was sent", took.Round(time.Millisecond))
	wrote := make(chan error, 1)
	var answered time.Time
	go func() {
		_, err := open(other).ExecContext(ctxT(t), "INSERT INTO fleet_leader VALUES (801)")
		answered = time.Now()
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("the INSERT through the non-leader was answered (%v) while the switchover was held up by the leader's drain", err)
	case <-time.After(500 * time.Millisecond): // the drain waits for tx; the INSERT must wait with it
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("COMMIT of the leader's open transaction: %v", err)
	}
	end := <-switched
	if err := <-wrote; err != nil {
		t.Fatalf("the held INSERT through the non-leader: %v", err)
	}
	if answered.Before(end.Add(-time.Second)) {
		t.Errorf("the held INSERT was answered at %v, before the switchover ended at %v", answered, end)
	}
	var n int
	if err := mustRoot(t, target).QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM sluice_test.fleet_leader WHERE id IN (800, 801)").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows 800 and 801 on the new master: %d (%v), want 2", n, err)
	}
	if held := lf.srvs[other].Topology().Current().Cluster("main").WritesHeld; held != "" {
		t.Errorf("the non-leader still holds writes after the switchover: %s", held)
	}
}
