package tests

import (
	"database/sql"
	"database/sql/driver"
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
