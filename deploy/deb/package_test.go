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
// queries through it with go-sql-driver/mysql); sluice.service is enabled
// as an admin would; dpkg --purge removes every file of the package, the
// enabling link and the state systemd would have made. The package is
// purged when the test ends however it ends. It needs root and dpkg, and
// fails without them unless SLUICE_SKIP_DEB=1. A package this builder made
// that an earlier, killed run left installed is purged first; any other
// sluice package stops the test.
func TestDebPackage(t *testing.T) {
	skip := os.Getenv("SLUICE_SKIP_DEB") == "1"
	if os.Geteuid() != 0 {
		if skip {
			t.Skip("SLUICE_SKIP_DEB=1 and not root: not installing the package")
		}
		t.Fatal("installing the package needs root (SLUICE_SKIP_DEB=1 skips this test)")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "dpkg-query"} {
		if _, err := exec.LookPath(tool); err != nil {
			if skip {
				t.Skipf("SLUICE_SKIP_DEB=1 and %s not found: not installing the package", tool)
			}
			t.Fatalf("%s not found, not a Debian system (SLUICE_SKIP_DEB=1 skips this test)", tool)
		}
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatal("systemd-analyze not found: scripts/deps.sh test installs it (Debian package systemd)")
	}
	purgeLeftovers(t)

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
	simulateSystemdState(t)
	t.Cleanup(func() { purge(t) })
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

	// The admin enables sluice.service; purge must take the link away, and
	// deb-systemd-helper's records of it and of the mask remove set.
	mustRun(t, "systemctl", "--root=/", "enable", "sluice.service")
	if _, err := os.Lstat(wantsLink); err != nil {
		t.Errorf("systemctl enable made no %s: %v", wantsLink, err)
	}

	purge(t)
	if s := packageStatus(t); s != "" && s != "not-installed" {
		t.Errorf("after dpkg --purge the package status is %q", s)
	}
	left := append([]string{}, packageFiles...)
	left = append(left, simulatedPaths...)
	left = append(left, unitLeftovers...)
	if m, _ := filepath.Glob("/etc/systemd/system/*.wants/sluice*.service"); len(m) > 0 {
		t.Errorf("enabling links still there after dpkg --purge: %v", m)
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

// simulatedPaths are what simulateSystemdState makes: the state directory
// systemd makes for StateDirectory=sluice with DynamicUser=yes (under
// /var/lib/private, and the /var/lib/sluice link to it) and the
// /etc/sluice an admin writes sluice.env into.
var simulatedPaths = []string{"/var/lib/sluice", "/var/lib/private/sluice", "/etc/sluice"}

// wantsLink is the link systemctl enable sluice.service makes.
const wantsLink = "/etc/systemd/system/multi-user.target.wants/sluice.service"

// unitLeftovers are what enabling, masking and deb-systemd-helper's
// records of them leave; none may be left after dpkg --purge.
var unitLeftovers = []string{
	wantsLink,
	"/etc/systemd/system/sluice.service",
	"/etc/systemd/system/sluice-agent.service",
	"/var/lib/systemd/deb-systemd-helper-enabled/sluice.service.dsh-also",
	"/var/lib/systemd/deb-systemd-helper-enabled/sluice-agent.service.dsh-also",
	"/var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/sluice.service",
	"/var/lib/systemd/deb-systemd-helper-masked/sluice.service",
	"/var/lib/systemd/deb-systemd-helper-masked/sluice-agent.service",
}

// purgeLeftovers readies the machine for the test. A sluice package whose
// Maintainer is the one this builder writes is what an earlier run left
// when it was killed (a go test -timeout panic skips t.Cleanup): it is
// purged, and logged. Any other sluice package ends the test. With no
// sluice package installed, what simulateSystemdState and the enabling of
// sluice.service made in such a run is removed (under /etc/systemd only
// links).
func purgeLeftovers(t *testing.T) {
	t.Helper()
	if s := packageStatus(t); s != "" && s != "not-installed" {
		m, err := exec.Command("dpkg-query", "-W", "-f=${Maintainer}", "sluice").Output()
		if err != nil || strings.TrimSpace(string(m)) != maintainer {
			t.Fatalf("a sluice package not built by deploy/deb is installed (status %q, maintainer %q, %v); purge it first (dpkg --purge sluice)", s, m, err)
		}
		t.Logf("purging the sluice package an earlier run left installed (status %q)", s)
		mustRun(t, "dpkg", "--purge", "sluice")
		if s := packageStatus(t); s != "" && s != "not-installed" {
			t.Fatalf("after purging the earlier run's package its status is %q", s)
		}
	}
	for _, p := range append(append([]string{}, simulatedPaths...), unitLeftovers...) {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if strings.HasPrefix(p, "/etc/systemd/") && fi.Mode()&os.ModeSymlink == 0 {
			// Not a link enabling or masking the unit: the admin's own unit file.
			t.Fatalf("%s is a file, not a link an earlier run left; move it away first", p)
		}
		t.Logf("removing %s, left by an earlier run", p)
		if err := os.RemoveAll(p); err != nil {
			t.Fatalf("removing %s: %v", p, err)
		}
	}
}

// simulateSystemdState creates simulatedPaths as systemd and an admin
// would, with a state file in the state directory and an
// /etc/sluice/sluice.env. Not being able to is an error of the test.
func simulateSystemdState(t *testing.T) {
	t.Helper()
	for _, p := range simulatedPaths {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s exists: cannot simulate systemd's state directory", p)
		}
	}
	if _, err := os.Stat("/var/lib/private"); errors.Is(err, os.ErrNotExist) {
		// systemd would keep it; the test leaves the machine as it found it.
		t.Cleanup(func() { os.Remove("/var/lib/private") })
	}
	// Leftovers only when postrm failed; the test reports them.
	t.Cleanup(func() {
		os.Remove("/var/lib/sluice")
		os.RemoveAll("/var/lib/private/sluice")
		os.Remove("/etc/sluice/sluice.env")
		os.Remove("/etc/sluice")
	})
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
}

// purge removes the package if it is there. It runs at most once.
var purgeOnce sync.Once

func purge(t *testing.T) {
	purgeOnce.Do(func() {
		if s := packageStatus(t); s != "" && s != "not-installed" {
			if out, err := exec.Command("dpkg", "--purge", "sluice").CombinedOutput(); err != nil {
				t.Errorf("dpkg --purge sluice: %v\n%s", err, out)
			}
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
