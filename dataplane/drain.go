package dataplane

import (
	"errors"

	"github.com/sluice-proxy/sluice/protocol"
)

// errShutdown ends a session that a graceful shutdown closed between
// commands.
var errShutdown = errors.New("sluice is shutting down")

// Where a session stands for a graceful shutdown (Session.drain). The
// session's goroutine moves between busy and the two idle states; Shutdown
// moves a session from drainIdle to drainClosed, and only then closes its
// client connection, so a command the session is serving is never cut.
const (
	drainBusy   int32 = iota // logging in or serving a command
	drainIdle                // waiting for a command, no transaction open
	drainIdleTx              // waiting for a command inside a transaction
	drainClosed              // closed by Shutdown while drainIdle
)

// idleForDrain publishes that the session waits for its next command, and
// reports whether it should end instead: the Server is draining and no
// transaction is open. Storing the state before loading the flag, while
// Shutdown sets the flag before it reads the states, means either this
// check or Shutdown's sees the other.
func (s *Session) idleForDrain() bool {
	st := drainIdle
	if s.txOpen() {
		st = drainIdleTx
	}
	s.drain.Store(st)
	return st == drainIdle && s.env.draining.Load()
}

// awake marks the session busy again after the wait for a command; it
// reports whether Shutdown closed the session meanwhile, in which case
// whatever was read is dropped unanswered, as by a server that shut down.
func (s *Session) awake() bool {
	return s.drain.Swap(drainBusy) == drainClosed
}

// txOpen reports whether a transaction is open on a master the session
// holds (the server's in-transaction flag), or started under sharding and
// not yet sent anywhere. Autocommit off without a transaction open does
// not count: such a session can be closed between statements.
func (s *Session) txOpen() bool {
	if s.txBegin != "" {
		return true
	}
	if s.master != nil && s.master.status&protocol.StatusInTrans != 0 {
		return true
	}
	for i := range s.legs {
		if m := s.legs[i].master; i != s.clusterIdx && m != nil && m.status&protocol.StatusInTrans != 0 {
			return true
		}
	}
	return false
}
