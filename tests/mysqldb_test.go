package tests

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// findMySQLdb returns a Python that can import MySQLdb (mysqlclient, on
// MariaDB Connector/C): the first python3 on PATH or Debian's
// /usr/bin/python3 (where python3-mysqldb installs).
func findMySQLdb(t *testing.T) string {
	t.Helper()
	var tried []string
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		tried = append(tried, p)
		if exec.Command(p, "-c", "import MySQLdb").Run() == nil {
			return p
		}
	}
	t.Fatalf("MySQLdb (mysqlclient) is required for the client tests (no python3 among %v imports MySQLdb): run `make deps-test` (Debian: python3-mysqldb)", tried)
	return ""
}

// runMySQLdb runs the Python script with MySQLdb; argv follows the
// script's name. It returns stdout and fails the test on a crash.
func runMySQLdb(t *testing.T, script string, argv ...string) string {
	t.Helper()
	py := findMySQLdb(t)
	out, err := exec.CommandContext(ctxT(t), py, append([]string{"-c", script}, argv...)...).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("python MySQLdb: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	return string(out)
}

// mysqldbChangeUser leaves session state behind (a user variable, two SET
// SESSION variables, a temporary table), changes user with
// conn.change_user, prints what of that state is left and the schema, then
// changes back and prints whether the connection still serves. Errors are
// printed as their codes, which are the same through sluice and directly.
const mysqldbChangeUser = `
import sys, MySQLdb
host, port, user, pw, user2, pw2, db = sys.argv[1:8]
c = MySQLdb.connect(host=host, port=int(port), user=user, passwd=pw)
def q(sql):
    cur = c.cursor()
    try:
        cur.execute(sql)
        print(sql, "->", cur.fetchall())
    except MySQLdb.Error as e:
        print(sql, "-> error", e.args[0])
for s in ("SET @u = 7", "SET SESSION sql_mode = 'ANSI'", "SET SESSION group_concat_max_len = 7",
          "CREATE TEMPORARY TABLE " + db + ".cu_tmp (i INT)"):
    c.cursor().execute(s)
q("SELECT @u, @@session.sql_mode, @@session.group_concat_max_len")
c.change_user(user2, pw2, db)
print("changed user")
q("SELECT @u, @@session.sql_mode = @@global.sql_mode, @@session.group_concat_max_len = @@global.group_concat_max_len, DATABASE()")
q("SELECT COUNT(*) FROM cu_tmp")
c.cursor().execute("SET @u = 8")
c.change_user(user, pw)
print("changed back")
q("SELECT @u, DATABASE(), 1 + 1")
`

// TestMySQLdbChangeUser: MySQLdb's conn.change_user (MariaDB Connector/C's
// mysql_change_user, which answers from its login's scramble whatever
// auth switch follows) works through sluice, and resets the session as a
// single server does: the same script directly on the master prints the
// same (issue 19, item 11).
func TestMySQLdbChangeUser(t *testing.T) {
	ctx := ctxT(t)
	const user2, pw2 = "mdb_other", "mdb-other-pw"
	create := []string{"CREATE OR REPLACE USER '" + user2 + "'@'%' IDENTIFIED BY '" + pw2 + "'", "GRANT ALL ON *.* TO '" + user2 + "'@'%'"}
	if err := env.topo.Auth.Exec(ctx, create...); err != nil {
		t.Fatal(err)
	}
	root := mustRoot(t, env.topo.Master)
	for _, q := range create {
		mustExec(t, root, q)
	}
	t.Cleanup(func() {
		_ = env.topo.Auth.Exec(ctxT(t), "DROP USER IF EXISTS '"+user2+"'@'%'")
		mustExec(t, root, "DROP USER IF EXISTS '"+user2+"'@'%'")
	})
	// A network connection left unclosed is closed by its finalizer at some
	// garbage collection: none runs until the check below is done.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	run := func(addr, user, pw string) string {
		host, port, _ := net.SplitHostPort(addr)
		return runMySQLdb(t, mysqldbChangeUser, host, port, user, pw, user2, pw2, "sluice_test")
	}
	through := run(env.addr, env.topo.Opts.AppUser, env.topo.Opts.AppPassword)
	direct := run(env.topo.Master.Addr(), env.topo.Opts.ServiceUser, env.topo.Opts.ServicePassword)
	if through != direct {
		t.Fatalf("MySQLdb change_user through sluice:\n%s\ndirectly:\n%s", through, direct)
	}
	if !strings.Contains(through, "changed back") || !strings.Contains(through, "(None, 1, 1, 'sluice_test')") {
		t.Fatalf("change_user did not reset the session:\n%s", through)
	}
	// The auth-server connection kept for the change of user closes with
	// the session.
	waitAuthConnectionsGone(t, env.topo.Opts.AppUser, user2)
}

