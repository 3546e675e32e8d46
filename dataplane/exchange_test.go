package dataplane

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/promtest"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/protocol/fakebackend"
)

// The exchange's handling of backends that fail under a statement.

// TestExchangeRetriesReadOnLostReplica: a replica connection that drops
// before it answered a read costs the client nothing: the read runs once
// more elsewhere (with the one replica skipped, on the master). The broken
// connection is discarded; the replica stays up, as one broken connection
// is the prober's call, not the session's.
func TestExchangeRetriesReadOnLostReplica(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	fc.replica.OnQuery("SELECT a FROM t", fakebackend.Result{Close: true})
	fc.master.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{"master"}))

	wantRows(t, "SELECT", fc.query("SELECT a FROM t"), []string{"master"})
	wantReceived(t, "replica", fc.replica, "READ ONLY", "COM_QUERY SELECT a FROM t")
	wantReceived(t, "master", fc.master, "COM_QUERY SELECT a FROM t")
	if open, _, _ := fc.env.pool(fc.replica.Addr()).Stats(); open != 0 {
		t.Fatalf("the replica pool has %d connections open, want the broken one closed", open)
	}
	if !fc.replicaBackend().Up() || fc.s.lostOn != fc.replicaBackend() {
		t.Fatalf("replica %s, lostOn %v; want it up and noted as lost", fc.replicaBackend().State(), fc.s.lostOn)
	}
}

// TestExchangeReadLostMidResult: a replica that drops in the middle of a
// result set is not retried (the client has rows already): the rows sent
// are followed by ERR 2013, and the session goes on.
func TestExchangeReadLostMidResult(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	// The column count, its definition, the EOF, the first row; no more.
	fc.replica.OnQuery("SELECT a FROM t", fakebackend.Result{Columns: fakebackend.Cols("a"),
		Rows: [][]any{{1}, {2}, {3}}, Close: true, CloseAfter: 4})
	fc.master.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{"master"}))

	r := fc.query("SELECT a FROM t")
	wantErr(t, "SELECT", r, protocol.CRServerLost.Code, "Lost connection to replica "+fc.replica.Addr()+" during query")
	if r.cols != 1 || len(r.rows) != 1 || r.rows[0][0] != "1" {
		t.Fatalf("SELECT: %v, want the first row before the ERR", r)
	}
	wantReceived(t, "master", fc.master)
	if pkts, err := fc.command([]byte{protocol.ComPing}); err != nil || oneReply(t, "COM_PING", pkts).ok == nil {
		t.Fatalf("COM_PING after the lost read: %v", err)
	}
}

// TestExchangeWriteLost: a master connection that drops under a write is
// not retried (the write may have run): the client gets ERR 2013 naming
// the master, the connection is discarded, and the next write opens a new
// one.
func TestExchangeWriteLost(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	fc.master.OnQuery("UPDATE t SET a = 2", fakebackend.Result{Close: true})
	fc.master.OnQuery("UPDATE t SET a = 3", fakebackend.OK(1, 0))

	wantErr(t, "UPDATE", fc.query("UPDATE t SET a = 2"), protocol.CRServerLost.Code,
		"Lost connection to master "+fc.master.Addr()+" during query")
	if open, _, _ := fc.env.pool(fc.master.Addr()).Stats(); open != 0 {
		t.Fatalf("the master pool has %d connections open, want the broken one closed", open)
	}
	if r := fc.query("UPDATE t SET a = 3"); r.ok == nil || r.ok.AffectedRows != 1 {
		t.Fatalf("the next UPDATE: %v", r)
	}
	if n := logins(fc.master); n != 2 {
		t.Fatalf("%d master connections opened, want 2", n)
	}
	wantReceived(t, "master", fc.master, "COM_QUERY UPDATE t SET a = 2", "COM_QUERY UPDATE t SET a = 3")
	wantReceived(t, "replica", fc.replica)
}

// TestExchangeMasterLostInTransaction: a master connection that drops
// inside a transaction ends the session after ERR 2013 says the
// transaction is gone: going on would run the rest in autocommit.
func TestExchangeMasterLostInTransaction(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	fc.master.OnQuery("BEGIN", fakebackend.Result{Status: protocol.StatusAutocommit | protocol.StatusInTrans})
	fc.master.OnQuery("UPDATE t SET a = 2", fakebackend.Result{Close: true})
	if r := fc.query("BEGIN"); r.ok == nil {
		t.Fatalf("BEGIN: %v", r)
	}
	pkts, err := fc.command(comQuery("UPDATE t SET a = 2"))
	if err == nil {
		t.Fatal("the session went on after its transaction was lost")
	}
	wantErr(t, "UPDATE", oneReply(t, "UPDATE", pkts), protocol.CRServerLost.Code,
		"Lost connection to master "+fc.master.Addr()+" inside a transaction")
	if fc.s.master != nil {
		t.Fatal("the session still holds the lost master connection")
	}
}

