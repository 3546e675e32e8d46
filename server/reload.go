package server

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/dataplane"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/rules"
)

// reloader is the Server's state for Reload and the prober it restarts.
type reloader struct {
	// mu makes Reloads run one at a time.
	mu sync.Mutex

	// poolMu guards rebuild and retired, which Reload hands to
	// followSnapshot (run under the topology's publish lock).
	poolMu sync.Mutex
	// rebuild names the clusters whose pools the next publish replaces
	// (their settings changed).
	rebuild map[string]bool
	// retired are pools a publish replaced or dropped; Reload closes them
	// once the snapshot without them is current.
	retired []*dataplane.Pool

	// prober is the template of the running prober; proberCancel stops
	// it and proberDone is closed when it has stopped. Guarded by mu
	// after Start.
	prober       health.Prober
	proberCancel context.CancelFunc
	proberDone   chan struct{}

	// local is the instance's own file as last loaded (nil: the
	// configuration the Server started with); pushed is the fleet's
	// configuration last applied over it (nil: none), and pushedRev its
	// revision. Guarded by mu.
	local     *conf.Config
	pushed    *conf.Config
	pushedRev int64
}

// liveAuth is the Server's Authenticator: it delegates to the one built from
// the running configuration, which Reload replaces. Logins in progress
// finish with the one they started with.
type liveAuth struct {
	cur atomic.Pointer[auth.Authenticator]
}

func (a *liveAuth) Authenticate(ctx context.Context, client *protocol.Conn, srv auth.Server) (*auth.Login, error) {
	return (*a.cur.Load()).Authenticate(ctx, client, srv)
}

func (a *liveAuth) ChangeUser(ctx context.Context, client *protocol.Conn, srv auth.Server, caps uint32, prev *auth.Reauth, cu *protocol.ChangeUser) (*auth.Login, error) {
	return (*a.cur.Load()).ChangeUser(ctx, client, srv, caps, prev, cu)
}

// newAuthenticator builds the authenticator cfg's [auth] describes.
func newAuthenticator(cfg *conf.Config, cache *auth.GrantsCache) (auth.Authenticator, error) {
	if cfg.Auth.Backend == "static" {
		users := make(map[string]string, len(cfg.Auth.Users))
		for _, u := range cfg.Auth.Users {
			users[u.Name] = u.PasswordHash
		}
		st, err := auth.NewStatic(users)
		if err != nil {
			return nil, fmt.Errorf("proxy: auth.user: %w", err)
		}
		for _, u := range cfg.Auth.Users {
			if err := st.SetGrants(u.Name, u.Grants); err != nil {
				return nil, fmt.Errorf("proxy: auth.user grants: %w", err)
			}
		}
		return st, nil
	}
	t, required, err := dataplane.ClientTLS("auth", cfg.Auth.TLS, cfg.Auth.TLSCA, cfg.Auth.Address)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	r := &auth.Relay{Address: cfg.Auth.Address, DialTimeout: cfg.Proxy.ConnectTimeout.Duration, TLS: t, TLSRequired: required,
		MaxPendingHandshakes: cfg.Auth.MaxPendingHandshakes, MaxKeptConnections: cfg.Auth.MaxKeptAuthConnections,
		MaxConcurrentLogins: cfg.Auth.MaxConcurrentLogins,
		ProxyProtocol:       proxyProtocol(cfg.Auth)}
	r.LearnGrants, r.KnownGrants = cfg.Auth.EnforceGrants, cache.Known
	return r, nil
}

// proxyProtocol is the PROXY protocol version a's auth-server
// connections start with, 0 for none.
func proxyProtocol(a conf.Auth) int {
	if !a.ProxyProtocol {
		return 0
	}
	return a.ProxyProtocolVersion
}

// configureGrants sets the grants cache's TTL and, with auth.service_user,
// the reader that reads an account's grants again when they expire.
func configureGrants(c *auth.GrantsCache, cfg *conf.Config) {
	var reader *auth.GrantsReader
	if a := &cfg.Auth; a.Backend == "mysql" && a.ServiceUser != "" {
		reader = &auth.GrantsReader{Address: a.Address, User: a.ServiceUser, Password: a.ServicePassword, DialTimeout: cfg.Proxy.ConnectTimeout.Duration}
	}
	c.Configure(cfg.Auth.GrantsTTL.Duration, reader)
}

// poolsToRebuild names the clusters whose pool settings differ between old
// and next (pool size and wait, consistency, which decides GTID tracking,
// and the connect timeout of every cluster).
func poolsToRebuild(old, next *conf.Config) map[string]bool {
	out := map[string]bool{}
	for _, nc := range next.Clusters {
		oc := old.Cluster(nc.Name)
		if oc == nil || oc.PoolSize != nc.PoolSize || oc.PoolWaitTimeout != nc.PoolWaitTimeout ||
			oc.Consistency != nc.Consistency || old.Proxy.ConnectTimeout != next.Proxy.ConnectTimeout {
			out[nc.Name] = true
		}
	}
	return out
}

