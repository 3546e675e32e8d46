package proxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/health"
)

// failovers runs the automatic failovers of a Server: at most one goroutine per cluster runs
// health.Failover until it promotes (or follows another sluice instance's promotion), and the
// result is published with Topology.Promote, written to the cluster's state file and logged.
// Old masters that answer probes again are fenced (read_only) once. Its maps are guarded by mu;
// the state of a cluster is written only by that cluster's failover goroutine or, after it,
// by a fence goroutine, both under mu.
type failovers struct {
	s     *Server
	total *prometheus.CounterVec

	mu      chan struct{} // a one-slot lock that a goroutine can hold across I/O
	running map[string]bool
	fencing map[string]bool // old master addresses being fenced or fenced by this process
	state   map[string]*health.FailoverState
}

func newFailovers(s *Server) *failovers {
	f := &failovers{
		s:       s,
		mu:      make(chan struct{}, 1),
		running: map[string]bool{},
		fencing: map[string]bool{},
		state:   map[string]*health.FailoverState{},
	}
	f.total = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_failovers_total",
		Help: "Failovers and switchovers of a cluster's master, by cluster and outcome (promoted: this instance promoted a replica; followed: another instance had; switchover: a planned switchover moved the master; failed, switchover_failed: one gave up).",
	}, []string{"cluster", "outcome"})
	s.metrics.reg.MustRegister(f.total)
	return f
}

func (f *failovers) lock()   { f.mu <- struct{}{} }
func (f *failovers) unlock() { <-f.mu }

// credentials are the service account of cluster name, with its TLS.
func (f *failovers) credentials(name string, addr string) health.Credentials {
	cc := f.s.cfg.Cluster(name)
	cred := health.Credentials{User: cc.User, Password: cc.Password, Timeout: f.s.config().Health.Timeout.Duration}
	if p := f.s.pool(addr); p != nil && p.tlsRequired {
		cred.TLS = p.tls
	}
	return cred
}

// stateOf returns cluster's remembered failover state; the caller holds the lock.
func (f *failovers) stateOf(cluster string) *health.FailoverState {
	st := f.state[cluster]
	if st == nil {
		st = &health.FailoverState{Cluster: cluster}
		f.state[cluster] = st
	}
	return st
}

// writeState writes cluster's state file when [proxy] state_dir is set; the caller holds
// the lock.
func (f *failovers) writeState(cluster string) {
	dir := f.s.cfg.Proxy.StateDir
	if dir == "" {
		return
	}
	if err := health.WriteFailoverState(dir, *f.stateOf(cluster)); err != nil {
		f.s.log.Error("cannot write the failover state file", zap.String("cluster", cluster), zap.Error(err))
	}
}

// masterDown is called when the prober marks b down. It closes what the pool lent to the
// master, so statements blocked on it get an ERR at once, and starts a failover of the
// cluster when b is its master and auto_failover is on.
func (f *failovers) masterDown(b *health.Backend) {
	c := f.s.topo.Current().Cluster(b.Cluster)
	if c == nil || c.Master != b {
		return
	}
	if p := f.s.pool(b.Address); p != nil {
		if n := p.CloseLent(); n > 0 {
			f.s.log.Warn("closed the connections lent to the master that went down", zap.String("cluster", b.Cluster),
				zap.String("backend", b.Address), zap.Int("connections", n))
		}
	}
	if !f.s.config().Health.AutoFailover {
		return
	}
	f.lock()
	if f.running[b.Cluster] {
		f.unlock()
		return
	}
	f.running[b.Cluster] = true
	f.unlock()
	f.s.wg.Add(1)
	go func() {
		defer f.s.wg.Done()
		defer func() { f.lock(); delete(f.running, b.Cluster); f.unlock() }()
		f.run(b.Cluster, b)
	}()
}

// retryable are the reasons a failover is tried again on the next probe round.
var retryable = []error{health.ErrNotConfirmed, health.ErrInProgress, health.ErrNoQuorum, health.ErrApplyTimeout}

