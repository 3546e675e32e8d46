package dataplane

import "time"

// dropDeadIdle checks the idle connections that Get would hand out
// unchecked (those that rested less than idleCheckAfter) and closes the
// ones the server has closed. A caller whose connection of this pool was
// found dead just after it was lent calls it: what closed that one (a KILL
// of the service account's threads, a server restart) usually closed its
// idle siblings too. It returns how many it closed.
func (p *Pool) dropDeadIdle() int {
	var dead []*BackendConn
	p.mu.Lock()
	for k, l := range p.idle {
		alive := l[:0]
		for _, bc := range l {
			if time.Since(bc.idleSince) < idleCheckAfter && bc.CheckIdle() != nil {
				dead = append(dead, bc)
				continue
			}
			alive = append(alive, bc)
		}
		clear(l[len(alive):])
		p.idle[k] = alive
	}
	p.open -= len(dead)
	p.closes += len(dead)
	p.mu.Unlock()
	for _, bc := range dead {
		bc.broken = true
		_ = bc.Conn.Close()
		p.signal()
	}
	return len(dead)
}

// dropDeadIdle runs Pool.dropDeadIdle on every pool: after a KILL of the
// service account's threads or a restart, whichever backend a retry picks
// may hold such connections.
func (e *Env) dropDeadIdle() {
	for _, p := range *e.poolMap.Load() {
		p.dropDeadIdle()
	}
}
