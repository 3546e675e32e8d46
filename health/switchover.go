package health

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// DefaultSwitchoverTimeout: how long Switchover.Run waits for the target to apply every
// transaction of the old master when Switchover.Timeout is 0.
const DefaultSwitchoverTimeout = 10 * time.Second

// OutcomeSwitchover: a planned switchover moved the master (Switchover.Run).
const OutcomeSwitchover Outcome = "switchover"

// Reasons a switchover refuses or gives up. Each is wrapped with details naming the cluster
// and the servers involved; test with errors.Is.
var (
	// ErrMasterUnreachable: sluice cannot log in to the master; a switchover needs a live one
	// (a dead master is a failover).
	ErrMasterUnreachable = errors.New("the master is unreachable")
	// ErrTargetNotReplica: the target does not replicate from the master.
	ErrTargetNotReplica = errors.New("the target does not replicate from the master")
	// ErrTargetNotReady: the target replicates from the master but a replication thread is
	// stopped, so it cannot be trusted to catch up.
	ErrTargetNotReady = errors.New("the target's replication is not running")
	// ErrCatchUpTimeout: the target had not applied every transaction of the old master
	// within the timeout; the switchover was undone.
	ErrCatchUpTimeout = errors.New("the target did not catch up with the master in time")
	// ErrSwitchoverIncomplete: promoting the target failed after the old master was made
	// read-only; neither server may be writable, and a DBA must look.
	ErrSwitchoverIncomplete = errors.New("switchover failed half way")
	// ErrOthersNotStopped: KillOthers could not make sure that no other session of the
	// service account is left on the old master; the switchover was undone.
	ErrOthersNotStopped = errors.New("the old master's other sessions could not be stopped")
)

// Switchover is one planned change of a live cluster's master: the inputs of Run. The caller
// fills it from the live topology and owns it; Run only reads it.
//
// Run's sequence:
//  1. Survey: log in to the master and every replica, all at once. The master must answer
//     (else ErrMasterUnreachable); the target must replicate from it (ErrTargetNotReplica)
//     with both replication threads running (ErrTargetNotReady).
//  2. Lock: GET_LOCK(FailoverLockName(Cluster), 0) on the reachable servers, so no other
//     sluice instance fails the cluster over meanwhile (ErrInProgress, ErrNoQuorum).
//  3. Hold: Run calls Hold, which stops new writes and returns once those in flight are done.
//  4. Demote: Guard, then read_only on the old master (the server waits for running writes
//     to commit); with KillOthers, every other connection of the service account there is
//     killed and gone; then its binlog GTID position is read: every transaction it will ever
//     have had.
//  5. Catch up: wait up to Timeout until the target has applied that position. When it does
//     not, Run sets the old master writable again and returns ErrCatchUpTimeout naming what
//     the target lacks; the caller resumes writes.
//  6. Commit and promote: Guard; with KillOthers, a last look at the old master's position
//     (what committed there since step 4 is killed again and waited for on the target, up
//     to maxSettleRounds times); then Commit (the switchover's point of no return: a
//     refusal of any sets the old master writable again), then the target is promoted
//     (STOP SLAVE; RESET SLAVE ALL; read_only OFF) even if ctx ends meanwhile, since Commit
//     recorded it as the master. A failure here is ErrSwitchoverIncomplete: the old master
//     stays read-only.
//  7. Repoint: the old master replicates from the target (its replica position set to its own
//     binlog position on MariaDB, GTID auto-positioning on MySQL), logged in as the cluster's
//     service account, which needs REPLICATION SLAVE; every other replica is repointed as in
//     a failover, each after Guard (a refusal stops the repoints). Failures here are reported
//     in the Result, not returned.
type Switchover struct {
	Cluster string
	// Master is the current master's address; Target the replica that takes over.
	Master, Target string
	// Replicas are the cluster's replica addresses in configured order, Target among them.
	// Target's address is what the others are repointed to.
	Replicas    []string
	Credentials Credentials
	// Epoch is the topology epoch before the switchover; the Result carries Epoch+1.
	Epoch uint64
	// Timeout bounds step 5; 0 means DefaultSwitchoverTimeout.
	Timeout time.Duration
	// Hold is called at step 3 and must return once no write is in flight to the master any
	// more and new ones wait; an error ends Run before anything changed. nil holds nothing.
	Hold func(ctx context.Context) error
	// Guard, when set, is called on Run's goroutine with the switchover so far (NewMaster the
	// target) before each change Run makes to a server: before the demote, before the target
	// is promoted and before each repoint. A refusal before the promotion ends Run with an
	// error wrapping ErrNotLeader, the old master writable again; after it, it only stops the
	// repoints (the target is the master whatever follows). A fleet's prober-leader stores
	// the switchover in etcd under its leadership here, so that an instance that lost its
	// leadership changes no server. nil guards nothing.
	Guard func(ctx context.Context, r *Result) error
	// Commit, when set, is called on Run's goroutine once the target has applied every
	// transaction of the old master, just before the target's read_only goes off: it makes
	// the switchover the cluster's truth (a fleet records the new master in etcd). An error
	// sets the old master writable again and ends Run with an error wrapping ErrNotLeader;
	// after a success Run promotes the target whatever happens to ctx. nil commits nothing.
	Commit func(ctx context.Context, r *Result) error
	// KillOthers: after the old master is read-only and before its final position is read,
	// every other connection of Credentials.User on it (other sluice instances' pools, which
	// Hold does not drain) is killed, and Run waits until they are gone, so that none of
	// their transactions commits there afterwards: MariaDB's read_only does not stop an
	// account with SUPER or READ_ONLY ADMIN. Their open transactions roll back
	// unacknowledged. Replication threads are left alone. Just before Commit the old
	// master's position is read again, in case one of them dialled it again and committed
	// meanwhile; a write sent there after that look is not stopped (the caller's fleet must
	// stop sending them).
	KillOthers bool
	// Now, when set, replaces time.Now for the Result's times.
	Now func() time.Time
}

