package dataplane

import (
	"errors"
	"testing"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/protocol/fakebackend"
)

// TestDispatchPing: sluice answers COM_PING itself, with the status of a
// session in no transaction, and opens no backend connection for it.
func TestDispatchPing(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	pkts, err := fc.command([]byte{protocol.ComPing})
	if err != nil {
		t.Fatal(err)
	}
	r := oneReply(t, "COM_PING", pkts)
	if r.ok == nil || r.ok.Status != protocol.StatusAutocommit {
		t.Fatalf("COM_PING: %v, want OK with autocommit", r)
	}
	if n, m := logins(fc.master), logins(fc.replica); n+m != 0 {
		t.Fatalf("COM_PING opened %d master and %d replica connections", n, m)
	}
}

// TestDispatchQuit: COM_QUIT ends the session (errQuit) without a word to
// the client and without reaching a backend, even one whose connection
// the session used.
func TestDispatchQuit(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	fc.replica.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{1}))
	wantRows(t, "SELECT", fc.query("SELECT a FROM t"), []string{"1"})
	fc.replica.ClearCommands()

	pkts, err := fc.command([]byte{protocol.ComQuit})
	if !errors.Is(err, errQuit) {
		t.Fatalf("COM_QUIT: dispatch returned %v, want errQuit", err)
	}
	if len(pkts) != 0 {
		t.Fatalf("COM_QUIT: the client got %d packets", len(pkts))
	}
	wantReceived(t, "replica", fc.replica)
	wantReceived(t, "master", fc.master)
}

// TestDispatchUnknownCommand: a command sluice does not serve gets ERR
// 1047 naming it; nothing reaches a backend and the session goes on.
func TestDispatchUnknownCommand(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	for _, cmd := range []byte{protocol.ComBinlogDump, protocol.ComDebug, 0xee} {
		pkts, err := fc.command([]byte{cmd, 0, 0, 0, 0})
		if err != nil {
			t.Fatalf("%s ended the session: %v", protocol.CommandName(cmd), err)
		}
		wantErr(t, protocol.CommandName(cmd), oneReply(t, protocol.CommandName(cmd), pkts),
			protocol.ERUnknownCommand.Code, "sluice does not support "+protocol.CommandName(cmd))
	}
	pkts, err := fc.command([]byte{protocol.ComPing})
	if r := oneReply(t, "COM_PING", pkts); err != nil || r.ok == nil {
		t.Fatalf("COM_PING after the unknown commands: %v %v", r, err)
	}
	if n, m := logins(fc.master), logins(fc.replica); n+m != 0 {
		t.Fatalf("unknown commands opened %d master and %d replica connections", n, m)
	}
}

// TestDispatchInitDB: COM_INIT_DB runs on the master and, once it
// succeeds, is the session's schema, which a replica connection opened
// later gets before the statement; a schema the master refuses leaves the
// session's as it was, and the client gets the master's ERR.
func TestDispatchInitDB(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	fc.master.OnFunc(func(c fakebackend.Command) (fakebackend.Result, bool) {
		if c.Command == protocol.ComInitDB && c.Arg == "nope" {
			return fakebackend.Err(protocol.ERBadDB.New("Unknown database 'nope'")), true
		}
		return fakebackend.Result{}, false
	})
	fc.replica.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{1}))
	initDB := func(db string) reply {
		pkts, err := fc.command(append([]byte{protocol.ComInitDB}, db...))
		if err != nil {
			t.Fatalf("COM_INIT_DB %s ended the session: %v", db, err)
		}
		return oneReply(t, "COM_INIT_DB "+db, pkts)
	}

	if r := initDB("shop"); r.ok == nil {
		t.Fatalf("COM_INIT_DB shop: %v, want OK", r)
	}
	wantReceived(t, "master", fc.master, "COM_INIT_DB shop")
	if fc.s.schema != "shop" {
		t.Fatalf("session schema %q after COM_INIT_DB shop", fc.s.schema)
	}
	wantRows(t, "SELECT", fc.query("SELECT a FROM t"), []string{"1"})
	wantReceived(t, "replica", fc.replica, "READ ONLY", "COM_INIT_DB shop", "COM_QUERY SELECT a FROM t")

	wantErr(t, "COM_INIT_DB nope", initDB("nope"), protocol.ERBadDB.Code, "Unknown database 'nope'")
	if fc.s.schema != "shop" {
		t.Fatalf("session schema %q after a refused COM_INIT_DB, want shop", fc.s.schema)
	}
	// The pooled master connection ran the refused COM_INIT_DB: it still
	// has shop, so nothing is replayed before the next statement there.
	wantReceived(t, "master", fc.master, "COM_INIT_DB nope")
	wantRows(t, "SELECT", fc.query("SELECT a FROM t"), []string{"1"})
	wantReceived(t, "replica", fc.replica, "COM_QUERY SELECT a FROM t")
}

