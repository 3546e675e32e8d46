package server

import (
	"context"
	"fmt"
	"maps"
	"slices"

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

// refusedDivergent alerts that a failover was refused because promoting any replica would
// discard transactions another one received: the metric, an event and an error log line.
func (f *failovers) refusedDivergent(cluster, backend string, err error, log *zap.Logger) {
	f.total.WithLabelValues(cluster, "refused_divergent").Inc()
	f.s.event("failover_refused", cluster, backend, err.Error())
	log.Error("failover refused: promoting any replica would discard transactions another received", zap.String("gtids", err.Error()))
}

// divergentReplicas alerts for each replica a failover or a repair left alone because it holds
// transactions the master lacks (addr -> GTIDs).
func (f *failovers) divergentReplicas(cluster, master string, divergent map[string]string, log *zap.Logger) {
	for _, addr := range slices.Sorted(maps.Keys(divergent)) {
		key := cluster + "\x00" + addr + "\x00" + master
		f.lock()
		seen := f.alerted[key] == divergent[addr]
		f.alerted[key] = divergent[addr]
		f.unlock()
		if seen {
			continue // alerted once; the repair that keeps finding it backs off
		}
		f.total.WithLabelValues(cluster, "refused_divergent").Inc()
		f.s.event("failover_refused", cluster, addr, fmt.Sprintf("not repointed to %s: it holds transactions %s lacks: %s", master, master, divergent[addr]))
		log.Error("replica not repointed: it holds transactions the master lacks; a DBA must look", zap.String("backend", addr),
			zap.String("master", master), zap.String("gtids", divergent[addr]))
	}
}
