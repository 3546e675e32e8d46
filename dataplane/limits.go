package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/policy"
	"github.com/sluice-proxy/sluice/protocol"
)

// Per-user limits ([limits] and [[limits.user]]): connections per user, the
// idle and query timeouts, and the statement rate ("thick-thin pipe").
//
// A limitSet is the limits of one configuration resolved for the data
// plane; Server.limits holds the current one and Reload replaces it. A
// session keeps the set and its user's entry it resolved, and compares the
// set's pointer per command: a reload reaches every session at its next
// command, at the cost of one atomic load for everyone else.
//
// What a user's sessions share lives in a userState, one per user name,
// made at the user's first login and kept while sluice runs (users are the
// auth backend's, a bounded set): the connection count and the rate
// bucket. Reloads replace limits, never userStates, so bucket state
// survives them.
//
// Which commands count against the rate: every command a backend or sluice
// answers (COM_QUERY, COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_FETCH,
// COM_STMT_RESET, COM_INIT_DB, COM_FIELD_LIST, COM_STATISTICS,
// COM_SET_OPTION, COM_RESET_CONNECTION). COM_PING and COM_QUIT do not;
// nor do COM_STMT_CLOSE and COM_STMT_SEND_LONG_DATA, which have no answer
// that could carry a refusal, nor COM_CHANGE_USER, which is a login
// (max_connections applies to it).

// limitSet is one configuration's limits. It is immutable.
type limitSet struct {
	def   *userLimits
	users map[string]*userLimits
}

// userLimits are the limits of one [[limits.user]] entry, or of [limits]
// for users without one. Immutable.
type userLimits struct {
	maxConns     int64
	idleTimeout  time.Duration
	queryTimeout time.Duration
	// rate is nil when the user's statements are not rate limited.
	rate *policy.Rate
	// label is the user label of the limit metrics: the entry's name, or
	// "default" (metric cardinality stays bounded by the file).
	label string
	// delayed and refused count statements the rate made wait or refused.
	delayed, refused prometheus.Counter
}

// newLimitSet resolves cfg's [limits] for the data plane.
func (e *Env) newLimitSet(cfg *conf.Config) *limitSet {
	mk := func(v *conf.LimitValues, label string) *userLimits {
		return &userLimits{
			maxConns:     int64(v.MaxConnections),
			idleTimeout:  v.IdleTimeout.Duration,
			queryTimeout: v.QueryTimeout.Duration,
			rate:         policy.NewRate(v.MaxStatementsPerSecond, v.Burst, v.MaxQueued, v.QueueTimeout.Duration),
			label:        label,
			delayed:      e.rateLimited.WithLabelValues(label, "delayed"),
			refused:      e.rateLimited.WithLabelValues(label, "refused"),
		}
	}
	set := &limitSet{def: mk(&cfg.Limits.LimitValues, "default"), users: make(map[string]*userLimits, len(cfg.Limits.Users))}
	for i := range cfg.Limits.Users {
		u := &cfg.Limits.Users[i]
		set.users[u.Name] = mk(&u.LimitValues, u.Name)
	}
	return set
}

// forUser returns user's limits.
func (set *limitSet) forUser(user string) *userLimits {
	if l, ok := set.users[user]; ok {
		return l
	}
	return set.def
}

// userState is what all sessions of one user share. Its fields are atomics,
// safe for concurrent use.
type userState struct {
	name string
	// conns counts the user's logged-in client connections.
	conns atomic.Int64
	// bucket is the user's statement rate state.
	bucket policy.Bucket
}

// userStates holds the userState of every user that logged in.
type userStates struct {
	mu sync.Mutex
	m  map[string]*userState
}

// get returns user's state, making it on first use.
func (u *userStates) get(user string) *userState {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = make(map[string]*userState)
	}
	st := u.m[user]
	if st == nil {
		st = &userState{name: user}
		u.m[user] = st
	}
	return st
}

// initLimits builds the limit metrics and the running limits of cfg; New
// calls it.
func (e *Env) initLimits(cfg *conf.Config) {
	e.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_rate_limited_statements_total",
		Help: "Statements the per-user statement rate (max_statements_per_second) made wait (result=delayed) or refused with ERR 1226 (result=refused), by [[limits.user]] name or \"default\".",
	}, []string{"user", "result"})
	e.queryTimeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_query_timeouts_total",
		Help: "Statements killed on their backend because they ran past their user's query_timeout.",
	})
	e.metrics.Reg.MustRegister(e.rateLimited, e.queryTimeouts)
	e.limits.Store(e.newLimitSet(cfg))
}

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
	case <-s.env.ctx.Done():
		t.Stop()
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
		return s.client.ReadPacket()
	}
	now := mono.Now()
	l.lastActive = now
	if want := now + d; !l.idleArmed || l.idleAt > want || l.idleAt < want-d/8 {
		_ = s.client.SetReadDeadline(time.Now().Add(d))
		l.idleArmed, l.idleAt = true, want
	}
	for {
		p, err := s.client.ReadPacket()
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
	s.lims.timedOut.Store(false)
	s.lims.armedFor.Store(int64(d))
	s.lims.armedAt.Store(int64(mono.Now()))
	if s.lims.queryTimer == nil {
		s.client.ReplaceErr = s.replaceInterrupted
		s.lims.queryTimer = time.AfterFunc(d, s.queryTimedOut)
	} else {
		s.lims.queryTimer.Reset(d)
	}
	return true
}

// disarmQueryTimer stops the query timer after the command.
func (s *Session) disarmQueryTimer() {
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

// killBackendQuery kills the statement the backend thread run is running:
// KILL QUERY sent on a connection of its own (the session's is busy),
// logged in with run's pool's service account. still is asked after the
// login, and the kill is skipped unless it is true: the statement may have
// ended meanwhile and the connection gone to another session. A refusal
// of the KILL by the server is returned as its bare *protocol.SQLError.
func (e *Env) killBackendQuery(run *backendIdent, still func() bool) error {
	p := run.pool
	d := net.Dialer{Timeout: p.dialTimeout}
	ctx, cancel := context.WithTimeout(e.ctx, p.dialTimeout+e.config().Health.Timeout.Duration)
	defer cancel()
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return fmt.Errorf("cannot connect to %s: %w", p.addr, err)
	}
	defer nc.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	c := protocol.NewConn(nc)
	c.LenientSeq = true
	if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: p.user, Password: p.password,
		Capabilities: protocol.BackendCapabilities, TLS: p.tls, TLSRequired: p.tlsRequired}); err != nil {
		return fmt.Errorf("cannot log in to %s: %w", p.addr, err)
	}
	if !still() {
		return nil
	}
	c.ResetSeq()
	q := append([]byte{protocol.ComQuery}, "KILL QUERY "+strconv.FormatUint(uint64(run.threadID), 10)...)
	if err := c.WritePacketFlush(q); err != nil {
		return fmt.Errorf("KILL QUERY on %s: %w", p.addr, err)
	}
	if _, err := protocol.ReadResponse(c, protocol.ResponseResult); err != nil {
		var se *protocol.SQLError
		if errors.As(err, &se) {
			return se // the server's own answer, as it is
		}
		return fmt.Errorf("KILL QUERY (thread %d on %s): %w", run.threadID, p.addr, err)
	}
	return nil
}
