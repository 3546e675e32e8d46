//go:build unix

package protocol

import (
	"errors"
	"io"
	"syscall"
)

// peekIdle looks at the socket without blocking and without consuming:
// EAGAIN means silent (usable), 0 bytes means closed, data means the peer
// spoke out of turn.
func peekIdle(rc syscall.RawConn) error {
	var buf [1]byte
	var n int
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	})
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
