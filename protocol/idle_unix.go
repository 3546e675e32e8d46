//go:build unix

package protocol

import (
	"errors"
	"io"
	"syscall"
)

// idlePeek is a Conn's socket peek, built once so a check allocates nothing.
type idlePeek struct {
	rc   syscall.RawConn
	fn   func(uintptr) bool // p.peek, bound once
	buf  [1]byte
	n    int
	rerr error
}

func newIdlePeek(rc syscall.RawConn) *idlePeek {
	p := &idlePeek{rc: rc}
	p.fn = p.peek
	return p
}

func (p *idlePeek) peek(fd uintptr) bool {
	p.n, _, p.rerr = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true
}

// peekIdle looks at the socket without blocking and without consuming:
// EAGAIN means silent (usable), 0 bytes means closed, data means the peer
// spoke out of turn.
func peekIdle(p *idlePeek) error {
	err := p.rc.Read(p.fn)
	n, rerr := p.n, p.rerr
	p.rerr = nil
	switch {
	case err != nil:
		return err
	case errors.Is(rerr, syscall.EAGAIN):
		return nil
	case rerr != nil:
		return rerr
	case n == 0:
		return io.EOF
	}
	return ErrIdleData
}
