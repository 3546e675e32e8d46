// Command bench measures sluice against direct MariaDB and against HAProxy in
// TCP mode, on the same machine and in the same run (`make bench`, see
// bench/README.md).
//
// It starts a sandbox topology (master, 2 replicas, auth server), two sluices
// in front of it (one sending every statement to the master, as HAProxy
// does, one splitting reads to the replicas) and HAProxy forwarding to the
// master, each proxy a child process, and a second, identical HAProxy as an
// A/A control. It prepares the sysbench tables once on the master, then
// runs sysbench oltp_point_select, oltp_read_only and oltp_read_write at 1,
// 16 and 64 threads with --db-ps-mode auto and disable against the five
// targets, rotating which target goes first from one cell to the next. It
// prints one markdown table (qps, p95, ratios, the proxies' CPU per 1,000
// statements, sluice's RSS), a small one-thread latency table (p50 and the
// latency each proxy adds over direct) and a tally of the cells against
// issue 24's CPU bars and issue 4's bars, for sluice and for the control.
//
// A full run then has two more phases (scale.go, storm.go): the scale
// cells, point_select and read_only at 1,000 and 2,000 threads against
// direct, HAProxy, the control and a sluice with pool_size = 64, with the
// backends' peak Threads_connected; and the login storm, 10,000 clients
// logging in to a fresh sluice at once, with its RSS before, at the peak
// and once steady.
//
// Environment:
//
//	BENCH_TIME=10    seconds per sysbench run
//	BENCH_QUICK=1    only oltp_point_select at 16 threads, both ps modes
//	BENCH_SLUICE_THREADS=0  sluice's [proxy] threads (GOMAXPROCS); 0 = sluice chooses
//	BENCH_EVENT_LOOP=1      both sluices with [proxy] event_loop = true
//	BENCH_ROUNDS=1   runs of each cell per target; the report takes the median
//	BENCH_CONTROL=0  leave out the A/A control (a second HAProxy, "HAProxy-b")
//	BENCH_CPUPROFILE=FILE  the "sluice" target writes a CPU profile of the run
//	                 there (what cmd/sluice/default.pgo is made from)
//	SAVE=1           also write the report to bench/results/<YYYY-MM-DD>.md
//	                 (<YYYY-MM-DD>-quick.md in quick mode, -scale.md,
//	                 -storm.md, -scale-storm.md for those phases alone)
//	BENCH_SCALE=1    only the scale cells (0: leave them out of a full run)
//	BENCH_STORM=1    only the login storm (0: leave it out of a full run)
//	BENCH_RULES=1    only the rules and cache cells (0: leave them out of a full run)
//	BENCH_SCALE_THREADS=1000,2000  the scale cells' thread counts
//	BENCH_SCALE_ROUNDS=1    runs of each scale cell per target
//	BENCH_STORM_CLIENTS=10000  clients of the login storm
//
// Everything it starts (servers, HAProxy, sluice, temp dirs) is stopped and
// removed on exit, on failure and on Ctrl-C.
package main

import (
	"bufio"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/sandbox"
)

const (
	tables    = 4
	tableSize = 10000
	replicas  = 2
)

func main() {
	os.Exit(run())
}

// settings come from the environment.
type settings struct {
	seconds int
	quick   bool
	save    bool
	// threads is sluice's [proxy] threads; 0, sluice's default, lets it
	// choose: one processor until it needs one per CPU.
	threads int
	// cpuProfile, when set, is where the "sluice" target writes a CPU
	// profile of the whole run (sluice run -cpuprofile): the input of
	// cmd/sluice/default.pgo.
	cpuProfile string
	// rounds is how many times each cell runs against each target; the
	// report gives each target's median run.
	rounds int
	// eventLoop runs both sluices with [proxy] event_loop = true.
	eventLoop bool
	// control adds the A/A control target: a second HAProxy, measured
	// like the first (BENCH_CONTROL=0 leaves it out).
	control bool
	// classic, scale and storm are the phases that run: the classic
	// matrix, the scale cells and the login storm. BENCH_SCALE=1 and
	// BENCH_STORM=1 run only those; a full run has all three and
	// BENCH_SCALE=0 or BENCH_STORM=0 leaves one out; a quick run only
	// the classic phase.
	classic, scale, storm, rules bool
	// scaleThreads are the scale cells' sysbench thread counts,
	// scaleRounds how many times each of them runs per target.
	scaleThreads []int
	scaleRounds  int
	// stormClients is how many clients the login storm opens at once.
	stormClients int
}

// fileSuffix names the report of a partial run under bench/results.
func (s settings) fileSuffix() string {
	switch {
	case s.quick:
		return "-quick"
	case !s.classic && s.rules && !s.scale && !s.storm:
		return "-rules"
	case !s.classic && s.scale && s.storm:
		return "-scale-storm"
	case !s.classic && s.scale:
		return "-scale"
	case !s.classic:
		return "-storm"
	}
	return ""
}

