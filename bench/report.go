package main

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

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

func renderReport(st settings, f machineFacts, rep report) string {
	var b strings.Builder
	var phases []string
	switch {
	case st.quick:
		phases = append(phases, "quick (BENCH_QUICK=1): classic matrix of point_select at 16 threads")
	case st.classic:
		phases = append(phases, "classic matrix")
	}
	if st.scale {
		phases = append(phases, "scale cells")
	}
	if st.rules {
		phases = append(phases, "rules and cache")
	}
	if st.storm {
		phases = append(phases, "login storm")
	}
	fmt.Fprintf(&b, "# sluice benchmark, %s\n\n", f.started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- phases: %s; %d s per sysbench run, %d tables × %d rows, order of targets rotated per cell\n",
		strings.Join(phases, ", "), st.seconds, tables, tableSize)
	if st.classic && st.rounds > 1 {
		fmt.Fprintf(&b, "- %d rounds (BENCH_ROUNDS): each classic cell ran %d times against each target, interleaved; every figure is from that target's run of median qps in the cell\n",
			st.rounds, st.rounds)
	}
	fmt.Fprintf(&b, "- machine: %d CPUs (%s), kernel %s; idle CPU over 2 s before the start %s and after the last run %s"+
		" (less than 100%% = other work on the machine); load average before %s, after %s\n",
		f.nproc, f.cpuModel, f.kernel, pct(f.idleBefore), pct(f.idleAfter), f.loadBefore, f.loadAfter)
	fmt.Fprintf(&b, "- MariaDB %s (master + %d GTID replicas + auth server, sandbox package); %s; %s\n",
		f.mariadb, replicas, f.sysbench, f.haproxy)
	threads := "0, one processor until it needs one per CPU"
	if st.eventLoop {
		threads = "one per CPU"
	}
	if st.threads > 0 {
		threads = strconv.Itoa(st.threads)
	}
	threads += " (its GOMAXPROCS)"
	if st.eventLoop {
		threads += " and event_loop = true (GOMAXPROCS one more)"
	}
	rss := ""
	if rep.classic != nil {
		rss = fmt.Sprintf(", RSS %.1f MB before the first run", float64(f.rssStartKB)/1024)
	}
	fmt.Fprintf(&b, "- Go %s; sluice commit %s; each sluice a process of its own (`sluice run`) with threads = %s%s\n",
		strings.TrimPrefix(f.goVersion, "go"), f.commit, threads, rss)
	fmt.Fprintf(&b, "- wall time %v\n", f.finished.Sub(f.started).Round(time.Second))
	for _, e := range rep.errs {
		fmt.Fprintf(&b, "- ENDED WITH AN ERROR, %s\n", e)
	}
	if rep.classic != nil {
		b.WriteString("\n## Classic matrix\n\n")
		b.WriteString(renderClassic(st, rep.classic))
	}
	if rep.scale != nil {
		b.WriteString("\n## Scale cells\n\n")
		b.WriteString(renderScale(st, rep.scale))
	}
	if rep.rules != nil {
		b.WriteString("\n## Query rules and the result cache\n\n")
		b.WriteString(renderRules(rep.rules))
	}
	if rep.storm != nil {
		b.WriteString("\n## Login storm\n\n")
		b.WriteString(rep.storm.render())
	}
	return b.String()
}

