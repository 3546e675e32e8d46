package dataplane

import (
	"time"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/protocol"
	"go.uber.org/zap"
)

// Why the proxy cut a data connection itself (watchedConn.cut).
const (
	cutNone uint32 = iota
	// cutStalled: a read waited for [health] timeout on a backend that
	// fails its probes (the stall watchdog).
	cutStalled
	// cutDown: the backend was marked down while a read waited on it.
	cutDown
)

// cutReading closes the sockets of the connections the pool has lent whose
// read from the backend has been pending for at least blocked, marking each
// with why; the sessions' relays fail and their clients get ERR 2013 (the
// session goes on and discards the connection). Connections lent to
// sessions between statements, and idle ones, are left alone. It returns
// how many it cut.
func (p *Pool) cutReading(blocked time.Duration, why uint32) int {
	now := mono.Now()
	n := 0
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, bc := range p.lent {
		// Closed under p.mu: bc cannot come back and be lent to another
		// session in between. Closing a TCP socket does not block.
		if w := bc.wire; w != nil && w.readBlocked(blocked, now) {
			w.cut.Store(why)
			_ = w.Conn.Close()
			n++
		}
	}
	return n
}

// stallTick is how often the stall watchdog looks, for a [health] timeout:
// a quarter of it, between 10ms and 250ms. It bounds how far past the
// timeout a stalled statement gets its ERR.
func stallTick(timeout time.Duration) time.Duration {
	return min(max(timeout/4, 10*time.Millisecond), 250*time.Millisecond)
}

// stallTimeout is the current [health] timeout.
func (e *Env) stallTimeout() time.Duration {
	if d := e.config().Health.Timeout.Duration; d > 0 {
		return d
	}
	return conf.DefaultHealthTimeout
}

// lostDuringQuery is the ERR for a statement whose connection to its
// backend broke; it says why when sluice cut the connection itself.
func (s *Session) lostDuringQuery(bc *BackendConn) *protocol.SQLError {
	b := bc.backend
	if bc.wire != nil {
		switch bc.wire.cut.Load() {
		case cutStalled:
			return protocol.CRServerLost.New("Lost connection to %s %s during query: it sent nothing for [health] timeout %v and does not answer its health probes",
				b.Role, b.Address, s.env.stallTimeout())
		case cutDown:
			return protocol.CRServerLost.New("Lost connection to %s %s during query: it was marked down (%s)", b.Role, b.Address, b.LastError())
		}
	}
	return protocol.CRServerLost.New("Lost connection to %s %s during query", b.Role, b.Address)
}

// watchStalls is the stall watchdog, one goroutine per Server until it
// closes. Every stallTick it cuts the data connections whose read from the
// backend has waited for [health] timeout while that backend is
// unresponsive (health.Backend.Unresponsive: its latest probe failed, or
// one has run for the timeout). A backend that answers its probes keeps its
// statements however long they run (SELECT SLEEP(60), a result with long
// gaps between rows). Whether the backend goes down stays the prober's
// call (failures_before_down).
func (e *Env) watchStalls() {
	t := time.NewTimer(stallTick(e.stallTimeout()))
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		timeout := e.stallTimeout()
		now := time.Now()
		for _, p := range *e.poolMap.Load() {
			b := p.Backend()
			if !b.Unresponsive(timeout, now) {
				continue
			}
			if n := p.cutReading(timeout, cutStalled); n > 0 {
				e.log.Warn("cut statements waiting on a backend that stopped answering", zap.String("cluster", b.Cluster),
					zap.String("backend", b.Address), zap.String("role", b.Role.String()), zap.Int("connections", n),
					zap.Duration("timeout", timeout), zap.String("probe_error", b.LastError()))
			}
		}
		t.Reset(stallTick(timeout))
	}
}

// replicaDown cuts the statements waiting on replica b, which was just
// marked down, at once: their clients get ERR 2013 instead of waiting for
// the watchdog or TCP.
func (e *Env) replicaDown(b *health.Backend) {
	if p := e.pool(b.Address); p != nil {
		if n := p.cutReading(0, cutDown); n > 0 {
			e.log.Warn("cut statements waiting on a replica that went down", zap.String("cluster", b.Cluster),
				zap.String("backend", b.Address), zap.Int("connections", n))
		}
	}
}

// WatchStalls runs the stall watchdog (watchStalls) until the Env's
// context ends.
func (e *Env) WatchStalls() { e.watchStalls() }

// ReplicaDown cuts the statements waiting on replica b, just marked down.
func (e *Env) ReplicaDown(b *health.Backend) { e.replicaDown(b) }
