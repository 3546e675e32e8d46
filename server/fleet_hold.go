package server

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/fleet"
	"github.com/sluice-proxy/sluice/health"
)

// A fleet instance holds a cluster's writes (health.Topology.HoldWrites: statements wait, up
// to the held-write bound, instead of going to the master) on the fleet's account for two
// reasons, each an owner of the hold: holdDown while its master is down and the prober-leader
// fails it over, holdSwitchover while another instance's switchover from its master is
// pending. Writes stay held while any owner does. Only etcd ends a hold: the topology record
// moving the master (Promote and Switch lift every hold; clearFleetHolds forgets the owners),
// or a quorum read saying the master is still the fleet's and nothing is pending from it. An
// instance cut off from etcd therefore never sends writes back to a master the fleet may
// have replaced; its statements fail after the bound instead.
const (
	holdDown       = "down"
	holdSwitchover = "switchover"
)

// holdFleet makes owner hold cluster's writes for reason, publishing the hold when the
// topology has none (a first owner, or a hold something else lifted). It reports whether
// owner is new.
func (srv *Server) holdFleet(cluster, owner, reason string) bool {
	srv.fleet.holdMu.Lock()
	if srv.fleet.holds == nil {
		srv.fleet.holds, srv.fleet.checking = map[string]map[string]string{}, map[string]bool{}
	}
	owners := srv.fleet.holds[cluster]
	if owners == nil {
		owners = map[string]string{}
		srv.fleet.holds[cluster] = owners
	}
	_, had := owners[owner]
	owners[owner] = reason
	srv.fleet.holdMu.Unlock()
	if c := srv.topo.Current().Cluster(cluster); c != nil && c.WritesHeld == "" {
		if _, err := srv.topo.HoldWrites(cluster, reason); err == nil && !had {
			srv.log.Warn("fleet: writes held: "+reason, zap.String("cluster", cluster))
		}
	}
	return !had
}

// holding reports whether owner holds cluster's writes.
func (srv *Server) holding(cluster, owner string) bool {
	srv.fleet.holdMu.Lock()
	defer srv.fleet.holdMu.Unlock()
	_, ok := srv.fleet.holds[cluster][owner]
	return ok
}

// releaseFleet ends owner's hold of cluster; the last owner resumes the writes on the master
// they were held from.
func (srv *Server) releaseFleet(cluster, owner, why string) {
	srv.fleet.holdMu.Lock()
	owners := srv.fleet.holds[cluster]
	_, had := owners[owner]
	delete(owners, owner)
	last := had && len(owners) == 0
	srv.fleet.holdMu.Unlock()
	if !last {
		return
	}
	if c := srv.topo.Current().Cluster(cluster); c != nil && c.WritesHeld != "" {
		_, _ = srv.topo.ReleaseWrites(cluster)
	}
	srv.log.Warn("fleet: held writes resumed: "+why, zap.String("cluster", cluster))
}

// clearFleetHolds forgets every owner of cluster's hold: a record moved the master, which
// lifted the hold.
func (srv *Server) clearFleetHolds(cluster string) {
	srv.fleet.holdMu.Lock()
	delete(srv.fleet.holds, cluster)
	srv.fleet.holdMu.Unlock()
}

// confirmedByFleet asks etcd (a quorum read) whether master is still cluster's master in the
// fleet with no switchover or promotion from it under way; false when etcd does not answer.
func (srv *Server) confirmedByFleet(fl *fleet.Fleet, cluster, master string) (bool, error) {
	if fl == nil {
		return false, fmt.Errorf("fleet: not started yet")
	}
	ctx, cancel := context.WithTimeout(srv.ctx, 2*time.Second)
	defer cancel()
	rec, ok, err := fl.ReadTopology(ctx, cluster)
	if err != nil || (ok && rec.Master != master) {
		return false, err
	}
	value, err := fl.Pending(ctx, cluster)
	if err != nil {
		return false, err
	}
	var p health.Result
	if value != nil && json.Unmarshal(value, &p) == nil && p.OldMaster == master && (p.Outcome == health.OutcomeSwitchover || p.PromotionStarted()) {
		return false, nil
	}
	return true, nil
}

