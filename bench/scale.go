package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
)

// The scale cells: oltp_point_select and oltp_read_only at 1,000 and 2,000
// sysbench threads (BENCH_SCALE_THREADS), both ps modes, against direct,
// HAProxy, the A/A control and a sluice whose pool holds at most
// scalePool connections per backend: the scale a multiplexing proxy
// exists for (issue 24).
const (
	scalePool = 64
	// scaleProbes is how many connections a sluice holds to each backend
	// besides its pool: the health prober's control connection.
	scaleProbes = 1
	// threadInitTimeout is sysbench's --thread-init-timeout for the scale
	// cells where sysbench has it (1.1 and later; 1.0 waits a fixed 30 s
	// for its threads to connect).
	threadInitTimeout = 120
)

// scaleOutcome is the scale cells: per cell, each target's median run,
// and what the report needs to judge them.
type scaleOutcome struct {
	cells   []cell
	results []map[string]*result
	// backends name the servers polled for Threads_connected, in the
	// order of result.peaks; others are their Threads_connected before
	// the scale cells' sluice started (replication, this process's root
	// connections), which the bound on sluice's connections adds to.
	backends []string
	others   []int64
	// setup notes how the servers and sysbench were set up for the cells.
	setup         []string
	total, failed int
	elapsed       time.Duration
}

func scaleMatrix(threads []int) []cell {
	var cells []cell
	for _, w := range []string{"oltp_point_select", "oltp_read_only"} {
		for _, th := range threads {
			for _, m := range []string{"auto", "disable"} {
				cells = append(cells, cell{w, th, m})
			}
		}
	}
	return cells
}

// runScale runs the scale cells. Failed runs (a sysbench that never gets
// its threads connected, say) are results of their cell, not errors of
// the bench; only a bench that cannot set the cells up returns an error.
func (e *benchEnv) runScale() (*scaleOutcome, error) {
	begin := time.Now()
	ctx, st, logf := e.ctx, e.st, e.logf
	maxThreads := slices.Max(st.scaleThreads)
	o := &scaleOutcome{cells: scaleMatrix(st.scaleThreads)}
	restore, err := e.raiseServerLimits(maxThreads, o)
	if err != nil {
		return nil, err
	}
	defer restore()

	backends := append([]*sandbox.Server{e.topo.Master}, e.topo.Replicas...)
	for _, s := range backends {
		o.backends = append(o.backends, s.Name)
	}
	// Nothing of sluice's is connected yet (the classic matrix's sluices
	// are stopped, HAProxy holds no idle backend connections).
	o.others = baselineThreads(ctx, backends)
	logf("scale cells: backends' Threads_connected before their sluice starts: %v %v", o.backends, o.others)

	sl, err := e.startSluiceTarget("sluice-p64", "",
		[]string{fmt.Sprintf("max_client_connections = %d", max(10000, maxThreads+100))},
		// 2,000 clients on 64 connections queue for them: a statement
		// (or a transaction) waits about clients / throughput, seconds on
		// this machine, so the pool wait is set for that queue, as a DBA
		// running this many clients would.
		[]string{`consistency = "strong"`, fmt.Sprintf("pool_size = %d", scalePool), `pool_wait_timeout = "60s"`})
	if err != nil {
		return nil, err
	}
	defer e.stopProc(sl.proc)
	has, err := e.haproxies()
	if err != nil {
		return nil, err
	}
	targets := append([]target{e.direct, has[0], sl}, has[1:]...)
	if err := e.warmUp(targets); err != nil {
		return nil, err
	}
	opts := runOpts{percentile: 99, initWait: 30 * time.Second}
	if e.sb.has(ctx, "--thread-init-timeout=1") {
		opts.extra = []string{"--thread-init-timeout=" + strconv.Itoa(threadInitTimeout)}
		opts.initWait = threadInitTimeout * time.Second
		o.setup = append(o.setup, fmt.Sprintf("sysbench --thread-init-timeout=%d", threadInitTimeout))
	} else {
		o.setup = append(o.setup, "this sysbench has no --thread-init-timeout: it gives its threads a fixed 30 s to connect, and a run where they take longer fails")
	}

	o.results = make([]map[string]*result, len(o.cells))
	o.total = len(o.cells) * len(targets) * st.scaleRounds
	done := 0
	for i, c := range o.cells {
		runs := map[string][]*result{}
		for round := range st.scaleRounds {
			for k := range targets {
				t := targets[(i+round+k)%len(targets)]
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				settle(ctx, backends, o.others, logf)
				logFrom := fileSize(t.logPath())
				poll := startBackendPoller(ctx, backends, 200*time.Millisecond)
				r := measure(ctx, e.sb, t, c, st.seconds, ownPIDs(e.topo, e.procs...), opts)
				r.peaks = poll.stop()
				if r.err != nil && t.sluice() {
					r.proxyNote = t.proc.failureNote(logFrom)
				}
				runs[t.name] = append(runs[t.name], r)
				done++
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if r.err != nil {
					o.failed++
				}
				logf("[scale %d/%d] %s, %s: %s", done, o.total, c.label(), t.name, scaleLine(r))
			}
		}
		o.results[i] = map[string]*result{}
		for name, rs := range runs {
			o.results[i][name] = medianRun(rs)
		}
	}
	o.elapsed = time.Since(begin)
	return o, nil
}

