package server

import (
	"context"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/health"
)

// fenceStale sets read_only on servers Discover found writable beside the master the record
// settles on (an old master, a candidate of an abandoned failover): they must take no writes.
func (f *failovers) fenceStale(cluster string, addrs []string) {
	for _, addr := range addrs {
		ctx, cancel := context.WithTimeout(f.s.ctx, 2*f.s.config().Health.Timeout.Duration)
		_, err := health.FenceOldMaster(ctx, addr, f.credentials(cluster, addr), health.GTIDSet{})
		cancel()
		if err != nil {
			f.s.log.Error("a second writable server could not be set read-only; a DBA must look", zap.String("cluster", cluster),
				zap.String("backend", addr), zap.Error(err))
			continue
		}
		f.s.log.Warn("a second writable server set read-only", zap.String("cluster", cluster), zap.String("backend", addr))
	}
}

// writableReplicas reports configured replicas that replicate but are not
// read-only (a write sent to one by anything but sluice would make it
// diverge), and sets them read-only when [health] enforce_read_only is on.
func (f *failovers) writableReplicas(cluster string, addrs []string) {
	for _, addr := range addrs {
		if !f.s.config().Health.EnforceReadOnly {
			f.s.log.Warn("replica is writable (read_only is OFF); enforce_read_only would set it read-only",
				zap.String("cluster", cluster), zap.String("backend", addr))
			continue
		}
		ctx, cancel := context.WithTimeout(f.s.ctx, 2*f.s.config().Health.Timeout.Duration)
		err := func() error {
			cc, err := health.Dial(ctx, addr, f.credentials(cluster, addr))
			if err != nil {
				return err
			}
			defer cc.Close()
			return cc.Fence(ctx)
		}()
		cancel()
		if err != nil {
			f.s.log.Error("replica is writable and could not be set read-only", zap.String("cluster", cluster),
				zap.String("backend", addr), zap.Error(err))
			continue
		}
		f.s.log.Warn("replica was writable: set read-only (enforce_read_only)", zap.String("cluster", cluster), zap.String("backend", addr))
	}
}
