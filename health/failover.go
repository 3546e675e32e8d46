package health

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-proxy/sluice/internal/failpoint"
)

// Defaults of the Failover fields that are 0.
const (
	// DefaultConfirmWait: how long Run gives the replicas to notice that the master is gone.
	DefaultConfirmWait = time.Second
	// DefaultApplyTimeout: how long the chosen replica gets to apply its relay log.
	DefaultApplyTimeout = 10 * time.Second
)

// confirmPoll is how often the confirm step re-reads the replicas while it waits.
const confirmPoll = 100 * time.Millisecond

// Reasons Run gives up without promoting. Each is wrapped with details naming the cluster and
// the servers involved; test with errors.Is.
var (
	// ErrBlocked: the cluster failed over less than Failover.Block ago.
	ErrBlocked = errors.New("failover blocked")
	// ErrMasterReachable: sluice can log in to the master.
	ErrMasterReachable = errors.New("the master is reachable")
	// ErrNotConfirmed: a replica still receives from the master, or no replica could be
	// asked; the master may be cut off from sluice alone.
	ErrNotConfirmed = errors.New("the replicas do not confirm that the master is down")
	// ErrInProgress: another sluice instance holds the failover lock of the cluster.
	ErrInProgress = errors.New("a failover of this cluster is already in progress")
	// ErrNoQuorum: the failover lock could not be taken on a majority of the reachable servers.
	ErrNoQuorum = errors.New("failover lock not held on a majority of the reachable servers")
	// ErrNoCandidate: no reachable replica can be promoted.
	ErrNoCandidate = errors.New("no replica can be promoted")
	// ErrApplyTimeout: the chosen replica did not apply its relay log within ApplyTimeout.
	ErrApplyTimeout = errors.New("the chosen replica did not apply what it received in time")
	// ErrPromoteFailed: a statement promoting the candidate failed. Each one can be run
	// again, and the candidate still holds everything, so the next attempt chooses it again.
	ErrPromoteFailed = errors.New("promoting the chosen replica failed")
	// ErrDivergent: promoting any reachable replica would discard transactions another one
	// received (none received everything the others did, or those that did cannot apply it).
	// Sluice refuses rather than lose them; a DBA must look.
	ErrDivergent = errors.New("promoting any replica would discard transactions another received")
	// ErrAmbiguousMaster: more than one server is writable and replicates from no one, so
	// sluice cannot tell which is the master; it must refuse writes rather than guess.
	ErrAmbiguousMaster = errors.New("cannot tell which server is the master")
	// ErrNoMaster: no reachable server is writable and replicates from no one.
	ErrNoMaster = errors.New("no server is a writable master")
)