// TestExchangeReplicaRefusalRunsOnMaster: a read the replica connection
// refuses as a write (1792, its read-only access mode) runs on the master,
// and the client sees only the master's answer. The refusal is left in
// the replica connection's diagnostics area, so it is reset (and made
// read-only again) before its next statement.
func TestExchangeReplicaRefusalRunsOnMaster(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	// As a stored function that writes would be refused.
	refusal := protocol.ERReadOnlyTransaction.New("Cannot execute statement in a READ ONLY transaction")
	fc.replica.OnQuery("SELECT a FROM t", fakebackend.Err(refusal))
	fc.replica.OnQuery("SELECT b FROM t", fakebackend.Rows([]string{"b"}, []any{"replica"}))
	fc.master.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{"master"}))

	wantRows(t, "the refused SELECT", fc.query("SELECT a FROM t"), []string{"master"})
	wantReceived(t, "replica", fc.replica, "READ ONLY", "COM_QUERY SELECT a FROM t")
	wantReceived(t, "master", fc.master, "COM_QUERY SELECT a FROM t")
	wantRows(t, "the next SELECT", fc.query("SELECT b FROM t"), []string{"replica"})
	wantReceived(t, "replica", fc.replica, "COM_RESET_CONNECTION", "READ ONLY", "COM_QUERY SELECT b FROM t")
}

// TestExchangeReplayLostRetriesElsewhere: a replica connection that drops
// while sluice replays the session's SET on it loses nothing: the read
// runs on the master, whose connection has the SET already.
func TestExchangeReplayLostRetriesElsewhere(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	fc.master.OnQuery("SET NAMES utf8mb4", fakebackend.OK(0, 0))
	fc.master.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{"master"}))
	fc.replica.OnQuery("SET NAMES 'utf8mb4'", fakebackend.Result{Close: true})
	if r := fc.query("SET NAMES utf8mb4"); r.ok == nil {
		t.Fatalf("SET NAMES: %v", r)
	}
	wantRows(t, "SELECT", fc.query("SELECT a FROM t"), []string{"master"})
	wantReceived(t, "replica", fc.replica, "READ ONLY", "COM_QUERY SET NAMES 'utf8mb4'")
	wantReceived(t, "master", fc.master, "COM_QUERY SET NAMES utf8mb4", "COM_QUERY SELECT a FROM t")
}

// TestKillWhileWaitingForPool: a session killed while its read waits for a
// connection of a full replica pool ends the wait at once without blaming
// the replica: it stays up, no backend error is counted, the statement
// never runs, and the client (were it still there) is told its
// connection was killed.
func TestKillWhileWaitingForPool(t *testing.T) {
	fc := newFakeCluster(t, "", "pool_size = 1\npool_wait_timeout = \"20s\"")
	replica := fc.replicaBackend()
	// Another session holds the replica pool's one connection.
	held := fc.holdReplica()
	defer held.pool.Put(held)
	done := make(chan error, 1)
	go func() { done <- fc.run(comQuery("SELECT 1")) }()
	// Kill the session once its read is parked in the pool.
	waitInStack(t, "dataplane.(*Pool).Get(", "the read never waited for the pool")
	_ = fc.s.Handle.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dispatch: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read still waits 5s after the kill (pool_wait_timeout 20s)")
	}
	wantErr(t, "the killed session's read", oneReply(t, "SELECT 1", fc.client.take(t)), protocol.ERConnectionKilled.Code, "killed")
	if st := replica.State(); st != health.StateUp {
		t.Errorf("the replica is %s after a session waiting for it was killed (%s)", st, replica.LastError())
	}
	if m := promtest.Sample(t, fc.env.metrics.Reg, "sluice_backend_errors_total", map[string]string{"role": "replica"}); m.GetCounter().GetValue() != 0 {
		t.Errorf("%v replica backend errors counted for a killed session", m.GetCounter().GetValue())
	}
	for _, q := range fc.replica.Queries() {
		if q == "SELECT 1" {
			t.Error("the killed session's statement reached the replica")
		}
	}
}

// TestKillQueryWhileWaitingForPool: KILL QUERY of a session whose read
// waits for a full replica pool ends the wait with ERR 1317, as MariaDB
// answers an interrupted statement; the replica stays up, the session goes
// on, and its next statement is not interrupted.
func TestKillQueryWhileWaitingForPool(t *testing.T) {
	fc := newFakeCluster(t, "", "pool_size = 1\npool_wait_timeout = \"20s\"")
	replica := fc.replicaBackend()
	fc.replica.OnQuery("SELECT 2", fakebackend.Rows([]string{"2"}, []any{2}))
	held := fc.holdReplica()
	done := make(chan error, 1)
	go func() { done <- fc.run(comQuery("SELECT 1")) }()
	waitInStack(t, "dataplane.(*Pool).Get(", "the read never waited for the pool")
	killed := make(chan error, 1)
	go func() { killed <- fc.env.interruptStatement(&fc.s.Handle) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("KILL QUERY ended the session: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read still waits 5s after KILL QUERY (pool_wait_timeout 20s)")
	}
	if err := <-killed; err != nil {
		t.Fatalf("KILL QUERY: %v", err)
	}
	wantErr(t, "the interrupted read", oneReply(t, "SELECT 1", fc.client.take(t)), protocol.ERQueryInterrupted.Code, "interrupted")
	if st := replica.State(); st != health.StateUp {
		t.Errorf("the replica is %s after KILL QUERY of a session waiting for it (%s)", st, replica.LastError())
	}
	held.pool.Put(held)
	wantRows(t, "the next read", fc.query("SELECT 2"), []string{"2"})
}