// scaleLine is a run's progress line.
func scaleLine(r *result) string {
	var b strings.Builder
	if r.err != nil {
		b.WriteString("FAILED: " + errSummary(r.err))
	} else {
		fmt.Fprintf(&b, "%.0f qps, p95 %.2f ms, p99 %.2f ms, %d ignored errors", r.sb.qps, r.sb.p95, r.sb.p99, r.sb.ignored)
	}
	b.WriteString("; peak Threads_connected")
	for _, p := range r.peaks {
		fmt.Fprintf(&b, " %s %d", p.name, p.threads)
	}
	if r.rssKB > 0 {
		fmt.Fprintf(&b, "; RSS peak %.1f MB, end %.1f MB", float64(r.rssKB)/1024, float64(r.rssEndKB)/1024)
	}
	return b.String()
}

// raiseServerLimits lets direct and HAProxy runs pass maxThreads
// connections, each with sysbench's prepared statements, to the master:
// max_connections and max_prepared_stmt_count go up (as root) for the
// scale cells, and back when the returned function runs.
func (e *benchEnv) raiseServerLimits(maxThreads int, o *scaleOutcome) (restore func(), err error) {
	m := e.topo.Master
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	// sysbench's read_only prepares ~22 statements per thread with 4
	// tables; the default bound (16,382) is below 2,000 threads' need.
	want := map[string]int{
		"max_connections":         max(3000, maxThreads+1000),
		"max_prepared_stmt_count": max(16382, maxThreads*64),
	}
	old := map[string]string{}
	var set []string
	for _, name := range []string{"max_connections", "max_prepared_stmt_count"} {
		v, err := m.Variable(ctx, name)
		if err != nil {
			return nil, err
		}
		old[name] = v
		set = append(set, fmt.Sprintf("SET GLOBAL %s = %d", name, want[name]))
	}
	if err := m.Exec(ctx, set...); err != nil {
		return nil, err
	}
	files, _ := m.Variable(ctx, "open_files_limit")
	o.setup = append(o.setup, fmt.Sprintf("master: max_connections %s → %d, max_prepared_stmt_count %s → %d (open_files_limit %s)",
		old["max_connections"], want["max_connections"], old["max_prepared_stmt_count"], want["max_prepared_stmt_count"], files))
	if n, err := strconv.Atoi(files); err == nil && n < want["max_connections"] {
		e.logf("warning: the master's open_files_limit is %d, below max_connections %d", n, want["max_connections"])
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := m.Exec(ctx, "SET GLOBAL max_connections = "+old["max_connections"],
			"SET GLOBAL max_prepared_stmt_count = "+old["max_prepared_stmt_count"]); err != nil {
			e.logf("restoring the master's limits: %v", err)
		}
	}, nil
}

