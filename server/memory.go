package server

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// A login needs far more memory while it runs (its goroutine's stack grows
// deep in the auth relay, buffers, the auth leg) than the session keeps
// afterwards. After a storm of logins that memory is free in the Go heap,
// but the runtime returns free memory to the OS only slowly and only down
// to a multiple of the live heap, so sluice's RSS would stay near the
// storm's peak for good. burstLogins and burstQuiet say when a burst is
// over and its memory is handed back.
const (
	burstLogins = 1000
	burstQuiet  = time.Second
)

// loginBurst hands the memory a burst of logins left behind back to the OS
// once the burst is over: burstLogins logins, then none for burstQuiet. A
// steady trickle of logins costs a timer reset each; while logins keep
// coming nothing is returned, so a busy proxy is not disturbed. Safe for
// concurrent use.
type loginBurst struct {
	// free returns the memory (debug.FreeOSMemory when nil); min and
	// quiet override burstLogins and burstQuiet when set (tests).
	free  func()
	min   int64
	quiet time.Duration

	n     atomic.Int64
	mu    sync.Mutex
	timer *time.Timer // made at the first burst; guarded by mu
}

// loginEnded counts a login that ended, either way.
func (b *loginBurst) loginEnded() {
	if b.n.Add(1) < b.threshold() {
		return
	}
	quiet := b.quiet
	if quiet == 0 {
		quiet = burstQuiet
	}
	b.mu.Lock()
	if b.timer == nil {
		b.timer = time.AfterFunc(quiet, b.over)
	} else {
		b.timer.Reset(quiet)
	}
	b.mu.Unlock()
}

func (b *loginBurst) threshold() int64 {
	if b.min > 0 {
		return b.min
	}
	return burstLogins
}

// over runs burstQuiet after the burst's last login.
func (b *loginBurst) over() {
	if b.n.Swap(0) < b.threshold() {
		return
	}
	if b.free != nil {
		b.free()
		return
	}
	debug.FreeOSMemory()
}