func (sw *Switchover) now() time.Time {
	if sw.Now != nil {
		return sw.Now()
	}
	return time.Now()
}

func (sw *Switchover) errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("health: cluster %s: switchover to %s: %w: %s", sw.Cluster, sw.Target, sentinel, fmt.Sprintf(format, args...))
}

// Run carries out the switchover described at Switchover and returns its Result (Outcome
// OutcomeSwitchover, OldMaster, NewMaster, PromotedAt, Repointed), or an error wrapping one of
// the reasons above (or ErrInProgress, ErrNoQuorum, or a connection error). Every connection
// Run opened is closed, and so every lock released, when it returns. ctx bounds the whole
// sequence; Timeout bounds the catch-up within it.
func (sw *Switchover) Run(ctx context.Context) (*Result, error) {
	a := sw.newAttempt()
	if !slices.Contains(sw.Replicas, sw.Target) {
		return nil, sw.errorf(ErrUnknownBackend, "%s is not a configured replica", sw.Target)
	}
	host, port, err := splitAddr(sw.Target)
	if err != nil {
		return nil, fmt.Errorf("health: cluster %s: replica address %q: %w", sw.Cluster, sw.Target, err)
	}
	defer closeAll(a.all)
	if err := a.survey(ctx); err != nil {
		return nil, err
	}
	if err := a.lock(ctx); err != nil {
		return nil, err
	}
	defer unlockAll(context.WithoutCancel(ctx), a.all, a.lockName)
	if err := a.hold(ctx); err != nil {
		return nil, err
	}
	if err := a.guard(ctx, "demoting "+a.Master); err != nil {
		return nil, err
	}
	final, err := a.demote(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.waitCatchUp(ctx, final); err != nil {
		return nil, err
	}
	if err := a.commit(ctx, final); err != nil {
		return nil, err
	}
	// Committed: the target is the master of record, so it is made writable even when the
	// leadership (ctx) ends now; its own bound is the statements' timeout.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 4*a.Credentials.timeout())
	semi, err := a.promoteTarget(pctx)
	cancel()
	if err != nil {
		return nil, err
	}
	a.repoint(ctx, host, port, semi)
	return a.finish(), nil
}

// guard hands the switchover so far to Guard before the change named by before; a refusal
// is an error wrapping ErrNotLeader. It changes nothing itself.
func (a *switchoverAttempt) guard(ctx context.Context, before string) error {
	if a.Guard == nil {
		return nil
	}
	if err := a.Guard(ctx, a.res); err != nil {
		return a.errorf(ErrNotLeader, "refused before %s: %v", before, err)
	}
	return nil
}

// killOthers kills the other sessions of the service account on the old master when
// KillOthers is set (see ControlConn.killOthers), noting how many in the Result. Its error
// wraps ErrOthersNotStopped; the caller undoes the demote.
func (a *switchoverAttempt) killOthers(ctx context.Context) error {
	if !a.KillOthers {
		return nil
	}
	n, err := a.master.conn.killOthers(ctx, a.Credentials.User, a.Credentials.timeout())
	if err != nil {
		return a.errorf(ErrOthersNotStopped, "%s: %v", a.Master, err)
	}
	if n > 0 {
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("killed %d other connection(s) of %s on the old master %s", n, a.Credentials.User, a.Master))
	}
	return nil
}

