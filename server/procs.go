package server

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// The processor governor sizes GOMAXPROCS while [proxy] threads = 0 and
// sessions run on goroutines: one processor while the proxy's work fits in
// one core and its thread gets a CPU, every CPU otherwise. With two processors Go wakes an
// idle thread for each goroutine the network poller readies and that
// thread steals it, so statements keep moving between threads and CPUs
// (on the bench machine 1.7 CPU migrations a statement against HAProxy's
// none), and each costs 10–25% more CPU than on one processor
// (bench/results/2026-12-03-procs.md).

// procsWindow is how often the governor samples the process.
const procsWindow = 100 * time.Millisecond

// procsPolicy is the governor's decision, kept pure for its tests. A
// sample is one window: the process's CPU in it, in cores, the goroutine
// wake-ups in it and how many of those waited schedWaitLong or more to run.
//
// Two things raise one processor to max. The proxy used most of its core;
// or its goroutines wait so long to run, window after window, that its one
// thread is not getting a CPU (on the bench machine with 2,000 sysbench
// clients and one processor, a median 39% of a window's wake-ups waited
// 4 ms or more, in 190 of 193 windows 30% or more, and the proxy served
// 0.67x HAProxy's point selects). Shorter waits do not: at 16 or 64
// clients they are the sessions queueing for a busy core, and a second
// processor there cost 10–35% more CPU per statement for the same or less
// throughput. Nor does one window of long waits: at 64 clients a busy host
// puts one window in a hundred or so over the bar (one of 155 in a quiet
// trace, 0.32), which alone raised the count for the rest of a run.
type procsPolicy struct {
	// max is the process's processors when the governor started (one per
	// CPU, or the container's limit).
	max int
	// upCores raises one processor to max: a window in which the proxy
	// used that much of its one core. upLong does too: upLongWindows
	// windows in a row, each with at least minWakeups wake-ups, that share
	// of which waited long.
	upCores, upLong float64
	minWakeups      uint64
	upLongWindows   int
	// A light window has under downCores of CPU and under downLong of its
	// wake-ups waiting long; downAfter light windows in a row bring max
	// processors back to one. Rising again within backoffWindows of that
	// doubles downAfter, up to downAfterMax, so a load on the edge does not
	// flap.
	downCores, downLong     float64
	downAfter, downAfterMax int
	backoffWindows          int
	// cur is the processors now; light counts the light windows in a row,
	// long the windows with long waits in a row, sinceDown the windows
	// since the last fall to one.
	cur, light, long, sinceDown int
}

// newProcsPolicy starts at one processor.
func newProcsPolicy(max int) procsPolicy {
	return procsPolicy{max: max, upCores: 0.8, upLong: 0.3, minWakeups: 50, upLongWindows: 5,
		downCores: 0.4, downLong: 0.1, downAfter: 20, downAfterMax: 600, backoffWindows: 20,
		cur: 1, sinceDown: 1 << 30}
}

// step takes one window's sample and returns the processors to run with.
func (p *procsPolicy) step(cores float64, wakeups, long uint64) int {
	share := 0.0
	if wakeups >= p.minWakeups {
		share = float64(long) / float64(wakeups)
	}
	if p.cur == 1 {
		p.sinceDown++
		if share >= p.upLong {
			p.long++
		} else {
			p.long = 0
		}
		if cores >= p.upCores || p.long >= p.upLongWindows {
			if p.sinceDown <= p.backoffWindows {
				p.downAfter = min(2*p.downAfter, p.downAfterMax)
			}
			p.cur, p.light, p.long = p.max, 0, 0
		}
		return p.cur
	}
	if cores < p.downCores && share < p.downLong {
		p.light++
	} else {
		p.light = 0
	}
	if p.light >= p.downAfter {
		p.cur, p.light, p.sinceDown = 1, 0, 0
	}
	return p.cur
}

// schedWaitLong is the wait between a goroutine becoming runnable and
// running that counts as long: tens of statements' work.
const schedWaitLong = 4e-3

