package tests

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// adminTable runs an admin command through go-sql-driver and returns its
// rows as column → value maps.
func adminTable(t *testing.T, admin *sql.DB, q string) []map[string]string {
	t.Helper()
	rows, err := admin.QueryContext(ctxT(t), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		r := map[string]string{}
		for i, c := range cols {
			r[c] = vals[i].String
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// startFleetOfThree starts etcd and sluice-1..3 on a fresh prefix and waits
// until sluice-1 sees all three.
func startFleetOfThree(t *testing.T) (*sandbox.EtcdCluster, string, []*server.Server) {
	t.Helper()
	c := startFleetEtcd(t)
	prefix := fmt.Sprintf("/sluice/test-%d", time.Now().UnixNano())
	srvs := []*server.Server{fleetSluice(t, c, prefix, "sluice-1"), fleetSluice(t, c, prefix, "sluice-2"),
		fleetSluice(t, c, prefix, "sluice-3")}
	a1 := adminDB(t, srvs[0], adminPassword)
	waitUntil(t, "SHOW FLEET on sluice-1 lists all three", 30*time.Second, func() bool {
		return len(showFleet(t, a1)) == 3
	})
	return c, prefix, srvs
}

// silentMember registers a fleet member "ghost" whose admin address
// accepts connections and never answers, as a member that hangs would.
func silentMember(t *testing.T, c *sandbox.EtcdCluster, prefix string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, nc := range held {
				nc.Close()
			}
		}()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, nc)
		}
	}()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	value := fmt.Sprintf(`{"instance":"ghost","address":"127.0.0.1:1","admin_address":%q,"version":"x","started":"2026-01-01T00:00:00Z"}`,
		ln.Addr().String())
	if _, err := cli.Put(ctxT(t), prefix+"/members/ghost", value); err != nil {
		t.Fatal(err)
	}
}