// run fails over cluster from master until it succeeds, the master is back up, or a reason
// that is not retryable stops it.
func (f *failovers) run(cluster string, master *health.Backend) {
	log := f.s.log.With(zap.String("cluster", cluster), zap.String("old_master", master.Address))
	for attempt := 1; ; attempt++ {
		snap := f.s.topo.Current()
		c := snap.Cluster(cluster)
		if c.Master != master || master.Up() {
			log.Info("failover not needed any more", zap.String("master", c.Master.Address), zap.String("state", c.Master.State().String()))
			return
		}
		replicas := make([]string, len(c.Replicas))
		for i, r := range c.Replicas {
			replicas[i] = r.Address
		}
		f.lock()
		last := f.stateOf(cluster).LastFailover
		f.unlock()
		fo := health.Failover{
			Cluster:      cluster,
			Master:       master.Address,
			Replicas:     replicas,
			Credentials:  f.credentials(cluster, master.Address),
			Epoch:        snap.Epoch,
			LastFailover: last,
			Block:        f.s.config().Health.FailoverBlock.Duration,
		}
		ctx, cancel := context.WithTimeout(f.s.ctx, health.DefaultApplyTimeout+10*f.s.config().Health.Timeout.Duration)
		res, err := fo.Run(ctx)
		cancel()
		if err == nil {
			f.publish(res, log)
			return
		}
		if f.s.ctx.Err() != nil {
			return
		}
		again := false
		for _, r := range retryable {
			again = again || errors.Is(err, r)
		}
		if !again {
			if errors.Is(err, health.ErrAmbiguousMaster) {
				if _, rerr := f.s.topo.RefuseWrites(cluster, err.Error()); rerr == nil {
					log.Error("writes refused: sluice cannot tell which server is the master", zap.Error(err))
				}
			}
			f.total.WithLabelValues(cluster, "failed").Inc()
			log.Error("automatic failover failed", zap.Int("attempt", attempt), zap.Error(err))
			return
		}
		log.Warn("automatic failover not possible yet, trying again next probe round", zap.Int("attempt", attempt), zap.Error(err))
		select {
		case <-f.s.ctx.Done():
			return
		case <-time.After(f.s.config().Health.Interval.Duration):
		}
	}
}

// publish makes a successful failover's new master the cluster's: a new snapshot (the pools
// follow it, Server.followSnapshot), the old master's lent connections closed, the state file, the
// log and the metric.
func (f *failovers) publish(res *health.Result, log *zap.Logger) {
	snap, err := f.s.topo.Promote(res.Cluster, res.NewMaster, res)
	if err != nil {
		log.Error("cannot switch to the new master", zap.String("new_master", res.NewMaster), zap.Error(err))
		return
	}
	for _, b := range snap.Cluster(res.Cluster).Fenced {
		if b.Address == res.OldMaster {
			f.s.backendStateChanged(b, health.StateDown, health.StateFenced, "failover: replaced by "+res.NewMaster)
		}
	}
	if p := f.s.pool(res.OldMaster); p != nil {
		p.CloseLent()
	}
	f.lock()
	f.stateOf(res.Cluster).Record(res)
	f.writeState(res.Cluster)
	f.unlock()
	f.total.WithLabelValues(res.Cluster, string(res.Outcome)).Inc()
	f.s.event("failover", res.Cluster, res.NewMaster, fmt.Sprintf("%s replaced %s (%s)", res.NewMaster, res.OldMaster, res.Outcome))
	fields := []zap.Field{zap.String("outcome", string(res.Outcome)), zap.String("new_master", res.NewMaster),
		zap.Uint64("epoch", snap.Epoch), zap.String("promoted_at", res.PromotedAt), zap.Strings("repointed", res.Repointed),
		zap.Any("not_repointed", res.NotRepointed), zap.Any("skipped", res.Skipped), zap.Duration("took", res.Finished.Sub(res.Started))}
	for _, st := range res.Steps {
		fields = append(fields, zap.Duration("step_"+st.Name, st.Took))
	}
	log.Warn("failover: writes go to the new master", fields...)
}

