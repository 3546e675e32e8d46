package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

// The login storm: BENCH_STORM_CLIENTS (10,000) go-sql-driver clients log
// in to a fresh sluice all at once, as the application user through the
// auth server, and stay idle; sluice's RSS is read before, at its peak and
// once it is steady after the storm (issue 24's bar: steady growth ≤ 10 KB
// per client). tests/idle_memory_test.go measures the same growth with
// paced logins on lean raw connections; this is the unpaced case.
const (
	stormBarKB = 10
	// stormSettle bounds the wait for sluice's RSS to be steady after the
	// storm; steady is less than 1% change over stormWindow.
	stormSettle = 60 * time.Second
	stormWindow = 3 * time.Second
	// stormPings is how many of the idle clients run a ping afterwards.
	stormPings = 20
)

// stormOutcome is what the login storm measured. RSS figures are KiB.
type stormOutcome struct {
	clients, loggedIn int
	firstErrs         []string
	loginWall         time.Duration // from the start to the last login's end
	beforeKB          int64         // steady, after a warm-up, before the storm
	peakKB            int64         // sampled every 50 ms from the storm to steady
	hwmKB             int64         // VmHWM: the peak the kernel saw
	steadyKB          int64
	steady            bool          // the 1% criterion was met within stormSettle
	settled           time.Duration // from the last login to steady
	fds               int           // sluice's open descriptors with the clients idle
	pinged, pingsOK   int
	elapsed           time.Duration
}

