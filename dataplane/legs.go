package dataplane

import (
	"fmt"
	"time"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
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
	// mode). txBegun: the session's open transaction (txBegin) was started
	// on this cluster's master. (The two small fields sit together: a leg
	// per cluster is part of every idle session's memory.)
	consistency consistency
	txBegun     bool
	lastGTID    []byte
	// appliedOn had applied lastGTID as of probe round appliedRound.
	appliedOn    *health.Backend
	appliedRound uint64
	// lostOn is a replica the session's connection to broke during a
	// statement: reads avoid it while it does not answer its probes
	// (health.Backend.Unresponsive), before the probes mark it down.
	lostOn *health.Backend
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

// awaitMaster waits, when the cluster's master cannot take a statement (down,
// fenced, or writes refused) or failed is the master it could not connect to,
// for a snapshot whose master can, up to failover_write_wait, so writes
// pause through an automatic failover instead of failing. Without
// auto_failover it does not wait. It returns nil once the session's cluster
// (reloaded) has a master to try, else the ERR for the client.
func (s *Session) awaitMaster(failed *health.Backend, cause error) error {
	ready := func() bool {
		c := s.cluster
		if c.WritesRefused != "" || c.WritesHeld != "" {
			return false
		}
		if failed != nil && c.Master == failed {
			return false
		}
		return c.Master.Up()
	}
	s.cluster = s.env.topo.Current().Clusters[s.clusterIdx]
	if failed == nil && ready() {
		return nil
	}
	// The wait is for timers and the topology, not sockets: off the loop.
	if s.task.Detach() {
		defer s.task.Attach()
	}
	h := &s.env.config().Health
	wait := h.FailoverWriteWait.Duration
	if !h.AutoFailover || s.cluster.WritesRefused != "" {
		// Refused writes wait for nothing: no failover settles them.
		wait = 0
	}
	if s.cluster.WritesHeld != "" {
		wait = max(wait, HeldWriteWait(h))
	}
	var timer *time.Timer
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	// A master sluice could not connect to that a probe finds alive after
	// the failure was a blip: try it again.
	failedAt := time.Now()
	alive := func() bool {
		if failed == nil || s.cluster.Master != failed || !failed.Up() || s.cluster.WritesRefused != "" {
			return false
		}
		st := failed.Status()
		return st != nil && st.Time.After(failedAt)
	}
	for {
		changed := s.env.topo.Changed()
		s.markMasterBusy() // before the load: a switchover that misses it published first
		snap := s.env.topo.Current()
		s.cluster = snap.Clusters[s.clusterIdx]
		if ready() || alive() {
			return nil
		}
		s.unmarkMasterBusy()
		if timer == nil {
			if wait <= 0 {
				break
			}
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-changed:
			continue
		case <-tick.C:
			continue
		case <-s.cmd.Done():
		case <-timer.C:
		}
		break
	}
	if e := s.stopped(); e != nil {
		return e
	}
	c := s.cluster
	why := ""
	switch {
	case c.WritesRefused != "":
		why = c.WritesRefused
	case c.WritesHeld != "":
		why = fmt.Sprintf("writes held (%s) for longer than %v", c.WritesHeld, wait)
	case cause != nil:
		why = fmt.Sprintf("cannot connect to master %s: %v", c.Master.Address, cause)
	default:
		why = fmt.Sprintf("master %s is %s", c.Master.Address, c.Master.State())
		if e := c.Master.LastError(); e != "" {
			why += " (" + e + ")"
		}
	}
	if wait > 0 && c.WritesRefused == "" && c.WritesHeld == "" {
		why += fmt.Sprintf("; no failover gave it a master within failover_write_wait %v", wait)
	}
	return protocol.CRCouldNotConnect.New("sluice: cluster %s has no master to take the statement: %s", c.Name, why)
}
