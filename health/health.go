// Package health owns what sluice knows about its backends: their roles and
// states, what the last probe read from each (replication state, load), the
// balancers that pick a replica for a read, the prober that watches every
// backend, and the immutable topology snapshots the data plane reads.
//
// A Snapshot is immutable; a Backend's state, its last Status and its
// in-use counter are atomics. Topology publishes a new Snapshot (with a
// higher epoch) when the set of backends changes, and counts finished probe
// rounds. Everything here is safe for concurrent use, and nothing here
// blocks the data plane: the data plane only loads atomics.
package health

import (
	"strings"
	"sync"
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

// State is a backend's serving state. Only an up replica gets reads.
type State uint32

const (
	// StateUp: serving.
	StateUp State = iota
	// StateDown: failed failures_before_down probes in a row, or the data
	// plane could not connect to it; gets no reads.
	StateDown
	// StateLagging: answers probes but replicates too far behind
	// (max_replication_lag), or not at all; gets no reads.
	StateLagging
	// StateFenced: cut off by failover (an old master that must take no
	// traffic). Set with Hold; probes do not lift it.
	StateFenced
	// StateOffline: taken out by an administrator. Set with Hold; probes do
	// not lift it.
	StateOffline
)

var stateNames = [...]string{"up", "down", "lagging", "fenced", "offline"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "unknown"
}

// held reports whether s is set by Hold and kept until Release.
func (s State) held() bool { return s == StateFenced || s == StateOffline }

// Backend is one MariaDB/MySQL server of a cluster. Its identity fields are
// fixed; its state, failures, last Status and in-use count are atomics
// written by the prober, the data plane (ReportFailure, the pools' in-use
// count) and Hold/Release, and read by anyone.
type Backend struct {
	Cluster string
	Address string
	Role    Role
	Weight  int
	// Agent is the URL of the sluice-agent on the backend's host, or "".
	Agent string

	state atomic.Uint32
	// probed is the state the probes and the data plane decide (up,
	// lagging or down), whatever Hold says; Release returns to it.
	probed   atomic.Uint32
	failures atomic.Int32
	lastErr  atomic.Pointer[string]
	status   atomic.Pointer[Status]
	inUse    atomic.Int64
	// adminWeight replaces Weight once an administrator set it (SET
	// BACKEND ... WEIGHT); 0 until then.
	adminWeight atomic.Int64
	// probeSince is when the probe in progress started (UnixNano), 0
	// while none runs; the prober's worker writes it.
	probeSince atomic.Int64
}

// Unresponsive reports whether the backend fails to answer its probes: the
// latest probe (or data-plane connect, ReportFailure) failed, or the probe
// in progress has been running for timeout or longer. A backend that
// answers its probes is never unresponsive, however long a statement runs
// on it. Safe for concurrent use; it only loads atomics.
func (b *Backend) Unresponsive(timeout time.Duration, now time.Time) bool {
	if b.failures.Load() > 0 {
		return true
	}
	since := b.probeSince.Load()
	return since != 0 && now.UnixNano()-since >= int64(timeout)
}

// CurrentWeight is the weight balancers use: the one an administrator set
// at run time, else the configured Weight. Safe for concurrent use.
func (b *Backend) CurrentWeight() int {
	if w := b.adminWeight.Load(); w > 0 {
		return int(w)
	}
	return b.Weight
}

// SetWeight changes the backend's balancer weight at run time (n >= 1;
// smaller values are taken as 1). The balancers read it on their next pick.
func (b *Backend) SetWeight(n int) { b.adminWeight.Store(int64(max(n, 1))) }

// State returns the current state.
func (b *Backend) State() State { return State(b.state.Load()) }

// Up reports whether the backend may serve reads: its state is up (not
// lagging, down, fenced or offline).
func (b *Backend) Up() bool { return b.State() == StateUp }

// LastError returns the most recent failure reason, or "".
func (b *Backend) LastError() string {
	if p := b.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// Status returns what the last successful probe read, or nil before the
// first one. The Status is immutable.
func (b *Backend) Status() *Status { return b.status.Load() }

// SetStatus publishes st as the backend's last probe result without moving
// its state, as a probe of another kind would (a test's stand-in for the
// Prober). st must not be modified afterwards.
func (b *Backend) SetStatus(st *Status) { b.status.Store(st) }

// InUse returns how many data connections to the backend are lent to
// sessions right now.
func (b *Backend) InUse() int64 { return b.inUse.Load() }

// ConnLent counts a data connection lent to a session; the proxy's pool
// calls it, and ConnReturned when the connection comes back or closes.
func (b *Backend) ConnLent() { b.inUse.Add(1) }

// ConnReturned undoes one ConnLent.
func (b *Backend) ConnReturned() { b.inUse.Add(-1) }

// ReportFailure records a failed connection. The data plane calls it when
// it cannot reach the backend, so a dead replica leaves rotation at once
// instead of after the next probes. It reports whether the backend went
// down with this call (a fenced or offline backend stays as it is).
func (b *Backend) ReportFailure(err error) bool {
	msg := err.Error()
	b.lastErr.Store(&msg)
	b.failures.Add(1)
	b.probed.Store(uint32(StateDown))
	_, changed := b.settle(StateDown)
	return changed
}

// settle moves the state to to unless Hold keeps it fenced or offline. It
// returns the state it replaced and whether it changed.
func (b *Backend) settle(to State) (State, bool) {
	for {
		cur := State(b.state.Load())
		if cur == to || cur.held() {
			return cur, false
		}
		if b.state.CompareAndSwap(uint32(cur), uint32(to)) {
			return cur, true
		}
	}
}

// Hold sets the backend fenced (failover) or offline (admin), whatever the
// probes find, until Release. Any other state is ignored. It returns the
// state it replaced.
func (b *Backend) Hold(s State) State {
	if !s.held() {
		return b.State()
	}
	return State(b.state.Swap(uint32(s)))
}

// Release ends a Hold: the backend takes the state the probes last found
// (up, lagging or down). It returns the new state.
func (b *Backend) Release() State {
	for {
		cur := b.state.Load()
		if !State(cur).held() {
			return State(cur)
		}
		to := b.probed.Load()
		if b.state.CompareAndSwap(cur, to) {
			return State(to)
		}
	}
}

// Cluster is one master with its replicas, and how reads are spread over
// them. Its fields are fixed once its Snapshot is published.
type Cluster struct {
	Name     string
	Master   *Backend
	Replicas []*Backend
	// Fenced are old masters a failover replaced: they get no traffic
	// (state fenced, Backend.Hold) but the prober still watches them, so
	// sluice sees one come back and can set it read-only.
	Fenced []*Backend
	// WritesRefused, when not "", says why sluice cannot tell which server
	// is the cluster's master (health.ErrAmbiguousMaster): statements for
	// the master fail with it rather than guess.
	WritesRefused string
	// WritesHeld, when not "", says why statements for the master wait
	// (a planned switchover is moving the master): they resume with the
	// next snapshot that clears it (HoldWrites, ReleaseWrites, Switch).
	WritesHeld string
	// Balance names the balancer (conf's cluster.balance).
	Balance string
	// MaxReplicationLag: a replica further behind is lagging.
	MaxReplicationLag time.Duration
	// ReadsFallBackToMaster: with no replica able to serve, reads go to
	// the master; when false they fail.
	ReadsFallBackToMaster bool

	user, password string
	balancer       Balancer
	// aside picks for work that is not a client statement; see
	// PickReplicaAside.
	aside Balancer
}

// PickReplica returns a replica that is up for a read, chosen by the
// cluster's balancer, never skip (a replica that just failed); nil when no
// replica can serve.
func (c *Cluster) PickReplica(skip *Backend) *Backend {
	return c.balancer.Pick(skip)
}

// PickReplicaAside is PickReplica on a balancer of its own, for work that
// is not a client statement (the schema check at login): it must not shift
// the rotation of statements, or sessions that all do the same amount of
// such work end up in step on one replica.
func (c *Cluster) PickReplicaAside(skip *Backend) *Backend {
	return c.aside.Pick(skip)
}

// Backends returns the master and the replicas.
func (c *Cluster) Backends() []*Backend {
	return append([]*Backend{c.Master}, c.Replicas...)
}

// Watched returns every backend the prober watches: the master, the
// replicas and the fenced old masters.
func (c *Cluster) Watched() []*Backend {
	return append(c.Backends(), c.Fenced...)
}

// ReplicaStates describes each replica's state for messages, in
// configuration order: "127.0.0.1:3307 lagging, 127.0.0.1:3308 down".
func (c *Cluster) ReplicaStates() string {
	var sb strings.Builder
	for i, r := range c.Replicas {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(r.Address)
		sb.WriteByte(' ')
		sb.WriteString(r.State().String())
	}
	return sb.String()
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

// Topology holds the current Snapshot and counts probe rounds. Readers load
// the snapshot with Current (an atomic load); Promote and RefuseWrites
// publish a new one, one writer at a time (mu), and close the channel
// Changed returned so waiters wake.
type Topology struct {
	// OnPublish, when set, is called with each snapshot Promote or
	// RefuseWrites builds, under the publish lock and before the snapshot
	// becomes current, so what depends on it (the proxy's pools) is ready
	// when the data plane first sees it. Set it before any publish.
	OnPublish func(*Snapshot)

	cur   atomic.Pointer[Snapshot]
	round atomic.Uint64
	// kick asks the Prober for a round now (Kick).
	kick chan struct{}

	mu sync.Mutex
	// changed is closed and replaced on each publish.
	changed atomic.Pointer[chan struct{}]
}

// NewTopology builds the first snapshot (epoch 1) from a validated
// configuration; every backend starts up.
func NewTopology(cfg *conf.Config) *Topology {
	s := &Snapshot{Epoch: 1}
	for _, cc := range cfg.Clusters {
		c := &Cluster{
			Name:                  cc.Name,
			Master:                &Backend{Cluster: cc.Name, Address: cc.Master, Role: RoleMaster, Weight: 1},
			Balance:               cc.Balance,
			MaxReplicationLag:     cc.MaxReplicationLag.Duration,
			ReadsFallBackToMaster: cc.ReadsFallBackToMaster,
			user:                  cc.User,
			password:              cc.Password,
		}
		if c.MaxReplicationLag <= 0 {
			c.MaxReplicationLag = conf.DefaultMaxReplicationLag
		}
		for _, r := range cc.Replicas {
			c.Replicas = append(c.Replicas, &Backend{Cluster: cc.Name, Address: r.Address, Role: RoleReplica,
				Weight: max(r.Weight, 1), Agent: r.Agent})
		}
		// conf validated the name; an unknown one (a Config built in
		// code) gets the default.
		c.balancer, _ = NewBalancer(cc.Balance, c.Replicas)
		c.aside, _ = NewBalancer(cc.Balance, c.Replicas)
		s.Clusters = append(s.Clusters, c)
	}
	t := &Topology{kick: make(chan struct{}, 1)}
	t.cur.Store(s)
	ch := make(chan struct{})
	t.changed.Store(&ch)
	return t
}

// Current returns the current snapshot.
func (t *Topology) Current() *Snapshot { return t.cur.Load() }

// Kick asks the Prober to start a probe round now rather than at its next
// tick (a DDL just changed what the masters' probes read). It never
// blocks; kicks while one is pending are one.
func (t *Topology) Kick() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// Round returns how many probe rounds have finished: a round ends when
// every backend has finished a probe (and its agent poll) started in it.
// The data plane compares it to the round it last picked a replica in to
// rebalance once per round.
func (t *Topology) Round() uint64 { return t.round.Load() }