// backendPeak is one backend's highest Threads_connected and
// Prepared_stmt_count over a run; -1 when never read.
type backendPeak struct {
	name              string
	threads, prepared int64
	samples           int
}

// backendStatus reads Threads_connected and Prepared_stmt_count of s as
// root.
func backendStatus(ctx context.Context, s *sandbox.Server) (threads, prepared int64, err error) {
	db, err := s.RootDB()
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Threads_connected', 'Prepared_stmt_count')")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return 0, 0, err
		}
		switch name {
		case "Threads_connected":
			threads = v
		case "Prepared_stmt_count":
			prepared = v
		}
	}
	return threads, prepared, rows.Err()
}

// baselineThreads is each server's lowest Threads_connected over a few
// samples 200 ms apart (-1 when unreadable).
func baselineThreads(ctx context.Context, servers []*sandbox.Server) []int64 {
	out := make([]int64, len(servers))
	for i := range out {
		out[i] = -1
	}
	for k := range 5 {
		if k > 0 {
			select {
			case <-ctx.Done():
				return out
			case <-time.After(200 * time.Millisecond):
			}
		}
		for i, s := range servers {
			if n, _, err := backendStatus(ctx, s); err == nil && (out[i] < 0 || n < out[i]) {
				out[i] = n
			}
		}
	}
	return out
}

// settle waits (at most 60 s) until the connections of the previous run
// have left the servers: each server's Threads_connected at most its
// baseline plus what an idle sluice may keep open, so that a run's peak is
// its own.
func settle(ctx context.Context, servers []*sandbox.Server, others []int64, logf func(string, ...any)) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		busy := ""
		for i, s := range servers {
			n, _, err := backendStatus(ctx, s)
			if err == nil && others[i] >= 0 && n > others[i]+scalePool+scaleProbes {
				busy += fmt.Sprintf(" %s %d", s.Name, n)
			}
		}
		if busy == "" || ctx.Err() != nil {
			return
		}
		if time.Now().After(deadline) {
			logf("warning: the previous run's connections are still there after 60 s: Threads_connected%s", busy)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// backendPoller samples servers' status, each server in a goroutine of
// its own so that a slow one delays only its own samples.
type backendPoller struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	peaks []backendPeak
}

