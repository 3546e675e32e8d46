package dataplane

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// failoverServer is a Server (never started) for a master and two replicas that nothing
// listens on, with the given [health] lines.
func failoverServer(t *testing.T, healthKeys string) *Env { return offlineServer(t, healthKeys, 2) }

func failoverSession(srv *Env) (*Session, *benchConn) {
	cnc := &benchConn{}
	s := newSession(srv, 1, cnc)
	snap := srv.topo.Current()
	s.cluster, s.epoch = snap.Clusters[0], snap.Epoch
	return s, cnc
}

func sqlCode(t *testing.T, err error) *protocol.SQLError {
	t.Helper()
	var se *protocol.SQLError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *protocol.SQLError", err)
	}
	return se
}

func TestAwaitMasterWaitsForPromotion(t *testing.T) {
	srv := failoverServer(t, `failover_write_wait = "10s"`)
	s, _ := failoverSession(srv)
	m := s.cluster.Master
	m.ReportFailure(errors.New("killed"))
	done := make(chan error, 1)
	go func() { done <- s.awaitMaster(nil, nil) }()
	select {
	case err := <-done:
		t.Fatalf("awaitMaster returned %v with the master down and no failover", err)
	case <-time.After(100 * time.Millisecond):
	}
	snap, err := srv.topo.Promote("main", "127.0.0.1:4", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("awaitMaster after the promotion: %v", err)
	}
	if s.cluster.Master != snap.Cluster("main").Master {
		t.Fatalf("session's master %s, want the promoted 127.0.0.1:4", s.cluster.Master.Address)
	}
}

func TestAwaitMasterGivesUpNamingTheCluster(t *testing.T) {
	srv := failoverServer(t, `failover_write_wait = "50ms"`)
	s, _ := failoverSession(srv)
	s.cluster.Master.ReportFailure(errors.New("connection refused"))
	se := sqlCode(t, s.awaitMaster(nil, nil))
	if se.Code != protocol.CRCouldNotConnect.Code || !strings.Contains(se.Message, "cluster main") ||
		!strings.Contains(se.Message, "127.0.0.1:2 is down") || !strings.Contains(se.Message, "failover_write_wait 50ms") {
		t.Fatalf("ERR %d %q", se.Code, se.Message)
	}
}

func TestAwaitMasterRefusedWrites(t *testing.T) {
	srv := failoverServer(t, `auto_failover = false`)
	s, _ := failoverSession(srv)
	if _, err := srv.topo.RefuseWrites("main", "two writable masters"); err != nil {
		t.Fatal(err)
	}
	_, err := s.backendFor(router.TargetMaster, nil)
	se := sqlCode(t, err)
	if se.Code != protocol.CRCouldNotConnect.Code || !strings.Contains(se.Message, "cluster main") || !strings.Contains(se.Message, "two writable masters") {
		t.Fatalf("ERR %d %q", se.Code, se.Message)
	}
}

func TestFollowTopologyDropsOldMasterConnection(t *testing.T) {
	for _, inTx := range []bool{false, true} {
		srv := failoverServer(t, "")
		s, cnc := failoverSession(srv)
		old := s.cluster.Master
		bc := &BackendConn{Conn: protocol.NewConn(&benchConn{}), backend: old, status: protocol.StatusAutocommit}
		if inTx {
			bc.status |= protocol.StatusInTrans
		}
		s.master = bc
		snap, err := srv.topo.Promote("main", "127.0.0.1:3", nil)
		if err != nil {
			t.Fatal(err)
		}
		err = s.followTopology()
		if s.master != nil || !bc.broken {
			t.Fatalf("inTx %v: the old master's connection was kept", inTx)
		}
		if s.cluster != snap.Cluster("main") || s.epoch != snap.Epoch {
			t.Fatalf("inTx %v: session did not load the new snapshot", inTx)
		}
		if inTx != (err != nil) {
			t.Fatalf("inTx %v: followTopology = %v", inTx, err)
		}
		if inTx && cnc.written == 0 {
			t.Fatal("no ERR written for the transaction lost with the old master")
		}
	}
}

