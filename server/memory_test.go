package server

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestLoginBurstFreesOnceQuiet: memory is handed back once after a burst
// of logins, when none came for the quiet period, and not while logins
// keep coming; a smaller number of logins hands nothing back.
func TestLoginBurstFreesOnceQuiet(t *testing.T) {
	var freed atomic.Int32
	b := &loginBurst{min: 5, quiet: 50 * time.Millisecond, free: func() { freed.Add(1) }}
	for range 4 {
		b.loginEnded()
	}
	if b.timer != nil {
		t.Fatalf("4 logins armed the burst timer; the burst is 5")
	}
	start := time.Now()
	for range 10 {
		b.loginEnded()
	}
	// Logins keep coming faster than the quiet period: nothing yet.
	for time.Since(start) < 150*time.Millisecond {
		b.loginEnded()
		if freed.Load() != 0 {
			t.Fatalf("memory handed back while logins were still coming")
		}
		time.Sleep(5 * time.Millisecond)
	}
	deadline := time.Now().Add(5 * time.Second)
	for freed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("memory not handed back 5s after the burst ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := b.n.Load(); n != 0 {
		t.Fatalf("login count after the burst = %d, want 0", n)
	}
	if f := freed.Load(); f != 1 {
		t.Fatalf("handed back %d times for one burst, want 1", f)
	}
}
