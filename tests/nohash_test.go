package tests

import (
	"bytes"
	"context"
	"crypto/sha1"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/tests/internal/sluicebin"
)

// TestNoPasswordHashInOutput: nothing sluice writes holds a password hash
// (issue 23). Accounts with passwords, grants at every level, roles
// and resource limits (every one of them makes SHOW GRANTS print
// IDENTIFIED BY PASSWORD '*…') are created on the auth server; a sluice of
// its own (the real binary, log_level = "debug", the slow-query log on for
// every statement with log_sql = true, grants_ttl short, [auth]
// service_user set so grants are read again as the service account) serves
// logins, SHOW GRANTS, SET ROLE, refused logins, COM_CHANGE_USER, refused
// and failing statements, a GRANT and a REVOKE reaching open sessions, the
// admin port's RELOAD CONFIG, FLUSH PRIVILEGES and SHOW commands, and a
// /metrics scrape; at the end it gets SIGQUIT with GOTRACEBACK=crash, so
// its stderr holds every goroutine's stack and the kernel writes its memory
// to a core file. Then every byte sluice wrote (its stdout and stderr,
// every byte it sent on the data port, the admin port and the metrics
// port) is searched for each account's hash in every form: '*HEX', HEX
// upper and lower case, the raw 20 bytes and their base64, the same for
// SHA1(password) (which logs in as the account), and the password itself
// where it is distinctive. The core file is searched too and what it holds
// is logged (see hashInCore).
func TestNoPasswordHashInOutput(t *testing.T) {
	ctx := ctxT(t)
	accts := nohashAccounts(t)
	needles := nohashNeedles(t, ctx, accts)
	adminPW := "nh-admin-Vb71-secret"
	needles = append(needles, needle{what: "the admin password", b: []byte(adminPW)})

	taps := &nohashTaps{data: &tap{}, admin: &tap{}, metrics: &tap{}, control: &tap{}}
	mysql.RegisterDialContext("nohash-data", taps.data.dial)
	mysql.RegisterDialContext("nohash-admin", taps.admin.dial)
	mysql.RegisterDialContext("nohash-control", taps.control.dial)

	// The control: the same grep finds the hash in what the auth server
	// itself answers to SHOW GRANTS, so a hash that reached sluice's output
	// would be found.
	for _, a := range accts {
		if a.login {
			showGrantsDirect(t, a)
		}
	}
	for _, a := range accts {
		if a.login && !hasNeedle(taps.control.bytes(), a.hash) {
			t.Fatalf("control: SHOW GRANTS of %s on the auth server does not print its hash %s; the test would prove nothing", a.name(), a.hash)
		}
	}

	p := startHashSluice(t, adminPW)
	sessions := nohashTraffic(t, ctx, p, taps, accts)
	nohashAdmin(t, p, adminPW, sessions)
	nohashMetrics(t, p, taps)
	nohashBackoff(t, ctx, p.addr)
	out, core := p.quit(t)

	// What was captured is what the test claims it captured.
	for _, want := range []string{`"msg":"slow query"`, `"sql":"SHOW GRANTS"`, `"msg":"sluice serving"`, "goroutine ", "SIGQUIT"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("sluice's output has no %q: the run did not log what the test needs", want)
		}
	}
	if !bytes.Contains(taps.admin.bytes(), []byte("auth: mysql, auth server")) {
		t.Errorf("the admin port's answers hold no SHOW CONFIG")
	}
	if !bytes.Contains(taps.metrics.bytes(), []byte("sluice_")) {
		t.Errorf("the metrics scrape holds no sluice_ metric")
	}

	for _, art := range []struct {
		name string
		b    []byte
	}{
		{"sluice's stdout and stderr (logs, slow-query log, SIGQUIT goroutine dump)", out},
		{"the data port's answers (handshakes, SHOW GRANTS, errors, COM_CHANGE_USER)", taps.data.bytes()},
		{"the admin port's answers (SHOW CONFIG, SESSIONS, EVENTS, …)", taps.admin.bytes()},
		{"the metrics port's answers", taps.metrics.bytes()},
	} {
		for _, f := range findNeedles(art.b, needles) {
			t.Errorf("%s holds %s", art.name, f)
		}
	}
	t.Logf("searched %d forms of %d accounts' hashes (and their passwords) in %d bytes of output, %d of data-port, %d of admin-port and %d of metrics answers",
		len(needles), len(accts)+3, len(out), taps.data.len(), taps.admin.len(), taps.metrics.len())
	hashInCore(t, core, needles)
}

