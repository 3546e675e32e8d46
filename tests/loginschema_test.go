package tests

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
)

// killServiceThreads kills the service account's connections on each of
// servers (sluice's pooled data connections) and waits until the servers
// have closed them.
func killServiceThreads(t *testing.T, servers []*sql.DB) {
	t.Helper()
	q := "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = '" + env.topo.Opts.ServiceUser + "' AND ID <> CONNECTION_ID()"
	for _, db := range servers {
		var ids []string
		rows, err := db.QueryContext(ctxT(t), q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		for _, id := range ids {
			// 1094: it ended meanwhile.
			if _, err := db.ExecContext(ctxT(t), "KILL "+id); err != nil && mysqlErrNumber(err) != 1094 {
				t.Fatal(err)
			}
		}
		if len(ids) == 0 {
			continue
		}
		left := q + " AND ID IN (" + strings.Join(ids, ",") + ")"
		deadline := time.Now().Add(5 * time.Second)
		for {
			var n int
			if err := db.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM ("+left+") k").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d killed service connections still listed", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// TestLoginSchemaCheckSurvivesKilledPool: the pooled replica connections
// are killed on the servers just after they went back to their pools (so
// the pool hands them out unchecked), and a client logs in at once naming
// a schema they do not have selected. The login's schema check finds its connection dead and
// is retried, as a read is: the login succeeds rather than failing with
// 2013 (issue 19, item 12). A schema the master's probe lists needs no
// backend connection at login, so the schema named here exists on the
// replicas only (created there without binary logging): the check must
// ask a pooled replica connection.
func TestLoginSchemaCheckSurvivesKilledPool(t *testing.T) {
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	var replicas []*sql.DB
	for _, r := range env.topo.Replicas {
		replicas = append(replicas, mustRoot(t, r))
	}
	login := func(db string) error {
		c := rawDial(t, srv.Addr().String())
		defer c.Close()
		_, err := protocol.ClientHandshake(c, protocol.ClientConfig{
			User: env.topo.Opts.AppUser, Password: env.topo.Opts.AppPassword, Database: db,
			Capabilities: protocol.BackendCapabilities | protocol.ClientConnectWithDB,
		})
		return err
	}
	for _, r := range replicas {
		c, err := r.Conn(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"SET SESSION sql_log_bin = 0", "CREATE DATABASE IF NOT EXISTS replica_only19"} {
			if _, err := c.ExecContext(ctxT(t), q); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() {
			_, _ = c.ExecContext(context.Background(), "DROP DATABASE IF EXISTS replica_only19")
			c.Close()
		})
	}
	app := appDBAt(t, srv.Addr().String())
	for round := range 5 {
		// Reads fill the replica pools with connections that have
		// sluice_test selected.
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var one int
				_ = app.QueryRowContext(ctxT(t), "SELECT 1 FROM sluice_test.idle_kill LIMIT 1").Scan(&one)
			}()
		}
		wg.Wait()
		killServiceThreads(t, replicas)
		// Another schema: the check must select it on the connection.
		if err := login("replica_only19"); err != nil {
			t.Fatalf("round %d: a login naming a schema right after the pooled replica connections were killed: %v", round, err)
		}
	}
	// Logins go on being served.
	if err := login("sluice_test"); err != nil {
		t.Fatal(fmt.Errorf("after the rounds: %w", err))
	}
}
