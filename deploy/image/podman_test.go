package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/sandbox"
)

// podman runs Debian's podman with a storage of its own under a
// temporary directory, so the test neither sees nor leaves images and
// containers in the machine's storage, and its cleanup is removing that
// directory.
type podman struct {
	t      *testing.T
	global []string
	// cgroupParent is the cgroup (in every hierarchy) the test's
	// containers and their conmon go under, removed at the end.
	cgroupParent string
}

// newPodman prepares podman for t. It fails the test when podman is not
// installed: `make test` installs it (scripts/deps.sh test).
func newPodman(t *testing.T) *podman {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is not installed (scripts/deps.sh test installs Debian's podman and runc)")
	}
	dir := t.TempDir()
	p := &podman{t: t, cgroupParent: "/sluice-image-test-" + strconv.Itoa(os.Getpid())}
	p.global = []string{
		"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"), "--tmpdir", filepath.Join(dir, "tmp"),
		// vfs needs no kernel overlay support and mounts nothing.
		"--storage-driver", "vfs",
		// No systemd runs here to hand out cgroups or take events.
		"--cgroup-manager", "cgroupfs", "--events-backend", "file",
	}
	// crun refuses this machine's hybrid cgroup layout (v1 controllers
	// with a v2 hierarchy beside them); runc takes it.
	if _, err := exec.LookPath("runc"); err == nil {
		p.global = append(p.global, "--runtime", "runc")
	}
	// podman keeps a blob cache under /var/lib/containers whatever its
	// --root: when the test is the first to use podman here, it removes it.
	const shared = "/var/lib/containers"
	_, err := os.Stat(shared)
	ownShared := errors.Is(err, os.ErrNotExist)
	t.Cleanup(func() {
		p.removeCgroups()
		unmountUnder(t, dir)
		if ownShared {
			os.RemoveAll(shared)
		}
	})
	return p
}

// run runs podman with args and returns its standard output; standard
// error is part of the error.
func (p *podman) run(args ...string) (string, error) {
	cmd := exec.Command("podman", append(slices.Clone(p.global), args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// logs returns the container's output, both streams (sluice logs to
// standard error), its last tail lines ("-1" for every line).
func (p *podman) logs(container, tail string) string {
	cmd := exec.Command("podman", append(slices.Clone(p.global), "logs", "--tail", tail, container)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(podman logs: %v)\n%s", err, out)
	}
	return string(out)
}

func (p *podman) must(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// removeCgroups removes the cgroup parent the test's containers ran
// under from every hierarchy, once they are gone.
func (p *podman) removeCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*" + p.cgroupParent)
	if own, err := os.Stat("/sys/fs/cgroup" + p.cgroupParent); err == nil && own.IsDir() {
		roots = append(roots, "/sys/fs/cgroup"+p.cgroupParent)
	}
	for _, root := range roots {
		var dirs []string
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		// Children first: a cgroup with a child cannot be removed.
		for _, d := range slices.Backward(dirs) {
			if err := syscall.Rmdir(d); err != nil {
				p.t.Errorf("cleanup: removing cgroup %s: %v", d, err)
			}
		}
	}
}

// unmountUnder detaches whatever a failed podman left mounted under dir,
// so that removing dir can succeed.
func unmountUnder(t *testing.T, dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			points = append(points, fields[4])
		}
	}
	for _, m := range slices.Backward(points) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Errorf("cleanup: unmounting %s: %v", m, err)
		}
	}
}

