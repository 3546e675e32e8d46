package server

import (
	"context"
	"crypto/tls"
	"sync"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health/binlog"
)

// binlogTailers runs the binlog tailers of [cache] binlog_invalidation, one
// per cluster, which invalidate the result cache for writes made on the
// masters behind sluice's back. The Server owns it; its methods are safe
// for concurrent use (mu serializes Start, reloads and Close).
type binlogTailers struct {
	metrics *binlog.Metrics

	mu sync.Mutex
	// running are the tailers started, nil while none runs; stop cancels
	// their context. serverID is the id they were started with.
	running  []*binlog.Tailer
	stop     context.CancelFunc
	serverID int64
	// closed: Close ran, nothing starts again.
	closed bool
}

// initBinlogMetrics registers the tailers' metrics with a series per
// cluster, whether or not tailers ever run, so every documented series
// exists from start.
func (srv *Server) initBinlogMetrics() {
	srv.binlog.metrics = binlog.NewMetrics(srv.metrics.Reg)
	for _, cc := range srv.cfg.Clusters {
		srv.binlog.metrics.Cluster(cc.Name)
	}
}

// binlogWanted reports whether cfg asks for tailers: binlog invalidation
// on a cache that stores something.
func binlogWanted(cfg *conf.Config) bool {
	return cfg.Cache.BinlogInvalidation && cfg.Cache.MaxMemory > 0
}

// applyBinlog starts, stops or restarts the tailers to match cfg (at Start
// and after each reload). Stopping waits for the tailers to be gone.
func (srv *Server) applyBinlog(cfg *conf.Config) {
	b := &srv.binlog
	b.mu.Lock()
	defer b.mu.Unlock()
	want := binlogWanted(cfg) && !b.closed
	if b.running != nil && (!want || b.serverID != cfg.Cache.BinlogServerID) {
		b.stopLocked()
		srv.log.Info("binlog invalidation stopped")
	}
	if !want || b.running != nil {
		return
	}
	ctx, cancel := context.WithCancel(srv.ctx)
	b.stop, b.serverID = cancel, cfg.Cache.BinlogServerID
	c := srv.env.Cache()
	// The service accounts and TLS modes are restart-only: the ones the
	// Server started with are the ones the probes use.
	for _, cc := range srv.cfg.Clusters {
		name := cc.Name
		b.running = append(b.running, binlog.Start(ctx, binlog.Options{
			Cluster:   name,
			Master:    func() string { return srv.binlogMaster(name) },
			User:      cc.User,
			Password:  cc.Password,
			MasterTLS: srv.backendTLS,
			ServerID:  uint32(cfg.Cache.BinlogServerID),
			OnChange:  c.Invalidate,
			OnReset:   func() { c.Flush() },
			Metrics:   b.metrics,
			Log:       srv.log,
		}))
	}
	srv.log.Info("binlog invalidation started", zap.Int("clusters", len(b.running)),
		zap.Int64("server_id", cfg.Cache.BinlogServerID))
}

// stopLocked cancels the tailers and waits until their connections and
// goroutines are gone; b.mu is held.
func (b *binlogTailers) stopLocked() {
	if b.running == nil {
		return
	}
	b.stop()
	for _, tl := range b.running {
		<-tl.Done()
	}
	b.running, b.stop = nil, nil
}

// closeBinlog stops the tailers for good (Close).
func (srv *Server) closeBinlog() {
	b := &srv.binlog
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.stopLocked()
}

// binlogMaster is the address of cluster name's master in the current
// topology snapshot, "" while it has none: the tailer follows failovers and
// switchovers through it. It is an atomic load and a short scan, as
// binlog.Options.Master asks.
func (srv *Server) binlogMaster(name string) string {
	c := srv.topo.Current().Cluster(name)
	if c == nil || c.Master == nil {
		return ""
	}
	return c.Master.Address
}

// backendTLS is the TLS configuration towards the backend at addr when its
// pool requires TLS (the one the probes use), nil otherwise.
func (srv *Server) backendTLS(addr string) *tls.Config {
	if p := srv.pool(addr); p != nil {
		if t, required := p.TLS(); required {
			return t
		}
	}
	return nil
}

// BinlogTailers returns the binlog tailers running now (for tests).
func (srv *Server) BinlogTailers() []*binlog.Tailer {
	srv.binlog.mu.Lock()
	defer srv.binlog.mu.Unlock()
	return append([]*binlog.Tailer(nil), srv.binlog.running...)
}