// TestRoutingReadWrite: a read runs on the replica, on a connection made
// read-only when it was opened; writes and locking reads run on the
// master. The client gets each backend's own answer, and a backend's ERR
// as it is.
func TestRoutingReadWrite(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	fc.replica.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{"replica"}, []any{nil}))
	fc.replica.OnQuery("SELECT * FROM nope", fakebackend.Err(protocol.NewError(1146, "Table 'nope' doesn't exist")))
	fc.master.OnQuery("UPDATE t SET a = 2", fakebackend.OK(3, 0))
	fc.master.OnQuery("INSERT INTO t VALUES (9)", fakebackend.OK(1, 42))
	fc.master.OnQuery("SELECT a FROM t FOR UPDATE", fakebackend.Rows([]string{"a"}, []any{"master"}))

	wantRows(t, "SELECT", fc.query("SELECT a FROM t"), []string{"replica"}, []string{"NULL"})
	if r := fc.query("UPDATE t SET a = 2"); r.ok == nil || r.ok.AffectedRows != 3 {
		t.Fatalf("UPDATE: %v, want OK with 3 rows", r)
	}
	if r := fc.query("INSERT INTO t VALUES (9)"); r.ok == nil || r.ok.AffectedRows != 1 || r.ok.LastInsertID != 42 {
		t.Fatalf("INSERT: %v, want OK with insert id 42", r)
	}
	wantRows(t, "SELECT ... FOR UPDATE", fc.query("SELECT a FROM t FOR UPDATE"), []string{"master"})
	wantErr(t, "SELECT from a missing table", fc.query("SELECT * FROM nope"), 1146, "Table 'nope' doesn't exist")

	// One connection to each served all its statements: between them
	// they went back to their pools, and a server's ERR breaks nothing.
	if n, m := logins(fc.master), logins(fc.replica); n != 1 || m != 1 {
		t.Fatalf("%d master and %d replica connections opened, want one each", n, m)
	}
	wantReceived(t, "replica", fc.replica, "READ ONLY", "COM_QUERY SELECT a FROM t", "COM_QUERY SELECT * FROM nope")
	wantReceived(t, "master", fc.master, "COM_QUERY UPDATE t SET a = 2", "COM_QUERY INSERT INTO t VALUES (9)",
		"COM_QUERY SELECT a FROM t FOR UPDATE")
	// The last statement's connection stays: its ERR is there for SHOW
	// WARNINGS.
	if fc.s.master != nil || fc.s.replica == nil {
		t.Fatalf("after an ERR the session holds master %v, replica %v; want the replica's only", fc.s.master != nil, fc.s.replica != nil)
	}
}

