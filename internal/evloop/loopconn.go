//go:build linux

package evloop

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/sluice-proxy/sluice/internal/mono"
)

// Conn is a TCP connection whose descriptor is outside Go's network
// poller, for sessions run by event loops ([proxy] event_loop). Its Read
// and Write make raw read(2) and write(2) calls; when the socket is not
// ready, the owning task (bound with bind) waits on its loop, and any
// other caller waits in ppoll(2) on its own thread.
//
// A client connection starts in Go's poller (through pre, a sockConn) for
// the login, whose waits may be long, and moves out of it once the
// session is served by a loop (leavePoller); a backend connection leaves
// it at once after the dial.
//
// Safe for concurrent use as a net.Conn is, with one rule: the deadlines
// are set by the goroutine that does the I/O (sessions do). Close may come
// from any goroutine at any time: it marks the connection closed and
// shuts the socket down, which wakes a wait in progress; the descriptor
// itself is closed when the last call using it returns, so a number the
// kernel hands out again is never read by mistake.
type Conn struct {
	// pre is the connection while it is still in Go's poller.
	pre net.Conn

	fd           int
	laddr, raddr net.Addr

	// task is the owner's loop task, nil when it has none; written by
	// the owner only.
	task *Task

	// Deadlines as mono.Now ns; 0 for none.
	rdl, wdl atomic.Int64

	closed atomic.Bool
	// wrote: the last call was a Write, so the next Read, on a loop,
	// waits before it reads (the peer answers what it was sent), if
	// drained: the last read emptied the socket (it got EAGAIN or less
	// than it asked for), so whatever comes next brings a new edge.
	wrote, drained bool
	// home is the loop fd is registered on (for the pools' affinity).
	home atomic.Pointer[Loop]

	mu       sync.Mutex
	ops      int // calls using fd right now
	fdClosed bool
	loop     *Loop // where fd is registered, nil if nowhere
	slot     uint32

	rmu, wmu sync.Mutex
}

// NewConn wraps a connection from the listener; it stays in Go's
// poller until leavePoller.
func NewConn(nc net.Conn) *Conn {
	return &Conn{pre: NewSockConn(nc), fd: -1, laddr: nc.LocalAddr(), raddr: nc.RemoteAddr()}
}

// DialConn takes a dialled TCP connection out of Go's poller at once.
func DialConn(nc net.Conn) (*Conn, error) {
	c := NewConn(nc)
	if err := c.LeavePoller(); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// leavePoller moves the connection's socket out of Go's poller: it keeps
// a duplicate of the descriptor and closes the original, which takes it
// out of the runtime's epoll set. The owner calls it between operations.
func (c *Conn) LeavePoller() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pre == nil {
		return nil
	}
	if c.closed.Load() {
		return net.ErrClosed
	}
	sc, ok := c.pre.(syscall.Conn)
	if !ok {
		return errors.New("proxy: connection has no socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	dup, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			derr = os.NewSyscallError("fcntl", e)
			return
		}
		dup = int(r)
	}); err != nil {
		return err
	}
	if derr != nil {
		return derr
	}
	// The duplicate shares the original's open file, O_NONBLOCK included.
	_ = c.pre.Close()
	c.pre, c.fd = nil, dup
	return nil
}

// bind makes t (nil for none) the task whose waits go to its loop.
func (c *Conn) Bind(t *Task) { c.task = t }

// begin counts a call that uses fd; false if the connection is closed.
func (c *Conn) begin() bool {
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return false
	}
	c.ops++
	c.mu.Unlock()
	return true
}

func (c *Conn) end() {
	c.mu.Lock()
	c.ops--
	if c.ops == 0 && c.closed.Load() && !c.fdClosed {
		c.closeFD()
	}
	c.mu.Unlock()
}

// closeFD unregisters and closes fd; c.mu is held.
func (c *Conn) closeFD() {
	c.fdClosed = true
	if c.loop != nil {
		c.loop.remove(c, c.slot)
		c.loop = nil
	}
	syscall.Close(c.fd)
}

// registerOn registers fd on l (moving it from another loop), returning
// its slot there; false once the connection is closed.
func (c *Conn) registerOn(l *Loop) (uint32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fdClosed || c.closed.Load() {
		return 0, net.ErrClosed
	}
	if c.loop == l {
		return c.slot, nil
	}
	if c.loop != nil {
		c.loop.remove(c, c.slot)
		c.loop = nil
	}
	slot, err := l.add(c)
	if err != nil {
		return 0, os.NewSyscallError("epoll_ctl", err)
	}
	c.loop, c.slot = l, slot
	c.home.Store(l)
	return slot, nil
}

