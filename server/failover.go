package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/fleet"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/failpoint"
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
	// repairing are the clusters a replica repair runs for; repaired when each last started.
	repairing map[string]bool
	repaired  map[string]time.Time     // when the next repair of the cluster may start
	backoff   map[string]time.Duration // how long the last fruitless repair pushed it back
	alerted   map[string]string        // cluster, replica, master -> the divergent GTIDs alerted
}

func newFailovers(s *Server) *failovers {
	f := &failovers{
		s:       s,
		mu:      make(chan struct{}, 1),
		running: map[string]bool{},
		fencing: map[string]bool{},
		state:   map[string]*health.FailoverState{},

		repairing: map[string]bool{},
		repaired:  map[string]time.Time{},
		backoff:   map[string]time.Duration{},
		alerted:   map[string]string{},
	}
	f.total = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_failovers_total",
		Help: "Failovers and switchovers of a cluster's master, by cluster and outcome (promoted: this instance promoted a replica; followed: another instance had; switchover: a planned switchover moved the master; failed, switchover_failed: one gave up; refused_divergent: a failover or a repoint was refused because it would discard transactions a replica received).",
	}, []string{"cluster", "outcome"})
	s.metrics.Reg.MustRegister(f.total)
	return f
}

func (f *failovers) lock()   { f.mu <- struct{}{} }
func (f *failovers) unlock() { <-f.mu }

