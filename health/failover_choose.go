package health

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-proxy/sluice/internal/failpoint"
)

// received is every transaction m holds or has in its relay log. A server that replicates from
// no one (a candidate whose RESET SLAVE ALL ran before a crash, or one a DBA detached) holds
// what its binary log and its replica position say.
func (m *member) received() GTIDSet {
	if m.st.Replica.Configured {
		return m.st.Replica.Received
	}
	return m.st.BinlogPos.Union(m.st.Replica.Executed)
}

// applied is what m has applied of what it received.
func (m *member) applied() GTIDSet {
	if m.st.Replica.Configured {
		return m.st.Replica.Executed
	}
	return m.received()
}

// eligible reports whether m can take part in the choice: reachable, and a replica or a
// read-only server that replicates from no one. A writable one that replicates from no one is
// a master (promotedElsewhere deals with it).
func (m *member) eligible() bool {
	return m.reachable() && (m.st.Replica.Configured || m.st.ReadOnly)
}

// source is the host:port m replicates from, "" when it replicates from no one.
func (m *member) source() string {
	if !m.st.Replica.Configured {
		return ""
	}
	return net.JoinHostPort(m.st.Replica.MasterHost, strconv.Itoa(m.st.Replica.MasterPort))
}

// choice is what the failover may promote: all is every transaction a reachable replica
// received, order the replicas that received all of it, best first. Promoting anyone else
// would discard transactions (and, with GTIDs, hand their numbers to new ones).
type choice struct {
	all     GTIDSet
	order   []*member
	skipped map[string]string
	// lacking names, for the replicas outside order, what they lack of all.
	lacking map[string]string
}

// choose ranks the members a failover may promote. Every eligible member's received set
// counts, whatever the state of its replication threads: a stopped SQL thread only means the
// relay log must be applied first, a stopped IO thread that it received less. Among those
// that received everything, the one that can apply goes first (a SQL thread stopped by an
// error goes last), then the one that applied more, then one without MASTER_DELAY, then the
// configured order.
func choose(members []*member) choice {
	c := choice{skipped: map[string]string{}, lacking: map[string]string{}}
	var pool []*member
	for _, m := range members {
		switch {
		case !m.reachable():
			c.skipped[m.addr] = "unreachable: " + m.err.Error()
		case !m.eligible():
			c.skipped[m.addr] = "writable and replicates from no one"
		default:
			pool = append(pool, m)
			c.all = c.all.Union(m.received())
		}
	}
	for _, m := range pool {
		if m.received().Contains(c.all) {
			c.order = append(c.order, m)
			continue
		}
		c.lacking[m.addr] = c.all.Missing(m.received())
	}
	pos := func(m *member) int { return slices.Index(members, m) }
	broken := func(m *member) bool {
		return m.st.Replica.Configured && !m.st.Replica.SQLRunning && m.st.Replica.LastSQLErrno != 0
	}
	slices.SortStableFunc(c.order, func(a, b *member) int {
		if ba, bb := broken(a), broken(b); ba != bb {
			if ba {
				return 1
			}
			return -1
		}
		if n := cmp.Compare(b.applied().Count(), a.applied().Count()); n != 0 {
			return n
		}
		if da, db := a.st.Replica.SQLDelay > 0, b.st.Replica.SQLDelay > 0; da != db {
			if da {
				return 1
			}
			return -1
		}
		return cmp.Compare(pos(a), pos(b))
	})
	return c
}

// describeLacking lists, in configured order, what each replica lacks.
func describeLacking(order []string, lacking map[string]string) string {
	var parts []string
	for _, a := range order {
		if l, ok := lacking[a]; ok {
			parts = append(parts, a+" lacks "+l)
		}
	}
	return strings.Join(parts, "; ")
}

// catchUp makes m apply everything in all (ControlConn.ApplyRelayLog: a stopped SQL thread
// is started, MASTER_DELAY lifted, the relay log kept) and waits up to applyTimeout. It returns
// nil once m holds all. res.Undo gets, before anything changes, what puts m back as it was
// should the failover be abandoned.
func catchUp(ctx context.Context, m *member, all GTIDSet, applyTimeout time.Duration, res *Result, checkpoint func()) error {
	rs := m.st.Replica
	if !rs.Configured {
		if m.received().Contains(all) {
			return nil
		}
		return fmt.Errorf("it replicates from no one and lacks %s", all.Missing(m.received()))
	}
	if undo := m.conn.d.undoApplyRelayLog(rs); len(undo) > 0 {
		if res.Undo == nil {
			res.Undo = map[string][]string{}
		}
		if _, ok := res.Undo[m.addr]; !ok {
			res.Undo[m.addr] = undo
			checkpoint()
		}
	}
	if err := m.conn.ApplyRelayLog(ctx, rs); err != nil {
		return fmt.Errorf("applying its relay log (SQL thread running %v, IO thread %q, MASTER_DELAY %d): %w",
			rs.SQLRunning, rs.IORunning, rs.SQLDelay, err)
	}
	actx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	return m.conn.WaitExecuted(actx, all)
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
func promote(ctx context.Context, m *member, res *Result, semi bool, promoting func()) error {
	if err := m.conn.StopReplication(ctx); err != nil {
		return err
	}
	failpoint.Hit(failpoint.FailoverStopped)
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
	// records that before read_only goes off).
	promoting()
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
