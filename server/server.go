// Package server is sluice's composition root: it builds the data plane's
// Env (package dataplane), the admin port (package admin) and the health
// prober from the configuration, owns the client and metrics listeners,
// and glues reloads, failovers, switchovers and graceful shutdown to them.
// It grows no session, protocol or parsing code of its own; nothing but
// cmd imports it.
//
// A Server is safe for concurrent use.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/admin"
	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/dataplane"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/evloop"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/shard"
)

// Server accepts client connections and serves them: the composition
// root that builds the data plane's Env, the admin port, the prober and
// the failover glue, and owns the listeners. It is safe for concurrent
// use.
type Server struct {
	// env is what the sessions share (dataplane.Env); the Server
	// replaces its live parts on reload.
	env *dataplane.Env
	// loops are the event loops sessions run on ([proxy] event_loop),
	// started by Start; nil without. nextLoop spreads sessions over them.
	loops    []*evloop.Loop
	nextLoop atomic.Uint32
	// cfg is the configuration the Server started with: read it only for
	// settings that need a restart (listeners, TLS, cluster names,
	// masters and accounts), which a reload never changes. Live settings
	// come from config().
	cfg *conf.Config
	log *zap.Logger
	// auth delegates to the authenticator of the live configuration.
	auth *liveAuth
	// grants caches accounts' privileges ([auth] enforce_grants).
	grants *auth.GrantsCache
	topo   *health.Topology
	// shardKeys caches what the masters taught about key columns' collations.
	shardKeys shardKeyState
	reload    reloader
	// mirror runs [auth] mirror_schema in the background (mirror.go).
	mirror *schemaMirror
	// fw keeps the firewall's allowlists in state_dir (firewall.go).
	fw *firewallStore

	ln          net.Listener
	metricsAddr net.Addr
	metrics     *observe.Metrics
	// stateChanges counts backend state changes by cluster, backend and
	// new state.
	stateChanges *prometheus.CounterVec
	failover     *failovers

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// The admin port (admin.go): its listener and server; events and
	// digests are what it shows.
	adminLn net.Listener
	admin   *admin.Port
	events  observe.Events
	digests *observe.Digests

	// Graceful shutdown (shutdown.go): unready turns /readyz to 503;
	// logins hands memory back to the OS after a storm of logins.
	logins loginBurst
	// sessionEnded wakes Shutdown when a session ends while draining.
	unready      atomic.Bool
	sessionEnded chan struct{}

	// fleet is the membership in a fleet of sluices ([fleet], fleet.go).
	fleet fleetState
	// binlog runs the result cache's binlog tailers ([cache]
	// binlog_invalidation, binlog.go).
	binlog binlogTailers
}

// New builds a Server from a validated configuration.
func New(cfg *conf.Config, log *zap.Logger) (*Server, error) {
	if len(cfg.Clusters) == 0 {
		return nil, errors.New("proxy: no cluster configured")
	}
	grantsCache := &auth.GrantsCache{}
	a, err := newAuthenticator(cfg, grantsCache)
	if err != nil {
		return nil, err
	}
	stls, err := serverTLS(cfg.Proxy.TLSCert, cfg.Proxy.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	fw, err := loadFirewall(cfg.Proxy.StateDir, log)
	if err != nil {
		return nil, err
	}
	if cfg.Firewall.On() && cfg.Proxy.StateDir == "" {
		log.Warn("the firewall learns or enforces without proxy.state_dir: its allowlists are lost at restart")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		fw:      fw,
		cfg:     cfg,
		log:     log,
		auth:    &liveAuth{},
		topo:    health.NewTopology(cfg),
		ctx:     ctx,
		cancel:  cancel,
		metrics: observe.NewMetrics(),
		digests: observe.NewDigests(),
		grants:  grantsCache,

		sessionEnded: make(chan struct{}, 1),
	}
	s.stateChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_backend_state_changes_total",
		Help: "Backend state changes (up, lagging, down, fenced, offline), by cluster, backend and the new state.",
	}, []string{"cluster", "backend", "to"})
	s.metrics.Reg.MustRegister(s.stateChanges)
	s.auth.cur.Store(&a)
	configureGrants(s.grants, cfg)
	s.mirror = newSchemaMirror(s)
	s.env, err = dataplane.NewEnv(cfg, dataplane.Options{Log: log, Ctx: ctx, Host: host{s}, Auth: s.auth, Topo: s.topo,
		Metrics: s.metrics, Digests: s.digests, TLS: stls, Grants: s.grants, SchemaChanged: s.mirror.request,
		Firewall: fw.allow})
	if err != nil {
		cancel()
		return nil, err
	}
	s.failover = newFailovers(s)
	// Pools lend for the roles of a new snapshot before sessions see it.
	s.topo.OnPublish = s.followSnapshot
	for _, cc := range cfg.Clusters {
		if cc.Balance != health.BalanceRoundRobin {
			continue
		}
		for _, r := range cc.Replicas {
			if r.Weight != 1 {
				log.Warn("replica weights are ignored with balance = \"round-robin\"; use \"weighted\"",
					zap.String("cluster", cc.Name), zap.String("backend", r.Address), zap.Int("weight", r.Weight))
			}
		}
	}
	s.initMetrics()
	s.initBinlogMetrics()
	return s, nil
}

