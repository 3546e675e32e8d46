package dataplane

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-proxy/sluice/internal/evloop"
)

// Borrowing from a Pool: an idle connection, a new one, or a wait in line.

// Get lends a connection with key: an idle one (checked to be alive), or a
// new one while fewer than size are open; else it waits up to waitTimeout
// for one to come back. noSchema asks for a connection with no default
// schema (a session that has none must not inherit another's). A borrower
// on an event loop (t) steps off it before a dial or a wait.
func (p *Pool) Get(ctx context.Context, key poolKey, noSchema bool, t *evloop.Task) (*BackendConn, error) {
	var timer *time.Timer
	var waitStart time.Time
	var w *poolWaiter
	detached := false
	defer func() {
		if detached {
			t.Attach()
		}
		if timer != nil {
			timer.Stop()
			p.waits.Add(1)
			p.waitNanos.Add(int64(time.Since(waitStart)))
		}
	}()
	for {
		p.mu.Lock()
		if p.closed {
			p.leaveQueueLocked(w)
			p.mu.Unlock()
			return nil, errPoolClosed
		}
		if len(p.waiters) > 0 && p.waiters[0] != w {
			// Others were first: wait behind them.
			w = p.queueLocked(w)
			p.mu.Unlock()
		} else if bc, dial, ok := p.takeLocked(key, noSchema, t); ok {
			if dial {
				p.leaveQueueLocked(w)
				p.mu.Unlock()
				if !detached {
					detached = t.Detach()
				}
				return p.dialLent(ctx, key)
			}
			p.mu.Unlock()
			// A connection the server closed while it idled (wait_timeout,
			// KILL, a restart) is dropped here, not handed to a client;
			// the borrower keeps its place meanwhile.
			if time.Since(bc.idleSince) < idleCheckAfter || bc.CheckIdle() == nil {
				if w != nil {
					p.leaveQueue(w)
				}
				return bc, nil
			}
			bc.discard()
			continue
		} else if bc != nil {
			// Full, and no idle connection fits (another handshake key, or
			// a schema where none may be): one was closed to make room.
			p.mu.Unlock()
			bc.Conn.Close()
			continue
		} else {
			w = p.queueLocked(w)
			p.mu.Unlock()
		}
		if !detached {
			detached = t.Detach()
		}
		if timer == nil {
			timer, waitStart = time.NewTimer(p.waitTimeout), time.Now()
		}
		select {
		case <-w.wake:
		case <-timer.C:
			p.waitTimeouts.Add(1)
			p.leaveQueue(w)
			return nil, fmt.Errorf("%w: %d connections to %s in use for %v", ErrPoolExhausted, p.size, p.addr, p.waitTimeout)
		case <-ctx.Done():
			p.leaveQueue(w)
			return nil, ctx.Err()
		}
	}
}

// takeLocked finds a connection for (key, noSchema): an idle one, lent
// out at once (ok), the most recent on t's loop if near the top; or a free slot, taken, for the caller to dial (ok and
// dial); or, when the pool is full and only idle connections of another
// kind are left, one of those taken out of the pool for the caller to
// close (not ok, bc set). p.mu is held.
func (p *Pool) takeLocked(key poolKey, noSchema bool, t *evloop.Task) (bc *BackendConn, dial, ok bool) {
	l := p.idle[key]
	pick := -1
	for i := len(l) - 1; i >= 0 && len(l)-i <= 8; i-- {
		if !noSchema || l[i].schema == "" {
			if pick < 0 {
				pick = i
			}
			// The most recent one on the borrower's loop, if near
			// the top: moving a socket to another loop costs two
			// epoll_ctl calls.
			if l[i].lc.OnLoopOf(t) {
				pick = i
				break
			}
		}
	}
	if pick < 0 {
		for i := len(l) - 9; i >= 0; i-- {
			if !noSchema || l[i].schema == "" {
				pick = i
				break
			}
		}
	}
	if pick >= 0 {
		bc := l[pick]
		p.idle[key] = append(l[:pick], l[pick+1:]...)
		p.lendLocked(bc)
		return bc, false, true
	}
	if p.open < p.size {
		p.open++
		return nil, true, true
	}
	if bc := p.takeAnyIdle(key, noSchema); bc != nil {
		p.open--
		p.closes++
		return bc, false, false
	}
	return nil, false, false
}

// dialLent dials a connection into the slot the caller took and lends it.
func (p *Pool) dialLent(ctx context.Context, key poolKey) (*BackendConn, error) {
	bc, err := p.dial(ctx, key)
	if err != nil {
		p.release()
		return nil, err
	}
	p.mu.Lock()
	p.lendLocked(bc)
	p.mu.Unlock()
	return bc, nil
}

// poolWaiter is one borrower waiting in Pool.waiters.
type poolWaiter struct {
	wake chan struct{}
}

// queueLocked puts the borrower at the end of the queue unless w says it
// is in it already, and returns its entry. p.mu is held.
func (p *Pool) queueLocked(w *poolWaiter) *poolWaiter {
	if w == nil {
		w = &poolWaiter{wake: make(chan struct{}, 1)}
		p.waiters = append(p.waiters, w)
	}
	return w
}

// leaveQueueLocked takes w (nil: not queued) out of the queue; when it was
// the oldest, the next one is woken in its place if there is something
// for it. p.mu is held.
func (p *Pool) leaveQueueLocked(w *poolWaiter) {
	if w == nil {
		return
	}
	for i, x := range p.waiters {
		if x == w {
			copy(p.waiters[i:], p.waiters[i+1:])
			p.waiters[len(p.waiters)-1] = nil
			p.waiters = p.waiters[:len(p.waiters)-1]
			if i == 0 && (p.open < p.size || p.anyIdleLocked()) {
				p.wakeLocked()
			}
			return
		}
	}
}

func (p *Pool) leaveQueue(w *poolWaiter) {
	p.mu.Lock()
	p.leaveQueueLocked(w)
	p.mu.Unlock()
}

// anyIdleLocked reports whether any connection idles. p.mu is held.
func (p *Pool) anyIdleLocked() bool {
	for _, l := range p.idle {
		if len(l) > 0 {
			return true
		}
	}
	return false
}

// wakeLocked wakes the oldest waiter, if any. p.mu is held.
func (p *Pool) wakeLocked() {
	if len(p.waiters) > 0 {
		select {
		case p.waiters[0].wake <- struct{}{}:
		default:
		}
	}
}