// maxSettleRounds bounds how often settle chases commits that landed on the old master after
// its final position was read.
const maxSettleRounds = 3

// settle makes sure, just before Commit, that the old master took nothing since final was
// read: another instance that dialled it again after the kill may have committed there with
// an account read_only does not stop. What it finds is killed again and waited for on the
// target; after maxSettleRounds it gives up with ErrOthersNotStopped. Without KillOthers it
// does nothing. An error of the catch-up comes back with the demote already undone (undone).
func (a *switchoverAttempt) settle(ctx context.Context, final GTIDSet) (undone bool, err error) {
	if !a.KillOthers {
		return false, nil
	}
	reread := func() (GTIDSet, error) {
		st, err := a.master.conn.State(ctx)
		if err != nil {
			return GTIDSet{}, fmt.Errorf("health: cluster %s: switchover to %s: reading the position of %s again: %w", a.Cluster, a.Target, a.Master, err)
		}
		return st.BinlogPos, nil
	}
	for range maxSettleRounds {
		pos, err := reread()
		if err != nil {
			return false, err
		}
		if final.Contains(pos) {
			return false, nil
		}
		a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("the old master %s took %s after its final position was read", a.Master, pos.Missing(final)))
		if err := a.killOthers(ctx); err != nil {
			return false, err
		}
		if final, err = reread(); err != nil {
			return false, err
		}
		if err := a.waitCatchUp(ctx, final); err != nil {
			return true, err
		}
	}
	return false, a.errorf(ErrOthersNotStopped, "%s kept taking transactions after it was read-only", a.Master)
}

// commit is step 6's first half: Guard, then settle, then Commit, with the old master set
// writable again when any refuses (the target has changed in nothing but its position).
func (a *switchoverAttempt) commit(ctx context.Context, final GTIDSet) error {
	if err := a.guard(ctx, "promoting "+a.Target); err != nil {
		return a.undoDemote(ctx, err)
	}
	if undone, err := a.settle(ctx, final); err != nil {
		if undone {
			return err
		}
		return a.undoDemote(ctx, err)
	}
	if a.Commit == nil {
		return nil
	}
	if err := a.Commit(ctx, a.res); err != nil {
		return a.undoDemote(ctx, a.errorf(ErrNotLeader, "the switchover could not be committed: %v", err))
	}
	a.step("commit")
	return nil
}

// switchoverAttempt is one Run of a Switchover: the Result it fills, the servers it surveyed
// (the old master first, then the replicas, the target among them) and the lock it takes. Run
// owns it and closes its connections; the Switchover it embeds is only read. Each step of the
// sequence is one of its methods, named after the step.
type switchoverAttempt struct {
	*Switchover
	stepClock
	res      *Result
	master   *member
	target   *member
	replicas []*member
	all      []*member // master, then replicas
	lockName string
}

