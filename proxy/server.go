// Package proxy owns the data plane: the client listener, one Session per
// client connection, and the per-backend pools of data connections. It wires
// auth (login), router (where a statement goes) and health (which backends
// can serve) around protocol's packet relay, and grows no parsing or protocol
// code of its own.
//
// A Server is safe for concurrent use; each Session is owned by the
// goroutine that serves its client.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/shard"
)

// sluiceCapabilities are the capability flags sluice offers clients: only
// what it really supports (TLS and LOCAL INFILE are added when configured).
// No compression, session tracking or
// CLIENT_DEPRECATE_EOF yet, so clients and backends agree on result framing.
const sluiceCapabilities = protocol.ClientLongPassword | protocol.ClientFoundRows | protocol.ClientLongFlag |
	protocol.ClientConnectWithDB | protocol.ClientProtocol41 | protocol.ClientTransactions |
	protocol.ClientSecureConnection | protocol.ClientMultiStatements | protocol.ClientMultiResults |
	protocol.ClientPSMultiResults | protocol.ClientPluginAuth | protocol.ClientConnectAttrs |
	protocol.ClientPluginAuthLenencClientData

// defaultCollation is advertised in the greeting: utf8mb4_general_ci.
const defaultCollation = 45

// Server accepts client connections and serves them.
type Server struct {
	cfg    *conf.Config
	log    *zap.Logger
	router *router.Router
	auth   auth.Authenticator
	topo   *health.Topology
	pools  map[string]*Pool // by backend address; fixed for the Server's life
	// shards are the sharding rules, nil when the configuration has none;
	// defaultCluster indexes the cluster of unsharded tables.
	shards         *shard.Rules
	defaultCluster int

	tls         *tls.Config // towards clients; nil when off
	clientCaps  uint32      // capabilities offered to clients
	ln          net.Listener
	metricsAddr net.Addr
	metrics     *metrics
	// stateChanges counts backend state changes by cluster, backend and
	// new state.
	stateChanges *prometheus.CounterVec
	failover     *failovers
	nextID       atomic.Uint32
	version      atomic.Pointer[string]

	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	sessions map[uint32]*Session
	wg       sync.WaitGroup
}

// New builds a Server from a validated configuration.
func New(cfg *conf.Config, log *zap.Logger) (*Server, error) {
	if len(cfg.Clusters) == 0 {
		return nil, errors.New("proxy: no cluster configured")
	}
	var a auth.Authenticator
	switch cfg.Auth.Backend {
	case "static":
		users := make(map[string]string, len(cfg.Auth.Users))
		for _, u := range cfg.Auth.Users {
			users[u.Name] = u.PasswordHash
		}
		st, err := auth.NewStatic(users)
		if err != nil {
			return nil, fmt.Errorf("proxy: auth.user: %w", err)
		}
		a = st
	default:
		t, required, err := clientTLS("auth", cfg.Auth.TLS, cfg.Auth.TLSCA, cfg.Auth.Address)
		if err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
		a = &auth.Relay{Address: cfg.Auth.Address, DialTimeout: cfg.Proxy.ConnectTimeout.Duration, TLS: t, TLSRequired: required}
	}
	stls, err := serverTLS(cfg.Proxy.TLSCert, cfg.Proxy.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:      cfg,
		log:      log,
		router:   router.New(16384),
		auth:     a,
		topo:     health.NewTopology(cfg),
		pools:    make(map[string]*Pool),
		ctx:      ctx,
		cancel:   cancel,
		sessions: make(map[uint32]*Session),
		metrics:  newMetrics(),
		tls:      stls,
	}
	s.stateChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_backend_state_changes_total",
		Help: "Backend state changes (up, lagging, down, fenced, offline), by cluster, backend and the new state.",
	}, []string{"cluster", "backend", "to"})
	s.metrics.reg.MustRegister(s.stateChanges)
	s.failover = newFailovers(s)
	rules, err := shard.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if rules.Enabled() {
		s.shards = rules
	}
	for i := range cfg.Clusters {
		if cfg.Clusters[i].Name == cfg.DefaultCluster() {
			s.defaultCluster = i
		}
	}
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
	s.clientCaps = sluiceCapabilities
	if cfg.Proxy.LocalInfile {
		s.clientCaps |= protocol.ClientLocalFiles
	}
	for _, c := range s.topo.Current().Clusters {
		cc := cfg.Cluster(c.Name)
		for _, b := range c.Backends() {
			t, required, err := clientTLS("cluster "+cc.Name, cc.TLS, cc.TLSCA, b.Address)
			if err != nil {
				return nil, fmt.Errorf("proxy: %w", err)
			}
			size := cc.PoolSize
			if size <= 0 {
				size = conf.DefaultPoolSize
			}
			wait := cc.PoolWaitTimeout.Duration
			if wait <= 0 {
				wait = conf.DefaultPoolWaitTimeout
			}
			p := newPool(b, size)
			p.user, p.password = cc.User, cc.Password
			p.dialTimeout, p.waitTimeout = cfg.Proxy.ConnectTimeout.Duration, wait
			p.tls, p.tlsRequired = t, required
			p.trackGTID = cc.Consistency == "causal"
			if b.Role == health.RoleMaster {
				p.onGreeting = func(g *protocol.Greeting) { s.learnVersion(g.ServerVersion) }
			}
			s.pools[b.Address] = p
		}
	}
	if cfg.Proxy.ServerVersion != "" {
		v := cfg.Proxy.ServerVersion
		s.version.Store(&v)
	}
	s.initMetrics()
	return s, nil
}

