package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// needSandboxServers skips t when MariaDB or etcd is not installed, except
// under CI, where a missing binary fails it.
func needSandboxServers(t *testing.T) {
	t.Helper()
	_, dbErr := sandbox.FindServerBinary()
	_, etcdErr := sandbox.FindEtcdBinary()
	if err := errors.Join(dbErr, etcdErr); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("skipping: %v", err)
		}
		t.Fatalf("CI is set and a server binary is missing: %v", err)
	}
}

// freePortPairs returns n ports p, each with p+1 free too, none within a
// pair of another, taken below the system's ephemeral range (32768 and
// up) so that the ports the sandbox's own servers are given cannot land
// on them between this check and the sandbox's.
func freePortPairs(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for tries := 0; len(out) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d pairs of free ports found below 32768", n)
		}
		p := 20000 + rand.IntN(12000)
		a, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1)))
		if err != nil {
			a.Close()
			continue
		}
		held = append(held, a, b)
		out = append(out, p)
	}
	return out
}

// childServers lists the etcd and MariaDB/MySQL processes whose parent is
// this test process, zombies included, as "name(pid)".
func childServers(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm, rest := s[open+1:end], strings.Fields(s[end+1:])
		if len(rest) < 2 || rest[1] != me {
			continue
		}
		if comm == "etcd" || comm == "mariadbd" || comm == "mysqld" {
			out = append(out, fmt.Sprintf("%s(%s)", comm, e.Name()))
		}
	}
	return out
}

// showFleetRows runs SHOW FLEET on the admin port at addr and returns its
// rows by instance; an error while the sandbox is still starting is
// returned, not fatal.
func showFleetRows(ctx context.Context, addr string) (map[string]map[string]string, error) {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = "admin", sandboxAdminPassword, "tcp", addr
	c.Timeout, c.ReadTimeout = 2*time.Second, 5*time.Second
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW FLEET")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := map[string]string{}
		for i, col := range cols {
			r[col] = vals[i].String
		}
		out[r["instance"]] = r
	}
	return out, rows.Err()
}

