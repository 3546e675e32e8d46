//go:build !linux

package proxy

import (
	"errors"
	"net"
	"time"
)

// Event loops use epoll: elsewhere every session has a goroutine of its
// own and these stand-ins are never used.

const loopsSupported = false

type eventLoop struct{}

func (l *eventLoop) stop() {}

type loopTask struct{}

func (t *loopTask) detach() bool { return false }
func (t *loopTask) attach()      {}

type loopConn struct{ net.Conn }

func (c *loopConn) bind(*loopTask) {}

func newLoopConn(nc net.Conn) *loopConn { return &loopConn{Conn: newSockConn(nc)} }

func dialLoopConn(nc net.Conn) (*loopConn, error) { return newLoopConn(nc), nil }

func (s *Server) startLoops() error {
	return errors.New("proxy: event_loop needs Linux")
}

func (s *Server) serveOnLoop(*Session, time.Time) bool { return false }

func (bc *BackendConn) onLoopOf(*loopTask) bool { return true }

func (s *Server) loopSessions() int { return 0 }
