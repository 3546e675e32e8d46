package dataplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/evloop"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"go.uber.org/zap"
)

// HeldWriteWait is how long a statement for a master whose writes a switchover holds waits
// before it fails: the drain and the catch-up (switchover_timeout each) and the promote and
// repoint statements (each bounded by the control timeout).
func HeldWriteWait(h *conf.Health) time.Duration {
	return 2*h.SwitchoverTimeout.Duration + 4*h.Timeout.Duration
}

// masterBit is the session's bit in masterBusy for its active cluster.
func (s *Session) masterBit() uint64 { return 1 << (uint(s.clusterIdx) % 64) }

// markMasterBusy notes that a statement of the session may be on its way to its cluster's
// master. It is called before the session loads the snapshot that decides whether the
// statement waits, so a switchover that publishes a hold and then finds the bit clear knows
// the session will see the hold.
func (s *Session) markMasterBusy() {
	if b := s.masterBit(); s.masterBusy.Load()&b == 0 {
		s.masterBusy.Or(b)
	}
}

// unmarkMasterBusy clears the bit while the session waits for a held master.
func (s *Session) unmarkMasterBusy() { s.masterBusy.And(^s.masterBit()) }

// forward sends the client's command p unchanged to a backend of the
// target role and relays the answer, framed as kind.
func (s *Session) forward(target router.Target, p []byte, kind protocol.ResponseKind, after func(*BackendConn, protocol.RelayResult)) error {
	clientSeq := s.client.Seq()
	return s.exchange(target, func(bc *BackendConn) (protocol.RelayResult, error) {
		return s.send(bc, p, clientSeq, kind)
	}, after)
}