func (sw *Switchover) newAttempt() *switchoverAttempt {
	res := &Result{Cluster: sw.Cluster, Outcome: OutcomeSwitchover, Epoch: sw.Epoch + 1, OldMaster: sw.Master, NewMaster: sw.Target, Started: sw.now()}
	a := &switchoverAttempt{Switchover: sw, stepClock: newStepClock(res), res: res, lockName: FailoverLockName(sw.Cluster)}
	a.master = &member{addr: sw.Master}
	a.replicas = make([]*member, len(sw.Replicas))
	for i, addr := range sw.Replicas {
		a.replicas[i] = &member{addr: addr}
		if addr == sw.Target {
			a.target = a.replicas[i]
		}
	}
	a.all = append([]*member{a.master}, a.replicas...)
	return a
}

// finish completes the Result of a successful switchover: the caller owns it from here.
func (a *switchoverAttempt) finish() *Result {
	res := a.res
	res.Servers = reports(a.replicas)
	// Commit may have raised the epoch (to the fleet's record revision).
	res.Outcome, res.NewMaster, res.Epoch, res.Finished = OutcomeSwitchover, a.Target, max(res.Epoch, a.Epoch+1), a.now()
	return res
}

// survey is step 1: it logs in to the master and every replica at once, and checks that the
// master answers and that the target replicates from it with both threads running.
func (a *switchoverAttempt) survey(ctx context.Context) error {
	dialAll(ctx, a.all, a.Credentials, nil)
	a.step("survey")
	if !a.master.reachable() {
		return a.errorf(ErrMasterUnreachable, "%s: %v", a.Master, a.master.err)
	}
	a.res.Flavor = a.master.st.Flavor.String()
	if !a.target.reachable() {
		return a.errorf(ErrTargetNotReady, "%s is unreachable: %v", a.Target, a.target.err)
	}
	rs := a.target.st.Replica
	if !rs.Configured || !sameServer(net.JoinHostPort(rs.MasterHost, strconv.Itoa(rs.MasterPort)), a.Master) {
		from := "no one"
		if rs.Configured {
			from = net.JoinHostPort(rs.MasterHost, strconv.Itoa(rs.MasterPort))
		}
		return a.errorf(ErrTargetNotReplica, "%s replicates from %s, not from master %s", a.Target, from, a.Master)
	}
	if !rs.IOConnected() || !rs.SQLRunning {
		return a.errorf(ErrTargetNotReady, "%s: IO thread %s, SQL thread running %v (last IO error %q, last SQL error %q)",
			a.Target, rs.IORunning, rs.SQLRunning, rs.LastIOError, rs.LastSQLError)
	}
	return nil
}

// lock is step 2: the failover lock on a majority of the reachable servers, so that no other
// sluice instance fails the cluster over meanwhile. Run releases it when it returns.
func (a *switchoverAttempt) lock(ctx context.Context) error {
	heldOn, got, reachable := lockReachable(ctx, a.all, a.lockName)
	if heldOn != "" {
		return a.errorf(ErrInProgress, "lock %s is held on %s", a.lockName, heldOn)
	}
	if !hasMajority(got, reachable) {
		return a.errorf(ErrNoQuorum, "lock %s taken on %d of %d reachable servers", a.lockName, got, reachable)
	}
	a.step("lock")
	return nil
}

// hold is step 3: the caller's Hold stops new writes and waits for those in flight. Nothing has
// changed yet, so a failure simply ends Run.
func (a *switchoverAttempt) hold(ctx context.Context) error {
	if a.Hold != nil {
		if err := a.Hold(ctx); err != nil {
			return fmt.Errorf("health: cluster %s: switchover to %s: holding writes: %w", a.Cluster, a.Target, err)
		}
	}
	a.step("hold")
	return nil
}