func readSettings() (settings, error) {
	s := settings{seconds: 10, threads: 0, rounds: 1}
	var err error
	if s.control, err = switchEnv("BENCH_CONTROL", true); err != nil {
		return s, err
	}
	if s.eventLoop, err = switchEnv("BENCH_EVENT_LOOP", false); err != nil {
		return s, err
	}
	if v := strings.TrimSpace(os.Getenv("BENCH_ROUNDS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 15 {
			return s, fmt.Errorf("BENCH_ROUNDS=%q: want 1 to 15", v)
		}
		s.rounds = n
	}
	if v := strings.TrimSpace(os.Getenv("BENCH_SLUICE_THREADS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1024 {
			return s, fmt.Errorf("BENCH_SLUICE_THREADS=%q: want 0 (sluice chooses) to 1024", v)
		}
		s.threads = n
	}
	if v := strings.TrimSpace(os.Getenv("BENCH_TIME")); v != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(v, "s"))
		if err != nil || n < 1 || n > 3600 {
			return s, fmt.Errorf("BENCH_TIME=%q: want whole seconds between 1 and 3600", v)
		}
		s.seconds = n
	}
	if v := strings.TrimSpace(os.Getenv("BENCH_CPUPROFILE")); v != "" {
		abs, err := filepath.Abs(v)
		if err != nil {
			return s, fmt.Errorf("BENCH_CPUPROFILE=%q: %w", v, err)
		}
		s.cpuProfile = abs
	}
	s.quick = truthy(os.Getenv("BENCH_QUICK"))
	s.save = truthy(os.Getenv("SAVE"))
	return s, readPhases(&s)
}

// readPhases reads which phases run (BENCH_SCALE, BENCH_STORM) and their
// sizes (BENCH_SCALE_THREADS, BENCH_SCALE_ROUNDS, BENCH_STORM_CLIENTS).
func readPhases(s *settings) error {
	phase := func(name string) (only, off bool, err error) {
		switch v := strings.TrimSpace(os.Getenv(name)); v {
		case "":
			return false, false, nil
		case "1":
			return true, false, nil
		case "0":
			return false, true, nil
		default:
			return false, false, fmt.Errorf("%s=%q: want 1 (only this phase) or 0 (leave it out)", name, v)
		}
	}
	scaleOnly, scaleOff, err := phase("BENCH_SCALE")
	if err != nil {
		return err
	}
	stormOnly, stormOff, err := phase("BENCH_STORM")
	if err != nil {
		return err
	}
	rulesOnly, rulesOff, err := phase("BENCH_RULES")
	if err != nil {
		return err
	}
	s.classic = !scaleOnly && !stormOnly && !rulesOnly
	full := s.classic && !s.quick
	s.scale = scaleOnly || full && !scaleOff
	s.storm = stormOnly || full && !stormOff
	s.rules = rulesOnly || full && !rulesOff

	s.scaleThreads = []int{1000, 2000}
	if v := strings.TrimSpace(os.Getenv("BENCH_SCALE_THREADS")); v != "" {
		s.scaleThreads = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 5000 {
				return fmt.Errorf("BENCH_SCALE_THREADS=%q: want a comma-separated list of 1 to 5000", v)
			}
			s.scaleThreads = append(s.scaleThreads, n)
		}
	}
	s.scaleRounds = 1
	if v := strings.TrimSpace(os.Getenv("BENCH_SCALE_ROUNDS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 15 {
			return fmt.Errorf("BENCH_SCALE_ROUNDS=%q: want 1 to 15", v)
		}
		s.scaleRounds = n
	}
	s.stormClients = 10000
	if v := strings.TrimSpace(os.Getenv("BENCH_STORM_CLIENTS")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 15000 {
			return fmt.Errorf("BENCH_STORM_CLIENTS=%q: want 1 to 15000", v)
		}
		s.stormClients = n
	}
	return nil
}

// switchEnv reads the 0/1 switch name from the environment; unset is def.
func switchEnv(name string, def bool) (bool, error) {
	switch v := strings.TrimSpace(os.Getenv(name)); v {
	case "":
		return def, nil
	case "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return def, fmt.Errorf("%s=%q: want 0 or 1", name, v)
	}
}

func truthy(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}

// target is one endpoint sysbench drives.
type target struct {
	name       string
	addr       string
	user, pass string
	proc       *child // the proxy's process (nil for direct)
}

// sluice reports whether t is one of the sluices.
func (t target) sluice() bool { return t.proc != nil && t.proc.metricsURL != "" }

// cell is one workload × threads × ps-mode combination.
type cell struct {
	workload string
	threads  int
	psMode   string
}

// result is one sysbench run against one target.
type result struct {
	sb     sbStats
	err    error
	wall   time.Duration
	cpuSec float64 // CPU seconds of the proxy's process across the run
	hasCPU bool
	rssKB  int64 // peak VmRSS sampled during the run (sluice only)
	// rssEndKB is VmRSS once sysbench has exited (sluice only).
	rssEndKB int64
	replica  float64 // share of sluice's statements routed to replicas, -1 unknown
	// otherCores is the CPU that processes other than the benchmark's own
	// (this one, sysbench, the mysqlds, HAProxy) used during the run, in
	// cores; NaN when unknown.
	otherCores float64
	// peaks are the backends' highest Threads_connected and
	// Prepared_stmt_count during the run (scale cells only).
	peaks []backendPeak
	// proxyNote says, for a failed run through a sluice, whether it
	// exited and what it logged about failures during the run (scale
	// cells only).
	proxyNote string
}