// freeAddrs returns n loopback addresses no one listens on now.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// TestImageServesSandbox loads the image into podman and runs it, as built,
// in front of a sandbox topology: the client port serves reads and writes
// with the configuration mounted on the image's path and a secret from the
// environment; the admin port reports the stamped version and performs a
// switchover, whose state file the non-root user writes to the image's
// state directory; SIGTERM (podman stop) ends it with status 0.
func TestImageServesSandbox(t *testing.T) {
	pm := newPodman(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	s := testSpec(t)
	img, err := Build(s)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "sluice.tar")
	ref, err := WriteArchive(archive, img, s.Repository, s.Version)
	if err != nil {
		t.Fatal(err)
	}
	loaded := pm.must("load", "-q", "-i", archive)
	if !strings.Contains(loaded, ref) {
		t.Fatalf("podman load said %q, want the image %s", loaded, ref)
	}
	t.Run("ConfigAsPodmanSeesIt", func(t *testing.T) { checkInspect(t, pm, ref) })

	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: 2, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := topo.Stop(); err != nil {
			t.Errorf("stopping the sandbox: %v", err)
		}
	})
	container := "sluice-image-test-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sluice's last log lines in the container:\n%s", pm.logs(container, "40"))
		}
		if _, err := pm.run("rm", "-f", "-t", "0", container); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if _, err := pm.run("rmi", "-f", ref); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	const adminPassword = "image-admin-secret"
	listen, adminListen := runSluice(t, ctx, pm, topo, ref, container, adminPassword)

	o := topo.Opts
	app := openDB(t, listen, o.AppUser, o.AppPassword, sandbox.TestDatabase)
	t.Run("ReadsAndWrites", func(t *testing.T) { readsAndWrites(t, ctx, app, topo) })

	admin := openDB(t, adminListen, "admin", adminPassword, "")
	t.Run("AdminVersion", func(t *testing.T) {
		cols, row := queryRow(t, ctx, admin, "SHOW VERSION")
		if !slices.Contains(row, testVersion) {
			t.Errorf("SHOW VERSION: %q = %q, want the stamped version %q", cols, row, testVersion)
		}
	})
	t.Run("RunsAsTheImageUser", func(t *testing.T) {
		pid := pm.must("inspect", "--format", "{{.State.Pid}}", container)
		status, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			t.Fatal(err)
		}
		var uids []string // real, effective, saved, filesystem
		for l := range strings.Lines(string(status)) {
			if ids, ok := strings.CutPrefix(l, "Uid:"); ok {
				uids = strings.Fields(ids)
			}
		}
		want := strconv.Itoa(UID)
		if len(uids) != 4 || slices.ContainsFunc(uids, func(u string) bool { return u != want }) {
			t.Errorf("sluice in the container (pid %s) runs with uids %q, want %s", pid, uids, want)
		}
	})
	t.Run("WritesItsStateDir", func(t *testing.T) {
		target := topo.Replicas[0].Addr()
		if _, err := admin.ExecContext(ctx, "SWITCHOVER CLUSTER main TO '"+target+"'"); err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		pm.must("cp", container+":"+health.FailoverStatePath(StateDir, "main"), out)
		b, err := os.ReadFile(filepath.Join(out, filepath.Base(health.FailoverStatePath(StateDir, "main"))))
		if err != nil {
			t.Fatal(err)
		}
		var st health.FailoverState
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("the state file: %v\n%s", err, b)
		}
		if st.Master != target {
			t.Errorf("the state file records master %q, want %q:\n%s", st.Master, target, b)
		}
	})

	app.Close()
	admin.Close()
	pm.must("stop", "-t", "30", container)
	if code := pm.must("inspect", "--format", "{{.State.ExitCode}}", container); code != "0" {
		t.Errorf("sluice exited with status %s after SIGTERM, want 0", code)
	}
}

// checkInspect compares what podman reports of the loaded image with what
// the builder meant.
func checkInspect(t *testing.T, pm *podman, ref string) {
	var got []struct {
		Config       inspectConfig
		Architecture string
		Os           string
	}
	if err := json.Unmarshal([]byte(pm.must("image", "inspect", ref)), &got); err != nil || len(got) != 1 {
		t.Fatalf("podman image inspect %s: %v (%d images)", ref, err, len(got))
	}
	c := got[0].Config
	if want := []string{BinaryPath, "run", "-config", ConfigPath}; !slices.Equal(c.Entrypoint, want) {
		t.Errorf("Entrypoint %q, want %q", c.Entrypoint, want)
	}
	if c.User != "65532:65532" {
		t.Errorf("User %q, want 65532:65532", c.User)
	}
	var ports []string
	for p := range c.ExposedPorts {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	if want := []string{"6032/tcp", "6033/tcp", "6070/tcp"}; !slices.Equal(ports, want) {
		t.Errorf("ExposedPorts %q, want %q", ports, want)
	}
	if v := c.Labels["org.opencontainers.image.version"]; v != testVersion {
		t.Errorf("version label %q, want %q", v, testVersion)
	}
	if v := c.Labels["org.opencontainers.image.revision"]; v != testRevision {
		t.Errorf("revision label %q, want %q", v, testRevision)
	}
	if got[0].Os != "linux" || got[0].Architecture != "amd64" {
		t.Errorf("platform %s/%s", got[0].Os, got[0].Architecture)
	}
}

// inspectConfig is the part of podman's image inspect Config the test reads.
type inspectConfig struct {
	User         string
	Entrypoint   []string
	ExposedPorts map[string]struct{}
	Labels       map[string]string
}

func openDB(t *testing.T, addr, user, password, db string) *sql.DB {
	t.Helper()
	c := mysql.NewConfig()
	c.Net, c.Addr, c.User, c.Passwd, c.DBName = "tcp", addr, user, password, db
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	conn, err := mysql.NewConnector(c)
	if err != nil {
		t.Fatal(err)
	}
	d := sql.OpenDB(conn)
	t.Cleanup(func() { d.Close() })
	return d
}

// runSluice runs the image as container in front of topo, with a
// configuration mounted on the image's path and the admin password in the
// environment, and returns the client and admin addresses once sluice
// answers there. The ports are picked free and bound by sluice a moment
// later; when another process took one in between, sluice exits at once
// and runSluice tries again with new ones.
func runSluice(t *testing.T, ctx context.Context, pm *podman, topo *sandbox.Topology, ref, container, adminPassword string) (string, string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addrs := freeAddrs(t, 3)
		listen, adminListen, metricsListen := addrs[0], addrs[1], addrs[2]
		cfg := topo.SluiceConfig(listen,
			fmt.Sprintf("admin_listen = %q", adminListen),
			fmt.Sprintf("metrics_listen = %q", metricsListen),
			fmt.Sprintf("state_dir = %q", StateDir),
		) + "\n[admin]\npassword_env = \"SLUICE_ADMIN_PASSWORD\"\n"
		cfgFile := filepath.Join(t.TempDir(), "sluice.toml")
		// Readable by the image's user, which is not the file's owner.
		if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		pm.must("run", "-d", "--name", container,
			// The sandbox is on the host's loopback.
			"--network", "host",
			// A file podman logs reads; there is no journald here.
			"--log-driver", "k8s-file",
			"--cgroup-parent", pm.cgroupParent,
			"--ulimit", "nofile="+limit(t, syscall.RLIMIT_NOFILE),
			"--ulimit", "nproc="+limit(t, rlimitNproc),
			"-e", "SLUICE_ADMIN_PASSWORD="+adminPassword,
			"-v", cfgFile+":"+ConfigPath+":ro",
			ref)
		o := topo.Opts
		err := waitServing(ctx, pm, container, listen, o.AppUser, o.AppPassword)
		if err == nil {
			return listen, adminListen
		}
		logs := pm.logs(container, "-1")
		if attempt < 3 && strings.Contains(logs, "address already in use") {
			t.Logf("attempt %d: a port was taken before sluice bound it; trying new ones", attempt)
			pm.must("rm", "-f", "-t", "0", container)
			continue
		}
		t.Fatalf("%v; its log:\n%s", err, logs)
	}
}