// followPools is followSnapshot's work on the pool map, under the
// topology's publish lock: every watched backend of snap gets a pool (a
// new one when its cluster is to be rebuilt or it has none), and the pools
// of backends snap no longer has are retired. It stores a new map only
// when something changed.
func (srv *Server) followPools(snap *health.Snapshot) {
	srv.reload.poolMu.Lock()
	defer srv.reload.poolMu.Unlock()
	pools := srv.env.Pools()
	var next map[string]*dataplane.Pool
	watched := make(map[string]bool, len(pools))
	cfg := srv.config()
	for _, c := range snap.Clusters {
		for _, b := range c.Watched() {
			watched[b.Address] = true
			p := pools[b.Address]
			if p != nil && !srv.reload.rebuild[c.Name] {
				p.SetBackend(b)
				continue
			}
			np, err := srv.env.NewPoolFor(cfg, b)
			if err != nil {
				// Only a TLS CA file that became unreadable fails here:
				// the old pool, if any, stays.
				srv.log.Error("cannot build the pool of a backend", zap.String("backend", b.Address), zap.Error(err))
				if p != nil {
					p.SetBackend(b)
				}
				continue
			}
			if next == nil {
				next = maps.Clone(pools)
			}
			if p != nil {
				srv.reload.retired = append(srv.reload.retired, p)
			}
			next[b.Address] = np
		}
	}
	for addr, p := range pools {
		if !watched[addr] {
			if next == nil {
				next = maps.Clone(pools)
			}
			delete(next, addr)
			srv.reload.retired = append(srv.reload.retired, p)
		}
	}
	srv.reload.rebuild = nil
	if next != nil {
		srv.env.SetPools(next)
	}
}

// runProber starts p (on the Server's context, counted in its wait group)
// and keeps a copy of it as the template later restarts copy.
func (srv *Server) runProber(p *health.Prober) {
	srv.reload.prober = *p
	ctx, cancel := context.WithCancel(srv.ctx)
	done := make(chan struct{})
	srv.reload.proberCancel, srv.reload.proberDone = cancel, done
	srv.wg.Add(1)
	go func() {
		defer srv.wg.Done()
		defer close(done)
		p.Run(ctx)
	}()
}

// restartProber stops the running prober and starts one with h's timings.
// Backend states, failure counts and statuses live on the Backends, so
// nothing is lost; the new prober's workers probe at its first tick.
func (srv *Server) restartProber(h conf.Health) {
	if srv.reload.proberCancel == nil {
		return // not started
	}
	srv.reload.proberCancel()
	<-srv.reload.proberDone
	if srv.ctx.Err() != nil {
		return
	}
	p := srv.reload.prober
	p.Interval, p.Timeout, p.FailuresBeforeDown = h.Interval.Duration, h.Timeout.Duration, h.FailuresBeforeDown
	srv.runProber(&p)
}

// Reload reads the configuration file again (the path the running
// configuration was loaded from) and applies what changed while sessions
// serve:
//
//   - replicas added (they take reads after their first good probe),
//     removed (no new reads; sessions leave them at their next statement
//     and their pools close as connections come back) or re-weighted, and
//     each cluster's balance, max_replication_lag and
//     reads_fall_back_to_master, in a new topology snapshot one epoch up;
//   - pool settings and consistency, with new pools for the clusters
//     concerned (connections lent from the old ones close when returned);
//   - [health] timings, by restarting the prober;
//   - [auth], for new logins (and the schema mirror, which runs again
//     after every reload); the proxy limits and [limits] (new
//     connections, and every session's next command); shard and broadcast
//     rules and [sharding], and the query rules ([[rule]]) and the
//     [firewall] modes, for the statements that start afterwards.
//
// changes lists every difference with Change.String, those that wait for a
// restart prefixed "needs restart: ", and notes for changes that could not
// be applied as written (a removed replica that a failover made the
// master). A file that does not load, or whose live part does not validate
// against the running clusters, changes nothing: the error is a
// *protocol.SQLError naming the key, and line where known. Once a fleet
// configuration revision was applied (fleetconfig.go), the file decides
// only the instance-local keys and that revision is applied over it again.
// Reload is safe to call concurrently with sessions, with itself and with
// a fleet configuration being applied (calls run one at a time).
func (srv *Server) Reload() (changes []string, err error) {
	srv.reload.mu.Lock()
	defer srv.reload.mu.Unlock()
	old := srv.config()
	if old.Path == "" {
		return nil, protocol.ERUnknownError.New("sluice: RELOAD: the running configuration was not loaded from a file")
	}
	file, err := conf.Load(old.Path)
	if err != nil {
		// Not logged here: the caller logs the failure once, as it
		// happened to it (SIGHUP, admin RELOAD CONFIG).
		return nil, protocol.ERUnknownError.New("sluice: reload failed, running configuration unchanged: %v", oneLine(err))
	}
	local := file
	if p := srv.reload.pushed; p != nil {
		// The fleet's configuration stays in force: the local file
		// decides only the instance-local keys (fleetconfig.go).
		if file, err = effectiveConfig(p, local); err != nil {
			return nil, protocol.ERUnknownError.New("sluice: reload refused, running configuration unchanged: with fleet configuration revision %d: %v",
				srv.reload.pushedRev, oneLine(err))
		}
	}
	changes, err = srv.applyLocked(old, file, "reload")
	if err == nil {
		srv.reload.local = local
	}
	return changes, err
}