// demote is step 4: read_only on the old master, then its binlog GTID position, which it
// returns: every transaction it will ever have had. From here on a failure must leave the old
// master writable again (undoDemote).
func (a *switchoverAttempt) demote(ctx context.Context) (GTIDSet, error) {
	if err := a.master.conn.Fence(ctx); err != nil {
		return GTIDSet{}, a.undoDemote(ctx, fmt.Errorf("health: cluster %s: switchover to %s: setting %s read-only: %w",
			a.Cluster, a.Target, a.Master, err))
	}
	if err := a.killOthers(ctx); err != nil {
		return GTIDSet{}, a.undoDemote(ctx, err)
	}
	a.master.refresh(ctx)
	if !a.master.reachable() {
		return GTIDSet{}, a.undoDemote(ctx, fmt.Errorf("health: cluster %s: switchover to %s: reading the position of %s: %w",
			a.Cluster, a.Target, a.Master, a.master.err))
	}
	a.step("demote")
	return a.master.st.BinlogPos, nil
}

// undoDemote sets the old master writable again after a failure (cause) between the demote and
// the promotion, with a context of its own so that a cancelled Run still undoes it. It returns
// cause, joined with the error of the undo when that fails too.
func (a *switchoverAttempt) undoDemote(ctx context.Context, cause error) error {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.Credentials.timeout())
	defer cancel()
	if uerr := a.master.conn.Unfence(uctx); uerr != nil {
		return fmt.Errorf("%w; and setting %s writable again failed: %w", cause, a.Master, uerr)
	}
	return cause
}

// waitCatchUp is step 5: it waits up to Timeout until the target has applied final, the old
// master's last position. When it does not, the old master is set writable again and the error
// (ErrCatchUpTimeout) names what the target lacks.
func (a *switchoverAttempt) waitCatchUp(ctx context.Context, final GTIDSet) error {
	timeout := a.catchUpTimeout()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	err := a.target.conn.WaitExecuted(wctx, final)
	cancel()
	if err == nil {
		a.step("catch_up")
		return nil
	}
	lacks := ""
	if a.target.conn.broken == nil {
		a.target.refresh(ctx)
		if a.target.reachable() {
			lacks = final.Missing(a.target.st.Replica.Executed)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return a.undoDemote(ctx, a.errorf(ErrCatchUpTimeout, "%s had not applied %s of master %s after %v (switchover_timeout); it lacks %s",
			a.Target, final, a.Master, timeout, orNothing(lacks)))
	}
	return a.undoDemote(ctx, a.errorf(ErrCatchUpTimeout, "waiting for %s to apply %s of master %s: %v", a.Target, final, a.Master, err))
}

// catchUpTimeout is Timeout or its default.
func (sw *Switchover) catchUpTimeout() time.Duration {
	if sw.Timeout <= 0 {
		return DefaultSwitchoverTimeout
	}
	return sw.Timeout
}

// promoteTarget is step 6's second half: the target becomes the master (ErrSwitchoverIncomplete when that
// fails: the old master stays read-only) and takes over semi-sync's master side from the old
// master, whose settings it returns for the repoint. Result.PromotedAt gets its position.
func (a *switchoverAttempt) promoteTarget(ctx context.Context) (semiSyncState, error) {
	if err := a.target.conn.Promote(ctx); err != nil {
		return semiSyncState{}, a.errorf(ErrSwitchoverIncomplete, "promoting %s: %v; master %s was left read-only", a.Target, err, a.Master)
	}
	// Semi-synchronous replication moves with the master: the new one waits for
	// acknowledgements as the old one did, and the old one, now a replica, must not (its
	// applier would wait for an acknowledgement no one sends).
	semi, err := a.master.conn.semiSync(ctx)
	if err != nil {
		a.res.Warnings = append(a.res.Warnings, err.Error())
	}
	if semi.sourceOn {
		if err := a.target.conn.setSemiSync(ctx, true); err != nil {
			a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("semi-sync not enabled on the new master: %v", err))
		}
	}
	a.target.refresh(ctx)
	if a.target.reachable() {
		a.res.PromotedAt = a.target.st.BinlogPos.String()
	}
	a.step("promote")
	return semi, nil
}