// rlimitNproc is Linux's RLIMIT_NPROC, which package syscall does not name.
const rlimitNproc = 6

// limit is a soft:hard value for podman's --ulimit: 4096, or this
// process's hard limit when lower. podman's defaults for root are above
// what a process without CAP_SYS_RESOURCE (this machine's root) may set,
// and sluice under test needs few descriptors and threads.
func limit(t *testing.T, resource int) string {
	t.Helper()
	var l syscall.Rlimit
	if err := syscall.Getrlimit(resource, &l); err != nil {
		t.Fatal(err)
	}
	n := min(l.Max, 4096)
	return fmt.Sprintf("%d:%d", n, n)
}

// waitServing polls until sluice in the container answers a query at
// addr, and fails when the container stops or 60 s pass first.
func waitServing(ctx context.Context, pm *podman, container, addr, user, password string) error {
	c := mysql.NewConfig()
	c.Net, c.Addr, c.User, c.Passwd = "tcp", addr, user, password
	c.Timeout = 5 * time.Second
	conn, err := mysql.NewConnector(c)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return nil
		}
		if running, _ := pm.run("inspect", "--format", "{{.State.Running}}", container); running != "true" {
			return fmt.Errorf("the container stopped before sluice served (%v)", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sluice in the container did not answer within 60s: %w", err)
		}
		time.Sleep(100 * time.Millisecond) // a poll interval, not a wait for a state
	}
}

// readsAndWrites writes through the container's sluice and reads the row
// back; a read outside a transaction goes to a replica.
func readsAndWrites(t *testing.T, ctx context.Context, db *sql.DB, topo *sandbox.Topology) {
	for _, q := range []string{
		"CREATE TABLE image_test (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO image_test VALUES (1, 'from the image')",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := topo.WaitReplicated(ctx); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := db.QueryRowContext(ctx, "SELECT v FROM image_test WHERE id = 1").Scan(&v); err != nil || v != "from the image" {
		t.Errorf("reading the row back: %q, %v", v, err)
	}
	var id uint32
	if err := db.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
		t.Fatal(err)
	}
	var replicas []uint32
	for _, r := range topo.Replicas {
		replicas = append(replicas, r.ServerID)
	}
	if !slices.Contains(replicas, id) {
		t.Errorf("a read went to server_id %d, want a replica %v", id, replicas)
	}
}

// queryRow runs q and returns its column names and first row as strings.
func queryRow(t *testing.T, ctx context.Context, db *sql.DB, q string) ([]string, []string) {
	t.Helper()
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	if !rows.Next() {
		t.Fatalf("%s: no row (%v)", q, rows.Err())
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = v.String
	}
	return cols, out
}