func startBackendPoller(ctx context.Context, servers []*sandbox.Server, every time.Duration) *backendPoller {
	p := &backendPoller{stopc: make(chan struct{}), peaks: make([]backendPeak, len(servers))}
	for i, s := range servers {
		p.peaks[i] = backendPeak{name: s.Name, threads: -1, prepared: -1}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			pk := &p.peaks[i] // this goroutine's alone until stop
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				if th, pr, err := backendStatus(ctx, s); err == nil {
					pk.threads, pk.prepared = max(pk.threads, th), max(pk.prepared, pr)
					pk.samples++
				}
				select {
				case <-p.stopc:
					return
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	return p
}

func (p *backendPoller) stop() []backendPeak {
	close(p.stopc)
	p.wg.Wait()
	return p.peaks
}

// has reports whether this sysbench accepts the general option opt.
func (sb *sysbench) has(ctx context.Context, opt string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sb.bin, opt, "cpu", "--cpu-max-prime=10", "--events=1", "--time=0", "run").CombinedOutput()
	return err == nil && !strings.Contains(string(out), "invalid option")
}

// scaleTargets are the scale cells' targets in the report's order.
var scaleTargets = []struct{ name, label string }{
	{"direct", "direct"},
	{"haproxy", "HAProxy"},
	{"sluice-p64", "sluice (pool_size 64)"},
	{"haproxy-b", "HAProxy-b (A/A control)"},
}

func renderScale(st settings, o *scaleOutcome) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d cells × %d targets, %d round(s) each (BENCH_SCALE_ROUNDS), %d s per run; took %v. "+
		"sluice has consistency = \"strong\", pool_size = %d and pool_wait_timeout = \"60s\"; sysbench runs with --percentile=99 and --histogram=on "+
		"(p95 from the histogram, as sysbench computes its percentiles). The backends' status is polled as root every 200 ms.\n\n",
		len(o.cells), o.total/max(1, len(o.cells)*st.scaleRounds), st.scaleRounds, st.seconds, o.elapsed.Round(time.Second), scalePool)
	for _, s := range o.setup {
		b.WriteString("- " + s + "\n")
	}
	fmt.Fprintf(&b, "- Threads_connected before the scale cells' sluice started (replication, this process's root connections): %s\n\n",
		joinPeaks(o.backends, o.others))
	names := strings.Join(o.backends, " / ")
	b.WriteString("| workload | thr | ps | target | qps | /HAProxy | p95 ms | p99 ms | errors | peak Threads_connected " + names +
		" | peak Prepared_stmt_count " + names + " | sluice RSS MB peak / end | proxy CPU s/1k stmts | other work, cores |\n")
	b.WriteString("|---|--:|---|---|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|\n")
	var notes []string
	for i, c := range o.cells {
		h := o.results[i]["haproxy"]
		for _, tg := range scaleTargets {
			r := o.results[i][tg.name]
			if r == nil {
				continue
			}
			rssCol := "–"
			if r.rssKB > 0 {
				rssCol = fmt.Sprintf("%.1f / %.1f", float64(r.rssKB)/1024, float64(r.rssEndKB)/1024)
			}
			cpuCol := "–"
			if r.hasCPU && r.sb.queries > 0 {
				cpuCol = strconv.FormatFloat(r.cpuPer1k(), 'f', 4, 64)
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				shortName[c.workload], c.threads, c.psMode, tg.label, qps(r), ratio(r, h), p95(r), p99(r), scaleErrors(r),
				peakCol(r.peaks, false), peakCol(r.peaks, true), rssCol, cpuCol, other(r))
			if r.err != nil {
				note := fmt.Sprintf("%s, %s: failed: %s", c.label(), tg.name, errSummary(r.err))
				if r.proxyNote != "" {
					note += "; " + r.proxyNote
				}
				notes = append(notes, note)
			}
		}
	}
	b.WriteString(o.tally())
	if len(notes) > 0 {
		b.WriteString("\nFailed runs (counted as errors of their cell):\n\n")
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
	}
	return b.String()
}

