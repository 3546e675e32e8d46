package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/internal/evloop"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/shard"
)

// fallbackVersion is advertised when no master has been reached yet.
const fallbackVersion = "5.5.5-10.11.0-sluice"

// trackedVar is a session variable assignment the session made, replayed in
// order on every connection that serves it.
type trackedVar struct {
	router.SessionVar
}

// Session serves one client connection: login, then one command at a time.
// It holds at most one data connection to the master and one to a replica,
// opened lazily, and replays the client's session state (schema, SET
// variables, multi-statement option) onto whichever one serves a statement.
// A Session is owned by the goroutine running it.
type Session struct {
	// Handle holds what other goroutines may read or do: the id, the
	// client connection, the SHOW SESSIONS info, the drain state.
	Handle
	env *Env
	// task runs the session on an event loop; nil when a goroutine of its
	// own serves it. counted: the session is in the clients gauge.
	task    *evloop.Task
	counted bool
	// reauth is what the login left for COM_CHANGE_USER (it may hold an
	// auth-server connection); close closes it.
	reauth *auth.Reauth

	user string
	caps uint32 // the client's capabilities, limited to sluice's
	key  poolKey
	// clusterLeg points at the session's state towards the cluster its
	// current statement runs on: legs[clusterIdx]. legs has a leg per
	// cluster of the configuration (a fixed list: adding one needs a
	// restart); only the default cluster's is used without sharding.
	*clusterLeg
	legs []clusterLeg
	// txBegin is the client's BEGIN / START TRANSACTION text while a
	// transaction is open under sharding: it is sent to a cluster's master
	// when the transaction first touches that cluster. txWrites is the
	// cluster the transaction wrote to, -1 before its first write.
	txBegin  string
	txWrites int
	// pendingTxWrite is the cluster of the sharded write being run on the
	// ordinary path (-1: none); once it succeeds inside a transaction it
	// becomes txWrites. txSavepoints are the transaction's SAVEPOINT
	// statements, replayed on each cluster it reaches later.
	pendingTxWrite int
	txSavepoints   []string

	// diagFrom holds the diagnostics (warnings, errors) a SHOW WARNINGS
	// would show: the connection that ran the session's previous
	// statement, or an earlier one when the statements after it named no
	// table and raised nothing.
	diagFrom *BackendConn

	// addr is the client's IP address once addrKnown (clientAddr).
	addr      netip.Addr
	addrKnown bool

	schema     string
	lastStatus uint16 // status flags of the last final OK/EOF any backend sent
	vars       []trackedVar
	// pins are the sticky reasons (router.Pin) the session keeps its
	// connections; holdWarnings keeps the last one for SHOW WARNINGS.
	pins         router.Pin
	holdWarnings bool
	// xa: the session sent an XA statement. It keeps its connections
	// (XA START … XA PREPARE must run on one) and they are closed, never
	// pooled: one may hold a prepared branch, which makes every other
	// statement on it fail and which only a disconnect detaches for
	// another session's XA COMMIT.
	xa bool
	// lastInsertID and rowCount answer SELECT LAST_INSERT_ID() and SELECT
	// ROW_COUNT() from the session's last OK packets.
	lastInsertID uint64
	rowCount     int64
	// replay is what the session's SETs left beyond tracked variables
	// (setreplay.go).
	replay setReplay
	// aside makes replica picks use their own wheel position (work that
	// is not a client statement).
	aside      bool
	multiStmts bool

	stmts      map[uint32]*preparedStmt
	nextStmtID uint32
	// cursors counts the statements with an open cursor, each on the
	// backend connection that holds it: they pin the session.
	cursors int
	// stateH is vars' SET statements as one value, for prepared
	// statements' cache keys (Session.state); stateOK says it is current.
	stateH  unique.Handle[string]
	stateOK bool
	// freeStmts are closed statements kept for reuse by the next prepare.
	freeStmts []*preparedStmt
	scratch   []byte // reused for packets sluice rewrites or builds
	scratch2  []byte
	// shardPkt holds a statement rewritten for one physical table; args
	// and argText a prepared execution's parameters as shard key values.
	shardPkt []byte
	args     []shard.Value
	argTypes []shard.ParamType
	argText  []byte
	renamed  shard.Row

	// rec is what the current command recorded for metrics and the slow
	// log (metrics_session.go); cmdStart is when it was read (monoNow).
	rec      commandRecord
	cmdStart time.Duration
	// lims is the session's view of its user's [limits] (limits.go).
	lims sessionLimits
	// lex is how the server lexes the session's statements
	// (replicasafety.go).
	lex lexState
	// scoped is what the session knows of its connection-scoped values
	// (scoped.go).
	scoped scopedState
	// grants is what the session checks statements against; nil when
	// grants are not enforced (grants.go).
	grants *sessionGrants
	// cw is the session's part of the result cache (cache.go).
	cw cacheState
}

