package evloop

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
)

// sockConn is a TCP connection whose Read and Write make their read(2) and
// write(2) as raw system calls, waiting for readiness in Go's network
// poller as net.TCPConn does.
//
// Why: net.TCPConn enters every call through the scheduler's syscall path.
// A write on loopback runs the receiver's TCP input and wake-up inside the
// call and often takes tens of microseconds; the runtime's monitor then
// takes the processor away from the thread in the call and hands it to
// another thread, which the first one has to hand back when the call
// returns. With the proxy's one or two threads sharing the cores with the
// database servers, that hand-off roughly doubled the proxy's context
// switches per statement. The sockets are non-blocking, so a raw call is
// bounded (it copies what fits and returns EAGAIN otherwise) and keeping
// the processor through it is what an event loop does. (Under the race
// detector the calls go through package syscall, whose annotations tell the
// detector about the synchronisation a socket carries; see sysRead.)
//
// A Read that follows a Write on the connection waits for the peer's
// answer, which takes the peer a round trip, so it first lets the other
// runnable goroutines go (runtime.Gosched). With many sessions busy that
// is when the answer arrives, and the read finds it at once instead of
// finding nothing, parking the goroutine and being woken to read again:
// at 64 sysbench clients that took sluice from 3.3 reads a statement to
// 2.0 (HAProxy's count) and 5% off its CPU per point select. With nothing
// else to run the yield returns at once.
//
// Everything but Read and Write (deadlines, Close, addresses, SyscallConn)
// is the embedded TCPConn's, so deadlines and a Close from another
// goroutine work as they do there. It is safe for concurrent use as a
// net.Conn is: Reads are serialised by rmu and Writes by wmu (the poller's
// own locks come too late to guard the fields below), so one goroutine may
// Read while another Writes.
type sockConn struct {
	*net.TCPConn
	rc syscall.RawConn

	rmu  sync.Mutex
	rbuf []byte
	rn   int
	rerr syscall.Errno

	wmu  sync.Mutex
	wbuf []byte
	wn   int
	werr syscall.Errno

	// wrote is set by a Write and taken by the next Read, which then
	// yields first (see above). emptyReads counts the reads that found
	// nothing (under rmu; its tests read it).
	wrote      atomic.Bool
	emptyReads int

	// The method values, bound once so a call allocates nothing.
	readFn, writeFn func(fd uintptr) bool
}

// NewSockConn wraps nc when it is a TCP connection and returns it unchanged
// otherwise (a Unix socket, or a test's pipe).
func NewSockConn(nc net.Conn) net.Conn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &sockConn{TCPConn: tc, rc: rc}
	c.readFn, c.writeFn = c.readOnce, c.writeAll
	return c
}

// Read reads what the socket holds, up to len(p), waiting in the poller
// while it holds nothing; it returns io.EOF when the peer has closed.
func (c *sockConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.wrote.Swap(false) {
		runtime.Gosched()
	}
	c.rmu.Lock()
	c.rbuf, c.rn, c.rerr = p, 0, 0
	err := c.rc.Read(c.readFn)
	n, errno := c.rn, c.rerr
	c.rbuf = nil
	c.rmu.Unlock()
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *sockConn) readOnce(fd uintptr) bool {
	for {
		n, e := sysRead(fd, c.rbuf)
		switch e {
		case 0:
			c.rn = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			c.emptyReads++
			return false
		default:
			c.rerr = e
			return true
		}
	}
}

// Write writes all of p, waiting in the poller while the socket's send
// buffer is full.
func (c *sockConn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	c.wbuf, c.wn, c.werr = p, 0, 0
	err := c.rc.Write(c.writeFn)
	n, errno := c.wn, c.werr
	c.wbuf = nil
	c.wmu.Unlock()
	c.wrote.Store(true)
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

func (c *sockConn) writeAll(fd uintptr) bool {
	for c.wn < len(c.wbuf) {
		rest := c.wbuf[c.wn:]
		n, e := sysWrite(fd, rest)
		switch e {
		case 0:
			c.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = e
			return true
		}
	}
	return true
}

// opError shapes an error as net.TCPConn's Read and Write report theirs, so
// callers' checks (net.ErrClosed, timeouts, the messages in logs) hold.
func (c *sockConn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		// The raw connection's own wrapping ("raw-read"): keep what it wraps.
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