// host is the Server as the data plane calls back into it (dataplane.Host).
type host struct{ s *Server }

func (h host) BackendStateChanged(b *health.Backend, from, to health.State, reason string) {
	h.s.backendStateChanged(b, from, to, reason)
}

func (h host) RefuseAdminOnDataPort(client string) *protocol.SQLError {
	return h.s.refuseAdminOnDataPort(client)
}

// config is the running configuration (dataplane.Env.Config).
func (srv *Server) config() *conf.Config { return srv.env.Config() }

// Config is the running configuration.
func (srv *Server) Config() *conf.Config { return srv.env.Config() }

// pool is the pool of the backend at addr, nil when there is none.
func (srv *Server) pool(addr string) *dataplane.Pool { return srv.env.Pool(addr) }

// shards are the sharding rules in force, nil when there never were any.
func (srv *Server) shards() *shard.Rules { return srv.env.Shards() }

// Topology returns the live topology (for tests and the admin port).
func (srv *Server) Topology() *health.Topology { return srv.topo }

// Listen binds the client listener.
func (srv *Server) Listen() error {
	ln, err := net.Listen("tcp", srv.cfg.Proxy.Listen)
	if err != nil {
		return fmt.Errorf("proxy: listen %s: %w", srv.cfg.Proxy.Listen, err)
	}
	srv.ln = ln
	return nil
}

// Addr is the bound client address.
func (srv *Server) Addr() net.Addr { return srv.ln.Addr() }

// MetricsAddr is the bound metrics address, nil when metrics are off.
func (srv *Server) MetricsAddr() net.Addr { return srv.metricsAddr }

