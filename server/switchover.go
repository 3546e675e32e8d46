package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/dataplane"
	"github.com/sluice-proxy/sluice/fleet"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
)

// drainPoll is how often a switchover looks at the sessions while it waits for the writes in
// flight to the old master to finish.
const drainPoll = 2 * time.Millisecond

// drainMaster waits until no session has a statement in flight to, or a transaction open on,
// the master of cluster idx, or until deadline or ctx ends. It returns how many sessions were
// still busy then (0: drained).
func (srv *Server) drainMaster(ctx context.Context, idx int, deadline time.Time) int {
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		busy := 0
		srv.env.Registry().Each(func(h *dataplane.Handle) {
			if h.MasterBusy(idx) {
				busy++
			}
		})
		if busy == 0 || !time.Now().Before(deadline) {
			return busy
		}
		select {
		case <-ctx.Done():
			return busy
		case <-tick.C:
		}
	}
}

// claim marks cluster as having a failover or switchover run by this process, so that no
// other one (automatic or operator's) starts; it returns an ERR when one is running.
func (f *failovers) claim(cluster, what string) *protocol.SQLError {
	f.lock()
	defer f.unlock()
	if f.running[cluster] {
		return protocol.ERUnknownError.New("sluice: %s of cluster %s refused: a failover or switchover of it is already running", what, cluster)
	}
	f.running[cluster] = true
	return nil
}

func (f *failovers) unclaim(cluster string) {
	f.lock()
	delete(f.running, cluster)
	f.unlock()
}

// unclaimAndRecheck ends a switchover's claim; a master that went down meanwhile (its
// masterDown found the claim and started nothing) gets its failover now.
func (f *failovers) unclaimAndRecheck(cluster string) {
	f.unclaim(cluster)
	if c := f.s.topo.Current().Cluster(cluster); c != nil && c.Master.State() == health.StateDown {
		f.masterDown(c.Master)
	}
}

// clusterIndex returns cluster's index in every snapshot, or an ERR naming it.
func (srv *Server) clusterIndex(cluster, what string) (int, *protocol.SQLError) {
	i := slices.IndexFunc(srv.topo.Current().Clusters, func(c *health.Cluster) bool { return c.Name == cluster })
	if i < 0 {
		names := make([]string, 0, len(srv.config().Clusters))
		for _, c := range srv.config().Clusters {
			names = append(names, c.Name)
		}
		return -1, protocol.ERWrongArguments.New("sluice: %s: no cluster %q (clusters: %s)", what, cluster, strings.Join(names, ", "))
	}
	return i, nil
}

