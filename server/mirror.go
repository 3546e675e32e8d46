package server

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/dataplane"
)

// Bounds of the schema mirror ([auth] mirror_schema): each statement and
// login, a whole run, and the wait before a failed run is tried again
// (doubling from mirrorRetryMin up to mirrorRetryMax).
const (
	mirrorStatementTimeout = 30 * time.Second
	mirrorRunTimeout       = 10 * time.Minute
	mirrorRetryMin         = time.Second
	mirrorRetryMax         = 30 * time.Second
)

// schemaMirror runs the auth server's schema mirror (auth.Mirror) in the
// background: once at start-up, after each DDL statement sluice routed
// (dataplane.Options.SchemaChanged), after each RELOAD CONFIG, and again
// after a failed run until one succeeds. Runs never overlap: a request
// during a run makes one more run after it, however many came. request is
// safe for concurrent use; loop runs on one goroutine.
type schemaMirror struct {
	srv *Server
	// kick holds at most one pending request.
	kick    chan struct{}
	runs    *prometheus.CounterVec
	changes prometheus.Counter
}

func newSchemaMirror(srv *Server) *schemaMirror {
	m := &schemaMirror{srv: srv, kick: make(chan struct{}, 1)}
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_auth_mirror_runs_total",
		Help: "Runs of the auth server's schema mirror ([auth] mirror_schema), by result: ok, or error (a server could not be read, or the auth server refused a statement; the log names it).",
	}, []string{"result"})
	m.changes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_auth_mirror_changes_total",
		Help: "Schemas, tables, views, sequences and routines the schema mirror created, replaced or dropped on the auth server.",
	})
	srv.metrics.Reg.MustRegister(m.runs, m.changes)
	return m
}

// request asks for a run; it never blocks.
func (m *schemaMirror) request() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// loop serves requests until ctx ends. A run happens only while the
// running configuration has mirror_schema on; a failed run is retried
// after a growing pause, or at once on a new request.
func (m *schemaMirror) loop(ctx context.Context) {
	var retry <-chan time.Time
	pause := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-retry:
		}
		retry = nil
		cfg := m.srv.config()
		if !cfg.Auth.MirrorSchema || cfg.Auth.Backend != "mysql" {
			pause = 0
			continue
		}
		if err := m.run(ctx, cfg); err != nil {
			if ctx.Err() != nil {
				return
			}
			pause = min(max(2*pause, mirrorRetryMin), mirrorRetryMax)
			m.srv.log.Warn("auth schema mirror failed; it runs again", zap.Duration("retry_in", pause), zap.Error(err))
			retry = time.After(pause)
			continue
		}
		pause = 0
	}
}

// run mirrors once with cfg, counting and logging the outcome. A panic
// in the mirror is a failed run, not the end of the process.
func (m *schemaMirror) run(ctx context.Context, cfg *conf.Config) (err error) {
	defer func() {
		if r := recover(); r != nil {
			m.runs.WithLabelValues("error").Inc()
			m.srv.log.Error("auth schema mirror panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			err = fmt.Errorf("auth schema mirror panicked: %v", r)
		}
	}()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, mirrorRunTimeout)
	defer cancel()
	mi, err := m.mirror(cfg)
	var res *auth.MirrorResult
	if err == nil {
		res, err = mi.Run(ctx)
	}
	if res != nil && len(res.Changes) > 0 {
		m.changes.Add(float64(len(res.Changes)))
		const show = 20
		m.srv.log.Info("auth schema mirror changed the auth server", zap.Int("changes", len(res.Changes)),
			zap.Strings("first", res.Changes[:min(len(res.Changes), show)]), zap.Int("schemas", res.Schemas),
			zap.Duration("took", time.Since(start)))
		m.srv.event("mirror", "", "", fmt.Sprintf("%d changes on the auth server: %s", len(res.Changes), strings.Join(res.Changes[:min(len(res.Changes), 5)], ", ")))
	}
	if err != nil {
		m.runs.WithLabelValues("error").Inc()
		m.srv.event("mirror", "", "", "failed: "+oneLine(err))
		return err
	}
	m.runs.WithLabelValues("ok").Inc()
	m.srv.log.Debug("auth schema mirror ran", zap.Int("schemas", res.Schemas), zap.Duration("took", time.Since(start)))
	return nil
}

// mirror describes a run for cfg: the auth server with auth.service_user,
// and every cluster's current master (the default cluster's first) with
// the cluster's service account.
func (m *schemaMirror) mirror(cfg *conf.Config) (*auth.Mirror, error) {
	srv := m.srv
	t, required, err := dataplane.ClientTLS("auth", cfg.Auth.TLS, cfg.Auth.TLSCA, cfg.Auth.Address)
	if err != nil {
		return nil, err
	}
	mi := &auth.Mirror{
		Auth: auth.MirrorServer{Name: "auth server", Address: cfg.Auth.Address, User: cfg.Auth.ServiceUser,
			Password: cfg.Auth.ServicePassword, TLS: t, TLSRequired: required},
		Timeout: mirrorStatementTimeout,
	}
	names := []string{cfg.DefaultCluster()}
	for _, c := range cfg.Clusters {
		if c.Name != names[0] {
			names = append(names, c.Name)
		}
	}
	snap := srv.topo.Current()
	for _, name := range names {
		c := snap.Cluster(name)
		if c == nil || c.Master == nil {
			return nil, fmt.Errorf("cluster %s: not in the topology", name)
		}
		if c.WritesRefused != "" {
			return nil, fmt.Errorf("cluster %s: no master to read the schemas from: %s", name, c.WritesRefused)
		}
		addr := c.Master.Address
		cred := srv.failover.credentials(name, addr)
		mi.Masters = append(mi.Masters, auth.MirrorServer{Name: "cluster " + name + " master", Address: addr,
			User: cred.User, Password: cred.Password, TLS: cred.TLS, TLSRequired: cred.TLS != nil})
	}
	if rules := srv.shards(); rules != nil {
		// A physical table of a shard rule stands for its logical table,
		// which is the name grants use.
		all := rules.Clusters()
		logical := map[string]string{}
		for _, pt := range rules.PhysicalTables() {
			_, table, _ := strings.Cut(pt.Logical, ".")
			logical[physicalKey(all[pt.Cluster], pt.Schema, pt.Table)] = table
		}
		mi.Logical = func(src int, schema, table string) string {
			return logical[physicalKey(names[src], schema, table)]
		}
	}
	return mi, nil
}

// physicalKey keys a physical table of a cluster, names in any case.
func physicalKey(cluster, schema, table string) string {
	return cluster + "\x00" + strings.ToLower(schema) + "\x00" + strings.ToLower(table)
}
