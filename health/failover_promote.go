package health

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-proxy/sluice/internal/failpoint"
)

// prepare settles, before anything is promoted, what step 9 will do with cand, which holds
// all: whether semi-sync's master side goes on (a semi-sync cluster stays one when a replica
// will be there to acknowledge; with none, the first commit would wait out
// rpl_semi_sync_master_timeout), the warnings about replicas that could not be asked, and how
// to undo cand's promotion should the old master answer before this failover is recorded.
func (a *failoverAttempt) prepare(ctx context.Context, cand *member, all GTIDSet) (semi bool) {
	if st, err := cand.conn.semiSync(ctx); err != nil {
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("reading the semi-sync settings of %s: %v", cand.addr, err))
	} else if st.replicaOn || st.sourceOn {
		if semi = semiSyncAckers(ctx, a.members, cand, all) > 0; !semi {
			a.res.Warnings = append(a.res.Warnings, "semi-sync left off on the new master: no replica is left to acknowledge its transactions")
		}
	}
	for _, m := range a.members {
		if !m.reachable() {
			a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("%s was unreachable: it may hold acknowledged transactions the new master lacks; "+
				"it is repointed only if it holds none (checked when it answers)", m.addr))
		}
	}
	if cand.st.Replica.Configured {
		// Should the old master answer before this failover is recorded, the candidate
		// replicates from it again.
		if a.res.Undo == nil {
			a.res.Undo = map[string][]string{}
		}
		if _, ok := a.res.Undo[cand.addr]; !ok {
			a.res.Undo[cand.addr] = []string{"START SLAVE"}
		}
	}
	return semi
}

// promoteCandidate is step 9's first half: once the master is found still gone (one that came
// back while the candidate applied may have taken writes already: ErrMasterReachable), cand is
// promoted (see promote; ErrPromoteFailed) and Result.PromotedAt set. It returns the new
// master's binary log for the repoint. From its success on, cand is the master whatever
// follows, and Run must return it.
func (a *failoverAttempt) promoteCandidate(ctx context.Context, cand *member, semi bool) (BinlogState, error) {
	if perr := ping(ctx, a.Master, a.Credentials); perr == nil {
		return BinlogState{}, a.errorf(ErrMasterReachable, "%s answers again (before promoting %s)", a.Master, cand.addr)
	}
	if err := a.checkpoint(ctx, a.res, cand.addr); err != nil {
		return BinlogState{}, err
	}
	if err := promote(ctx, cand, a.res, semi, func() error { return a.guardOnly(ctx) }, func() error {
		a.res.Steps = append(a.res.Steps, Step{Name: StepPromoting})
		return a.checkpoint(ctx, a.res, cand.addr)
	}); err != nil {
		if errors.Is(err, ErrNotLeader) {
			return BinlogState{}, err
		}
		return BinlogState{}, a.errorf(ErrPromoteFailed, "%s: %v", cand.addr, err)
	}
	// Its position is read again; if that fails, what it had applied before (everything)
	// stands for it.
	applied := cand.applied()
	cand.refresh(ctx)
	binlog := cand.st.Binlog
	if !cand.reachable() {
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("reading the position of %s after promoting it: %v", cand.addr, cand.err))
		cand.err = nil
		binlog = BinlogStateOf(applied)
	}
	a.res.PromotedAt = cand.received().Union(applied).String()
	// The candidate is writable: a Guard that refuses now cannot take that back, but it
	// stops the repoints below.
	a.refused = a.checkpoint(ctx, a.res, cand.addr)
	a.step("promote")
	return binlog, nil
}

// repointOthers is step 9's second half: every other replica follows the new master at
// host:port, whose binary log is binlog, unless it holds a transaction the new master lacks
// (see repointTo). With semi-sync on and nobody repointed, nobody would acknowledge, so it is
// switched off again.
func (a *failoverAttempt) repointOthers(ctx context.Context, cand *member, host string, port int, binlog BinlogState, semi bool) {
	refused := a.refused
	for _, m := range a.members {
		if m == cand {
			continue
		}
		if refused != nil {
			// Whoever may change the servers now repairs it (it replicates from the old
			// master, or from no one).
			a.res.noteRepoint(m.addr, repointFailed, "not repointed: "+refused.Error())
			continue
		}
		m.refresh(ctx)
		r, why := repointTo(ctx, m, cand.addr, host, port, binlog, a.Credentials)
		a.res.noteRepoint(m.addr, r, why)
		refused = a.checkpoint(ctx, a.res, cand.addr)
	}
	if semi && len(a.res.Repointed) == 0 {
		if err := cand.conn.setSemiSync(ctx, false); err == nil {
			a.res.Warnings = append(a.res.Warnings, "semi-sync switched off again on the new master: no replica could be repointed to acknowledge")
		}
	}
	a.step("repoint")
}