// credentials are the service account of cluster name, with its TLS.
func (f *failovers) credentials(name string, addr string) health.Credentials {
	cc := f.s.cfg.Cluster(name)
	cred := health.Credentials{User: cc.User, Password: cc.Password, Timeout: f.s.config().Health.Timeout.Duration}
	if p := f.s.pool(addr); p != nil {
		if t, required := p.TLS(); required {
			cred.TLS = t
		}
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
var retryable = []error{health.ErrNotLeader, fleet.ErrLostLeadership, fleet.ErrTopologyMoved, health.ErrNotConfirmed, health.ErrInProgress, health.ErrNoQuorum, health.ErrApplyTimeout, health.ErrDivergent, health.ErrPromoteFailed}

// newFailover is the failover of cluster from master over snap's replicas, with the state
// file as its checkpoint.
func (f *failovers) newFailover(cluster, master string, snap *health.Snapshot) health.Failover {
	c := snap.Cluster(cluster)
	replicas := make([]string, len(c.Replicas))
	for i, r := range c.Replicas {
		replicas[i] = r.Address
	}
	var elsewhere []string
	for _, b := range c.Fenced {
		elsewhere = append(elsewhere, b.Address)
	}
	if cm := f.s.cfg.Cluster(cluster).Master; cm != master {
		elsewhere = append(elsewhere, cm)
	}
	f.lock()
	st := f.stateOf(cluster)
	last := st.LastFailover
	// Old masters fenced before a restart are not in the snapshot's fenced list.
	elsewhere = append(elsewhere, st.Fenced...)
	for _, h := range st.History {
		elsewhere = append(elsewhere, h.OldMaster)
	}
	f.unlock()
	elsewhere = slices.DeleteFunc(elsewhere, func(a string) bool { return a == "" || a == master })
	return health.Failover{
		Elsewhere:    elsewhere,
		Cluster:      cluster,
		Master:       master,
		Replicas:     replicas,
		Credentials:  f.credentials(cluster, master),
		Epoch:        snap.Epoch,
		LastFailover: last,
		Block:        f.s.config().Health.FailoverBlock.Duration,
		Checkpoint:   func(r *health.Result) { f.checkpoint(r) },
	}
}

// continuing makes fo the continuation of p, a pending failover, when p is one from the same
// master: its replicas confirmed the master down before, and once it began promoting a
// candidate no other may be promoted.
func (f *failovers) continuing(fo *health.Failover, p *health.Result) {
	// A switchover's pending record says nothing about its old master being down, and one
	// that promoted was recorded first, so its old master is no longer the master.
	if p == nil || p.OldMaster != fo.Master || p.Outcome == health.OutcomeSwitchover {
		return
	}
	fo.Resumed, fo.Undo = true, p.Undo
	if p.PromotionStarted() {
		fo.Candidate = p.NewMaster
	}
}

// checkpoint keeps a failover in progress as the state's pending failover and writes the state
// file, so that a sluice started after this one died finishes it.
func (f *failovers) checkpoint(r *health.Result) {
	p := cloneResult(r)
	f.lock()
	f.stateOf(r.Cluster).Pending = p
	f.writeState(r.Cluster)
	f.unlock()
}

// cloneResult is a deep copy of r: Run goes on changing its slices and maps.
func cloneResult(r *health.Result) *health.Result {
	c := *r
	c.Servers, c.Steps, c.Warnings, c.Repointed = slices.Clone(r.Servers), slices.Clone(r.Steps), slices.Clone(r.Warnings), slices.Clone(r.Repointed)
	c.NotRepointed, c.Skipped, c.Divergent = maps.Clone(r.NotRepointed), maps.Clone(r.Skipped), maps.Clone(r.Divergent)
	c.Undo = maps.Clone(r.Undo)
	return &c
}

// run fails over cluster from master until it succeeds, the master is back up, or a reason
// that is not retryable stops it. With [fleet] only the cluster's prober-leader attempts it;
// the others observe (observe) until the leader's record moves them.
func (f *failovers) run(cluster string, master *health.Backend) {
	log := f.s.log.With(zap.String("cluster", cluster), zap.String("old_master", master.Address))
	refused := ""
	for attempt := 1; ; attempt++ {
		snap := f.s.topo.Current()
		c := snap.Cluster(cluster)
		l, fl, leads := f.lead(cluster)
		if c.Master == master && master.Up() && !f.masterBack(cluster, master, fl, log) {
			continue
		}
		if c.Master != master || master.Up() {
			log.Info("failover not needed any more", zap.String("master", c.Master.Address), zap.String("state", c.Master.State().String()))
			f.dropPending(cluster, master.Address, master.Up())
			return
		}
		if !leads {
			if !f.observe(cluster, master) {
				return
			}
			continue
		}
		res, err := f.attempt(cluster, master, snap, l, fl, log)
		if err == nil {
			f.publish(res, log)
			return
		}
		if f.s.ctx.Err() != nil {
			return
		}
		if errors.Is(err, health.ErrDivergent) && err.Error() != refused {
			// Alerted once per reason: the refusal stands until a DBA lets the replica that
			// holds the transactions apply them (or gives them up), and each round tries again.
			refused = err.Error()
			f.refusedDivergent(cluster, master.Address, err, log)
		}
		if !retryAfter(err) && !f.s.holding(cluster, holdDown) {
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
		if !f.pause() {
			return
		}
	}
}

// retryAfter reports whether a failover that failed with err is tried again next round: a
// retryable reason, or a step that ran out of time (a STOP SLAVE waiting for a long
// transaction).
func retryAfter(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	for _, r := range retryable {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// attempt is one failover of cluster from master under l (with [fleet]): the pending
// failover it continues, the run, and the record in etcd before anything switches here.
func (f *failovers) attempt(cluster string, master *health.Backend, snap *health.Snapshot, l fleet.Lead, fl *fleet.Fleet, log *zap.Logger) (*health.Result, error) {
	fo := f.newFailover(cluster, master.Address, snap)
	var pending *health.Result
	if fl != nil {
		// The fleet's pending failover is at least as new as this instance's own record
		// (Guard writes it before Checkpoint does), and may be another leader's.
		pending = f.pendingFromFleet(fl, cluster)
	} else {
		f.lock()
		pending = f.stateOf(cluster).Pending
		f.unlock()
	}
	f.continuing(&fo, pending)
	ctx, cancel := context.WithTimeout(f.s.ctx, health.DefaultApplyTimeout+10*f.s.config().Health.Timeout.Duration)
	defer cancel()
	ctx, cancelLead := underLead(ctx, &fo, fl, l)
	defer cancelLead()
	res, err := fo.Run(ctx)
	if err != nil {
		return nil, err
	}
	if err := f.recordInFleet(ctx, fl, l, res); err != nil {
		log.Error("failover done on the servers but not recorded in etcd; this instance switches only once the fleet's topology says so",
			zap.String("new_master", res.NewMaster), zap.Error(err))
		return nil, fmt.Errorf("%w: %w", health.ErrNotLeader, err)
	}
	return res, nil
}

// pause waits a probe interval; false when the Server closes first.
func (f *failovers) pause() bool {
	select {
	case <-f.s.ctx.Done():
		return false
	case <-time.After(f.s.config().Health.Interval.Duration):
		return true
	}
}

// dropPending forgets a pending failover from oldMaster that this process gave up before it
// began promoting, so that a restart does not finish it. With masterBack (the old master
// answers probes again) the replicas it changed are put back (abandon). Without, a failover
// that changed replicas is kept: its record of them is what puts them back once the master
// answers, and the statements that do so would discard relay logs while it is down.
func (f *failovers) dropPending(cluster, oldMaster string, masterBack bool) {
	if f.s.cfg.Fleet.Enabled() {
		f.dropFleetPending(cluster, oldMaster, masterBack)
		return
	}
	f.lock()
	st := f.stateOf(cluster)
	p := st.Pending
	if p == nil || p.OldMaster != oldMaster || p.PromotionStarted() || (!masterBack && len(p.Undo) > 0) {
		f.unlock()
		return
	}
	st.Pending = nil
	f.writeState(cluster)
	f.unlock()
	if masterBack {
		f.abandon(cluster, p)
	}
}

// abandon puts back, as far as it can, the replicas an unfinished failover p changed, once its
// old master answers again: the statements it recorded (Result.Undo) run on each (they make
// the replica fetch its relay log again, which only the live master can serve), and a
// candidate left read-only and replicating from no one follows the master again (a repair).
func (f *failovers) abandon(cluster string, p *health.Result) {
	log := f.s.log.With(zap.String("cluster", cluster), zap.String("old_master", p.OldMaster))
	if p.PromotionStarted() && p.NewMaster != "" {
		// The candidate may have been made writable: it must not take writes beside the
		// old master. read_only first; the repair below makes it follow the master.
		ctx, cancel := context.WithTimeout(f.s.ctx, 2*f.s.config().Health.Timeout.Duration)
		_, err := health.FenceOldMaster(ctx, p.NewMaster, f.credentials(cluster, p.NewMaster), health.GTIDSet{})
		cancel()
		if err != nil {
			log.Error("cannot set the abandoned failover's candidate read-only; a DBA must look", zap.String("backend", p.NewMaster), zap.Error(err))
		} else {
			log.Warn("abandoned failover: its candidate set read-only", zap.String("backend", p.NewMaster))
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(p.Undo)) {
		ctx, cancel := context.WithTimeout(f.s.ctx, 2*f.s.config().Health.Timeout.Duration)
		err := func() error {
			cc, err := health.Dial(ctx, addr, f.credentials(cluster, addr))
			if err != nil {
				return err
			}
			defer cc.Close()
			return cc.Exec(ctx, p.Undo[addr]...)
		}()
		cancel()
		if err != nil {
			log.Error("cannot put back a replica the abandoned failover changed; a DBA must look", zap.String("backend", addr),
				zap.Strings("statements", p.Undo[addr]), zap.Error(err))
			continue
		}
		log.Warn("abandoned failover: replica put back as it was", zap.String("backend", addr), zap.Strings("statements", p.Undo[addr]))
	}
	f.repair(cluster, nil, true)
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
	failpoint.Hit(failpoint.FailoverRecorded)
	f.total.WithLabelValues(res.Cluster, string(res.Outcome)).Inc()
	f.divergentReplicas(res.Cluster, res.NewMaster, res.Divergent, log)
	switch {
	case res.Outcome != health.OutcomeFollowed || !f.mayChange(res.Cluster):
	case f.s.cfg.Fleet.Enabled():
		// The instance that promoted may have died before repointing every replica. In the
		// background: in a fleet publish runs on the watch, which must not wait for servers.
		f.startRepair(res.Cluster, []string{res.OldMaster})
	default:
		f.repair(res.Cluster, []string{res.OldMaster}, true)
	}
	f.s.event("failover", res.Cluster, res.NewMaster, fmt.Sprintf("%s replaced %s (%s)", res.NewMaster, res.OldMaster, res.Outcome))
	fields := []zap.Field{zap.String("outcome", string(res.Outcome)), zap.String("new_master", res.NewMaster),
		zap.Uint64("epoch", snap.Epoch), zap.String("promoted_at", res.PromotedAt), zap.Strings("repointed", res.Repointed),
		zap.Any("not_repointed", res.NotRepointed), zap.Any("skipped", res.Skipped), zap.Strings("warnings", res.Warnings),
		zap.Duration("took", res.Finished.Sub(res.Started))}
	for _, st := range res.Steps {
		fields = append(fields, zap.Duration("step_"+st.Name, st.Took))
	}
	log.Warn("failover: writes go to the new master", fields...)
}

// status is called with each probe's Status: a replica that replicates from a fenced old
// master is repaired (moved under the master), and a fenced old master that answers is fenced
// on the server (read_only) once per process.
func (f *failovers) status(b *health.Backend, st *health.Status) {
	if b.Role == health.RoleMaster && b.State() != health.StateFenced {
		f.lock()
		p := f.stateOf(b.Cluster).Pending
		idle := !f.running[b.Cluster]
		f.unlock()
		if p != nil && idle && p.OldMaster == b.Address && !p.PromotionStarted() {
			// A failover that gave up (a manual one, or a refusal) left replicas changed:
			// the master answers, so they can be put back.
			f.s.wg.Add(1)
			go func() { defer f.s.wg.Done(); f.dropPending(b.Cluster, b.Address, true) }()
		}
	}
	if b.Role == health.RoleReplica {
		if c := f.s.topo.Current().Cluster(b.Cluster); c != nil {
			if src := health.FencedSource(st, c); src != "" {
				f.startRepair(b.Cluster, []string{src})
			}
		}
	}
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

// startRepair repairs cluster's replicas that replicate from one of from, in the background,
// unless a failover, a switchover or a repair of the cluster runs or a repair started less
// than a probe interval ago.
func (f *failovers) startRepair(cluster string, from []string) {
	if !f.mayChange(cluster) {
		return // the fleet's prober-leader repairs
	}
	f.lock()
	if f.running[cluster] || f.repairing[cluster] || time.Now().Before(f.repaired[cluster]) {
		f.unlock()
		return
	}
	f.repairing[cluster] = true
	f.unlock()
	f.s.wg.Add(1)
	go func() {
		defer f.s.wg.Done()
		defer func() { f.lock(); delete(f.repairing, cluster); f.unlock() }()
		moved := f.repair(cluster, from, false)
		// A replica that cannot be moved (it holds what the master lacks, or a statement
		// fails) is tried again later and later, up to every 5 minutes, not every probe.
		f.lock()
		next := f.s.config().Health.Interval.Duration
		if !moved {
			next = min(max(2*f.backoff[cluster], next), 5*time.Minute)
		}
		f.backoff[cluster], f.repaired[cluster] = next, time.Now().Add(next)
		f.unlock()
	}()
}

// repair moves cluster's replicas that replicate from one of from (and, with noOne, read-only
// ones that replicate from no one) under the current master (health.Repair), logging what it
// did and alerting for those it left alone because they hold transactions the master lacks.
// It reports whether every stranded replica now follows the master.
func (f *failovers) repair(cluster string, from []string, noOne bool) bool {
	c := f.s.topo.Current().Cluster(cluster)
	if c == nil || c.WritesRefused != "" {
		return false
	}
	replicas := make([]string, len(c.Replicas))
	for i, r := range c.Replicas {
		replicas[i] = r.Address
	}
	rp := health.Repair{Cluster: cluster, Master: c.Master.Address, Replicas: replicas,
		Credentials: f.credentials(cluster, c.Master.Address), From: from, NoOne: noOne}
	log := f.s.log.With(zap.String("cluster", cluster), zap.String("master", rp.Master))
	ctx, cancel := context.WithTimeout(f.s.ctx, 10*f.s.config().Health.Timeout.Duration)
	out, err := rp.Run(ctx)
	cancel()
	if err != nil {
		log.Warn("cannot repair the replicas that replicate from an old master", zap.Strings("from", from), zap.Error(err))
		return false
	}
	for _, a := range out.Repointed {
		f.s.event("repointed", cluster, a, "replicates from "+rp.Master+" again")
		log.Warn("replica repointed to the master: it replicated from an old master or from no one", zap.String("backend", a))
	}
	for a, why := range out.NotRepointed {
		if _, div := out.Divergent[a]; !div {
			log.Warn("replica replicates from an old master and could not be repointed", zap.String("backend", a), zap.String("reason", why))
		}
	}
	f.divergentReplicas(cluster, rp.Master, out.Divergent, log)
	return len(out.NotRepointed) == 0
}

// recover sets up each cluster at start-up, before sluice serves: with a state file, its
// recorded master and fenced servers; and, whatever the record, it asks the servers which one
// is the master (health.Discover): a recorded or discovered master other than the configured
// one becomes the master, and two writable servers replicating from no one that the record
// cannot settle refuse writes. A failover the previous process left pending is finished
// (settle, resume), and replicas left following an old master are repointed (repair).
// Unreachable servers are left to the prober.
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
		var rec health.FailoverState
		if dir := f.s.cfg.Proxy.StateDir; dir != "" {
			st, ok, err := health.ReadFailoverState(dir, cc.Name)
			if err != nil {
				return err
			}
			if ok {
				rec = st
				f.state[cc.Name] = &st
			}
		}
		alone := !f.s.cfg.Fleet.Enabled()
		if !alone && rec.Pending != nil {
			// In a fleet the prober-leader finishes or gives up a failover, from the one
			// recorded in etcd; this instance's own record is only what it saw.
			rec.Pending = nil
			f.state[cc.Name].Pending = nil
		}
		known, pending := rec.Master, rec.Pending
		if pending != nil && pending.PromotedAt != "" {
			known = pending.NewMaster // a promoted candidate is the master, whatever came before
		}
		addrs := append([]string{cc.Master}, make([]string, 0, len(cc.Replicas))...)
		for _, r := range cc.Replicas {
			addrs = append(addrs, r.Address)
		}
		ctx, cancel := context.WithTimeout(f.s.ctx, 2*f.s.config().Health.Timeout.Duration)
		d, err := health.Discover(ctx, cc.Name, addrs, known, f.credentials(cc.Name, cc.Master))
		cancel()
		if alone {
			// In a fleet only the prober-leader changes servers: this instance may be
			// starting with a view the fleet has left behind (the topology in etcd wins
			// once read).
			f.writableReplicas(cc.Name, d.WritableReplicas)
			f.fenceStale(cc.Name, d.Stale)
		}
		master := d.Master
		switch {
		case errors.Is(err, health.ErrAmbiguousMaster):
			if _, rerr := f.s.topo.RefuseWrites(cc.Name, err.Error()); rerr != nil {
				return rerr
			}
			f.s.log.Error("writes refused: sluice cannot tell which server is the master", zap.String("cluster", cc.Name), zap.Error(err))
			continue
		case err != nil && pending != nil && pending.PromotedAt != "":
			// The candidate was promoted and does not answer now: it is the master all the
			// same (promoting another could leave two writable servers); the probes take
			// it from here.
			master = pending.NewMaster
			f.settle(cc.Name, master)
		case err != nil && pending != nil:
			// The candidate takes no writes yet: finish the failover before serving. The
			// failover started from the recorded master, which it fences when it publishes.
			if rec.Master != "" && rec.Master != cc.Master {
				_, _ = f.s.topo.Promote(cc.Name, rec.Master, nil)
			}
			if f.resume(cc.Name, pending) {
				f.repairAfterFailover(cc.Name, rec)
				continue
			}
			master = rec.Master
		case err != nil:
			// No writable master in sight: trust the record, else the configuration.
			master = known
			f.s.log.Warn("cannot confirm the master at start-up", zap.String("cluster", cc.Name), zap.String("recorded_master", known), zap.Error(err))
		default:
			f.settle(cc.Name, master)
		}
		if master != "" && master != cc.Master {
			snap, perr := f.s.topo.Promote(cc.Name, master, nil)
			if perr != nil {
				f.s.log.Error("cannot use the recorded or discovered master; using the configured one", zap.String("cluster", cc.Name),
					zap.String("master", master), zap.Error(perr))
				continue
			}
			f.s.log.Warn("master from the failover state", zap.String("cluster", cc.Name), zap.String("master", master),
				zap.String("configured_master", cc.Master), zap.Uint64("epoch", snap.Epoch))
		}
		if err == nil && alone {
			f.repairAfterFailover(cc.Name, rec)
		}
	}
	return nil
}

// settle finishes the record of a failover the previous process left pending, now that master
// is known to be the cluster's master. When it is the pending candidate, the failover got as
// far as promoting it and is recorded as done (the replicas are repaired next). When it is the
// old master, the failover is abandoned: the replicas it changed are put back. When it is
// another server, another sluice instance failed the cluster over: that is recorded as
// followed. Each is written to the state file.
func (f *failovers) settle(cluster, master string) {
	f.lock()
	st := f.stateOf(cluster)
	p := st.Pending
	if p == nil {
		f.unlock()
		return
	}
	log := f.s.log.With(zap.String("cluster", cluster), zap.String("old_master", p.OldMaster), zap.String("candidate", p.NewMaster))
	res := cloneResult(p)
	res.Finished, res.Undo = time.Now(), nil
	switch master {
	case p.OldMaster:
		st.Pending = nil
		f.writeState(cluster)
		f.unlock()
		log.Warn("a failover the previous sluice left unfinished is abandoned: the old master answers again")
		f.abandon(cluster, p)
		return
	case p.NewMaster:
		res.Outcome = health.OutcomePromoted
		res.Warnings = append(res.Warnings, "finished by a restarted sluice after the one that started it died")
		if res.PromotedAt == "" {
			// It died between read_only OFF and the checkpoint after it: the candidate
			// had applied everything any replica received, which the survey recorded.
			res.PromotedAt = receivedByAll(res)
		}
	default:
		res.Outcome, res.NewMaster, res.PromotedAt = health.OutcomeFollowed, master, ""
		res.Warnings = append(res.Warnings, "another sluice instance promoted "+master+" while this one's failover was unfinished")
	}
	st.Record(res)
	f.writeState(cluster)
	f.unlock()
	failpoint.Hit(failpoint.FailoverRecorded)
	f.total.WithLabelValues(cluster, string(res.Outcome)).Inc()
	f.s.event("failover", cluster, master, fmt.Sprintf("%s replaced %s (%s, finished after a restart)", master, p.OldMaster, res.Outcome))
	log.Warn("failover finished after a restart: the previous sluice died part way", zap.String("new_master", master),
		zap.String("outcome", string(res.Outcome)))
}

// receivedByAll is the union of what the replicas had received when r surveyed them, in r's
// flavor's notation ("" when none parses).
func receivedByAll(r *health.Result) string {
	f := health.FlavorMariaDB
	if r.Flavor == health.FlavorMySQL.String() {
		f = health.FlavorMySQL
	}
	var all health.GTIDSet
	for _, sr := range r.Servers {
		if g, err := health.ParseGTID(f, sr.Received); err == nil {
			all = all.Union(g)
		}
	}
	return all.String()
}

// resume runs again, at start-up, a failover the previous process left pending before its
// candidate took writes, and publishes it. failover_block does not apply: it is the same
// failover. It reports whether the cluster has its new master.
func (f *failovers) resume(cluster string, p *health.Result) bool {
	log := f.s.log.With(zap.String("cluster", cluster), zap.String("old_master", p.OldMaster), zap.String("candidate", p.NewMaster))
	if f.s.cfg.Fleet.Enabled() {
		// Not elected yet at start-up: the fleet's prober-leader finishes it (from the
		// pending failover it recorded in etcd, or from what the servers say).
		log.Warn("a failover the previous sluice left unfinished is left to the fleet's prober-leader")
		return false
	}
	fo := f.newFailover(cluster, p.OldMaster, f.s.topo.Current())
	fo.LastFailover, fo.Block = time.Time{}, 0
	f.continuing(&fo, p)
	ctx, cancel := context.WithTimeout(f.s.ctx, health.DefaultApplyTimeout+10*f.s.config().Health.Timeout.Duration)
	res, err := fo.Run(ctx)
	cancel()
	if err != nil {
		if errors.Is(err, health.ErrDivergent) {
			f.refusedDivergent(cluster, p.OldMaster, err, log)
		}
		log.Error("cannot finish the failover the previous sluice left unfinished; the probes take over", zap.Error(err))
		return false
	}
	res.Started = p.Started
	res.Warnings = append(res.Warnings, "finished by a restarted sluice after the one that started it died")
	log.Warn("finishing the failover the previous sluice left unfinished")
	f.publish(res, log)
	return true
}

// repairAfterFailover repoints the replicas of cluster that still replicate from an old master
// a failover replaced (the fenced ones, the history's, the pending failover's; not a
// switchover's, whose old master is a live replica others may follow on purpose) to the
// current master; after a failover that did not finish, read-only servers that replicate from
// no one are repointed too.
func (f *failovers) repairAfterFailover(cluster string, rec health.FailoverState) {
	from := slices.Clone(rec.Fenced)
	for _, h := range rec.History {
		if h.Outcome != health.OutcomeSwitchover {
			from = append(from, h.OldMaster)
		}
	}
	if rec.Pending != nil {
		from = append(from, rec.Pending.OldMaster)
	}
	c := f.s.topo.Current().Cluster(cluster)
	if c == nil {
		return
	}
	from = slices.DeleteFunc(from, func(a string) bool { return a == "" || a == c.Master.Address })
	if len(from) == 0 && rec.Pending == nil {
		return
	}
	f.repair(cluster, from, rec.Pending != nil)
}
