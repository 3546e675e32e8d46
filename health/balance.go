package health

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
)

// Balancer picks the replica that serves a read among a cluster's replicas
// that are up. Implementations are safe for concurrent use and allocate
// nothing per pick; they only load atomics.
type Balancer interface {
	// Pick returns an up replica other than skip (a replica that just
	// failed; nil for none), or nil when none is left.
	Pick(skip *Backend) *Backend
}

// Balancer names, as conf's cluster.balance spells them.
const (
	BalanceRoundRobin = "round-robin"
	BalanceWeighted   = "weighted"
	BalanceLeastLoad  = "least-load"
	BalanceLeastConn  = "least-conn"
)

// NewBalancer returns the balancer policy names over replicas (which it
// keeps and never changes). An unknown policy gives round-robin and an
// error.
func NewBalancer(policy string, replicas []*Backend) (Balancer, error) {
	switch policy {
	case BalanceRoundRobin, "":
		return &roundRobin{replicas: replicas}, nil
	case BalanceWeighted:
		return &weighted{replicas: replicas}, nil
	case BalanceLeastLoad:
		return &leastLoad{replicas: replicas}, nil
	case BalanceLeastConn:
		return &leastConn{replicas: replicas}, nil
	}
	return &roundRobin{replicas: replicas}, fmt.Errorf("health: unknown balancer %q", policy)
}

// eligible reports whether b may take a read that must avoid skip.
func eligible(b, skip *Backend) bool { return b != skip && b.Up() }

// roundRobin takes the eligible replicas in turn, ignoring weights.
type roundRobin struct {
	replicas []*Backend
	next     atomic.Uint64
}

func (r *roundRobin) Pick(skip *Backend) *Backend {
	n := 0
	for _, b := range r.replicas {
		if eligible(b, skip) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	k := int((r.next.Add(1) - 1) % uint64(n))
	for _, b := range r.replicas {
		if eligible(b, skip) {
			if k == 0 {
				return b
			}
			k--
		}
	}
	return nil // the states changed under us; the caller tries again or falls back
}

// weighted gives each eligible replica a share of the picks equal to its
// weight over the eligible replicas' total: a counter walks positions
// 0..total-1, and each replica owns a run of weight positions. A replica
// that is not eligible leaves the total, so the others keep their
// proportions.
type weighted struct {
	replicas []*Backend
	next     atomic.Uint64
}

func (w *weighted) Pick(skip *Backend) *Backend {
	total := 0
	for _, b := range w.replicas {
		if eligible(b, skip) {
			total += b.CurrentWeight()
		}
	}
	if total == 0 {
		return nil
	}
	pos := int((w.next.Add(1) - 1) % uint64(total))
	var last *Backend
	for _, b := range w.replicas {
		if eligible(b, skip) {
			wt := b.CurrentWeight()
			if pos < wt {
				return b
			}
			pos -= wt
			last = b
		}
	}
	// A weight lowered at run time since the total was summed: the
	// position ran past the end.
	return last
}

// leastLoad takes the lower-scored of two distinct eligible replicas chosen
// at random (the power of two choices), where a replica's score is its
// load per CPU divided by its weight (Status.Load: the agent's 1-minute
// load average per CPU, else Threads_running). Comparing two random
// replicas rather than taking the least loaded of all keeps the readers
// that pick on the same stale loads from all landing on one replica, and
// spreads them evenly when loads tie.
type leastLoad struct {
	replicas []*Backend
}

func (l *leastLoad) Pick(skip *Backend) *Backend {
	n := 0
	for _, b := range l.replicas {
		if eligible(b, skip) {
			n++
		}
	}
	switch n {
	case 0:
		return nil
	case 1:
		return l.nth(0, skip)
	}
	i := rand.IntN(n)
	j := rand.IntN(n - 1)
	if j >= i {
		j++
	}
	a, b := l.nth(i, skip), l.nth(j, skip)
	if a == nil || b == nil {
		return l.nth(0, skip) // the states changed under us
	}
	// a was drawn first and at random: a tie goes to a random one.
	if loadScore(b) < loadScore(a) {
		return b
	}
	return a
}

// nth returns the k-th eligible replica, or nil.
func (l *leastLoad) nth(k int, skip *Backend) *Backend {
	for _, b := range l.replicas {
		if eligible(b, skip) {
			if k == 0 {
				return b
			}
			k--
		}
	}
	return nil
}

// loadScore is b's load per weight; 0 before its first probe.
func loadScore(b *Backend) float64 {
	st := b.Status()
	if st == nil {
		return 0
	}
	return st.Load / float64(max(b.CurrentWeight(), 1))
}

// leastConn takes the eligible replica with the fewest data connections
// lent to sessions per weight. Ties go to one of the tied replicas at
// random, so idle replicas share the reads.
type leastConn struct {
	replicas []*Backend
}

func (l *leastConn) Pick(skip *Backend) *Backend {
	var best *Backend
	var bestUse int64
	ties := 0
	for _, b := range l.replicas {
		if !eligible(b, skip) {
			continue
		}
		use := b.InUse()
		bw, bestW := int64(b.CurrentWeight()), int64(0)
		if best != nil {
			bestW = int64(best.CurrentWeight())
		}
		// Compare use/weight with bestUse/best.Weight without dividing.
		switch {
		case best == nil || use*bestW < bestUse*bw:
			best, bestUse, ties = b, use, 1
		case use*bestW == bestUse*bw:
			// Keep each of the tied replicas seen so far with
			// probability 1/ties: a uniform choice among them.
			ties++
			if rand.IntN(ties) == 0 {
				best, bestUse = b, use
			}
		}
	}
	return best
}
