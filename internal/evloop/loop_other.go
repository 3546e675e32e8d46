//go:build !linux

package evloop

import (
	"errors"
	"net"

	"go.uber.org/zap"
)

// Event loops use epoll: elsewhere every session has a goroutine of its
// own and these stand-ins are never used.

const Supported = false

type Loop struct{}

func (l *Loop) Stop() {}

type Task struct{}

func (t *Task) Detach() bool { return false }
func (t *Task) Attach()      {}

type Conn struct{ net.Conn }

func (c *Conn) Bind(*Task) {}

func NewConn(nc net.Conn) *Conn { return &Conn{Conn: NewSockConn(nc)} }

func DialConn(nc net.Conn) (*Conn, error) { return NewConn(nc), nil }

// Start fails: event loops need Linux.
func Start(int, *zap.Logger) ([]*Loop, error) {
	return nil, errors.New("event_loop needs Linux")
}

// Spawn is never called: Start gives no loops here.
func (l *Loop) Spawn(func(*Task)) {}

// OnLoopOf is true: there are no loops to be on.
func (c *Conn) OnLoopOf(*Task) bool { return true }

// LeavePoller fails: there is no loop to join.
func (c *Conn) LeavePoller() error { return errors.New("event_loop needs Linux") }

// Tasks is 0: no loop runs here.
func (l *Loop) Tasks() int { return 0 }