// send writes one command packet to bc and relays the answer to the client,
// whose next packet carries clientSeq.
func (s *Session) send(bc *BackendConn, p []byte, clientSeq uint8, kind protocol.ResponseKind) (protocol.RelayResult, error) {
	bc.ResetSeq()
	if err := bc.WritePacketFlush(p); err != nil {
		return protocol.RelayResult{}, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	s.client.SetSeq(clientSeq)
	return protocol.Relay(s.client, bc.Conn, kind, false)
}

// exchange runs one client command against a backend of the target role:
// it picks and brings up to date the data connection, lets run do the
// command's I/O (relaying the answer to the client), and deals with a
// backend that fails. A command whose replica breaks before any byte
// reached the client is retried once on another backend; otherwise the
// client gets an ERR and the session goes on. A *protocol.SQLError from run
// with nothing relayed yet goes to the client as it is. Only a failing
// client ends the session (the returned error).
func (s *Session) exchange(target router.Target, run func(*BackendConn) (protocol.RelayResult, error), after func(*BackendConn, protocol.RelayResult)) error {
	if err := s.followTopology(); err != nil {
		return err
	}
	var skip *health.Backend
	refused := false
	for attempt := 0; ; attempt++ {
		bc, err := s.backendFor(target, skip)
		if err == nil {
			err = s.sync(bc)
			if err != nil {
				s.dropIfBroken(bc)
			}
		}
		if err != nil {
			if retry, err := s.notSynced(bc, err, target, attempt); !retry {
				return err
			}
			skip = bc.backend
			continue
		}
		if bc.pool != nil {
			bc.pool.queries.Add(1)
		}
		s.runningOn(bc)
		if bc.readOnly {
			// A refusal as a write is handed back, not relayed.
			bc.InterceptErr = protocol.ERReadOnlyTransaction.Code
		}
		res, err := run(bc)
		bc.InterceptErr = 0
		if bc.readOnly && res.Status&protocol.StatusSessionStateChg != 0 {
			// Something the statement ran (a stored function) changed the
			// connection's access mode or sql_mode: reset it before it
			// serves again.
			bc.tainted = true
		}
		if errors.Is(err, protocol.ErrIntercepted) {
			// A read-only replica connection refused the statement (1792)
			// before anything reached the client: nothing changed there.
			// sluice misjudged it as a read; the master runs it once.
			s.info.running.Store(nil)
			// The refusal stays in the connection's diagnostics area, where
			// a later statement that uses no table would still count it:
			// reset the connection before it serves again.
			bc.tainted = true
			if !refused {
				refused = true
				s.replicaRefused(bc)
				target, skip = router.TargetMaster, nil
				continue
			}
			s.ranOn(res, nil)
			s.rec.note(bc.backend, &res)
			return s.client.WriteErr(res.Err)
		}
		s.ranOn(res, err)
		s.rec.note(bc.backend, &res)
		if err == nil {
			s.ran(bc, &res, after)
			return nil
		}
		if retry, err := s.runFailed(bc, res, err, attempt); !retry {
			return err
		}
		skip = bc.backend
	}
}

// notSynced handles a backend that could not be picked or could not take
// the session's state (err): an ERR sluice made goes to the client; a
// connection that broke while sluice replayed state is retried once on
// another replica (retry), else the client gets ERR 2013, or the session
// ends when a transaction was open on it.
func (s *Session) notSynced(bc *BackendConn, err error, target router.Target, attempt int) (retry bool, _ error) {
	var se *protocol.SQLError
	if errors.As(err, &se) {
		return false, s.client.WriteErr(se)
	}
	s.env.metrics.BackendErrs.WithLabelValues(bc.backend.Role.String()).Inc()
	if inTx := s.master == nil && bc != nil && bc.backend.Role == health.RoleMaster && bc.inTransaction(); inTx {
		_ = s.client.WriteErr(lostInTransaction(bc))
		return false, fmt.Errorf("master lost inside a transaction: %w", err)
	}
	if attempt > 0 || target == router.TargetMaster || bc == nil {
		return false, s.client.WriteErr(protocol.CRServerLost.New("Lost connection to %s while replaying session state: %v", describe(bc), err))
	}
	return true, nil
}

// ran takes in what a statement that ran on bc left: the diagnostics a
// SHOW WARNINGS asks about, connection-scoped values, the transaction's
// cluster, the GTID, the status flags; then after, if any.
func (s *Session) ran(bc *BackendConn, res *protocol.RelayResult, after func(*BackendConn, protocol.RelayResult)) {
	// SHOW WARNINGS / @@error_count may ask about this one. A question
	// about the previous statement (SHOW COUNT(*) WARNINGS, SELECT
	// @@warning_count, SHOW WARNINGS itself) leaves the server's
	// diagnostics area as it was, and so does a statement that names no
	// table and raises nothing: the warnings stay held, where they are
	// (diagFrom), for the question after it.
	keep := s.holdWarnings && s.rec.plan != nil && res.Warnings == 0 && res.Err == nil &&
		(s.rec.plan.FollowsPrevious || s.rec.plan.NoTables)
	if !keep {
		s.diagFrom = bc
	}
	s.holdWarnings = res.Warnings > 0 || res.Err != nil || keep
	s.noteScoped(bc, s.rec.plan, res)
	if res.Err == nil && s.pendingTxWrite >= 0 && s.inTransaction() {
		// A sharded write went through: the transaction now writes to
		// this cluster only.
		s.txWrites = s.pendingTxWrite
	}
	s.absorbGTID(bc)
	if res.HasStatus {
		bc.status = res.Status
		s.lastStatus = res.Status
	}
	if after != nil {
		after(bc, *res)
	}
	if s.replay.insertID != 0 {
		s.noteInsertIDUse(bc, *res)
	}
}

// runFailed handles a statement whose exchange with bc failed (err): an
// ERR the backend sent before anything else is the client's; otherwise the
// connection is lost. A replica connection that broke before the backend
// answered is retried once on another replica (retry); anything else ends
// in ERR 2013, or ends the session when the client holds half a packet or
// a transaction was open on the master.
func (s *Session) runFailed(bc *BackendConn, res protocol.RelayResult, err error, attempt int) (retry bool, _ error) {
	var se *protocol.SQLError
	if errors.As(err, &se) && res.Packets == 0 && !errors.Is(err, protocol.ErrBackendIO) {
		return false, s.client.WriteErr(se)
	}
	if err := s.connLost(bc, err); err != nil {
		return false, err
	}
	b := bc.backend
	if res.Torn {
		// The client holds half a packet: no ERR can follow it.
		s.log().Warn("backend lost mid-packet, closing the client", zap.String("backend", b.Address), zap.Error(err))
		return false, fmt.Errorf("backend %s lost mid-packet: %w", b.Address, err)
	}
	if b.Role == health.RoleMaster && bc.inTransaction() {
		// The transaction is gone with the connection. Going on would run
		// the rest of it in autocommit mode: end the session, as a server
		// that lost the connection would.
		_ = s.client.WriteErr(lostInTransaction(bc))
		return false, fmt.Errorf("master %s lost inside a transaction: %w", b.Address, err)
	}
	if b.Role == health.RoleReplica {
		// Reads avoid it while it does not answer its probes.
		s.lostOn = b
	}
	if res.Packets > 0 {
		s.log().Warn("backend lost mid-result", zap.String("backend", b.Address), zap.Error(err))
		return false, s.client.WriteErr(s.lostDuringQuery(bc))
	}
	// Nothing reached the client: the connection broke before the backend
	// answered. The prober, not one broken connection, decides whether the
	// backend is down.
	s.log().Warn("backend connection lost", zap.String("backend", b.Address), zap.String("role", b.Role.String()), zap.Error(err))
	if b.Role == health.RoleReplica && attempt == 0 {
		return true, nil
	}
	return false, s.client.WriteErr(s.lostDuringQuery(bc))
}

// connLost drops bc, which broke during a command (err), and counts it as
// a backend error; it returns err itself when it was the client's
// connection that failed, nil when the caller is to answer the client.
func (s *Session) connLost(bc *BackendConn, err error) error {
	bc.broken = true
	s.dropIfBroken(bc)
	if errors.Is(err, protocol.ErrClientIO) {
		return err
	}
	s.env.metrics.BackendErrs.WithLabelValues(bc.backend.Role.String()).Inc()
	return nil
}

// backendLost answers a command (what: "COM_STMT_FETCH") whose exchange
// with bc broke (err): bc is dropped and counted (connLost) and the client
// gets ERR 2013 naming the backend.
func (s *Session) backendLost(bc *BackendConn, err error, what string) error {
	if err := s.connLost(bc, err); err != nil {
		return err
	}
	return s.client.WriteErr(protocol.CRServerLost.New("Lost connection to %s during %s", describe(bc), what))
}

// absorbGTID takes the GTID of a transaction bc reported committed as the
// session's last one on the active cluster: causal reads wait for it.
func (s *Session) absorbGTID(bc *BackendConn) {
	if len(bc.LastGTID) > 0 {
		s.lastGTID = append(s.lastGTID[:0], bc.LastGTID...)
		bc.LastGTID = bc.LastGTID[:0]
		s.appliedOn = nil
	}
}

// followTopology loads the session's cluster from the current snapshot. When
// a failover published a new one, a master connection to a server that is no
// longer the master is dropped (inside a transaction the client gets the
// lostInTransaction ERR and the session ends, the returned error), and a
// replica connection or read replica that left the replicas is let go. The
// common case is one atomic load.
func (s *Session) followTopology() error {
	snap := s.env.topo.Current()
	if snap.Epoch == s.epoch {
		return nil
	}
	c := snap.Clusters[s.clusterIdx]
	s.cluster, s.epoch = c, snap.Epoch
	// A reload may have changed the cluster's consistency.
	s.consistency = consistencyOf(s.env.config().Cluster(c.Name).Consistency)
	if bc := s.master; bc != nil && bc.backend != c.Master {
		inTx := bc.inTransaction()
		s.master = nil
		s.forgetConn(bc)
		bc.discard()
		if inTx {
			_ = s.client.WriteErr(lostInTransaction(bc))
			return fmt.Errorf("master %s replaced by %s inside a transaction", bc.backend.Address, c.Master.Address)
		}
	}
	isReplica := func(b *health.Backend) bool {
		for _, r := range c.Replicas {
			if r == b {
				return true
			}
		}
		return false
	}
	if bc := s.replica; bc != nil && !isReplica(bc.backend) {
		s.replica = nil
		s.forgetConn(bc)
		bc.discard()
	}
	if s.readFrom != nil && !isReplica(s.readFrom) {
		s.readFrom = nil
	}
	return nil
}

// backendFor returns the session's data connection for target, opening it
// on first use. Reads go to the session's replica (readFrom) while it is up
// (not lagging, down, fenced or offline) and no probe round ended since it
// was picked; otherwise the cluster's balancer picks an up replica (never
// skip). When none can serve, reads go to the master, or fail when the
// cluster has reads_fall_back_to_master = false.
func (s *Session) backendFor(target router.Target, skip *health.Backend) (*BackendConn, error) {
	if target == router.TargetReplica {
		if bc, err := s.replicaFor(skip); bc != nil || err != nil {
			return bc, err
		}
	}
	return s.masterConn()
}

// replicaFor is backendFor's read: the session's replica or a newly
// picked one, never skip; nil and no error when the read is to go to the
// master.
func (s *Session) replicaFor(skip *health.Backend) (*BackendConn, error) {
	if l := s.lostOn; l != nil && skip == nil {
		if l.Unresponsive(s.env.stallTimeout(), time.Now()) {
			skip = l
		} else {
			s.lostOn = nil
		}
	}
	causal := s.consistency == consistencyCausal && len(s.lastGTID) > 0 && !s.aside
	if r := s.replica; r != nil {
		if r.backend != skip && r.backend.Up() && (!causal || s.hasApplied(r.backend)) {
			return r, nil
		}
		s.putBack(r, s.pinned())
		s.replica = nil
	}
	// The session's replica comes first, so its reads do not go back
	// in time by landing on a replica that lags more than the last
	// one; once per probe round it is picked afresh, so balancing
	// follows the loads and states the round found.
	round := s.env.topo.Round()
	sticky := s.readFrom
	if sticky != nil && (s.aside || sticky == skip || !sticky.Up() || s.readRound != round) {
		sticky = nil
	}
	if causal && sticky != nil && !s.hasApplied(sticky) {
		sticky = nil
	}
	exhausted := false
	for range len(s.cluster.Replicas) + 1 {
		b := sticky
		sticky = nil
		if b == nil {
			if s.aside {
				b = s.cluster.PickReplicaAside(skip)
			} else {
				b = s.cluster.PickReplica(skip)
			}
		}
		if b == nil {
			break
		}
		if causal && !s.hasApplied(b) {
			// Not there yet: another replica may be, else the master.
			skip = b
			continue
		}
		bc, err := s.conn(b.Address)
		if err == errKilled || err == errInterrupted {
			return nil, err
		}
		if err == nil {
			s.replica = bc
			if !s.aside {
				s.readFrom, s.readRound = b, round
			}
			return bc, nil
		}
		skip = b
		if errors.Is(err, errBackendGone) {
			// A reload removed it after this statement loaded the
			// topology.
			continue
		}
		if errors.Is(err, ErrPoolExhausted) {
			// Busy, not broken: try the next replica, then the master.
			s.log().Warn("replica pool exhausted", zap.String("backend", b.Address))
			exhausted = true
			continue
		}
		s.env.metrics.BackendErrs.WithLabelValues(b.Role.String()).Inc()
		from := b.State()
		if b.ReportFailure(err) {
			s.log().Warn("replica unreachable, taken out of rotation", zap.String("backend", b.Address), zap.Error(err))
			s.env.host.BackendStateChanged(b, from, health.StateDown, err.Error())
		}
	}
	// No replica can serve: reads go to the master, unless the
	// cluster says they must not (the login's schema check still may).
	if !s.cluster.ReadsFallBackToMaster && !s.aside && !causal && len(s.cluster.Replicas) > 0 {
		busy := ""
		if exhausted {
			busy = "; the pools of the replicas that are up are exhausted"
		}
		return nil, protocol.CRCouldNotConnect.New("sluice: no replica of cluster %s can serve the read (%s%s) and reads_fall_back_to_master is false",
			s.cluster.Name, s.cluster.ReplicaStates(), busy)
	}
	return nil, nil
}

// masterConn is the session's connection to its cluster's master, opened
// on first use. While a switchover holds the master's writes, or the
// master is down with automatic failover on, it waits for a master
// (awaitMaster) first.
func (s *Session) masterConn() (*BackendConn, error) {
	s.markMasterBusy()
	if s.master != nil {
		if s.env.topo.Current().Clusters[s.clusterIdx].WritesHeld == "" || s.inTransaction() {
			return s.master, nil
		}
		if err := s.awaitMaster(nil, nil); err != nil {
			return nil, err
		}
		_ = s.followTopology() // not in a transaction: drops a master the switchover replaced
		if s.master != nil {
			return s.master, nil
		}
	}
	if c := s.env.topo.Current().Clusters[s.clusterIdx]; c.WritesRefused != "" || c.WritesHeld != "" || (s.env.config().Health.AutoFailover && !c.Master.Up()) {
		if err := s.awaitMaster(nil, nil); err != nil {
			return nil, err
		}
	}
	m := s.cluster.Master
	bc, err := s.conn(m.Address)
	if err == errKilled || err == errInterrupted {
		return nil, err
	}
	if err != nil && !errors.Is(err, ErrPoolExhausted) && s.env.config().Health.AutoFailover {
		// The master may have just died: wait for the probes to say so
		// and a failover to replace it, then try the master of the
		// snapshot that ends the wait.
		if werr := s.awaitMaster(m, err); werr != nil {
			return nil, werr
		}
		m = s.cluster.Master
		bc, err = s.conn(m.Address)
		if err == errKilled || err == errInterrupted {
			return nil, err
		}
	}
	if errors.Is(err, ErrPoolExhausted) {
		return nil, protocol.ERConCount.New("Too many connections: sluice has no free connection to master %s of cluster %s: %v", m.Address, s.cluster.Name, err)
	}
	if err != nil {
		s.env.metrics.BackendErrs.WithLabelValues(m.Role.String()).Inc()
		s.log().Warn("master unreachable", zap.String("backend", m.Address), zap.Error(err))
		var se *protocol.SQLError
		if errors.As(err, &se) {
			return nil, protocol.CRCouldNotConnect.New("sluice: master %s of cluster %s refused the service account: %s", m.Address, s.cluster.Name, se.Message)
		}
		return nil, protocol.CRCouldNotConnect.New("sluice: cannot connect to master %s of cluster %s: %v", m.Address, s.cluster.Name, err)
	}
	s.master = bc
	return bc, nil
}

// hasApplied reports whether replica b had applied the session's last
// committed transaction when it was last probed (causal reads). The answer
// for the session's replica is kept until the session writes again or
// re-picks, so a read parses GTIDs at most once per probe round.
func (s *Session) hasApplied(b *health.Backend) bool {
	if s.appliedOn == b && s.appliedRound == s.env.topo.Round() {
		return true
	}
	st := b.Status()
	if st == nil {
		return false
	}
	have, err := health.ParseGTID(st.Flavor, st.AppliedGTID)
	if err != nil {
		return false
	}
	want, err := health.ParseGTID(st.Flavor, string(s.lastGTID))
	if err != nil || !have.Contains(want) {
		return false
	}
	s.appliedOn, s.appliedRound = b, s.env.topo.Round()
	return true
}

// sync replays the session state bc lacks: schema, multi-statement option
// and SET variables made since bc last caught up.
func (s *Session) sync(bc *BackendConn) error {
	if s.schema != "" && bc.schema != s.schema {
		if err := bc.simpleCommand(bc.command(protocol.ComInitDB, s.schema), protocol.ResponseSingle); err != nil {
			return err
		}
		bc.schema = s.schema
	}
	if bc.multiStmts != s.multiStmts {
		opt := protocol.OptionMultiStatementsOff
		if s.multiStmts {
			opt = protocol.OptionMultiStatementsOn
		}
		if err := bc.simpleCommand(append(bc.command(protocol.ComSetOption, ""), byte(opt), byte(opt>>8)), protocol.ResponseSingle); err != nil {
			return err
		}
		bc.multiStmts = s.multiStmts
	}
	// bc's SET statements must be a prefix of the session's; otherwise
	// they are another session's (or an older order of this one's): reset
	// and replay all. A read-only connection that now serves as a master
	// (its replica was promoted) starts afresh too: its replayed state
	// lacks the access mode assignments it skipped as a replica.
	replica := bc.backend.Role == health.RoleReplica
	same := len(bc.vars) <= len(s.vars) && (replica || !bc.readOnly) && !bc.tainted
	for i := 0; same && i < len(bc.vars); i++ {
		same = bc.vars[i] == s.vars[i].SQL
	}
	if !same {
		if !bc.reset(s.env.config().Proxy.ConnectTimeout.Duration) {
			bc.broken = true
			return fmt.Errorf("%w: COM_RESET_CONNECTION failed", protocol.ErrBackendIO)
		}
	}
	for i := len(bc.vars); i < len(s.vars); i++ {
		v := s.vars[i]
		if replica && v.Name == "transaction_read_only" {
			// A replica connection stays read-only whatever the session
			// chose; its own value is the master connection's.
			bc.vars = append(bc.vars, v.SQL)
			continue
		}
		if err := bc.simpleCommand(bc.command(protocol.ComQuery, v.SQL), protocol.ResponseResult); err != nil {
			var se *protocol.SQLError
			if !errors.As(err, &se) {
				return err
			}
			// The master took it, this server does not: stop replaying
			// it, so the session does not fail forever, and say which
			// server refused what.
			s.dropVar(v.Name)
			s.log().Warn("session variable not replayable", zap.String("variable", v.Name),
				zap.String("backend", bc.backend.Address), zap.Uint16("code", se.Code))
			return protocol.NewError(se.Code, "sluice could not apply the session's %s on %s: %s",
				v.Name, describe(bc), se.Message)
		}
		bc.vars = append(bc.vars, v.SQL)
	}
	if replica && !bc.readOnly {
		// A master connection that now serves a demoted server.
		if err := bc.setReadOnly(); err != nil {
			return err
		}
	}
	return s.beginIfPending(bc)
}

// dropIfBroken forgets and closes bc when it is broken.
func (s *Session) dropIfBroken(bc *BackendConn) {
	if bc == nil || !bc.broken {
		return
	}
	s.eachLeg(func(l *clusterLeg) {
		if l.master == bc {
			l.master = nil
		}
		if l.replica == bc {
			l.replica = nil
		}
	})
	s.forgetConn(bc)
	bc.discard()
}

// putBack returns bc to its pool; reset clears state that cannot be
// replayed first.
func (s *Session) putBack(bc *BackendConn, reset bool) {
	s.forgetConn(bc)
	if bc.pool == nil || s.pins&router.PinRole != 0 || s.xa {
		// A role set with SET ROLE survives COM_RESET_CONNECTION, and so
		// may a prepared XA branch: only closing the connection keeps
		// them from the next borrower.
		bc.discard()
		return
	}
	if reset {
		bc.pool.PutReset(bc)
	} else {
		bc.pool.Put(bc)
	}
}

// release returns the data connections of every leg to their pools.
func (s *Session) release(reset bool) {
	s.eachLeg(func(l *clusterLeg) {
		if l.master != nil {
			s.putBack(l.master, reset)
			l.master = nil
		}
		if l.replica != nil {
			s.putBack(l.replica, reset)
			l.replica = nil
		}
		l.txBegun = false
	})
}

// pinned reports whether the session must keep its connections: an open
// transaction (or autocommit off), state a statement left that cannot be
// replayed (router.Pin), an open cursor, or warnings of the last
// statement a SHOW WARNINGS may still ask about. Prepared statements do
// not pin (stmtcache.go).
func (s *Session) pinned() bool {
	return s.inTransaction() || s.pins != 0 || s.cursors != 0 || s.holdWarnings || s.replay.insertID != 0 || s.xa
}

// inTransaction reports whether bc's last status flags show an open
// transaction or autocommit off.
func (bc *BackendConn) inTransaction() bool {
	return bc.status&protocol.StatusInTrans != 0 || bc.status&protocol.StatusAutocommit == 0
}

// lostInTransaction is the ERR for a master connection that broke while the
// client had a transaction open on it.
func lostInTransaction(bc *BackendConn) *protocol.SQLError {
	return protocol.CRServerLost.New("Lost connection to master %s inside a transaction; the transaction was rolled back and this connection is closed",
		bc.backend.Address)
}

// describe names a backend connection's role and address for messages.
func describe(bc *BackendConn) string {
	if bc == nil {
		return "backend"
	}
	return bc.backend.Role.String() + " " + bc.backend.Address
}

// conn borrows a connection to the backend at addr for the session: with
// its pool key and loop task, waiting no longer than the session lives.
func (s *Session) conn(addr string) (*BackendConn, error) {
	bc, err := s.env.getConn(&s.cmd, addr, s.key, s.schema == "", s.task)
	if err != nil {
		if e := s.stopped(); e != nil {
			// The session or the statement was killed while it waited or
			// dialled: no fault of the backend's, which must not be
			// reported down.
			return nil, e
		}
	}
	return bc, err
}

// errKilled ends a session that was killed (KILL CONNECTION) or cut by a
// shutdown while a statement waited: its client connection is closed
// already, so the ERR, MariaDB's for a killed connection, mostly goes
// nowhere.
var errKilled = protocol.ERConnectionKilled.New("Connection was killed")

// getConn borrows a connection to the backend at addr. A pool that a
// reload replaced between the lookup and the borrow is looked up again; a
// backend the reload dropped is errBackendGone.
// t is the borrowing session's loop task (nil for none): the connection's
// waits go to its loop, and a borrow that has to wait or dial steps off
// the loop meanwhile.
func (e *Env) getConn(ctx context.Context, addr string, key poolKey, noSchema bool, t *evloop.Task) (*BackendConn, error) {
	p := e.pool(addr)
	for range 3 {
		if p == nil {
			return nil, fmt.Errorf("%s: %w", addr, errBackendGone)
		}
		bc, err := p.Get(ctx, key, noSchema, t)
		if !errors.Is(err, errPoolClosed) {
			if bc != nil && bc.lc != nil {
				bc.lc.Bind(t)
			}
			return bc, err
		}
		next := e.pool(addr)
		if next == p {
			return nil, err
		}
		p = next
	}
	return nil, fmt.Errorf("%s: %w", addr, errPoolClosed)
}

// beginIfPending starts the session's transaction on bc, the active
// cluster's master, when the transaction has not touched this cluster yet,
// and sets the transaction's savepoints there.
func (s *Session) beginIfPending(bc *BackendConn) error {
	if s.txBegin == "" || s.txBegun || bc != s.master {
		return nil
	}
	if err := bc.simpleCommand(bc.command(protocol.ComQuery, s.txBegin), protocol.ResponseResult); err != nil {
		return err
	}
	s.txBegun = true
	for _, sp := range s.txSavepoints {
		if err := bc.simpleCommand(bc.command(protocol.ComQuery, sp), protocol.ResponseResult); err != nil {
			return err
		}
	}
	return nil
}
