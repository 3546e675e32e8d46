package health

import (
	"fmt"
	"slices"

	"github.com/sluice-proxy/sluice/conf"
)

// addedReason is the LastError of a replica a reload added until its first
// probe.
const addedReason = "added by a configuration reload; waiting for its first probe"

// Reconfigure publishes a snapshot, one epoch higher, that applies to the
// current one what changed in each cluster's live settings from old to
// next (both validated, next as conf.Live builds it): balance,
// max_replication_lag, reads_fall_back_to_master, and the replicas added,
// removed or re-weighted in the file. The changes are applied to the
// current snapshot rather than rebuilt from next, so what failovers did
// (a promoted master, fenced old masters) is kept.
//
// A replica that stays keeps its Backend (state, status, in-use count)
// unless its weight or agent changed; then a new Backend carries its state
// over. A replica that is added starts down until its first probe (the
// Prober starts watching it at its next interval), so it takes no reads
// before sluice has seen it answer and replicate. A replica that is removed
// is held offline, so a session that still reads an older snapshot does not
// pick it. A change that cannot be applied (the replica is the master since
// a failover, or an address is already in the cluster) is skipped and
// described in notes. Clusters only one of old and next has are left alone.
func (t *Topology) Reconfigure(old, next *conf.Config) (snap *Snapshot, notes []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.cur.Load()
	s := &Snapshot{Epoch: cur.Epoch + 1, Clusters: slices.Clone(cur.Clusters)}
	for i, c := range cur.Clusters {
		oc, nc := old.Cluster(c.Name), next.Cluster(c.Name)
		if oc == nil || nc == nil {
			continue
		}
		cc, n := reconfigureCluster(c, oc, nc)
		notes = append(notes, n...)
		s.Clusters[i] = cc
	}
	t.publish(s)
	return s, notes
}

// reconfigureCluster returns a copy of c with nc's live settings and the
// replica changes from oc to nc.
func reconfigureCluster(c *Cluster, oc, nc *conf.Cluster) (*Cluster, []string) {
	var notes []string
	cc := *c
	cc.Balance = nc.Balance
	cc.MaxReplicationLag = nc.MaxReplicationLag.Duration
	if cc.MaxReplicationLag <= 0 {
		cc.MaxReplicationLag = conf.DefaultMaxReplicationLag
	}
	cc.ReadsFallBackToMaster = nc.ReadsFallBackToMaster
	replicas := slices.Clone(c.Replicas)
	index := func(addr string) int {
		return slices.IndexFunc(replicas, func(b *Backend) bool { return b.Address == addr })
	}
	for _, or := range oc.Replicas {
		nr := nc.Replica(or.Address)
		i := index(or.Address)
		switch {
		case i < 0 && nr == nil:
			notes = append(notes, fmt.Sprintf("cluster %s: replica %s is not a replica now (%s); not removed",
				c.Name, or.Address, roleNow(c, or.Address)))
		case i < 0:
			if or.Weight != nr.Weight || or.Agent != nr.Agent {
				notes = append(notes, fmt.Sprintf("cluster %s: replica %s is not a replica now (%s); its new weight or agent applies if it becomes one after a restart",
					c.Name, or.Address, roleNow(c, or.Address)))
			}
		case nr == nil:
			// Sessions drop it at their next statement (they
			// compare Backends); offline keeps the balancers of a
			// snapshot they still hold from picking it meanwhile.
			replicas[i].Hold(StateOffline)
			replicas = slices.Delete(replicas, i, i+1)
		case or.Weight != nr.Weight || or.Agent != nr.Agent:
			replicas[i] = replicas[i].reweighted(max(nr.Weight, 1), nr.Agent)
		}
	}
	for _, nr := range nc.Replicas {
		if oc.Replica(nr.Address) != nil {
			continue
		}
		if index(nr.Address) >= 0 || c.Master.Address == nr.Address || slices.ContainsFunc(c.Fenced, func(b *Backend) bool { return b.Address == nr.Address }) {
			notes = append(notes, fmt.Sprintf("cluster %s: replica %s is already in the cluster (%s); not added",
				c.Name, nr.Address, roleNow(c, nr.Address)))
			continue
		}
		b := &Backend{Cluster: c.Name, Address: nr.Address, Role: RoleReplica, Weight: max(nr.Weight, 1), Agent: nr.Agent}
		msg := addedReason
		b.lastErr.Store(&msg)
		b.probed.Store(uint32(StateDown))
		b.state.Store(uint32(StateDown))
		replicas = append(replicas, b)
	}
	cc.Replicas = replicas
	// conf validated the name.
	cc.balancer, _ = NewBalancer(cc.Balance, cc.Replicas)
	cc.aside, _ = NewBalancer(cc.Balance, cc.Replicas)
	return &cc, notes
}

// roleNow describes what addr is in c: "the master since a failover",
// "fenced", "a replica" or "not in the cluster".
func roleNow(c *Cluster, addr string) string {
	switch {
	case c.Master.Address == addr:
		return "the master since a failover"
	case slices.ContainsFunc(c.Fenced, func(b *Backend) bool { return b.Address == addr }):
		return "an old master fenced by a failover"
	case slices.ContainsFunc(c.Replicas, func(b *Backend) bool { return b.Address == addr }):
		return "a replica"
	}
	return "not in the cluster"
}

// reweighted returns a new Backend for b's server with weight and agent,
// carrying over b's state, failures, last error and status (not its in-use
// count: connections lent as b are returned to b).
func (b *Backend) reweighted(weight int, agent string) *Backend {
	n := &Backend{Cluster: b.Cluster, Address: b.Address, Role: b.Role, Weight: weight, Agent: agent}
	n.state.Store(b.state.Load())
	n.probed.Store(b.probed.Load())
	n.failures.Store(b.failures.Load())
	n.lastErr.Store(b.lastErr.Load())
	n.status.Store(b.status.Load())
	return n
}