// TestFleetSessionsAndKill: SHOW SESSIONS FLEET on sluice-1 lists a session
// of sluice-3 (instance column first); KILL QUERY 'sluice-3:<id>' on
// sluice-1 ends that session's SELECT SLEEP(30) with 1317, quickly; a KILL
// naming an unknown instance or session says which; a member that stops
// answering gives a row saying so rather than a hang.
func TestFleetSessionsAndKill(t *testing.T) {
	c, prefix, srvs := startFleetOfThree(t)
	a1 := adminDB(t, srvs[0], adminPassword)

	victim := conn(t, appDBAt(t, srvs[2].Addr().String()))
	var vid uint64
	if err := victim.QueryRowContext(ctxT(t), "SELECT CONNECTION_ID()").Scan(&vid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := victim.ExecContext(context.Background(), "SELECT SLEEP(30)"); done <- err }()

	var row map[string]string
	took := waitUntil(t, "SHOW SESSIONS FLEET on sluice-1 lists sluice-3's SLEEP(30)", 10*time.Second, func() bool {
		for _, r := range adminTable(t, a1, "SHOW SESSIONS FLEET") {
			if r["instance"] == "sluice-3" && r["id"] == strconv.FormatUint(vid, 10) && r["state"] == "query" {
				row = r
				return true
			}
		}
		return false
	})
	t.Logf("SHOW SESSIONS FLEET on sluice-1 listed sluice-3's session %d after %v: %v", vid, took.Round(time.Millisecond), row)
	if !strings.Contains(strings.ToUpper(row["digest"]), "SLEEP") {
		t.Errorf("sluice-3's session row %v: digest does not name the SLEEP", row)
	}
	cols, err := a1.QueryContext(ctxT(t), "SHOW SESSIONS FLEET")
	if err != nil {
		t.Fatal(err)
	}
	names, _ := cols.Columns()
	cols.Close()
	if len(names) == 0 || names[0] != "instance" {
		t.Errorf("SHOW SESSIONS FLEET columns %v, want instance first", names)
	}

	start := time.Now()
	if _, err := a1.ExecContext(ctxT(t), fmt.Sprintf("KILL QUERY 'sluice-3:%d'", vid)); err != nil {
		t.Fatalf("KILL QUERY 'sluice-3:%d' on sluice-1: %v", vid, err)
	}
	select {
	case err := <-done:
		ended := time.Since(start)
		t.Logf("the SLEEP(30) on sluice-3 ended %v after KILL QUERY on sluice-1 was sent: %v", ended.Round(time.Millisecond), err)
		if mysqlErrNumber(err) != protocol.ERQueryInterrupted.Code {
			t.Errorf("the killed SLEEP(30) gave %v, want 1317", err)
		}
		if ended > 5*time.Second {
			t.Errorf("the SLEEP(30) ended %v after the KILL, want within 5s", ended)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the SLEEP(30) on sluice-3 still runs 15s after KILL QUERY on sluice-1")
	}
	// KILL QUERY leaves the session: it answers the next statement.
	var one int
	if err := victim.QueryRowContext(ctxT(t), "SELECT 1").Scan(&one); err != nil {
		t.Errorf("the session after KILL QUERY: %v", err)
	}

	_, err = a1.ExecContext(ctxT(t), "KILL QUERY 'sluice-9:1'")
	if sqlCode(err) != 1094 || !strings.Contains(err.Error(), "sluice-9") {
		t.Errorf("KILL of an unknown instance: %v, want 1094 naming sluice-9", err)
	}
	_, err = a1.ExecContext(ctxT(t), "KILL 'sluice-2:4000000000'")
	if sqlCode(err) != 1094 || !strings.Contains(err.Error(), "sluice-2") {
		t.Errorf("KILL of an unknown session of sluice-2: %v, want 1094 naming sluice-2", err)
	}
	// KILL CONNECTION through the fleet closes the session.
	if _, err := a1.ExecContext(ctxT(t), fmt.Sprintf("KILL CONNECTION 'sluice-3:%d'", vid)); err != nil {
		t.Fatalf("KILL CONNECTION 'sluice-3:%d': %v", vid, err)
	}
	waitUntil(t, "the killed connection leaves SHOW SESSIONS FLEET", 10*time.Second, func() bool {
		for _, r := range adminTable(t, a1, "SHOW SESSIONS FLEET") {
			if r["instance"] == "sluice-3" && r["id"] == strconv.FormatUint(vid, 10) {
				return false
			}
		}
		return true
	})

	// A member whose admin port accepts and never answers costs the
	// command its timeout and one row saying so, never a hang.
	silentMember(t, c, prefix)
	waitUntil(t, "sluice-1 sees the ghost member", 10*time.Second, func() bool { return len(showFleet(t, a1)) == 4 })
	start = time.Now()
	rows := adminTable(t, a1, "SHOW SESSIONS FLEET")
	answered := time.Since(start)
	t.Logf("SHOW SESSIONS FLEET with a silent member answered in %v", answered.Round(time.Millisecond))
	if answered > 10*time.Second {
		t.Errorf("SHOW SESSIONS FLEET with a silent member took %v", answered)
	}
	found := false
	for _, r := range rows {
		if r["instance"] == "ghost" {
			found = strings.HasPrefix(r["state"], "unreachable: ") && r["id"] == ""
			if !found {
				t.Errorf("the silent member's row: %v", r)
			}
		}
	}
	if !found {
		t.Errorf("SHOW SESSIONS FLEET lacks a row for the silent member: %v", rows)
	}
}

// TestFleetSetBackend: SET BACKEND '<replica>' OFFLINE on sluice-1 takes
// the replica out of sluice-2's and sluice-3's reads within 1 s; ONLINE
// brings it back; a sluice started afterwards applies the stored state.
func TestFleetSetBackend(t *testing.T) {
	c, prefix, srvs := startFleetOfThree(t)
	a1 := adminDB(t, srvs[0], adminPassword)
	replica := env.topo.Replicas[0]
	addr := replica.Addr()

	state := func(srv *server.Server) string {
		for _, r := range adminTable(t, adminDB(t, srv, adminPassword), "SHOW BACKENDS") {
			if r["address"] == addr {
				return r["state"]
			}
		}
		t.Fatalf("SHOW BACKENDS on %s lacks %s", srv.Addr(), addr)
		return ""
	}
	// readsOn counts how many of n reads through srv replica serves.
	readsOn := func(srv *server.Server, n int) int {
		d := appDBAt(t, srv.Addr().String())
		hits := 0
		for range n {
			var id uint32
			if err := d.QueryRowContext(ctxT(t), "SELECT @@server_id").Scan(&id); err != nil {
				t.Fatalf("read through %s: %v", srv.Addr(), err)
			}
			if id == replica.ServerID {
				hits++
			}
		}
		return hits
	}
	for _, srv := range srvs[1:] {
		waitUntil(t, "the replica serves reads through "+srv.Addr().String(), 20*time.Second, func() bool {
			return state(srv) == "up" && readsOn(srv, 10) > 0
		})
	}

	if _, err := a1.ExecContext(ctxT(t), fmt.Sprintf("SET BACKEND '%s' OFFLINE", addr)); err != nil {
		t.Fatal(err)
	}
	set := time.Now()
	if got := state(srvs[0]); got != "offline" {
		t.Errorf("sluice-1's state of %s right after its SET BACKEND OFFLINE: %q", addr, got)
	}
	for i, srv := range srvs[1:] {
		waitUntil(t, fmt.Sprintf("sluice-%d takes %s offline", i+2, addr), 5*time.Second, func() bool {
			return state(srv) == "offline"
		})
		took := time.Since(set)
		t.Logf("sluice-%d showed %s offline %v after SET BACKEND OFFLINE on sluice-1 returned", i+2, addr, took.Round(time.Millisecond))
		if took > time.Second {
			t.Errorf("sluice-%d took %v to apply SET BACKEND OFFLINE, want within 1s", i+2, took)
		}
	}
	for i, srv := range srvs[1:] {
		if n := readsOn(srv, 30); n != 0 {
			t.Errorf("sluice-%d sent %d of 30 reads to the offline replica", i+2, n)
		}
	}

	// A sluice that joins now applies the stored state.
	late := fleetSluice(t, c, prefix, "sluice-4")
	waitUntil(t, "a late member applies the stored OFFLINE", 10*time.Second, func() bool { return state(late) == "offline" })

	if _, err := a1.ExecContext(ctxT(t), fmt.Sprintf("SET BACKEND '%s' ONLINE", addr)); err != nil {
		t.Fatal(err)
	}
	set = time.Now()
	for i, srv := range append(srvs[1:], late) {
		waitUntil(t, fmt.Sprintf("member %d puts %s back", i+2, addr), 5*time.Second, func() bool { return state(srv) != "offline" })
		t.Logf("member %d showed %s back (%s) %v after SET BACKEND ONLINE on sluice-1", i+2, addr, state(srv), time.Since(set).Round(time.Millisecond))
	}
	for i, srv := range srvs[1:] {
		waitUntil(t, fmt.Sprintf("sluice-%d reads from %s again", i+2, addr), 20*time.Second, func() bool {
			return readsOn(srv, 10) > 0
		})
	}

	// WEIGHT goes through etcd too.
	if _, err := a1.ExecContext(ctxT(t), fmt.Sprintf("SET BACKEND '%s' WEIGHT 7", addr)); err != nil {
		t.Fatal(err)
	}
	for i, srv := range srvs[1:] {
		waitUntil(t, fmt.Sprintf("sluice-%d applies WEIGHT 7", i+2), 5*time.Second, func() bool {
			for _, r := range adminTable(t, adminDB(t, srv, adminPassword), "SHOW BACKENDS") {
				if r["address"] == addr {
					return r["weight"] == "7"
				}
			}
			return false
		})
	}
	if _, err := a1.ExecContext(ctxT(t), fmt.Sprintf("SET BACKEND '%s' OFFLINE", env.topo.Master.Addr())); sqlCode(err) != 1210 {
		t.Errorf("SET BACKEND of the master OFFLINE: %v, want 1210", err)
	}

	// Without an etcd quorum the command is refused, naming etcd, and
	// changes nothing here either.
	for _, m := range c.Members[1:] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err := a1.ExecContext(ctxT(t), fmt.Sprintf("SET BACKEND '%s' OFFLINE", addr))
	t.Logf("SET BACKEND without an etcd quorum answered in %v: %v", time.Since(start).Round(time.Millisecond), err)
	if sqlCode(err) != 1105 || !strings.Contains(err.Error(), "etcd did not take it") || !strings.Contains(err.Error(), addr) {
		t.Errorf("SET BACKEND without an etcd quorum: %v, want 1105 naming etcd and the backend", err)
	}
	if got := state(srvs[0]); got == "offline" {
		t.Errorf("sluice-1 applied the refused SET BACKEND OFFLINE alone")
	}
}

// TestFleetSessionsWithoutFleet: without [fleet], SHOW SESSIONS FLEET and
// KILL '<instance>:<id>' are error 1290 naming [fleet]; SET BACKEND acts
// on the instance as before.
func TestFleetSessionsWithoutFleet(t *testing.T) {
	srv := adminSluice(t, "admin")
	a := adminDB(t, srv, adminPassword)
	for _, q := range []string{"SHOW SESSIONS FLEET", "KILL QUERY 'sluice-1:5'"} {
		if _, err := a.ExecContext(ctxT(t), q); sqlCode(err) != 1290 || !strings.Contains(err.Error(), "[fleet]") {
			t.Errorf("%s without [fleet]: %v, want 1290 naming [fleet]", q, err)
		}
	}
	addr := env.topo.Replicas[0].Addr()
	mustExec(t, a, fmt.Sprintf("SET BACKEND '%s' WEIGHT 9", addr))
	for _, r := range adminTable(t, a, "SHOW BACKENDS") {
		if r["address"] == addr && r["weight"] != "9" {
			t.Errorf("SET BACKEND WEIGHT 9 without [fleet]: row %v", r)
		}
	}
}