// runOpts are what a run adds to the classic matrix's sysbench options.
type runOpts struct {
	// percentile is sysbench's --percentile; 0 means 95. The report's p95
	// and p99 come from sysbench's own line when it is that percentile,
	// else from the --histogram output.
	percentile int
	// extra are more sysbench options.
	extra []string
	// initWait is added to the run's time bound: the time sysbench may
	// take to connect its threads.
	initWait time.Duration
}

// benchEnv is what the phases of a run share: the topology, the tools and
// the proxies started so far.
type benchEnv struct {
	ctx        context.Context
	st         settings
	logf       func(format string, args ...any)
	topo       *sandbox.Topology
	sb         *sysbench
	tmp        string
	sluiceBin  string
	haproxyBin string
	// procs are the proxies running now, stopped when the run ends.
	procs  []*child
	direct target
	// ha and hb are HAProxy and the A/A control, started on first use.
	ha, hb *target
	// warmed are the targets that had their warm-up.
	warmed map[string]bool
}

func run() (code int) {
	st, err := readSettings()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first Ctrl-C the deferred cleanup runs; a second one kills
		// the process the default way (the servers die with it by Pdeathsig).
		<-ctx.Done()
		stop()
	}()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	fail := func(err error) int {
		if ctx.Err() != nil {
			logf("interrupted: %v", err)
			return 130
		}
		logf("error: %v", err)
		return 1
	}

	sysbenchBin, err := exec.LookPath("sysbench")
	if err != nil {
		return fail(fmt.Errorf("sysbench not found (run scripts/deps.sh bench): %w", err))
	}
	haproxyBin, err := lookHAProxy()
	if err != nil {
		return fail(err)
	}

	facts := machineFacts{started: time.Now()}
	facts.collectStatic(sysbenchBin, haproxyBin)
	logf("measuring idle CPU for 2s before starting anything")
	facts.idleBefore = idleShare(ctx, 2*time.Second)
	facts.loadBefore = loadAvg()

	tmp, err := os.MkdirTemp("", "sluice-bench-*")
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := os.RemoveAll(tmp); err != nil {
			logf("removing %s: %v", tmp, err)
		}
	}()

	logf("starting sandbox topology (master, %d replicas, auth server)", replicas)
	startCtx, cancelStart := context.WithTimeout(ctx, 3*time.Minute)
	topo, err := sandbox.Start(startCtx, sandbox.Options{Replicas: replicas, Logf: logf})
	cancelStart()
	if err != nil {
		return fail(fmt.Errorf("sandbox: %w", err))
	}
	defer func() {
		logf("stopping the topology")
		if err := topo.Stop(); err != nil {
			logf("stopping the topology: %v", err)
		}
	}()
	facts.mariadb = serverVersion(ctx, topo.Master)

	e := &benchEnv{ctx: ctx, st: st, logf: logf, topo: topo, sb: &sysbench{bin: sysbenchBin},
		tmp: tmp, haproxyBin: haproxyBin, warmed: map[string]bool{},
		direct: target{name: "direct", addr: topo.Master.Addr(), user: topo.Opts.ServiceUser, pass: topo.Opts.ServicePassword}}
	defer func() {
		for _, c := range e.procs {
			logf("stopping %s", c.name)
			c.stop()
		}
	}()

	if st.classic || st.scale || st.rules {
		logf("preparing %d sysbench tables of %d rows on the master", tables, tableSize)
		if out, err := e.sb.exec(ctx, 5*time.Minute, append([]string{"oltp_read_write"},
			append(e.sb.common(e.direct), "--threads=2", "prepare")...)); err != nil {
			return fail(fmt.Errorf("sysbench prepare: %w\n%s", err, tail(out, 20)))
		}
		if err := waitReplicated(ctx, topo, 3*time.Minute); err != nil {
			return fail(err)
		}
	}
	logf("building sluice")
	if e.sluiceBin, err = buildSluice(ctx, tmp); err != nil {
		return fail(err)
	}

	// A phase that cannot be set up ends with an error; the phases after it
	// still run, and the report gives what the others measured.
	var rep report
	failed := 0
	phase := func(name string, f func() error) bool {
		err := f()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		logf("%s: error: %v", name, err)
		rep.errs = append(rep.errs, fmt.Sprintf("%s: %v", name, err))
		return true
	}
	if st.classic && !phase("classic matrix", func() (err error) { rep.classic, err = e.runClassic(&facts); return err }) {
		return fail(ctx.Err())
	}
	if rep.classic != nil {
		failed = rep.classic.failed
	}
	if st.scale && !phase("scale cells", func() (err error) { rep.scale, err = e.runScale(); return err }) {
		return fail(ctx.Err())
	}
	if st.rules && !phase("rules and cache", func() (err error) { rep.rules, err = e.runRules(); return err }) {
		return fail(ctx.Err())
	}
	if st.storm && !phase("login storm", func() (err error) { rep.storm, err = e.runStorm(); return err }) {
		return fail(ctx.Err())
	}
	facts.loadAfter = loadAvg()
	facts.finished = time.Now()
	// With the topology idle, whatever CPU is busy now is other work on the machine.
	facts.idleAfter = idleShare(ctx, 2*time.Second)

	out := renderReport(st, facts, rep)
	fmt.Println()
	fmt.Print(out)
	if st.save {
		path := filepath.Join("bench", "results", facts.started.Format("2006-01-02")+st.fileSuffix()+".md")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			return fail(err)
		}
		logf("wrote %s", path)
	}
	if len(rep.errs) > 0 {
		logf("%d phase(s) ended with an error", len(rep.errs))
		return 1
	}
	if failed > 0 {
		logf("%d of %d runs of the classic matrix failed", failed, rep.classic.total)
		return 1
	}
	return 0
}