// learnVersion adopts the master's version string for greetings, so clients
// that switch features on it see the server they really talk to.
func (s *Server) learnVersion(v string) {
	if s.cfg.Proxy.ServerVersion != "" || v == "" {
		return
	}
	if cur := s.version.Load(); cur == nil || *cur != v {
		s.version.Store(&v)
	}
}

// Topology returns the live topology (for tests and the admin port).
func (s *Server) Topology() *health.Topology { return s.topo }

// Listen binds the client listener.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Proxy.Listen)
	if err != nil {
		return fmt.Errorf("proxy: listen %s: %w", s.cfg.Proxy.Listen, err)
	}
	s.ln = ln
	return nil
}

// Addr is the bound client address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// MetricsAddr is the bound metrics address, nil when metrics are off.
func (s *Server) MetricsAddr() net.Addr { return s.metricsAddr }

// Start binds the listeners and serves in the background, with the health
// prober.
func (s *Server) Start() error {
	if n := s.cfg.Proxy.Threads; n > 0 {
		// The proxy owns its process: threads sets how many OS threads
		// run Go code at once for all of it.
		runtime.GOMAXPROCS(n)
	}
	if err := s.Listen(); err != nil {
		return err
	}
	if a := s.cfg.Proxy.MetricsListen; a != "" {
		addr, err := s.serveMetrics(s.ctx, a)
		if err != nil {
			s.ln.Close()
			return fmt.Errorf("proxy: metrics_listen %s: %w", a, err)
		}
		s.metricsAddr = addr
	}
	if err := s.failover.recover(); err != nil {
		s.ln.Close()
		return fmt.Errorf("proxy: %w", err)
	}
	prober := &health.Prober{
		Topology:           s.topo,
		Interval:           s.cfg.Health.Interval.Duration,
		Timeout:            s.cfg.Health.Timeout.Duration,
		FailuresBeforeDown: s.cfg.Health.FailuresBeforeDown,
		TLS: func(b *health.Backend) *tls.Config {
			// A backend that must be reached over TLS is probed over TLS.
			if p := s.pools[b.Address]; p != nil && p.tlsRequired {
				return p.tls
			}
			return nil
		},
		OnChange: s.backendStateChanged,
		OnStatus: func(b *health.Backend, st *health.Status) {
			if b.Role == health.RoleMaster && b.State() != health.StateFenced {
				s.learnVersion(st.Version)
			}
			s.failover.status(b, st)
		},
		OnAgent: func(b *health.Backend, err error) {
			if err != nil {
				s.log.Warn("load agent failing, balancing on Threads_running", zap.String("cluster", b.Cluster),
					zap.String("backend", b.Address), zap.String("agent", redactAgent(b.Agent)), zap.Error(err))
				return
			}
			s.log.Info("load agent answers again", zap.String("cluster", b.Cluster),
				zap.String("backend", b.Address), zap.String("agent", redactAgent(b.Agent)))
		},
	}
	if s.shards != nil {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.checkShardTables() }()
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); prober.Run(s.ctx) }()
	go func() { defer s.wg.Done(); _ = s.Serve() }()
	return nil
}