// semiSyncAckers counts the members other than cand that will acknowledge cand's transactions
// once repointed: reachable, holding nothing cand lacks (all is what cand applied), with
// semi-sync's replica side on.
func semiSyncAckers(ctx context.Context, members []*member, cand *member, all GTIDSet) int {
	n := 0
	for _, m := range members {
		if m == cand || !m.reachable() || !m.eligible() || !all.Contains(m.received()) {
			continue
		}
		if st, err := m.conn.semiSync(ctx); err == nil && st.replicaOn {
			n++
		}
	}
	return n
}

// promote makes the chosen member the master, one idempotent statement at a time so that a
// sluice that dies between two of them leaves a state the next one can finish from: stop
// replication, forget the master, switch semi-sync's master side on when semi says so (before
// any write can land), then let writes in.
func promote(ctx context.Context, m *member, res *Result, semi bool, guard, promoting func() error) error {
	// Each statement is announced (guard) right before it runs, so that an instance paused
	// after one announcement finds its leadership gone before the next statement.
	if err := guard(); err != nil {
		return err
	}
	if err := m.conn.StopReplication(ctx); err != nil {
		return err
	}
	failpoint.Hit(failpoint.FailoverStopped)
	if err := guard(); err != nil {
		return err
	}
	if err := m.conn.ResetReplication(ctx); err != nil {
		return err
	}
	failpoint.Hit(failpoint.FailoverReset)
	if semi {
		if err := m.conn.setSemiSync(ctx, true); err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("semi-sync not enabled on the new master: %v", err))
		}
	}
	// From here the candidate may be writable, so only it may be promoted (the caller
	// records that before read_only goes off); a refusal leaves it read-only.
	if err := promoting(); err != nil {
		return err
	}
	if err := m.conn.Unfence(ctx); err != nil {
		return err
	}
	failpoint.Hit(failpoint.FailoverPromoted)
	return nil
}

// repointed is what moving one server under a new master did.
type repointed int

const (
	repointDone      repointed = iota // it replicates from the master now (or already did)
	repointFailed                     // unreachable, or a statement failed
	repointDivergent                  // it holds transactions the master lacks: left alone
)

// repointTo moves m under the master at host:port, whose binary log is master, unless m holds
// a transaction the master lacks: repointing would discard it (its relay log is purged, and
// its own binlog would disagree with the master's), so m is left alone and the GTIDs are
// returned for the alert. A member that already replicates from the master with its IO thread
// connected is left as it is; a read-only one that replicates from no one follows the master
// logged in as the service account (cred), as an old master does after a switchover.
func repointTo(ctx context.Context, m *member, masterAddr, host string, port int, master BinlogState, cred Credentials) (repointed, string) {
	if !m.reachable() {
		return repointFailed, "unreachable: " + m.err.Error()
	}
	if src := m.source(); src != "" && sameServer(src, masterAddr) && m.st.Replica.IOConnected() {
		return repointDone, ""
	}
	if extra := master.Lacks(m.received()); extra != "" {
		return repointDivergent, extra
	}
	var err error
	switch {
	case m.st.Replica.Configured:
		err = m.conn.Repoint(ctx, host, port)
	case m.st.ReadOnly:
		err = m.conn.FollowFrom(ctx, host, port, cred.User, cred.Password, m.received())
	default:
		return repointFailed, "writable and replicates from no one"
	}
	if err != nil {
		return repointFailed, err.Error()
	}
	failpoint.Hit(failpoint.FailoverRepointed)
	return repointDone, ""
}

// noteRepoint adds one repointTo outcome to res.
func (res *Result) noteRepoint(addr string, r repointed, why string) {
	switch r {
	case repointDone:
		res.Repointed = append(res.Repointed, addr)
	case repointDivergent:
		if res.Divergent == nil {
			res.Divergent = map[string]string{}
		}
		res.Divergent[addr] = why
		why = "holds transactions the new master lacks: " + why
		fallthrough
	case repointFailed:
		if res.NotRepointed == nil {
			res.NotRepointed = map[string]string{}
		}
		res.NotRepointed[addr] = why
	}
}
