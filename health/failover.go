package health

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Defaults of the Failover fields that are 0.
const (
	// DefaultConfirmWait: how long Run gives the replicas to notice that the master is gone.
	DefaultConfirmWait = time.Second
	// DefaultApplyTimeout: how long the chosen replica gets to apply its relay log.
	DefaultApplyTimeout = 10 * time.Second
)

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
	// ErrNotLeader: Guard refused a change: this sluice is no longer the fleet's prober-leader
	// of the cluster (or etcd did not take the record), so it must change nothing more.
	ErrNotLeader = errors.New("this instance may not change the cluster's servers")
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
	// Guard, when set, is called with the failover so far before each change Run makes to a
	// server until the candidate is writable, and before each repoint after it. An error stops
	// Run before that change (ErrNotLeader); once the candidate is writable it only stops the
	// repoints, since the candidate is the master whatever follows. A fleet's prober-leader
	// stores the failover in etcd under its leadership here, so that an instance that lost its
	// leadership (or etcd) changes no server. It runs on Run's goroutine.
	Guard func(context.Context, *Result) error
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
	a := f.newAttempt()
	if err := a.block(); err != nil {
		return nil, err
	}
	defer closeAll(a.members)
	a.survey(ctx)
	followed, err := a.confirm(ctx)
	if err != nil {
		return nil, err
	}
	if followed != "" {
		return a.finish(OutcomeFollowed, followed), nil
	}
	if err := a.lock(ctx); err != nil {
		return nil, err
	}
	if followed, err = a.resurvey(ctx); err != nil {
		return nil, err
	}
	if followed != "" {
		unlockAll(ctx, a.members, a.lockName)
		return a.finish(OutcomeFollowed, followed), nil
	}
	c, err := a.choose()
	if err != nil {
		return nil, err
	}
	cand, err := a.apply(ctx, c)
	if err != nil {
		return nil, err
	}
	host, port, err := splitAddr(cand.addr)
	if err != nil {
		return nil, fmt.Errorf("health: cluster %s: replica address %q: %w", f.Cluster, cand.addr, err)
	}
	a.step("apply")
	semi := a.prepare(ctx, cand, c.all)
	binlog, err := a.promoteCandidate(ctx, cand, semi)
	if err != nil {
		return nil, err
	}
	a.repointOthers(ctx, cand, host, port, binlog, semi)
	unlockAll(ctx, a.members, a.lockName)
	return a.finish(OutcomePromoted, cand.addr), nil
}

// failoverAttempt is one Run of a Failover: the Result it fills, the replicas it surveyed, what
// the master's ping said and the lock it takes. Run owns it and closes its connections; the
// Failover it embeds is only read, so several attempts may run from one Failover. Each step of
// the sequence is one of its methods, named after the step.
type failoverAttempt struct {
	*Failover
	stepClock
	res       *Result
	members   []*member
	masterErr error // the survey's ping of the master: nil when it answered
	lockName  string
	// refused is what the Guard said once the candidate was writable: the repoints do not run.
	refused error
}

func (f *Failover) newAttempt() *failoverAttempt {
	res := &Result{Cluster: f.Cluster, OldMaster: f.Master, Started: f.now(), Undo: maps.Clone(f.Undo)}
	a := &failoverAttempt{Failover: f, stepClock: newStepClock(res), res: res, lockName: FailoverLockName(f.Cluster)}
	a.members = make([]*member, len(f.Replicas))
	for i, addr := range f.Replicas {
		a.members[i] = &member{addr: addr}
	}
	return a
}

// block is step 1: it refuses within Block of LastFailover (ErrBlocked).
func (a *failoverAttempt) block() error {
	if a.Block <= 0 || a.LastFailover.IsZero() {
		return nil
	}
	if until := a.LastFailover.Add(a.Block); a.res.Started.Before(until) {
		return a.errorf(ErrBlocked, "the last failover was at %s; none before %s (failover_block %v)",
			a.LastFailover.Format(time.RFC3339), until.Format(time.RFC3339), a.Block)
	}
	return nil
}

// survey is step 2: it logs in to every replica and reads its state while it pings the master,
// all at once. An unreachable replica keeps the reason; the Result takes the flavor of the
// first reachable one.
func (a *failoverAttempt) survey(ctx context.Context) {
	dialAll(ctx, a.members, a.Credentials, func() { a.masterErr = ping(ctx, a.Master, a.Credentials) })
	a.step("survey")
	for _, m := range a.members {
		if m.reachable() && a.res.Flavor == "" {
			a.res.Flavor = m.st.Flavor.String()
		}
	}
}

// finish completes the Result of a successful attempt: the caller owns it from here.
func (a *failoverAttempt) finish(outcome Outcome, newMaster string) *Result {
	res := a.res
	res.Outcome, res.NewMaster, res.Epoch, res.Finished = outcome, newMaster, a.Epoch+1, a.now()
	res.Undo = nil
	return res
}

// stepClock times the steps of one Run into its Result.
type stepClock struct {
	res   *Result
	start time.Time
}

func newStepClock(res *Result) stepClock {
	return stepClock{res: res, start: time.Now()}
}

// step records that the named step ends now and the next one begins.
func (c *stepClock) step(name string) {
	now := time.Now()
	c.res.Steps = append(c.res.Steps, Step{Name: name, Took: now.Sub(c.start)})
	c.start = now
}

// guardOnly asks Guard again before one more statement of a step Checkpoint already saw.
func (a *failoverAttempt) guardOnly(ctx context.Context) error {
	if a.Guard == nil {
		return nil
	}
	if err := a.Guard(ctx, a.res); err != nil {
		return a.errorf(ErrNotLeader, "%v", err)
	}
	return nil
}

// checkpoint hands the failover so far to Guard and then Checkpoint, naming the candidate. A
// Guard that refuses ends it with ErrNotLeader before Checkpoint sees it: the change it
// announced will not be made.
func (f *Failover) checkpoint(ctx context.Context, res *Result, candidate string) error {
	if f.Guard == nil && f.Checkpoint == nil {
		return nil
	}
	res.NewMaster, res.Epoch = candidate, f.Epoch+1
	if f.Guard != nil {
		if err := f.Guard(ctx, res); err != nil {
			return f.errorf(ErrNotLeader, "%v", err)
		}
	}
	if f.Checkpoint != nil {
		f.Checkpoint(res)
	}
	return nil
}
