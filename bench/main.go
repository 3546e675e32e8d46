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
// issue 4's bars, for sluice and for the control.
//
// Environment:
//
//	BENCH_TIME=10    seconds per sysbench run
//	BENCH_QUICK=1    only oltp_point_select at 16 threads, both ps modes
//	BENCH_SLUICE_THREADS=0  sluice's [proxy] threads (GOMAXPROCS); 0 = one per CPU
//	BENCH_EVENT_LOOP=1      both sluices with [proxy] event_loop = true
//	BENCH_ROUNDS=1   runs of each cell per target; the report takes the median
//	BENCH_CONTROL=0  leave out the A/A control (a second HAProxy, "HAProxy-b")
//	BENCH_CPUPROFILE=FILE  the "sluice" target writes a CPU profile of the run
//	                 there (what cmd/sluice/default.pgo is made from)
//	SAVE=1           also write the report to bench/results/<YYYY-MM-DD>.md
//	                 (<YYYY-MM-DD>-quick.md in quick mode)
//
// Everything it starts (servers, HAProxy, sluice, temp dirs) is stopped and
// removed on exit, on failure and on Ctrl-C.
package main

import (
	"bufio"
	"bytes"
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
	"runtime"
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
	// threads is sluice's [proxy] threads; 0, sluice's default, is one
	// per CPU, as HAProxy's default nbthread is.
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
			return s, fmt.Errorf("BENCH_SLUICE_THREADS=%q: want 0 (one per CPU) to 1024", v)
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
	return s, nil
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
	sb      sbStats
	err     error
	wall    time.Duration
	cpuSec  float64 // CPU seconds of the proxy's process across the run
	hasCPU  bool
	rssKB   int64   // peak VmRSS sampled during the run (sluice only)
	replica float64 // share of sluice's statements routed to replicas, -1 unknown
	// otherCores is the CPU that processes other than the benchmark's own
	// (this one, sysbench, the mysqlds, HAProxy) used during the run, in
	// cores; NaN when unknown.
	otherCores float64
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

	svcUser, svcPass := topo.Opts.ServiceUser, topo.Opts.ServicePassword
	direct := target{name: "direct", addr: topo.Master.Addr(), user: svcUser, pass: svcPass}

	sb := &sysbench{bin: sysbenchBin}
	logf("preparing %d sysbench tables of %d rows on the master", tables, tableSize)
	if out, err := sb.exec(ctx, 5*time.Minute, append([]string{"oltp_read_write"},
		append(sb.common(direct), "--threads=2", "prepare")...)); err != nil {
		return fail(fmt.Errorf("sysbench prepare: %w\n%s", err, tail(out, 20)))
	}
	if err := waitReplicated(ctx, topo, 3*time.Minute); err != nil {
		return fail(err)
	}

	// Two sluices, each a process of its own (`sluice run`, as deployed,
	// measured from its /proc/<pid> as HAProxy is), in front of the same
	// topology: "sluice" with consistency = "strong" sends every statement
	// to the master, the one backend HAProxy forwards to, so the two proxies
	// are compared on the same work; "split" is the default configuration,
	// whose reads outside transactions go to the replicas (on this one
	// machine they share the cores with the master, so spreading reads
	// costs the box more, not less).
	logf("building sluice")
	sluiceBin, err := buildSluice(ctx, tmp)
	if err != nil {
		return fail(err)
	}
	var procs []*child
	defer func() {
		for _, c := range procs {
			logf("stopping %s", c.name)
			c.stop()
		}
	}()
	startOne := func(name, cpuProfile string, clusterKeys ...string) (target, error) {
		c, err := startSluice(ctx, sluiceBin, topo, tmp, name, st, cpuProfile, clusterKeys...)
		if err != nil {
			return target{}, err
		}
		procs = append(procs, c)
		return target{name: name, addr: c.addr, user: topo.Opts.AppUser, pass: topo.Opts.AppPassword, proc: c}, nil
	}
	sl, err := startOne("sluice", st.cpuProfile, `consistency = "strong"`)
	if err != nil {
		return fail(err)
	}
	split, err := startOne("split", "")
	if err != nil {
		return fail(err)
	}

	// HAProxy, child processes stopped with the sluices.
	startHA := func(name string) (target, error) {
		c, err := startHAProxy(ctx, haproxyBin, tmp, name, topo.Master.Addr())
		if err != nil {
			return target{}, err
		}
		procs = append(procs, c)
		return target{name: name, addr: c.addr, user: svcUser, pass: svcPass, proc: c}, nil
	}
	ha, err := startHA("haproxy")
	if err != nil {
		return fail(err)
	}
	targets := []target{direct, ha, sl, split}
	// The A/A control: a second HAProxy, configured as the first, measured
	// as one more target. How far HAProxy-b/HAProxy strays from 1.00x in a
	// cell is what that cell's sluice/HAProxy can tell apart at all.
	if st.control {
		hb, err := startHA("haproxy-b")
		if err != nil {
			return fail(err)
		}
		targets = append(targets, hb)
	}

	for _, t := range targets {
		if err := ping(ctx, t, 15*time.Second); err != nil {
			return fail(fmt.Errorf("%s (%s) does not answer: %w", t.name, t.addr, err))
		}
	}
	facts.rssStartKB = rssKB(strconv.Itoa(sl.proc.pid()))
	logf("sluice on %s (pid %d), split on %s (pid %d), haproxy on %s (pid %d), master %s",
		sl.addr, sl.proc.pid(), split.addr, split.proc.pid(), ha.addr, ha.proc.pid(), direct.addr)

	cells := matrix(st.quick)
	warm := min(5, st.seconds)
	if st.quick {
		warm = min(2, st.seconds)
	}
	logf("warm-up: oltp_read_only, 4 threads, %ds per target (not recorded)", warm)
	for _, t := range targets {
		args := append([]string{"oltp_read_only"}, sb.common(t)...)
		args = append(args, "--threads=4", "--time="+strconv.Itoa(warm), "--db-ps-mode=auto", "run")
		if out, err := sb.exec(ctx, time.Duration(warm)*time.Second+time.Minute, args); err != nil {
			return fail(fmt.Errorf("warm-up against %s: %w\n%s", t.name, err, tail(out, 20)))
		}
	}

	results := make([]map[string]*result, len(cells))
	total, done, failed := len(cells)*len(targets)*st.rounds, 0, 0
	for i, c := range cells {
		runs := map[string][]*result{}
		for round := range st.rounds {
			for k := range targets {
				// Rotate who goes first, from cell to cell and from
				// round to round.
				t := targets[(i+round+k)%len(targets)]
				if ctx.Err() != nil {
					return fail(ctx.Err())
				}
				if err := waitReplicated(ctx, topo, 2*time.Minute); err != nil {
					logf("warning: %v", err)
				}
				r := measure(ctx, sb, t, c, st.seconds, ownPIDs(topo, procs...))
				runs[t.name] = append(runs[t.name], r)
				done++
				if r.err != nil {
					failed++
					if ctx.Err() != nil {
						return fail(ctx.Err())
					}
					logf("[%d/%d] %s %d thr %s %s: FAILED: %v", done, total, c.workload, c.threads, c.psMode, t.name, r.err)
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
					done, total, c.workload, c.threads, c.psMode, t.name, r.sb.qps, r.sb.p95, r.sb.p50, extra, r.otherCores)
			}
		}
		results[i] = map[string]*result{}
		for name, rs := range runs {
			results[i][name] = medianRun(rs)
		}
	}
	facts.loadAfter = loadAvg()
	facts.finished = time.Now()
	// With the topology idle, whatever CPU is busy now is other work on the machine.
	facts.idleAfter = idleShare(ctx, 2*time.Second)

	report := renderReport(st, facts, cells, results)
	fmt.Println()
	fmt.Print(report)
	if st.save {
		name := facts.started.Format("2006-01-02") + ".md"
		if st.quick {
			name = facts.started.Format("2006-01-02") + "-quick.md"
		}
		path := filepath.Join("bench", "results", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			return fail(err)
		}
		logf("wrote %s", path)
	}
	if failed > 0 {
		logf("%d of %d runs failed", failed, total)
		return 1
	}
	return 0
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

// measure runs one sysbench against t; for a proxy it also takes its
// process's CPU time, for a sluice its peak RSS and its routes.
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

func measure(ctx context.Context, sb *sysbench, t target, c cell, seconds int, own []int) *result {
	r := &result{replica: -1, otherCores: math.NaN()}
	args := append([]string{c.workload}, sb.common(t)...)
	args = append(args,
		"--threads="+strconv.Itoa(c.threads),
		"--time="+strconv.Itoa(seconds),
		"--db-ps-mode="+c.psMode,
		"--percentile=95",
		"--histogram=on",
		"run")

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
	out, err := sb.exec(ctx, time.Duration(seconds)*time.Second+90*time.Second, args)
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
		r.err = fmt.Errorf("%w\n%s", err, tail(out, 15))
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
	ignored, reconnects   int64
}

var (
	reTransactions = regexp.MustCompile(`(?m)^\s*transactions:\s+(\d+)\s+\(([\d.]+) per sec\.\)`)
	reQueries      = regexp.MustCompile(`(?m)^\s*queries:\s+(\d+)\s+\(([\d.]+) per sec\.\)`)
	reIgnored      = regexp.MustCompile(`(?m)^\s*ignored errors:\s+(\d+)`)
	reReconnects   = regexp.MustCompile(`(?m)^\s*reconnects:\s+(\d+)`)
	reAvg          = regexp.MustCompile(`(?m)^\s*avg:\s+([\d.]+)`)
	reP95          = regexp.MustCompile(`(?m)^\s*95th percentile:\s+([\d.]+)`)
	reHistRow      = regexp.MustCompile(`(?m)^\s*([\d.]+)\s+\|\**\s+(\d+)\s*$`)
)

func parseSysbench(out string) (sbStats, error) {
	s := sbStats{p50: math.NaN()}
	tr, q := reTransactions.FindStringSubmatch(out), reQueries.FindStringSubmatch(out)
	avg, p95 := reAvg.FindStringSubmatch(out), reP95.FindStringSubmatch(out)
	if tr == nil || q == nil || avg == nil || p95 == nil {
		return s, errors.New("no statistics in sysbench's output")
	}
	s.transactions, _ = strconv.ParseInt(tr[1], 10, 64)
	s.tps, _ = strconv.ParseFloat(tr[2], 64)
	s.queries, _ = strconv.ParseInt(q[1], 10, 64)
	s.qps, _ = strconv.ParseFloat(q[2], 64)
	s.avg, _ = strconv.ParseFloat(avg[1], 64)
	s.p95, _ = strconv.ParseFloat(p95[1], 64)
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
// (JSON logging at info, as in production); clusterKeys are extra lines of
// its [[cluster]]. With cpuProfile set it also writes a CPU profile there,
// complete once the process has stopped.
func startSluice(ctx context.Context, bin string, topo *sandbox.Topology, dir, name string, st settings, cpuProfile string, clusterKeys ...string) (*child, error) {
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
	cfg := topo.SluiceConfigWith(sandbox.SluiceOptions{Listen: addr, ProxyKeys: keys, ClusterKeys: clusterKeys})
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
	c := &child{name: name, cmd: cmd, addr: addr, done: make(chan struct{})}
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

// --- report ---

type machineFacts struct {
	started, finished     time.Time
	nproc                 int
	cpuModel, kernel      string
	goVersion, commit     string
	sysbench, haproxy     string
	mariadb               string
	idleBefore, idleAfter float64
	loadBefore, loadAfter string
	rssStartKB            int64
}

func (f *machineFacts) collectStatic(sysbenchBin, haproxyBin string) {
	f.nproc = runtime.NumCPU()
	f.goVersion = runtime.Version()
	f.cpuModel = "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				f.cpuModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		f.kernel = strings.TrimSpace(string(b))
	}
	firstLine := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil && len(out) == 0 {
			return "?"
		}
		l, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		return strings.TrimSpace(l)
	}
	f.sysbench = firstLine(sysbenchBin, "--version")
	f.haproxy = firstLine(haproxyBin, "-v")
	f.commit = firstLine("git", "rev-parse", "--short=12", "HEAD")
	if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		f.commit += " (with uncommitted changes)"
	}
}