// waitAuthConnectionsGone waits until the auth server has no connection of
// users left (those sluice kept for COM_CHANGE_USER close with their
// sessions).
func waitAuthConnectionsGone(t *testing.T, users ...string) {
	t.Helper()
	auth := mustRoot(t, env.topo.Auth)
	q := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER IN ('" + strings.Join(users, "','") + "')"
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := auth.QueryRowContext(ctxT(t), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d auth-server connections of %v still open after their sessions ended", n, users)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMySQLdbChangeUserWithoutKeptConnection: with
// auth.max_kept_auth_connections = 0 sluice keeps no auth-server connection
// after login, and Connector/C's change_user gets 1251 naming the key
// rather than a misleading 1045.
func TestMySQLdbChangeUserWithoutKeptConnection(t *testing.T) {
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{AuthKeys: []string{"max_kept_auth_connections = 0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	host, port, _ := net.SplitHostPort(srv.Addr().String())
	out := runMySQLdb(t, `
import sys, MySQLdb
c = MySQLdb.connect(host=sys.argv[1], port=int(sys.argv[2]), user=sys.argv[3], passwd=sys.argv[4])
try:
    c.change_user(sys.argv[3], sys.argv[4])
    print("changed")
except MySQLdb.Error as e:
    print("error", e.args[0], e.args[1])
`, host, port, env.topo.Opts.AppUser, env.topo.Opts.AppPassword)
	if !strings.HasPrefix(out, "error 1251 ") || !strings.Contains(out, "auth.max_kept_auth_connections") {
		t.Fatalf("change_user without a kept auth-server connection: %q, want 1251 naming auth.max_kept_auth_connections", out)
	}
}

// TestMySQLdbChangeUserWrongPassword: the wrong password gets 1045 from
// MySQLdb's change_user through sluice.
func TestMySQLdbChangeUserWrongPassword(t *testing.T) {
	host, port, _ := net.SplitHostPort(env.addr)
	out := runMySQLdb(t, `
import sys, MySQLdb
c = MySQLdb.connect(host=sys.argv[1], port=int(sys.argv[2]), user=sys.argv[3], passwd=sys.argv[4])
try:
    c.change_user(sys.argv[3], "wrong-" + sys.argv[4])
    print("changed")
except MySQLdb.Error as e:
    print("error", e.args[0])
`, host, port, env.topo.Opts.AppUser, env.topo.Opts.AppPassword)
	if strings.TrimSpace(out) != "error 1045" {
		t.Fatalf("change_user with a wrong password: %q, want error 1045", out)
	}
}

// TestMySQLdbChangeUserToAdminRefused: MySQLdb's change_user to the name
// of sluice's [admin] user gets 1045 naming the admin port on the data
// port, even though the auth server has that account and the password is
// right (the kept auth-server connection accepts it: sluice refuses).
func TestMySQLdbChangeUserToAdminRefused(t *testing.T) {
	ctx := ctxT(t)
	if err := env.topo.Auth.Exec(ctx, "CREATE OR REPLACE USER 'sl_admin'@'%' IDENTIFIED BY 'sl-admin-pw'", "GRANT ALL ON *.* TO 'sl_admin'@'%'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.topo.Auth.Exec(ctxT(t), "DROP USER IF EXISTS 'sl_admin'@'%'") })
	srv := adminSluice(t, "sl_admin")
	host, port, _ := net.SplitHostPort(srv.Addr().String())
	out := runMySQLdb(t, `
import sys, MySQLdb
c = MySQLdb.connect(host=sys.argv[1], port=int(sys.argv[2]), user=sys.argv[3], passwd=sys.argv[4])
c.cursor().execute("SELECT 1")
try:
    c.change_user("sl_admin", "sl-admin-pw")
    print("changed")
except MySQLdb.Error as e:
    print("error", e.args[0], e.args[1])
`, host, port, env.topo.Opts.AppUser, env.topo.Opts.AppPassword)
	if !strings.HasPrefix(out, "error 1045 ") || !strings.Contains(out, "admin port") {
		t.Fatalf("change_user to the admin user on the data port: %q, want error 1045 naming the admin port", out)
	}
	requireServes(t, srv.Addr().String())
}

// TestPHPMysqliChangeUser: PHP's mysqlnd answers sluice's auth switch with
// the new scramble (no auth-server connection is kept for it):
// mysqli::change_user works and resets the session as on a single server.
func TestPHPMysqliChangeUser(t *testing.T) {
	php := findPHP(t, "mysqli")
	const script = `
mysqli_report(MYSQLI_REPORT_OFF);
[$host, $port, $user, $pass, $db] = array_slice($argv, 1, 5);
$m = new mysqli($host, $user, $pass, '', (int)$port);
if ($m->connect_errno) { fwrite(STDERR, $m->connect_error); exit(1); }
$m->query("SET @u = 7");
$m->query("SET SESSION group_concat_max_len = 7");
var_dump($m->change_user($user, $pass, $db));
$r = $m->query("SELECT @u, @@session.group_concat_max_len = @@global.group_concat_max_len, DATABASE()");
echo json_encode($r->fetch_row()), "\n";
var_dump($m->change_user($user, "wrong-" . $pass, $db));
echo $m->errno, "\n";
`
	run := func(addr, user, pw string) string {
		host, port, _ := net.SplitHostPort(addr)
		out, err := exec.CommandContext(ctxT(t), php, "-r", script, "--", host, port, user, pw, "sluice_test").CombinedOutput()
		if err != nil {
			t.Fatalf("php mysqli on %s: %v\n%s", addr, err, out)
		}
		return string(out)
	}
	through := run(env.addr, env.topo.Opts.AppUser, env.topo.Opts.AppPassword)
	direct := run(env.topo.Master.Addr(), env.topo.Opts.ServiceUser, env.topo.Opts.ServicePassword)
	if through != direct || !strings.Contains(through, `[null,"1","sluice_test"]`) {
		t.Fatalf("PHP mysqli change_user through sluice:\n%s\ndirectly:\n%s", through, direct)
	}
}

// TestMySQLdbChangeUserStaticAuth: with backend = "static", sluice checks
// Connector/C's change_user answer against the login's scramble, as a
// single server does.
func TestMySQLdbChangeUserStaticAuth(t *testing.T) {
	// SELECT PASSWORD('s3cret') on MariaDB.
	const hash = "*B865CAE8F340F6CE1485A06F4492BB49718DF1EC"
	text := fmt.Sprintf(`[proxy]
listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
metrics_listen = "127.0.0.1:0"

[auth]
backend = "static"
  [[auth.user]]
  name = "svc_a"
  password_hash = %q
  grants = ["GRANT ALL PRIVILEGES ON *.* TO CURRENT_USER"]
  [[auth.user]]
  name = "svc_b"
  password_hash = %q
  grants = ["GRANT ALL PRIVILEGES ON *.* TO CURRENT_USER"]

[[cluster]]
name = "main"
user = %q
password = %q
master = %q
`, hash, hash, env.topo.Opts.ServiceUser, env.topo.Opts.ServicePassword, env.topo.Master.Addr())
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	host, port, _ := net.SplitHostPort(srv.Addr().String())
	out := runMySQLdb(t, `
import sys, MySQLdb
c = MySQLdb.connect(host=sys.argv[1], port=int(sys.argv[2]), user="svc_a", passwd="s3cret")
c.cursor().execute("SET @u = 1")
c.change_user("svc_b", "s3cret", "sluice_test")
cur = c.cursor()
cur.execute("SELECT @u, DATABASE()")
print(cur.fetchall())
try:
    c.change_user("svc_a", "wrong")
    print("changed")
except MySQLdb.Error as e:
    print("error", e.args[0])
`, host, port)
	if want := "((None, 'sluice_test'),)\nerror 1045\n"; out != want {
		t.Fatalf("MySQLdb change_user with static auth: %q, want %q", out, want)
	}
}

// TestMySQLdbChangeUserKeptConnectionKilled: when the auth server has
// closed the auth-server connection kept for a Connector/C session (here a
// KILL; wait_timeout or a restart alike), change_user gets 1251 naming
// auth.max_kept_auth_connections, not a misleading 1045 or a hang.
func TestMySQLdbChangeUserKeptConnectionKilled(t *testing.T) {
	host, port, _ := net.SplitHostPort(env.addr)
	py := findMySQLdb(t)
	cmd := exec.CommandContext(ctxT(t), py, "-c", `
import sys, MySQLdb
c = MySQLdb.connect(host=sys.argv[1], port=int(sys.argv[2]), user=sys.argv[3], passwd=sys.argv[4])
print("connected", flush=True)
sys.stdin.readline()
try:
    c.change_user(sys.argv[3], sys.argv[4])
    print("changed")
except MySQLdb.Error as e:
    print("error", e.args[0], e.args[1])
`, host, port, env.topo.Opts.AppUser, env.topo.Opts.AppPassword)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("connected\n"))
	if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "connected\n" {
		t.Fatalf("python: %q %v", buf, err)
	}
	auth := mustRoot(t, env.topo.Auth)
	var id int64
	if err := auth.QueryRowContext(ctxT(t), "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", env.topo.Opts.AppUser).Scan(&id); err != nil {
		t.Fatalf("the kept auth-server connection: %v", err)
	}
	mustExec(t, auth, fmt.Sprintf("KILL %d", id))
	waitAuthConnectionsGone(t, env.topo.Opts.AppUser)
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(stdout)
	out.Write(rest)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python: %v\n%s", err, out.String())
	}
	if got := out.String(); !strings.HasPrefix(got, "error 1251 ") || !strings.Contains(got, "auth.max_kept_auth_connections") {
		t.Fatalf("change_user after the kept connection was killed: %q, want 1251 naming auth.max_kept_auth_connections", got)
	}
}
