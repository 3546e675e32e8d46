package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/tests/internal/sluicebin"
)

// TestIdleClientsMemory: 10,000 idle authenticated client connections cost
// a sluice process at most 100 MB of resident memory (10 KB each). sluice
// runs as a process of its own, built from cmd/sluice, so its VmRSS can be
// read from /proc; the clients log in through the shared topology's auth
// server with the raw protocol (a lean connection each, so the test process
// stays small) and then sit idle.
func TestIdleClientsMemory(t *testing.T) {
	const (
		clients   = 10000
		workers   = 64
		maxGrowth = 100 << 20
		samples   = 20
	)
	testStart := time.Now()
	// Both this process and sluice hold one descriptor per client, plus
	// what else they have open (the shared topology's connections here,
	// pools and the auth leg there).
	raiseNoFile(t, clients+1024)

	bin := sluicebin.Build(t)
	buildTime := time.Since(testStart)
	cfg := env.topo.SluiceConfig("127.0.0.1:0",
		`admin_listen = ""`, `metrics_listen = ""`,
		// The default is exactly 10,000; leave room for the warm-up and
		// readiness logins still being torn down.
		fmt.Sprintf("max_client_connections = %d", clients+100))
	p := startSluiceProcess(t, bin, cfg)
	// sluice serves with the runtime's small goroutine stacks, which it
	// re-executes itself to get (cmd/sluice/stacks.go): an idle session's
	// goroutine then holds 2 KiB of stack, not 4.
	if environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid)); err != nil {
		t.Fatalf("reading sluice's environment: %v", err)
	} else if !bytes.Contains(environ, []byte("adaptivestackstart=0")) {
		t.Errorf("sluice runs without GODEBUG adaptivestackstart=0: its idle sessions keep bigger stacks")
	}

	// Warm-up: a few sessions run statements on the replicas and on the
	// master, so the pools, the plan cache and the runtime are set up
	// before the baseline is taken.
	for range 4 {
		c, err := idleLogin(p.addr)
		if err != nil {
			t.Fatalf("warm-up login: %v", err)
		}
		for range 5 {
			rawIdleValue(t, c, "SELECT 1", "1")
			rawIdleValue(t, c, "/* sluice:master */ SELECT 1", "1")
			rawIdleValue(t, c, "SELECT @@server_id", "")
		}
		c.Close()
	}
	p.waitFDs(t, func(n int) bool { return n < 200 }, "warm-up sessions to end")
	sluiceFDs := countFDs(t, strconv.Itoa(p.pid))
	before := steadyRSS(t, p.pid)
	fdsBefore := countFDs(t, "self")

	conns := make([]*protocol.Conn, clients)
	t.Cleanup(func() { // after a failure; normally they are closed below
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	var next, failed atomic.Int64
	var errMu sync.Mutex
	var firstErrs []string
	var wg sync.WaitGroup
	loginStart := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= clients {
					return
				}
				c, err := idleLogin(p.addr)
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					if len(firstErrs) < 5 {
						firstErrs = append(firstErrs, fmt.Sprintf("client %d: %v", i, err))
					}
					errMu.Unlock()
					continue
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	loginTime := time.Since(loginStart)
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d logins failed; first: %s", n, clients, strings.Join(firstErrs, "; "))
	}
	rate := float64(clients) / loginTime.Seconds()

	// Every session is still there: sluice holds a socket for each.
	if n := countFDs(t, strconv.Itoa(p.pid)); n < clients {
		t.Fatalf("sluice has %d descriptors open with %d clients logged in", n, clients)
	}
	after := steadyRSS(t, p.pid)
	growth := after - before
	perConn := float64(growth) / clients
	threads := procStatusKB(t, p.pid, "Threads:")
	hwm := procStatusKB(t, p.pid, "VmHWM:") << 10

	// A sample of the idle sessions still answers.
	for k := range samples {
		rawIdleValue(t, conns[k*(clients/samples)+k%7], "SELECT 1", "1")
	}

	t.Logf("%d idle clients: sluice VmRSS %.1f MB before, %.1f MB after (peak %.1f MB, %d threads): +%.1f MB, %.0f bytes (%.2f KB) per connection",
		clients, mb(before), mb(after), mb(hwm), threads, mb(growth), perConn, perConn/1024)
	t.Logf("logins: %d in %v with %d workers, %.0f logins/s", clients, loginTime.Round(time.Millisecond), workers, rate)
	if growth > maxGrowth {
		t.Errorf("sluice VmRSS grew by %.1f MB for %d idle clients (%.0f bytes each), more than %d MB",
			mb(growth), clients, perConn, maxGrowth>>20)
	}

	for i, c := range conns {
		c.Close()
		conns[i] = nil
	}
	if n := countFDs(t, "self"); n > fdsBefore+8 {
		t.Errorf("test process has %d descriptors open after closing the clients, %d before logging them in", n, fdsBefore)
	}
	// sluice ends the sessions and closes their sockets.
	p.waitFDs(t, func(n int) bool { return n <= sluiceFDs+16 }, "sessions to end after the clients closed")
	t.Logf("test took %v (build %v)", time.Since(testStart).Round(time.Millisecond), buildTime.Round(time.Millisecond))
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// raiseNoFile raises this process's soft RLIMIT_NOFILE to its hard limit
// (children, sluice among them, inherit it) and fails when that is below
// need.
func raiseNoFile(t *testing.T, need uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max < need {
		t.Fatalf("RLIMIT_NOFILE hard limit is %d; this test needs %d open files per process (raise it with ulimit -Hn or limits.conf)", lim.Max, need)
	}
	if lim.Cur < lim.Max {
		old := lim.Cur
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatalf("raising RLIMIT_NOFILE from %d to %d: %v", old, lim.Max, err)
		}
	}
}