func TestFollowTopologyIsOneLoadWhenNothingChanged(t *testing.T) {
	srv := failoverServer(t, "")
	s, _ := failoverSession(srv)
	if n := testing.AllocsPerRun(100, func() { _ = s.followTopology() }); n != 0 {
		t.Fatalf("followTopology allocates %v per call", n)
	}
}

// TestCloseLentUnblocksReaders: a session blocked reading from a lent connection fails at
// once when the pool closes what it lent (the master went down), and idle connections go too.
func TestCloseLentUnblocksReaders(t *testing.T) {
	srv := failoverServer(t, "")
	p := srv.pool("127.0.0.1:2")
	client, server := net.Pipe()
	defer server.Close()
	bc := &BackendConn{Conn: protocol.NewConn(client), pool: p}
	p.mu.Lock()
	p.open++
	p.lendLocked(bc)
	p.mu.Unlock()
	if bc.backend != p.Backend() || p.Backend().InUse() != 1 {
		t.Fatalf("lend: backend %v, in use %d", bc.backend, p.Backend().InUse())
	}
	read := make(chan error, 1)
	go func() {
		_, err := bc.ReadPacket()
		read <- err
	}()
	if n := p.CloseLent(); n != 1 {
		t.Fatalf("CloseLent closed %d lent connections, want 1", n)
	}
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("the blocked read succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked read still hangs after CloseLent")
	}
	bc.broken = true
	p.Put(bc)
	if open, idle, _ := p.Stats(); open != 0 || idle != 0 || p.Backend().InUse() != 0 {
		t.Fatalf("after the session gave the broken connection back: open %d, idle %d, in use %d", open, idle, p.Backend().InUse())
	}
	if n := p.CloseLent(); n != 0 {
		t.Fatalf("CloseLent after the return closed %d", n)
	}
}

// TestPoolFigures: the figures the pool collector exports count an idle
// connection handed back, the pool's size and nothing in use.
func TestPoolFigures(t *testing.T) {
	srv := offlineServer(t, "", 1)
	r0 := srv.topo.Current().Clusters[0].Replicas[0]
	pool := srv.pool(r0.Address)
	pool.Put(&BackendConn{Conn: protocol.NewConn(&benchConn{}), backend: r0, pool: pool})
	if st := pool.Figures(); st.Idle != 1 || st.InUse != 0 || st.Size != 128 || st.Open != 0 {
		t.Fatalf("figures %+v, want 1 idle of 128 and none in use", st)
	}
}

// TestKilledSessionStopsWaiting: the session's context ends the waits a
// statement may be in when the session is killed (Handle.Close: KILL
// CONNECTION, a shutdown's cut) — the wait for a master and the wait for a
// pool connection — long before their own timeouts.
func TestKilledSessionStopsWaiting(t *testing.T) {
	srv := offlineServerWith(t, `failover_write_wait = "20s"`, 1,
		"") // the pool's wait_timeout is the default (seconds)
	t.Run("master", func(t *testing.T) {
		s, _ := failoverSession(srv)
		s.cluster.Master.ReportFailure(errors.New("killed"))
		done := make(chan error, 1)
		go func() { done <- s.awaitMaster(nil, nil) }()
		_ = s.Handle.Close()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("awaitMaster of a killed session found a master")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("awaitMaster still waits 5s after the session was killed (failover_write_wait 20s)")
		}
	})
	t.Run("pool", func(t *testing.T) {
		s, _ := failoverSession(srv)
		p := srv.pool(s.cluster.Replicas[0].Address)
		p.mu.Lock()
		p.open = p.size // every slot lent: a borrow must wait
		p.mu.Unlock()
		defer func() { p.mu.Lock(); p.open = 0; p.mu.Unlock() }()
		done := make(chan error, 1)
		go func() {
			_, err := s.conn(s.cluster.Replicas[0].Address)
			done <- err
		}()
		// Kill the session once its borrow waits (or at once: a borrow that
		// starts after the kill must not wait either).
		_ = s.Handle.Close()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a killed session borrowed a connection from a full pool")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the borrow still waits 5s after the session was killed")
		}
	})
}
