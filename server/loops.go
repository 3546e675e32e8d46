package server

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/dataplane"
	"github.com/sluice-proxy/sluice/internal/evloop"
)

// startLoops starts one event loop per thread and gives the process one
// thread more, for the work that does not run on a loop (see evloop.Loop).
func (s *Server) startLoops() error {
	n := runtime.NumCPU()
	if t := s.cfg.Proxy.Threads; t > 0 {
		n = t
	}
	runtime.GOMAXPROCS(n + 1)
	loops, err := evloop.Start(n, s.log)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	s.loops = loops
	return nil
}

// serveOnLoop hands a logged-in session to an event loop, which serves
// its commands from then on and ends it (endSession); it reports whether
// it did. A session whose client connection is not a plain TCP socket
// (TLS) stays on its goroutine.
func (s *Server) serveOnLoop(sess *dataplane.Session, start time.Time) bool {
	if s.loops == nil {
		return false
	}
	lc, ok := sess.NetConn().(*evloop.Conn)
	if !ok || lc.LeavePoller() != nil {
		return false
	}
	l := s.loops[s.nextLoop.Add(1)%uint32(len(s.loops))]
	l.Spawn(func(t *evloop.Task) {
		defer func() {
			if r := recover(); r != nil {
				sess.Log().Error("session panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			}
			s.endSession(sess, true)
		}()
		sess.ServeOn(t, lc, start)
	})
	return true
}

// loopSessions counts the sessions the event loops run (for metrics).
func (s *Server) loopSessions() int {
	n := 0
	for _, l := range s.loops {
		n += l.Tasks()
	}
	return n
}
