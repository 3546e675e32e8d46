package tests

import (
	"database/sql"
	"sync"
	"testing"

	"github.com/sluice-proxy/sluice/sandbox"
)

// pinTestSluice starts a sluice whose backends have 2 connections each, so
// sessions share them, and returns an app-user pool with no idle client
// connections (each Conn is a new session).
func pinTestSluice(t *testing.T, authKeys ...string) *sql.DB {
	t.Helper()
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{"pool_size = 2", `pool_wait_timeout = "20s"`}, AuthKeys: authKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return appDBAt(t, srv.Addr().String())
}

// TestSetRoleStaysInItsSession: SET ROLE changes the privileges of the
// connection it runs on; through sluice it must not reach other sessions,
// which a single server never shows them (issue 19). The service account is
// granted a role so that the SET succeeds. With grants enforced sluice keeps
// the role itself (TestGrantsIdentityAsDirect); this is the SET replayed on
// the backends, as with auth.enforce_grants = false.
func TestSetRoleStaysInItsSession(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	svc := "'" + env.topo.Opts.ServiceUser + "'@'%'"
	mustExec(t, root, "CREATE ROLE IF NOT EXISTS r19")
	mustExec(t, root, "GRANT r19 TO "+svc)
	t.Cleanup(func() { mustExec(t, root, "DROP ROLE IF EXISTS r19") })
	d := pinTestSluice(t, "enforce_grants = false")
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.Conn(ctxT(t))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer c.Close()
			var role sql.NullString
			if i%5 == 0 {
				if _, err := c.ExecContext(ctxT(t), "SET ROLE r19"); err != nil {
					errs <- "SET ROLE r19: " + err.Error()
					return
				}
				if err := c.QueryRowContext(ctxT(t), "SELECT CURRENT_ROLE()").Scan(&role); err != nil || role.String != "r19" {
					errs <- "the session that set the role sees " + role.String
				}
				return
			}
			for range 5 {
				if err := c.QueryRowContext(ctxT(t), "/* sluice:master */ SELECT CURRENT_ROLE()").Scan(&role); err != nil {
					errs <- err.Error()
					return
				}
				if role.Valid {
					errs <- "a session that set no role runs with role " + role.String
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestFlushWithReadLockStaysInItsSession: FLUSH TABLES [t] WITH READ LOCK
// holds its lock on the session's connection until UNLOCK TABLES or the
// session's end; after the session has gone, other sessions write to t as
// they would on a single server (issue 19). (The form with tables already
// shows an open transaction in the server's status flags, which pinned it;
// the global one does not.)
func TestFlushWithReadLockStaysInItsSession(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	mustExec(t, root, "CREATE DATABASE IF NOT EXISTS locktest")
	t.Cleanup(func() { mustExec(t, root, "DROP DATABASE IF EXISTS locktest") })
	mustExec(t, root, "CREATE OR REPLACE TABLE locktest.t (id INT AUTO_INCREMENT PRIMARY KEY, s INT)")
	d := pinTestSluice(t)
	for round, lock := range []string{"FLUSH TABLES WITH READ LOCK", "FLUSH TABLES locktest.t WITH READ LOCK", "FLUSH TABLES WITH READ LOCK"} {
		c, err := d.Conn(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{lock, "SELECT COUNT(*) FROM locktest.t"} {
			if _, err := c.ExecContext(ctxT(t), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		c.Close()
		// The locking session has gone: writes go through, on whichever
		// pooled connection they get.
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w, err := d.Conn(ctxT(t))
				if err != nil {
					errs <- err
					return
				}
				defer w.Close()
				if _, err := w.ExecContext(ctxT(t), "SET SESSION lock_wait_timeout = 2"); err != nil {
					errs <- err
					return
				}
				_, err = w.ExecContext(ctxT(t), "INSERT INTO locktest.t (s) VALUES (?)", round*100+i)
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d (%s): a write after the locking session ended: %v", round, lock, err)
			}
		}
	}
}