// applyLocked is Reload's work once file (a configuration valid on its
// own) is read: it checks file's live part against the running one, builds
// what the change needs, then swaps it in; kind names the event. The
// caller holds reload.mu.
func (srv *Server) applyLocked(old, file *conf.Config, kind string) (changes []string, err error) {
	diff := conf.Diff(old, file)
	next := conf.Live(old, file)
	if err := next.Validate(); err != nil {
		// The file is valid on its own: it leans on a restart-only change
		// (a shard rule naming a cluster a restart would add).
		return nil, protocol.ERUnknownError.New("sluice: reload refused, running configuration unchanged (%s): %v", strings.Join(diff.Strings(), "; "), oneLine(err))
	}
	set, err := dataplane.NewShardSet(next, srv.env.ShardSet())
	if err != nil {
		return nil, protocol.ERUnknownError.New("sluice: reload refused, running configuration unchanged: %v", err)
	}
	ruleSet, err := rules.Compile(next, srv.env.Rules())
	if err != nil {
		return nil, protocol.ERUnknownError.New("sluice: reload refused, running configuration unchanged: %v", err)
	}
	var authn auth.Authenticator
	if !reflect.DeepEqual(old.Auth, next.Auth) || old.Proxy.ConnectTimeout != next.Proxy.ConnectTimeout {
		if authn, err = newAuthenticator(next, srv.grants); err != nil {
			return nil, protocol.ERUnknownError.New("sluice: reload refused, running configuration unchanged: %v", err)
		}
	}
	epoch, notes := srv.swapConfig(old, next, authn, set, ruleSet)

	changes = append(diff.Strings(), notes...)
	summary := fmt.Sprintf("%d changes applied, %d need a restart", len(diff)-diff.NeedRestart(), diff.NeedRestart())
	if len(notes) > 0 {
		summary += fmt.Sprintf(", %d not applied", len(notes))
	}
	if len(changes) > 0 {
		summary += ": " + strings.Join(changes, "; ")
	}
	srv.event(kind, "", "", summary)
	srv.log.Info("configuration reloaded", zap.String("source", kind), zap.String("path", old.Path), zap.Uint64("epoch", epoch),
		zap.Strings("changes", changes), zap.Int("need_restart", diff.NeedRestart()))
	if changes == nil {
		changes = []string{}
	}
	return changes, nil
}

// swapConfig puts next in force in place of old; everything it needs was
// built and checked. The caller holds reload.mu.
func (srv *Server) swapConfig(old, next *conf.Config, authn auth.Authenticator, set *dataplane.ShardSet, ruleSet *rules.Set) (epoch uint64, notes []string) {
	// The configuration first, so pools built for the new snapshot and
	// sessions that see it read the new settings.
	srv.env.SetConfig(next)
	srv.SetSlowQueryLog(next.Proxy.SlowQueryThreshold.Duration, next.Proxy.LogSQL)
	if authn != nil {
		srv.auth.cur.Store(&authn)
	}
	configureGrants(srv.grants, next)
	// Accounts' grants are read again at each session's next statement.
	srv.grants.Flush()
	// Key columns' types before the rules route a statement.
	srv.settleShardKeys(set.Rules())
	srv.env.SetShards(set)
	srv.env.SetLimits(next)
	srv.env.SetRules(ruleSet)
	srv.env.SetFirewall(next)
	if v := next.Proxy.ServerVersion; v != "" {
		srv.env.SetServerVersion(v)
	}
	srv.reload.poolMu.Lock()
	srv.reload.rebuild = poolsToRebuild(old, next)
	srv.reload.poolMu.Unlock()
	snap, notes := srv.topo.Reconfigure(old, next)
	srv.reload.poolMu.Lock()
	retired := srv.reload.retired
	srv.reload.retired = nil
	srv.reload.poolMu.Unlock()
	for _, p := range retired {
		// Idle connections close now, lent ones when they come back.
		p.Close()
	}
	if old.Health.Interval != next.Health.Interval || old.Health.Timeout != next.Health.Timeout ||
		old.Health.FailuresBeforeDown != next.Health.FailuresBeforeDown {
		srv.restartProber(next.Health)
	}

	// Binlog invalidation turned on or off, or a new server_id.
	srv.applyBinlog(next)

	// The auth server's schemas are mirrored again with the new settings
	// (a DBA's nudge after DDL that did not pass through sluice).
	srv.mirror.request()
	return snap.Epoch, notes
}

// oneLine joins a multi-line error (errors.Join of validation problems) for
// an ERR packet.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
