package health

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// confirmPoll is how often the confirm step re-reads the replicas while it waits.
const confirmPoll = 100 * time.Millisecond

// confirm is steps 3 and 4: the master must be gone for sluice and for every replica that can
// be asked. Run waits up to ConfirmWait for the replicas to notice, re-reading them every
// confirmPoll; meanwhile another instance may finish a failover (its repointed replicas
// receive again, from the new master), so each round looks for that first. It returns the
// replica another instance promoted (with Result.Servers filled), or "" once the master is
// confirmed down.
func (a *failoverAttempt) confirm(ctx context.Context) (string, error) {
	confirmWait := a.ConfirmWait
	if confirmWait <= 0 {
		confirmWait = DefaultConfirmWait
	}
	deadline := time.Now().Add(confirmWait)
	for {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("health: cluster %s: confirming the master is down: %w", a.Cluster, err)
		}
		if addr, err := a.promotedElsewhere(a.masterErr, a.members); err != nil {
			return "", err
		} else if addr != "" {
			a.res.Servers = reports(a.members)
			return addr, nil
		}
		if a.masterErr == nil {
			return "", a.errorf(ErrMasterReachable, "sluice logged in to %s", a.Master)
		}
		err := confirmMasterDown(a.members, a.elsewhere(), a.Resumed)
		if err == nil {
			break
		}
		if !time.Now().Before(deadline) {
			return "", a.errorf(ErrNotConfirmed, "%v; sluice cannot reach %s: %v", err, a.Master, a.masterErr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(confirmPoll):
		}
		refreshAll(ctx, a.members)
	}
	a.step("confirm")
	return "", nil
}

// lock is step 5: the failover lock on a majority of the reachable replicas, in configured
// order. The locks are held on the attempt's connections until Run releases or closes them.
func (a *failoverAttempt) lock(ctx context.Context) error {
	heldOn, got, reachable := lockReachable(ctx, a.members, a.lockName)
	if heldOn != "" {
		return a.errorf(ErrInProgress, "lock %s is held on %s", a.lockName, heldOn)
	}
	if !hasMajority(got, reachable) {
		return a.errorf(ErrNoQuorum, "lock %s taken on %d of %d reachable servers", a.lockName, got, reachable)
	}
	a.step("lock")
	return nil
}

// resurvey is step 6: under the lock the replicas are read again, since another instance may
// have finished between the survey and the lock, and steps 3 and 4 are repeated once. It
// returns the replica another instance promoted, or "" with Result.Servers filled for the
// choice.
func (a *failoverAttempt) resurvey(ctx context.Context) (string, error) {
	refreshAll(ctx, a.members)
	if addr, err := a.promotedElsewhere(a.masterErr, a.members); err != nil {
		return "", err
	} else if addr != "" {
		a.res.Servers = reports(a.members)
		return addr, nil
	}
	if err := confirmMasterDown(a.members, a.elsewhere(), a.Resumed); err != nil {
		return "", a.errorf(ErrNotConfirmed, "%v (after taking the lock)", err)
	}
	a.res.Servers = reports(a.members)
	a.step("resurvey")
	return "", nil
}

// promotedElsewhere looks for a replica another sluice instance promoted: writable and
// replicating from no one. It returns its address, "" when there is none, or
// ErrAmbiguousMaster when there are several or when the master itself is still reachable
// (two writable servers replicating from no one: sluice must not guess).
func (f *Failover) promotedElsewhere(masterErr error, members []*member) (string, error) {
	var promoted []string
	for _, m := range members {
		if m.reachable() && !m.st.ReadOnly && !m.st.Replica.Configured {
			promoted = append(promoted, m.addr)
		}
	}
	switch {
	case len(promoted) == 0:
		return "", nil
	case len(promoted) > 1:
		return "", f.errorf(ErrAmbiguousMaster, "replicas %s are all writable and replicate from no one", strings.Join(promoted, ", "))
	case masterErr == nil:
		return "", f.errorf(ErrAmbiguousMaster, "replica %s is writable and replicates from no one, and the master %s is reachable", promoted[0], f.Master)
	}
	return promoted[0], nil
}

// elsewhere lists the addresses a replica may replicate from that are not the master: the
// replicas and Elsewhere.
func (f *Failover) elsewhere() []string {
	out := append(slices.Clone(f.Replicas), f.Elsewhere...)
	return slices.DeleteFunc(out, func(a string) bool { return sameServer(a, f.Master) })
}

// confirmMasterDown checks that no reachable replica's IO thread still receives from the master
// and that at least one replica confirms it lost it: its IO thread is trying to reconnect, or
// stopped on an error. A replica whose IO thread a DBA stopped tells nothing, nor does one
// that replicates from a server in elsewhere (another replica, an old master). resumed drops
// the need for a confirming replica (see Failover.Resumed).
func confirmMasterDown(members []*member, elsewhere []string, resumed bool) error {
	confirmed := 0
	var alive []string
	for _, m := range members {
		if !m.reachable() || !m.st.Replica.Configured {
			continue
		}
		if src := m.source(); slices.ContainsFunc(elsewhere, func(a string) bool { return sameServer(a, src) }) {
			continue
		}
		rs := m.st.Replica
		switch {
		case rs.IOConnected():
			alive = append(alive, m.addr)
		case rs.IORunning != "No" || rs.LastIOErrno != 0:
			confirmed++
		}
	}
	if len(alive) > 0 {
		return fmt.Errorf("the IO thread of %s still receives from the master", strings.Join(alive, ", "))
	}
	if confirmed == 0 && !resumed {
		return errors.New("no reachable replica that replicates from the master has seen it go (IO threads stopped by hand tell nothing)")
	}
	return nil
}

// hasMajority reports whether got locks are a majority of n servers.
func hasMajority(got, n int) bool { return n > 0 && got*2 > n }
