package dataplane

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// commandCtx is the context of the command a session serves: it ends with
// the session's context (KILL CONNECTION, a shutdown's cut, the session's
// end) and also on KILL QUERY, which ends only the command. Pool waits, the
// wait for a master and the rate limit's wait watch it.
//
// It is one value per session, reset between commands, so a command costs
// no allocation: the Done channel is made when a wait first asks for it and
// kept until an interruption closes it. Its methods are safe for
// concurrent use (KILL QUERY comes from other goroutines).
type commandCtx struct {
	parent context.Context
	mu     sync.Mutex
	done   chan struct{}
	err    error
	// gen numbers the commands: an interruption meant for one never ends
	// the next (interrupt).
	gen uint64
}

// closedChan is the Done channel of a command interrupted before anything
// asked for its channel.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// errInterrupted is what a command's context ends with on KILL QUERY, and
// MariaDB's answer to the statement.
var errInterrupted = protocol.ERQueryInterrupted.New("Query execution was interrupted")

// init ties c to the session's context: when that ends, so does the
// command. The caller's stop releases the tie.
func (c *commandCtx) init(parent context.Context) (stop func() bool) {
	c.parent = parent
	return context.AfterFunc(parent, func() { c.end(parent.Err()) })
}

func (c *commandCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *commandCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *commandCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *commandCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// end ends the command with err, once.
func (c *commandCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(err)
}

// generation is the number of the command being served.
func (c *commandCtx) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// interrupt ends command gen with errInterrupted (KILL QUERY); a later
// command is left alone.
func (c *commandCtx) interrupt(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.endLocked(errInterrupted)
	}
}

func (c *commandCtx) endLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	if c.done == nil {
		c.done = closedChan
	} else {
		close(c.done)
	}
}

// reset readies c for the next command, after a KILL QUERY ended the
// last one; a context the session's end ended stays ended.
func (c *commandCtx) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.err != nil && c.parent.Err() == nil {
		c.err, c.done = nil, nil
	}
}

// stopped is the ERR for a command whose context ended: the session was
// killed (errKilled) or the statement was (errInterrupted); nil while it
// runs.
func (s *Session) stopped() *protocol.SQLError {
	switch {
	case s.ctx.Err() != nil:
		return errKilled
	case s.cmd.Err() != nil:
		return errInterrupted
	}
	return nil
}
