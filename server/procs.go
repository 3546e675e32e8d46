package server

import (
	"context"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// The processor governor sizes GOMAXPROCS while [proxy] threads = 0 and
// sessions run on goroutines: one processor while the proxy's work fits in
// one core, every CPU when it does not. With two processors Go wakes an
// idle thread for each goroutine the network poller readies and that
// thread steals it, so statements keep moving between threads and CPUs
// (on the bench machine 1.7 CPU migrations a statement against HAProxy's
// none), and each costs 10–25% more CPU than on one processor
// (bench/results/2026-12-03-procs.md).

// procsWindow is how often the governor samples the process.
const procsWindow = 100 * time.Millisecond

// procsPolicy is the governor's decision, kept pure for its tests. A
// sample is one window's process CPU, in cores.
//
// Only the proxy's own CPU raises the processors, not the time its
// goroutines wait to run: on a host whose cores the database servers and
// clients keep busy a second processor has no idle CPU to run on, and on
// the bench machine it cost 10–15% more CPU per statement at 16 and 64
// sysbench threads for a throughput within the run-to-run noise.
type procsPolicy struct {
	// max is the process's processors when the governor started (one per
	// CPU, or the container's limit).
	max int
	// upCores raises one processor to max: a window in which the proxy
	// used that much of its one core.
	upCores float64
	// downAfter windows in a row under downCores bring max processors
	// back to one.
	downCores float64
	downAfter int
	// cur is the processors now; light counts the light windows in a row.
	cur, light int
}

// newProcsPolicy starts at one processor.
func newProcsPolicy(max int) procsPolicy {
	return procsPolicy{max: max, upCores: 0.8, downCores: 0.4, downAfter: 20, cur: 1}
}

// step takes one window's CPU, in cores, and returns the processors to
// run with.
func (p *procsPolicy) step(cores float64) int {
	if p.cur == 1 {
		if cores >= p.upCores {
			p.cur, p.light = p.max, 0
		}
		return p.cur
	}
	if cores < p.downCores {
		p.light++
	} else {
		p.light = 0
	}
	if p.light >= p.downAfter {
		p.cur, p.light = 1, 0
	}
	return p.cur
}

// procsHeld makes one governor per process: GOMAXPROCS is the process's,
// and tests run many servers in one.
var procsHeld atomic.Bool

// procsNow is the processors the governor runs with, 0 while none runs
// (for metrics).
var procsNow atomic.Int32

// governProcs runs the governor until ctx ends, then gives the process back
// all its processors. It returns at once when another governor runs, when
// threads is set, with event loops (they size GOMAXPROCS themselves) or on
// one CPU.
func governProcs(ctx context.Context, log *zap.Logger) {
	max := runtime.GOMAXPROCS(0)
	if max < 2 || !procsHeld.CompareAndSwap(false, true) {
		return
	}
	defer procsHeld.Store(false)
	pol := newProcsPolicy(max)
	runtime.GOMAXPROCS(pol.cur)
	procsNow.Store(int32(pol.cur))
	defer func() {
		runtime.GOMAXPROCS(max)
		procsNow.Store(0)
	}()
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
		cores := smp.read()
		was := pol.cur
		if n := pol.step(cores); n != was {
			runtime.GOMAXPROCS(n)
			procsNow.Store(int32(n))
			log.Debug("processors changed", zap.Int("from", was), zap.Int("to", n),
				zap.Float64("cores", cores))
		}
	}
}

// procsSampler reads the process's CPU time and returns what it used
// since its last read. Owned by the governor's goroutine.
type procsSampler struct {
	at  time.Time
	cpu time.Duration
}

// read returns the CPU used since the last read, in cores (0 the first
// time).
func (s *procsSampler) read() (cores float64) {
	now := time.Now()
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if !s.at.IsZero() {
		if d := now.Sub(s.at); d > 0 {
			cores = float64(cpu-s.cpu) / float64(d)
		}
	}
	s.at, s.cpu = now, cpu
	return cores
}