// repoint is step 7: the old master follows the target at host:port, logged in as the service
// account (its semi-sync master side off first when semi says it was on), and every other
// replica is repointed. Failures go into Result.NotRepointed, not into an error: the target is
// the master already.
func (a *switchoverAttempt) repoint(ctx context.Context, host string, port int, semi semiSyncState) {
	var refused error
	for _, m := range a.all {
		if m == a.target {
			continue
		}
		if refused == nil {
			refused = a.guard(ctx, "repointing "+m.addr)
		}
		var rerr error
		switch {
		case refused != nil:
			// Whoever may change the servers now repairs it.
			rerr = errors.New("not repointed: " + refused.Error())
		case !m.reachable():
			rerr = errors.New("unreachable: " + m.err.Error())
		case m == a.master:
			if semi.sourceOn {
				if err := m.conn.setSemiSync(ctx, false); err != nil {
					a.res.Warnings = append(a.res.Warnings, fmt.Sprintf("semi-sync still on at the old master: %v", err))
				}
			}
			rerr = m.conn.Follow(ctx, host, port, a.Credentials.User, a.Credentials.Password)
		case !m.st.Replica.Configured:
			rerr = errors.New("replicates from no one")
		default:
			rerr = m.conn.Repoint(ctx, host, port)
		}
		if rerr == nil {
			a.res.Repointed = append(a.res.Repointed, m.addr)
			continue
		}
		if a.res.NotRepointed == nil {
			a.res.NotRepointed = map[string]string{}
		}
		a.res.NotRepointed[m.addr] = rerr.Error()
	}
	a.step("repoint")
}

func orNothing(s string) string {
	if s == "" {
		return "nothing it has not received (its SQL thread is behind)"
	}
	return s
}

// splitAddr splits host:port with a numeric port.
func splitAddr(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return "", 0, fmt.Errorf("port: %w", err)
	}
	return host, port, nil
}

