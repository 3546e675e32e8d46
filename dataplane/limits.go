package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-proxy/sluice/conf"
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

// killBackendQuery kills the statement the backend thread run is running:
// KILL QUERY sent on a connection of its own (the session's is busy),
// logged in with run's pool's service account. still is asked after the
// login, and the kill is skipped unless it is true: the statement may have
// ended meanwhile and the connection gone to another session. A refusal
// of the KILL by the server is returned as its bare *protocol.SQLError.
func (e *Env) killBackendQuery(run *backendIdent, still func() bool) error {
	p := run.pool
	ctx, cancel := context.WithTimeout(e.ctx, p.dialTimeout+e.config().Health.Timeout.Duration)
	defer cancel()
	nc, c, err := p.dialService(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
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

// dialService opens a connection of its own to p's backend, logged in with
// p's service account, for work beside the pooled data connections (a
// KILL QUERY, a mirror worker). ctx bounds the dial and the login; the
// connection keeps ctx's deadline, which the caller moves as it needs.
func (p *Pool) dialService(ctx context.Context) (net.Conn, *protocol.Conn, error) {
	d := net.Dialer{Timeout: p.dialTimeout}
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot connect to %s: %w", p.addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	c := protocol.NewConn(nc)
	c.LenientSeq = true
	if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: p.user, Password: p.password,
		Capabilities: protocol.BackendCapabilities, TLS: p.tls, TLSRequired: p.tlsRequired}); err != nil {
		_ = nc.Close()
		return nil, nil, fmt.Errorf("cannot log in to %s: %w", p.addr, err)
	}
	return nc, c, nil
}
