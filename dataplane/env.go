// Package dataplane owns one client session and its statements: the serve
// loop, command dispatch, the exchange with backends, the pools of data
// connections, shard legs and scatter execution. Env is everything a
// session needs from the server, passed explicitly; Handle is what other
// goroutines may read of a session or do to it.
//
// A Session is owned by the goroutine (or event loop task) that serves it.
// Env and Registry are safe for concurrent use.
package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/sluice-proxy/sluice/cache"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/evloop"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/policy"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/rules"
	"github.com/sluice-proxy/sluice/shard"
	"go.uber.org/zap"
)

// Host is what the data plane calls back into the server for. Its methods
// are safe for concurrent use.
type Host interface {
	// BackendStateChanged publishes a state change the data plane saw
	// (a backend that broke mid-statement).
	BackendStateChanged(b *health.Backend, from, to health.State, reason string)
	// RefuseAdminOnDataPort is the ERR the data port gives the admin user
	// logging in from host.
	RefuseAdminOnDataPort(host string) *protocol.SQLError
}

// Env is what every session shares: the configuration, the topology, the
// pools, the router, the limits and the metrics. The server builds one
// (NewEnv) and replaces its live parts on reload (SetConfig, SetPools,
// SetShards, SetLimits); sessions load them per statement. It is safe for
// concurrent use.
type Env struct {
	// cfg is the configuration the server started with: read it only
	// for settings that need a restart (listeners, TLS, cluster names,
	// masters and accounts). Live settings come from config().
	cfg  *conf.Config
	live atomic.Pointer[conf.Config]
	log  *zap.Logger
	ctx  context.Context
	host Host

	router *router.Router
	// auth authenticates clients; the server's delegates to the
	// authenticator of the live configuration.
	auth auth.Authenticator
	// grants caches the accounts' privileges (grants.go).
	grants *auth.GrantsCache
	topo   *health.Topology
	// poolMap maps backend addresses to pools; the server replaces the
	// map (copy on write), sessions load it per statement (pool).
	poolMap atomic.Pointer[map[string]*Pool]
	// shardSet holds the sharding rules and the default cluster's index.
	shardSet atomic.Pointer[ShardSet]
	// objects is the catalog of the masters' views and routines the
	// grants check consults (catalog.go); objectsMu is held while a new
	// one is built.
	objects   atomic.Pointer[objectCatalog]
	objectsMu sync.Mutex
	// catalogDDLs counts the statements running that may change views or
	// routines (catalog.go, catalogFence);
	// ddlAt (UnixNano) is when the last such statement ended; objectsFresh
	// caches objectsReadAt.
	ddlAt        atomic.Int64
	objectsFresh atomic.Int64
	catalogDDLs  atomic.Int64
	// viewCreators are the accounts that created views through sluice
	// (definers.go).
	viewCreators sync.Map

	tls        *tls.Config // towards clients; nil when off
	clientCaps uint32      // capabilities offered to clients
	version    atomic.Pointer[string]

	metrics *observe.Metrics
	digests *observe.Digests
	// refusals are the digests whose replica write refusals were logged.
	refusals refusalLog

	// Per-user limits (limits.go): the running limit set, each user's
	// shared state, and the limit metrics.
	limits atomic.Pointer[limitSet]
	// rules are the query rules in force (SetRules).
	rules atomic.Pointer[rules.Set]
	// cache is the result cache (cache.go).
	cache         *cache.Cache
	users         userStates
	rateLimited   *prometheus.CounterVec
	queryTimeouts prometheus.Counter
	// mirror runs the copies of statements query rules mirror (mirror.go).
	mirror *mirror

	// logins counts failed logins per client address for the login
	// backoff of both ports (login.go).
	logins *policy.LoginBackoff

	// schemaChanged is Options.SchemaChanged.
	schemaChanged func()

	// reg is the session registry: every session by id.
	reg *Registry
	// draining: a graceful shutdown closes sessions as they go idle.
	draining atomic.Bool

	// The firewall (firewall.go): the modes in force, the allowlists,
	// the refusals by user label.
	firewall  atomic.Pointer[firewallSet]
	allow     *rules.Allowlist
	fwRefused *prometheus.CounterVec
}

// Options are what NewEnv needs besides the configuration.
type Options struct {
	Log     *zap.Logger
	Ctx     context.Context
	Host    Host
	Auth    auth.Authenticator
	Topo    *health.Topology
	Metrics *observe.Metrics
	Digests *observe.Digests
	// TLS is the client-side TLS configuration; nil when off.
	TLS *tls.Config
	// Grants caches the accounts' privileges ([auth] enforce_grants); the
	// server configures it.
	Grants *auth.GrantsCache
	// SchemaChanged, when set, is called on the session's goroutine after
	// a statement whose plan is DDL (router.Plan.DDL) succeeded (or, for
	// several statements in one text, ran at all): the [auth]
	// mirror_schema trigger. It must return at once.
	SchemaChanged func()
	// Firewall is the firewall's allowlist as the server loaded it; nil
	// starts an empty one.
	Firewall *rules.Allowlist
}