// observe is one round of a fleet instance that does not lead cluster while its master is
// down: the leader fails it over and this instance follows its record in etcd. Meanwhile the
// cluster's writes are held here (holdDown, published again should something have lifted it);
// masterBack ends the hold for a master that answers again. It reports false when the Server
// closes.
func (f *failovers) observe(cluster string, master *health.Backend) bool {
	reason := fmt.Sprintf("master %s is down; the fleet's prober-leader fails cluster %s over and this instance follows its record in etcd", master.Address, cluster)
	f.s.holdFleet(cluster, holdDown, reason)
	return f.pause()
}

// masterBack is run's end for a master that answers again: without [fleet], or when this
// instance held nothing for it, it is done; else the hold ends once etcd confirms the master
// (until then it waits a probe interval and reports false). It reports whether run may end.
func (f *failovers) masterBack(cluster string, master *health.Backend, fl *fleet.Fleet, log *zap.Logger) bool {
	if !f.s.cfg.Fleet.Enabled() || !f.s.holding(cluster, holdDown) {
		return true
	}
	ok, err := f.s.confirmedByFleet(fl, cluster, master.Address)
	if !ok {
		log.Warn("the master answers again, but etcd does not confirm it is still the fleet's master; writes stay held", zap.Error(err))
		return !f.pause()
	}
	f.s.releaseFleet(cluster, holdDown, "the master answers again and etcd confirms it is still the fleet's master")
	return true
}

// fleetPending follows another instance's pending record: while the leader's switchover from
// this instance's master is under way (announced, not yet promoted), this instance holds the
// cluster's writes as the leader does (holdSwitchover), so that none reaches the old master
// after its final position is read. The record moving the master lifts the hold; a deleted
// pending record (the switchover undone) releases it; a record older than the switchover's
// bound is stale and ignored. Past the bound the hold is checked against etcd rather than
// released blindly (checkSwitchoverHold).
func (srv *Server) fleetPending(cluster, by string, at time.Time, failover []byte) {
	if failover == nil {
		srv.releaseFleet(cluster, holdSwitchover, "the switchover's pending record is gone")
		return
	}
	var r health.Result
	if json.Unmarshal(failover, &r) != nil || r.Outcome != health.OutcomeSwitchover || r.PromotedAt != "" {
		return
	}
	h := srv.config().Health
	bound := 2*h.SwitchoverTimeout.Duration + 4*h.Timeout.Duration
	c := srv.topo.Current().Cluster(cluster)
	if c == nil || c.Master.Address != r.OldMaster || time.Since(at) > bound {
		return
	}
	reason := fmt.Sprintf("switchover to %s by the fleet's prober-leader %s", r.NewMaster, by)
	if !srv.holdFleet(cluster, holdSwitchover, reason) {
		return
	}
	srv.fleet.holdMu.Lock()
	run := !srv.fleet.checking[cluster]
	srv.fleet.checking[cluster] = true
	srv.fleet.holdMu.Unlock()
	if run {
		srv.wg.Add(1)
		go func() { defer srv.wg.Done(); srv.checkSwitchoverHold(cluster, r.OldMaster, bound) }()
	}
}

// checkSwitchoverHold ends a switchover hold that outlived its bound only when etcd says the
// old master is still the fleet's master with nothing pending (the leader died before it
// demoted it, say); while etcd does not answer, or the switchover is still pending, the writes
// stay held (each statement fails after the bound).
func (srv *Server) checkSwitchoverHold(cluster, oldMaster string, bound time.Duration) {
	defer func() {
		srv.fleet.holdMu.Lock()
		delete(srv.fleet.checking, cluster)
		srv.fleet.holdMu.Unlock()
	}()
	t := time.NewTicker(bound)
	defer t.Stop()
	for srv.holding(cluster, holdSwitchover) {
		select {
		case <-srv.ctx.Done():
			return
		case <-t.C:
		}
		if !srv.holding(cluster, holdSwitchover) {
			return
		}
		ok, err := srv.confirmedByFleet(srv.fleet.fleet(), cluster, oldMaster)
		if ok {
			srv.releaseFleet(cluster, holdSwitchover, "no switchover is pending any more and the master is unchanged in etcd")
			return
		}
		srv.log.Warn("fleet: a switchover still holds the cluster's writes past its bound; etcd does not clear it", zap.String("cluster", cluster), zap.Error(err))
	}
}