// Switchover moves the master of cluster to target, one of its replicas, without losing a
// transaction (health.Switchover): statements for the master wait from the moment the servers
// are checked and locked until the new master is published (or the switchover is undone), up
// to 2 x switchover_timeout + 4 x [health] timeout. The old master becomes a read-only replica
// of target and keeps serving reads. Statements already on their way to the old master finish
// first (the drain); a transaction still open there after switchover_timeout of draining is cut
// off (its connection closed, so it rolls back unacknowledged and the session ends as with a
// lost master). Switchover may be called from any goroutine; it refuses while another failover
// or switchover of the cluster runs. Errors are *protocol.SQLError naming the cluster, the target
// and what failed.
//
// With [fleet] only the cluster's leader runs it, under a context that ends with the
// leadership: the switchover so far is stored in etcd (guarded) before each change to a
// server, and the topology record is written after the catch-up and before the target takes
// writes, so an instance that lost its session part way leaves the old master writable and
// the fleet's record unchanged. The other instances' sessions are not drained here: once the
// old master is read-only, every other connection of the service account on it is killed.
func (srv *Server) Switchover(ctx context.Context, cluster, target string) error {
	what := fmt.Sprintf("SWITCHOVER CLUSTER %s TO '%s'", cluster, target)
	idx, snap, serr := srv.switchoverAllowed(cluster, target, what)
	if serr != nil {
		return serr
	}
	c := snap.Clusters[idx]
	l, fl, leads := srv.failover.lead(cluster)
	if !leads {
		return notLeaderError(what, cluster)
	}
	if serr := srv.failover.claim(cluster, "SWITCHOVER"); serr != nil {
		return serr
	}
	defer srv.failover.unclaimAndRecheck(cluster)
	var lctx context.Context = ctx
	if fl != nil {
		// The switchover runs under the leadership: announced in etcd before each change to
		// a server, committed by the topology record before the target takes writes.
		var cancelLead context.CancelFunc
		lctx, cancelLead = l.Context(ctx)
		defer cancelLead()
	}

	h := &srv.config().Health
	log := srv.log.With(zap.String("cluster", cluster), zap.String("old_master", c.Master.Address), zap.String("new_master", target))
	replicas := make([]string, len(c.Replicas))
	for j, r := range c.Replicas {
		replicas[j] = r.Address
	}
	hold := &switchoverHold{s: srv, h: h, log: log, idx: idx, cluster: cluster, master: c.Master.Address, target: target}
	sw := health.Switchover{
		Cluster:     cluster,
		Master:      c.Master.Address,
		Target:      target,
		Replicas:    replicas,
		Credentials: srv.failover.credentials(cluster, c.Master.Address),
		Epoch:       snap.Epoch,
		Timeout:     h.SwitchoverTimeout.Duration,
		Hold:        hold.hold,
	}
	if fl != nil {
		// Announced before this instance holds its writes, so that the others hold theirs
		// at the same time (fleetPending); refused, nothing changed anywhere.
		announce := &health.Result{Cluster: cluster, Outcome: health.OutcomeSwitchover, OldMaster: c.Master.Address, NewMaster: target}
		if err := guard(fl, l)(lctx, announce); err != nil {
			return protocol.ERUnknownError.New("sluice: %s refused: the fleet's etcd did not take it (%v); nothing changed", what, err)
		}
		sw.Guard = guard(fl, l)
		sw.Commit = func(ctx context.Context, r *health.Result) error { return srv.failover.commitSwitchover(ctx, fl, l, r) }
		// Only this instance's sessions are drained: the others' connections to the old
		// master are cut after it is read-only.
		sw.KillOthers = true
	}
	// The catch-up and the drain have their own bounds; ctx covers the statements around them.
	rctx, cancel := context.WithTimeout(lctx, dataplane.HeldWriteWait(h)+2*h.Timeout.Duration)
	defer cancel()
	res, err := sw.Run(rctx)
	if fl != nil {
		// Done or undone, the switchover leaves nothing for another leader to finish (the
		// repoints' guards wrote pending again after the record dropped it).
		if derr := fl.DropPending(context.WithoutCancel(ctx), l); derr != nil {
			log.Warn("switchover: its pending record stays in etcd", zap.Error(derr))
		}
	}
	if err != nil {
		if fl != nil && lctx.Err() != nil && ctx.Err() == nil && !errors.Is(err, health.ErrNotLeader) {
			err = fmt.Errorf("%w: the prober leadership of cluster %s was lost: %w", health.ErrNotLeader, cluster, err)
		}
		return srv.switchoverFailed(cluster, target, what, err, hold.held, log)
	}
	return srv.publishSwitchover(cluster, target, what, res, hold.drained, log)
}

// switchoverAllowed checks that target is an up replica of cluster and its master is up,
// and returns the cluster's index and the snapshot it checked, or an ERR saying why not.
func (srv *Server) switchoverAllowed(cluster, target, what string) (int, *health.Snapshot, *protocol.SQLError) {
	idx, serr := srv.clusterIndex(cluster, what)
	if serr != nil {
		return -1, nil, serr
	}
	snap := srv.topo.Current()
	c := snap.Clusters[idx]
	if c.Master.Address == target {
		return -1, nil, protocol.ERWrongArguments.New("sluice: %s: %s is already the master of cluster %s", what, target, cluster)
	}
	i := slices.IndexFunc(c.Replicas, func(b *health.Backend) bool { return b.Address == target })
	if i < 0 {
		addrs := make([]string, len(c.Replicas))
		for j, r := range c.Replicas {
			addrs[j] = r.Address
		}
		return -1, nil, protocol.ERWrongArguments.New("sluice: %s: %s is not a replica of cluster %s (replicas: %s)",
			what, target, cluster, strings.Join(addrs, ", "))
	}
	if st := c.Replicas[i].State(); st != health.StateUp {
		why := ""
		if e := c.Replicas[i].LastError(); e != "" {
			why = " (" + e + ")"
		}
		return -1, nil, protocol.ERUnknownError.New("sluice: %s: replica %s is %s%s; only an up replica can take over", what, target, st, why)
	}
	if st := c.Master.State(); st != health.StateUp {
		return -1, nil, protocol.ERUnknownError.New("sluice: %s: master %s is %s; a switchover needs a live master (use FAILOVER CLUSTER %s)", what, c.Master.Address, st, cluster)
	}
	return idx, snap, nil
}

// switchoverHold is the Hold step of one switchover (health.Switchover step 3). It remembers
// how far it got, for what Switchover does after Run.
type switchoverHold struct {
	s                       *Server
	h                       *conf.Health
	log                     *zap.Logger
	idx                     int
	cluster, master, target string
	// held: the cluster's writes were held, so a switchover that fails must resume them.
	held bool
	// drained counts the sessions still busy on the old master when the drain gave up.
	drained int
}