// Failover is one automatic failover of one cluster: the inputs of Run. The caller fills it
// from the configuration, the live topology and the state file, and owns it; Run only reads
// it, so one Failover may be run again (the next probe round) or from several goroutines.
//
// Run's sequence:
//  1. Block: refuse within Block of LastFailover.
//  2. Survey: log in to the master (a ping) and to every replica (read_only, GTID
//     positions, replication status), all at once.
//  3. Already done: a replica that is writable and replicates from no one was promoted by
//     another sluice instance; Run reports it (OutcomeFollowed) instead of promoting. With
//     the master reachable as well, or several such replicas, Run returns ErrAmbiguousMaster.
//  4. Confirm: the master must be unreachable from sluice (else ErrMasterReachable) AND every
//     reachable replica's IO thread must have lost it (not "Yes"); Run re-reads the replicas
//     for up to ConfirmWait, repeating step 3 each time, then gives up with ErrNotConfirmed.
//     A partition between sluice and the master alone therefore never promotes.
//  5. Lock: GET_LOCK(FailoverLockName(Cluster), 0) on the reachable servers in configured
//     order; a lock held elsewhere ends Run with ErrInProgress, fewer than a majority with
//     ErrNoQuorum. The locks are held on Run's connections until it returns.
//  6. Under the lock, the replicas are read again (another instance may have finished
//     meanwhile) and steps 3 and 4 are repeated.
//  7. Choose: every reachable replica's received set counts (executed plus relay log), whatever
//     the state of its SQL or IO thread; a read-only server that replicates from no one counts
//     with its own position. Only a replica that received everything any other did may be
//     promoted; among those, one whose SQL thread can run goes first, then the one that applied
//     more, then one without MASTER_DELAY, then the configured order. When there is none,
//     Run refuses with ErrDivergent.
//  8. Apply: the candidate's stopped SQL thread is started, or its MASTER_DELAY lifted (the
//     relay log is kept either way), and Run waits up to ApplyTimeout until it has applied
//     everything (ErrApplyTimeout). A candidate whose SQL thread fails passes the choice to the
//     next; when none is left, ErrDivergent.
//  9. Promote it, a statement at a time (STOP SLAVE; RESET SLAVE ALL; semi-sync's master side
//     on when it was a semi-sync replica; read_only OFF), and repoint every other reachable
//     replica to it with GTID auto-positioning, unless that replica holds a transaction the
//     new master lacks (Result.Divergent: it is left alone rather than have it discarded).
//
// Checkpoint sees the failover before each change, so a sluice that dies part way can finish
// it: every step can be run again, and a read-only candidate that already forgot its master
// is chosen again by step 7.
type Failover struct {
	Cluster string
	// Master is the address sluice knows the failed master by.
	Master string
	// Replicas are the cluster's replica addresses in configured order (ties go to the first).
	// The promoted replica's address is also what the others are repointed to, so it must be
	// an address the replicas can reach it by.
	Replicas    []string
	Credentials Credentials
	// Epoch is the topology epoch before the failover; the Result carries Epoch+1.
	Epoch uint64
	// LastFailover is when this cluster last failed over (FailoverState.LastFailover), zero
	// when never; Block is failover_block. Run refuses with ErrBlocked within Block of it.
	LastFailover time.Time
	Block        time.Duration
	// ConfirmWait and ApplyTimeout: 0 means DefaultConfirmWait and DefaultApplyTimeout.
	ConfirmWait  time.Duration
	ApplyTimeout time.Duration
	// Now, when set, replaces time.Now (for the Block check and the Result's times).
	Now func() time.Time
	// Elsewhere are other servers of the cluster that are not Master (old masters a failover
	// replaced): a replica that replicates from one of them, or from another replica, tells
	// nothing about Master. A replica that replicates from any other address is taken to
	// know Master by another name.
	Elsewhere []string
	// Resumed: a failover from Master started before (a pending record names it), so the
	// replicas confirmed then that the master is down. Step 4 no longer needs a replica that
	// confirms (a candidate that already forgot its master cannot), but a replica whose IO
	// thread receives from the master still stops Run.
	Resumed bool
	// Candidate, when set, is the only replica Run may promote: an earlier attempt began
	// promoting it, and promoting another could leave two writable servers.
	Candidate string
	// Undo seeds Result.Undo with what an earlier attempt recorded: it knew the replicas
	// before it changed them.
	Undo map[string][]string
	// Checkpoint, when set, is called with the failover so far (NewMaster naming the
	// candidate) before the candidate is changed, after it is promoted and after each repoint,
	// so that a sluice that dies part way can finish (the caller keeps it in the state file).
	// It runs on Run's goroutine; it must copy what it keeps.
	Checkpoint func(*Result)
}

// Outcome is what a successful Run did.
type Outcome string

const (
	// OutcomePromoted: this Run promoted a replica.
	OutcomePromoted Outcome = "promoted"
	// OutcomeFollowed: another sluice instance had already promoted one; this Run found it.
	OutcomeFollowed Outcome = "followed"
)