// report is what the phases that ran measured; a phase that did not run
// leaves its part nil.
type report struct {
	classic *classicOutcome
	scale   *scaleOutcome
	storm   *stormOutcome
	rules   *rulesOutcome
	// errs are the phases that ended with an error, and the error.
	errs []string
}

// classicOutcome is the classic matrix: its cells and, per cell, each
// target's median run.
type classicOutcome struct {
	cells         []cell
	results       []map[string]*result
	total, failed int
}

// startSluiceTarget starts a sluice process (see startSluice) and returns
// it as a target for the application user.
func (e *benchEnv) startSluiceTarget(name, cpuProfile string, proxyKeys, clusterKeys []string) (target, error) {
	return e.startSluiceProc(name, cpuProfile, proxyKeys, clusterKeys, "")
}

// startSluiceTargetWith is startSluiceTarget with more TOML (rules) at
// the end of its configuration.
func (e *benchEnv) startSluiceTargetWith(name string, proxyKeys, clusterKeys []string, extra string) (target, error) {
	return e.startSluiceProc(name, "", proxyKeys, clusterKeys, extra)
}

func (e *benchEnv) startSluiceProc(name, cpuProfile string, proxyKeys, clusterKeys []string, extra string) (target, error) {
	c, err := startSluice(e.ctx, e.sluiceBin, e.topo, e.tmp, name, e.st, cpuProfile, proxyKeys, clusterKeys, extra)
	if err != nil {
		return target{}, err
	}
	e.procs = append(e.procs, c)
	return target{name: name, addr: c.addr, user: e.topo.Opts.AppUser, pass: e.topo.Opts.AppPassword, proc: c}, nil
}

// stopProc stops a proxy the run no longer needs, so that it holds no
// backend connections and no CPU in the phases that follow.
func (e *benchEnv) stopProc(c *child) {
	e.logf("stopping %s", c.name)
	c.stop()
	e.procs = slices.DeleteFunc(e.procs, func(p *child) bool { return p == c })
}

// haproxies returns HAProxy and, unless BENCH_CONTROL=0, the A/A control
// HAProxy-b, starting them on first use.
func (e *benchEnv) haproxies() ([]target, error) {
	start := func(name string) (*target, error) {
		c, err := startHAProxy(e.ctx, e.haproxyBin, e.tmp, name, e.topo.Master.Addr())
		if err != nil {
			return nil, err
		}
		e.procs = append(e.procs, c)
		return &target{name: name, addr: c.addr, user: e.topo.Opts.ServiceUser, pass: e.topo.Opts.ServicePassword, proc: c}, nil
	}
	var err error
	if e.ha == nil {
		if e.ha, err = start("haproxy"); err != nil {
			return nil, err
		}
	}
	ts := []target{*e.ha}
	// The A/A control: a second HAProxy, configured as the first, measured
	// as one more target. How far HAProxy-b/HAProxy strays from 1.00x in a
	// cell is what that cell's sluice/HAProxy can tell apart at all.
	if e.st.control {
		if e.hb == nil {
			if e.hb, err = start("haproxy-b"); err != nil {
				return nil, err
			}
		}
		ts = append(ts, *e.hb)
	}
	return ts, nil
}

// warmUp checks that each target answers and runs oltp_read_only at 4
// threads against each one not yet warmed, unrecorded.
func (e *benchEnv) warmUp(targets []target) error {
	warm := min(5, e.st.seconds)
	if e.st.quick {
		warm = min(2, e.st.seconds)
	}
	for _, t := range targets {
		if e.warmed[t.name] {
			continue
		}
		if err := ping(e.ctx, t, 15*time.Second); err != nil {
			return fmt.Errorf("%s (%s) does not answer: %w", t.name, t.addr, err)
		}
		e.logf("warm-up of %s: oltp_read_only, 4 threads, %ds (not recorded)", t.name, warm)
		args := append([]string{"oltp_read_only"}, e.sb.common(t)...)
		args = append(args, "--threads=4", "--time="+strconv.Itoa(warm), "--db-ps-mode=auto", "run")
		if out, err := e.sb.exec(e.ctx, time.Duration(warm)*time.Second+time.Minute, args); err != nil {
			return fmt.Errorf("warm-up against %s: %w\n%s", t.name, err, tail(out, 20))
		}
		e.warmed[t.name] = true
	}
	return nil
}