// tally judges the cells at the largest thread count against issue 24's
// bars: 0 errors, each backend's Threads_connected ≤ pool + probes, and
// sluice's qps ≥ HAProxy's, with the A/A control beside.
func (o *scaleOutcome) tally() string {
	top := 0
	for _, c := range o.cells {
		top = max(top, c.threads)
	}
	var cells []int
	for i, c := range o.cells {
		if c.threads == top {
			cells = append(cells, i)
		}
	}
	var clean, within, runs, haClean, haFull int
	var qpsR, ctlR ratios
	var peaks []string
	for _, i := range cells {
		c, res := o.cells[i], o.results[i]
		s, h, hb := res["sluice-p64"], res["haproxy"], res["haproxy-b"]
		if s == nil {
			continue
		}
		runs++
		if ok(s) && s.sb.ignored == 0 && s.sb.reconnects == 0 {
			clean++
		}
		if peaksWithin(s.peaks, o.others) {
			within++
		}
		peaks = append(peaks, fmt.Sprintf("%s %s", c.label(), peakCol(s.peaks, false)))
		qpsR.add(c.label(), s, h)
		ctlR.add(c.label(), hb, h)
		if ok(h) && h.sb.ignored == 0 {
			haClean++
		}
		if h != nil && len(h.peaks) > 0 && o.others[0] >= 0 && h.peaks[0].threads >= o.others[0]+int64(top) {
			haFull++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nAgainst issue 24's bars at %s threads, both ps modes (sluice with pool_size = %d):\n\n", thousands(top), scalePool)
	fmt.Fprintf(&b, "- 0 errors: %d of %d sluice cells, %s\n", clean, runs, metWord(clean == runs && runs > 0))
	fmt.Fprintf(&b, "- Threads_connected ≤ %d + probes (%d) per backend, over the baseline above: %d of %d sluice cells, %s (peaks %s)\n",
		scalePool, scaleProbes, within, runs, metWord(within == runs && runs > 0), strings.Join(peaks, "; "))
	qpsMet := qpsR.count(1, true)
	fmt.Fprintf(&b, "- sluice qps ≥ HAProxy's: %d of %d cells, %s", qpsMet, runs, metWord(qpsMet == runs && runs > 0))
	if len(qpsR) < runs {
		fmt.Fprintf(&b, " (%d without a qps of both)", runs-len(qpsR))
	}
	if len(qpsR) > 0 {
		fmt.Fprintf(&b, "; sluice/HAProxy %s", qpsR.summary(1, true))
	}
	if len(ctlR) > 0 {
		fmt.Fprintf(&b, "; A/A control HAProxy-b/HAProxy ≥ 1.00x: %s", ctlR.summary(1, true))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "- HAProxy passes %s connections through: %d of %d cells without errors, %d with the master's peak Threads_connected ≥ baseline + %s\n",
		thousands(top), haClean, len(cells), haFull, thousands(top))
	return b.String()
}

// peaksWithin reports whether every backend's peak Threads_connected is at
// most its baseline plus a sluice's pool and probes; false when a peak or
// a baseline was never read.
func peaksWithin(peaks []backendPeak, others []int64) bool {
	if len(peaks) == 0 || len(peaks) != len(others) {
		return false
	}
	for i, p := range peaks {
		if p.threads < 0 || others[i] < 0 || p.threads > others[i]+scalePool+scaleProbes {
			return false
		}
	}
	return true
}

func peakCol(peaks []backendPeak, prepared bool) string {
	if len(peaks) == 0 {
		return "–"
	}
	parts := make([]string, len(peaks))
	for i, p := range peaks {
		v := p.threads
		if prepared {
			v = p.prepared
		}
		parts[i] = "?"
		if v >= 0 {
			parts[i] = strconv.FormatInt(v, 10)
		}
	}
	return strings.Join(parts, " / ")
}

func joinPeaks(names []string, vs []int64) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, vs[i])
	}
	return strings.Join(parts, ", ")
}

// scaleErrors is the errors column: a failed run, or sysbench's ignored
// errors and reconnects.
func scaleErrors(r *result) string {
	switch {
	case r.err != nil:
		return "run failed"
	case r.sb.ignored == 0 && r.sb.reconnects == 0:
		return "0"
	}
	return fmt.Sprintf("%d ignored, %d reconnects", r.sb.ignored, r.sb.reconnects)
}

func p99(r *result) string {
	if !ok(r) || math.IsNaN(r.sb.p99) {
		return "–"
	}
	return strconv.FormatFloat(r.sb.p99, 'f', 2, 64)
}

// thousands writes n with a comma between thousands (2,000).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (t target) logPath() string {
	if t.proc == nil {
		return ""
	}
	return t.proc.logPath
}

func fileSize(path string) int64 {
	if path == "" {
		return 0
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// failureNote says whether the sluice c has exited and what it logged
// from offset from on about failures: warnings and errors, and failed
// logins (logged at info), the three most frequent with their counts.
func (c *child) failureNote(from int64) string {
	var parts []string
	select {
	case <-c.done:
		parts = append(parts, c.name+" EXITED")
	default:
	}
	f, err := os.Open(c.logPath)
	if err != nil {
		return strings.Join(parts, "; ")
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return strings.Join(parts, "; ")
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(io.LimitReader(f, 64<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Level != "warn" && m.Level != "error" && m.Msg != "login failed" {
			continue
		}
		key := m.Level + " " + strconv.Quote(m.Msg)
		if m.Error != "" {
			key += ": " + m.Error
		}
		counts[key]++
	}
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
	for _, k := range keys[:min(3, len(keys))] {
		n := counts[k]
		if len(k) > 300 {
			k = k[:300] + "…"
		}
		parts = append(parts, fmt.Sprintf("%s logged %d× %s", c.name, n, k))
	}
	return strings.Join(parts, "; ")
}