func (e *benchEnv) runStorm() (*stormOutcome, error) {
	begin := time.Now()
	ctx, logf, n := e.ctx, e.logf, e.st.stormClients
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(n)+512 {
		return nil, fmt.Errorf("the login storm holds %d connections, but this process may open only %d files (raise ulimit -n, or lower BENCH_STORM_CLIENTS)", n, lim.Cur)
	}
	sl, err := e.startSluiceTarget("storm", "",
		[]string{fmt.Sprintf("max_client_connections = %d", n+100)},
		[]string{`consistency = "strong"`, fmt.Sprintf("pool_size = %d", scalePool)})
	if err != nil {
		return nil, err
	}
	defer e.stopProc(sl.proc)
	pid := strconv.Itoa(sl.proc.pid())
	if err := ping(ctx, sl, 15*time.Second); err != nil {
		return nil, fmt.Errorf("storm sluice (%s) does not answer: %w", sl.addr, err)
	}
	connector, err := stormConnector(sl)
	if err != nil {
		return nil, err
	}

	// Warm-up: a few sessions run statements, so that the pool, the plan
	// cache and the runtime are set up before the baseline is taken.
	fds0 := countFDs(pid)
	if err := stormWarmUp(ctx, connector); err != nil {
		return nil, fmt.Errorf("storm warm-up: %w", err)
	}
	waitFDs(ctx, pid, fds0+16)
	o := &stormOutcome{clients: n}
	o.beforeKB, _, _ = steadyRSS(ctx, pid, stormSettle)
	logf("login storm: %d clients at once; sluice (pid %s) RSS %.1f MB before", n, pid, float64(o.beforeKB)/1024)

	sampler := startRSSSampler(pid, 50*time.Millisecond)
	conns := make([]driver.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	// The driver logs every broken login to stderr as well; the storm
	// counts them itself.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	o.loginWall, o.loggedIn, o.firstErrs = storm(ctx, connector, conns)
	logf("login storm: %d of %d logged in within %v", o.loggedIn, n, o.loginWall.Round(time.Millisecond))
	o.steadyKB, o.steady, o.settled = steadyRSS(ctx, pid, stormSettle)
	o.peakKB = sampler.stop()
	o.hwmKB = statusKB(pid, "VmHWM:")
	o.fds = countFDs(pid)

	// A sample of the idle clients still answers.
	for k := range min(stormPings, n) {
		c := conns[k*(n/min(stormPings, n))]
		if c == nil {
			continue
		}
		o.pinged++
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := c.(driver.Pinger).Ping(pctx); err == nil {
			o.pingsOK++
		}
		cancel()
	}
	o.elapsed = time.Since(begin)
	logf("login storm: RSS steady %.1f MB after %v (steady: %v), peak %.1f MB; %s",
		float64(o.steadyKB)/1024, o.settled.Round(time.Millisecond), o.steady, float64(o.peakKB)/1024, o.verdict())
	return o, nil
}

var reClientPort = regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+):\d+->`)

// stormConnector logs in as t's user with long enough bounds for a
// connect and a login that wait in a queue of thousands.
func stormConnector(t target) (driver.Connector, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = t.user, t.pass, "tcp", t.addr, sandbox.TestDatabase
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 2*time.Minute, 2*time.Minute, 2*time.Minute
	return mysql.NewConnector(cfg)
}

func stormWarmUp(ctx context.Context, connector driver.Connector) error {
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(4)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				var v string
				for _, q := range []string{"SELECT 1", "SELECT @@server_id", "SELECT NOW()"} {
					if err := db.QueryRowContext(ctx, q).Scan(&v); err != nil {
						errs <- fmt.Errorf("%s: %w", q, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// storm logs len(conns) clients in at once (each in a goroutine of its
// own, released together) and keeps them in conns. It returns the time
// from the release to the last login's end, how many logged in and the
// first few errors.
func storm(ctx context.Context, connector driver.Connector, conns []driver.Conn) (time.Duration, int, []string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var (
		gate   = make(chan struct{})
		wg     sync.WaitGroup
		ok     atomic.Int64
		mu     sync.Mutex
		errs   []string
		counts = map[string]int{}
	)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			c, err := connector.Connect(ctx)
			if err != nil {
				mu.Lock()
				// Client ports make each socket error unique; the
				// report counts them as one.
				msg := reClientPort.ReplaceAllString(err.Error(), "${1}:*->")
				if counts[msg]++; counts[msg] == 1 && len(errs) < 5 {
					errs = append(errs, msg)
				}
				mu.Unlock()
				return
			}
			conns[i] = c
			ok.Add(1)
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	wall := time.Since(start)
	for i, m := range errs {
		errs[i] = fmt.Sprintf("%s (%d clients)", m, counts[m])
	}
	return wall, int(ok.Load()), errs
}

// steadyRSS polls pid's VmRSS every 500 ms until it has changed by less
// than 1% over the last stormWindow, or bound has passed. It returns the
// last sample, whether it was steady, and how long it waited.
func steadyRSS(ctx context.Context, pid string, bound time.Duration) (int64, bool, time.Duration) {
	const every = 500 * time.Millisecond
	start := time.Now()
	keep := int(stormWindow/every) + 1
	var window []int64
	for {
		window = append(window, rssKB(pid))
		if len(window) > keep {
			window = window[1:]
		}
		last := window[len(window)-1]
		if len(window) == keep {
			lo, hi := window[0], window[0]
			for _, v := range window {
				lo, hi = min(lo, v), max(hi, v)
			}
			if hi > 0 && float64(hi-lo) < 0.01*float64(hi) {
				return last, true, time.Since(start)
			}
		}
		if time.Since(start) > bound || ctx.Err() != nil {
			return last, false, time.Since(start)
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

// countFDs counts the open descriptors of /proc/<pid>; -1 when unreadable.
func countFDs(pid string) int {
	d, err := os.Open("/proc/" + pid + "/fd")
	if err != nil {
		return -1
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return -1
	}
	return len(names)
}

// waitFDs waits (at most 15 s) until pid has at most n descriptors open:
// the warm-up's sessions have ended.
func waitFDs(ctx context.Context, pid string, n int) {
	deadline := time.Now().Add(15 * time.Second)
	for countFDs(pid) > n && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// statusKB reads a kB field of /proc/<pid>/status (VmHWM:, say); 0 when
// unreadable.
func statusKB(pid, field string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// perClientKB is the growth from before to kb, per client logged in.
func (o *stormOutcome) perClientKB(kb int64) float64 {
	if o.loggedIn == 0 {
		return 0
	}
	return float64(kb-o.beforeKB) / float64(o.loggedIn)
}

func (o *stormOutcome) verdict() string {
	per := o.perClientKB(o.steadyKB)
	met := o.loggedIn == o.clients && per <= stormBarKB
	s := fmt.Sprintf("steady growth %.2f KB per client, %s", per, metWord(met))
	if o.loggedIn < o.clients {
		s += fmt.Sprintf(" (%d logins failed)", o.clients-o.loggedIn)
	}
	return s
}

func (o *stormOutcome) render() string {
	var b strings.Builder
	mb := func(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }
	fmt.Fprintf(&b, "%s go-sql-driver clients released at once against a fresh sluice (consistency = \"strong\", pool_size = %d), "+
		"each logging in as the application user through the auth server and then staying idle; took %v.\n\n",
		thousands(o.clients), scalePool, o.elapsed.Round(time.Second))
	rate := float64(o.loggedIn) / o.loginWall.Seconds()
	fmt.Fprintf(&b, "- logins: %d of %d in %v (%.0f/s)\n", o.loggedIn, o.clients, o.loginWall.Round(time.Millisecond), rate)
	for _, e := range o.firstErrs {
		b.WriteString("  - " + e + "\n")
	}
	steady := "steady (< 1% change over 3 s)"
	if !o.steady {
		steady = fmt.Sprintf("NOT steady within %v; last sample", stormSettle)
	}
	fmt.Fprintf(&b, "- sluice VmRSS: %s before (steady, after a warm-up); peak %s (+%.2f KB per client; VmHWM %s); %s %v after the last login: %s (+%.2f KB per client)\n",
		mb(o.beforeKB), mb(o.peakKB), o.perClientKB(o.peakKB), mb(o.hwmKB), steady, o.settled.Round(time.Millisecond), mb(o.steadyKB), o.perClientKB(o.steadyKB))
	fmt.Fprintf(&b, "- sluice's open descriptors with the clients idle: %d; %d of %d sampled idle clients answered a ping\n", o.fds, o.pingsOK, o.pinged)
	fmt.Fprintf(&b, "\nAgainst issue 24's bar (%s clients logging in at once: steady RSS growth ≤ %d KB per client): %s; peak +%.2f KB per client.\n",
		thousands(o.clients), stormBarKB, o.verdict(), o.perClientKB(o.peakKB))
	return b.String()
}