func newSession(env *Env, id uint32, nc net.Conn) *Session {
	c := protocol.NewLeanConn(nc)
	c.MaxPacket = int(env.config().Proxy.MaxAllowedPacket)
	s := &Session{
		Handle:         Handle{id: id, client: c},
		env:            env,
		stmts:          make(map[uint32]*preparedStmt),
		txWrites:       -1,
		pendingTxWrite: -1,
	}
	s.resetScoped()
	s.legs = make([]clusterLeg, len(env.cfg.Clusters))
	s.clusterLeg = &s.legs[0]
	s.info.idleSince.Store(int64(mono.Now()))
	return s
}

// log returns a logger with the session's fields. It is built when
// something is logged, not kept: a zap child logger costs kilobytes, and
// idle sessions must cost little (a few are logged per session, none per
// statement at info level).
func (s *Session) log() *zap.Logger {
	if s.user == "" {
		return s.env.log.With(zap.Uint32("conn_id", s.id), zap.Stringer("client", s.client.NetConn().RemoteAddr()))
	}
	return s.env.log.With(zap.Uint32("conn_id", s.id), zap.Stringer("client", s.client.NetConn().RemoteAddr()), zap.String("user", s.user))
}

// start logs the client in; it reports whether the session is to be
// served.
func (s *Session) start(ctx context.Context) bool {
	if err := s.login(ctx); err != nil {
		result := "error"
		if errors.Is(err, auth.ErrAccessDenied) {
			result = "denied"
		} else if errors.Is(err, errLoginBackoff) {
			result = "blocked"
		}
		s.env.metrics.Logins.WithLabelValues(result).Inc()
		if errors.Is(err, auth.ErrAuthServerUnreachable) {
			s.env.metrics.AuthUnreachable.Inc()
		}
		s.env.metrics.LoginFailed(err, s.client.SentErr)
		// s.log() carries the user once it is known; a failure before the
		// handshake response has none to log.
		s.log().Info("login failed", zap.Error(err))
		return false
	}
	s.env.metrics.Logins.WithLabelValues("ok").Inc()
	s.log().Info("client connected", zap.String("schema", s.schema))
	s.afterCommand()
	s.client.Idle()
	return true
}

// serveAll serves the client's commands until it leaves (start is when it
// connected).
func (s *Session) serveAll(start time.Time) {
	s.logEnd(start, s.serve())
}

// logEnd logs the end of the session. It is a function of its own so its
// log fields are not in serveAll's frame, which stays on the stack while the
// session idles.
func (s *Session) logEnd(start time.Time, err error) {
	s.log().Info("client disconnected", zap.Duration("duration", time.Since(start)), zap.NamedError("reason", err))
}

