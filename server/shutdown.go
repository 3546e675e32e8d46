package server

import (
	"context"
	"errors"
	"net"
	"time"

	"go.uber.org/zap"
)

// Shutdown stops the Server gracefully; main calls it on SIGTERM. In order:
//
//  1. /readyz answers 503 "shutting down", so load balancers stop sending
//     clients; for proxy.shutdown_delay sluice still accepts and serves
//     them.
//  2. The client listener closes: new connections are refused.
//  3. Sessions waiting for a command outside a transaction are closed at
//     once; a session running a statement is closed when the statement
//     has been answered, and one inside a transaction when it commits or
//     rolls back.
//  4. When proxy.shutdown_timeout has passed since step 2, or ctx ends,
//     whatever is still open is cut off: client connections and the data
//     connections of statements still running are closed.
//  5. Close: the admin port, metrics, prober and pools stop.
//
// Shutdown returns Close's error, if any. It must be called at most once; Close
// may be called afterwards and does nothing more.
func (srv *Server) Shutdown(ctx context.Context) error {
	p := &srv.config().Proxy
	delay, timeout := p.ShutdownDelay.Duration, p.ShutdownTimeout.Duration
	srv.unready.Store(true)
	srv.log.Info("shutdown: /readyz answers 503", zap.Duration("shutdown_delay", delay), zap.Duration("shutdown_timeout", timeout))
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	srv.env.SetDraining()
	if srv.ln != nil {
		_ = srv.ln.Close()
	}
	cut := time.NewTimer(timeout)
	defer cut.Stop()
	for {
		left, inTx := srv.closeIdleSessions()
		if left == 0 {
			srv.log.Info("shutdown: every client session ended")
			break
		}
		select {
		case <-srv.sessionEnded:
			continue
		case <-cut.C:
		case <-ctx.Done():
		}
		srv.log.Warn("shutdown: cutting off the sessions still open", zap.Int("sessions", left), zap.Int("in_transaction", inTx))
		srv.cutSessions()
		break
	}
	if err := srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// closeIdleSessions closes the sessions that wait for a command outside a
// transaction and reports how many sessions are still open and how many
// of them wait inside a transaction.
func (srv *Server) closeIdleSessions() (left, inTx int) {
	// Closing may block (a TLS close_notify): not under the registry's lock.
	all := srv.env.Registry().All()
	for _, h := range all {
		if h.CloseIfIdle() {
			inTx++
		}
	}
	return len(all), inTx
}

// cutSessions closes every session's client connection and the data
// connection of any statement still running, so the sessions end without
// waiting for their backends.
func (srv *Server) cutSessions() {
	for _, h := range srv.env.Registry().All() {
		h.Cut()
	}
}