// hashInCore searches sluice's core file, its memory at SIGQUIT, for the
// needles and logs what it holds: the grant lines sluice reads hold the
// hash until Sanitize cuts it, and the memory they were read into is
// garbage that is not cleared, so a core file is not among what sluice
// writes and the test does not fail on it.
func hashInCore(t *testing.T, core string, needles []needle) {
	if core == "" {
		t.Logf("no core file (kernel.core_pattern %q): sluice's memory was not searched", corePattern())
		return
	}
	b, err := os.ReadFile(core)
	if err != nil {
		t.Fatal(err)
	}
	found := findNeedles(b, needles)
	t.Logf("core file, %d bytes: %d of the %d forms searched for found in sluice's memory (not counting a hash found only inside another)", len(b), len(found), len(needles))
	for _, f := range found {
		t.Logf("core file holds %s", f)
	}
}

func corePattern() string {
	b, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	return strings.TrimSpace(string(b))
}

// nohashTaps record every byte sluice sends on each of its ports, and what
// the auth server sends the control.
type nohashTaps struct{ data, admin, metrics, control *tap }

// tap records every byte read from the connections it dials.
type tap struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (tp *tap) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return tapConn{c, tp}, nil
}

func (tp *tap) bytes() []byte {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]byte(nil), tp.buf.Bytes()...)
}

func (tp *tap) len() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.buf.Len()
}

type tapConn struct {
	net.Conn
	tp *tap
}

func (c tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.tp.mu.Lock()
	c.tp.buf.Write(b[:n])
	c.tp.mu.Unlock()
	return n, err
}

// needle is one form of a secret: what it is, and its bytes.
type needle struct {
	what string
	b    []byte
}

// nohashAccount is an account on the auth server; login: the test logs in
// with it (the others are there to be found nowhere).
type nohashAccount struct {
	user, host, password string
	login                bool
	// setup are statements run as root on the auth server after CREATE
	// USER; %[1]s is the account.
	setup []string
	// hash is the account's authentication_string on its server.
	hash string
}

func (a *nohashAccount) name() string { return fmt.Sprintf("'%s'@'%s'", a.user, a.host) }

// nohashAccounts creates the test's schema (on the master and the auth
// server, for table-, column- and routine-level grants), roles and
// accounts, and drops them at the end of the test.
func nohashAccounts(t *testing.T) []*nohashAccount {
	t.Helper()
	schema := []string{
		"DROP DATABASE IF EXISTS nohash", "CREATE DATABASE nohash",
		"CREATE TABLE nohash.t (id INT PRIMARY KEY, secret VARCHAR(20))",
		"INSERT INTO nohash.t VALUES (1, 'one'), (2, 'two')",
		"CREATE PROCEDURE nohash.p() SELECT COUNT(*) FROM nohash.t",
	}
	root := mustRoot(t, env.topo.Auth)
	master := mustRoot(t, env.topo.Master)
	for _, q := range schema {
		mustExec(t, master, q)
		mustExec(t, root, q)
	}
	for _, r := range env.topo.Replicas {
		rdb := mustRoot(t, r)
		eventually(t, ctxT(t), "nohash.t on "+r.Addr(), func() error {
			var n int
			return rdb.QueryRowContext(ctxT(t), "SELECT COUNT(*) FROM nohash.t").Scan(&n)
		})
	}
	roles := []string{"nh_reader", "nh_writer"}
	for _, r := range roles {
		mustExec(t, root, "DROP ROLE IF EXISTS "+r)
		mustExec(t, root, "CREATE ROLE "+r)
	}
	mustExec(t, root, "GRANT SELECT ON nohash.* TO nh_reader")
	mustExec(t, root, "GRANT INSERT, UPDATE ON nohash.* TO nh_writer")
	accts := []*nohashAccount{
		{user: "nh_none", host: "%", password: "nh-none-Kq3-pw", login: true},
		{user: "nh_db", host: "%", password: "nh-db-Zr8-pw", login: true,
			setup: []string{"GRANT SELECT, INSERT, UPDATE, DELETE ON nohash.* TO %[1]s"}},
		{user: "nh_col", host: "%", password: "nh-col-Pw2-pw", login: true,
			setup: []string{"GRANT SELECT (id) ON nohash.t TO %[1]s", "GRANT INSERT ON nohash.t TO %[1]s"}},
		{user: "nh_role", host: "%", password: "nh-role-Jm5-pw", login: true,
			setup: []string{"GRANT nh_reader TO %[1]s", "GRANT nh_writer TO %[1]s", "SET DEFAULT ROLE nh_reader FOR %[1]s"}},
		{user: "nh_admin", host: "%", password: "nh-admin-Ty4-pw", login: true,
			setup: []string{"GRANT PROCESS ON *.* TO %[1]s", "GRANT ALL ON nohash.* TO %[1]s WITH GRANT OPTION",
				"ALTER USER %[1]s WITH MAX_QUERIES_PER_HOUR 100000 MAX_USER_CONNECTIONS 50"}},
		{user: "nh_proc", host: "%", password: "nh-proc-Hd9-pw", login: true,
			setup: []string{"GRANT EXECUTE ON PROCEDURE nohash.p TO %[1]s"}},
		// sluice reaches the auth server from 127.0.0.1: that account
		// matches, and the '%' one's password is refused.
		{user: "nh_host", host: "127.0.0.1", password: "nh-host-Lc6-pw", login: true,
			setup: []string{"GRANT SELECT ON nohash.t TO %[1]s"}},
		{user: "nh_host", host: "%", password: "nh-hostany-Xe1-pw",
			setup: []string{"GRANT ALL ON nohash.* TO %[1]s"}},
	}
	for _, a := range accts {
		mustExec(t, root, "DROP USER IF EXISTS "+a.name())
		mustExec(t, root, "CREATE USER "+a.name()+" IDENTIFIED BY '"+a.password+"'")
		for _, q := range a.setup {
			mustExec(t, root, fmt.Sprintf(q, a.name()))
		}
	}
	t.Cleanup(func() {
		for _, a := range accts {
			_, _ = root.Exec("DROP USER IF EXISTS " + a.name())
		}
		for _, r := range roles {
			_, _ = root.Exec("DROP ROLE IF EXISTS " + r)
		}
		_, _ = root.Exec("DROP DATABASE IF EXISTS nohash")
		_, _ = master.Exec("DROP DATABASE IF EXISTS nohash")
	})
	return accts
}

