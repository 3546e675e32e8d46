package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The rules phase measures what query rules cost and what the result cache
// gains, on oltp_point_select, beside direct MariaDB, HAProxy and the A/A
// control in the same run:
//
//   - "sluice" is the classic matrix's sluice (consistency = "strong", no
//     rules);
//   - "sluice-rules20" is the same with 20 rules loaded, none of which
//     matches sysbench's statements: its CPU per statement against
//     "sluice"'s is what evaluating rules costs a statement they leave
//     alone, to be read beside HAProxy-b/HAProxy (what the run can tell
//     apart at all);
//   - "sluice-cached" has one rule with cache_ttl on the point select: a
//     hit is answered by sluice and costs mysqld nothing, so its qps is
//     compared with direct's.

// rulesCells are the rules phase's cells.
func rulesCells() []cell {
	var cells []cell
	for _, th := range []int{1, 16} {
		for _, m := range []string{"auto", "disable"} {
			cells = append(cells, cell{"oltp_point_select", th, m})
		}
	}
	return cells
}

// twentyRules are 20 [[rule]] entries that match no statement sysbench
// sends, spread over the match fields a rule set would use: patterns,
// digest ids, users, schemas and client addresses.
func twentyRules() string {
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "\n[[rule]]\nname = \"bench-nomatch-%02d\"\n", i)
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, "pattern = '(?i)^SELECT .* FROM report_%d '\nroute = \"replica\"\n", i)
		case 1:
			fmt.Fprintf(&b, "digest = \"%016x\"\nerror = true\n", uint64(0x9e3779b97f4a7c15)*uint64(i+1))
		case 2:
			fmt.Fprintf(&b, "user = \"batch%d\"\nroute = \"master\"\n", i)
		case 3:
			fmt.Fprintf(&b, "schema = \"archive%d\"\nlog = true\n", i)
		case 4:
			fmt.Fprintf(&b, "client_address = \"10.%d.0.0/16\"\nerror = true\n", i)
		}
	}
	return b.String()
}

// cacheRule caches sysbench's point select (text and prepared).
const cacheRule = `
[[rule]]
name = "bench-cache-point-select"
pattern = '^SELECT c FROM sbtest[0-9]+ WHERE id='
kind = "read"
cache_ttl = "60s"
`

// rulesOutcome is the rules phase: per cell, each target's median run, and
// the cached sluice's hit ratio over the whole phase.
type rulesOutcome struct {
	cells         []cell
	results       []map[string]*result
	total, failed int
	hits, misses  float64
	hitsKnown     bool
}

func (e *benchEnv) runRules() (*rulesOutcome, error) {
	ctx, st, logf := e.ctx, e.st, e.logf
	strong := []string{`consistency = "strong"`}
	sl, err := e.startSluiceTargetWith("sluice", nil, strong, "")
	if err != nil {
		return nil, err
	}
	defer e.stopProc(sl.proc)
	r20, err := e.startSluiceTargetWith("sluice-rules20", nil, strong, twentyRules())
	if err != nil {
		return nil, err
	}
	defer e.stopProc(r20.proc)
	cached, err := e.startSluiceTargetWith("sluice-cached", nil, strong, cacheRule)
	if err != nil {
		return nil, err
	}
	defer e.stopProc(cached.proc)
	has, err := e.haproxies()
	if err != nil {
		return nil, err
	}
	targets := append([]target{e.direct, has[0], sl, r20, cached}, has[1:]...)
	if err := e.warmUp(targets); err != nil {
		return nil, err
	}
	h0, m0, ok0 := scrapeCache(cached.proc.metricsURL)
	o := &rulesOutcome{cells: rulesCells()}
	o.results = make([]map[string]*result, len(o.cells))
	o.total = len(o.cells) * len(targets) * st.rounds
	done := 0
	for i, c := range o.cells {
		runs := map[string][]*result{}
		for round := range st.rounds {
			for k := range targets {
				t := targets[(i+round+k)%len(targets)]
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				r := measure(ctx, e.sb, t, c, st.seconds, ownPIDs(e.topo, e.procs...), runOpts{})
				runs[t.name] = append(runs[t.name], r)
				done++
				if r.err != nil {
					o.failed++
					logf("[rules %d/%d] %s %d thr %s %s: FAILED: %v", done, o.total, c.workload, c.threads, c.psMode, t.name, r.err)
					continue
				}
				logf("[rules %d/%d] %s %d thr %s %s: %.0f qps, p95 %.2f ms, CPU %s s/1k stmts",
					done, o.total, c.workload, c.threads, c.psMode, t.name, r.sb.qps, r.sb.p95, cpu(r))
			}
		}
		o.results[i] = map[string]*result{}
		for name, rs := range runs {
			o.results[i][name] = medianRun(rs)
		}
	}
	h1, m1, ok1 := scrapeCache(cached.proc.metricsURL)
	o.hits, o.misses, o.hitsKnown = h1-h0, m1-m0, ok0 && ok1
	return o, nil
}

