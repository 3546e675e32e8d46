package health

import (
	"errors"
	"fmt"
	"slices"
)

// ErrUnknownBackend: Promote was asked for a server that is not a replica of the cluster.
var ErrUnknownBackend = errors.New("not a replica of the cluster")

// Changed returns a channel that is closed when the next snapshot is published. Take it
// before looking at Current, then wait on it: a publish in between closes it.
func (t *Topology) Changed() <-chan struct{} { return *t.changed.Load() }

// publish stores s as the current snapshot and wakes the waiters. The caller holds t.mu.
func (t *Topology) publish(s *Snapshot) {
	if t.OnPublish != nil {
		t.OnPublish(s)
	}
	t.cur.Store(s)
	ch := make(chan struct{})
	old := t.changed.Swap(&ch)
	close(*old)
}

// withCluster publishes a copy of the current snapshot, one epoch higher, in which the
// named cluster is replaced by what edit returns. edit gets a shallow copy of the cluster
// it may change (never the Backends it points to). The new epoch is at least minEpoch.
func (t *Topology) withCluster(name string, minEpoch uint64, edit func(c *Cluster) error) (*Snapshot, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := t.cur.Load()
	i := slices.IndexFunc(cur.Clusters, func(c *Cluster) bool { return c.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("health: no cluster %q", name)
	}
	c := *cur.Clusters[i]
	if err := edit(&c); err != nil {
		return nil, err
	}
	next := &Snapshot{Epoch: max(cur.Epoch+1, minEpoch), Clusters: slices.Clone(cur.Clusters)}
	next.Clusters[i] = &c
	t.publish(next)
	return next, nil
}

// Promote publishes a snapshot in which replica newMaster is the master of cluster: the
// replica's Backend is replaced by a new master Backend (Role is never changed in place),
// the old master leaves the serving set for the cluster's fenced list, held fenced, where
// the prober still watches it, and the epoch is raised (to res.Epoch when that is higher, so
// sluice instances that follow one failover agree). res may be nil. A newMaster that already
// is the master returns the current snapshot unchanged; one that is neither is
// ErrUnknownBackend. A refusal of writes (RefuseWrites) is lifted.
func (t *Topology) Promote(cluster, newMaster string, res *Result) (*Snapshot, error) {
	if cur := t.Current().Cluster(cluster); cur != nil && cur.Master.Address == newMaster && cur.WritesRefused == "" && cur.WritesHeld == "" {
		return t.Current(), nil
	}
	var minEpoch uint64
	if res != nil {
		minEpoch = res.Epoch
	}
	return t.withCluster(cluster, minEpoch, func(c *Cluster) error {
		if c.Master.Address == newMaster {
			c.WritesRefused, c.WritesHeld = "", ""
			return nil
		}
		i := slices.IndexFunc(c.Replicas, func(b *Backend) bool { return b.Address == newMaster })
		if i < 0 {
			return fmt.Errorf("health: cluster %s: promote %s: %w", cluster, newMaster, ErrUnknownBackend)
		}
		old := c.Replicas[i]
		m := &Backend{Cluster: old.Cluster, Address: old.Address, Role: RoleMaster, Weight: 1}
		if st := old.Status(); st != nil {
			m.status.Store(st)
		}
		c.Master.Hold(StateFenced)
		c.Fenced = append(slices.DeleteFunc(slices.Clone(c.Fenced), func(b *Backend) bool { return b.Address == newMaster }), c.Master)
		c.Master = m
		c.Replicas = slices.Delete(slices.Clone(c.Replicas), i, i+1)
		c.WritesRefused, c.WritesHeld = "", ""
		c.balancer, _ = NewBalancer(c.Balance, c.Replicas)
		c.aside, _ = NewBalancer(c.Balance, c.Replicas)
		return nil
	})
}

// RefuseWrites publishes a snapshot in which cluster's statements for the master fail
// with reason (sluice cannot tell which server is the master); Promote lifts it.
func (t *Topology) RefuseWrites(cluster, reason string) (*Snapshot, error) {
	return t.withCluster(cluster, 0, func(c *Cluster) error {
		c.WritesRefused = reason
		return nil
	})
}
