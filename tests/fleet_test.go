package tests

import (
	"database/sql"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// startFleetEtcd starts a 3-member etcd cluster for t. A missing etcd
// binary skips the test only outside CI; with CI set it fails it.
func startFleetEtcd(t *testing.T) *sandbox.EtcdCluster {
	t.Helper()
	return sandbox.StartEtcdFor(t, sandbox.EtcdOptions{Members: 3})
}

// fleetConfigText is the shared topology's configuration with the admin
// account and [fleet] on c under prefix, named instance ("" leaves the
// name to its default), with a 2s lease so a lost quorum costs it its
// lease quickly.
func fleetConfigText(c *sandbox.EtcdCluster, prefix, instance string) string {
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`}}
	text := env.topo.SluiceConfigWith(o) + fmt.Sprintf(`
[admin]
user = "admin"
password = %q

[fleet]
etcd = ["%s"]
prefix = %q
dial_timeout = "1s"
session_ttl = "2s"
`, adminPassword, strings.Join(c.Endpoints(), `", "`), prefix)
	if instance != "" {
		text += fmt.Sprintf("instance = %q\n", instance)
	}
	return text
}

// fleetSluice starts an in-process sluice in front of the shared topology
// with [fleet] on c under prefix, named instance ("" leaves the name to its
// default), with a 2s lease so a lost quorum costs it its lease quickly.
func fleetSluice(t *testing.T, c *sandbox.EtcdCluster, prefix, instance string) *server.Server {
	t.Helper()
	return fleetSluiceText(t, fleetConfigText(c, prefix, instance), instance)
}

// fleetSluiceText starts an in-process sluice on the configuration text,
// logging as instance.
func fleetSluiceText(t *testing.T, text, instance string) *server.Server {
	t.Helper()
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	log := zap.NewNop()
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		log, _ = zap.NewDevelopment()
	}
	srv, err := server.New(cfg, log.With(zap.String("sluice", instance)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// showFleet runs SHOW FLEET on an admin port's pool (adminDB) through
// go-sql-driver and returns its rows by instance.
func showFleet(t *testing.T, admin *sql.DB) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, r := range adminTable(t, admin, "SHOW FLEET") {
		out[r["instance"]] = r
	}
	return out
}

// waitUntil polls cond every 20ms until it holds, failing after limit, and
// returns how long it took.
func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// readWrite runs n inserts and n reads of them through srv's data port as
// the app user, on a fresh pool (so logins are part of it), failing the
// test on any error, and logs how long the pairs took.
func readWrite(t *testing.T, srv *server.Server, table string, from, n int) {
	t.Helper()
	start := time.Now()
	defer func() {
		t.Logf("%s: %d writes and reads (ids %d..) in %v", srv.Addr(), n, from, time.Since(start).Round(time.Millisecond))
	}()
	o := env.topo.Opts
	d, err := sql.Open("mysql", dsn(srv.Addr().String(), o.AppUser, o.AppPassword, "sluice_test", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := ctxT(t)
	for i := from; i < from+n; i++ {
		if _, err := d.ExecContext(ctx, "INSERT INTO "+table+" VALUES (?)", i); err != nil {
			t.Fatalf("write %d through %s: %v", i, srv.Addr(), err)
		}
		var got int
		if err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE id <= ?", i).Scan(&got); err != nil {
			t.Fatalf("read %d through %s: %v", i, srv.Addr(), err)
		}
	}
}

// TestFleetMembership: three sluices on a 3-member etcd cluster list each
// other in SHOW FLEET; one that closes leaves the others' view within the
// 1 s bar; with two etcd members killed the sluices keep serving reads and
// writes and report etcd down; with the members back, membership returns
// without restarting any sluice.
func TestFleetMembership(t *testing.T) {
	c := startFleetEtcd(t)
	prefix := fmt.Sprintf("/sluice/test-%d", time.Now().UnixNano())
	s1 := fleetSluice(t, c, prefix, "sluice-1")
	s2 := fleetSluice(t, c, prefix, "sluice-2")
	// The third takes the default name: host name and data port.
	s3 := fleetSluice(t, c, prefix, "")
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	third := net.JoinHostPort(host, strconv.Itoa(s3.Addr().(*net.TCPAddr).Port))
	all := []string{"sluice-1", "sluice-2", third}
	a1 := adminDB(t, s1, adminPassword)

	took := waitUntil(t, "SHOW FLEET on sluice-1 lists all three", 20*time.Second, func() bool {
		return len(showFleet(t, a1)) == 3
	})
	t.Logf("SHOW FLEET on sluice-1 listed all three %v after the third started", took.Round(time.Millisecond))
	rows := showFleet(t, a1)
	for i, srv := range []*server.Server{s1, s2, s3} {
		r := rows[all[i]]
		if r == nil {
			t.Fatalf("SHOW FLEET lacks %s: %v", all[i], rows)
		}
		if r["address"] != srv.Addr().String() || r["admin_address"] != srv.AdminAddr().String() ||
			r["version"] == "" || r["config_revision"] != "0" {
			t.Errorf("%s's row: %v (address %s, admin %s)", all[i], r, srv.Addr(), srv.AdminAddr())
		}
		if _, err := time.Parse(time.RFC3339, r["started"]); err != nil {
			t.Errorf("%s's started %q: %v", all[i], r["started"], err)
		}
		ttl := r["lease_ttl"]
		if i == 0 {
			if ttl != "self" {
				t.Errorf("sluice-1's own lease_ttl = %q, want self", ttl)
			}
		} else if d, err := time.ParseDuration(ttl); err != nil || d <= 0 || d > 2*time.Second {
			t.Errorf("%s's lease_ttl = %q, want a duration within the 2s lease", all[i], ttl)
		}
	}

	// Close revokes sluice-3's lease: its key goes at once, and the watch
	// brings that to sluice-1.
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
	took = waitUntil(t, "the third leaves sluice-1's view", time.Second, func() bool {
		_, there := showFleet(t, a1)[third]
		return !there
	})
	t.Logf("the third (%s) left SHOW FLEET on sluice-1 %v after its Close returned", third, took.Round(time.Millisecond))
	if got := scrapeFrom(t, s2, "sluice_fleet_members"); got != 2 {
		waitUntil(t, "sluice_fleet_members 2 on sluice-2", time.Second, func() bool { return scrapeFrom(t, s2, "sluice_fleet_members") == 2 })
	}

	d := appDB(t, "sluice_test", nil)
	mustExec(t, d, "CREATE TABLE fleet_rw (id INT PRIMARY KEY)")
	t.Cleanup(func() { _, _ = d.ExecContext(ctxT(t), "DROP TABLE IF EXISTS fleet_rw") })
	// Reads may go to a replica: the table must be there first.
	if err := env.topo.WaitReplicated(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	readWrite(t, s1, "fleet_rw", 1, 5)
	if code, body := readyz(s1.MetricsAddr().String()); code != 200 || body != "ready\n" {
		t.Errorf("/readyz with etcd = %d %q, want 200 ready", code, body)
	}

	// Two of three members gone: no quorum.
	for _, m := range c.Members[1:] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for _, srv := range []*server.Server{s1, s2} {
		took := waitUntil(t, "sluice_fleet_etcd_up drops to 0", 30*time.Second, func() bool {
			return scrapeFrom(t, srv, "sluice_fleet_etcd_up") == 0
		})
		t.Logf("%s: sluice_fleet_etcd_up 0 %v after the kill", srv.Addr(), took.Round(time.Millisecond))
	}
	if code, body := readyz(s1.MetricsAddr().String()); code != 200 || !strings.Contains(body, "fleet: etcd does not answer") {
		t.Errorf("/readyz without etcd = %d %q, want 200 saying etcd does not answer", code, body)
	}
	readWrite(t, s1, "fleet_rw", 100, 20)
	readWrite(t, s2, "fleet_rw", 200, 20)
	// The lease runs out client-side after session_ttl without an answer.
	// Both, before etcd returns: each runs out on its own clock, and one
	// that still held its lease when etcd came back keeps it (etcd renews
	// every lease when it elects a leader).
	for i, srv := range []*server.Server{s1, s2} {
		waitUntil(t, fmt.Sprintf("sluice-%d loses its lease", i+1), 30*time.Second, func() bool {
			return scrapeFrom(t, srv, "sluice_fleet_registered") == 0
		})
	}
	readWrite(t, s2, "fleet_rw", 300, 20)
	// The admin port still answers, from the last view, without etcd.
	stale := showFleet(t, a1)
	if len(stale) != 2 || !strings.HasPrefix(stale["sluice-2"]["lease_ttl"], "unknown") ||
		stale["sluice-1"]["lease_ttl"] != "self (not registered: no lease)" {
		t.Errorf("SHOW FLEET without etcd: %v", stale)
	}

	// The members come back on their data dirs; the sluices, never
	// restarted, register again.
	for _, m := range c.Members[1:] {
		if _, err := m.StartNoWait(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c.Members {
		if err := m.WaitHealthy(ctxT(t), 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, srv := range []*server.Server{s1, s2} {
		took := waitUntil(t, "registered again", 30*time.Second, func() bool {
			return scrapeFrom(t, srv, "sluice_fleet_etcd_up") == 1 && scrapeFrom(t, srv, "sluice_fleet_registered") == 1
		})
		t.Logf("%s: etcd up and registered again %v after the members were healthy", srv.Addr(), took.Round(time.Millisecond))
		if n := scrapeFrom(t, srv, "sluice_fleet_registrations_total"); n < 2 {
			t.Errorf("%s: sluice_fleet_registrations_total = %v, want >= 2 (joined again after the lost lease)", srv.Addr(), n)
		}
	}
	waitUntil(t, "SHOW FLEET on sluice-1 lists sluice-1 and sluice-2 with live leases", 10*time.Second, func() bool {
		r := showFleet(t, a1)
		_, err := time.ParseDuration(r["sluice-2"]["lease_ttl"])
		return len(r) == 2 && r["sluice-1"]["lease_ttl"] == "self" && err == nil
	})
	readWrite(t, s1, "fleet_rw", 400, 5)
	var n int
	if err := mustRoot(t, env.topo.Master).QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM sluice_test.fleet_rw").Scan(&n); err != nil || n != 70 {
		t.Errorf("rows on the master = %d, %v; want 70 (every write acknowledged)", n, err)
	}
}

// TestFleetShowWithoutFleet: SHOW FLEET on a sluice without [fleet] is
// error 1290 naming the missing table, and its fleet metrics are at 0.
func TestFleetShowWithoutFleet(t *testing.T) {
	srv := adminSluice(t, "admin")
	_, err := adminDB(t, srv, adminPassword).ExecContext(ctxT(t), "SHOW FLEET")
	if sqlCode(err) != 1290 || !strings.Contains(err.Error(), "[fleet]") {
		t.Errorf("SHOW FLEET without [fleet]: %v, want 1290 naming [fleet]", err)
	}
	if srv.Fleet() != nil {
		t.Error("a fleet without [fleet]")
	}
}

// TestFleetStartsWithoutEtcd: a sluice whose [fleet] names an etcd that is
// not there starts, serves reads and writes, stays ready, lists itself in
// SHOW FLEET as not registered, and closes promptly.
func TestFleetStartsWithoutEtcd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := ln.Addr().String()
	ln.Close() // nothing listens there any more
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`}}
	text := env.topo.SluiceConfigWith(o) + fmt.Sprintf("\n[admin]\nuser = \"admin\"\npassword = %q\n\n[fleet]\netcd = [%q]\ninstance = \"lonely\"\ndial_timeout = \"1s\"\n",
		adminPassword, nowhere)
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start with etcd unreachable: %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			srv.Close()
		}
	})
	d := appDB(t, "sluice_test", nil)
	mustExec(t, d, "CREATE TABLE fleet_alone (id INT PRIMARY KEY)")
	t.Cleanup(func() { _, _ = d.ExecContext(ctxT(t), "DROP TABLE IF EXISTS fleet_alone") })
	// Reads may go to a replica: the table must be there first.
	if err := env.topo.WaitReplicated(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	readWrite(t, srv, "fleet_alone", 1, 10)
	if code, body := readyz(srv.MetricsAddr().String()); code != 200 || !strings.Contains(body, "fleet: etcd does not answer") {
		t.Errorf("/readyz = %d %q, want 200 saying etcd does not answer", code, body)
	}
	rows := showFleet(t, adminDB(t, srv, adminPassword))
	if len(rows) != 1 || rows["lonely"]["lease_ttl"] != "self (not registered: no lease)" || rows["lonely"]["address"] != srv.Addr().String() {
		t.Errorf("SHOW FLEET without etcd: %v", rows)
	}
	if up, reg := scrapeFrom(t, srv, "sluice_fleet_etcd_up"), scrapeFrom(t, srv, "sluice_fleet_registered"); up != 0 || reg != 0 {
		t.Errorf("sluice_fleet_etcd_up = %v, sluice_fleet_registered = %v; want 0 and 0", up, reg)
	}
	start := time.Now()
	srv.Close()
	closed = true
	t.Logf("Close with etcd unreachable took %v", time.Since(start).Round(time.Millisecond))
}