// hold holds the cluster's writes and drains the old master, cutting off what is still busy
// there after switchover_timeout.
func (sh *switchoverHold) hold(ctx context.Context) error {
	if _, err := sh.s.topo.HoldWrites(sh.cluster, "switchover to "+sh.target); err != nil {
		return err
	}
	sh.held = true
	sh.drained = sh.s.drainMaster(ctx, sh.idx, time.Now().Add(sh.h.SwitchoverTimeout.Duration))
	if ctx.Err() != nil {
		// The switchover ends here (its caller gave up, or a fleet leader lost its
		// leadership): the sessions still busy keep their transactions on the old master.
		return ctx.Err()
	}
	if sh.drained > 0 {
		// read_only does not stop an account with READ ONLY ADMIN or SUPER, which
		// service accounts often have: cut the stragglers off, so that nothing
		// commits on the old master after its final position is read. Their
		// transactions roll back unacknowledged.
		n := 0
		if p := sh.s.pool(sh.master); p != nil {
			n = p.CloseLent()
		}
		sh.log.Warn("switchover: sessions still busy on the old master after switchover_timeout; closed their connections",
			zap.Int("sessions", sh.drained), zap.Int("connections", n))
	}
	return ctx.Err()
}

// switchoverFailed leaves the cluster's writes as safe as err allows (refused when neither
// server may be writable, resumed on the old master when they were held), counts and logs
// the failure, and returns the ERR for the operator.
func (srv *Server) switchoverFailed(cluster, target, what string, err error, held bool, log *zap.Logger) error {
	switch {
	case errors.Is(err, health.ErrSwitchoverIncomplete):
		// Neither server may be writable: refuse rather than guess.
		if _, rerr := srv.topo.RefuseWrites(cluster, err.Error()); rerr != nil {
			log.Error("cannot refuse writes", zap.Error(rerr))
		}
	case held:
		if _, rerr := srv.topo.ReleaseWrites(cluster); rerr != nil {
			log.Error("cannot resume writes", zap.Error(rerr))
		}
	}
	srv.failover.total.WithLabelValues(cluster, "switchover_failed").Inc()
	srv.event("switchover", cluster, target, "failed: "+err.Error())
	log.Error("switchover failed", zap.Error(err))
	return protocol.ERUnknownError.New("sluice: %s failed: %v", what, err)
}

// publishSwitchover sends writes to the new master of a switchover the servers completed,
// records it in the failover state, and counts and logs it with the time of each step.
func (srv *Server) publishSwitchover(cluster, target, what string, res *health.Result, drained int, log *zap.Logger) error {
	next, err := srv.topo.Switch(cluster, target, res)
	if err != nil {
		// The servers switched but sluice cannot follow: refuse writes rather than send them
		// to the read-only old master.
		_, _ = srv.topo.RefuseWrites(cluster, "switchover to "+target+" done on the servers but not published: "+err.Error())
		log.Error("switchover: cannot publish the new master", zap.Error(err))
		return protocol.ERUnknownError.New("sluice: %s: the servers switched but sluice cannot publish it: %v", what, err)
	}
	srv.failover.lock()
	srv.failover.stateOf(cluster).RecordSwitchover(res)
	srv.failover.writeState(cluster)
	srv.failover.unlock()
	srv.failover.total.WithLabelValues(cluster, string(health.OutcomeSwitchover)).Inc()
	detail := fmt.Sprintf("%s -> %s, epoch %d, took %v", res.OldMaster, res.NewMaster, next.Epoch, res.Finished.Sub(res.Started).Round(time.Millisecond))
	if len(res.NotRepointed) > 0 {
		detail += fmt.Sprintf("; not repointed: %v", res.NotRepointed)
	}
	srv.event("switchover", cluster, target, detail)
	fields := []zap.Field{zap.Uint64("epoch", next.Epoch), zap.String("promoted_at", res.PromotedAt),
		zap.Strings("repointed", res.Repointed), zap.Any("not_repointed", res.NotRepointed), zap.Int("busy_after_drain", drained),
		zap.Duration("took", res.Finished.Sub(res.Started))}
	for _, st := range res.Steps {
		fields = append(fields, zap.Duration("step_"+st.Name, st.Took))
	}
	log.Warn("switchover: writes go to the new master", fields...)
	return nil
}