// serve runs the command loop until the client quits or fails.
func (s *Session) serve() error {
	for {
		if s.idleForDrain() {
			return errShutdown
		}
		s.client.ResetSeq()
		p, err := s.readCommand()
		if s.awake() {
			return errShutdown
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return err // idle_timeout
			}
			if errors.Is(err, protocol.ErrPacketTooLarge) || errors.Is(err, protocol.ErrPacketOutOfOrder) {
				_ = s.client.WriteErr(protocol.ToSQLError(err))
				return err
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(p) == 0 {
			if err := s.client.WriteErr(protocol.ERMalformedPacket.New("Malformed communication packet: empty command")); err != nil {
				return err
			}
			continue
		}
		s.pendingTxWrite = -1
		s.cmd.reset()
		s.cmdStart = mono.Now()
		ok, err := s.admit(p[0])
		if ok {
			timed := s.armQueryTimer()
			err = s.dispatch(p)
			if timed || s.lims.ruleTimed {
				s.disarmQueryTimer()
			}
		}
		if err != nil {
			if errors.Is(err, errQuit) {
				return nil
			}
			return err
		}
		s.finishCommand(p, s.cmdStart)
		s.afterCommand()
		// Waiting for the next command holds no write buffer.
		s.client.Idle()
	}
}

// close ends the session: data connections go back to their pools, reset
// when the session left state on them.
func (s *Session) close() {
	s.releaseUser()
	s.reauth.Close()
	if s.lims.queryTimer != nil {
		s.lims.queryTimer.Stop()
	}
	s.release(s.inTransaction() || s.pins != 0 || s.cursors != 0 || s.replay.insertID != 0)
	s.endWrites(true)
	_ = s.Close()
}

// NewSession returns the session of client connection nc, numbered id
// (Registry.NewID). The server then registers its Handle, calls Start and
// serves it with ServeAll or ServeOn, and calls End once it is over.
func NewSession(env *Env, id uint32, nc net.Conn) *Session { return newSession(env, id, nc) }

// Start logs the client in; it reports whether the session is to be
// served.
func (s *Session) Start(ctx context.Context) bool { return s.start(ctx) }

// ServeAll serves the client's commands until it leaves (start is when it
// connected).
func (s *Session) ServeAll(start time.Time) { s.serveAll(start) }

// ServeOn serves the session as task t of an event loop, its client
// connection lc bound to t.
func (s *Session) ServeOn(t *evloop.Task, lc *evloop.Conn, start time.Time) {
	s.task = t
	lc.Bind(t)
	s.serveAll(start)
}

// End releases what the session holds once it is over.
func (s *Session) End() { s.close() }

// Log is a logger with the session's fields.
func (s *Session) Log() *zap.Logger { return s.log() }

// NetConn is the client connection (for the server to hand the session to
// an event loop).
func (s *Session) NetConn() net.Conn { return s.client.NetConn() }

// sessionLimits is a Session's view of its user's limits, owned by the
// session's goroutine except where noted.
type sessionLimits struct {
	// set and lim are the limit set the session resolved and its user's
	// entry in it; state is its user's shared state, counted in
	// state.conns while held is true.
	set   *limitSet
	lim   *userLimits
	state *userState
	held  bool
	// refusal is the ERR 1226 of the session's user and rate, made at
	// the first refusal of lim.
	refusal    *protocol.SQLError
	refusalFor *userLimits
	// waitTimer wakes a statement whose slot has come; made at the
	// session's first wait.
	waitTimer *time.Timer
	// idleArmed: a read deadline for idle_timeout is set, for idleAt
	// (monoNow time); lastActive is when the session last began to wait
	// for a command.
	idleArmed  bool
	idleAt     time.Duration
	lastActive time.Duration

	// The query timer (made when the session first runs a statement
	// under a query_timeout) calls queryTimedOut on a goroutine of its
	// own. armedAt (monoNow when armed, 0 when disarmed) and armedFor
	// tell it whether the statement it fired for still runs; timedOut
	// makes the session's relay replace the backend's ERR 1317 with ERR
	// 3024.
	queryTimer *time.Timer
	armedAt    atomic.Int64
	armedFor   atomic.Int64
	timedOut   atomic.Bool
	// ruleTimed: a query rule's timeout armed the timer for the command
	// (rules.go).
	ruleTimed bool
}

// acquireUser counts the session's client connection against user's
// max_connections, releasing the one it held for another user
// (COM_CHANGE_USER). Over the limit it returns ERR 1203 and holds nothing.
func (s *Session) acquireUser(user string) *protocol.SQLError {
	set := s.env.limits.Load()
	lim := set.forUser(user)
	st := s.env.users.get(user)
	if s.lims.held && s.lims.state == st {
		s.lims.set, s.lims.lim = set, lim
		return nil
	}
	n := st.conns.Add(1)
	if lim.maxConns > 0 && n > lim.maxConns {
		st.conns.Add(-1)
		return protocol.ERTooManyUserConnection.New("User '%s' has exceeded the 'max_connections' resource: sluice [limits] max_connections = %d", user, lim.maxConns)
	}
	s.releaseUser()
	s.lims.set, s.lims.lim, s.lims.state, s.lims.held = set, lim, st, true
	return nil
}

// releaseUser gives back the connection acquireUser counted.
func (s *Session) releaseUser() {
	if s.lims.held {
		s.lims.state.conns.Add(-1)
		s.lims.held = false
	}
}

// currentLimits returns the session's limits as of the running
// configuration: one atomic load unless a reload replaced them.
func (s *Session) currentLimits() *userLimits {
	set := s.env.limits.Load()
	if set != s.lims.set || s.lims.lim == nil {
		s.lims.set, s.lims.lim = set, set.forUser(s.user)
		if s.lims.state == nil || s.lims.state.name != s.user {
			s.lims.state = s.env.users.get(s.user)
		}
	}
	return s.lims.lim
}

// countsForRate reports whether client command cmd counts against the
// user's statement rate (see the package comment above).
func countsForRate(cmd byte) bool {
	switch cmd {
	case protocol.ComQuit, protocol.ComPing, protocol.ComStmtClose, protocol.ComStmtSendLongData, protocol.ComChangeUser:
		return false
	}
	return true
}

// admit applies the user's statement rate to client command cmd, waiting
// for the statement's slot when the bucket is over. It returns false when
// the statement is refused; the client then has ERR 1226 (err is a failed
// write to the client).
func (s *Session) admit(cmd byte) (bool, error) {
	lim := s.currentLimits()
	p := lim.rate
	if p == nil || !countsForRate(cmd) {
		return true, nil
	}
	b := &s.lims.state.bucket
	wait, err := b.Take(int64(mono.Now()), p)
	if err == nil && wait == 0 {
		return true, nil
	}
	if err != nil {
		lim.refused.Inc()
		if s.lims.refusalFor != lim {
			s.lims.refusal = protocol.ERUserLimitReached.New("User '%s' has exceeded the 'max_statements_per_second' resource (current value: %d)", s.user, p.PerSecond())
			s.lims.refusalFor = lim
		}
		if ce := s.log(); ce.Core().Enabled(zap.DebugLevel) {
			ce.Debug("statement refused by the rate limit", zap.Int64("max_statements_per_second", p.PerSecond()), zap.Error(err))
		}
		return false, s.client.WriteErr(s.lims.refusal)
	}
	lim.delayed.Inc()
	defer b.Done()
	// A timer wait: off the loop, so the loop's other sessions go on.
	if s.task.Detach() {
		defer s.task.Attach()
	}
	t := s.lims.waitTimer
	if t == nil {
		t = time.NewTimer(time.Duration(wait))
		s.lims.waitTimer = t
	} else {
		t.Reset(time.Duration(wait))
	}
	select {
	case <-t.C:
	case <-s.cmd.Done():
		// Killed (the session or the statement) while it waited: the
		// statement does not run.
		t.Stop()
		if e := s.stopped(); e == errInterrupted {
			return false, s.client.WriteErr(e)
		}
		return false, errKilled
	}
	return true, nil
}

// readCommand waits for the client's next command under the user's
// idle_timeout. Setting a read deadline costs about as much as the rest of
// a short statement's glue, so it is not set per command: a deadline is
// kept while it is no more than an eighth of the timeout early, and one
// that fires early while nothing of a command has arrived is moved to the
// true end of the idle time and the wait goes on. A timeout that ends the
// wait is returned wrapped with the reason; it wraps
// os.ErrDeadlineExceeded.
func (s *Session) readCommand() ([]byte, error) {
	d := s.currentLimits().idleTimeout
	l := &s.lims
	if d <= 0 {
		if l.idleArmed {
			_ = s.client.SetReadDeadline(time.Time{})
			l.idleArmed = false
		}
		if err := s.client.Await(); err != nil {
			return nil, err
		}
		return s.client.ReadPacket()
	}
	now := mono.Now()
	l.lastActive = now
	if want := now + d; !l.idleArmed || l.idleAt > want || l.idleAt < want-d/8 {
		_ = s.client.SetReadDeadline(time.Now().Add(d))
		l.idleArmed, l.idleAt = true, want
	}
	for {
		// Awaiting here, not inside ReadPacket, keeps the idle wait's
		// frames few: the stack an idle session holds is what they use.
		err := s.client.Await()
		var p []byte
		if err == nil {
			p, err = s.client.ReadPacket()
		}
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return p, err
		}
		left := l.lastActive + d - mono.Now()
		if left <= 0 || !s.client.AwaitingCommand() {
			return nil, fmt.Errorf("idle for longer than idle_timeout %v: %w", d, err)
		}
		_ = s.client.SetReadDeadline(time.Now().Add(left))
		l.idleAt = mono.Now() + left
	}
}