var shortName = map[string]string{
	"oltp_point_select": "point_select",
	"oltp_read_only":    "read_only",
	"oltp_read_write":   "read_write",
}

func renderReport(st settings, f machineFacts, cells []cell, results []map[string]*result) string {
	var b strings.Builder
	mode := "full"
	if st.quick {
		mode = "quick (BENCH_QUICK=1)"
	}
	fmt.Fprintf(&b, "# sluice benchmark, %s\n\n", f.started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- mode: %s, %d s per sysbench run, %d tables × %d rows, order of targets rotated per cell\n",
		mode, st.seconds, tables, tableSize)
	if st.rounds > 1 {
		fmt.Fprintf(&b, "- %d rounds (BENCH_ROUNDS): each cell ran %d times against each target, interleaved; every figure is from that target's run of median qps in the cell\n",
			st.rounds, st.rounds)
	}
	fmt.Fprintf(&b, "- machine: %d CPUs (%s), kernel %s; idle CPU over 2 s before the start %s and after the last run %s"+
		" (less than 100%% = other work on the machine); load average before %s, after %s\n",
		f.nproc, f.cpuModel, f.kernel, pct(f.idleBefore), pct(f.idleAfter), f.loadBefore, f.loadAfter)
	fmt.Fprintf(&b, "- MariaDB %s (master + %d GTID replicas + auth server, sandbox package); %s; %s\n",
		f.mariadb, replicas, f.sysbench, f.haproxy)
	threads := "one per CPU"
	if st.threads > 0 {
		threads = strconv.Itoa(st.threads)
	}
	threads += " (its GOMAXPROCS)"
	if st.eventLoop {
		threads += " and event_loop = true (GOMAXPROCS one more)"
	}
	fmt.Fprintf(&b, "- Go %s; sluice commit %s; each sluice a process of its own (`sluice run`) with threads = %s, RSS %.1f MB before the first run\n",
		strings.TrimPrefix(f.goVersion, "go"), f.commit, threads, float64(f.rssStartKB)/1024)
	fmt.Fprintf(&b, "- wall time %v\n\n", f.finished.Sub(f.started).Round(time.Second))

	controlCols, controlSep := "", ""
	if st.control {
		controlCols, controlSep = " HAProxy-b qps | HAProxy-b/HAProxy | HAProxy-b CPU s/1k stmts |", "--:|--:|--:|"
	}
	b.WriteString("| workload | thr | ps | direct qps | HAProxy qps | sluice qps | sluice/direct | sluice/HAProxy | split qps | split/HAProxy |" + controlCols + " direct p95 ms | HAProxy p95 ms | sluice p95 ms | split p95 ms | HAProxy CPU s/1k stmts | sluice CPU s/1k stmts | split CPU s/1k stmts | sluice RSS MB | split to replicas | other work, cores |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|" + controlSep + "--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	var notes []string
	var gm, gmSplit, gmControl geoMean
	var verdict mustShow
	for i, c := range cells {
		d, h, s, sp, hb := results[i]["direct"], results[i]["haproxy"], results[i]["sluice"], results[i]["split"], results[i]["haproxy-b"]
		control := ""
		if st.control {
			control = fmt.Sprintf(" %s | %s | %s |", qps(hb), ratio(hb, h), cpu(hb))
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |%s %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			shortName[c.workload], c.threads, c.psMode,
			qps(d), qps(h), qps(s), ratio(s, d), ratio(s, h), qps(sp), ratio(sp, h), control,
			p95(d), p95(h), p95(s), p95(sp),
			cpu(h), cpu(s), cpu(sp), rss(s), share(sp), other(d, h, s, sp, hb))
		gm.add(s, h)
		gmSplit.add(sp, h)
		gmControl.add(hb, h)
		if c.threads > 1 {
			verdict.throughput.add(s, h)
			verdict.throughputControl.add(hb, h)
		}
		verdict.cpu.addCPU(s, h)
		verdict.cpuControl.addCPU(hb, h)
		for _, name := range []string{"direct", "haproxy", "sluice", "split", "haproxy-b"} {
			r := results[i][name]
			if r == nil {
				continue
			}
			where := fmt.Sprintf("%s %d thr %s, %s", shortName[c.workload], c.threads, c.psMode, name)
			switch {
			case r.err != nil:
				first, _, _ := strings.Cut(r.err.Error(), "\n")
				notes = append(notes, where+": failed: "+first)
			case r.sb.ignored > 0 || r.sb.reconnects > 0:
				notes = append(notes, fmt.Sprintf("%s: %d ignored errors (deadlocks, retried by sysbench), %d reconnects",
					where, r.sb.ignored, r.sb.reconnects))
			}
		}
	}

	if gm.n > 0 {
		fmt.Fprintf(&b, "\nGeometric mean of sluice/HAProxy over %d cells: %.2fx (split/HAProxy: %s", gm.n, gm.value(), gmSplit.String())
		if st.control {
			fmt.Fprintf(&b, "; A/A control HAProxy-b/HAProxy: %s", gmControl.String())
		}
		b.WriteString(")\n")
	}

	var one []int
	for i, c := range cells {
		if c.threads == 1 {
			one = append(one, i)
		}
	}
	if len(one) > 0 {
		b.WriteString("\nOne thread: median latency per sysbench event (p50 from --histogram) and what each proxy adds over direct.\n\n")
		controlCols, controlSep := "", ""
		if st.control {
			controlCols, controlSep = " HAProxy-b added / HAProxy added |", "--:|"
		}
		b.WriteString("| workload | ps | direct p50 ms | HAProxy p50 ms | sluice p50 ms | split p50 ms | HAProxy adds ms | sluice adds ms | sluice added / HAProxy added | same by avg | split added / HAProxy added |" + controlCols + "\n")
		b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|" + controlSep + "\n")
		for _, i := range one {
			c := cells[i]
			d, h, s, sp, hb := results[i]["direct"], results[i]["haproxy"], results[i]["sluice"], results[i]["split"], results[i]["haproxy-b"]
			p50 := func(r *result) float64 {
				if !ok(r) {
					return math.NaN()
				}
				return r.sb.p50
			}
			avg := func(r *result) float64 {
				if !ok(r) {
					return math.NaN()
				}
				return r.sb.avg
			}
			hAdd, sAdd, spAdd, hbAdd := p50(h)-p50(d), p50(s)-p50(d), p50(sp)-p50(d), p50(hb)-p50(d)
			control := ""
			if st.control {
				control = " " + x(hbAdd/hAdd, hAdd > 0) + " |"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |%s\n",
				shortName[c.workload], c.psMode, ms(p50(d)), ms(p50(h)), ms(p50(s)), ms(p50(sp)), ms(hAdd), ms(sAdd),
				x(sAdd/hAdd, hAdd > 0), x((avg(s)-avg(d))/(avg(h)-avg(d)), avg(h)-avg(d) > 0), x(spAdd/hAdd, hAdd > 0), control)
			verdict.latency.addRatio(sAdd/hAdd, hAdd > 0 && !math.IsNaN(sAdd))
			verdict.latencyControl.addRatio(hbAdd/hAdd, hAdd > 0 && !math.IsNaN(hbAdd))
		}
	}
	if !st.quick {
		b.WriteString(verdict.render(st.control))
	}

	b.WriteString(`
Notes:
- qps is sysbench's queries per second (every statement, including BEGIN/COMMIT); p95 and p50 are per sysbench event
  (one point select; a whole transaction of ~14 (read_only) or ~18 (read_write) statements).
- direct and HAProxy log in as the service account and reach the master only. Both sluices log the app user in
  through the auth server. "sluice" has consistency = "strong": every statement goes to the master, the backend
  HAProxy forwards to, so sluice/HAProxy compares the two proxies on the same work. "split" is the default
  configuration: plain reads outside transactions go to the 2 replicas (point_select), while read_only and
  read_write run in transactions and stay on the master ("split to replicas" is the share of its statements
  routed to replicas, from its /metrics; the ~1% there at 64 threads with ps auto are the COM_STMT_PREPAREs of
  the selects, which sysbench sends at connect, outside a transaction). On this one machine the replicas share
  the cores with the master, so the split's point selects cost the box more CPU than the master alone.
- each proxy is a process of its own: its CPU is utime+stime of its /proc/<pid>/stat around its run (for a sluice
  its health probes and the run's logins included) divided by sysbench's query count; a sluice's RSS is the peak
  VmRSS of its process sampled during the run.
- "other work" is the busy CPU time of /proc/stat (interrupts included) minus what this process, sysbench, the
  mysqlds and the proxies were charged, in cores, the highest of the cell's runs. Kernel work charged to no
  process (network softirqs, kworkers) keeps it at ~0.1 on a quiet machine; clearly more means other work took
  CPU from the benchmark and makes that cell's comparison unreliable.
- HAProxy runs in TCP mode with Debian's default thread count (one per CPU); every process (mysqld ×4, sysbench,
  a sluice or HAProxy) shares the same cores, so a proxy's CPU is taken from the database server's.
`)
	if len(notes) > 0 {
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
	}
	return b.String()
}

// mustShow tallies the report against issue 4's two throughput and
// latency must-shows, for sluice and for the A/A control, so that a reader
// sees at once how often a proxy identical to HAProxy meets the same bar in
// the same run.
type mustShow struct {
	// throughput: sluice/HAProxy qps in the cells at 16 and 64 threads
	// (bar: every one ≥ 1.00x); latency: sluice's added p50 over
	// HAProxy's at one thread (bar: every one ≤ 1.50x).
	throughput, throughputControl ratios
	latency, latencyControl       ratios
	// cpu: the proxy's CPU per statement over HAProxy's, in every cell:
	// the cost itself, which the machine's noise moves less than qps.
	cpu, cpuControl ratios
}

// ratios collects the per-cell ratios of one comparison.
type ratios []float64

func (r *ratios) add(a, b *result) {
	if ok(a) && ok(b) && b.sb.qps > 0 {
		*r = append(*r, a.sb.qps/b.sb.qps)
	}
}

func (r *ratios) addCPU(a, b *result) {
	if ok(a) && ok(b) && a.hasCPU && b.hasCPU && b.cpuPer1k() > 0 {
		*r = append(*r, a.cpuPer1k()/b.cpuPer1k())
	}
}

func (r *ratios) addRatio(v float64, valid bool) {
	if valid && !math.IsNaN(v) && !math.IsInf(v, 0) {
		*r = append(*r, v)
	}
}

// summary says in how many cells the ratio met the bar (at least bar when
// atLeast, else at most bar), and the lowest and highest ratio.
func (r ratios) summary(bar float64, atLeast bool) string {
	if len(r) == 0 {
		return "no cells"
	}
	met := 0
	for _, v := range r {
		if atLeast && v >= bar || !atLeast && v <= bar {
			met++
		}
	}
	return fmt.Sprintf("%d of %d cells (range %.2fx to %.2fx)", met, len(r), slices.Min(r), slices.Max(r))
}

// median is the middle ratio (the mean of the middle two for an even
// count); NaN for none.
func (r ratios) median() float64 {
	if len(r) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(r))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func (m mustShow) render(control bool) string {
	var b strings.Builder
	b.WriteString("\nAgainst the bars of issue 4 (every cell at 16 and 64 threads ≥ 1.00x of HAProxy's qps; every one-thread cell's added p50 ≤ 1.50x of HAProxy's):\n\n")
	fmt.Fprintf(&b, "- throughput, sluice/HAProxy ≥ 1.00x: %s\n", m.throughput.summary(1, true))
	if control {
		fmt.Fprintf(&b, "- throughput, A/A control HAProxy-b/HAProxy ≥ 1.00x: %s\n", m.throughputControl.summary(1, true))
	}
	fmt.Fprintf(&b, "- one thread, sluice added / HAProxy added ≤ 1.50x: %s\n", m.latency.summary(1.5, false))
	if control {
		fmt.Fprintf(&b, "- one thread, A/A control HAProxy-b added / HAProxy added ≤ 1.50x: %s\n", m.latencyControl.summary(1.5, false))
	}
	fmt.Fprintf(&b, "- proxy CPU per statement, sluice/HAProxy ≤ 1.00x: %s, median %.2fx\n", m.cpu.summary(1, false), m.cpu.median())
	if control {
		fmt.Fprintf(&b, "- proxy CPU per statement, A/A control HAProxy-b/HAProxy ≤ 1.00x: %s, median %.2fx\n", m.cpuControl.summary(1, false), m.cpuControl.median())
		b.WriteString("- HAProxy-b is a second HAProxy process configured exactly as the first: its ratios are 1.00x but for the run-to-run\n" +
			"  noise of this machine, so a sluice ratio inside the control's range is not told apart from HAProxy's cost.\n")
	}
	return b.String()
}

// geoMean accumulates the geometric mean of a/b qps ratios.
type geoMean struct {
	logSum float64
	n      int
}

func (g *geoMean) add(a, b *result) {
	if ok(a) && ok(b) && b.sb.qps > 0 {
		g.logSum += math.Log(a.sb.qps / b.sb.qps)
		g.n++
	}
}

func (g *geoMean) value() float64 { return math.Exp(g.logSum / float64(g.n)) }

func (g *geoMean) String() string {
	if g.n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2fx over %d cells", g.value(), g.n)
}

func ok(r *result) bool { return r != nil && r.err == nil && r.sb.queries > 0 }

func qps(r *result) string {
	if !ok(r) {
		return "ERR"
	}
	return strconv.FormatFloat(r.sb.qps, 'f', 0, 64)
}

func p95(r *result) string {
	if !ok(r) {
		return "–"
	}
	return strconv.FormatFloat(r.sb.p95, 'f', 2, 64)
}

func ratio(a, b *result) string {
	if !ok(a) || !ok(b) || b.sb.qps == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2fx", a.sb.qps/b.sb.qps)
}

func cpu(r *result) string {
	if !ok(r) || !r.hasCPU {
		return "–"
	}
	return strconv.FormatFloat(r.cpuPer1k(), 'f', 4, 64)
}

func rss(r *result) string {
	if !ok(r) || r.rssKB == 0 {
		return "–"
	}
	return strconv.FormatFloat(float64(r.rssKB)/1024, 'f', 1, 64)
}

func share(r *result) string {
	if !ok(r) || r.replica < 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*r.replica)
}

// other is the highest "other work" of a cell's runs.
func other(rs ...*result) string {
	m, seen := 0.0, false
	for _, r := range rs {
		if r != nil && !math.IsNaN(r.otherCores) {
			m, seen = max(m, r.otherCores), true
		}
	}
	if !seen {
		return "?"
	}
	return strconv.FormatFloat(m, 'f', 2, 64)
}

func ms(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func x(v float64, valid bool) string {
	if !valid || math.IsNaN(v) || math.IsInf(v, 0) {
		return "–"
	}
	return fmt.Sprintf("%.2fx", v)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}