// FailoverCluster is an operator's failover of cluster: the sequence an automatic failover
// runs for a master that is down (health.Failover.Run, published like one), whether
// auto_failover is on or not, and regardless of failover_block (the operator decided). A
// master the probes find up (or lagging, or offline) is refused: a live master is moved with
// Switchover, never failed over blindly; Run refuses too when sluice can still log in to it.
// FailoverCluster may be called from any goroutine; it refuses while another failover or
// switchover of the cluster runs. Errors are *protocol.SQLError naming what failed.
func (srv *Server) FailoverCluster(ctx context.Context, cluster string) error {
	what := "FAILOVER CLUSTER " + cluster
	idx, serr := srv.clusterIndex(cluster, what)
	if serr != nil {
		return serr
	}
	snap := srv.topo.Current()
	c := snap.Clusters[idx]
	if st := c.Master.State(); st != health.StateDown && st != health.StateFenced {
		return protocol.ERUnknownError.New("sluice: %s refused: master %s is %s; a live master is not failed over, use SWITCHOVER CLUSTER %s TO '<replica>'",
			what, c.Master.Address, st, cluster)
	}
	l, fl, leads := srv.failover.lead(cluster)
	if !leads {
		return notLeaderError(what, cluster)
	}
	if serr := srv.failover.claim(cluster, "FAILOVER"); serr != nil {
		return serr
	}
	defer srv.failover.unclaim(cluster)
	fo := srv.failover.newFailover(cluster, c.Master.Address, snap)
	// The operator decided: no failover_block, and no replica needs to confirm the master
	// down (one still receiving from it refuses all the same).
	fo.LastFailover, fo.Block, fo.Resumed = time.Time{}, 0, true
	log := srv.log.With(zap.String("cluster", cluster), zap.String("old_master", c.Master.Address), zap.Bool("manual", true))
	rctx, cancel := context.WithTimeout(ctx, health.DefaultApplyTimeout+10*srv.config().Health.Timeout.Duration)
	defer cancel()
	var pending *health.Result
	if fl != nil {
		pending = srv.failover.pendingFromFleet(fl, cluster)
	} else {
		srv.failover.lock()
		pending = srv.failover.stateOf(cluster).Pending
		srv.failover.unlock()
	}
	srv.failover.continuing(&fo, pending)
	// The operator may promote another replica than the one an earlier attempt pinned (it
	// may be gone for good); one that was made writable is refused by Run's survey.
	fo.Candidate = ""
	rctx, cancelLead := underLead(rctx, &fo, fl, l)
	defer cancelLead()
	res, err := fo.Run(rctx)
	if err == nil {
		// The fleet's record says an operator did it; the local record keeps Run's outcome.
		outcome := res.Outcome
		if outcome == health.OutcomePromoted {
			res.Outcome = "failover"
		}
		err = srv.failover.recordInFleet(rctx, fl, l, res)
		res.Outcome = outcome
	}
	if err != nil && errors.Is(err, health.ErrDivergent) {
		srv.failover.refusedDivergent(cluster, c.Master.Address, err, log)
	}
	if err != nil {
		// Nothing was promoted: a restart must not finish this failover on its own.
		srv.failover.dropPending(cluster, c.Master.Address, false)
		srv.failover.total.WithLabelValues(cluster, "failed").Inc()
		srv.event("failover", cluster, c.Master.Address, "manual failover failed: "+err.Error())
		log.Error("manual failover failed", zap.Error(err))
		hint := ""
		if errors.Is(err, health.ErrMasterReachable) {
			hint = "; a live master is not failed over, use SWITCHOVER"
		}
		return protocol.ERUnknownError.New("sluice: %s failed: %v%s", what, err, hint)
	}
	srv.failover.publish(res, log)
	if cur := srv.topo.Current().Cluster(cluster); cur.Master.Address != res.NewMaster {
		return protocol.ERUnknownError.New("sluice: %s: %s was promoted but sluice cannot switch to it (see the log)", what, res.NewMaster)
	}
	srv.event("failover", cluster, res.NewMaster, fmt.Sprintf("manual: %s -> %s (%s)", res.OldMaster, res.NewMaster, res.Outcome))
	return nil
}

// commitSwitchover records a switchover's new master in etcd (its commit point). A write whose
// outcome is unknown (a timeout, a lost connection: etcd may have taken it) is read back with
// a quorum read, since undoing a switchover etcd recorded would send every instance to a
// target that never takes writes.
func (f *failovers) commitSwitchover(ctx context.Context, fl *fleet.Fleet, l fleet.Lead, r *health.Result) error {
	err := f.recordInFleet(ctx, fl, l, r)
	if err == nil || errors.Is(err, fleet.ErrLostLeadership) || errors.Is(err, fleet.ErrTopologyMoved) {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	rec, ok, rerr := fl.ReadTopology(rctx, r.Cluster)
	if rerr == nil && ok && rec.Master == r.NewMaster && rec.OldMaster == r.OldMaster && rec.By == fl.Self().Instance &&
		rec.Revision > fl.TopologyRevision(r.Cluster) {
		r.Epoch = max(r.Epoch, uint64(rec.Revision))
		return nil
	}
	return err
}