// TestRoutingTransaction: once BEGIN opened a transaction, reads run on
// the master, on the one connection the session keeps until COMMIT; after
// it, reads go back to the replica and the connection to the pool.
func TestRoutingTransaction(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	fc.master.OnQuery("BEGIN", fakebackend.Result{Status: protocol.StatusAutocommit | protocol.StatusInTrans})
	fc.master.OnQuery("COMMIT", fakebackend.Result{Status: protocol.StatusAutocommit})
	fc.master.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{"master"}))
	fc.master.OnQuery("UPDATE t SET a = 2", fakebackend.OK(1, 0))
	fc.replica.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{"replica"}))

	if r := fc.query("BEGIN"); r.ok == nil || r.ok.Status&protocol.StatusInTrans == 0 {
		t.Fatalf("BEGIN: %v, want OK in a transaction", r)
	}
	held := fc.s.master
	if held == nil {
		t.Fatal("the session let its master connection go inside a transaction")
	}
	wantRows(t, "SELECT in the transaction", fc.query("SELECT a FROM t"), []string{"master"})
	if r := fc.query("UPDATE t SET a = 2"); r.ok == nil {
		t.Fatalf("UPDATE: %v", r)
	}
	if fc.s.master != held {
		t.Fatal("the transaction's statements ran on another master connection")
	}
	if r := fc.query("COMMIT"); r.ok == nil || r.ok.Status&protocol.StatusInTrans != 0 {
		t.Fatalf("COMMIT: %v, want OK out of the transaction", r)
	}
	if fc.s.master != nil {
		t.Fatal("the session kept its master connection after COMMIT")
	}
	wantRows(t, "SELECT after COMMIT", fc.query("SELECT a FROM t"), []string{"replica"})
	wantReceived(t, "master", fc.master, "COM_QUERY BEGIN", "COM_QUERY SELECT a FROM t", "COM_QUERY UPDATE t SET a = 2", "COM_QUERY COMMIT")
	wantReceived(t, "replica", fc.replica, "READ ONLY", "COM_QUERY SELECT a FROM t")
}

// TestReplaySetAndSchema: a SET and a USE run on the master; a replica
// connection opened afterwards gets the schema and the SET (in its replay
// form) before the client's statement, and only once: the next statement
// on it finds them there. The master connection, which ran both itself,
// gets neither again.
func TestReplaySetAndSchema(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	fc.master.OnUnmatched(fakebackend.OK(0, 0))
	fc.replica.OnQuery("SET NAMES 'utf8mb4'", fakebackend.OK(0, 0))
	fc.replica.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{1}))

	for _, q := range []string{"SET NAMES utf8mb4", "USE shop"} {
		if r := fc.query(q); r.ok == nil {
			t.Fatalf("%s: %v", q, r)
		}
	}
	if fc.s.schema != "shop" || len(fc.s.vars) != 1 {
		t.Fatalf("session schema %q, %d tracked variables; want shop and SET NAMES", fc.s.schema, len(fc.s.vars))
	}
	wantRows(t, "first SELECT", fc.query("SELECT a FROM t"), []string{"1"})
	wantReceived(t, "replica", fc.replica, "READ ONLY", "COM_INIT_DB shop", "COM_QUERY SET NAMES 'utf8mb4'", "COM_QUERY SELECT a FROM t")
	wantRows(t, "second SELECT", fc.query("SELECT a FROM t"), []string{"1"})
	wantReceived(t, "replica", fc.replica, "COM_QUERY SELECT a FROM t")

	if r := fc.query("UPDATE t SET a = 1"); r.ok == nil {
		t.Fatalf("UPDATE: %v", r)
	}
	wantReceived(t, "master", fc.master, "COM_QUERY SET NAMES utf8mb4", "COM_QUERY USE shop", "COM_QUERY UPDATE t SET a = 1")
}

// TestReplaySetRefused: a SET the master took that a replica refuses when
// it is replayed fails the statement with the replica's code and a
// message naming the variable and the server; the session stops
// replaying it, so its next read runs.
func TestReplaySetRefused(t *testing.T) {
	fc := newFakeCluster(t, "", "")
	fc.master.OnUnmatched(fakebackend.OK(0, 0))
	fc.replica.OnQuery("SET NAMES 'utf8mb4'", fakebackend.Err(protocol.NewError(1115, "Unknown character set: 'utf8mb4'")))
	fc.replica.OnQuery("SELECT a FROM t", fakebackend.Rows([]string{"a"}, []any{1}))
	if r := fc.query("SET NAMES utf8mb4"); r.ok == nil {
		t.Fatalf("SET NAMES: %v", r)
	}
	wantErr(t, "SELECT", fc.query("SELECT a FROM t"), 1115,
		"sluice could not apply the session's names on replica "+fc.replica.Addr(), "Unknown character set")
	wantReceived(t, "replica", fc.replica, "READ ONLY", "COM_QUERY SET NAMES 'utf8mb4'")
	if len(fc.s.vars) != 0 {
		t.Fatalf("the session still replays %d variables", len(fc.s.vars))
	}
	wantRows(t, "SELECT after the refusal", fc.query("SELECT a FROM t"), []string{"1"})
	wantReceived(t, "replica", fc.replica, "COM_QUERY SELECT a FROM t")
}
