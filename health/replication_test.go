package health

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
)

// These tests run the MariaDB statements of ControlConn against real servers of a sandbox
// topology of their own (they stop, promote and repoint its servers).

func startTopology(t *testing.T, opts sandbox.Options) (*sandbox.Topology, Credentials) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts.Logf = t.Logf
	topo, err := sandbox.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Stop(); err != nil {
			t.Error(err)
		}
	})
	return topo, Credentials{User: topo.Opts.ServiceUser, Password: topo.Opts.ServicePassword}
}

func dial(t *testing.T, ctx context.Context, addr string, cred Credentials) *ControlConn {
	t.Helper()
	cc, err := Dial(ctx, addr, cred)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func state(t *testing.T, ctx context.Context, cc *ControlConn) ServerState {
	t.Helper()
	st, err := cc.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// pollUntil calls cond until it returns nil or ctx ends; then it fails with cond's last error.
func pollUntil(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (%v)", what, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// controlGrants are the privileges docs/operations.md asks of the service account for
// failover on MariaDB; TestControlConn runs every operation with only these.
const controlGrants = "REPLICATION SLAVE ADMIN, SLAVE MONITOR, READ_ONLY ADMIN, RELOAD"

func TestControlConn(t *testing.T) {
	topo, _ := startTopology(t, sandbox.Options{Replicas: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Created on the master and replicated, like the service account.
	if err := topo.Master.Exec(ctx,
		"CREATE USER 'ops'@'%' IDENTIFIED BY 'ops'",
		"GRANT "+controlGrants+" ON *.* TO 'ops'@'%'"); err != nil {
		t.Fatal(err)
	}
	if err := topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	cred := Credentials{User: "ops", Password: "ops"}
	m := dial(t, ctx, topo.Master.Addr(), cred)
	r1 := dial(t, ctx, topo.Replicas[0].Addr(), cred)
	r2 := dial(t, ctx, topo.Replicas[1].Addr(), cred)

	t.Run("Dial", func(t *testing.T) {
		if m.Flavor() != FlavorMariaDB || !strings.Contains(m.Version(), "MariaDB") || m.Addr() != topo.Master.Addr() {
			t.Errorf("flavor %v, version %q, addr %s", m.Flavor(), m.Version(), m.Addr())
		}
		if err := m.Ping(ctx); err != nil {
			t.Error(err)
		}
		_, err := Dial(ctx, topo.Master.Addr(), Credentials{User: cred.User, Password: "wrong"})
		if err == nil || !strings.Contains(err.Error(), topo.Master.Addr()) || !strings.Contains(err.Error(), "Access denied") {
			t.Errorf("wrong password: %v", err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		if _, err := Dial(ctx, addr, cred); err == nil || !strings.Contains(err.Error(), addr) {
			t.Errorf("closed port: %v", err)
		}
	})

	t.Run("TLS", func(t *testing.T) {
		pem, err := os.ReadFile(topo.TLS.CA)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tcred := cred
		tcred.TLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
		cc := dial(t, ctx, topo.Replicas[0].Addr(), tcred)
		rs, err := cc.query(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'")
		if err != nil {
			t.Fatal(err)
		}
		if cipher, _ := rs.GetString(0, 1); cipher == "" {
			t.Error("control connection with Credentials.TLS is not encrypted")
		}
		if st := state(t, ctx, cc); !st.Replica.Configured {
			t.Errorf("state over TLS: %+v", st)
		}
	})

	t.Run("State", func(t *testing.T) {
		if err := topo.Master.Exec(ctx, "CREATE TABLE sluice_test.ctl (id INT PRIMARY KEY)", "INSERT INTO sluice_test.ctl VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		if err := topo.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
		ms := state(t, ctx, m)
		if ms.ReadOnly || ms.Replica.Configured || ms.BinlogPos.IsEmpty() || ms.Flavor != FlavorMariaDB {
			t.Errorf("master state %+v", ms)
		}
		for i, r := range []*ControlConn{r1, r2} {
			st := state(t, ctx, r)
			rs := st.Replica
			if !st.ReadOnly || !rs.Configured || !rs.IOConnected() || !rs.SQLRunning ||
				rs.MasterHost != "127.0.0.1" || rs.MasterPort != topo.Master.Port || rs.LastIOErrno != 0 || rs.LastSQLErrno != 0 {
				t.Errorf("replica%d state %+v", i+1, st)
			}
			if !rs.Received.Contains(ms.BinlogPos) || !rs.Executed.Contains(ms.BinlogPos) || !st.BinlogPos.Equal(ms.BinlogPos) {
				t.Errorf("replica%d received %s, executed %s, binlog %s; master at %s", i+1, rs.Received, rs.Executed, st.BinlogPos, ms.BinlogPos)
			}
		}
	})

	t.Run("WaitExecuted", func(t *testing.T) {
		if err := topo.Master.Exec(ctx, "INSERT INTO sluice_test.ctl VALUES (2)"); err != nil {
			t.Fatal(err)
		}
		pos := state(t, ctx, m).BinlogPos
		if err := r1.WaitExecuted(ctx, pos); err != nil {
			t.Fatal(err)
		}
		if ex := state(t, ctx, r1).Replica.Executed; !ex.Contains(pos) {
			t.Errorf("after WaitExecuted(%s) replica1 executed %s", pos, ex)
		}
		if err := r1.WaitExecuted(ctx, GTIDSet{}); err != nil {
			t.Errorf("empty position: %v", err)
		}
		if err := r1.WaitExecuted(ctx, MustParseGTID(FlavorMySQL, uuidA+":1")); err == nil {
			t.Error("a MySQL position on MariaDB was accepted")
		}
		// A position the master never reaches: the wait ends with the context.
		future := MustParseGTID(FlavorMariaDB, "0-1-1000000")
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := r2.WaitExecuted(short, future)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("waiting for a future position: %v, want deadline exceeded", err)
		}
		if err := r2.Ping(ctx); err != nil {
			t.Errorf("connection unusable after a wait ran out of time: %v", err)
		}
		// With the SQL thread stopped the wait fails early and says why.
		if err := topo.Replicas[0].Exec(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		err = r1.WaitExecuted(ctx, future)
		if err == nil || !strings.Contains(err.Error(), "SQL thread is not running") {
			t.Errorf("waiting with the SQL thread stopped: %v", err)
		}
		if err := topo.Replicas[0].Exec(ctx, "START SLAVE SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Lock", func(t *testing.T) {
		name := FailoverLockName("main")
		other := dial(t, ctx, topo.Replicas[0].Addr(), cred)
		if ok, err := r1.TryLock(ctx, name); err != nil || !ok {
			t.Fatalf("first TryLock = %v, %v", ok, err)
		}
		if ok, err := other.TryLock(ctx, name); err != nil || ok {
			t.Fatalf("TryLock of a held lock = %v, %v", ok, err)
		}
		if err := r1.Unlock(ctx, name); err != nil {
			t.Fatal(err)
		}
		if err := r1.Unlock(ctx, name); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Unlock of a lock not held: %v", err)
		}
		if ok, err := other.TryLock(ctx, name); err != nil || !ok {
			t.Fatalf("TryLock after Unlock = %v, %v", ok, err)
		}
		// Closing the connection releases its locks.
		other.Close()
		pollUntil(t, ctx, "lock released by Close", func() error {
			ok, err := r1.TryLock(ctx, name)
			if err == nil && !ok {
				err = errors.New("still held")
			}
			return err
		})
		if err := r1.Unlock(ctx, name); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Broken", func(t *testing.T) {
		cc := dial(t, ctx, topo.Master.Addr(), cred)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := cc.Ping(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Ping with a cancelled context: %v", err)
		}
		// A statement cut by its context leaves the connection unusable, and says so.
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := cc.query(short, "SELECT SLEEP(5)")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("SELECT SLEEP(5) with 100ms: %v", err)
		}
		if err := cc.Ping(ctx); !errors.Is(err, ErrConnBroken) {
			t.Errorf("Ping after a cut statement: %v", err)
		}
		// A server error does not break the connection.
		if err := m.exec(ctx, "SELECT * FROM no_such_db.t"); err == nil || !strings.Contains(err.Error(), "no_such_db") {
			t.Errorf("bad statement: %v", err)
		}
		if err := m.Ping(ctx); err != nil {
			t.Errorf("Ping after a server error: %v", err)
		}
	})

	t.Run("FenceMaster", func(t *testing.T) {
		if err := m.Fence(ctx); err != nil {
			t.Fatal(err)
		}
		if !state(t, ctx, m).ReadOnly {
			t.Error("master not read-only after Fence")
		}
		if err := topo.Master.Exec(ctx, "SET GLOBAL read_only = OFF"); err != nil {
			t.Fatal(err)
		}
	})

	// A manual failover with the building blocks: the master dies, replica1 applies what it
	// received and is promoted, replica2 follows it, the old master comes back and is fenced.
	t.Run("PromoteRepoint", func(t *testing.T) {
		if err := topo.Master.Exec(ctx, "INSERT INTO sluice_test.ctl VALUES (3)"); err != nil {
			t.Fatal(err)
		}
		if err := topo.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
		before := state(t, ctx, m).BinlogPos
		if err := topo.Master.Kill(); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, ctx, "replica1 notices the master is gone", func() error {
			if rs := state(t, ctx, r1).Replica; rs.IOConnected() {
				return fmt.Errorf("IO thread %s", rs.IORunning)
			}
			return nil
		})
		st1 := state(t, ctx, r1)
		if err := r1.WaitExecuted(ctx, st1.Replica.Received); err != nil {
			t.Fatal(err)
		}
		if err := r1.Promote(ctx); err != nil {
			t.Fatal(err)
		}
		p := state(t, ctx, r1)
		if p.ReadOnly || p.Replica.Configured || !p.BinlogPos.Contains(before) {
			t.Fatalf("promoted replica1: %+v (old master at %s)", p, before)
		}
		if err := r2.Repoint(ctx, "127.0.0.1", topo.Replicas[0].Port); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, ctx, "replica2 replicates from replica1", func() error {
			rs := state(t, ctx, r2).Replica
			if rs.MasterPort != topo.Replicas[0].Port || !rs.IOConnected() {
				return fmt.Errorf("master port %d, IO %s, error %d %s", rs.MasterPort, rs.IORunning, rs.LastIOErrno, rs.LastIOError)
			}
			return nil
		})
		if err := topo.Replicas[0].Exec(ctx, "INSERT INTO sluice_test.ctl VALUES (4)"); err != nil {
			t.Fatal(err)
		}
		if err := r2.WaitExecuted(ctx, state(t, ctx, r1).BinlogPos); err != nil {
			t.Fatal(err)
		}
		// The replication account survived the repoint (CHANGE MASTER kept it).
		if err := r2.Repoint(ctx, "127.0.0.1", topo.Replicas[0].Port); err != nil {
			t.Fatal(err)
		}

		if err := topo.Master.Start(ctx); err != nil {
			t.Fatal(err)
		}
		old := dial(t, ctx, topo.Master.Addr(), cred)
		oldSt := state(t, ctx, old)
		if oldSt.ReadOnly || oldSt.Replica.Configured {
			t.Fatalf("restarted old master: %+v", oldSt)
		}
		if err := old.Fence(ctx); err != nil {
			t.Fatal(err)
		}
		if oldSt = state(t, ctx, old); !oldSt.ReadOnly {
			t.Error("old master not read-only after Fence")
		}
		if errant := oldSt.BinlogPos.Missing(p.BinlogPos); errant != "" {
			t.Errorf("old master has transactions the new master lacks: %s", errant)
		}
	})
}
