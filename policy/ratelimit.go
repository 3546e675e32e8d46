// Package policy holds pure rules the proxy applies: the per-user
// statement rate (GCRA) and the login backoff. Nothing here does I/O or
// reads a clock: callers pass the time.
package policy

import (
	"errors"
	"sync/atomic"
	"time"
)

// Rate is a statement rate limit in the terms of the bucket's arithmetic
// (nanoseconds).
type Rate struct {
	perSecond int64
	// interval is the time one statement's slot takes: 1s / perSecond.
	interval int64
	// tolerance is how far ahead of now the bucket's virtual time may run
	// before a statement waits: (burst-1) intervals.
	tolerance int64
	// maxQueued caps the statements waiting at once; queueTimeout is the
	// longest wait.
	maxQueued    int64
	queueTimeout int64
}

// NewRate converts a statement rate and its queue to Rate; nil
// when perSecond is 0 (unlimited).
func NewRate(perSecond, burst, maxQueued int, queueTimeout time.Duration) *Rate {
	if perSecond <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = perSecond
	}
	interval := int64(time.Second) / int64(perSecond)
	return &Rate{
		perSecond:    int64(perSecond),
		interval:     interval,
		tolerance:    int64(burst-1) * interval,
		maxQueued:    int64(maxQueued),
		queueTimeout: int64(queueTimeout),
	}
}

// Bucket is a user's statement rate bucket, kept as the generic cell rate
// algorithm's theoretical arrival time: the monotonic time (nanoseconds
// mono.Now) at which the bucket is empty again. Taking a statement's
// slot moves it one interval on with a compare-and-swap; nothing else is
// stored, so a statement that finds room costs a load and a CAS, and any
// number of sessions share the bucket without a lock.
type Bucket struct {
	tat atomic.Int64
	// waiting counts statements waiting for their slot.
	waiting atomic.Int64
}

// Outcomes of Bucket.Take besides a wait.
var (
	ErrQueueFull = errors.New("max_queued statements already wait")
	ErrTooLong   = errors.New("the wait would exceed queue_timeout")
)

// Take reserves the next slot at time now (ns) under p. It returns how long
// the statement must wait for its slot (0: run now), or an error when the
// statement is refused: its wait would exceed queue_timeout, or max_queued
// statements wait already. A statement that is told to wait has its slot
// and is counted in waiting: it must call Done after the wait.
func (b *Bucket) Take(now int64, p *Rate) (int64, error) {
	for {
		tat := b.tat.Load()
		start := max(tat, now)
		wait := start - now - p.tolerance
		if wait > p.queueTimeout {
			return 0, ErrTooLong
		}
		if wait > 0 && b.waiting.Load() >= p.maxQueued {
			return 0, ErrQueueFull
		}
		if !b.tat.CompareAndSwap(tat, start+p.interval) {
			continue
		}
		if wait <= 0 {
			return 0, nil
		}
		if b.waiting.Add(1) > p.maxQueued {
			// Others queued meanwhile: give the slot back.
			b.waiting.Add(-1)
			b.tat.Add(-p.interval)
			return 0, ErrQueueFull
		}
		return wait, nil
	}
}

// Done ends a wait Take asked for.
func (b *Bucket) Done() { b.waiting.Add(-1) }

// PerSecond is the statements per second r allows.
func (r *Rate) PerSecond() int64 { return r.perSecond }
