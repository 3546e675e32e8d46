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
func (srv *Server) startLoops() error {
	n := runtime.NumCPU()
	if t := srv.cfg.Proxy.Threads; t > 0 {
		n = t
	}
	procsMu.Lock()
	procsFixed = true
	runtime.GOMAXPROCS(n + 1)
	loops, err := evloop.Start(n, srv.log)
	procsMu.Unlock()
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	srv.loops = loops
	return nil
}

// serveOnLoop hands a logged-in session to an event loop, which serves
// its commands from then on and ends it (endSession); it reports whether
// it did. A session whose client connection is not a plain TCP socket
// (TLS) stays on its goroutine.
func (srv *Server) serveOnLoop(sess *dataplane.Session, start time.Time) bool {
	if srv.loops == nil {
		return false
	}
	lc, ok := sess.NetConn().(*evloop.Conn)
	if !ok || lc.LeavePoller() != nil {
		return false
	}
	l := srv.loops[srv.nextLoop.Add(1)%uint32(len(srv.loops))]
	l.Spawn(func(t *evloop.Task) {
		defer func() {
			if r := recover(); r != nil {
				sess.Log().Error("session panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			}
			srv.endSession(sess, true)
		}()
		sess.ServeOn(t, lc, start)
	})
	return true
}

// loopSessions counts the sessions the event loops run (for metrics).
func (srv *Server) loopSessions() int {
	n := 0
	for _, l := range srv.loops {
		n += l.Tasks()
	}
	return n
}
