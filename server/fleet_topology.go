package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/fleet"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
)

// The fleet's share of failover (issue 27). With [fleet], each cluster has one prober-leader
// (an etcd election): it alone changes the cluster's servers (failover, switchover, repairs)
// and records every change of master in etcd before it switches to it; every instance,
// the leader's included, follows the record with the highest etcd revision. Without [fleet]
// each instance fails over on its own, as before.

// fleetHooks are the topology hooks the Server gives its Fleet.
func (srv *Server) fleetHooks() fleet.Hooks {
	names := make([]string, len(srv.cfg.Clusters))
	for i, c := range srv.cfg.Clusters {
		names[i] = c.Name
	}
	return fleet.Hooks{Clusters: names, Apply: srv.applyFleetTopology, Elected: srv.fleetElected, Pending: srv.fleetPending}
}

// lead is this instance's leadership of cluster. Without a fleet it is the zero Lead and ok:
// a lone sluice may always change its servers.
func (f *failovers) lead(cluster string) (fleet.Lead, *fleet.Fleet, bool) {
	fl := f.s.fleet.fleet()
	if fl == nil {
		// With [fleet] but before the fleet started (start-up), nobody here leads yet.
		return fleet.Lead{}, nil, !f.s.cfg.Fleet.Enabled()
	}
	l, ok := fl.Leader(cluster)
	return l, fl, ok
}

// mayChange reports whether this instance may change cluster's servers now.
func (f *failovers) mayChange(cluster string) bool {
	_, _, ok := f.lead(cluster)
	return ok
}

// guard is a failover's Guard under l: before each change, the failover so far is stored in
// etcd as the cluster's pending failover, in a transaction that holds only while l leads.
func guard(fl *fleet.Fleet, l fleet.Lead) func(context.Context, *health.Result) error {
	return func(ctx context.Context, r *health.Result) error {
		value, err := json.Marshal(r)
		if err != nil {
			return err
		}
		return fl.WritePending(ctx, l, value)
	}
}

// underLead prepares fo to run as l's failover: guarded, and with a context that ends with
// the leadership. Without a fleet it returns ctx unchanged.
func underLead(ctx context.Context, fo *health.Failover, fl *fleet.Fleet, l fleet.Lead) (context.Context, context.CancelFunc) {
	if fl == nil {
		return context.WithCancel(ctx)
	}
	fo.Guard = guard(fl, l)
	return l.Context(ctx)
}

// recordInFleet writes res's new master to etcd as the cluster's topology under l, before
// this instance switches to it, and raises res's epoch to the record's revision. Without a
// fleet it does nothing.
func (f *failovers) recordInFleet(ctx context.Context, fl *fleet.Fleet, l fleet.Lead, res *health.Result) error {
	if fl == nil {
		return nil
	}
	rec := fleet.TopologyRecord{Master: res.NewMaster, OldMaster: res.OldMaster, Outcome: string(res.Outcome)}
	if c := f.s.topo.Current().Cluster(res.Cluster); c != nil {
		for _, b := range c.Fenced {
			rec.Fenced = append(rec.Fenced, b.Address)
		}
	}
	if res.Outcome != health.OutcomeSwitchover && res.OldMaster != "" && !slices.Contains(rec.Fenced, res.OldMaster) {
		rec.Fenced = append(rec.Fenced, res.OldMaster)
	}
	rec.Fenced = slices.DeleteFunc(rec.Fenced, func(a string) bool { return a == res.NewMaster })
	rev, err := fl.WriteTopology(ctx, l, rec)
	if err != nil {
		return err
	}
	res.Epoch = max(res.Epoch, uint64(rev))
	return nil
}

// pendingFromFleet is the failover another leader left pending in etcd, nil when none (or
// etcd did not answer: the new attempt starts from what the servers say).
func (f *failovers) pendingFromFleet(fl *fleet.Fleet, cluster string) *health.Result {
	if fl == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(f.s.ctx, 2*time.Second)
	defer cancel()
	value, err := fl.Pending(ctx, cluster)
	if err != nil || value == nil {
		return nil
	}
	var p health.Result
	if err := json.Unmarshal(value, &p); err != nil {
		f.s.log.Warn("fleet: the pending failover in etcd cannot be read; ignored", zap.String("cluster", cluster), zap.Error(err))
		return nil
	}
	return &p
}