// TestSandboxFleet: `sluice sandbox -fleet 2` starts two sluices on the
// flags' ports and the next ones, both in one fleet (SHOW FLEET on either
// admin port lists both with their data addresses); the printed
// `sluice config push` line works and both apply the pushed revision;
// cancelling its context (what Ctrl-C does) makes it exit 0 having ended
// every etcd and database process it started and removed its files.
func TestSandboxFleet(t *testing.T) {
	needSandboxServers(t)
	if left := childServers(t); len(left) > 0 {
		t.Fatalf("server processes of an earlier test still run: %v", left)
	}
	ports := freePortPairs(t, 3)
	addr := func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }
	data := []string{addr(ports[0]), addr(ports[0] + 1)}
	admins := []string{addr(ports[1]), addr(ports[1] + 1)}
	metrics := []string{addr(ports[2]), addr(ports[2] + 1)}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- runSandbox(ctx, []string{"-fleet", "2", "-replicas", "1", "-log-level", "warn",
			"-listen", data[0], "-admin-listen", admins[0], "-metrics-listen", metrics[0]}, &out, &errOut)
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-exit
		}
	}()

	// Start-up (three MariaDB servers, three etcd members, two sluices)
	// takes seconds to a minute on a busy machine.
	deadline := time.Now().Add(3 * time.Minute)
	var last error
	for i := 0; i < len(admins); {
		select {
		case code := <-exit:
			stopped = true
			t.Fatalf("sandbox exited %d before both sluices listed the fleet; stdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("SHOW FLEET on %s did not list 2 members within 3m (last: %v); stdout:\n%s", admins[i], last, out.String())
		}
		rows, err := showFleetRows(ctx, admins[i])
		switch {
		case err != nil:
			last = err
		case len(rows) != 2:
			last = fmt.Errorf("%d members: %v", len(rows), rows)
		default:
			for j, name := range []string{"sluice1", "sluice2"} {
				if r := rows[name]; r == nil || r["address"] != data[j] || r["admin_address"] != admins[j] {
					t.Fatalf("SHOW FLEET on %s: %s's row %v, want address %s and admin_address %s", admins[i], name, r, data[j], admins[j])
				}
			}
			i++
			continue
		}
		time.Sleep(100 * time.Millisecond)
	}
	printed := out.String()
	for j, name := range []string{"sluice1", "sluice2"} {
		want := fmt.Sprintf("%s  data %s  admin %s  metrics %s\n", name, data[j], admins[j], metrics[j])
		if !strings.Contains(printed, want) {
			t.Errorf("the printout lacks %q:\n%s", want, printed)
		}
	}

	running := childServers(t)
	var etcds, dbs int
	for _, p := range running {
		if strings.HasPrefix(p, "etcd(") {
			etcds++
		} else {
			dbs++
		}
	}
	if etcds != 3 || dbs != 3 {
		t.Errorf("while running: %v; want 3 etcd members and 3 database servers (master, replica, auth)", running)
	}

	// The printed push command, run as printed.
	m := regexp.MustCompile(`(?m)^  sluice config push -config (\S+) (\S+)$`).FindStringSubmatch(printed)
	if m == nil {
		t.Fatalf("no config push line in:\n%s", printed)
	}
	code, pushOut, pushErr := runCmd("config", "push", "-config", m[1], m[2])
	var rev int64
	if _, err := fmt.Sscanf(pushOut, "stored "+m[2]+" as "+sandboxFleetPrefix+"/config, revision %d\n", &rev); code != exitOK || err != nil {
		t.Fatalf("sluice config push -config %s %s: status %d, %q %q", m[1], m[2], code, pushOut, pushErr)
	}
	for time.Now().Before(deadline) {
		rows, err := showFleetRows(ctx, admins[1])
		if err == nil && rows["sluice1"]["config_revision"] == strconv.FormatInt(rev, 10) &&
			rows["sluice2"]["config_revision"] == strconv.FormatInt(rev, 10) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rows, err := showFleetRows(ctx, admins[1]); err != nil || rows["sluice1"]["config_revision"] != strconv.FormatInt(rev, 10) ||
		rows["sluice2"]["config_revision"] != strconv.FormatInt(rev, 10) {
		t.Errorf("after pushing revision %d: SHOW FLEET %v (%v)", rev, rows, err)
	}

	cancel()
	select {
	case code := <-exit:
		stopped = true
		if code != exitOK {
			t.Errorf("sandbox exited %d after its context ended; stderr:\n%s", code, errOut.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("sandbox still running 2m after its context ended")
	}
	if left := childServers(t); len(left) > 0 {
		t.Errorf("left running after the sandbox exited: %v", left)
	}
	for _, f := range m[1:] {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after the sandbox exited (%v)", f, err)
		}
	}
}

// TestSandboxFleetPorts: -fleet N gives sluice i the flags' ports plus
// i-1, refuses ports two listeners would share or past 65535 before
// starting anything, and moves the admin default out of the data ports'
// way.
func TestSandboxFleetPorts(t *testing.T) {
	f, code, ok := parseSandboxFlags([]string{"-fleet", "3"}, &bytes.Buffer{}, &bytes.Buffer{})
	if !ok || code != exitOK {
		t.Fatalf("parse: %d", code)
	}
	got, err := f.instances()
	if err != nil {
		t.Fatal(err)
	}
	want := []sandboxAddrs{
		{"sluice1", "127.0.0.1:6033", "127.0.0.1:7032", "127.0.0.1:6070"},
		{"sluice2", "127.0.0.1:6034", "127.0.0.1:7033", "127.0.0.1:6071"},
		{"sluice3", "127.0.0.1:6035", "127.0.0.1:7034", "127.0.0.1:6072"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("-fleet 3 with the defaults: %v, want %v", got, want)
	}
	f, _, _ = parseSandboxFlags([]string{"-fleet", "2", "-listen", "127.0.0.1:0", "-admin-listen", "", "-metrics-listen", "127.0.0.1:0"}, &bytes.Buffer{}, &bytes.Buffer{})
	if got, err := f.instances(); err != nil || got[1] != (sandboxAddrs{"sluice2", "127.0.0.1:0", "", "127.0.0.1:0"}) {
		t.Errorf("port 0 and no admin: %v, %v", got, err)
	}
	f, _, _ = parseSandboxFlags(nil, &bytes.Buffer{}, &bytes.Buffer{})
	if got, err := f.instances(); err != nil || len(got) != 1 || got[0].admin != "127.0.0.1:6032" {
		t.Errorf("without -fleet: %v, %v; want one sluice, admin on 6032", got, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-fleet", "2", "-admin-listen", "127.0.0.1:6032"}, "port 6033 would be both sluice1's -listen and sluice2's -admin-listen"},
		{[]string{"-fleet", "2", "-listen", "127.0.0.1:65535"}, "-listen 127.0.0.1:65535: port 65535 + 1 is past 65535"},
		{[]string{"-fleet", "-1"}, "-fleet must be >= 0"},
	} {
		code, out, errOut := runCLI(append([]string{"sandbox"}, tc.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("sandbox %v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
