package health

import (
	"context"
	"fmt"
	"slices"
)

// Repair moves a cluster's stranded replicas under its master: replicas that replicate from a
// server in From (old masters a failover replaced, dead or fenced) and, with NoOne, read-only
// servers that replicate from no one (a failover stopped half way after RESET SLAVE ALL, or a
// replica a DBA detached). A replica that holds a transaction the master lacks is left alone
// and reported (RepairResult.Divergent): repointing it would discard that transaction. The
// caller fills a Repair and owns it; Run only reads it.
//
// Sluice runs one after following another instance's failover, at start-up after a failover
// that did not finish, and when a probe finds a replica following a fenced old master.
type Repair struct {
	Cluster string
	// Master is the cluster's master: it must be writable and replicate from no one.
	Master string
	// Replicas are the cluster's replica addresses; the master among them is ignored.
	Replicas    []string
	Credentials Credentials
	// From are the servers a replica must not replicate from.
	From []string
	// NoOne: read-only servers that replicate from no one are stranded too.
	NoOne bool
}

// RepairResult is what a Repair did: the replicas it repointed, those it could not (with the
// reason) and, among those, the ones left alone because they hold transactions the master
// lacks (with the GTIDs). It is a plain value.
type RepairResult struct {
	Repointed    []string          `json:"repointed,omitempty"`
	NotRepointed map[string]string `json:"not_repointed,omitempty"`
	Divergent    map[string]string `json:"divergent,omitempty"`
}

// stranded reports whether m must move under master.
func (r *Repair) stranded(m *member) bool {
	if !m.reachable() || sameServer(m.addr, r.Master) {
		return false
	}
	src := m.source()
	if src == "" {
		return r.NoOne && m.st.ReadOnly
	}
	if sameServer(src, r.Master) {
		return false
	}
	return slices.ContainsFunc(r.From, func(a string) bool { return sameServer(a, src) })
}

// Run surveys the master and the replicas, and, when a replica is stranded, takes the failover
// lock of the cluster on a majority of the reachable servers (ErrInProgress, ErrNoQuorum: a
// failover may be moving them right now) and repoints the stranded ones. A master that is not
// writable or replicates from someone is ErrNoMaster. Every connection Run opened is closed
// when it returns.
func (r *Repair) Run(ctx context.Context) (RepairResult, error) {
	var out RepairResult
	host, port, err := splitAddr(r.Master)
	if err != nil {
		return out, fmt.Errorf("health: cluster %s: master address %q: %w", r.Cluster, r.Master, err)
	}
	master := &member{addr: r.Master}
	all := []*member{master}
	for _, a := range r.Replicas {
		if !sameServer(a, r.Master) {
			all = append(all, &member{addr: a})
		}
	}
	defer closeAll(all)
	dialAll(ctx, all, r.Credentials, nil)
	if !master.reachable() {
		return out, fmt.Errorf("health: cluster %s: repairing replicas: master %s: %w", r.Cluster, r.Master, master.err)
	}
	if master.st.ReadOnly || master.st.Replica.Configured {
		return out, fmt.Errorf("health: cluster %s: repairing replicas: %w: %s is read-only or replicates from %s",
			r.Cluster, ErrNoMaster, r.Master, orNoOne(master.source()))
	}
	if !slices.ContainsFunc(all[1:], r.stranded) {
		return out, nil
	}
	lock := FailoverLockName(r.Cluster)
	heldOn, got, reachable := lockReachable(ctx, all, lock)
	defer unlockAll(context.WithoutCancel(ctx), all, lock)
	if heldOn != "" {
		return out, fmt.Errorf("health: cluster %s: repairing replicas: %w: lock %s is held on %s", r.Cluster, ErrInProgress, lock, heldOn)
	}
	if !hasMajority(got, reachable) {
		return out, fmt.Errorf("health: cluster %s: repairing replicas: %w: lock %s taken on %d of %d reachable servers",
			r.Cluster, ErrNoQuorum, lock, got, reachable)
	}
	// Under the lock, read again: the master's position bounds what a replica may hold.
	refreshAll(ctx, all)
	if !master.reachable() {
		return out, fmt.Errorf("health: cluster %s: repairing replicas: master %s: %w", r.Cluster, r.Master, master.err)
	}
	if master.st.ReadOnly || master.st.Replica.Configured {
		// A switchover may have moved the master meanwhile.
		return out, fmt.Errorf("health: cluster %s: repairing replicas: %w: %s is read-only or replicates from %s (after taking the lock)",
			r.Cluster, ErrNoMaster, r.Master, orNoOne(master.source()))
	}
	var res Result
	for _, m := range all[1:] {
		if !r.stranded(m) {
			continue
		}
		got, why := repointTo(ctx, m, r.Master, host, port, master.st.Binlog, r.Credentials)
		res.noteRepoint(m.addr, got, why)
	}
	out.Repointed, out.NotRepointed, out.Divergent = res.Repointed, res.NotRepointed, res.Divergent
	return out, nil
}

func orNoOne(src string) string {
	if src == "" {
		return "no one"
	}
	return src
}