// nohashNeedles reads every account's hash from its server (the test's
// accounts, the application's and sluice's service account on the auth
// server, the clusters' service account on the master), checks it against
// PASSWORD() and SHA1(SHA1(password)), and returns every form of it.
func nohashNeedles(t *testing.T, ctx context.Context, accts []*nohashAccount) []needle {
	t.Helper()
	o := env.topo.Opts
	type known struct {
		srv      *sandbox.Server
		user     string
		password string
		plain    bool // the password is distinctive enough to search for
	}
	var all []known
	for _, a := range accts {
		all = append(all, known{env.topo.Auth, a.user + "@" + a.host, a.password, true})
	}
	all = append(all, known{env.topo.Auth, o.AppUser + "@%", o.AppPassword, false},
		known{env.topo.Auth, o.AuthServiceUser + "@%", o.AuthServicePassword, false},
		known{env.topo.Master, o.ServiceUser + "@%", o.ServicePassword, false})
	var out []needle
	for i, k := range all {
		user, host, _ := strings.Cut(k.user, "@")
		db := mustRoot(t, k.srv)
		var stored, computed string
		if err := db.QueryRowContext(ctx, "SELECT authentication_string FROM mysql.user WHERE User = ? AND Host = ?", user, host).Scan(&stored); err != nil {
			t.Fatalf("hash of %s: %v", k.user, err)
		}
		if err := db.QueryRowContext(ctx, "SELECT PASSWORD(?)", k.password).Scan(&computed); err != nil {
			t.Fatal(err)
		}
		stage1 := sha1.Sum([]byte(k.password))
		stage2 := sha1.Sum(stage1[:])
		if stored != computed || stored != "*"+strings.ToUpper(hex.EncodeToString(stage2[:])) {
			t.Fatalf("%s: stored hash %q, PASSWORD() %q, SHA1(SHA1()) %X: the test's idea of the hash is wrong", k.user, stored, computed, stage2)
		}
		if i < len(accts) {
			accts[i].hash = stored
		}
		who := k.user
		forms := []needle{
			{"the hash of " + who, []byte(stored)},
			{"the hash of " + who + " without '*'", []byte(stored[1:])},
			{"the hash of " + who + " in lower case", []byte(strings.ToLower(stored[1:]))},
			{"the raw hash of " + who, stage2[:]},
			{"the base64 hash of " + who, []byte(base64.StdEncoding.EncodeToString(stage2[:]))},
			{"SHA1(password) of " + who, []byte(hex.EncodeToString(stage1[:]))},
			{"SHA1(password) of " + who + " in upper case", []byte(strings.ToUpper(hex.EncodeToString(stage1[:])))},
			{"the raw SHA1(password) of " + who, stage1[:]},
		}
		if k.plain {
			forms = append(forms, needle{"the password of " + who, []byte(k.password)})
		}
		out = append(out, forms...)
	}
	return out
}

// hasNeedle reports whether b holds s.
func hasNeedle(b []byte, s string) bool { return s != "" && bytes.Contains(b, []byte(s)) }

