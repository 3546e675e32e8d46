package main

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

// sysbenchOut is the tail of a sysbench run with --percentile=99 and
// --histogram=on: 100 events, 90 at 1 ms, 6 at 2 ms, 3 at 4 ms, 1 at 8 ms.
const sysbenchOut = `Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       1.000 |**************************************** 90
       2.000 |***                                      6
       4.000 |*                                        3
       8.000 |                                         1

SQL statistics:
    queries performed:
        read:                            100
    transactions:                        100    (20.00 per sec.)
    queries:                             100    (20.00 per sec.)
    ignored errors:                      2      (0.40 per sec.)
    reconnects:                          0      (0.00 per sec.)

Latency (ms):
         min:                                    0.90
         avg:                                    1.30
         max:                                    8.10
         99th percentile:                        4.10
`

func TestParseSysbenchPercentiles(t *testing.T) {
	s, err := parseSysbench(sysbenchOut)
	if err != nil {
		t.Fatal(err)
	}
	// p99 is sysbench's own line; p95 and p50 come from the histogram.
	if s.p99 != 4.10 || s.p95 != 2 || s.p50 != 1 {
		t.Errorf("p50 %v, p95 %v, p99 %v; want 1, 2, 4.10", s.p50, s.p95, s.p99)
	}
	if s.queries != 100 || s.qps != 20 || s.ignored != 2 {
		t.Errorf("queries %d, qps %v, ignored %d", s.queries, s.qps, s.ignored)
	}
	classic, err := parseSysbench(strings.Replace(sysbenchOut, "99th percentile:                        4.10", "95th percentile:                        2.10", 1))
	if err != nil {
		t.Fatal(err)
	}
	if classic.p95 != 2.10 || classic.p99 != 4 {
		t.Errorf("with --percentile=95: p95 %v, p99 %v; want 2.10, 4", classic.p95, classic.p99)
	}
}

func TestErrSummary(t *testing.T) {
	err := errors.New("exit status 1\nFATAL: unable to connect to MySQL server on host '127.0.0.1', port 1, aborting...\n" +
		"FATAL: error 2013: Lost connection\nFATAL: error 2013: Lost connection\nsomething else")
	want := "exit status 1: FATAL: error 2013: Lost connection / FATAL: unable to connect to MySQL server on host '127.0.0.1', port 1, aborting..."
	if got := errSummary(err); got != want {
		t.Errorf("errSummary = %q, want %q", got, want)
	}
	// The line with the server's error comes first, however many generic
	// lines precede it.
	err = errors.New("exit status 1\n" + strings.Repeat("FATAL: `thread_init' function failed\nFATAL: mysql_stmt_prepare() failed\n", 5) +
		"FATAL: MySQL error: 1040 \"Too many connections\"")
	want = "exit status 1: FATAL: MySQL error: 1040 \"Too many connections\" / FATAL: `thread_init' function failed / FATAL: mysql_stmt_prepare() failed"
	if got := errSummary(err); got != want {
		t.Errorf("errSummary = %q, want %q", got, want)
	}
}

// fakeRun is a successful result with qps, CPU seconds per 1,000 statements
// and p50.
func fakeRun(qps, cpuPer1k, p50 float64) *result {
	return &result{sb: sbStats{queries: 10000, qps: qps, p50: p50, p95: 1, p99: 2}, hasCPU: true, cpuSec: cpuPer1k * 10, replica: -1, otherCores: math.NaN()}
}

func TestClassicTally(t *testing.T) {
	o := &classicOutcome{cells: matrix(false)}
	for i, c := range o.cells {
		// sluice's CPU is 1.10x HAProxy's, 1.30x in one cell, 0.90x at
		// one thread; the control's is HAProxy's.
		ratio := 1.10
		switch {
		case c.threads == 1:
			ratio = 0.90
		case i == 10:
			ratio = 1.30
		}
		o.results = append(o.results, map[string]*result{
			"direct":    fakeRun(2000, 0, 0.1),
			"haproxy":   fakeRun(1000, 0.05, 0.2),
			"sluice":    fakeRun(1000, 0.05*ratio, 0.3),
			"split":     fakeRun(1000, 0.05, 0.3),
			"haproxy-b": fakeRun(1000, 0.05, 0.2),
		})
	}
	out := renderClassic(settings{control: true, rounds: 1}, o)
	for _, want := range []string{
		"- median ≤ 1.00x over the 18 classic cells: median 1.10x, NOT met",
		"A/A control HAProxy-b/HAProxy: median 1.00x",
		"- no cell above 1.15x: 1 of 18 cells above (" + o.cells[10].label() + " 1.30x), NOT met; control: 0 of 18 above (none)",
		"- one thread, ≤ 1.00x in all 6 one-thread cells: 6 of 6 cells (range 0.90x to 0.90x), met",
		"| point_select 1 thr auto | 0.90x | 2.00x | 1.00x | 1.00x |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the tally lacks %q:\n%s", want, out)
		}
	}
}

func TestScaleTally(t *testing.T) {
	o := &scaleOutcome{cells: scaleMatrix([]int{2000}), backends: []string{"master", "replica1"}, others: []int64{3, 1}}
	peaks := func(master, replica int64) []backendPeak {
		return []backendPeak{{name: "master", threads: master}, {name: "replica1", threads: replica}}
	}
	for i := range o.cells {
		s := fakeRun(1100, 0.1, 1)
		s.peaks = peaks(3+scalePool+scaleProbes, 2)
		if i == 0 { // a run that never started, one connection too many
			s = &result{err: fmt.Errorf("exit status 1\nFATAL: MySQL error: 1040"), peaks: peaks(3+scalePool+scaleProbes+1, 2)}
		}
		h := fakeRun(1000, 0.1, 1)
		h.peaks = peaks(2003, 1)
		o.results = append(o.results, map[string]*result{"haproxy": h, "sluice-p64": s, "haproxy-b": fakeRun(900, 0.1, 1)})
	}
	out := o.tally()
	for _, want := range []string{
		"at 2,000 threads",
		"- 0 errors: 3 of 4 sluice cells, NOT met",
		"- Threads_connected ≤ 64 + probes (1) per backend, over the baseline above: 3 of 4 sluice cells, NOT met",
		"- sluice qps ≥ HAProxy's: 3 of 4 cells, NOT met (1 without a qps of both)",
		"A/A control HAProxy-b/HAProxy ≥ 1.00x: 0 of 4 cells",
		"- HAProxy passes 2,000 connections through: 4 of 4 cells without errors, 4 with",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the tally lacks %q:\n%s", want, out)
		}
	}
}
