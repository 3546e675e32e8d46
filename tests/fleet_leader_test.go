package tests

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-proxy/sluice/fleet"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// leaderFleet is three in-process sluices sharing an etcd cluster in front of a topology of
// their own (the tests here move its master).
type leaderFleet struct {
	etcd   *sandbox.EtcdCluster
	topo   *sandbox.Topology
	prefix string
	srvs   []*server.Server
}

func startLeaderFleet(t *testing.T, prefix string) *leaderFleet {
	t.Helper()
	lf := &leaderFleet{etcd: startFleetEtcd(t), prefix: prefix}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topo.Stop() })
	lf.topo = topo
	m := mustRoot(t, topo.Master)
	mustExec(t, m, "CREATE TABLE IF NOT EXISTS sluice_test.fleet_leader (id INT PRIMARY KEY)")
	for i := 1; i <= 3; i++ {
		o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
			ProxyKeys:  []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`},
			HealthKeys: []string{`interval = "200ms"`, `timeout = "500ms"`, `failover_block = "0s"`}}
		text := topo.SluiceConfigWith(o) + fmt.Sprintf("\n[admin]\nuser = \"admin\"\npassword = %q\n\n[fleet]\netcd = [\"%s\"]\nprefix = %q\ninstance = \"sluice-%d\"\ndial_timeout = \"1s\"\nsession_ttl = \"2s\"\n",
			adminPassword, strings.Join(lf.etcd.Endpoints(), `", "`), prefix, i)
		srv := fleetSluiceText(t, text, fmt.Sprintf("sluice-%d", i))
		lf.srvs = append(lf.srvs, srv)
	}
	return lf
}

// ready waits until one instance leads cluster main and every instance applied the initial
// topology record.
func (lf *leaderFleet) ready(t *testing.T) {
	t.Helper()
	waitUntil(t, "one leader and the initial topology applied everywhere", 20*time.Second, func() bool {
		for _, s := range lf.srvs {
			if s.Fleet().TopologyRevision("main") == 0 {
				return false
			}
		}
		return lf.leader(t) >= 0
	})
}

// leader is the index of the instance that leads cluster main, -1 when none does; it fails
// the test when two do.
func (lf *leaderFleet) leader(t *testing.T) int {
	t.Helper()
	found := -1
	for i, s := range lf.srvs {
		if _, ok := s.Fleet().Leader("main"); ok {
			if found >= 0 {
				t.Fatalf("both sluice-%d and sluice-%d lead cluster main", found+1, i+1)
			}
			found = i
		}
	}
	return found
}

// history reads cluster main's topology history from etcd, oldest first.
func (lf *leaderFleet) history(t *testing.T) []fleet.TopologyRecord {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: lf.etcd.Endpoints(), DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Get(ctxT(t), lf.prefix+"/clusters/main/history/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	var out []fleet.TopologyRecord
	for _, kv := range resp.Kvs {
		var r fleet.TopologyRecord
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			t.Fatalf("%s: %v", kv.Key, err)
		}
		r.Revision = kv.ModRevision
		out = append(out, r)
	}
	return out
}

// followAll waits until every instance sends cluster main's writes to master.
func (lf *leaderFleet) followAll(t *testing.T, master string, limit time.Duration) {
	t.Helper()
	for i, s := range lf.srvs {
		took := waitUntil(t, fmt.Sprintf("sluice-%d follows %s", i+1, master), limit, func() bool {
			c := s.Topology().Current().Cluster("main")
			return c.Master.Address == master && c.WritesRefused == ""
		})
		t.Logf("sluice-%d writes to %s after %v more", i+1, master, took.Round(time.Millisecond))
	}
}

// writeThroughAll inserts one row through each instance, starting at id.
func (lf *leaderFleet) writeThroughAll(t *testing.T, id int) {
	t.Helper()
	o := lf.topo.Opts
	for i, s := range lf.srvs {
		d, err := sql.Open("mysql", dsn(s.Addr().String(), o.AppUser, o.AppPassword, "sluice_test", nil))
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.ExecContext(ctxT(t), "INSERT INTO fleet_leader VALUES (?)", id+i)
		d.Close()
		if err != nil {
			t.Fatalf("write through sluice-%d: %v", i+1, err)
		}
	}
}

// TestFleetLeaderSwitchoverAndFailover: three sluices elect one prober-leader for the cluster,
// which records the initial topology; a SWITCHOVER run on another instance's admin port is
// forwarded to the leader, recorded once in etcd by it, and followed by all three; kill -9 of
// the new master is failed over exactly once (one "promoted" among the three, the others
// "followed", one history entry), and writes through every instance land on the new master.
func TestFleetLeaderSwitchoverAndFailover(t *testing.T) {
	lf := startLeaderFleet(t, "/sluice/leader-test")
	lf.ready(t)
	lead := lf.leader(t)
	h := lf.history(t)
	if len(h) != 1 || h[0].Outcome != fleet.OutcomeInitial || h[0].Master != lf.topo.Master.Addr() || h[0].By != fmt.Sprintf("sluice-%d", lead+1) {
		t.Fatalf("history after the election: %+v; want one initial record of %s by sluice-%d", h, lf.topo.Master.Addr(), lead+1)
	}

	other := (lead + 1) % 3
	target := lf.topo.Replicas[0]
	admin := adminDB(t, lf.srvs[other], adminPassword)
	start := time.Now()
	if _, err := admin.ExecContext(ctxT(t), fmt.Sprintf("SWITCHOVER CLUSTER main TO '%s'", target.Addr())); err != nil {
		t.Fatalf("SWITCHOVER on sluice-%d (leader sluice-%d): %v", other+1, lead+1, err)
	}
	t.Logf("SWITCHOVER on sluice-%d, forwarded to the leader sluice-%d, took %v", other+1, lead+1, time.Since(start).Round(time.Millisecond))
	lf.followAll(t, target.Addr(), time.Second)
	lf.writeThroughAll(t, 100)
	h = lf.history(t)
	if len(h) != 2 || h[1].Outcome != fleet.OutcomeSwitchover || h[1].Master != target.Addr() || h[1].By != fmt.Sprintf("sluice-%d", lead+1) {
		t.Fatalf("history after the switchover: %+v; want a second record, the switchover to %s by sluice-%d", h, target.Addr(), lead+1)
	}

	followedBefore := 0.0
	for _, s := range lf.srvs {
		followedBefore += scrapeFrom(t, s, `sluice_failovers_total{cluster="main",outcome="followed"}`)
	}
	killed := time.Now()
	if err := target.Kill(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a new master recorded in etcd", 20*time.Second, func() bool { return len(lf.history(t)) == 3 })
	h = lf.history(t)
	nm := h[2].Master
	t.Logf("failover recorded %v after kill -9: %+v", time.Since(killed).Round(time.Millisecond), h[2])
	lf.followAll(t, nm, time.Second)
	lf.writeThroughAll(t, 200)
	t.Logf("writes through all three sluices %v after kill -9", time.Since(killed).Round(time.Millisecond))
	promoted, followed := 0.0, 0.0
	for _, s := range lf.srvs {
		promoted += scrapeFrom(t, s, `sluice_failovers_total{cluster="main",outcome="promoted"}`)
		followed += scrapeFrom(t, s, `sluice_failovers_total{cluster="main",outcome="followed"}`)
	}
	if followed -= followedBefore; promoted != 1 || followed != 2 || h[2].Outcome != "promoted" || len(lf.history(t)) != 3 {
		t.Fatalf("promoted %v, followed %v (want 1 and 2 since the kill); history %+v", promoted, followed, lf.history(t))
	}
}
