package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// repoRoot is the repository's top directory, seen from this package.
const repoRoot = "../.."

// The package's files; none may be left after dpkg --purge.
var packageFiles = []string{
	"/usr/bin/sluice",
	"/usr/bin/sluice-agent",
	"/etc/sluice/sluice.toml",
	"/etc/sluice",
	"/lib/systemd/system/sluice.service",
	"/lib/systemd/system/sluice-agent.service",
	"/usr/share/doc/sluice",
}

// TestDebPackage is the Debian package end to end on this machine: make
// package builds it; dpkg -i installs it; systemd-analyze verify accepts
// both installed units and rates their hardening OK; the installed sluice check-config accepts the
// installed /etc/sluice/sluice.toml with its env secrets set; the installed
// sluice serves a sandbox topology (READY=1 over NOTIFY_SOCKET, then
// queries through it with go-sql-driver/mysql); dpkg --purge removes every
// file of the package and the state systemd would have made. The package is
// purged when the test ends however it ends. It needs root and dpkg, and
// refuses to run where a sluice package is installed already.
func TestDebPackage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: installing a package needs root")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "dpkg-query"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s not found (not a Debian system)", tool)
		}
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatal("systemd-analyze not found: scripts/deps.sh test installs it (Debian package systemd)")
	}
	if s := packageStatus(t); s != "" && s != "not-installed" {
		t.Fatalf("a sluice package is installed already (status %q); purge it first (dpkg --purge sluice)", s)
	}

	deb := buildPackage(t)
	if out, err := exec.Command("dpkg-deb", "-f", deb, "Version").Output(); err != nil {
		t.Fatalf("dpkg-deb -f: %v", err)
	} else if v := strings.TrimSpace(string(out)); !strings.Contains(filepath.Base(deb), "_"+v+"_") {
		t.Errorf("package version %q is not the one in its file name %s", v, filepath.Base(deb))
	} else {
		mustRun(t, "dpkg", "--validate-version", v)
	}

	// Simulated state systemd makes when sluice.service first starts with
	// DynamicUser and StateDirectory: purge must remove it too.
	stateMade := simulateSystemdState(t)
	t.Cleanup(func() { purge(t, stateMade) })
	mustRun(t, "dpkg", "-i", deb)
	if s := packageStatus(t); s != "installed" {
		t.Fatalf("after dpkg -i the package status is %q", s)
	}
	for _, f := range packageFiles {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("installed package lacks %s: %v", f, err)
		}
	}
	if out := mustRun(t, "dpkg-query", "-W", "-f=${Conffiles}", "sluice"); !strings.Contains(out, "/etc/sluice/sluice.toml") {
		t.Errorf("/etc/sluice/sluice.toml is not a conffile: %q", out)
	}

	// Offline verification: systemd-analyze needs no running systemd, but
	// it checks that ExecStart's binary exists, hence after dpkg -i.
	if out := mustRun(t, "systemd-analyze", "verify",
		"/lib/systemd/system/sluice.service", "/lib/systemd/system/sluice-agent.service"); strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify warns:\n%s", out)
	}
	// The hardening holds: systemd's own exposure score stays in its
	// "OK" band (at most 3.0 of 10; both units score 1.8 today).
	for _, unit := range []string{"sluice.service", "sluice-agent.service"} {
		cmd := exec.Command("systemd-analyze", "security", "--offline=true", "--threshold=30", "/lib/systemd/system/"+unit)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze security %s: exposure over 3.0 (%v):\n%s", unit, err, out)
		}
	}

	commit := strings.TrimSpace(mustRunIn(t, repoRoot, "git", "rev-parse", "--short=12", "HEAD"))
	if out := mustRun(t, "/usr/bin/sluice", "version"); !strings.Contains(out, "commit "+commit) || strings.Contains(out, "sluice dev ") {
		t.Errorf("installed sluice version %q lacks the stamped version or commit %s", out, commit)
	}
	if out := mustRun(t, "/usr/bin/sluice-agent", "-version"); !strings.Contains(out, "commit "+commit) {
		t.Errorf("installed sluice-agent version %q lacks commit %s", out, commit)
	}

	check := exec.Command("/usr/bin/sluice", "check-config", "/etc/sluice/sluice.toml")
	check.Env = append(os.Environ(), "SLUICE_ADMIN_PASSWORD=admin-secret", "SLUICE_BACKEND_PASSWORD=backend-secret")
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("installed check-config of the installed file: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "config /etc/sluice/sluice.toml") {
		t.Errorf("check-config printed no topology:\n%s", out)
	}

	serveSandbox(t)

	purge(t, stateMade)
	if s := packageStatus(t); s != "" && s != "not-installed" {
		t.Errorf("after dpkg --purge the package status is %q", s)
	}
	left := append([]string{}, packageFiles...)
	if stateMade {
		left = append(left, "/var/lib/sluice", "/var/lib/private/sluice")
	}
	for _, f := range left {
		if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after dpkg --purge (%v)", f, err)
		}
	}
}

// buildPackage runs make package into a temporary directory and returns
// the .deb it built.
func buildPackage(t *testing.T) string {
	t.Helper()
	dist := t.TempDir()
	out := mustRunIn(t, repoRoot, "make", "--no-print-directory", "package", "DIST="+dist)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	deb := lines[len(lines)-1]
	if !regexp.MustCompile(`^sluice_[0-9][A-Za-z0-9.+~]*_amd64\.deb$`).MatchString(filepath.Base(deb)) {
		t.Fatalf("make package printed %q last, want dist/sluice_<version>_amd64.deb", deb)
	}
	if filepath.Dir(deb) != dist {
		t.Fatalf("package %s is not in DIST %s", deb, dist)
	}
	return deb
}

