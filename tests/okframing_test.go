package tests

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-proxy/sluice/sandbox"
)

// cliTimings are the mariadb client's "(0.003 sec)" figures, which differ
// between any two runs.
var cliTimings = regexp.MustCompile(`\([0-9.]+ sec\)`)

// TestCausalOKInfoText: with consistency = "causal" sluice strips the
// session-tracking data from the master's OK packets. The mariadb client
// must see each OK packet as a single server sends it: the info text of a
// multi-row INSERT, an UPDATE, INSERT ... SELECT and ALTER intact, no
// "Received malformed packet" after the statement ran. The same script runs
// through sluice and directly on the master (on a database of its own);
// the client's output must be the same.
func TestCausalOKInfoText(t *testing.T) {
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{`consistency = "causal"`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	root := mustRoot(t, env.topo.Master)
	script := func(db string) string {
		return strings.ReplaceAll(strings.Join([]string{
			"CREATE OR REPLACE TABLE {db}.t (id INT PRIMARY KEY, v INT)",
			"INSERT INTO {db}.t VALUES (1, 1), (2, 2), (3, 3)",
			"UPDATE {db}.t SET v = v + 1",
			"UPDATE {db}.t SET v = 2 WHERE id = 1",
			"INSERT INTO {db}.t SELECT id + 10, v FROM {db}.t",
			"INSERT IGNORE INTO {db}.t VALUES (1, 9), (4, 4)",
			"REPLACE INTO {db}.t VALUES (2, 7), (5, 5)",
			"ALTER TABLE {db}.t ADD COLUMN w INT",
			"DELETE FROM {db}.t WHERE id > 10",
			"SELECT id, v FROM {db}.t ORDER BY id",
		}, ";\n")+";\n", "{db}", db)
	}
	run := func(addr, user, password, db string) string {
		t.Helper()
		mustExec(t, root, "CREATE DATABASE IF NOT EXISTS "+db)
		t.Cleanup(func() { mustExec(t, root, "DROP DATABASE IF EXISTS "+db) })
		host, port, _ := net.SplitHostPort(addr)
		out, errOut, err := runCLI(t, "--no-defaults", "-h"+host, "-P"+port, "-u"+user, "-p"+password, "-vvv", "-e", script(db))
		if err != nil {
			t.Fatalf("mariadb client on %s: %v\nstderr: %s\nstdout: %s", addr, err, errOut, out)
		}
		return cliTimings.ReplaceAllString(strings.ReplaceAll(out, db, "{db}"), "(t)")
	}
	through := run(srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "okinfo_sluice")
	direct := run(env.topo.Master.Addr(), env.topo.Opts.ServiceUser, env.topo.Opts.ServicePassword, "okinfo_direct")
	if through != direct {
		t.Fatalf("the mariadb client's output through a causal sluice differs from a single server's:\nthrough sluice:\n%s\n\ndirectly:\n%s", through, direct)
	}
	for _, want := range []string{"Records: 3  Duplicates: 0  Warnings: 0", "Rows matched: 3  Changed: 3  Warnings: 0"} {
		if !strings.Contains(through, want) {
			t.Errorf("the client did not print the server's info %q:\n%s", want, through)
		}
	}
}

// phpMysqliInfo runs statements with PHP mysqli and prints, for each, its
// affected rows and info text (or its error), one line each.
const phpMysqliInfo = `
mysqli_report(MYSQLI_REPORT_OFF);
[$host, $port, $user, $pass, $db] = array_slice($argv, 1, 5);
$m = new mysqli($host, $user, $pass, $db, (int)$port);
if ($m->connect_errno) { fwrite(STDERR, $m->connect_error); exit(1); }
foreach (array_slice($argv, 6) as $q) {
	if ($m->query($q) === false) { echo "error ", $m->errno, " ", $m->error, "\n"; continue; }
	echo $m->affected_rows, " | ", $m->info ?? "", "\n";
}
`

// TestCausalOKInfoMysqliAndDump: PHP mysqli reads the info text of a causal
// sluice's rewritten OK packets as a single server's, and a mariadb-dump
// (multi-row INSERTs) restores through a causal sluice with every row.
func TestCausalOKInfoMysqliAndDump(t *testing.T) {
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{`consistency = "causal"`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	root := mustRoot(t, env.topo.Master)
	for _, db := range []string{"okm_sluice", "okm_direct", "okdump_src", "okdump_dst"} {
		mustExec(t, root, "CREATE OR REPLACE DATABASE "+db)
		t.Cleanup(func() { mustExec(t, root, "DROP DATABASE IF EXISTS "+db) })
	}

	php := findPHP(t, "mysqli")
	mysqli := func(addr, user, password, db string) string {
		host, port, _ := net.SplitHostPort(addr)
		args := []string{"-r", phpMysqliInfo, "--", host, port, user, password, db,
			"CREATE TABLE t (id INT PRIMARY KEY, v INT)",
			"INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)",
			"UPDATE t SET v = v + 1",
			"INSERT INTO t SELECT id + 10, v FROM t",
			"ALTER TABLE t ADD COLUMN w INT",
			"INSERT INTO t VALUES (1, 1, 1)",
		}
		out, err := exec.CommandContext(ctxT(t), php, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("php mysqli on %s: %v\n%s", addr, err, out)
		}
		return string(out)
	}
	through := mysqli(srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "okm_sluice")
	direct := mysqli(env.topo.Master.Addr(), env.topo.Opts.ServiceUser, env.topo.Opts.ServicePassword, "okm_direct")
	if through != direct || !strings.Contains(through, "Records: 3") {
		t.Errorf("PHP mysqli through a causal sluice:\n%s\ndirectly:\n%s", through, direct)
	}

	// A dump of 500 rows in extended INSERTs, restored through sluice.
	mustExec(t, root, "CREATE TABLE okdump_src.t (id INT PRIMARY KEY, v VARCHAR(40))")
	mustExec(t, root, "INSERT INTO okdump_src.t SELECT seq, CONCAT('row ', seq) FROM okdump_src.seq_1_to_500")
	host, port, _ := net.SplitHostPort(env.topo.Master.Addr())
	dump, err := exec.CommandContext(ctxT(t), "mariadb-dump", "--no-defaults", "-h"+host, "-P"+port,
		"-u"+env.topo.Opts.ServiceUser, "-p"+env.topo.Opts.ServicePassword, "--net-buffer-length=4096", "okdump_src", "t").Output()
	if err != nil {
		t.Fatalf("mariadb-dump: %v", err)
	}
	if n := strings.Count(string(dump), "INSERT INTO"); n < 2 {
		t.Fatalf("the dump has %d INSERTs; want several multi-row ones", n)
	}
	file := filepath.Join(t.TempDir(), "dump.sql")
	if err := os.WriteFile(file, dump, 0o644); err != nil {
		t.Fatal(err)
	}
	shost, sport, _ := net.SplitHostPort(srv.Addr().String())
	if out, errOut, err := runCLI(t, "--no-defaults", "-h"+shost, "-P"+sport, "-u"+env.topo.Opts.AppUser,
		"-p"+env.topo.Opts.AppPassword, "okdump_dst", "-e", "source "+file); err != nil {
		t.Fatalf("restoring the dump through a causal sluice: %v\nstderr: %s\nstdout: %s", err, errOut, out)
	}
	var src, dst, srcSum, dstSum string
	if err := root.QueryRowContext(ctxT(t), "SELECT COUNT(*), SUM(CRC32(CONCAT(id, v))) FROM okdump_src.t").Scan(&src, &srcSum); err != nil {
		t.Fatal(err)
	}
	if err := root.QueryRowContext(ctxT(t), "SELECT COUNT(*), SUM(CRC32(CONCAT(id, v))) FROM okdump_dst.t").Scan(&dst, &dstSum); err != nil {
		t.Fatal(err)
	}
	if src != "500" || dst != src || dstSum != srcSum {
		t.Fatalf("restored %s rows (checksum %s) of %s (checksum %s)", dst, dstSum, src, srcSum)
	}
}

// mysqldbInfo runs statements with MySQLdb (mysqlclient on MariaDB
// Connector/C) and prints, for each, its affected rows and the
// connection's info() text (or its error code), one line each.
const mysqldbInfo = `
import sys, MySQLdb
host, port, user, pw, db = sys.argv[1:6]
c = MySQLdb.connect(host=host, port=int(port), user=user, passwd=pw, db=db, autocommit=True)
for q in sys.argv[6:]:
    cur = c.cursor()
    try:
        n = cur.execute(q)
        print(n, "|", c.info())
    except MySQLdb.Error as e:
        print("error", e.args[0], e.args[1])
`

// TestCausalOKInfoMySQLdb: MySQLdb reads the info text of a causal
// sluice's rewritten OK packets (UPDATE, multi-row INSERT, INSERT ...
// SELECT, ALTER) as a single server's, with no error after the statement
// ran (issue 19, item 1).
func TestCausalOKInfoMySQLdb(t *testing.T) {
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ClusterKeys: []string{`consistency = "causal"`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	root := mustRoot(t, env.topo.Master)
	run := func(addr, user, password, db string) string {
		t.Helper()
		mustExec(t, root, "CREATE OR REPLACE DATABASE "+db)
		t.Cleanup(func() { mustExec(t, root, "DROP DATABASE IF EXISTS "+db) })
		host, port, _ := net.SplitHostPort(addr)
		return runMySQLdb(t, mysqldbInfo, host, port, user, password, db,
			"CREATE TABLE t (id INT PRIMARY KEY, v INT)",
			"INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)",
			"UPDATE t SET v = v + 1",
			"UPDATE t SET v = 2 WHERE id = 1",
			"INSERT INTO t SELECT id + 10, v FROM t",
			"INSERT IGNORE INTO t VALUES (1, 9), (4, 4)",
			"ALTER TABLE t ADD COLUMN w INT",
			"INSERT INTO t VALUES (1, 1, 1)",
			"SELECT id FROM t",
		)
	}
	through := run(srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "okmdb_sluice")
	direct := run(env.topo.Master.Addr(), env.topo.Opts.ServiceUser, env.topo.Opts.ServicePassword, "okmdb_direct")
	if through != direct {
		t.Fatalf("MySQLdb through a causal sluice:\n%s\ndirectly:\n%s", through, direct)
	}
	for _, want := range []string{"3 | Records: 3  Duplicates: 0  Warnings: 0", "3 | Rows matched: 3  Changed: 3  Warnings: 0", "0 | Records: 0  Duplicates: 0  Warnings: 0"} {
		if !strings.Contains(through, want) {
			t.Errorf("MySQLdb did not get the server's info %q:\n%s", want, through)
		}
	}
}