// disarmIdle clears the idle deadline before the session reads more than a
// command from the client (LOAD DATA LOCAL INFILE streams a file), and
// notes that a login exchange replaced it (COM_CHANGE_USER).
func (s *Session) disarmIdle() {
	if s.lims.idleArmed {
		_ = s.client.SetReadDeadline(time.Time{})
		s.lims.idleArmed = false
	}
}

// armQueryTimer starts the query timer for the command about to run when
// the user has a query_timeout; it reports whether it did.
func (s *Session) armQueryTimer() bool {
	d := s.lims.lim.queryTimeout
	if d <= 0 {
		return false
	}
	s.armQueryTimerFor(d)
	return true
}

// armQueryTimerFor (re)starts the query timer to fire d from now.
func (s *Session) armQueryTimerFor(d time.Duration) {
	s.lims.timedOut.Store(false)
	s.lims.armedFor.Store(int64(d))
	s.lims.armedAt.Store(int64(mono.Now()))
	if s.lims.queryTimer == nil {
		s.client.ReplaceErr = s.replaceInterrupted
		s.lims.queryTimer = time.AfterFunc(d, s.queryTimedOut)
	} else {
		s.lims.queryTimer.Reset(d)
	}
}

// disarmQueryTimer stops the query timer after the command.
func (s *Session) disarmQueryTimer() {
	s.lims.ruleTimed = false
	s.lims.armedAt.Store(0)
	s.lims.queryTimer.Stop()
	s.lims.timedOut.Store(false)
}