// simulateSystemdState creates what systemd makes for StateDirectory=sluice
// with DynamicUser=yes (the directory under /var/lib/private and the
// /var/lib/sluice link to it), with a state file in it, and an
// /etc/sluice/sluice.env an admin would write. It reports false, and
// creates nothing, when any of them exists already (they are not the
// test's to remove then).
func simulateSystemdState(t *testing.T) bool {
	t.Helper()
	for _, p := range []string{"/var/lib/sluice", "/var/lib/private/sluice", "/etc/sluice"} {
		if _, err := os.Lstat(p); err == nil {
			t.Logf("%s exists: not simulating systemd's state directory", p)
			return false
		}
	}
	if _, err := os.Stat("/var/lib/private"); errors.Is(err, os.ErrNotExist) {
		// systemd would keep it; the test leaves the machine as it found it.
		t.Cleanup(func() { os.Remove("/var/lib/private") })
	}
	if err := os.MkdirAll("/var/lib/private/sluice", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/var/lib/private/sluice/failover-main.json", []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("private/sluice", "/var/lib/sluice"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("/etc/sluice", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("/etc/sluice/sluice.env", []byte("SLUICE_ADMIN_PASSWORD=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return true
}

// purge removes the package if it is there, and what simulateSystemdState
// made if the package's postrm did not. It runs at most once.
var purgeOnce sync.Once

func purge(t *testing.T, stateMade bool) {
	purgeOnce.Do(func() {
		if s := packageStatus(t); s != "" && s != "not-installed" {
			if out, err := exec.Command("dpkg", "--purge", "sluice").CombinedOutput(); err != nil {
				t.Errorf("dpkg --purge sluice: %v\n%s", err, out)
			}
		}
		if stateMade {
			// Leftovers only when postrm failed; the test reports them.
			t.Cleanup(func() {
				os.Remove("/var/lib/sluice")
				os.RemoveAll("/var/lib/private/sluice")
				os.Remove("/etc/sluice/sluice.env")
				os.Remove("/etc/sluice")
			})
		}
	})
}

// packageStatus is dpkg's status of the sluice package ("installed",
// "config-files", "not-installed", ...), "" when dpkg does not know it.
func packageStatus(t *testing.T) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", "sluice").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// serveSandbox starts a sandbox topology (master, two replicas, auth
// server) on free ports, runs the installed /usr/bin/sluice in front of it
// as systemd would (NOTIFY_SOCKET), and writes and reads through it.
func serveSandbox(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: 2, Logf: t.Logf})
	if err != nil {
		t.Fatalf("starting the sandbox topology: %v", err)
	}
	defer topo.Stop()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "sluice.toml")
	conf := topo.SluiceConfig("127.0.0.1:0", `admin_listen = ""`, `metrics_listen = ""`,
		fmt.Sprintf("state_dir = %q", dir))
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()

	cmd := exec.Command("/usr/bin/sluice", "run", "-config", cfg)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var logBuf lockedBuffer
	cmd.Stderr = &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()

	notify.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 4096)
	n, err := notify.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "READY=1\n") {
		t.Fatalf("no READY=1 from the installed sluice (%q, %v); its log:\n%s", buf[:n], err, logBuf.String())
	}
	m := regexp.MustCompile(`STATUS=serving on (\S+)`).FindStringSubmatch(string(buf[:n]))
	if m == nil {
		t.Fatalf("READY=1 without the address: %q", buf[:n])
	}
	addr := m[1]

	dsn := mysql.NewConfig()
	dsn.User, dsn.Passwd = topo.Opts.AppUser, topo.Opts.AppPassword
	dsn.Net, dsn.Addr, dsn.DBName = "tcp", addr, sandbox.TestDatabase
	dsn.Timeout = 10 * time.Second
	db, err := sql.Open("mysql", dsn.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		"CREATE TABLE deb_check (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO deb_check VALUES (1, 'through sluice')",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s through the installed sluice: %v\nits log:\n%s", q, err, logBuf.String())
		}
	}
	// The read may go to a replica: poll until it has the row.
	var v string
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = db.QueryRowContext(ctx, "SELECT v FROM deb_check WHERE id = 1").Scan(&v)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || v != "through sluice" {
		t.Fatalf("reading back through the installed sluice: %q, %v", v, err)
	}
	// The row is on the master itself, not only in sluice's answer.
	root, err := topo.Master.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	var onMaster string
	if err := root.QueryRowContext(ctx, "SELECT v FROM "+sandbox.TestDatabase+".deb_check WHERE id = 1").Scan(&onMaster); err != nil || onMaster != v {
		t.Errorf("the master has %q (%v), sluice answered %q", onMaster, err, v)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("the installed sluice exited with %v after SIGTERM; its log:\n%s", waitErr, logBuf.String())
		}
	case <-time.After(time.Minute):
		t.Errorf("the installed sluice did not stop within a minute of SIGTERM")
	}
}

// lockedBuffer is a bytes.Buffer a process writes to while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	return mustRunIn(t, "", name, args...)
}

// mustRunIn runs a command in dir and returns its stdout and stderr
// together; a failure ends the test with that output.
func mustRunIn(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