// renderClassic is the classic matrix's part of the report: its table,
// the one-thread latencies and the tally against the bars.
func renderClassic(st settings, o *classicOutcome) string {
	var b strings.Builder
	cells, results := o.cells, o.results
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
			cpu(h), cpu(s), cpu(sp), rssMB(s), share(sp), other(d, h, s, sp, hb))
		gm.add(s, h)
		gmSplit.add(sp, h)
		gmControl.add(hb, h)
		label := c.label()
		if c.threads > 1 {
			verdict.throughput.add(label, s, h)
			verdict.throughputControl.add(label, hb, h)
		}
		verdict.cpu.addCPU(label, s, h)
		verdict.cpuControl.addCPU(label, hb, h)
		for _, name := range []string{"direct", "haproxy", "sluice", "split", "haproxy-b"} {
			r := results[i][name]
			if r == nil {
				continue
			}
			where := fmt.Sprintf("%s, %s", label, name)
			switch {
			case r.err != nil:
				notes = append(notes, where+": failed: "+errSummary(r.err))
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
			label := c.label()
			verdict.latency.addRatio(label, sAdd/hAdd, hAdd > 0 && !math.IsNaN(sAdd))
			verdict.latencyControl.addRatio(label, hbAdd/hAdd, hAdd > 0 && !math.IsNaN(hbAdd))
			verdict.oneCPU.addCPU(label, s, h)
			verdict.oneCPUControl.addCPU(label, hb, h)
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
	for _, n := range notes {
		b.WriteString("- " + n + "\n")
	}
	return b.String()
}

// label names a cell in the report's lists.
func (c cell) label() string {
	return fmt.Sprintf("%s %d thr %s", shortName[c.workload], c.threads, c.psMode)
}

// errSummary is the first line of a run's error and the distinct FATAL
// lines (at most three) of sysbench's output kept in it: the reason, which
// sysbench often spreads over two lines ("unable to connect ..." then the
// client library's error).
func errSummary(err error) string {
	first, rest, _ := strings.Cut(err.Error(), "\n")
	// Lines with an error code come first: with many threads failing,
	// the generic lines ("thread_init function failed") crowd them out.
	var coded, other []string
	for _, l := range strings.Split(rest, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case !strings.Contains(l, "FATAL") || slices.Contains(coded, l) || slices.Contains(other, l):
		case reErrCode.MatchString(l):
			coded = append(coded, l)
		default:
			other = append(other, l)
		}
	}
	fatal := slices.Concat(coded, other)
	if len(fatal) == 0 {
		return first
	}
	return first + ": " + strings.Join(fatal[:min(3, len(fatal))], " / ")
}

var reErrCode = regexp.MustCompile(`(?i)(error:? \d{4}|errno = \d)`)

// mustShow tallies the classic matrix against the bars of issue 24 (proxy
// CPU per statement) and of issue 4 (throughput, one-thread latency), for
// sluice and for the A/A control, so that a reader sees at once how often
// a proxy identical to HAProxy meets the same bar in the same run.
type mustShow struct {
	// throughput: sluice/HAProxy qps in the cells at 16 and 64 threads
	// (issue 4's bar: every one ≥ 1.00x); latency: sluice's added p50
	// over HAProxy's at one thread (issue 4's bar: every one ≤ 1.50x).
	throughput, throughputControl ratios
	latency, latencyControl       ratios
	// cpu: the proxy's CPU per statement over HAProxy's, in every cell:
	// the cost itself, which the machine's noise moves less than qps
	// (issue 24's bar: median ≤ 1.00x, no cell above 1.15x); oneCPU the
	// same in the one-thread cells (bar: every one ≤ 1.00x).
	cpu, cpuControl       ratios
	oneCPU, oneCPUControl ratios
}

// ratios collects the per-cell ratios of one comparison, each with the
// cell it was measured in.
type ratios []cellRatio

type cellRatio struct {
	cell string
	v    float64
}

func (r *ratios) add(cell string, a, b *result) {
	if ok(a) && ok(b) && b.sb.qps > 0 {
		*r = append(*r, cellRatio{cell, a.sb.qps / b.sb.qps})
	}
}

func (r *ratios) addCPU(cell string, a, b *result) {
	if ok(a) && ok(b) && a.hasCPU && b.hasCPU && b.cpuPer1k() > 0 {
		*r = append(*r, cellRatio{cell, a.cpuPer1k() / b.cpuPer1k()})
	}
}

func (r *ratios) addRatio(cell string, v float64, valid bool) {
	if valid && !math.IsNaN(v) && !math.IsInf(v, 0) {
		*r = append(*r, cellRatio{cell, v})
	}
}

func (r ratios) values() []float64 {
	vs := make([]float64, len(r))
	for i, c := range r {
		vs[i] = c.v
	}
	return vs
}

// count is how many of the ratios meet the bar (at least bar when
// atLeast, else at most bar).
func (r ratios) count(bar float64, atLeast bool) int {
	met := 0
	for _, c := range r {
		if atLeast && c.v >= bar || !atLeast && c.v <= bar {
			met++
		}
	}
	return met
}

// summary says in how many cells the ratio met the bar (at least bar when
// atLeast, else at most bar), and the lowest and highest ratio.
func (r ratios) summary(bar float64, atLeast bool) string {
	if len(r) == 0 {
		return "no cells"
	}
	vs := r.values()
	return fmt.Sprintf("%d of %d cells (range %.2fx to %.2fx)", r.count(bar, atLeast), len(r), slices.Min(vs), slices.Max(vs))
}

