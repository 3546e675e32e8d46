package server

import (
	"context"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/admin"
	"github.com/sluice-proxy/sluice/fleet"
	"github.com/sluice-proxy/sluice/protocol"
)

// FleetPeers names this instance and the other members of its view, for
// SHOW SESSIONS FLEET and KILL '<instance>:<id>'.
func (c control) FleetPeers() (string, []admin.FleetPeer, error) {
	f := c.s.fleet.fleet()
	if f == nil {
		return "", nil, protocol.EROptionPreventsStmt.New("sluice admin: this sluice runs without a fleet ([fleet] names no etcd endpoints); SHOW SESSIONS and KILL <id> act on this instance")
	}
	self := f.Self().Instance
	var peers []admin.FleetPeer
	for _, m := range f.Members() {
		if m.Instance != self {
			peers = append(peers, admin.FleetPeer{Instance: m.Instance, AdminAddress: m.AdminAddress})
		}
	}
	return self, peers, nil
}

// SetBackendFleet writes a SET BACKEND to etcd; the fleet applies it here
// (through applyFleetBackend) once etcd took it.
func (c control) SetBackendFleet(ctx context.Context, ch admin.BackendChange) (bool, error) {
	f := c.s.fleet.fleet()
	if f == nil {
		return false, nil
	}
	s := fleet.BackendSetting{Address: ch.Addr}
	switch ch.Op {
	case admin.OpOffline:
		s.State = fleet.BackendOffline
	case admin.OpOnline:
		s.State = fleet.BackendOnline
	default:
		s.Weight = ch.Weight
	}
	rev, err := f.SetBackend(ctx, s)
	if err != nil {
		c.s.log.Warn("admin: SET BACKEND refused: etcd did not take it", zap.String("backend", ch.Addr), zap.Error(err))
		return true, protocol.ERUnknownError.New("sluice admin: SET BACKEND '%s' not applied: etcd did not take it (%v); with [fleet] admin states go through etcd so that every instance applies them, so this instance changed nothing (should etcd still commit the write, every instance applies it then: check SHOW BACKENDS)", ch.Addr, err)
	}
	c.s.log.Info("admin: SET BACKEND stored for the fleet", zap.String("backend", ch.Addr), zap.String("op", ch.Op), zap.Int64("revision", rev))
	return true, nil
}

// applyFleetBackend applies a backend setting the fleet shares (written by
// any member, or stored before this instance started) to this instance's
// topology. A backend this instance does not know, or its master, is
// logged and left alone.
func (srv *Server) applyFleetBackend(s fleet.BackendSetting) {
	ch := admin.BackendChange{Addr: s.Address, Op: admin.OpWeight, Weight: s.Weight}
	switch s.State {
	case fleet.BackendOffline:
		ch.Op = admin.OpOffline
	case fleet.BackendOnline:
		ch.Op = admin.OpOnline
	}
	log := srv.log.With(zap.String("backend", s.Address), zap.String("op", ch.Op), zap.String("by", s.By), zap.Int64("revision", s.Revision))
	if _, err := admin.ApplyBackendChange(control{srv}, srv.log, ch); err != nil {
		log.Warn("fleet: a backend setting from etcd does not apply to this instance", zap.Error(err))
		return
	}
	log.Info("fleet: backend setting applied")
}

// ClusterLeader names the prober-leader of cluster: this instance without [fleet] or when it
// leads, else the instance etcd names.
func (c control) ClusterLeader(ctx context.Context, cluster string) (string, bool, error) {
	f := c.s.fleet.fleet()
	if f == nil {
		return "", true, nil
	}
	if _, ok := f.Leader(cluster); ok {
		return f.Self().Instance, true, nil
	}
	leader, err := f.LeaderOf(ctx, cluster)
	switch {
	case err != nil:
		return "", false, protocol.ERUnknownError.New("sluice admin: cannot tell which instance leads cluster %s: %v; with [fleet] only the prober-leader changes the servers", cluster, err)
	case leader == "":
		return "", false, protocol.ERUnknownError.New("sluice admin: no instance leads cluster %s yet (etcd holds no election key); try again in a moment", cluster)
	case leader == f.Self().Instance:
		// Elected a moment ago; the leadership is not in memory yet.
		return "", false, protocol.ERUnknownError.New("sluice admin: this instance is being elected prober-leader of cluster %s; try again in a moment", cluster)
	}
	return leader, false, nil
}
