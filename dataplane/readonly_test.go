package dataplane

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
)

// TestReplicaPoolConnectionRefusesWrites: sluice's own data connection to a
// replica, borrowed from its pool, cannot change data although the service
// account has ALL PRIVILEGES there: every kind of write fails with 1792, also
// after the connection was reset and after it replayed a session's
// SET SESSION TRANSACTION READ WRITE; a master connection writes.
func TestReplicaPoolConnectionRefusesWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: 1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topo.Stop() })
	db := sandbox.TestDatabase
	if err := topo.Master.Exec(ctx,
		"CREATE TABLE "+db+".ro (id INT PRIMARY KEY)",
		"CREATE SEQUENCE "+db+".ro_seq",
		"GRANT ALL PRIVILEGES ON *.* TO '"+topo.Opts.ServiceUser+"'@'%'"); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Parse([]byte(topo.SluiceConfigWith(sandbox.SluiceOptions{
		Listen:    "127.0.0.1:0",
		ProxyKeys: []string{`metrics_listen = ""`, `admin_listen = ""`},
	})))
	if err != nil {
		t.Fatal(err)
	}
	srv := testEnv(t, cfg)

	replica := topo.Replicas[0].Addr()
	key := poolKey{collation: DefaultCollation}
	// The replica has replayed the master's binary log: the table exists
	// there too. Wait until it does.
	deadline := time.Now().Add(30 * time.Second)
	for {
		bc, err := srv.getConn(context.Background(), replica, key, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = bc.simpleCommand(bc.command(protocol.ComQuery, "SELECT id FROM "+db+".ro"), protocol.ResponseResult)
		srv.pool(replica).Put(bc)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the table never reached the replica: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	writes := []string{
		"INSERT INTO " + db + ".ro VALUES (1)",
		"UPDATE " + db + ".ro SET id = 2",
		"CREATE TABLE " + db + ".ro2 (a INT)",
		"SELECT NEXTVAL(" + db + ".ro_seq)",
		"CREATE TEMPORARY TABLE " + db + ".tmp (a INT)",
		"SELECT id FROM " + db + ".ro FOR UPDATE",
	}
	refuses := func(t *testing.T, bc *BackendConn, when string) {
		t.Helper()
		for _, q := range writes {
			err := bc.simpleCommand(bc.command(protocol.ComQuery, q), protocol.ResponseResult)
			var se *protocol.SQLError
			if !errors.As(err, &se) || se.Code != protocol.ERReadOnlyTransaction.Code {
				t.Errorf("%s: %q on the replica connection: got %v, want ERR 1792", when, q, err)
			}
		}
	}

	bc, err := srv.getConn(context.Background(), replica, key, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bc.readOnly {
		t.Fatal("a new replica connection is not marked read-only")
	}
	refuses(t, bc, "new connection")

	// A reset puts the server's default access mode back; the pool makes
	// the connection read-only again before lending it.
	srv.pool(replica).PutReset(bc)
	if bc, err = srv.getConn(context.Background(), replica, key, true, nil); err != nil {
		t.Fatal(err)
	}
	refuses(t, bc, "after COM_RESET_CONNECTION")

	// A session that chose READ WRITE for itself does not make the replica
	// connection writable when its state is replayed there.
	s := withLegs(&Session{env: srv, key: key})
	s.initLeg(s.clusterLeg, 0)
	s.recordVars(srv.router.Classify("SET SESSION TRANSACTION READ WRITE").Vars, nil)
	s.recordVars(srv.router.Classify("SET SESSION tx_read_only = 0").Vars, nil)
	if err := s.sync(bc); err != nil {
		t.Fatal(err)
	}
	refuses(t, bc, "after replaying the session's READ WRITE")

	// The relay, armed as exchange arms it for a read-only connection,
	// hands a refusal back instead of passing it on.
	client, peer := net.Pipe()
	defer client.Close()
	defer peer.Close()
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	bc.InterceptErr = protocol.ERReadOnlyTransaction.Code
	bc.ResetSeq()
	if err := bc.WritePacketFlush(bc.command(protocol.ComQuery, writes[0])); err != nil {
		t.Fatal(err)
	}
	res, err := protocol.Relay(protocol.NewConn(client), bc.Conn, protocol.ResponseResult, false)
	bc.InterceptErr = 0
	if !errors.Is(err, protocol.ErrIntercepted) || res.Packets != 0 || res.Err == nil || res.Err.Code != protocol.ERReadOnlyTransaction.Code {
		t.Fatalf("relay of a refused write: err %v, %d packets, ERR %v; want ErrIntercepted, nothing relayed, 1792", err, res.Packets, res.Err)
	}
	// The connection is in step: the next command answers normally.
	if err := bc.simpleCommand(bc.command(protocol.ComQuery, "SELECT 1"), protocol.ResponseResult); err != nil {
		t.Fatalf("the replica connection after an intercepted refusal: %v", err)
	}
	srv.pool(replica).Put(bc)

	m, err := srv.getConn(context.Background(), topo.Master.Addr(), key, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.pool(topo.Master.Addr()).Put(m)
	if m.readOnly {
		t.Fatal("a master connection is marked read-only")
	}
	if err := m.simpleCommand(m.command(protocol.ComQuery, "INSERT INTO "+db+".ro VALUES (7)"), protocol.ResponseResult); err != nil {
		t.Fatalf("a write on the master connection: %v", err)
	}
}