// queryTimedOut runs on the query timer's goroutine: when the statement it
// was armed for still runs past its query_timeout, it kills it on its
// backend (KILL QUERY over a connection of its own). The session's relay
// then turns the backend's ERR 1317 into ERR 3024.
func (s *Session) queryTimedOut() {
	at, d := s.lims.armedAt.Load(), s.lims.armedFor.Load()
	if at == 0 || int64(mono.Now())-at < d {
		return // a late run for a statement that ended
	}
	run := s.info.running.Load()
	if run == nil {
		return // between backends: nothing runs to be killed
	}
	s.lims.timedOut.Store(true)
	s.env.queryTimeouts.Inc()
	err := s.env.killBackendQuery(run, func() bool {
		return s.info.running.Load() == run && s.lims.armedAt.Load() == at
	})
	fields := []zap.Field{zap.Uint32("conn_id", s.id), zap.String("backend", run.pool.addr),
		zap.Uint32("thread_id", run.threadID), zap.Duration("query_timeout", time.Duration(d))}
	if u := s.info.user.Load(); u != nil {
		fields = append(fields, zap.String("user", *u))
	}
	if err != nil {
		s.env.log.Warn("query_timeout: cannot kill the statement", append(fields, zap.Error(err))...)
		return
	}
	s.env.log.Info("query_timeout: statement killed on its backend", fields...)
}

// replaceInterrupted is the client connection's ReplaceErr once the session
// has a query timer: the ERR 1317 of a statement the timer killed becomes
// ERR 3024, as MySQL reports max_execution_time.
func (s *Session) replaceInterrupted(code uint16) *protocol.SQLError {
	if code != protocol.ERQueryInterrupted.Code || !s.lims.timedOut.Load() {
		return nil
	}
	return errQueryTimeout
}

// errQueryTimeout is what a client gets for a statement killed for its
// query_timeout (MySQL's ER_QUERY_TIMEOUT).
var errQueryTimeout = protocol.ERQueryTimeout.New("Query execution was interrupted, maximum statement execution time exceeded")

// idleForDrain publishes that the session waits for its next command, and
// reports whether it should end instead: the Server is draining and no
// transaction is open. Storing the state before loading the flag, while
// Shutdown sets the flag before it reads the states, means either this
// check or Shutdown's sees the other.
func (s *Session) idleForDrain() bool {
	st := drainIdle
	if s.txOpen() {
		st = drainIdleTx
	}
	s.drain.Store(st)
	return st == drainIdle && s.env.draining.Load()
}

// awake marks the session busy again after the wait for a command; it
// reports whether Shutdown closed the session meanwhile, in which case
// whatever was read is dropped unanswered, as by a server that shut down.
func (s *Session) awake() bool {
	return s.drain.Swap(drainBusy) == drainClosed
}

// txOpen reports whether a transaction is open on a master the session
// holds (the server's in-transaction flag), or started under sharding and
// not yet sent anywhere. Autocommit off without a transaction open does
// not count: such a session can be closed between statements.
func (s *Session) txOpen() bool {
	if s.txBegin != "" {
		return true
	}
	if s.master != nil && s.master.status&protocol.StatusInTrans != 0 {
		return true
	}
	if len(s.legs) == 1 {
		return false // the one leg is the active one
	}
	for i := range s.legs {
		if m := s.legs[i].master; m != nil && m.status&protocol.StatusInTrans != 0 {
			return true
		}
	}
	return false
}

