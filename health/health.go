// Package health owns what sluice knows about its backends: their roles and
// states, the balancer that picks a replica for a read, the prober that
// watches every backend, and the immutable topology snapshots the data plane
// reads per statement.
//
// A Snapshot is immutable; a Backend's state is atomic. Topology publishes a
// new Snapshot (with a higher epoch) when the set of backends changes, and
// Backend states change in place. Everything here is safe for concurrent use,
// and nothing here blocks the data plane: the data plane only loads atomics.
package health

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluice-proxy/sluice/conf"
)

// Role is a backend's place in its cluster.
type Role uint8

const (
	RoleMaster Role = iota
	RoleReplica
)

func (r Role) String() string {
	if r == RoleMaster {
		return "master"
	}
	return "replica"
}

// State is a backend's serving state.
type State uint32

const (
	// StateUp: serving.
	StateUp State = iota
	// StateDown: failed its probes or a connection attempt; gets no reads.
	StateDown
)

func (s State) String() string {
	if s == StateUp {
		return "up"
	}
	return "down"
}

// Backend is one MariaDB/MySQL server of a cluster.
type Backend struct {
	Cluster string
	Address string
	Role    Role
	Weight  int

	state    atomic.Uint32
	failures atomic.Int32
	lastErr  atomic.Pointer[string]
}

// State returns the current state.
func (b *Backend) State() State { return State(b.state.Load()) }

// Up reports whether the backend may serve.
func (b *Backend) Up() bool { return b.State() == StateUp }

// LastError returns the most recent failure reason, or "".
func (b *Backend) LastError() string {
	if p := b.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// ReportFailure records a failed connection or probe. The data plane calls
// it when it cannot reach the backend, so a dead replica leaves rotation at
// once instead of after the next probes. It reports whether the backend
// went down with this call.
func (b *Backend) ReportFailure(err error) bool {
	msg := err.Error()
	b.lastErr.Store(&msg)
	b.failures.Add(1)
	return b.state.Swap(uint32(StateDown)) == uint32(StateUp)
}

// ReportSuccess records a successful probe or connection; it reports whether
// the backend came back up with this call.
func (b *Backend) ReportSuccess() bool {
	b.failures.Store(0)
	return b.state.Swap(uint32(StateUp)) != uint32(StateUp)
}

// Cluster is one master with its replicas.
type Cluster struct {
	Name     string
	Master   *Backend
	Replicas []*Backend
	// wheel lists replica indexes, each repeated by its weight, so an
	// atomic counter gives weighted round robin without a lock.
	wheel     []int
	next      atomic.Uint64
	nextAside atomic.Uint64
}

// PickReplica returns the next up replica by weighted round robin, skipping
// skip (a replica that just failed), or nil when no replica can serve.
func (c *Cluster) PickReplica(skip *Backend) *Backend {
	return c.pick(&c.next, skip)
}

// PickReplicaAside is PickReplica on a wheel position of its own, for work
// that is not a client statement (the schema check at login): it must not
// shift the rotation of statements, or sessions that all do the same
// amount of such work end up in step on one replica.
func (c *Cluster) PickReplicaAside(skip *Backend) *Backend {
	return c.pick(&c.nextAside, skip)
}

func (c *Cluster) pick(counter *atomic.Uint64, skip *Backend) *Backend {
	n := len(c.wheel)
	if n == 0 {
		return nil
	}
	start := counter.Add(1)
	for i := range n {
		b := c.Replicas[c.wheel[(start+uint64(i))%uint64(n)]]
		if b != skip && b.Up() {
			return b
		}
	}
	return nil
}

// Backends returns the master and the replicas.
func (c *Cluster) Backends() []*Backend {
	return append([]*Backend{c.Master}, c.Replicas...)
}

// Snapshot is an immutable view of the topology. The data plane loads the
// current one per statement.
type Snapshot struct {
	Epoch    uint64
	Clusters []*Cluster
}

// Cluster returns the named cluster or nil.
func (s *Snapshot) Cluster(name string) *Cluster {
	for _, c := range s.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Topology holds the current Snapshot.
type Topology struct {
	cur atomic.Pointer[Snapshot]
}

// NewTopology builds the first snapshot (epoch 1) from the configuration;
// every backend starts up.
func NewTopology(cfg *conf.Config) *Topology {
	s := &Snapshot{Epoch: 1}
	for _, cc := range cfg.Clusters {
		c := &Cluster{Name: cc.Name, Master: &Backend{Cluster: cc.Name, Address: cc.Master, Role: RoleMaster, Weight: 1}}
		for _, r := range cc.Replicas {
			w := max(r.Weight, 1)
			c.Replicas = append(c.Replicas, &Backend{Cluster: cc.Name, Address: r.Address, Role: RoleReplica, Weight: w})
			for range w {
				c.wheel = append(c.wheel, len(c.Replicas)-1)
			}
		}
		s.Clusters = append(s.Clusters, c)
	}
	t := &Topology{}
	t.cur.Store(s)
	return t
}

// Current returns the current snapshot.
func (t *Topology) Current() *Snapshot { return t.cur.Load() }

// Prober checks every backend of the current snapshot each Interval with
// Check. A backend goes down after FailuresBeforeDown failed checks in a row
// and up after one good one. It only writes Backend states.
type Prober struct {
	Topology           *Topology
	Interval           time.Duration
	FailuresBeforeDown int
	// Check probes one backend; it must give up by itself (a timeout).
	// The proxy supplies it: a login with the cluster's service account
	// and a COM_PING, so the servers never see half-open handshakes.
	Check func(ctx context.Context, b *Backend) error
	// OnChange, when set, is called after a backend changes state.
	OnChange func(b *Backend, up bool, reason string)
}

// Run probes until ctx is done.
func (p *Prober) Run(ctx context.Context) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		snap := p.Topology.Current()
		for _, c := range snap.Clusters {
			for _, b := range c.Backends() {
				if ctx.Err() != nil {
					return
				}
				p.probe(ctx, b)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Prober) probe(ctx context.Context, b *Backend) {
	err := p.Check(ctx, b)
	if err == nil {
		if b.ReportSuccess() && p.OnChange != nil {
			p.OnChange(b, true, "probe succeeded")
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	if int(b.failures.Add(1)) >= p.FailuresBeforeDown || !b.Up() {
		b.failures.Add(-1) // ReportFailure counts it again
		if b.ReportFailure(err) && p.OnChange != nil {
			p.OnChange(b, false, err.Error())
		}
	}
}