// above lists the cells whose ratio is over bar, highest first.
func (r ratios) above(bar float64) string {
	var over ratios
	for _, c := range r {
		if c.v > bar {
			over = append(over, c)
		}
	}
	if len(over) == 0 {
		return "none"
	}
	slices.SortFunc(over, func(a, b cellRatio) int { return cmp.Compare(b.v, a.v) })
	parts := make([]string, len(over))
	for i, c := range over {
		parts[i] = fmt.Sprintf("%s %.2fx", c.cell, c.v)
	}
	return strings.Join(parts, ", ")
}

// get is the ratio measured in cell, NaN when there is none.
func (r ratios) get(cell string) float64 {
	for _, c := range r {
		if c.cell == cell {
			return c.v
		}
	}
	return math.NaN()
}

// median is the middle ratio (the mean of the middle two for an even
// count); NaN for none.
func (r ratios) median() float64 {
	if len(r) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(r.values()))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func metWord(met bool) string {
	if met {
		return "met"
	}
	return "NOT met"
}

func (m mustShow) render(control bool) string {
	var b strings.Builder
	b.WriteString("\nAgainst issue 24's bars for proxy CPU per statement, sluice/HAProxy (median ≤ 1.00x over the classic cells and no cell above 1.15x; ≤ 1.00x in every one-thread cell):\n\n")
	med := m.cpu.median()
	fmt.Fprintf(&b, "- median ≤ 1.00x over the %d classic cells: median %s, %s (%s at or below 1.00x)", len(m.cpu), x(med, true), metWord(med <= 1), m.cpu.summary(1, false))
	if control {
		fmt.Fprintf(&b, "; A/A control HAProxy-b/HAProxy: median %s (%s)", x(m.cpuControl.median(), true), m.cpuControl.summary(1, false))
	}
	b.WriteString("\n")
	over := len(m.cpu) - m.cpu.count(1.15, false)
	fmt.Fprintf(&b, "- no cell above 1.15x: %d of %d cells above (%s), %s", over, len(m.cpu), m.cpu.above(1.15), metWord(over == 0 && len(m.cpu) > 0))
	if control {
		fmt.Fprintf(&b, "; control: %d of %d above (%s)", len(m.cpuControl)-m.cpuControl.count(1.15, false), len(m.cpuControl), m.cpuControl.above(1.15))
	}
	b.WriteString("\n")
	met := m.oneCPU.count(1, false)
	fmt.Fprintf(&b, "- one thread, ≤ 1.00x in all %d one-thread cells: %s, %s", len(m.oneCPU), m.oneCPU.summary(1, false), metWord(met == len(m.oneCPU) && met > 0))
	if control {
		fmt.Fprintf(&b, "; control: %s", m.oneCPUControl.summary(1, false))
	}
	b.WriteString("\n")
	if len(m.oneCPU) > 0 {
		b.WriteString("\n| one-thread cell | sluice CPU/HAProxy | sluice added p50 / HAProxy added |")
		if control {
			b.WriteString(" HAProxy-b CPU/HAProxy | HAProxy-b added p50 / HAProxy added |")
		}
		b.WriteString("\n|---|--:|--:|")
		if control {
			b.WriteString("--:|--:|")
		}
		b.WriteString("\n")
		for _, c := range m.oneCPU {
			fmt.Fprintf(&b, "| %s | %s | %s |", c.cell, x(c.v, true), x(m.latency.get(c.cell), true))
			if control {
				fmt.Fprintf(&b, " %s | %s |", x(m.oneCPUControl.get(c.cell), true), x(m.latencyControl.get(c.cell), true))
			}
			b.WriteString("\n")
		}
	}

	b.WriteString("\nAgainst the bars of issue 4 (every cell at 16 and 64 threads ≥ 1.00x of HAProxy's qps; every one-thread cell's added p50 ≤ 1.50x of HAProxy's):\n\n")
	fmt.Fprintf(&b, "- throughput, sluice/HAProxy ≥ 1.00x: %s\n", m.throughput.summary(1, true))
	if control {
		fmt.Fprintf(&b, "- throughput, A/A control HAProxy-b/HAProxy ≥ 1.00x: %s\n", m.throughputControl.summary(1, true))
	}
	fmt.Fprintf(&b, "- one thread, sluice added / HAProxy added ≤ 1.50x: %s\n", m.latency.summary(1.5, false))
	if control {
		fmt.Fprintf(&b, "- one thread, A/A control HAProxy-b added / HAProxy added ≤ 1.50x: %s\n", m.latencyControl.summary(1.5, false))
	}
	if control {
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

func rssMB(r *result) string {
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