// fleetElected runs when this instance becomes cluster's prober-leader: with no topology
// recorded yet it records the master it uses (the initial record); a master that is down
// gets its failover started, since the instance that led before may have died with it.
func (srv *Server) fleetElected(l fleet.Lead) {
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		c := srv.topo.Current().Cluster(l.Cluster)
		fl := srv.fleet.fleet()
		if c == nil || fl == nil {
			return
		}
		if fl.TopologyRevision(l.Cluster) == 0 && c.WritesRefused == "" && srv.failover.confirmMaster(c) {
			_, err := fl.WriteTopology(srv.ctx, l, fleet.TopologyRecord{Master: c.Master.Address, Outcome: fleet.OutcomeInitial})
			if err != nil && !errors.Is(err, fleet.ErrTopologyMoved) {
				srv.log.Warn("fleet: cannot record the cluster's initial topology", zap.String("cluster", l.Cluster), zap.Error(err))
			}
		}
		srv.failover.finishSwitchover(fl, l, c)
		srv.failover.dropStaleSwitchover(fl, l, c)
		if c.Master.State() == health.StateDown {
			srv.failover.masterDown(c.Master)
		}
	}()
}

// finishSwitchover settles, for a newly elected leader, a switchover its predecessor left
// half done on c's master: recorded in etcd but the target never promoted (still read-only and
// replicating: it is promoted now), or announced and the old master demoted but never recorded
// (read-only and replicating from no one: it takes writes again). Each change is announced
// under the leadership first.
func (f *failovers) finishSwitchover(fl *fleet.Fleet, l fleet.Lead, c *health.Cluster) {
	ctx, cancel := context.WithTimeout(f.s.ctx, 4*f.s.config().Health.Timeout.Duration)
	defer cancel()
	rec, recorded, err := fl.ReadTopology(ctx, c.Name)
	if err != nil || !recorded || rec.Master != c.Master.Address {
		return
	}
	cc, err := health.Dial(ctx, c.Master.Address, f.credentials(c.Name, c.Master.Address))
	if err != nil {
		return
	}
	defer cc.Close()
	st, err := cc.State(ctx)
	if err != nil || !st.ReadOnly {
		return
	}
	p := f.pendingFromFleet(fl, c.Name)
	log := f.s.log.With(zap.String("cluster", c.Name), zap.String("master", c.Master.Address))
	announce := &health.Result{Cluster: c.Name, Outcome: health.OutcomeSwitchover, OldMaster: rec.OldMaster, NewMaster: rec.Master, PromotedAt: "finishing"}
	switch {
	case rec.Outcome == fleet.OutcomeSwitchover && st.Replica.Configured && p == nil:
		if guard(fl, l)(ctx, announce) != nil {
			return
		}
		err = cc.Promote(ctx)
		log.Warn("fleet: finished a switchover the previous prober-leader recorded but did not promote", zap.Error(err))
	case !st.Replica.Configured && p != nil && p.Outcome == health.OutcomeSwitchover && p.PromotedAt == "" && p.OldMaster == c.Master.Address:
		announce.OldMaster, announce.NewMaster = p.NewMaster, c.Master.Address
		if guard(fl, l)(ctx, announce) != nil {
			return
		}
		err = cc.Unfence(ctx)
		log.Warn("fleet: undid a switchover the previous prober-leader demoted the master for but never recorded", zap.Error(err))
	default:
		return
	}
	if err == nil {
		_ = fl.DropPending(ctx, l)
	}
}

// dropStaleSwitchover drops a switchover that a leader before this one announced and did not
// finish (it lost its leadership and undid it, or died before demoting the master), once the
// servers confirm c's master is still the one writable server: the other instances hold
// their writes while it is pending.
func (f *failovers) dropStaleSwitchover(fl *fleet.Fleet, l fleet.Lead, c *health.Cluster) {
	p := f.pendingFromFleet(fl, c.Name)
	if p == nil || p.Outcome != health.OutcomeSwitchover || p.PromotedAt != "" || !f.confirmMaster(c) {
		return
	}
	ctx, cancel := context.WithTimeout(f.s.ctx, 2*time.Second)
	defer cancel()
	if err := fl.DropPending(ctx, l); err == nil {
		f.s.log.Warn("fleet: dropped a switchover the previous prober-leader left unfinished; the master is unchanged",
			zap.String("cluster", c.Name), zap.String("target", p.NewMaster))
	}
}

// confirmMaster asks the servers (health.Discover) whether c's master is the one writable
// server that replicates from no one; the first leader records the initial topology only then.
func (f *failovers) confirmMaster(c *health.Cluster) bool {
	addrs := []string{c.Master.Address}
	for _, r := range c.Replicas {
		addrs = append(addrs, r.Address)
	}
	ctx, cancel := context.WithTimeout(f.s.ctx, 2*f.s.config().Health.Timeout.Duration)
	defer cancel()
	d, err := health.Discover(ctx, c.Name, addrs, c.Master.Address, f.credentials(c.Name, c.Master.Address))
	if err != nil || d.Master != c.Master.Address {
		f.s.log.Warn("fleet: the servers do not confirm the master; no initial topology recorded", zap.String("cluster", c.Name),
			zap.String("master", c.Master.Address), zap.String("discovered", d.Master), zap.Error(err))
		return false
	}
	return true
}