// followSnapshot points each pool at its address's Backend in snap, so
// connections are lent for the roles snap gives (after a failover).
func (s *Server) followSnapshot(snap *health.Snapshot) {
	for _, c := range snap.Clusters {
		for _, b := range c.Watched() {
			if p := s.pools[b.Address]; p != nil {
				p.SetBackend(b)
			}
		}
	}
}

// backendStateChanged logs and counts a backend's state change; the prober
// and the data plane call it. A master going down closes what its pool lent
// and may start a failover.
func (s *Server) backendStateChanged(b *health.Backend, from, to health.State, reason string) {
	defer func() {
		if to == health.StateDown && b.Role == health.RoleMaster {
			s.failover.masterDown(b)
		}
	}()
	s.stateChanges.WithLabelValues(b.Cluster, b.Address, to.String()).Inc()
	log := s.log.Warn
	if to == health.StateUp {
		log = s.log.Info
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
func (s *Server) Serve() error {
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Error("accept failed", zap.Error(err))
			select {
			case <-s.ctx.Done():
				return nil
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		s.wg.Add(1)
		go s.serveConn(nc)
	}
}

func (s *Server) serveConn(nc net.Conn) {
	defer s.wg.Done()
	id := s.nextID.Add(1)
	sess := newSession(s, id, nc)
	defer func() {
		if r := recover(); r != nil {
			sess.log().Error("session panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
		sess.close()
		s.mu.Lock()
		delete(s.sessions, id)
		s.mu.Unlock()
	}()
	s.mu.Lock()
	full := len(s.sessions) >= s.cfg.Proxy.MaxClientConnections
	if !full {
		s.sessions[id] = sess
	}
	s.mu.Unlock()
	if full {
		_ = sess.client.WriteErr(protocol.NewError(protocol.ErConCount,
			"Too many connections: sluice max_client_connections (%d) reached", s.cfg.Proxy.MaxClientConnections))
		return
	}
	s.metrics.clients.Inc()
	defer s.metrics.clients.Dec()
	sess.run(s.ctx)
}

// Close stops accepting, closes every client connection and idle pool
// connection, and waits for the sessions to end.
func (s *Server) Close() error {
	s.cancel()
	var err error
	if s.ln != nil {
		err = s.ln.Close()
	}
	s.mu.Lock()
	for _, sess := range s.sessions {
		_ = sess.client.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	for _, p := range s.pools {
		p.Close()
	}
	return err
}

// serverVersion is the version string for greetings ("" until a master
// connection taught it; the authenticator then uses its own).
func (s *Server) serverVersion() string {
	if v := s.version.Load(); v != nil {
		return *v
	}
	return ""
}

// PoolStats reports, per backend address, the open, idle and closed-so-far
// data connections of its pool (for tests and the admin port).
func (s *Server) PoolStats() map[string][3]int {
	out := make(map[string][3]int, len(s.pools))
	for addr, p := range s.pools {
		o, i, c := p.Stats()
		out[addr] = [3]int{o, i, c}
	}
	return out
}