func (c *Conn) Read(p []byte) (int, error) {
	if c.pre != nil {
		return c.pre.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if !c.begin() {
		return 0, c.opError("read", net.ErrClosed)
	}
	defer c.end()
	if c.wrote {
		c.wrote = false
		if c.drained {
			if err := c.wait(false, true); err != nil {
				return 0, c.opError("read", err)
			}
		}
	}
	for {
		n, e := sysRead(uintptr(c.fd), p)
		switch e {
		case 0:
			if n == 0 {
				if c.closed.Load() {
					return 0, c.opError("read", net.ErrClosed)
				}
				return 0, io.EOF
			}
			c.drained = n < len(p)
			return n, nil
		case syscall.EINTR:
		case syscall.EAGAIN:
			c.drained = true
			if err := c.wait(false, false); err != nil {
				return 0, c.opError("read", err)
			}
		default:
			if c.closed.Load() {
				return 0, c.opError("read", net.ErrClosed)
			}
			return 0, c.opError("read", os.NewSyscallError("read", e))
		}
	}
}

func (c *Conn) Write(p []byte) (int, error) {
	if c.pre != nil {
		return c.pre.Write(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.begin() {
		return 0, c.opError("write", net.ErrClosed)
	}
	defer c.end()
	c.wrote = true
	done := 0
	for done < len(p) {
		n, e := sysWrite(uintptr(c.fd), p[done:])
		switch e {
		case 0:
			done += n
		case syscall.EINTR:
		case syscall.EAGAIN:
			if err := c.wait(true, false); err != nil {
				return done, c.opError("write", err)
			}
		default:
			if c.closed.Load() {
				return done, c.opError("write", net.ErrClosed)
			}
			return done, c.opError("write", os.NewSyscallError("write", e))
		}
	}
	return done, nil
}

// wait waits until fd may be ready for the operation, the deadline
// passes, or the connection is closed. first: a read not tried yet (only
// on a loop; see loopWait.first).
func (c *Conn) wait(write, first bool) error {
	dl := c.rdl.Load()
	if write {
		dl = c.wdl.Load()
	}
	for {
		if c.closed.Load() {
			return net.ErrClosed
		}
		if dl != 0 && dl <= int64(mono.Now()) {
			return os.ErrDeadlineExceeded
		}
		var timedOut bool
		if t := c.task; t != nil && t.attached {
			var err error
			if timedOut, err = t.waitFor(c, write, first, dl); err != nil {
				return err
			}
		} else if first {
			return nil // a thread of its own reads first
		} else {
			timedOut = c.ppoll(write, dl)
		}
		if c.closed.Load() {
			return net.ErrClosed
		}
		if !timedOut {
			return nil
		}
	}
}

// ppoll blocks the calling thread until fd may be ready or dl passes; it
// reports a timeout.
func (c *Conn) ppoll(write bool, dl int64) bool {
	pfd := struct {
		fd             int32
		events, revent int16
	}{fd: int32(c.fd), events: 0x1 | 0x2000} // POLLIN | POLLRDHUP
	if write {
		pfd.events = 0x4 // POLLOUT
	}
	var ts *syscall.Timespec
	if dl != 0 {
		d := dl - int64(mono.Now())
		if d <= 0 {
			return true
		}
		t := syscall.NsecToTimespec(d)
		ts = &t
	}
	r, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	return e == 0 && r == 0
}

// Close marks the connection closed and wakes a call in progress; the
// descriptor closes when no call uses it any more.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return c.opError("close", net.ErrClosed)
	}
	c.closed.Store(true)
	if c.pre != nil {
		return c.pre.Close()
	}
	if c.ops == 0 {
		c.closeFD()
	} else {
		_ = syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	}
	return nil
}

func (c *Conn) LocalAddr() net.Addr  { return c.laddr }
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

func (c *Conn) SetDeadline(t time.Time) error {
	if c.pre != nil {
		return c.pre.SetDeadline(t)
	}
	d := deadlineOf(t)
	c.rdl.Store(d)
	c.wdl.Store(d)
	return nil
}

func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.pre != nil {
		return c.pre.SetReadDeadline(t)
	}
	c.rdl.Store(deadlineOf(t))
	return nil
}

func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.pre != nil {
		return c.pre.SetWriteDeadline(t)
	}
	c.wdl.Store(deadlineOf(t))
	return nil
}

// deadlineOf turns a deadline into mono.Now ns (0: none; a past one is at
// least 1, so it counts as set).
func deadlineOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(int64(mono.Now()+time.Until(t)), 1)
}

// SyscallConn gives the idle check (protocol.Conn.CheckIdle) the socket.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	if c.pre != nil {
		if sc, ok := c.pre.(syscall.Conn); ok {
			return sc.SyscallConn()
		}
	}
	return loopRawConn{c}, nil
}

// loopRawConn is a Conn's syscall.RawConn.
type loopRawConn struct{ c *Conn }

func (r loopRawConn) Control(f func(fd uintptr)) error {
	if !r.c.begin() {
		return r.c.opError("raw-control", net.ErrClosed)
	}
	defer r.c.end()
	f(uintptr(r.c.fd))
	return nil
}

func (r loopRawConn) Read(f func(fd uintptr) bool) error  { return r.io(f, false) }
func (r loopRawConn) Write(f func(fd uintptr) bool) error { return r.io(f, true) }

func (r loopRawConn) io(f func(fd uintptr) bool, write bool) error {
	op := "raw-read"
	if write {
		op = "raw-write"
	}
	if !r.c.begin() {
		return r.c.opError(op, net.ErrClosed)
	}
	defer r.c.end()
	for !f(uintptr(r.c.fd)) {
		if err := r.c.wait(write, false); err != nil {
			return r.c.opError(op, err)
		}
	}
	return nil
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.laddr, Addr: c.raddr, Err: err}
}
