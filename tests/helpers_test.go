package tests

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"testing"

	"github.com/sluice-proxy/sluice/sandbox"
)

// driverBadConn makes database/sql discard a connection instead of pooling
// it, so the next Conn is a new sluice session.
var driverBadConn = driver.ErrBadConn

func mustExec(t testing.TB, d *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := d.ExecContext(ctxT(t), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func mustExecC(t testing.TB, c *sql.Conn, q string, args ...any) {
	t.Helper()
	if _, err := c.ExecContext(ctxT(t), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func mustRoot(t testing.TB, s *sandbox.Server) *sql.DB {
	t.Helper()
	d, err := s.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type sandboxServer = sandbox.Server

// backendThread runs q on c and returns the id of the server thread that
// ran it and the server, found in the process list of one of servers while
// q runs. q must carry marker (a comment unique to the call) and last a
// while (SELECT SLEEP(0.5)): through sluice, CONNECTION_ID() is the
// session's id, not a backend thread's.
func backendThread(t *testing.T, ctx context.Context, c *sql.Conn, q, marker string, servers ...*sandbox.Server) (int64, *sandbox.Server) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(ctx, q)
		done <- err
	}()
	var id int64
	var on *sandbox.Server
	eventually(t, ctx, "the statement "+marker+" running on a backend", func() error {
		for _, s := range servers {
			root := mustRoot(t, s)
			err := root.QueryRowContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()", "%"+marker+"%").Scan(&id)
			if err == nil {
				on = s
				return nil
			}
		}
		return fmt.Errorf("not running anywhere yet")
	})
	if err := <-done; err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return id, on
}