// procsMu serialises the process's GOMAXPROCS changes: the governor's, a
// fixed threads setting's and the event loops' sizing. procsFixed is set
// once a server fixed the count (threads > 0, or event loops, which sleep
// holding processors and would starve the process if it shrank); the
// governor then leaves GOMAXPROCS alone for the life of the process. In
// production a process has one server; tests run many.
var (
	procsMu    sync.Mutex
	procsFixed bool
)

// fixProcs sets GOMAXPROCS for good (threads > 0).
func fixProcs(n int) {
	procsMu.Lock()
	defer procsMu.Unlock()
	procsFixed = true
	runtime.GOMAXPROCS(n)
}

// setProcs is the governor's change of GOMAXPROCS; it reports false, and
// changes nothing, once the count was fixed.
func setProcs(n int) bool {
	procsMu.Lock()
	defer procsMu.Unlock()
	if procsFixed {
		return false
	}
	runtime.GOMAXPROCS(n)
	return true
}

// procsHeld makes one governor per process: GOMAXPROCS is the process's,
// and tests run many servers in one.
var procsHeld atomic.Bool

// procsNow is the processors the governor runs with, 0 while none runs
// (its tests read it; go_sched_gomaxprocs_threads exports the count).
var procsNow atomic.Int32

// governProcs runs the governor until ctx ends, then gives the process back
// all its processors. Start runs it only with threads = 0 and without event
// loops (they size GOMAXPROCS themselves); it returns at once on one CPU or
// when another governor runs in the process.
func governProcs(ctx context.Context, log *zap.Logger) {
	max := runtime.GOMAXPROCS(0)
	if max < 2 || !procsHeld.CompareAndSwap(false, true) {
		return
	}
	defer procsHeld.Store(false)
	pol := newProcsPolicy(max)
	defer procsNow.Store(0)
	if !setProcs(pol.cur) {
		return
	}
	procsNow.Store(int32(pol.cur))
	defer setProcs(max)
	var smp procsSampler
	smp.read()
	tick := time.NewTicker(procsWindow)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cores, wakeups, long := smp.read()
		was := pol.cur
		if n := pol.step(cores, wakeups, long); n != was {
			if !setProcs(n) {
				return
			}
			procsNow.Store(int32(n))
			log.Debug("processors changed", zap.Int("from", was), zap.Int("to", n),
				zap.Float64("cores", cores), zap.Uint64("wakeups", wakeups), zap.Uint64("waited_4ms", long))
		}
	}
}

// procsSampler reads the process's CPU time and the scheduler's latency
// histogram and returns what changed since its last read. Owned by the
// governor's goroutine.
type procsSampler struct {
	at     time.Time
	cpu    time.Duration
	sample []metrics.Sample
	counts []uint64
	bounds []float64
}

// read returns the CPU used since the last read, in cores, and the
// goroutine wake-ups since then: how many, and how many waited at least
// schedWaitLong to run (0 the first time).
func (s *procsSampler) read() (cores float64, wakeups, long uint64) {
	now := time.Now()
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		if !s.at.IsZero() {
			if d := now.Sub(s.at); d > 0 {
				cores = float64(cpu-s.cpu) / float64(d)
			}
		}
		s.at, s.cpu = now, cpu
	}
	if s.sample == nil {
		s.sample = []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	}
	metrics.Read(s.sample)
	if s.sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return cores, 0, 0
	}
	h := s.sample[0].Value.Float64Histogram()
	first := s.counts == nil
	if first {
		s.counts = make([]uint64, len(h.Counts))
		s.bounds = append([]float64(nil), h.Buckets...)
	}
	for i, c := range h.Counts {
		d := c - s.counts[i]
		s.counts[i] = c
		if first {
			continue
		}
		wakeups += d
		// Buckets[i] is bucket i's lower bound.
		if s.bounds[i] >= schedWaitLong {
			long += d
		}
	}
	return cores, wakeups, long
}