// NewEnv builds the data plane's shared state for a validated cfg: the
// router, the sharding rules, a pool per backend, the limits.
func NewEnv(cfg *conf.Config, o Options) (*Env, error) {
	e := &Env{cfg: cfg, log: o.Log, ctx: o.Ctx, host: o.Host, router: router.New(16384), auth: o.Auth, grants: o.Grants, topo: o.Topo,
		tls: o.TLS, metrics: o.Metrics, digests: o.Digests, logins: policy.NewLoginBackoff(policy.MaxBackoffAddrs),
		reg: newRegistry(), schemaChanged: o.SchemaChanged}
	e.live.Store(cfg)
	set, err := NewShardSet(cfg, nil)
	if err != nil {
		return nil, err
	}
	e.shardSet.Store(set)
	e.clientCaps = Capabilities
	if cfg.Proxy.LocalInfile {
		e.clientCaps |= protocol.ClientLocalFiles
	}
	pools := make(map[string]*Pool)
	for _, c := range e.topo.Current().Clusters {
		for _, b := range c.Backends() {
			p, err := e.NewPoolFor(cfg, b)
			if err != nil {
				return nil, err
			}
			pools[b.Address] = p
		}
	}
	e.poolMap.Store(&pools)
	if cfg.Proxy.ServerVersion != "" {
		v := cfg.Proxy.ServerVersion
		e.version.Store(&v)
	}
	e.initLimits(cfg)
	e.initFirewall(cfg, o.Firewall)
	e.initMirror(cfg)
	ruleSet, err := rules.Compile(cfg, nil)
	if err != nil {
		return nil, err
	}
	e.rules.Store(ruleSet)
	e.newCache(cfg)
	return e, nil
}

// Config is the running configuration (config).
func (e *Env) Config() *conf.Config { return e.live.Load() }

// SetConfig makes cfg the running configuration; the server's reload
// calls it once cfg's pools, rules and limits are in place.
func (e *Env) SetConfig(cfg *conf.Config) {
	e.cache.SetLimits(cfg.Cache.MaxMemory, cfg.Cache.MaxEntry)
	e.live.Store(cfg)
}

// Router is the statement router sessions classify with.
func (e *Env) Router() *router.Router { return e.router }

// Pool is the pool of the backend at addr, nil when there is none.
func (e *Env) Pool(addr string) *Pool { return e.pool(addr) }

// Pools is the current map of pools by address; callers must not modify it.
func (e *Env) Pools() map[string]*Pool { return *e.poolMap.Load() }

// SetPools replaces the map of pools (copy on write).
func (e *Env) SetPools(m map[string]*Pool) { e.poolMap.Store(&m) }

// Shards are the sharding rules in force, nil when there never were any.
func (e *Env) Shards() *shard.Rules { return e.shards() }

// ShardSet is the running rules with their default cluster.
func (e *Env) ShardSet() *ShardSet { return e.shardSet.Load() }

// SetShards replaces the sharding rules. When rules are or were in force
// the result cache is emptied and its global counter bumped: writes under
// sharding begin no write on the cache's counters, so nothing stored
// before or while rules exist may be served once they change.
func (e *Env) SetShards(set *ShardSet) {
	old := e.shardSet.Swap(set)
	if e.cache != nil && old != nil && old.rules != set.rules && (old.rules != nil || set.rules != nil) {
		e.cache.V.Global().Bump()
		e.cache.Flush()
	}
}

// Registry is the session registry.
func (e *Env) Registry() *Registry { return e.reg }

// Metrics are the collectors sessions record into.
func (e *Env) Metrics() *observe.Metrics { return e.metrics }

// ClientCaps are the capabilities offered to clients.
func (e *Env) ClientCaps() uint32 { return e.clientCaps }

// SetDraining marks a graceful shutdown under way: sessions close as
// they go idle.
func (e *Env) SetDraining() { e.draining.Store(true) }

// Draining reports whether a graceful shutdown is under way.
func (e *Env) Draining() bool { return e.draining.Load() }

// LearnVersion adopts the master's version string for greetings.
func (e *Env) LearnVersion(v string) { e.learnVersion(v) }

// ServerVersion is the version string clients are greeted with.
func (e *Env) ServerVersion() string { return e.serverVersion() }

// errPoolClosed: the pool was closed (a reload replaced or dropped it, or
// the Server closed).
var errPoolClosed = errors.New("pool closed")

// errBackendGone: a reload took the backend out of the topology; the
// session picks another.
var errBackendGone = errors.New("backend left the topology")

