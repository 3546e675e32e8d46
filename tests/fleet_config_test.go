package tests

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/fleet"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// pushedConfig is a fleet configuration for the shared topology: the first
// replica at weight, and extra appended (rules). It sets no instance-local
// key an instance would keep anyway, except the listeners every file has.
func pushedConfig(weight int, extra string) string {
	text := env.topo.SluiceConfigWith(sandbox.SluiceOptions{Listen: "127.0.0.1:0"})
	r0 := fmt.Sprintf("address = %q\n", env.topo.Replicas[0].Addr())
	text = strings.Replace(text, r0, r0+fmt.Sprintf("  weight = %d\n", weight), 1)
	return text + extra
}

// pushFile does what sluice config push does (cmd/sluice/fleetconfig.go):
// check the file as check-config does, then store it; it returns the
// revision, or the check's error with nothing stored.
func pushFile(t *testing.T, c *sandbox.EtcdCluster, prefix, path string) (int64, error) {
	t.Helper()
	text, err := fleet.CheckConfigFile(path, false)
	if err != nil {
		return 0, err
	}
	return pushText(t, c, prefix, text), nil
}

// pushText stores text under prefix as the fleet configuration, unchecked.
func pushText(t *testing.T, c *sandbox.EtcdCluster, prefix string, text []byte) int64 {
	t.Helper()
	cli, err := fleet.Dial(etcdOf(c, prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	rev, err := fleet.PushConfig(ctxT(t), cli, prefix, text)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// etcdOf is a [fleet] table reaching c under prefix.
func etcdOf(c *sandbox.EtcdCluster, prefix string) *conf.Fleet {
	return &conf.Fleet{Etcd: c.Endpoints(), Prefix: prefix, DialTimeout: conf.Duration{Duration: 5 * time.Second}}
}

// storedConfig reads the fleet configuration under prefix (sluice config get).
func storedConfig(t *testing.T, c *sandbox.EtcdCluster, prefix string) ([]byte, int64) {
	t.Helper()
	cli, err := fleet.Dial(etcdOf(c, prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	text, rev, err := fleet.GetConfig(ctxT(t), cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return text, rev
}

// fleetLoad runs clients go-sql-driver clients on each of srvs, each
// writing a row and reading it back in a loop until stop; it counts
// statements and errors.
type fleetLoad struct {
	ok, failed atomic.Int64
	firstErr   atomic.Value
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

func startFleetLoad(t *testing.T, table string, clients int, srvs ...*server.Server) *fleetLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &fleetLoad{cancel: cancel}
	o := env.topo.Opts
	for si, srv := range srvs {
		d, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, "sluice_test", nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		for c := range clients {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					id := (si*100+c)*1_000_000 + i
					_, err := d.ExecContext(ctx, "INSERT INTO "+table+" VALUES (?)", id)
					if err == nil {
						var n int
						err = d.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE id = ?", id).Scan(&n)
					}
					switch {
					case ctx.Err() != nil:
						return
					case err != nil:
						l.failed.Add(1)
						l.firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %v", srv.Addr(), err))
					default:
						l.ok.Add(1)
					}
				}
			}()
		}
	}
	return l
}

// stop ends the load and waits for its clients.
func (l *fleetLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

// TestFleetConfigPush: a configuration pushed to the fleet (a replica's
// weight, a new rule) under load from go-sql-driver clients on all three
// sluices is applied by all three within 2 s, with no client error, and is
// in effect (SHOW RULES, SHOW BACKENDS); a file that fails check-config is
// refused with check-config's messages and changes neither etcd nor any
// instance; a revision written to etcd past the command that does not
// validate is refused by every instance, which keeps the one it applied;
// an instance that starts later applies the stored revision, and keeps it
// over its local file through RELOAD CONFIG.
func TestFleetConfigPush(t *testing.T) {
	c := startFleetEtcd(t)
	prefix := fmt.Sprintf("/sluice/cfg-%d", time.Now().UnixNano())
	names := []string{"cfg-1", "cfg-2", "cfg-3"}
	var srvs []*server.Server
	var admins []*sql.DB
	// Each instance's local file lists only the first replica: the pushed
	// file adds the second, so one push brings a new replica, a weight and a
	// rule at once.
	r1 := fmt.Sprintf("  [[cluster.replica]]\n  address = %q\n", env.topo.Replicas[1].Addr())
	for _, n := range names {
		local := fleetConfigText(c, prefix, n)
		if !strings.Contains(local, r1) {
			t.Fatalf("the local configuration has no block %q to remove", r1)
		}
		s := fleetSluiceText(t, strings.Replace(local, r1, "", 1), n)
		if got := len(s.Topology().Current().Cluster("main").Replicas); got != 1 {
			t.Fatalf("%s starts with %d replicas, want 1", n, got)
		}
		srvs = append(srvs, s)
		admins = append(admins, adminDB(t, s, adminPassword))
	}
	waitUntil(t, "SHOW FLEET lists all three", 20*time.Second, func() bool { return len(showFleet(t, admins[0])) == 3 })
	for _, s := range srvs {
		if got := scrapeFrom(t, s, "sluice_fleet_config_revision"); got != 0 {
			t.Fatalf("%s: sluice_fleet_config_revision %v before any push", s.Addr(), got)
		}
	}

	d := appDB(t, "sluice_test", nil)
	mustExec(t, d, "CREATE TABLE fleet_cfg (id INT PRIMARY KEY)")
	t.Cleanup(func() { _, _ = d.ExecContext(context.Background(), "DROP TABLE IF EXISTS fleet_cfg") })
	if err := env.topo.WaitReplicated(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	good := filepath.Join(dir, "fleet.toml")
	rule := `
[[rule]]
name = "fleet-pushed"
pattern = "fleet-pushed-marker"
kind = "read"
route = "replica"
`
	if err := os.WriteFile(good, []byte(pushedConfig(3, rule)), 0o600); err != nil {
		t.Fatal(err)
	}
	load := startFleetLoad(t, "fleet_cfg", 3, srvs...)
	// A second of traffic before the push, so the clients are mid-flight
	// when it lands.
	loadStart := time.Now()
	waitUntil(t, "the load runs", 20*time.Second, func() bool { return load.ok.Load() >= 30 && time.Since(loadStart) > time.Second })
	rev, err := pushFile(t, c, prefix, good)
	if err != nil {
		t.Fatalf("push of a good file: %v", err)
	}
	pushed := time.Now()
	took := waitUntil(t, "all three report the pushed revision in SHOW FLEET", 2*time.Second, func() bool {
		rows := showFleet(t, admins[0])
		for _, n := range names {
			if rows[n]["config_revision"] != fmt.Sprint(rev) {
				return false
			}
		}
		return true
	})
	t.Logf("revision %d: all three sluices reported it applied (SHOW FLEET on %s) %v after the push returned",
		rev, names[0], took.Round(time.Millisecond))
	// A second of traffic after the apply too.
	after, applied := load.ok.Load(), time.Now()
	waitUntil(t, "the load goes on after the apply", 20*time.Second, func() bool {
		return load.ok.Load() >= after+30 && time.Since(applied) > time.Second
	})
	load.stop()
	t.Logf("load: 9 clients (3 per sluice), %d write+read pairs ok, %d failed, over %v (push at %v)", load.ok.Load(), load.failed.Load(),
		time.Since(loadStart).Round(time.Millisecond), pushed.Sub(loadStart).Round(time.Millisecond))
	if n := load.failed.Load(); n != 0 {
		t.Errorf("%d client errors during the push; first: %v", n, load.firstErr.Load())
	}
	replica := env.topo.Replicas[0].Addr()
	for i, s := range srvs {
		if got := scrapeFrom(t, s, "sluice_fleet_config_revision"); got != float64(rev) {
			t.Errorf("%s: sluice_fleet_config_revision %v, want %d", names[i], got, rev)
		}
		assertPushedInEffect(t, names[i], admins[i], replica, "3")
	}

	// A file that fails check-config: refused with check-config's own
	// messages, nothing stored, nothing changed.
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte(pushedConfig(0, rule)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, want := conf.LoadWith(bad, conf.LoadOptions{})
	if want == nil {
		t.Fatal("the bad file passes check-config; the test needs one that does not")
	}
	if _, err := pushFile(t, c, prefix, bad); err == nil || err.Error() != want.Error() {
		t.Fatalf("push of a bad file: %v, want check-config's error %q", err, want)
	}
	if text, got := storedConfig(t, c, prefix); got != rev || string(text) != pushedConfig(3, rule) {
		t.Fatalf("etcd after the refused push: revision %d (want %d), text changed: %v", got, rev, string(text) != pushedConfig(3, rule))
	}

	// The same bad text stored past the command (an operator with etcdctl):
	// every instance refuses it and keeps the revision it applied.
	badRev := pushText(t, c, prefix, []byte(pushedConfig(0, rule)))
	for i, s := range srvs {
		waitUntil(t, names[i]+" refuses the bad revision", 10*time.Second, func() bool {
			return scrapeFrom(t, s, "sluice_fleet_config_rejected_revision") == float64(badRev)
		})
		if got := s.Fleet().ConfigRevision(); got != rev {
			t.Errorf("%s applied revision %d after the bad one, want %d kept", names[i], got, rev)
		}
		assertPushedInEffect(t, names[i], admins[i], replica, "3")
		if !eventSays(t, admins[i], fmt.Sprintf("revision %d refused", badRev)) {
			t.Errorf("%s: SHOW EVENTS has no event for the refused revision %d", names[i], badRev)
		}
	}
	if rows := showFleet(t, admins[0]); rows[names[1]]["config_revision"] != fmt.Sprint(rev) {
		t.Errorf("SHOW FLEET after the bad revision: %v, want config_revision %d kept", rows[names[1]], rev)
	}

	// Good again, then a fourth instance that starts afterwards applies the
	// stored revision at start.
	rev2, err := pushFile(t, c, prefix, good)
	if err != nil {
		t.Fatal(err)
	}
	s4, local4 := fleetSluiceFromFile(t, c, prefix, "cfg-4")
	took = waitUntil(t, "the late instance applies the stored revision", 20*time.Second, func() bool {
		return s4.Fleet().ConfigRevision() == rev2
	})
	t.Logf("cfg-4 applied the stored revision %d %v after it started", rev2, took.Round(time.Millisecond))
	a4 := adminDB(t, s4, adminPassword)
	assertPushedInEffect(t, "cfg-4", a4, replica, "3")
	// RELOAD CONFIG reads the local file again and keeps the pushed
	// revision over it; the local file still decides its instance-local
	// keys (here a proxy.state_dir, which needs a restart, is reported).
	text, err := os.ReadFile(local4)
	if err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	text = []byte(strings.Replace(string(text), "[proxy]\n", fmt.Sprintf("[proxy]\nstate_dir = %q\n", stateDir), 1))
	if err := os.WriteFile(local4, text, 0o600); err != nil {
		t.Fatal(err)
	}
	changes, err := s4.Reload()
	if err != nil {
		t.Fatalf("RELOAD on cfg-4: %v", err)
	}
	if !strings.Contains(strings.Join(changes, "; "), "needs restart: proxy.state_dir") {
		t.Errorf("RELOAD on cfg-4 after a local state_dir change: %v, want it reported as needing a restart", changes)
	}
	assertPushedInEffect(t, "cfg-4 after RELOAD", a4, replica, "3")
	for i, s := range srvs {
		waitUntil(t, names[i]+" applies the good revision after the bad one", 10*time.Second, func() bool {
			return s.Fleet().ConfigRevision() == rev2
		})
		if got := scrapeFrom(t, s, "sluice_fleet_config_rejected_revision"); got != 0 {
			t.Errorf("%s: sluice_fleet_config_rejected_revision %v after a good revision, want 0", names[i], got)
		}
	}
}

// fleetSluiceFromFile is fleetSluice with the configuration loaded from a
// file (returned), so that RELOAD CONFIG can read it again.
func fleetSluiceFromFile(t *testing.T, c *sandbox.EtcdCluster, prefix, instance string) (*server.Server, string) {
	t.Helper()
	text := fleetConfigText(c, prefix, instance)
	path := filepath.Join(t.TempDir(), "local.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, path
}

// assertPushedInEffect checks that the pushed rule, weight and second
// replica are in force on an admin port.
func assertPushedInEffect(t *testing.T, name string, admin *sql.DB, replica, weight string) {
	t.Helper()
	found := false
	for _, r := range adminTable(t, admin, "SHOW RULES") {
		found = found || r["name"] == "fleet-pushed"
	}
	if !found {
		t.Errorf("%s: SHOW RULES lacks the pushed rule fleet-pushed", name)
	}
	seen, added := false, false
	for _, r := range adminTable(t, admin, "SHOW BACKENDS") {
		added = added || r["address"] == env.topo.Replicas[1].Addr()
		if r["address"] != replica {
			continue
		}
		seen = true
		if r["weight"] != weight {
			t.Errorf("%s: SHOW BACKENDS gives %s weight %s, want the pushed %s", name, replica, r["weight"], weight)
		}
	}
	if !seen {
		t.Errorf("%s: SHOW BACKENDS lacks the replica %s", name, replica)
	}
	if !added {
		t.Errorf("%s: SHOW BACKENDS lacks the replica the pushed file adds, %s", name, env.topo.Replicas[1].Addr())
	}
}

// eventSays reports whether SHOW EVENTS on admin has an event whose detail
// contains s.
func eventSays(t *testing.T, admin *sql.DB, s string) bool {
	t.Helper()
	for _, r := range adminTable(t, admin, "SHOW EVENTS") {
		for _, v := range r {
			if strings.Contains(v, s) {
				return true
			}
		}
	}
	return false
}