// commandCtx is the context of the command a session serves. It ends for
// good when the session is killed (KILL CONNECTION, a shutdown's cut) or
// ends, and for the command alone on KILL QUERY. Pool waits (and dials),
// the wait for a master and the rate limit's wait watch it. A server that
// closes ends it too: Server.Close kills every registered session.
//
// It is one value per session, not derived from the server's context: a
// derived one would cost every idle session a few hundred bytes (its own
// cancel context and the parent's map entry). A command costs two atomic
// operations (reset, finish) and no allocation: the Done channel is made
// when a wait first asks for it and kept until an ending closes it. Its
// methods are safe for concurrent use (KILL comes from other goroutines).
// Whether a command is being served at all is the session's drain state
// (Handle.busy), which the serve loop keeps anyway.
type commandCtx struct {
	// state is gen<<ctxGenShift | the ctx* flags. gen numbers the
	// commands, so an interruption meant for one never ends the next.
	state atomic.Uint64
	// mu guards done and doneClosed.
	mu         sync.Mutex
	done       chan struct{}
	doneClosed bool
}

const (
	ctxEnded    = 1 << iota // the command's context ended
	ctxKilled               // the session is over: reset keeps ctxEnded
	ctxGenShift = iota
)

// closedChan is the Done channel of a context that ended before anything
// asked for its channel.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// errInterrupted is what a command's context ends with on KILL QUERY, and
// MariaDB's answer to the statement.
var errInterrupted = protocol.ERQueryInterrupted.New("Query execution was interrupted")

// Deadline is none: waits carry their own timeouts.
func (c *commandCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

// Value holds nothing.
func (c *commandCtx) Value(any) any { return nil }

// Done is closed when the command ends.
func (c *commandCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.state.Load()&ctxEnded != 0 {
			c.done, c.doneClosed = closedChan, true
		} else {
			c.done = make(chan struct{})
		}
	}
	return c.done
}

// Err is context.Canceled once the command ended, nil before.
func (c *commandCtx) Err() error {
	if c.state.Load()&ctxEnded != 0 {
		return context.Canceled
	}
	return nil
}

// kill ends the context for good: the session is over.
func (c *commandCtx) kill() {
	c.state.Or(ctxEnded | ctxKilled)
	c.closeDone()
}

// interrupt ends command gen (KILL QUERY); a later command is left alone.
func (c *commandCtx) interrupt(gen uint64) {
	for {
		old := c.state.Load()
		if old>>ctxGenShift != gen || old&ctxEnded != 0 {
			return
		}
		if c.state.CompareAndSwap(old, old|ctxEnded) {
			break
		}
	}
	c.closeDone()
}

// closeDone closes the Done channel of a context that ended, once.
func (c *commandCtx) closeDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load()&ctxEnded == 0 || c.doneClosed {
		return // a reset came first: the ended command is over anyway
	}
	if c.done != nil {
		close(c.done)
	}
	c.done, c.doneClosed = closedChan, true
}

// generation is the number of the last command.
func (c *commandCtx) generation() uint64 { return c.state.Load() >> ctxGenShift }

// reset starts the next command (one atomic add: a command's cost): a
// context a KILL QUERY ended is usable again, a killed session's stays
// ended.
func (c *commandCtx) reset() {
	old := c.state.Add(1 << ctxGenShift)
	if old&(ctxEnded|ctxKilled) != ctxEnded {
		return
	}
	// The last command was interrupted: only this goroutine clears it, and
	// an interruption of the new command cannot come before the clear
	// (it would find ctxEnded set and do nothing), so clear under mu.
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		st := c.state.Load()
		if st&ctxKilled != 0 {
			return // killed meanwhile: stays ended
		}
		if c.state.CompareAndSwap(st, st&^ctxEnded) {
			break
		}
	}
	c.done, c.doneClosed = nil, false
}

// stopped is the ERR for a command whose context ended: the session was
// killed (errKilled) or the statement was (errInterrupted); nil while it
// runs.
func (s *Session) stopped() *protocol.SQLError {
	st := s.cmd.state.Load()
	switch {
	case st&ctxKilled != 0:
		return errKilled
	case st&ctxEnded != 0:
		return errInterrupted
	}
	return nil
}
