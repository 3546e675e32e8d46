package health

import (
	"cmp"
	"context"
	"errors"
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
func catchUp(ctx context.Context, m *member, all GTIDSet, applyTimeout time.Duration, res *Result, checkpoint func() error) error {
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
			if err := checkpoint(); err != nil {
				return err
			}
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

// choose is step 7: it ranks the replicas (see the choice type), keeps only Candidate when an
// earlier attempt began promoting it, and notes in Result.Skipped the replicas that cannot be
// chosen. When no replica received everything the others did, promoting would discard
// transactions: ErrDivergent, naming them; with no eligible replica at all, ErrNoCandidate.
func (a *failoverAttempt) choose() (choice, error) {
	c := choose(a.members)
	if a.Candidate != "" {
		// Only the replica an earlier attempt began promoting may be promoted.
		only := slices.DeleteFunc(slices.Clone(c.order), func(m *member) bool { return m.addr != a.Candidate })
		if len(only) == 0 {
			return c, a.errorf(ErrPromoteFailed, "an earlier attempt began promoting %s, which cannot be promoted now (%s)",
				a.Candidate, describeSkipped(a.Replicas, c.skipped))
		}
		c.order = only
	}
	if len(c.skipped) > 0 {
		a.res.Skipped = c.skipped
	}
	if len(c.order) == 0 {
		if len(c.lacking) > 0 {
			return c, a.errorf(ErrDivergent, "no reachable replica received everything the others did (%s): %s",
				c.all, describeLacking(a.Replicas, c.lacking))
		}
		return c, a.errorf(ErrNoCandidate, "%s", describeSkipped(a.Replicas, c.skipped))
	}
	a.step("choose")
	return c, nil
}

// apply is step 8: it makes the best of c's candidates apply everything any replica received,
// trying them in turn. One whose SQL thread fails moves the choice on to the next; one that
// runs out of ApplyTimeout ends the attempt (ErrApplyTimeout; it goes on applying, so the next
// attempt is closer). When none of them can apply it, promoting would discard transactions:
// ErrDivergent, naming them.
func (a *failoverAttempt) apply(ctx context.Context, c choice) (*member, error) {
	applyTimeout := a.ApplyTimeout
	if applyTimeout <= 0 {
		applyTimeout = DefaultApplyTimeout
	}
	var failed []string
	for _, m := range c.order {
		if err := a.checkpoint(ctx, a.res, m.addr); err != nil {
			return nil, err
		}
		failpoint.Hit(failpoint.FailoverChosen)
		err := catchUp(ctx, m, c.all, applyTimeout, a.res, func() error { return a.checkpoint(ctx, a.res, m.addr) })
		if errors.Is(err, ErrNotLeader) {
			return nil, err
		}
		if err == nil {
			m.refresh(ctx)
			if m.reachable() && m.applied().Contains(c.all) {
				return m, nil
			}
			err = fmt.Errorf("it lacks %s after applying", c.all.Missing(m.applied()))
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("health: cluster %s: waiting for %s to apply %s: %w", a.Cluster, m.addr, c.all, err)
		}
		failed = append(failed, m.addr+": "+err.Error())
		if a.res.Skipped == nil {
			a.res.Skipped = map[string]string{}
		}
		a.res.Skipped[m.addr] = "could not apply what it received: " + err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, a.errorf(ErrApplyTimeout, "%s had not applied %s after %v: %v", m.addr, c.all, applyTimeout, err)
		}
	}
	return nil, a.errorf(ErrDivergent, "the replicas that received %s cannot apply it (%s)%s", c.all, strings.Join(failed, "; "),
		lackingSuffix(a.Replicas, c.lacking))
}

func lackingSuffix(order []string, lacking map[string]string) string {
	if len(lacking) == 0 {
		return ""
	}
	return "; the others lack transactions: " + describeLacking(order, lacking)
}

// describeSkipped lists, in configured order, why each replica could not be chosen.
func describeSkipped(order []string, skipped map[string]string) string {
	if len(skipped) == 0 {
		return "no replica configured"
	}
	var parts []string
	for _, a := range order {
		if why, ok := skipped[a]; ok {
			parts = append(parts, a+": "+why)
		}
	}
	return strings.Join(parts, "; ")
}