// sluiceProcess is a sluice started by startSluiceProcess.
type sluiceProcess struct {
	pid  int
	addr string
	log  *procLog
}

// startSluiceProcess writes cfg to a file and runs bin with it until the
// test ends; it returns once a client can log in. At the end the process
// is sent SIGTERM and must exit with status 0.
func startSluiceProcess(t *testing.T, bin, cfg string) *sluiceProcess {
	t.Helper()
	log := &procLog{ready: make(chan string, 1)}
	proc := sluicebin.Start(t, bin, cfg, log)
	proc.StopAtCleanup(t, 15*time.Second, log.tail)
	exited := proc.Exited
	p := &sluiceProcess{pid: proc.Cmd.Process.Pid, log: log}
	select {
	case p.addr = <-log.ready:
	case err := <-exited:
		exited <- err // for the cleanup
		t.Fatalf("sluice exited before serving (%v):\n%s", err, log.tail())
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice did not report its listen address within 30s:\n%s", log.tail())
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := idleLogin(p.addr)
		if err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("no login through sluice at %s within 15s: %v\n%s", p.addr, err, log.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFDs polls sluice's open descriptors until ok accepts their number.
func (p *sluiceProcess) waitFDs(t *testing.T, ok func(int) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := countFDs(t, strconv.Itoa(p.pid))
		if ok(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: sluice still has %d descriptors open after 15s", what, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procLog takes sluice's JSON log lines: it reports the listen address of
// the "sluice serving" line on ready and keeps the last lines for failure
// messages.
type procLog struct {
	mu      sync.Mutex
	partial []byte
	last    []string
	ready   chan string
	served  bool
}

func (l *procLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		if len(l.last) == 20 {
			l.last = l.last[1:]
		}
		l.last = append(l.last, line)
		if !l.served {
			var m struct {
				Msg    string `json:"msg"`
				Listen string `json:"listen"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "sluice serving" && m.Listen != "" {
				l.served = true
				select { // never block sluice's output
				case l.ready <- m.Listen:
				default:
				}
			}
		}
	}
	l.partial = append([]byte(nil), l.partial...)
	return len(b), nil
}

func (l *procLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.last, "\n") + string(l.partial)
}

// idleLogin logs in to addr as the app user on a lean connection (a 1 KiB
// read buffer, no write buffer while idle) without deadlines left behind.
func idleLogin(addr string) (*protocol.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	c := protocol.NewLeanConn(nc)
	if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{
		User: env.topo.Opts.AppUser, Password: env.topo.Opts.AppPassword,
		Capabilities: protocol.BackendCapabilities,
	}); err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	c.Idle()
	return c, nil
}

// rawIdleValue runs q on an idle lean connection and requires one value,
// equal to want unless want is "".
func rawIdleValue(t *testing.T, c *protocol.Conn, q, want string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	v := rawValue(t, c, q)
	_ = c.SetDeadline(time.Time{})
	c.Idle()
	if want != "" && v != want {
		t.Fatalf("%s: got %q, want %q", q, v, want)
	}
}

// procStatusKB reads a numeric field of /proc/<pid>/status (kB for the Vm
// fields).
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			v, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status %s: %v", pid, field, err)
			}
			return v
		}
	}
	t.Fatalf("/proc/%d/status has no %s line (err %v)", pid, field, sc.Err())
	return 0
}

// steadyRSS returns pid's VmRSS in bytes once two samples 200 ms apart
// differ by less than 1 MB (or after 10s, the last sample).
func steadyRSS(t *testing.T, pid int) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	prev := procStatusKB(t, pid, "VmRSS:") << 10
	for {
		time.Sleep(200 * time.Millisecond)
		cur := procStatusKB(t, pid, "VmRSS:") << 10
		if d := cur - prev; (d < 1<<20 && d > -1<<20) || time.Now().After(deadline) {
			return cur
		}
		prev = cur
	}
}

// countFDs counts the open descriptors of /proc/<pid> ("self" for this
// process).
func countFDs(t *testing.T, pid string) int {
	t.Helper()
	d, err := os.Open("/proc/" + pid + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return len(names)
}
