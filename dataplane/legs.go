package dataplane

import (
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/router"
)

// clusterLeg is what a session holds for one cluster: the cluster as of the
// snapshot of epoch epoch (loaded again per statement, followTopology), its
// place in every snapshot's Clusters, the data connections borrowed from
// the cluster's pools and the replica reads stay with.
type clusterLeg struct {
	cluster    *health.Cluster
	clusterIdx int
	epoch      uint64

	master  *BackendConn
	replica *BackendConn
	// readFrom is the replica the session reads from: it borrows a new
	// connection to it per statement and stays with it while it is up and
	// no probe round ended since readRound, when it was picked.
	readFrom  *health.Backend
	readRound uint64
	// consistency is the cluster's read consistency; lastGTID the GTID of
	// the session's last committed transaction on it (tracked in causal
	// mode).
	consistency consistency
	lastGTID    []byte
	// appliedOn had applied lastGTID as of probe round appliedRound.
	appliedOn    *health.Backend
	appliedRound uint64
	// lostOn is a replica the session's connection to broke during a
	// statement: reads avoid it while it does not answer its probes
	// (health.Backend.Unresponsive), before the probes mark it down.
	lostOn *health.Backend
	// txBegun: the session's open transaction (txBegin) was started on
	// this cluster's master.
	txBegun bool
}

// initLeg points a fresh leg at cluster i of the current snapshot.
func (s *Session) initLeg(l *clusterLeg, i int) {
	snap := s.env.topo.Current()
	l.clusterIdx = i
	l.cluster, l.epoch = snap.Clusters[i], snap.Epoch
	l.consistency = consistencyOf(s.env.config().Cluster(l.cluster.Name).Consistency)
}

// useCluster makes cluster i (its index in the configuration and in every
// snapshot) the one the session's next exchange runs on.
func (s *Session) useCluster(i int) {
	if i == s.clusterIdx && s.cluster != nil {
		return
	}
	s.clusterLeg = &s.legs[i]
	if s.cluster == nil {
		s.initLeg(s.clusterLeg, i)
	}
}

// eachLeg calls f with every leg that has been used, the active one
// included.
func (s *Session) eachLeg(f func(l *clusterLeg)) {
	f(s.clusterLeg)
	for i := range s.legs {
		if i != s.clusterIdx && s.legs[i].cluster != nil {
			f(&s.legs[i])
		}
	}
}

// consistency is what a session's reads may see ([[cluster]] consistency).
type consistency uint8

const (
	// consistencyEventual: any serving replica.
	consistencyEventual consistency = iota
	// consistencyCausal: after a session's write, only replicas that have
	// applied it; the master until one has.
	consistencyCausal
	// consistencyStrong: the master.
	consistencyStrong
)

func consistencyOf(s string) consistency {
	switch s {
	case "causal":
		return consistencyCausal
	case "strong":
		return consistencyStrong
	}
	return consistencyEventual
}

// legsInTxn lists the clusters whose master connection holds the session's
// transaction, the active one last.
func (s *Session) legsInTxn() []int {
	var out []int
	active := false
	s.eachLeg(func(l *clusterLeg) {
		if l.master == nil || !(l.txBegun || l.master.inTransaction()) {
			return
		}
		if l.clusterIdx == s.clusterIdx {
			active = true
			return
		}
		out = append(out, l.clusterIdx)
	})
	if active {
		out = append(out, s.clusterIdx)
	}
	return out
}

// masterFor makes cluster i active and returns its master connection,
// brought up to date with the session's state.
func (s *Session) masterFor(i int) (*BackendConn, error) {
	s.useCluster(i)
	if err := s.followTopology(); err != nil {
		return nil, err
	}
	bc, err := s.backendFor(router.TargetMaster, nil)
	if err != nil {
		return nil, err
	}
	if err := s.sync(bc); err != nil {
		s.dropIfBroken(bc)
		return nil, err
	}
	return bc, nil
}