// status is called with each probe's Status: a fenced old master that answers is fenced on
// the server (read_only) once per process.
func (f *failovers) status(b *health.Backend, st *health.Status) {
	if b.State() != health.StateFenced {
		return
	}
	f.lock()
	if f.fencing[b.Address] {
		f.unlock()
		return
	}
	f.fencing[b.Address] = true
	var promotedAt health.GTIDSet
	s := f.stateOf(b.Cluster)
	for i := len(s.History) - 1; i >= 0; i-- {
		if s.History[i].OldMaster == b.Address {
			if pos, err := s.History[i].PromotedPosition(); err == nil {
				promotedAt = pos
			}
			break
		}
	}
	f.unlock()
	f.s.wg.Add(1)
	go func() {
		defer f.s.wg.Done()
		ctx, cancel := context.WithTimeout(f.s.ctx, 2*f.s.config().Health.Timeout.Duration)
		defer cancel()
		fr, err := health.FenceOldMaster(ctx, b.Address, f.credentials(b.Cluster, b.Address), promotedAt)
		f.lock()
		defer f.unlock()
		if err != nil {
			delete(f.fencing, b.Address) // tried again at its next probe
			f.s.log.Error("cannot fence the old master", zap.String("cluster", b.Cluster), zap.String("backend", b.Address), zap.Error(err))
			return
		}
		f.stateOf(b.Cluster).RecordFence(fr)
		f.writeState(b.Cluster)
		f.s.log.Warn("fenced: old master is back, set read_only, gets no traffic until a DBA puts it back",
			zap.String("cluster", b.Cluster), zap.String("backend", b.Address), zap.Bool("was_writable", fr.WasWritable),
			zap.String("binlog_pos", fr.BinlogPos), zap.String("errant", fr.Errant))
	}()
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

// recover sets up each cluster at start-up: with a state file, its recorded master and
// fenced servers; and, whatever the record, it asks the servers which one is the master
// (health.Discover): a recorded or discovered master other than the configured one becomes
// the master, and two writable servers replicating from no one that the record cannot settle
// refuse writes. Unreachable servers are left to the prober.
func (f *failovers) recover() error {
	if dir := f.s.cfg.Proxy.StateDir; dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			if err == nil {
				err = errors.New("not a directory")
			}
			return fmt.Errorf("proxy.state_dir %s: %w", dir, err)
		}
	}
	for _, cc := range f.s.cfg.Clusters {
		var known string
		if dir := f.s.cfg.Proxy.StateDir; dir != "" {
			st, ok, err := health.ReadFailoverState(dir, cc.Name)
			if err != nil {
				return err
			}
			if ok {
				f.state[cc.Name] = &st
				known = st.Master
			}
		}
		addrs := append([]string{cc.Master}, make([]string, 0, len(cc.Replicas))...)
		for _, r := range cc.Replicas {
			addrs = append(addrs, r.Address)
		}
		ctx, cancel := context.WithTimeout(f.s.ctx, 2*f.s.config().Health.Timeout.Duration)
		d, err := health.Discover(ctx, cc.Name, addrs, known, f.credentials(cc.Name, cc.Master))
		cancel()
		f.writableReplicas(cc.Name, d.WritableReplicas)
		master := d.Master
		switch {
		case errors.Is(err, health.ErrAmbiguousMaster):
			if _, rerr := f.s.topo.RefuseWrites(cc.Name, err.Error()); rerr != nil {
				return rerr
			}
			f.s.log.Error("writes refused: sluice cannot tell which server is the master", zap.String("cluster", cc.Name), zap.Error(err))
			continue
		case err != nil:
			// No writable master in sight: trust the record, else the configuration.
			master = known
			f.s.log.Warn("cannot confirm the master at start-up", zap.String("cluster", cc.Name), zap.String("recorded_master", known), zap.Error(err))
		}
		if master == "" || master == cc.Master {
			continue
		}
		snap, perr := f.s.topo.Promote(cc.Name, master, nil)
		if perr != nil {
			f.s.log.Error("cannot use the recorded or discovered master; using the configured one", zap.String("cluster", cc.Name),
				zap.String("master", master), zap.Error(perr))
			continue
		}
		f.s.log.Warn("master from the failover state", zap.String("cluster", cc.Name), zap.String("master", master),
			zap.String("configured_master", cc.Master), zap.Uint64("epoch", snap.Epoch))
	}
	return nil
}