// sameServer reports whether two host:port addresses name the same server: the same port and
// the same host, where every loopback name counts as one host.
func sameServer(a, b string) bool {
	if a == b {
		return true
	}
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	loop := func(h string) bool {
		if h == "localhost" {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return ha == hb || (loop(ha) && loop(hb))
}

// Unfence turns read_only (and super_read_only on MySQL) off: it undoes Fence on a master a
// switchover gave up on.
func (cc *ControlConn) Unfence(ctx context.Context) error {
	return cc.exec(ctx, cc.d.unfence()...)
}

// killOthers kills every connection of user on the server but this one and the replication
// threads (a replica's binlog dump may log in as the service account), and waits until they
// are gone or wait ends: a killed session that was committing may still finish its commit,
// so only their absence says that no more will. It returns how many it killed.
func (cc *ControlConn) killOthers(ctx context.Context, user string, wait time.Duration) (int, error) {
	q := "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = " + quoteSQL(user) +
		" AND ID <> CONNECTION_ID() AND COMMAND NOT IN ('Binlog Dump', 'Binlog Dump GTID')"
	ids, err := cc.Rows(ctx, q)
	if err != nil {
		return 0, err
	}
	for _, row := range ids {
		err := cc.exec(ctx, "KILL CONNECTION "+row[0])
		var my *mysql.MyError
		if err != nil && !(errors.As(err, &my) && my.Code == mysql.ER_NO_SUCH_THREAD) {
			return 0, fmt.Errorf("KILL CONNECTION %s: %w", row[0], err)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	// A killed thread keeps its ID until it has rolled back; no new one of user can be
	// among them, since ids are never reused while the server runs.
	list := make([]string, len(ids))
	for i, row := range ids {
		list[i] = row[0]
	}
	left := "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN (" + strings.Join(list, ", ") + ")"
	deadline := time.Now().Add(wait)
	for {
		rows, err := cc.Rows(ctx, left)
		if err != nil {
			return 0, err
		}
		if rows[0][0] == "0" {
			return len(ids), nil
		}
		if !time.Now().Before(deadline) {
			return 0, fmt.Errorf("%s of %d killed connection(s) of %s still there after %v", rows[0][0], len(ids), user, wait)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Follow makes a server that replicates from no one (an old master) a replica of host:port,
// logged in as user: on MariaDB its replica position is set to its own binlog position first
// (MASTER_USE_GTID = slave_pos), on MySQL GTID auto-positioning does the same. Replication
// starts at once.
func (cc *ControlConn) Follow(ctx context.Context, host string, port int, user, password string) error {
	return cc.exec(ctx, cc.d.follow(host, port, user, password)...)
}

// FollowFrom is Follow with the replica position given: on MariaDB gtid_slave_pos is set to
// pos rather than to the binlog position, which lacks the domains a server provisioned from a
// backup never wrote to its own binary log.
func (cc *ControlConn) FollowFrom(ctx context.Context, host string, port int, user, password string, pos GTIDSet) error {
	stmts := cc.d.follow(host, port, user, password)
	if cc.d.flavor == FlavorMariaDB && !pos.IsEmpty() {
		for i, q := range stmts {
			if q == "SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_binlog_pos" {
				stmts[i] = "SET GLOBAL gtid_slave_pos = " + quoteSQL(pos.String())
			}
		}
	}
	return cc.exec(ctx, stmts...)
}

func (d dialect) unfence() []string {
	if d.flavor == FlavorMariaDB {
		return []string{"SET GLOBAL read_only = OFF"}
	}
	return []string{"SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}
}

func (d dialect) follow(host string, port int, user, password string) []string {
	h, p, u, pw := quoteSQL(host), strconv.Itoa(port), quoteSQL(user), quoteSQL(password)
	switch {
	case d.flavor == FlavorMariaDB:
		return []string{"STOP SLAVE", "RESET SLAVE ALL",
			"SET GLOBAL gtid_slave_pos = @@GLOBAL.gtid_binlog_pos",
			"CHANGE MASTER TO MASTER_HOST = " + h + ", MASTER_PORT = " + p + ", MASTER_USER = " + u +
				", MASTER_PASSWORD = " + pw + ", MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1",
			"START SLAVE"}
	case d.replicaWords:
		return []string{"STOP REPLICA", "RESET REPLICA ALL",
			"CHANGE REPLICATION SOURCE TO SOURCE_HOST = " + h + ", SOURCE_PORT = " + p + ", SOURCE_USER = " + u +
				", SOURCE_PASSWORD = " + pw + ", SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = 1, GET_SOURCE_PUBLIC_KEY = 1",
			"START REPLICA"}
	}
	return []string{"STOP SLAVE", "RESET SLAVE ALL",
		"CHANGE MASTER TO MASTER_HOST = " + h + ", MASTER_PORT = " + p + ", MASTER_USER = " + u +
			", MASTER_PASSWORD = " + pw + ", MASTER_AUTO_POSITION = 1, MASTER_CONNECT_RETRY = 1",
		"START SLAVE"}
}

// semiSyncState is which semi-synchronous replication sides a server has switched on, with
// the variable names of its flavor and version (master/slave or source/replica).
type semiSyncState struct {
	sourceVar, replicaVar string // "" when the server has no such variable
	sourceOn, replicaOn   bool
}

// semiSync reads the server's semi-sync variables (none when the plugin is not loaded).
func (cc *ControlConn) semiSync(ctx context.Context) (semiSyncState, error) {
	var st semiSyncState
	rs, err := cc.query(ctx, "SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync_%_enabled'")
	if err != nil {
		return st, err
	}
	for i := range rs.Values {
		name, _ := rs.GetString(i, 0)
		val, _ := rs.GetString(i, 1)
		on := val == "ON" || val == "1"
		switch name {
		case "rpl_semi_sync_master_enabled", "rpl_semi_sync_source_enabled":
			st.sourceVar, st.sourceOn = name, on
		case "rpl_semi_sync_slave_enabled", "rpl_semi_sync_replica_enabled":
			st.replicaVar, st.replicaOn = name, on
		}
	}
	return st, nil
}

// setSemiSync makes the server the source side of semi-sync (source true: master side on,
// replica side off) or the replica side (master side off, replica side on), as far as it has
// the variables; the replica side takes effect when replication (re)starts.
func (cc *ControlConn) setSemiSync(ctx context.Context, source bool) error {
	st, err := cc.semiSync(ctx)
	if err != nil {
		return err
	}
	onOff := func(b bool) string {
		if b {
			return "ON"
		}
		return "OFF"
	}
	var stmts []string
	if st.sourceVar != "" && st.sourceOn != source {
		stmts = append(stmts, "SET GLOBAL "+st.sourceVar+" = "+onOff(source))
	}
	if st.replicaVar != "" && st.replicaOn == source {
		stmts = append(stmts, "SET GLOBAL "+st.replicaVar+" = "+onOff(!source))
	}
	return cc.exec(ctx, stmts...)
}

// HoldWrites publishes a snapshot in which cluster's statements for the master wait (reason
// says why) until ReleaseWrites or Switch (or Promote) publishes one without the hold.
func (t *Topology) HoldWrites(cluster, reason string) (*Snapshot, error) {
	return t.withCluster(cluster, 0, func(c *Cluster) error {
		c.WritesHeld = reason
		return nil
	})
}

// ReleaseWrites lifts HoldWrites: statements for the master go on to the same master.
func (t *Topology) ReleaseWrites(cluster string) (*Snapshot, error) {
	return t.withCluster(cluster, 0, func(c *Cluster) error {
		c.WritesHeld = ""
		return nil
	})
}

// Switch publishes the snapshot of a planned switchover: replica newMaster becomes the master
// of cluster and the old master becomes a replica (new Backends: Role is never changed in
// place; each keeps its last probe Status, and weight 1 for the old master), so reads go on
// to both. The epoch rises to at least res.Epoch (res may be nil). A hold or a refusal of
// writes is lifted. A newMaster that is not a replica is ErrUnknownBackend.
func (t *Topology) Switch(cluster, newMaster string, res *Result) (*Snapshot, error) {
	var minEpoch uint64
	if res != nil {
		minEpoch = res.Epoch
	}
	return t.withCluster(cluster, minEpoch, func(c *Cluster) error {
		i := slices.IndexFunc(c.Replicas, func(b *Backend) bool { return b.Address == newMaster })
		if i < 0 {
			return fmt.Errorf("health: cluster %s: switch to %s: %w", cluster, newMaster, ErrUnknownBackend)
		}
		old, prev := c.Replicas[i], c.Master
		m := &Backend{Cluster: old.Cluster, Address: old.Address, Role: RoleMaster, Weight: 1}
		r := &Backend{Cluster: prev.Cluster, Address: prev.Address, Role: RoleReplica, Weight: 1}
		for _, x := range []struct{ from, to *Backend }{{old, m}, {prev, r}} {
			if st := x.from.Status(); st != nil {
				x.to.status.Store(st)
			}
			s := x.from.State()
			if s.held() {
				s = State(x.from.probed.Load())
			}
			x.to.state.Store(uint32(s))
			x.to.probed.Store(x.from.probed.Load())
		}
		c.Master = m
		c.Replicas = slices.Clone(c.Replicas)
		c.Replicas[i] = r
		c.Fenced = slices.DeleteFunc(slices.Clone(c.Fenced), func(b *Backend) bool { return b.Address == newMaster || b.Address == prev.Address })
		c.WritesRefused, c.WritesHeld = "", ""
		c.balancer, _ = NewBalancer(c.Balance, c.Replicas)
		c.aside, _ = NewBalancer(c.Balance, c.Replicas)
		return nil
	})
}

// RecordSwitchover adds a successful switchover's result: the new master and epoch and the
// history. Unlike Record it fences nothing (the old master is a replica now) and leaves
// LastFailover alone: a planned switchover does not block an automatic failover.
func (s *FailoverState) RecordSwitchover(r *Result) {
	s.Cluster = r.Cluster
	s.Pending = nil
	s.Epoch, s.Master = r.Epoch, r.NewMaster
	s.Fenced = slices.DeleteFunc(s.Fenced, func(a string) bool { return a == r.NewMaster || a == r.OldMaster })
	s.History = append(s.History, *r)
	if n := len(s.History); n > maxHistory {
		s.History = slices.Clone(s.History[n-maxHistory:])
	}
}