// runClassic runs the classic matrix (workloads × 1, 16, 64 threads × ps
// modes) against direct, HAProxy, the two sluices and the control. The
// two sluices are stopped at its end.
func (e *benchEnv) runClassic(facts *machineFacts) (*classicOutcome, error) {
	ctx, st, logf := e.ctx, e.st, e.logf
	// Two sluices, each a process of its own (`sluice run`, as deployed,
	// measured from its /proc/<pid> as HAProxy is), in front of the same
	// topology: "sluice" with consistency = "strong" sends every statement
	// to the master, the one backend HAProxy forwards to, so the two proxies
	// are compared on the same work; "split" is the default configuration,
	// whose reads outside transactions go to the replicas (on this one
	// machine they share the cores with the master, so spreading reads
	// costs the box more, not less).
	// Both stop when the matrix ends: the scale cells and the storm start
	// sluices of their own, and these would only hold backend connections
	// and memory beside them.
	sl, err := e.startSluiceTarget("sluice", st.cpuProfile, nil, []string{`consistency = "strong"`})
	if err != nil {
		return nil, err
	}
	defer e.stopProc(sl.proc)
	split, err := e.startSluiceTarget("split", "", nil, nil)
	if err != nil {
		return nil, err
	}
	defer e.stopProc(split.proc)
	has, err := e.haproxies()
	if err != nil {
		return nil, err
	}
	targets := append([]target{e.direct, has[0], sl, split}, has[1:]...)
	for _, t := range targets {
		if err := ping(ctx, t, 15*time.Second); err != nil {
			return nil, fmt.Errorf("%s (%s) does not answer: %w", t.name, t.addr, err)
		}
	}
	facts.rssStartKB = rssKB(strconv.Itoa(sl.proc.pid()))
	logf("sluice on %s (pid %d), split on %s (pid %d), haproxy on %s (pid %d), master %s",
		sl.addr, sl.proc.pid(), split.addr, split.proc.pid(), has[0].addr, has[0].proc.pid(), e.direct.addr)
	if err := e.warmUp(targets); err != nil {
		return nil, err
	}

	o := &classicOutcome{cells: matrix(st.quick)}
	o.results = make([]map[string]*result, len(o.cells))
	o.total = len(o.cells) * len(targets) * st.rounds
	done := 0
	for i, c := range o.cells {
		runs := map[string][]*result{}
		for round := range st.rounds {
			for k := range targets {
				// Rotate who goes first, from cell to cell and from
				// round to round.
				t := targets[(i+round+k)%len(targets)]
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if err := waitReplicated(ctx, e.topo, 2*time.Minute); err != nil {
					logf("warning: %v", err)
				}
				r := measure(ctx, e.sb, t, c, st.seconds, ownPIDs(e.topo, e.procs...), runOpts{})
				runs[t.name] = append(runs[t.name], r)
				done++
				if r.err != nil {
					o.failed++
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					logf("[%d/%d] %s %d thr %s %s: FAILED: %v", done, o.total, c.workload, c.threads, c.psMode, t.name, r.err)
					continue
				}
				extra := ""
				if t.sluice() && r.hasCPU {
					extra = fmt.Sprintf(", CPU %.4f s/1k stmts, RSS %.1f MB", r.cpuPer1k(), float64(r.rssKB)/1024)
					if r.replica >= 0 {
						extra += fmt.Sprintf(", %.0f%% to replicas", 100*r.replica)
					}
				}
				logf("[%d/%d] %s %d thr %s %s: %.0f qps, p95 %.2f ms, p50 %.3f ms%s; other work %.2f cores",
					done, o.total, c.workload, c.threads, c.psMode, t.name, r.sb.qps, r.sb.p95, r.sb.p50, extra, r.otherCores)
			}
		}
		o.results[i] = map[string]*result{}
		for name, rs := range runs {
			o.results[i][name] = medianRun(rs)
		}
	}
	return o, nil
}

func matrix(quick bool) []cell {
	if quick {
		return []cell{{"oltp_point_select", 16, "auto"}, {"oltp_point_select", 16, "disable"}}
	}
	var cells []cell
	for _, w := range []string{"oltp_point_select", "oltp_read_only", "oltp_read_write"} {
		for _, th := range []int{1, 16, 64} {
			for _, m := range []string{"auto", "disable"} {
				cells = append(cells, cell{w, th, m})
			}
		}
	}
	return cells
}

// medianRun returns the run of median qps among those that succeeded (the
// lower of the middle two for an even count), or the first run when none
// did. All of its figures come from that one run.
func medianRun(rs []*result) *result {
	var good []*result
	for _, r := range rs {
		if ok(r) {
			good = append(good, r)
		}
	}
	if len(good) == 0 {
		return rs[0]
	}
	slices.SortFunc(good, func(a, b *result) int { return cmp.Compare(a.sb.qps, b.sb.qps) })
	return good[(len(good)-1)/2]
}

