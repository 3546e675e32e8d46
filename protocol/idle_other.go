//go:build !unix

package protocol

import "syscall"

// peekIdle cannot look at the socket without blocking here; the connection
// is assumed usable and a dead one fails on first use.
func peekIdle(*idlePeek) error { return nil }

type idlePeek struct{}

func newIdlePeek(syscall.RawConn) *idlePeek { return &idlePeek{} }