// Start binds the listeners and serves in the background, with the health
// prober.
func (srv *Server) Start() error {
	started := time.Now()
	if n := srv.cfg.Proxy.Threads; n > 0 {
		// The proxy owns its process: threads sets how many OS threads
		// run Go code at once for all of it.
		fixProcs(n)
	}
	if err := srv.Listen(); err != nil {
		return err
	}
	if a := srv.cfg.Proxy.MetricsListen; a != "" {
		addr, err := srv.serveMetrics(srv.ctx, a)
		if err != nil {
			srv.ln.Close()
			return fmt.Errorf("proxy: metrics_listen %s: %w", a, err)
		}
		srv.metricsAddr = addr
	}
	if err := srv.failover.recover(); err != nil {
		srv.ln.Close()
		return fmt.Errorf("proxy: %w", err)
	}
	if err := srv.startAdmin(); err != nil {
		srv.ln.Close()
		srv.cancel()
		return err
	}
	if err := srv.startFleet(started); err != nil {
		srv.ln.Close()
		srv.cancel()
		return err
	}
	srv.wg.Add(1)
	go func() { defer srv.wg.Done(); srv.fw.run(srv.ctx) }()
	prober := &health.Prober{
		Topology:           srv.topo,
		Interval:           srv.config().Health.Interval.Duration,
		Timeout:            srv.config().Health.Timeout.Duration,
		FailuresBeforeDown: srv.config().Health.FailuresBeforeDown,
		TLS: func(b *health.Backend) *tls.Config {
			// A backend that must be reached over TLS is probed over TLS.
			if p := srv.pool(b.Address); p != nil {
				if t, required := p.TLS(); required {
					return t
				}
			}
			return nil
		},
		OnChange: srv.backendStateChanged,
		OnStatus: func(b *health.Backend, st *health.Status) {
			if b.Role == health.RoleMaster && b.State() != health.StateFenced {
				srv.env.LearnVersion(st.Version)
			}
			srv.failover.status(b, st)
		},
		OnAgent: func(b *health.Backend, err error) {
			if err != nil {
				srv.log.Warn("load agent failing, balancing on Threads_running", zap.String("cluster", b.Cluster),
					zap.String("backend", b.Address), zap.String("agent", redactAgent(b.Agent)), zap.Error(err))
				return
			}
			srv.log.Info("load agent answers again", zap.String("cluster", b.Cluster),
				zap.String("backend", b.Address), zap.String("agent", redactAgent(b.Agent)))
		},
	}
	if srv.shards() != nil {
		// Keys are placed by their column's type: learn it before the
		// first client is served.
		srv.settleShardKeys(srv.shards())
		srv.wg.Add(1)
		go func() { defer srv.wg.Done(); srv.checkShardTables() }()
	}
	srv.runProber(prober)
	srv.applyBinlog(srv.config())
	srv.wg.Add(1)
	go func() { defer srv.wg.Done(); srv.env.WatchStalls() }()
	// The schema mirror's first run, in the background: listeners do not
	// wait for it, and it retries while a server cannot be reached.
	srv.mirror.request()
	srv.wg.Add(1)
	go func() { defer srv.wg.Done(); srv.mirror.loop(srv.ctx) }()
	if srv.cfg.Proxy.EventLoop {
		// Last, so no earlier failure leaves loops behind.
		if err := srv.startLoops(); err != nil {
			srv.closeFleet()
			srv.ln.Close()
			srv.cancel()
			srv.closeBinlog()
			return err
		}
	}
	if srv.cfg.Proxy.Threads == 0 && !srv.cfg.Proxy.EventLoop {
		srv.wg.Add(1)
		go func() { defer srv.wg.Done(); governProcs(srv.ctx, srv.log) }()
	}
	srv.wg.Add(1)
	go func() { defer srv.wg.Done(); _ = srv.Serve() }()
	return nil
}

// followSnapshot points each pool at its address's Backend in snap, so
// connections are lent for the roles snap gives (after a failover), and
// gives the backends a reload added pools (followPools).
func (srv *Server) followSnapshot(snap *health.Snapshot) { srv.followPools(snap) }

// backendStateChanged logs and counts a backend's state change; the prober
// and the data plane call it. A master going down closes what its pool lent
// and may start a failover; a replica going down cuts the statements
// waiting on it.
func (srv *Server) backendStateChanged(b *health.Backend, from, to health.State, reason string) {
	defer func() {
		if to == health.StateDown && b.Role == health.RoleMaster {
			srv.failover.masterDown(b)
		}
		if to == health.StateDown && b.Role == health.RoleReplica {
			srv.env.ReplicaDown(b)
		}
	}()
	srv.stateChanges.WithLabelValues(b.Cluster, b.Address, to.String()).Inc()
	srv.event(observe.StateEventKind(to), b.Cluster, b.Address, from.String()+" -> "+to.String()+": "+reason)
	log := srv.log.Warn
	if to == health.StateUp {
		log = srv.log.Info
	}
	log("backend state changed", zap.String("cluster", b.Cluster), zap.String("backend", b.Address),
		zap.String("role", b.Role.String()), zap.String("from", from.String()), zap.String("to", to.String()),
		zap.Bool("up", to == health.StateUp), zap.String("reason", reason))
}