// measure runs one sysbench against t; for a proxy it also takes its
// process's CPU time, for a sluice its peak RSS and its routes.
func measure(ctx context.Context, sb *sysbench, t target, c cell, seconds int, own []int, o runOpts) *result {
	r := &result{replica: -1, otherCores: math.NaN()}
	if o.percentile == 0 {
		o.percentile = 95
	}
	args := append([]string{c.workload}, sb.common(t)...)
	args = append(args,
		"--threads="+strconv.Itoa(c.threads),
		"--time="+strconv.Itoa(seconds),
		"--db-ps-mode="+c.psMode,
		"--percentile="+strconv.Itoa(o.percentile),
		"--histogram=on")
	args = append(append(args, o.extra...), "run")

	var (
		before, after routeCounts
		cpu0          float64
		cpuErr        error
		sampler       *rssSampler
	)
	pid := ""
	if t.proc != nil {
		pid = strconv.Itoa(t.proc.pid())
		cpu0, cpuErr = procCPUSeconds(pid)
	}
	if t.sluice() {
		before = scrapeRoutes(t.proc.metricsURL)
		sampler = startRSSSampler(pid, 200*time.Millisecond)
	}
	sys0, own0 := systemTicks(), ownTicks(own)
	start := time.Now()
	out, err := sb.exec(ctx, time.Duration(seconds)*time.Second+90*time.Second+o.initWait, args)
	r.wall = time.Since(start)
	if sys1, own1 := systemTicks(), ownTicks(own); sys0 >= 0 && sys1 >= 0 && r.wall > 0 {
		r.otherCores = max(0, (sys1-sys0)-(own1-own0)) / clockTicks / r.wall.Seconds()
	}
	var cpu1 float64
	if pid != "" {
		cpu1, _ = procCPUSeconds(pid)
	}
	if t.sluice() {
		r.rssKB = sampler.stop()
		r.rssEndKB = rssKB(pid)
		after = scrapeRoutes(t.proc.metricsURL)
		if before.ok && after.ok {
			m, rep := after.master-before.master, after.replica-before.replica
			if m+rep > 0 {
				r.replica = rep / (m + rep)
			}
		}
	}
	if pid != "" && cpuErr == nil {
		r.cpuSec, r.hasCPU = cpu1-cpu0, true
	}
	if err != nil {
		r.err = fmt.Errorf("%w\n%s", err, tail(out, 40))
		return r
	}
	s, perr := parseSysbench(out)
	if perr != nil {
		r.err = fmt.Errorf("%w\n%s", perr, tail(out, 15))
		return r
	}
	r.sb = s
	if strings.Contains(out, "FATAL") {
		r.err = fmt.Errorf("sysbench reported FATAL errors\n%s", tail(out, 15))
	}
	return r
}

func (r *result) cpuPer1k() float64 {
	if !r.hasCPU || r.sb.queries == 0 {
		return math.NaN()
	}
	return r.cpuSec / (float64(r.sb.queries) / 1000)
}

// --- sysbench ---

type sysbench struct{ bin string }

func (sb *sysbench) common(t target) []string {
	host, port, _ := net.SplitHostPort(t.addr)
	return []string{"--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=" + t.user, "--mysql-password=" + t.pass, "--mysql-db=" + sandbox.TestDatabase,
		"--tables=" + strconv.Itoa(tables), "--table-size=" + strconv.Itoa(tableSize)}
}

// exec runs sysbench with its own time bound; it is killed when the bound or
// ctx ends, and with this process (Pdeathsig).
func (sb *sysbench) exec(ctx context.Context, timeout time.Duration, args []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, sb.bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("sysbench did not finish within %v: %w", timeout, err)
	}
	return string(out), err
}

type sbStats struct {
	transactions, queries int64
	tps, qps              float64
	avg, p95, p50         float64 // ms; p50 from the histogram, NaN without one
	// p99 is sysbench's 99th percentile line, else from the histogram.
	p99                 float64
	ignored, reconnects int64
}

var (
	reTransactions = regexp.MustCompile(`(?m)^\s*transactions:\s+(\d+)\s+\(([\d.]+) per sec\.\)`)
	reQueries      = regexp.MustCompile(`(?m)^\s*queries:\s+(\d+)\s+\(([\d.]+) per sec\.\)`)
	reIgnored      = regexp.MustCompile(`(?m)^\s*ignored errors:\s+(\d+)`)
	reReconnects   = regexp.MustCompile(`(?m)^\s*reconnects:\s+(\d+)`)
	reAvg          = regexp.MustCompile(`(?m)^\s*avg:\s+([\d.]+)`)
	rePercentile   = regexp.MustCompile(`(?m)^\s*(\d+)th percentile:\s+([\d.]+)`)
	reHistRow      = regexp.MustCompile(`(?m)^\s*([\d.]+)\s+\|\**\s+(\d+)\s*$`)
)