// TestKillQuerySparesTheNextCommand: a KILL QUERY that ended one command's
// wait for the pool never reaches the session's next command, even when
// that one runs on the connection the first waited for, at once.
func TestKillQuerySparesTheNextCommand(t *testing.T) {
	fc := newFakeCluster(t, "", "pool_size = 1\npool_wait_timeout = \"20s\"")
	slow := fakebackend.Rows([]string{"2"}, []any{2})
	slow.Delay = 300 * time.Millisecond // long enough for a killer that polls every millisecond
	fc.replica.OnQuery("SELECT 2", slow)
	fc.replica.OnPattern("KILL QUERY .*", fakebackend.OK(0, 0))
	held := fc.holdReplica()
	first := make(chan error, 1)
	go func() { first <- fc.run(comQuery("SELECT 1")) }()
	waitInStack(t, "dataplane.(*Pool).Get(", "the read never waited for the pool")
	killed := make(chan error, 1)
	go func() { killed <- fc.env.interruptStatement(&fc.s.Handle) }()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wantErr(t, "the interrupted read", oneReply(t, "SELECT 1", fc.client.take(t)), protocol.ERQueryInterrupted.Code)
	// The client's next statement comes at once, and gets the connection.
	held.pool.Put(held)
	wantRows(t, "the next read", fc.query("SELECT 2"), []string{"2"})
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	for _, q := range fc.replica.Queries() {
		if strings.HasPrefix(q, "KILL QUERY") {
			t.Errorf("the KILL QUERY meant for SELECT 1 reached SELECT 2: %q", q)
		}
	}
}

// TestKillQueryDuringRateWait: KILL QUERY (here the admin port's) of a
// session whose statement waits for its user's statement rate ends the
// wait: the statement does not run and gets ERR 1317.
func TestKillQueryDuringRateWait(t *testing.T) {
	fc := newFakeCluster(t, "[limits]\nmax_statements_per_second = 1\nburst = 1", "")
	fc.s.cmd.reset()
	if ok, err := fc.s.admit(protocol.ComQuery); !ok || err != nil {
		t.Fatalf("the first statement: admitted %v, %v", ok, err)
	}
	fc.s.drain.Store(drainBusy)
	fc.s.cmd.reset()
	fc.s.client.ResetSeq()
	fc.s.client.SetSeq(1) // the command packet was number 0
	type admitted struct {
		ok  bool
		err error
	}
	out := make(chan admitted, 1)
	go func() {
		ok, err := fc.s.admit(protocol.ComQuery)
		fc.s.drain.Store(drainIdle) // what the serve loop does once the command is answered
		out <- admitted{ok, err}
	}()
	waitInStack(t, "dataplane.(*Session).admit(", "the second statement never waited for its rate")
	type killResult struct {
		ran bool
		err error
	}
	kill := make(chan killResult, 1)
	go func() {
		_, _, ran, err := fc.env.KillQuery(&fc.s.Handle)
		kill <- killResult{ran, err}
	}()
	select {
	case r := <-out:
		if r.ok || r.err != nil {
			t.Fatalf("after KILL QUERY: admitted %v, %v; want refused without ending the session", r.ok, r.err)
		}
	case <-time.After(500 * time.Millisecond):
		t.Fatal("the statement still waits for its rate 500ms after KILL QUERY")
	}
	if k := <-kill; k.ran || k.err != nil {
		t.Fatalf("KillQuery: ran %v, %v; want no backend statement and no error", k.ran, k.err)
	}
	wantErr(t, "the interrupted statement", oneReply(t, "rate wait", fc.client.take(t)), protocol.ERQueryInterrupted.Code)
}

// holdReplica borrows the replica pool's connections (pool_size = 1) as
// another session would, so the next borrow waits.
func (fc *fakeCluster) holdReplica() *BackendConn {
	fc.t.Helper()
	bc, err := fc.env.pool(fc.replicaBackend().Address).Get(context.Background(), fc.s.key, true, nil)
	if err != nil {
		fc.t.Fatal(err)
	}
	return bc
}

// waitInStack polls, with a deadline, until some goroutine's stack holds
// frame: a wait has begun (nothing signals it).
func waitInStack(t *testing.T, frame, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(allStacks(), frame) {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(time.Millisecond)
	}
}