// redactAgent hides a password in an agent URL for logs.
func redactAgent(agent string) string {
	u, err := url.Parse(agent)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Serve accepts clients until Close.
func (srv *Server) Serve() error {
	for {
		nc, err := srv.ln.Accept()
		if err != nil {
			if srv.ctx.Err() != nil || srv.env.Draining() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			srv.log.Error("accept failed", zap.Error(err))
			select {
			case <-srv.ctx.Done():
				return nil
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		srv.wg.Add(1)
		if srv.loops != nil {
			go srv.serveConn(evloop.NewConn(nc))
		} else {
			go srv.serveConn(evloop.NewSockConn(nc))
		}
	}
}

// serveConn logs the client of nc in on the accepting goroutine, then has
// its commands served by an event loop or by a fresh goroutine (which so
// starts with a small stack; see dataplane's Session.login).
func (srv *Server) serveConn(nc net.Conn) {
	reg := srv.env.Registry()
	sess := dataplane.NewSession(srv.env, reg.NewID(), nc)
	counted, handedOff := false, false
	defer func() {
		if handedOff {
			return // the loop's task or the serving goroutine ends the session
		}
		if r := recover(); r != nil {
			sess.Log().Error("session panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
		srv.endSession(sess, counted)
	}()
	limit := srv.config().Proxy.MaxClientConnections
	if !reg.Add(&sess.Handle, limit) {
		sess.Refuse(protocol.ERConCount.New("Too many connections: sluice max_client_connections (%d) reached", limit))
		return
	}
	srv.metrics.Clients.Inc()
	counted = true
	start := time.Now()
	ok := sess.Start(srv.ctx)
	srv.logins.loginEnded()
	if !ok {
		return
	}
	if handedOff = srv.serveOnLoop(sess, start); handedOff {
		return
	}
	handedOff = true
	go srv.serveSession(sess, start)
}

// serveSession serves a logged-in session's commands until it ends.
func (srv *Server) serveSession(sess *dataplane.Session, start time.Time) {
	defer srv.sessionOver(sess)
	sess.ServeAll(start)
}

// sessionOver ends a session served by serveSession, logging a panic that
// ended it.
func (srv *Server) sessionOver(sess *dataplane.Session) {
	if r := recover(); r != nil {
		sess.Log().Error("session panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
	}
	srv.endSession(sess, true)
}

// endSession releases what a session held once it has ended, on whichever
// goroutine served it; counted: it was registered and in the clients
// gauge.
func (srv *Server) endSession(sess *dataplane.Session, counted bool) {
	defer srv.wg.Done()
	sess.End()
	if counted {
		srv.env.Registry().Remove(&sess.Handle)
		// The gauge drops only once the slot is free, so a client that
		// sees it fall can count on max_client_connections having room.
		srv.metrics.Clients.Dec()
	}
	if srv.env.Draining() {
		select {
		case srv.sessionEnded <- struct{}{}:
		default:
		}
	}
}

// Close stops accepting, closes every client connection and idle pool
// connection, and waits for the sessions to end: the hard stop (Shutdown
// is the graceful one).
func (srv *Server) Close() error {
	// Leaving first lets the other instances see this one go at once.
	srv.closeFleet()
	srv.cancel()
	srv.closeBinlog()
	var err error
	if srv.ln != nil {
		err = srv.ln.Close()
	}
	for _, h := range srv.env.Registry().All() {
		_ = h.Close()
	}
	srv.wg.Wait()
	if ferr := srv.fw.save(); ferr != nil {
		srv.log.Error("cannot write the firewall allowlists at shutdown", zap.Error(ferr))
	}
	srv.env.StopMirror()
	for _, p := range srv.env.Pools() {
		p.Close()
	}
	for _, l := range srv.loops {
		l.Stop()
	}
	return err
}

// PoolStats reports, per backend address, the open, idle and closed-so-far
// data connections of its pool (for tests and the admin port).
func (srv *Server) PoolStats() map[string][3]int {
	pools := srv.env.Pools()
	out := make(map[string][3]int, len(pools))
	for addr, p := range pools {
		o, i, c := p.Stats()
		out[addr] = [3]int{o, i, c}
	}
	return out
}