func parseSysbench(out string) (sbStats, error) {
	s := sbStats{p50: math.NaN()}
	tr, q := reTransactions.FindStringSubmatch(out), reQueries.FindStringSubmatch(out)
	avg, pct := reAvg.FindStringSubmatch(out), rePercentile.FindStringSubmatch(out)
	if tr == nil || q == nil || avg == nil || pct == nil {
		return s, errors.New("no statistics in sysbench's output")
	}
	s.transactions, _ = strconv.ParseInt(tr[1], 10, 64)
	s.tps, _ = strconv.ParseFloat(tr[2], 64)
	s.queries, _ = strconv.ParseInt(q[1], 10, 64)
	s.qps, _ = strconv.ParseFloat(q[2], 64)
	s.avg, _ = strconv.ParseFloat(avg[1], 64)
	// sysbench prints one percentile (--percentile); the other comes from
	// the histogram, computed as sysbench computes its own.
	s.p95, s.p99 = histogramPercentile(out, 95), histogramPercentile(out, 99)
	if v, err := strconv.ParseFloat(pct[2], 64); err == nil {
		switch pct[1] {
		case "95":
			s.p95 = v
		case "99":
			s.p99 = v
		}
	}
	if m := reIgnored.FindStringSubmatch(out); m != nil {
		s.ignored, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reReconnects.FindStringSubmatch(out); m != nil {
		s.reconnects, _ = strconv.ParseInt(m[1], 10, 64)
	}
	s.p50 = histogramPercentile(out, 50)
	return s, nil
}

// histogramPercentile computes a percentile from sysbench's --histogram
// output the way sysbench computes its own: the value of the first bucket at
// which the running count reaches pct% of all events. NaN without histogram.
func histogramPercentile(out string, pct float64) float64 {
	i := strings.Index(out, "Latency histogram")
	if i < 0 {
		return math.NaN()
	}
	section := out[i:]
	if j := strings.Index(section, "SQL statistics"); j > 0 {
		section = section[:j]
	}
	type bucket struct {
		v float64
		n int64
	}
	var bs []bucket
	var total int64
	for _, m := range reHistRow.FindAllStringSubmatch(section, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		n, _ := strconv.ParseInt(m[2], 10, 64)
		bs = append(bs, bucket{v, n})
		total += n
	}
	if total == 0 {
		return math.NaN()
	}
	need := int64(math.Ceil(float64(total) * pct / 100))
	var run int64
	for _, b := range bs {
		run += b.n
		if run >= need {
			return b.v
		}
	}
	return bs[len(bs)-1].v
}

// --- sluice ---

// buildSluice builds the sluice program of this checkout into dir.
func buildSluice(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "sluice")
	gobin := os.Getenv("GO")
	if gobin == "" {
		gobin = "go"
	}
	if out, err := exec.CommandContext(ctx, gobin, "build", "-o", bin, "./cmd/sluice").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building sluice: %w\n%s", err, out)
	}
	return bin, nil
}

// startSluice starts `sluice run` in front of topo as a child process, with
// <dir>/<name>.toml as its configuration and <dir>/<name>.log as its output
// (JSON logging at info, as in production); proxyKeys are extra lines of
// its [proxy] table, clusterKeys of its [[cluster]], extra more TOML at
// the end (query rules). With cpuProfile set it
// also writes a CPU profile there, complete once the process has stopped.
func startSluice(ctx context.Context, bin string, topo *sandbox.Topology, dir, name string, st settings, cpuProfile string, proxyKeys, clusterKeys []string, extra string) (*child, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	keys := []string{
		fmt.Sprintf("threads = %d", st.threads),
		fmt.Sprintf("metrics_listen = %q", metrics),
		`admin_listen = "127.0.0.1:0"`,
		`log_level = "info"`,
	}
	if st.eventLoop {
		keys = append(keys, "event_loop = true")
	}
	keys = append(keys, proxyKeys...)
	cfg := topo.SluiceConfigWith(sandbox.SluiceOptions{Listen: addr, ProxyKeys: keys, ClusterKeys: clusterKeys}) + extra
	path := filepath.Join(dir, name+".toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	args := []string{"run", "-config", path}
	if cpuProfile != "" {
		args = append(args, "-cpuprofile", cpuProfile)
	}
	c, err := startChild(ctx, name, bin, dir, addr, args...)
	if err != nil {
		return nil, err
	}
	c.metricsURL = "http://" + metrics + "/metrics"
	return c, nil
}

type routeCounts struct {
	master, replica float64
	ok              bool
}

var reRoute = regexp.MustCompile(`(?m)^sluice_statements_total\{route="(master|replica)",type="[a-z]+"\}\s+([0-9.e+]+)`)

// scrapeRoutes reads sluice's statement counters by route from /metrics,
// summed over statement types.
func scrapeRoutes(url string) routeCounts {
	var rc routeCounts
	if url == "" {
		return rc
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return rc
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return rc
	}
	for _, m := range reRoute.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "master" {
			rc.master += v
		} else {
			rc.replica += v
		}
		rc.ok = true
	}
	return rc
}

// --- HAProxy ---

// child is a proxy the benchmark runs as a process of its own (HAProxy, a
// sluice).
type child struct {
	name       string
	cmd        *exec.Cmd
	addr       string // where it listens for clients
	metricsURL string // a sluice's /metrics
	logPath    string // its output
	done       chan struct{}
	once       sync.Once
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startChild starts bin with args, its output going to <dir>/<name>.log,
// and returns once it accepts connections on addr. The process is killed
// with this one (Pdeathsig).
func startChild(ctx context.Context, name, bin, dir, addr string, args ...string) (*child, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, addr: addr, logPath: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return c, nil
		}
		select {
		case <-c.done:
			b, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%s exited at start-up: %s", name, tail(string(b), 20))
		case <-ctx.Done():
			c.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("%s does not listen on %s after 15s", name, addr)
		}
	}
}

func lookHAProxy() (string, error) {
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("haproxy not found (run scripts/deps.sh bench; Debian: haproxy)")
}