// Result is the record of one failover, for the log and the state file. It is a plain value
// owned by the caller once Run returns.
type Result struct {
	Cluster   string    `json:"cluster"`
	Outcome   Outcome   `json:"outcome"`
	Epoch     uint64    `json:"epoch"`
	OldMaster string    `json:"old_master"`
	NewMaster string    `json:"new_master"`
	Flavor    string    `json:"flavor,omitempty"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	// Servers is what each replica reported before the promotion (after the lock).
	Servers []ServerReport `json:"servers,omitempty"`
	// PromotedAt is the new master's binlog GTID position right after its promotion: every
	// transaction it had. A transaction the old master has beyond it is errant.
	PromotedAt string `json:"promoted_at,omitempty"`
	// Repointed are the replicas now replicating from NewMaster; NotRepointed the others with
	// the reason (unreachable, or the error).
	Repointed    []string          `json:"repointed,omitempty"`
	NotRepointed map[string]string `json:"not_repointed,omitempty"`
	// Skipped are replicas that could not be chosen, with the reason.
	Skipped map[string]string `json:"skipped,omitempty"`
	// Divergent are replicas left where they were because they hold transactions the new
	// master lacks, with those GTIDs: repointing would discard them. A DBA must look.
	Divergent map[string]string `json:"divergent,omitempty"`
	// Undo holds, per replica the failover changed before promoting anyone (its SQL thread
	// started, its MASTER_DELAY lifted), the statements that put it back as it was: for a
	// failover abandoned because the master answers again. Empty once one is promoted.
	Undo map[string][]string `json:"undo,omitempty"`
	// Warnings are what went wrong without stopping the sequence (a switchover's semi-sync
	// settings).
	Warnings []string `json:"warnings,omitempty"`
	// Steps time each step of Run in order.
	Steps []Step `json:"steps"`
	// Errant lists transactions found on the old master but not on the new one when the old
	// master came back and was fenced (FailoverState.RecordFence fills it); "" when none or
	// not known yet.
	Errant string `json:"errant,omitempty"`
}

// ServerReport is one replica as the failover saw it. GTID sets are in their flavor's notation.
type ServerReport struct {
	Addr        string `json:"addr"`
	Error       string `json:"error,omitempty"` // unreachable: why
	ReadOnly    bool   `json:"read_only"`
	Replicating bool   `json:"replicating"`
	IORunning   string `json:"io_running,omitempty"`
	LastIOError string `json:"last_io_error,omitempty"`
	Received    string `json:"received,omitempty"`
	Executed    string `json:"executed,omitempty"`
	BinlogPos   string `json:"binlog_pos,omitempty"`
}

// Step is how long one step of Run took.
type Step struct {
	Name string        `json:"name"`
	Took time.Duration `json:"took_ns"`
}

// PromotedPosition parses PromotedAt.
func (r *Result) PromotedPosition() (GTIDSet, error) {
	f := FlavorMariaDB
	if r.Flavor == FlavorMySQL.String() {
		f = FlavorMySQL
	}
	return ParseGTID(f, r.PromotedAt)
}

// Took returns the duration of the named step, 0 when it did not run.
func (r *Result) Took(step string) time.Duration {
	for _, s := range r.Steps {
		if s.Name == step {
			return s.Took
		}
	}
	return 0
}

// member is one server during Run: its control connection (nil when unreachable) and state.
type member struct {
	addr   string
	conn   *ControlConn
	err    error // dial or state error: unreachable
	st     ServerState
	locked bool
}

func (m *member) reachable() bool { return m.err == nil }

func (m *member) report() ServerReport {
	r := ServerReport{Addr: m.addr}
	if m.err != nil {
		r.Error = m.err.Error()
		return r
	}
	rs := m.st.Replica
	r.ReadOnly, r.Replicating, r.IORunning, r.LastIOError = m.st.ReadOnly, rs.Configured, rs.IORunning, rs.LastIOError
	r.Received, r.Executed, r.BinlogPos = rs.Received.String(), rs.Executed.String(), m.st.BinlogPos.String()
	return r
}

// refresh re-reads the state of a reachable member; a failure makes it unreachable.
func (m *member) refresh(ctx context.Context) {
	if m.conn == nil {
		return
	}
	st, err := m.conn.State(ctx)
	if err != nil {
		m.err = err
		return
	}
	m.st, m.err = st, nil
}

func (f *Failover) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

func (f *Failover) errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("health: cluster %s: %w: %s", f.Cluster, sentinel, fmt.Sprintf(format, args...))
}

// Run carries out the failover sequence described at Failover. It returns a Result with
// OutcomePromoted or OutcomeFollowed, or an error wrapping one of the Err* reasons above (or a
// connection error from a step that cannot be undone, such as Promote). ctx bounds the whole
// sequence; every connection Run opened is closed, and so every lock released, when it returns.
func (f *Failover) Run(ctx context.Context) (*Result, error) {
	res := &Result{Cluster: f.Cluster, OldMaster: f.Master, Started: f.now(), Undo: maps.Clone(f.Undo)}
	stepStart := time.Now()
	step := func(name string) {
		now := time.Now()
		res.Steps = append(res.Steps, Step{Name: name, Took: now.Sub(stepStart)})
		stepStart = now
	}
	finish := func(outcome Outcome, newMaster string) (*Result, error) {
		res.Outcome, res.NewMaster, res.Epoch, res.Finished = outcome, newMaster, f.Epoch+1, f.now()
		res.Undo = nil
		return res, nil
	}

	if f.Block > 0 && !f.LastFailover.IsZero() {
		if until := f.LastFailover.Add(f.Block); res.Started.Before(until) {
			return nil, f.errorf(ErrBlocked, "the last failover was at %s; none before %s (failover_block %v)",
				f.LastFailover.Format(time.RFC3339), until.Format(time.RFC3339), f.Block)
		}
	}

	// Survey.
	members := make([]*member, len(f.Replicas))
	for i, a := range f.Replicas {
		members[i] = &member{addr: a}
	}
	defer closeAll(members)
	var masterErr error
	dialAll(ctx, members, f.Credentials, func() { masterErr = ping(ctx, f.Master, f.Credentials) })
	step("survey")
	for _, m := range members {
		if m.reachable() && res.Flavor == "" {
			res.Flavor = m.st.Flavor.String()
		}
	}

	// Confirm: the master is gone for sluice and for every replica that can be asked. While
	// Run waits, another instance may finish a failover (its repointed replicas receive
	// again, from the new master), so that is checked on every round too.
	confirmWait := f.ConfirmWait
	if confirmWait <= 0 {
		confirmWait = DefaultConfirmWait
	}
	deadline := time.Now().Add(confirmWait)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("health: cluster %s: confirming the master is down: %w", f.Cluster, err)
		}
		if addr, err := f.promotedElsewhere(masterErr, members); err != nil {
			return nil, err
		} else if addr != "" {
			res.Servers = reports(members)
			return finish(OutcomeFollowed, addr)
		}
		if masterErr == nil {
			return nil, f.errorf(ErrMasterReachable, "sluice logged in to %s", f.Master)
		}
		err := confirmMasterDown(members, f.elsewhere(), f.Resumed)
		if err == nil {
			break
		}
		if !time.Now().Before(deadline) {
			return nil, f.errorf(ErrNotConfirmed, "%v; sluice cannot reach %s: %v", err, f.Master, masterErr)
		}
		select {
		case <-ctx.Done():
		case <-time.After(confirmPoll):
		}
		refreshAll(ctx, members)
	}
	step("confirm")

	// Lock on the reachable servers, in configured order.
	lock := FailoverLockName(f.Cluster)
	heldOn, got, reachable := lockReachable(ctx, members, lock)
	if heldOn != "" {
		return nil, f.errorf(ErrInProgress, "lock %s is held on %s", lock, heldOn)
	}
	if !hasMajority(got, reachable) {
		return nil, f.errorf(ErrNoQuorum, "lock %s taken on %d of %d reachable servers", lock, got, reachable)
	}
	step("lock")

	// Under the lock: another instance may have finished between our survey and our lock.
	refreshAll(ctx, members)
	if addr, err := f.promotedElsewhere(masterErr, members); err != nil {
		return nil, err
	} else if addr != "" {
		res.Servers = reports(members)
		unlockAll(ctx, members, lock)
		return finish(OutcomeFollowed, addr)
	}
	if err := confirmMasterDown(members, f.elsewhere(), f.Resumed); err != nil {
		return nil, f.errorf(ErrNotConfirmed, "%v (after taking the lock)", err)
	}
	res.Servers = reports(members)
	step("resurvey")

	cand, all, err := f.choose(ctx, res, members, step)
	if err != nil {
		return nil, err
	}
	host, port, err := splitAddr(cand.addr)
	if err != nil {
		return nil, fmt.Errorf("health: cluster %s: replica address %q: %w", f.Cluster, cand.addr, err)
	}
	step("apply")

	// A semi-sync cluster stays one, when a replica will be there to acknowledge: with none,
	// the first commit would wait out rpl_semi_sync_master_timeout.
	semi := false
	if st, err := cand.conn.semiSync(ctx); err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("reading the semi-sync settings of %s: %v", cand.addr, err))
	} else if st.replicaOn || st.sourceOn {
		if semi = semiSyncAckers(ctx, members, cand, all) > 0; !semi {
			res.Warnings = append(res.Warnings, "semi-sync left off on the new master: no replica is left to acknowledge its transactions")
		}
	}
	for _, m := range members {
		if !m.reachable() {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s was unreachable: it may hold acknowledged transactions the new master lacks; "+
				"it is repointed only if it holds none (checked when it answers)", m.addr))
		}
	}
	if cand.st.Replica.Configured {
		// Should the old master answer before this failover is recorded, the candidate
		// replicates from it again.
		if res.Undo == nil {
			res.Undo = map[string][]string{}
		}
		if _, ok := res.Undo[cand.addr]; !ok {
			res.Undo[cand.addr] = []string{"START SLAVE"}
		}
	}
	// The master must still be gone: one that came back while the candidate applied may
	// have taken writes already.
	if perr := ping(ctx, f.Master, f.Credentials); perr == nil {
		return nil, f.errorf(ErrMasterReachable, "%s answers again (before promoting %s)", f.Master, cand.addr)
	}
	f.checkpoint(res, cand.addr)
	if err := promote(ctx, cand, res, semi, func() {
		res.Steps = append(res.Steps, Step{Name: StepPromoting})
		f.checkpoint(res, cand.addr)
	}); err != nil {
		return nil, f.errorf(ErrPromoteFailed, "%s: %v", cand.addr, err)
	}
	// The candidate is the master now whatever follows: Run must return it. Its position is
	// read again; if that fails, what it had applied before (everything) stands for it.
	applied := cand.applied()
	cand.refresh(ctx)
	binlog := cand.st.Binlog
	if !cand.reachable() {
		res.Warnings = append(res.Warnings, fmt.Sprintf("reading the position of %s after promoting it: %v", cand.addr, cand.err))
		cand.err = nil
		binlog = BinlogStateOf(applied)
	}
	res.PromotedAt = cand.received().Union(applied).String()
	f.checkpoint(res, cand.addr)
	step("promote")

	for _, m := range members {
		if m == cand {
			continue
		}
		m.refresh(ctx)
		r, why := repointTo(ctx, m, cand.addr, host, port, binlog, f.Credentials)
		res.noteRepoint(m.addr, r, why)
		f.checkpoint(res, cand.addr)
	}
	if semi && len(res.Repointed) == 0 {
		// Nobody was repointed after all: nobody would acknowledge.
		if err := cand.conn.setSemiSync(ctx, false); err == nil {
			res.Warnings = append(res.Warnings, "semi-sync switched off again on the new master: no replica could be repointed to acknowledge")
		}
	}
	step("repoint")
	unlockAll(ctx, members, lock)
	return finish(OutcomePromoted, cand.addr)
}

// checkpoint hands the failover so far to Checkpoint, naming the candidate.
func (f *Failover) checkpoint(res *Result, candidate string) {
	if f.Checkpoint == nil {
		return
	}
	res.NewMaster, res.Epoch = candidate, f.Epoch+1
	f.Checkpoint(res)
}

// choose picks the replica to promote (see the choice type) and makes it apply everything any
// replica received, trying the ranked candidates in turn: one whose SQL thread fails moves the
// choice on to the next; one that runs out of ApplyTimeout ends the attempt (ErrApplyTimeout;
// it goes on applying, so the next attempt is closer). When no replica received everything
// the others did, or none of those that did can apply it, promoting would discard
// transactions: ErrDivergent, naming them.
func (f *Failover) choose(ctx context.Context, res *Result, members []*member, step func(string)) (*member, GTIDSet, error) {
	c := choose(members)
	if f.Candidate != "" {
		// Only the replica an earlier attempt began promoting may be promoted.
		only := slices.DeleteFunc(slices.Clone(c.order), func(m *member) bool { return m.addr != f.Candidate })
		if len(only) == 0 {
			return nil, c.all, f.errorf(ErrPromoteFailed, "an earlier attempt began promoting %s, which cannot be promoted now (%s)",
				f.Candidate, describeSkipped(f.Replicas, c.skipped))
		}
		c.order = only
	}
	if len(c.skipped) > 0 {
		res.Skipped = c.skipped
	}
	if len(c.order) == 0 {
		if len(c.lacking) > 0 {
			return nil, c.all, f.errorf(ErrDivergent, "no reachable replica received everything the others did (%s): %s",
				c.all, describeLacking(f.Replicas, c.lacking))
		}
		return nil, c.all, f.errorf(ErrNoCandidate, "%s", describeSkipped(f.Replicas, c.skipped))
	}
	step("choose")
	applyTimeout := f.ApplyTimeout
	if applyTimeout <= 0 {
		applyTimeout = DefaultApplyTimeout
	}
	var failed []string
	for _, m := range c.order {
		f.checkpoint(res, m.addr)
		failpoint.Hit(failpoint.FailoverChosen)
		err := catchUp(ctx, m, c.all, applyTimeout, res, func() { f.checkpoint(res, m.addr) })
		if err == nil {
			m.refresh(ctx)
			if m.reachable() && m.applied().Contains(c.all) {
				return m, c.all, nil
			}
			err = fmt.Errorf("it lacks %s after applying", c.all.Missing(m.applied()))
		}
		if ctx.Err() != nil {
			return nil, c.all, fmt.Errorf("health: cluster %s: waiting for %s to apply %s: %w", f.Cluster, m.addr, c.all, err)
		}
		failed = append(failed, m.addr+": "+err.Error())
		if res.Skipped == nil {
			res.Skipped = map[string]string{}
		}
		res.Skipped[m.addr] = "could not apply what it received: " + err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, c.all, f.errorf(ErrApplyTimeout, "%s had not applied %s after %v: %v", m.addr, c.all, applyTimeout, err)
		}
	}
	return nil, c.all, f.errorf(ErrDivergent, "the replicas that received %s cannot apply it (%s)%s", c.all, strings.Join(failed, "; "),
		lackingSuffix(f.Replicas, c.lacking))
}

func lackingSuffix(order []string, lacking map[string]string) string {
	if len(lacking) == 0 {
		return ""
	}
	return "; the others lack transactions: " + describeLacking(order, lacking)
}

// ping logs in to addr and pings it.
func ping(ctx context.Context, addr string, cred Credentials) error {
	c, err := Dial(ctx, addr, cred)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Ping(ctx)
}

// dialAll logs in to every member at once and reads its state; a member that cannot be
// reached keeps the reason in err. extra runs alongside (the failover's ping of the master).
func dialAll(ctx context.Context, members []*member, cred Credentials, extra func()) {
	var wg sync.WaitGroup
	if extra != nil {
		wg.Go(extra)
	}
	for _, m := range members {
		wg.Go(func() {
			m.conn, m.err = Dial(ctx, m.addr, cred)
			if m.err == nil {
				m.refresh(ctx)
			}
		})
	}
	wg.Wait()
}

// closeAll closes the members' connections, which releases their named locks.
func closeAll(members []*member) {
	for _, m := range members {
		if m.conn != nil {
			m.conn.Close()
		}
	}
}

// lockReachable takes the named lock without waiting on every reachable member, in order. It
// returns the address of a member where another connection holds it (at which it stops), or
// how many of how many reachable members it locked; a member that fails to answer counts
// against the majority.
func lockReachable(ctx context.Context, members []*member, lock string) (heldOn string, got, reachable int) {
	for _, m := range members {
		if !m.reachable() {
			continue
		}
		reachable++
		ok, err := m.conn.TryLock(ctx, lock)
		if err != nil {
			continue
		}
		if !ok {
			return m.addr, got, reachable
		}
		m.locked = true
		got++
	}
	return "", got, reachable
}

func refreshAll(ctx context.Context, members []*member) {
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() { m.refresh(ctx) })
	}
	wg.Wait()
}

func unlockAll(ctx context.Context, members []*member, lock string) {
	for _, m := range members {
		if m.locked && m.reachable() {
			_ = m.conn.Unlock(ctx, lock) // Close releases it anyway
			m.locked = false
		}
	}
}

func reports(members []*member) []ServerReport {
	out := make([]ServerReport, len(members))
	for i, m := range members {
		out[i] = m.report()
	}
	return out
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

// FenceResult is what FenceOldMaster found on a master that came back after a failover.
type FenceResult struct {
	Addr string `json:"addr"`
	// WasWritable: read_only was off when sluice found it.
	WasWritable bool `json:"was_writable"`
	// BinlogPos is its binlog GTID position.
	BinlogPos string `json:"binlog_pos"`
	// Errant is what it has beyond the new master's position at promotion ("" when nothing):
	// transactions no client should have seen acknowledged, which a DBA must look at before
	// the server rejoins.
	Errant string `json:"errant,omitempty"`
}

// FenceOldMaster connects to a master that was failed over and has come back, turns
// read_only (super_read_only on MySQL) on, and compares its binlog with promotedAt, the new
// master's position when it was promoted (Result.PromotedPosition). Sluice sends the fenced
// server no traffic until a DBA puts it back.
func FenceOldMaster(ctx context.Context, addr string, cred Credentials, promotedAt GTIDSet) (FenceResult, error) {
	fr := FenceResult{Addr: addr}
	c, err := Dial(ctx, addr, cred)
	if err != nil {
		return fr, err
	}
	defer c.Close()
	st, err := c.State(ctx)
	if err != nil {
		return fr, err
	}
	fr.WasWritable = !st.ReadOnly
	if err := c.Fence(ctx); err != nil {
		return fr, fmt.Errorf("health: fencing old master: %w", err)
	}
	fr.BinlogPos = st.BinlogPos.String()
	fr.Errant = st.BinlogPos.Missing(promotedAt)
	return fr, nil
}

// Discovery is what Discover found: which server is the master, and what else needs a
// DBA's or sluice's attention. It is a plain value.
type Discovery struct {
	// Master is the writable server that replicates from no one.
	Master string
	// Stale are other writable servers that replicate from no one while Master is known:
	// old masters to fence.
	Stale []string
	// WritableReplicas replicate from a master but are not read-only: to report, and to set
	// read-only when enforce_read_only is on.
	WritableReplicas []string
	// Unreachable servers with the reason.
	Unreachable map[string]string
}

// Discover logs in to every server of a cluster (addrs: the master and the replicas, any
// order) and works out which one is the master. known is the master a previous failover
// recorded (FailoverState.Master), or "" when there is none; the configured master must not
// be passed here, it is what a failover may have replaced. With exactly one writable server
// that replicates from no one, that is the master. With several, known settles it when it is
// one of them and no replica's IO thread is connected to another; otherwise Discover returns
// ErrAmbiguousMaster, and the caller must refuse writes to the cluster rather than guess.
// With none it returns ErrNoMaster. The Discovery is filled in either case.
func Discover(ctx context.Context, cluster string, addrs []string, known string, cred Credentials) (Discovery, error) {
	members := make([]*member, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		m := &member{addr: a}
		members[i] = m
		wg.Go(func() {
			m.conn, m.err = Dial(ctx, m.addr, cred)
			if m.err == nil {
				m.refresh(ctx)
				m.conn.Close()
			}
		})
	}
	wg.Wait()
	return discover(cluster, members, known)
}

// discover is Discover's decision over the servers' states.
func discover(cluster string, members []*member, known string) (Discovery, error) {
	var d Discovery
	var writable []string
	for _, m := range members {
		switch {
		case !m.reachable():
			if d.Unreachable == nil {
				d.Unreachable = map[string]string{}
			}
			d.Unreachable[m.addr] = m.err.Error()
		case m.st.ReadOnly:
		case m.st.Replica.Configured:
			d.WritableReplicas = append(d.WritableReplicas, m.addr)
		default:
			writable = append(writable, m.addr)
		}
	}
	switch {
	case len(writable) == 1:
		d.Master = writable[0]
		return d, nil
	case len(writable) == 0:
		return d, fmt.Errorf("health: cluster %s: %w", cluster, ErrNoMaster)
	}
	if known != "" && slices.Contains(writable, known) {
		// Trust the record unless a replica actually follows another of them.
		for _, m := range members {
			if !m.reachable() || !m.st.Replica.IOConnected() {
				continue
			}
			src := net.JoinHostPort(m.st.Replica.MasterHost, strconv.Itoa(m.st.Replica.MasterPort))
			if src != known && slices.Contains(writable, src) {
				return d, fmt.Errorf("health: cluster %s: %w: %s are writable and replicate from no one; the record names %s but %s replicates from %s",
					cluster, ErrAmbiguousMaster, strings.Join(writable, ", "), known, m.addr, src)
			}
		}
		d.Master = known
		for _, w := range writable {
			if w != known {
				d.Stale = append(d.Stale, w)
			}
		}
		return d, nil
	}
	return d, fmt.Errorf("health: cluster %s: %w: %s are writable and replicate from no one", cluster, ErrAmbiguousMaster, strings.Join(writable, ", "))
}
