package proxy

// watchStalls is the stall watchdog, one goroutine per Server until it
// closes. Every stallTick it cuts the data connections whose read from the
// backend has waited for [health] timeout while that backend is
// unresponsive (health.Backend.Unresponsive: its latest probe failed, or
// one has run for the timeout). A backend that answers its probes keeps its
// statements however long they run (SELECT SLEEP(60), a result with long
// gaps between rows). Whether the backend goes down stays the prober's
// call (failures_before_down).
func (s *Server) watchStalls() {
	t := time.NewTimer(stallTick(s.stallTimeout()))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		timeout := s.stallTimeout()
		now := time.Now()
		for _, p := range *s.poolMap.Load() {
			b := p.Backend()
			if !b.Unresponsive(timeout, now) {
				continue
			}
			if n := p.cutReading(timeout, cutStalled); n > 0 {
				s.log.Warn("cut statements waiting on a backend that stopped answering", zap.String("cluster", b.Cluster),
					zap.String("backend", b.Address), zap.String("role", b.Role.String()), zap.Int("connections", n),
					zap.Duration("timeout", timeout), zap.String("probe_error", b.LastError()))
			}
		}
		t.Reset(stallTick(timeout))
	}
}

// replicaDown cuts the statements waiting on replica b, which was just
// marked down, at once: their clients get ERR 2013 instead of waiting for
// the watchdog or TCP.
func (s *Server) replicaDown(b *health.Backend) {
	if p := s.pool(b.Address); p != nil {
		if n := p.cutReading(0, cutDown); n > 0 {
			s.log.Warn("cut statements waiting on a replica that went down", zap.String("cluster", b.Cluster),
				zap.String("backend", b.Address), zap.Int("connections", n))
		}
	}
}
