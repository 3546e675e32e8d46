package server

import (
	"context"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"
)

func TestProcsPolicy(t *testing.T) {
	p := newProcsPolicy(4)
	if got := p.step(0.2, 0, 0); got != 1 {
		t.Fatalf("light window at one processor: got %d, want 1", got)
	}
	if got := p.step(0.79, 1000, 299); got != 1 {
		t.Fatalf("window just under both bars: got %d, want 1", got)
	}
	if got := p.step(0.2, 49, 49); got != 1 {
		t.Fatalf("too few wake-ups to judge: got %d, want 1", got)
	}
	if got := p.step(0.8, 0, 0); got != 4 {
		t.Fatalf("window at 0.8 cores: got %d, want 4", got)
	}
	// At max, only downAfter light windows in a row bring it back.
	for i := range p.downAfter - 1 {
		if got := p.step(0.1, 0, 0); got != 4 {
			t.Fatalf("light window %d of %d: got %d, want 4", i+1, p.downAfter, got)
		}
	}
	if got := p.step(0.4, 0, 0); got != 4 {
		t.Fatalf("window at 0.4 cores: got %d, want 4", got)
	}
	for range p.downAfter - 1 {
		p.step(0.39, 100, 9)
	}
	if got := p.step(0.1, 100, 10); got != 4 {
		t.Fatalf("window with 10%% long waits counted as light: got %d, want 4", got)
	}
	for range p.downAfter - 1 {
		p.step(0.39, 100, 9)
	}
	if got := p.step(0.39, 100, 9); got != 1 {
		t.Fatalf("after %d light windows in a row: got %d, want 1", p.downAfter, got)
	}
	for range p.backoffWindows + 1 {
		p.step(0.1, 0, 0)
	}
	// Long waits alone raise it, window after window: the one thread is
	// not getting a CPU. A run of them cut short by one window under the
	// bar, or by one with too few wake-ups to judge, starts over.
	for i := range p.upLongWindows - 1 {
		if got := p.step(0.3, 100, 30); got != 1 {
			t.Fatalf("long-wait window %d of %d: got %d, want 1", i+1, p.upLongWindows, got)
		}
	}
	p.step(0.3, 100, 29)
	for range p.upLongWindows - 1 {
		p.step(0.3, 100, 30)
	}
	p.step(0.3, 49, 49)
	for range p.upLongWindows - 1 {
		p.step(0.3, 100, 30)
	}
	if p.cur != 1 {
		t.Fatalf("interrupted runs of long-wait windows raised it to %d", p.cur)
	}
	if got := p.step(0.3, 100, 30); got != 4 {
		t.Fatalf("%d windows in a row with 30%% waits of 4 ms: got %d, want 4", p.upLongWindows, got)
	}
	if p.downAfter != 20 {
		t.Fatalf("a rise long after the fall changed downAfter to %d", p.downAfter)
	}
	// Rising again soon after a fall backs the next fall off.
	for range 20 {
		p.step(0.1, 0, 0)
	}
	if got := p.step(1, 0, 0); got != 4 {
		t.Fatalf("busy window right after the fall: got %d, want 4", got)
	}
	if p.downAfter != 40 {
		t.Fatalf("downAfter after a quick rise: %d, want 40", p.downAfter)
	}
	for range 100 {
		for p.step(0.1, 0, 0) != 1 {
		}
		p.step(1, 0, 0)
	}
	if p.downAfter != p.downAfterMax {
		t.Fatalf("downAfter after many quick rises: %d, want the cap %d", p.downAfter, p.downAfterMax)
	}
}

func TestProcsSamplerCountsCPU(t *testing.T) {
	var s procsSampler
	if first, _, _ := s.read(); first != 0 {
		t.Fatalf("first read: %.3f cores, want 0", first)
	}
	end := time.Now().Add(50 * time.Millisecond)
	n := 0
	for time.Now().Before(end) {
		n++
	}
	if cores, _, _ := s.read(); cores <= 0 {
		t.Fatalf("after %d loops of busy work the sampler saw %.3f cores", n, cores)
	}
}

func TestGovernProcsGivesBackProcessors(t *testing.T) {
	max := runtime.GOMAXPROCS(0)
	if max < 2 {
		t.Skip("one processor: nothing to govern")
	}
	keepProcsFixed(t)
	procsMu.Lock()
	procsFixed = false
	procsMu.Unlock()
	// A server another test left running would hold the governor.
	deadline := time.Now().Add(5 * time.Second)
	for procsHeld.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if procsHeld.Load() {
		t.Fatal("another governor still runs in this process")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); governProcs(ctx, zap.NewNop()) }()
	deadline = time.Now().Add(5 * time.Second)
	for procsNow.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if procsNow.Load() == 0 {
		t.Fatal("the governor did not start")
	}
	// A second governor in the same process returns at once.
	second := make(chan struct{})
	go func() { defer close(second); governProcs(ctx, zap.NewNop()) }()
	select {
	case <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("a second governor kept running")
	}
	cancel()
	<-done
	if got := runtime.GOMAXPROCS(0); got != max {
		t.Fatalf("after the governor ended GOMAXPROCS is %d, want %d", got, max)
	}
	if procsNow.Load() != 0 {
		t.Fatal("procsNow not cleared")
	}
}

// TestGovernProcsLeavesAFixedCount: once a server fixed GOMAXPROCS
// (threads > 0, or event loops, which sleep holding processors) the
// governor of another server in the process changes nothing.
func TestGovernProcsLeavesAFixedCount(t *testing.T) {
	max := runtime.GOMAXPROCS(0)
	if max < 2 {
		t.Skip("one processor: nothing to govern")
	}
	keepProcsFixed(t)
	t.Cleanup(func() { runtime.GOMAXPROCS(max) })
	fixProcs(max)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); governProcs(ctx, zap.NewNop()) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the governor kept running after the count was fixed")
	}
	if got := runtime.GOMAXPROCS(0); got != max {
		t.Fatalf("GOMAXPROCS %d after the governor met a fixed count, want %d", got, max)
	}
}

// keepProcsFixed puts procsFixed back as it was when the test ends: the
// process's other tests' servers may have fixed the count.
func keepProcsFixed(t *testing.T) {
	procsMu.Lock()
	fixed := procsFixed
	procsMu.Unlock()
	t.Cleanup(func() {
		procsMu.Lock()
		procsFixed = fixed
		procsMu.Unlock()
	})
}