// findNeedles describes each needle found in b: how often, and what
// surrounds its first occurrence (the needle itself masked). A needle
// found only inside another one found before it (the hash without its
// '*') is not repeated.
func findNeedles(b []byte, needles []needle) []string {
	var out []string
	type span struct{ lo, hi int }
	var seen []span
	for _, n := range needles {
		i := bytes.Index(b, n.b)
		if i < 0 {
			continue
		}
		inside := false
		for _, s := range seen {
			inside = inside || s.lo <= i && i+len(n.b) <= s.hi
		}
		seen = append(seen, span{i, i + len(n.b)})
		if inside {
			continue
		}
		lo, hi := max(0, i-60), min(len(b), i+len(n.b)+60)
		ctx := string(b[lo:i]) + "<" + n.what + ">" + string(b[i+len(n.b):hi])
		out = append(out, fmt.Sprintf("%s (%d times), first at byte %d: %q", n.what, bytes.Count(b, n.b), i, ctx))
	}
	return out
}

// showGrantsDirect runs SHOW GRANTS as a on the auth server, through the
// control tap.
func showGrantsDirect(t *testing.T, a *nohashAccount) {
	t.Helper()
	d := openTapped(t, "nohash-control", env.topo.Auth.Addr(), a.user, a.password, "")
	drain(t, d, "SHOW GRANTS", true)
	d.Close()
}

// openTapped opens a go-sql-driver pool to addr over the tapped network.
func openTapped(t *testing.T, network, addr, user, password, db string) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", dsn(addr, user, password, db, func(c *mysql.Config) { c.Net = network }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// drain runs q and reads every row; must: an error fails the test.
// It returns the error.
func drain(t *testing.T, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, text string, must bool) error {
	t.Helper()
	rows, err := q.QueryContext(ctxT(t), text)
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
	}
	if err != nil && must {
		t.Fatalf("%s: %v", text, err)
	}
	return err
}

// hashSluice is the sluice process of TestNoPasswordHashInOutput.
type hashSluice struct {
	cmd              *exec.Cmd
	dir              string
	out              *os.File
	exited           chan error
	addr, admin, met string
}

// startHashSluice runs the sluice binary with debug logging, the slow-query
// log for every statement with its text, a short grants_ttl and the admin
// and metrics ports, in a directory of its own (where the kernel writes
// its core file: ulimit -c unlimited, GOTRACEBACK=crash). Its stdout and
// stderr go to one file.
func startHashSluice(t *testing.T, adminPW string) *hashSluice {
	t.Helper()
	bin := sluicebin.Build(t)
	p := &hashSluice{dir: t.TempDir(), admin: freePort(t), met: freePort(t), exited: make(chan error, 1)}
	cfg := env.topo.SluiceConfigWith(sandbox.SluiceOptions{
		Listen: "127.0.0.1:0",
		ProxyKeys: []string{`log_level = "debug"`, `slow_query_threshold = "1ns"`, `log_sql = true`,
			fmt.Sprintf("admin_listen = %q", p.admin), fmt.Sprintf("metrics_listen = %q", p.met)},
		AuthKeys:   []string{`grants_ttl = "300ms"`},
		HealthKeys: []string{`interval = "200ms"`},
	}) + fmt.Sprintf("\n[admin]\nuser = \"admin\"\npassword = %q\n", adminPW)
	path := filepath.Join(p.dir, "sluice.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(p.dir, "sluice.out"))
	if err != nil {
		t.Fatal(err)
	}
	p.out = out
	t.Cleanup(func() { out.Close() })
	log := &procLog{ready: make(chan string, 1)}
	// A core file only where the kernel writes it into the working
	// directory: never one handed to a system crash handler.
	limit := "0"
	if pat := corePattern(); pat != "" && !strings.ContainsAny(pat, "|/") {
		limit = "unlimited"
	}
	p.cmd = exec.Command("/bin/sh", "-c", `ulimit -c "$2" 2>/dev/null; exec "$0" run -config "$1"`, bin, path, limit)
	p.cmd.Dir = p.dir
	p.cmd.Env = append(os.Environ(), "GOTRACEBACK=crash")
	p.cmd.Stdout = io.MultiWriter(out, log)
	p.cmd.Stderr = p.cmd.Stdout
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		err := p.cmd.Wait()
		close(done)
		p.exited <- err
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = p.cmd.Process.Kill()
			<-done
		}
	})
	select {
	case p.addr = <-log.ready:
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("sluice exited before serving (%v):\n%s", err, log.tail())
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice did not report its listen address within 30s:\n%s", log.tail())
	}
	return p
}

// quit sends sluice SIGQUIT and waits for it to die; it returns all it
// wrote and the path of its core file ("" when the kernel wrote none).
func (p *hashSluice) quit(t *testing.T) ([]byte, string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		t.Logf("sluice after SIGQUIT: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("sluice still running 60s after SIGQUIT")
	}
	out, err := os.ReadFile(p.out.Name())
	if err != nil {
		t.Fatal(err)
	}
	cores, _ := filepath.Glob(filepath.Join(p.dir, "core*"))
	if len(cores) == 0 {
		return out, ""
	}
	return out, cores[0]
}