var reCache = regexp.MustCompile(`(?m)^sluice_cache_(hits|misses)_total(?:\{[^}]*\})?\s+([0-9.e+]+)`)

// scrapeCache reads the result cache's hit and miss counters from /metrics.
func scrapeCache(url string) (hits, misses float64, ok bool) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, 0, false
	}
	seen := 0
	for _, m := range reCache.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "hits" {
			hits += v
		} else {
			misses += v
		}
		seen++
	}
	return hits, misses, seen > 0
}

// renderRules is the rules phase's part of the report.
func renderRules(o *rulesOutcome) string {
	var b strings.Builder
	b.WriteString("sluice, sluice-rules20 and sluice-cached run with `consistency = \"strong\"` (every miss on the master, as HAProxy); " +
		"sluice-rules20 has 20 rules that match nothing; sluice-cached one rule with `cache_ttl = \"60s\"` on the point select.\n\n")
	b.WriteString("| cell | direct qps | HAProxy qps | sluice qps | rules20 qps | cached qps | cached/direct | CPU/1k sluice | CPU/1k rules20 | rules20/sluice CPU | HAProxy-b/HAProxy CPU |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	var gain, cost, control ratios
	for i, c := range o.cells {
		rs := o.results[i]
		d, ha, hb, sl, r20, ca := rs["direct"], rs["haproxy"], rs["haproxy-b"], rs["sluice"], rs["sluice-rules20"], rs["sluice-cached"]
		gain.add(c.label(), ca, d)
		cost.addCPU(c.label(), r20, sl)
		control.addCPU(c.label(), hb, ha)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.label(), qps(d), qps(ha), qps(sl), qps(r20), qps(ca),
			x(gain.get(c.label()), true), cpu(sl), cpu(r20), x(cost.get(c.label()), true), x(control.get(c.label()), true))
	}
	b.WriteString("\n")
	if o.hitsKnown && o.hits+o.misses > 0 {
		fmt.Fprintf(&b, "- result cache over the phase: %.0f hits, %.0f misses (hit ratio %.1f%%)\n", o.hits, o.misses, 100*o.hits/(o.hits+o.misses))
	} else {
		b.WriteString("- result cache: sluice-cached exported no sluice_cache_hits_total/misses_total (no cache in this build?)\n")
	}
	fmt.Fprintf(&b, "- cached/direct qps: %s\n", gain.summary(1, true))
	fmt.Fprintf(&b, "- 20 rules' cost, rules20/sluice CPU per statement: median %s; the control HAProxy-b/HAProxy: median %s (%s)\n",
		x(cost.median(), len(cost.values()) > 0), x(control.median(), len(control.values()) > 0), spread(control))
	if o.failed > 0 {
		fmt.Fprintf(&b, "- %d of %d runs failed (see the log)\n", o.failed, o.total)
	}
	return b.String()
}

// spread prints the lowest and highest of r's values.
func spread(r ratios) string {
	v := r.values()
	if len(v) == 0 {
		return "no cells"
	}
	return fmt.Sprintf("%.2f–%.2fx over the cells", slices.Min(v), slices.Max(v))
}