// applyFleetTopology follows a topology record from etcd: a master other than this
// instance's becomes its master (kept as a replica's switch for a switchover), counted as
// "followed". A master this instance cannot use (not in its configuration) refuses the
// cluster's writes rather than send them to the master the fleet replaced.
func (srv *Server) applyFleetTopology(rec fleet.TopologyRecord) {
	log := srv.log.With(zap.String("cluster", rec.Cluster), zap.String("master", rec.Master), zap.String("by", rec.By),
		zap.Int64("revision", rec.Revision), zap.String("outcome", rec.Outcome))
	c := srv.topo.Current().Cluster(rec.Cluster)
	if c == nil {
		log.Warn("fleet: a topology record for a cluster this instance does not have; ignored")
		return
	}
	if c.Master.Address == rec.Master {
		if c.WritesRefused != "" {
			_, _ = srv.topo.Promote(rec.Cluster, rec.Master, nil)
		}
		return
	}
	res := &health.Result{Cluster: rec.Cluster, Outcome: health.OutcomeFollowed, Epoch: uint64(rec.Revision),
		OldMaster: c.Master.Address, NewMaster: rec.Master, Started: rec.At, Finished: time.Now(),
		Warnings: []string{fmt.Sprintf("from the fleet's topology in etcd (revision %d, %s by %s)", rec.Revision, rec.Outcome, rec.By)}}
	if rec.Outcome == fleet.OutcomeSwitchover && rec.OldMaster == c.Master.Address {
		// A switchover from the master this instance has: the old master stays a replica.
		// From another (records were missed), this instance's master is fenced instead.
		if _, err := srv.topo.Switch(rec.Cluster, rec.Master, res); err == nil {
			srv.failover.lock()
			srv.failover.stateOf(rec.Cluster).RecordSwitchover(res)
			srv.failover.writeState(rec.Cluster)
			srv.failover.unlock()
			srv.clearFleetHolds(rec.Cluster)
			srv.failover.total.WithLabelValues(rec.Cluster, string(health.OutcomeFollowed)).Inc()
			srv.event("switchover", rec.Cluster, rec.Master, "followed the fleet: "+res.Warnings[0])
			log.Warn("fleet: switchover followed: writes go to the new master")
			return
		}
	}
	srv.failover.publish(res, log)
	srv.clearFleetHolds(rec.Cluster)
	if now := srv.topo.Current().Cluster(rec.Cluster); now.Master.Address != rec.Master {
		reason := fmt.Sprintf("the fleet's topology (etcd revision %d) names master %s, which this instance cannot use; writes refused rather than sent to %s",
			rec.Revision, rec.Master, now.Master.Address)
		_, _ = srv.topo.RefuseWrites(rec.Cluster, reason)
		log.Error("fleet: " + reason)
	}
}

// notLeaderError is the ERR of an operator's FAILOVER or SWITCHOVER on an instance that
// cannot run it: another instance leads the cluster (the admin port forwards there), or
// none does.
func notLeaderError(what, cluster string) error {
	return protocol.ERUnknownError.New("sluice: %s: this instance is not the prober-leader of cluster %s ; with [fleet] only the leader changes the servers, and the admin port forwards the command to it", what, cluster)
}

// dropFleetPending is dropPending with [fleet]: this instance's own record is forgotten (the
// fleet's pending failover in etcd is the one that counts), and only the prober-leader drops
// the fleet's and puts back the replicas it changed.
func (f *failovers) dropFleetPending(cluster, oldMaster string, masterBack bool) {
	f.lock()
	if st := f.stateOf(cluster); st.Pending != nil && st.Pending.OldMaster == oldMaster && !st.Pending.PromotionStarted() {
		st.Pending = nil
		f.writeState(cluster)
	}
	f.unlock()
	l, fl, leads := f.lead(cluster)
	if !leads || fl == nil {
		return
	}
	p := f.pendingFromFleet(fl, cluster)
	if p == nil || p.OldMaster != oldMaster || p.PromotionStarted() || (!masterBack && len(p.Undo) > 0) {
		return
	}
	ctx, cancel := context.WithTimeout(f.s.ctx, 2*time.Second)
	err := fl.DropPending(ctx, l)
	cancel()
	if err != nil {
		f.s.log.Warn("fleet: cannot drop the given-up failover from etcd", zap.String("cluster", cluster), zap.Error(err))
		return
	}
	if masterBack {
		f.abandon(cluster, p)
	}
}