// config returns the running configuration: the one the Server started with
// or the last one Reload applied. It is immutable; load it again per
// statement rather than keep it.
func (e *Env) config() *conf.Config { return e.live.Load() }

// pool returns the pool of the backend at addr, nil when the topology has
// no such backend (any more).
func (e *Env) pool(addr string) *Pool { return (*e.poolMap.Load())[addr] }

// ShardSet is a configuration's sharding rules with the index of its
// default cluster, swapped as one by Reload.
type ShardSet struct {
	// rules is nil when the Server has never had a rule: sessions then
	// take the unsharded path. A reload that removes every rule keeps
	// empty rules, which route every statement to the default cluster,
	// because sessions made while rules existed may be on another cluster.
	rules *shard.Rules
	def   int
}

// NewShardSet builds cfg's shardSet; prev is the running one (nil at
// start-up), whose global id generator the new rules keep when the node
// number is the same (a fresh one would repeat ids within a millisecond).
func NewShardSet(cfg *conf.Config, prev *ShardSet) (*ShardSet, error) {
	rules, err := shard.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	set := &ShardSet{}
	for i := range cfg.Clusters {
		if cfg.Clusters[i].Name == cfg.DefaultCluster() {
			set.def = i
		}
	}
	if rules.Enabled() || (prev != nil && prev.rules != nil) {
		set.rules = rules
	}
	if prev != nil && prev.rules != nil && set.rules != nil {
		set.rules.ShareIDs(prev.rules)
	}
	return set, nil
}

// shards returns the sharding rules of the running configuration, nil when
// the Server never had any.
func (e *Env) shards() *shard.Rules { return e.shardSet.Load().rules }

// defaultCluster returns the index of the cluster of unsharded tables.
func (e *Env) defaultCluster() int { return e.shardSet.Load().def }

// NewPoolFor builds the pool of backend b with the settings cfg gives b's
// cluster.
func (e *Env) NewPoolFor(cfg *conf.Config, b *health.Backend) (*Pool, error) {
	cc := cfg.Cluster(b.Cluster)
	if cc == nil {
		return nil, fmt.Errorf("proxy: backend %s: no cluster %q", b.Address, b.Cluster)
	}
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
	p.loopConns = cfg.Proxy.EventLoop && evloop.Supported
	p.user, p.password = cc.User, cc.Password
	p.dialTimeout, p.waitTimeout = cfg.Proxy.ConnectTimeout.Duration, wait
	p.tls, p.tlsRequired = t, required
	p.trackGTID = cc.Consistency == "causal"
	// Every pool may become a master's after a failover.
	p.onGreeting = func(g *protocol.Greeting) {
		if bk := p.Backend(); bk.Role == health.RoleMaster && bk.State() != health.StateFenced {
			e.learnVersion(g.ServerVersion)
		}
	}
	return p, nil
}

// Capabilities are the capability flags sluice offers clients: only
// what it really supports (TLS and LOCAL INFILE are added when configured).
// No compression, session tracking or
// CLIENT_DEPRECATE_EOF yet, so clients and backends agree on result framing.
const Capabilities = protocol.ClientLongPassword | protocol.ClientFoundRows | protocol.ClientLongFlag |
	protocol.ClientConnectWithDB | protocol.ClientProtocol41 | protocol.ClientTransactions |
	protocol.ClientSecureConnection | protocol.ClientMultiStatements | protocol.ClientMultiResults |
	protocol.ClientPSMultiResults | protocol.ClientPluginAuth | protocol.ClientConnectAttrs |
	protocol.ClientPluginAuthLenencClientData

// DefaultCollation is advertised in the greeting: utf8mb4_general_ci.
const DefaultCollation = 45

// learnVersion adopts the master's version string for greetings, so clients
// that switch features on it see the server they really talk to.
func (e *Env) learnVersion(v string) {
	if e.config().Proxy.ServerVersion != "" || v == "" {
		return
	}
	if cur := e.version.Load(); cur == nil || *cur != v {
		e.version.Store(&v)
	}
}

// serverVersion is the version string for greetings ("" until a master
// connection taught it; the authenticator then uses its own).
func (e *Env) serverVersion() string {
	if v := e.version.Load(); v != nil {
		return *v
	}
	return ""
}

// Rules are the set's sharding rules, nil when there never were any.
func (set *ShardSet) Rules() *shard.Rules { return set.rules }

// SetLimits makes cfg's [limits] the ones sessions apply from their next
// command.
func (e *Env) SetLimits(cfg *conf.Config) { e.limits.Store(e.newLimitSet(cfg)) }

// SetServerVersion fixes the version string of greetings ([proxy]
// server_version).
func (e *Env) SetServerVersion(v string) { e.version.Store(&v) }
