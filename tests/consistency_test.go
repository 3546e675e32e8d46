package tests

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
)

// TestStrongConsistencyReadsOnMaster: with consistency = "strong" every
// read is served by the master.
func TestStrongConsistencyReadsOnMaster(t *testing.T) {
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{`consistency = "strong"`}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	d, err := sql.Open("mysql", dsn(srv.Addr().String(), "app", "app", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := ctxT(t)
	for range 10 {
		if id := serverID(t, ctx, d, ""); id != env.masterID {
			t.Fatalf("read served by %d, want the master %d", id, env.masterID)
		}
	}
}

// delayReplica makes r apply the master's events only after delay
// (MASTER_DELAY), until the test ends.
func delayReplica(t *testing.T, r *sandbox.Server, delay time.Duration) {
	t.Helper()
	root := mustRoot(t, r)
	set := func(secs int) error {
		for _, q := range []string{"STOP SLAVE", fmt.Sprintf("CHANGE MASTER TO MASTER_DELAY = %d", secs), "START SLAVE"} {
			if _, err := root.ExecContext(ctxT(t), q); err != nil {
				return fmt.Errorf("%s on %s: %w", q, r.Name, err)
			}
		}
		return nil
	}
	if err := set(int(delay / time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set(0); err != nil {
			t.Error(err)
		}
	})
}

// readOwnWrites runs sessions × rounds of "insert a row, read it back at
// once" through addr, each session on its own connection, and counts the
// reads that did not find the row just written.
func readOwnWrites(t *testing.T, addr, table string, sessions, rounds, base int) (misses int) {
	t.Helper()
	d, err := sql.Open("mysql", dsn(addr, "app", "app", "sluice_test", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := ctxT(t)
	for s := range sessions {
		c, err := d.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for r := range rounds {
			id := base + s*rounds + r
			if _, err := c.ExecContext(ctx, "INSERT INTO "+table+" (id) VALUES (?)", id); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE id = ?", id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				misses++
			}
		}
		c.Raw(func(any) error { return driverBadConn }) // a new session next time
		c.Close()
	}
	return misses
}

// TestCausalReadsSeeOwnWrites: with consistency = "causal" a session that
// writes a row reads it back at once, although one replica applies events
// only after a delay and reads otherwise go to replicas. The same workload
// through the eventual-consistency proxy misses rows, which shows the
// delay is in force.
func TestCausalReadsSeeOwnWrites(t *testing.T) {
	d := appDB(t, "sluice_test", nil)
	mustExec(t, d, "CREATE TABLE causal_rw (id INT PRIMARY KEY)")
	t.Cleanup(func() { _, _ = d.ExecContext(ctxT(t), "DROP TABLE IF EXISTS causal_rw") })
	if err := env.topo.WaitReplicated(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	delayReplica(t, env.topo.Replicas[0], 3*time.Second)

	if misses := readOwnWrites(t, env.addr, "causal_rw", 10, 10, 0); misses == 0 {
		t.Fatal("eventual consistency: every read found its row; the delayed replica is not exercised")
	} else {
		t.Logf("eventual consistency: %d of 100 reads missed the row just written", misses)
	}

	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{`consistency = "causal"`}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if misses := readOwnWrites(t, srv.Addr().String(), "causal_rw", 10, 10, 1000); misses != 0 {
		t.Fatalf("causal consistency: %d of 100 reads missed the row the session had just written", misses)
	}
	// Once the replicas have applied the session's writes, its reads go
	// back to them.
	c, err := sql.Open("mysql", dsn(srv.Addr().String(), "app", "app", "sluice_test", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetMaxOpenConns(1)
	ctx := ctxT(t)
	mustExec(t, c, "INSERT INTO causal_rw (id) VALUES (5000)")
	deadline := time.Now().Add(20 * time.Second)
	for {
		id := serverID(t, ctx, c, "")
		if env.replicaIDs[id] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reads of a causal session never went back to a replica (last served by %d)", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