// startHAProxy writes a minimal TCP-mode configuration (<dir>/<name>.cfg)
// forwarding a free loopback port to backend and runs HAProxy in the
// foreground.
func startHAProxy(ctx context.Context, bin, dir, name, backend string) (*child, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`global
    maxconn 4096

defaults
    mode tcp
    maxconn 4096
    timeout connect 5s
    timeout client 10m
    timeout server 10m

frontend mysql
    bind %s
    default_backend master

backend master
    server master %s
`, addr, backend)
	path := filepath.Join(dir, name+".cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, bin, "-c", "-q", "-f", path).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("haproxy -c: %w\n%s", err, out)
	}
	return startChild(ctx, name, bin, dir, addr, "-db", "-f", path)
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop ends the process (SIGTERM, SIGKILL after 5s) and waits for it.
func (c *child) stop() {
	c.once.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// --- /proc ---

var clockTicks = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
			return float64(n)
		}
	}
	return 100
}()

// procStat returns the fields of /proc/<pid>/stat after the command name:
// index 0 is field 3 (state), so field n is at index n-3.
func procStat(pid string) ([]string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil, errors.New("unexpected /proc stat format")
	}
	return f, nil
}

// procCPUSeconds is utime+stime (fields 14 and 15) of /proc/<pid>/stat in
// seconds.
func procCPUSeconds(pid string) (float64, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unexpected /proc stat format")
	}
	return (u + st) / clockTicks, nil
}

// systemTicks is the busy time of all CPUs (user, nice, system, irq and
// softirq) from /proc/stat, in clock ticks; -1 when unreadable. Interrupt
// time is included because processes' stime may hold some of it (the
// softirq work of loopback networking done in their context).
func systemTicks() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "cpu" {
		return -1
	}
	var t float64
	for i, v := range f[1:min(len(f), 8)] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		t += n
	}
	return t
}

// ownPIDs are the benchmark's long-running child processes: the servers
// and HAProxy.
func ownPIDs(topo *sandbox.Topology, procs ...*child) []int {
	var pids []int
	for _, s := range topo.Servers() {
		if p := s.PID(); p > 0 {
			pids = append(pids, p)
		}
	}
	for _, c := range procs {
		pids = append(pids, c.pid())
	}
	return pids
}

// ownTicks is the CPU time, in clock ticks, of this process, of its waited-for
// children (sysbench) and of pids.
func ownTicks(pids []int) float64 {
	t := procTicks("self", true)
	for _, p := range pids {
		t += procTicks(strconv.Itoa(p), false)
	}
	return t
}

// procTicks is utime+stime (plus cutime+cstime with children) of
// /proc/<pid>/stat, in clock ticks; 0 when unreadable.
func procTicks(pid string, children bool) float64 {
	f, err := procStat(pid)
	if err != nil {
		return 0
	}
	last := 12 // fields 14-15: utime, stime
	if children {
		last = 14 // and 16-17: cutime, cstime
	}
	var t float64
	for _, v := range f[11 : last+1] {
		n, _ := strconv.ParseFloat(v, 64)
		t += n
	}
	return t
}

// rssKB is VmRSS of /proc/<pid>/status in KiB.
func rssKB(pid string) int64 {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

type rssSampler struct {
	stopc chan struct{}
	res   chan int64
}

// startRSSSampler samples the VmRSS of process pid every interval until
// stop, which returns the peak.
func startRSSSampler(pid string, interval time.Duration) *rssSampler {
	s := &rssSampler{stopc: make(chan struct{}), res: make(chan int64, 1)}
	go func() {
		peak := rssKB(pid)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				peak = max(peak, rssKB(pid))
			case <-s.stopc:
				s.res <- max(peak, rssKB(pid))
				return
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() int64 {
	close(s.stopc)
	return <-s.res
}

// idleShare is the share of all CPUs' time spent idle over d, from /proc/stat.
func idleShare(ctx context.Context, d time.Duration) float64 {
	read := func() (idle, total float64, ok bool) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0, false
		}
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu" {
			return 0, 0, false
		}
		for i, v := range f[1:] {
			n, _ := strconv.ParseFloat(v, 64)
			if i < 8 { // guest time is already in user
				total += n
			}
			if i == 3 || i == 4 { // idle, iowait
				idle += n
			}
		}
		return idle, total, true
	}
	i0, t0, ok0 := read()
	select {
	case <-ctx.Done():
		return math.NaN()
	case <-time.After(d):
	}
	i1, t1, ok1 := read()
	if !ok0 || !ok1 || t1 <= t0 {
		return math.NaN()
	}
	return (i1 - i0) / (t1 - t0)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// --- helpers ---

func waitReplicated(ctx context.Context, topo *sandbox.Topology, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := topo.WaitReplicated(ctx); err != nil {
		return fmt.Errorf("replicas did not catch up within %v: %w", d, err)
	}
	return nil
}

// ping logs in to t and runs SELECT 1, retrying until d ends.
func ping(ctx context.Context, t target, d time.Duration) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = t.user, t.pass, "tcp", t.addr, sandbox.TestDatabase
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		var one int
		err = db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func serverVersion(ctx context.Context, s *sandbox.Server) string {
	db, err := s.RootDB()
	if err != nil {
		return "?"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "?"
	}
	return v
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
