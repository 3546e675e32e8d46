package tests

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func writeCSV(t *testing.T, rows int) string {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= rows; i++ {
		fmt.Fprintf(&b, "%d,row %d\n", i, i)
	}
	path := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadDataLocalDisabledByDefault(t *testing.T) {
	path := writeCSV(t, 3)
	d := appDB(t, "sluice_test", func(c *mysql.Config) { c.AllowAllFiles = true })
	mustExec(t, d, "CREATE TABLE IF NOT EXISTS li_off (id INT PRIMARY KEY, s VARCHAR(20))")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS li_off") })
	_, err := d.ExecContext(ctxT(t), fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE li_off FIELDS TERMINATED BY ','", path))
	if mysqlErrNumber(err) != 1148 || !strings.Contains(err.Error(), "local_infile = false") {
		t.Fatalf("LOAD DATA LOCAL with local_infile off: %v, want 1148 naming the setting", err)
	}
	host, port, _ := net.SplitHostPort(env.addr)
	_, errOut, err := runCLI(t, "--no-defaults", "-h"+host, "-P"+port, "-u"+env.topo.Opts.AppUser, "-p"+env.topo.Opts.AppPassword,
		"--local-infile=1", "sluice_test", "-e", fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE li_off FIELDS TERMINATED BY ','", path))
	if err == nil || !strings.Contains(errOut, "1148") {
		t.Fatalf("mariadb CLI with local_infile off: %v %s", err, errOut)
	}
}

func TestLoadDataLocalRelaysTheClientsFile(t *testing.T) {
	srv, err := startProxy(env.topo, "local_infile = true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.Addr().String()
	path := writeCSV(t, 5000)
	d := openAt(t, addr, env.topo.Opts.AppPassword, func(c *mysql.Config) { c.AllowAllFiles = true; c.DBName = "sluice_test" })
	ctx := ctxT(t)
	mustExec(t, d, "CREATE TABLE li_on (id INT PRIMARY KEY, s VARCHAR(20))")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS li_on") })
	res, err := d.ExecContext(ctx, fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE li_on FIELDS TERMINATED BY ','", path))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 5000 {
		t.Fatalf("loaded %d rows, want 5000", n)
	}
	var n int
	if err := mustRoot(t, env.topo.Master).QueryRowContext(ctx, "SELECT COUNT(*) FROM sluice_test.li_on").Scan(&n); err != nil || n != 5000 {
		t.Fatalf("rows on the master: %d, %v", n, err)
	}
	// A file the client refuses to send: the server's error, and the session goes on.
	c := conn(t, openAt(t, addr, env.topo.Opts.AppPassword, func(c *mysql.Config) { c.DBName = "sluice_test" }))
	if _, err := c.ExecContext(ctx, "LOAD DATA LOCAL INFILE '/etc/passwd' INTO TABLE li_on"); err == nil {
		t.Fatal("the driver sent a file it was not allowed to")
	}
	var one int
	if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("session after a refused file: %v", err)
	}
	// The mariadb CLI streams its file the same way.
	host, port, _ := net.SplitHostPort(addr)
	mustExec(t, d, "DELETE FROM li_on")
	_, errOut, err := runCLI(t, "--no-defaults", "-h"+host, "-P"+port, "-u"+env.topo.Opts.AppUser, "-p"+env.topo.Opts.AppPassword,
		"--local-infile=1", "sluice_test", "-e", fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE li_on FIELDS TERMINATED BY ','", path))
	if err != nil {
		t.Fatalf("mariadb --local-infile through sluice: %v %s", err, errOut)
	}
	if err := mustRoot(t, env.topo.Master).QueryRowContext(ctx, "SELECT COUNT(*) FROM sluice_test.li_on").Scan(&n); err != nil || n != 5000 {
		t.Fatalf("rows on the master after the CLI load: %d, %v", n, err)
	}
}
