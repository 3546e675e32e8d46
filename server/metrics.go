package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sluice-proxy/sluice/admin/web"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/observe"
	"go.uber.org/zap"
)

// serveMetrics serves /metrics, /healthz, /readyz, the status page and its
// API on addr until ctx ends, over TLS when [proxy] metrics_tls_cert is
// set. The certificate is loaded here so a bad one stops the start.
func (srv *Server) serveMetrics(ctx context.Context, addr string) (net.Addr, error) {
	var tlsConf *tls.Config
	if x := srv.cfg.Proxy; x.MetricsTLSCert != "" {
		cert, err := tls.LoadX509KeyPair(x.MetricsTLSCert, x.MetricsTLSKey)
		if err != nil {
			return nil, fmt.Errorf("metrics_tls_cert: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if x := srv.cfg.Proxy; x.MetricsUser != "" && x.MetricsPassword == "" {
		// Basic auth with an empty password lets in whoever guesses the
		// user: refuse to start rather than look protected.
		return nil, fmt.Errorf("metrics_user %q: the password from metrics_password_env or metrics_password_file is empty", x.MetricsUser)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	hs := &http.Server{Handler: srv.metricsHandler(), ReadHeaderTimeout: 5 * time.Second}
	srv.wg.Add(2)
	go func() {
		defer srv.wg.Done()
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			srv.log.Error("metrics listener failed", zap.Error(err))
		}
	}()
	go func() {
		defer srv.wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	return ln.Addr(), nil
}

// metricsHandler routes the metrics listener's paths, behind basic auth
// when [proxy] metrics_user is set (all but /healthz, which liveness probes
// read without credentials and which tells nothing).
func (srv *Server) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(srv.metrics.Reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", srv.serveReadyz)
	web.Register(mux, control{srv})
	if x := srv.cfg.Proxy; x.MetricsUser != "" {
		return web.BasicAuth(x.MetricsUser, x.MetricsPassword, mux, "/healthz")
	}
	return mux
}

// SetSlowQueryLog sets the slow-query log's threshold (0 switches it off)
// and whether its lines carry the statement text, for statements that
// finish from now on ([proxy] slow_query_threshold and log_sql; a reload
// may call it). It is safe for concurrent use.
func (srv *Server) SetSlowQueryLog(threshold time.Duration, logSQL bool) {
	srv.metrics.SetSlowLog(threshold, logSQL)
}

// initMetrics completes the Server's metrics once New has built its pools
// and sharding rules: the collectors that read pools and backends at scrape
// time, the shard and scatter routes, and the
// slow-query log settings.
func (srv *Server) initMetrics() {
	srv.metrics.Reg.MustRegister(newPoolCollector(srv), newBackendCollector(srv), newRuleCollector(srv), newFleetCollector(srv))
	srv.metrics.Reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_event_loop_sessions",
		Help: "Client sessions served by event loops ([proxy] event_loop); 0 without them.",
	}, func() float64 { return float64(srv.loopSessions()) }))
	// Always: a reload may add shard rules to a running sluice.
	srv.metrics.AddRoutes(observe.RouteShard, observe.RouteScatter)
	srv.SetSlowQueryLog(srv.cfg.Proxy.SlowQueryThreshold.Duration, srv.cfg.Proxy.LogSQL)
	srv.initSeries()
}

// failoverOutcomes are the outcome label values of sluice_failovers_total.
var failoverOutcomes = []string{string(health.OutcomePromoted), string(health.OutcomeFollowed),
	string(health.OutcomeSwitchover), "failed", "switchover_failed", "refused_divergent"}

// initSeries creates at 0 the series of the configured clusters and
// backends, so an alert on increase() sees the first failover or state
// change, and an absent series means a missing metric, not a quiet one.
// Backends a reload adds get theirs with their first event.
func (srv *Server) initSeries() {
	for _, cc := range srv.cfg.Clusters {
		srv.metrics.AddClusters(cc.Name)
		for _, o := range failoverOutcomes {
			srv.failover.total.WithLabelValues(cc.Name, o)
		}
		addrs := []string{cc.Master}
		for _, r := range cc.Replicas {
			addrs = append(addrs, r.Address)
		}
		for _, a := range addrs {
			for _, st := range allStates {
				srv.stateChanges.WithLabelValues(cc.Name, a, st.String())
			}
		}
	}
	for _, r := range []string{"ok", "error"} {
		srv.mirror.runs.WithLabelValues(r)
	}
}

// SetBuildInfo sets the version and commit that sluice_build_info
// reports: the values the binary was stamped with at build time.
func (srv *Server) SetBuildInfo(version, commit string) {
	srv.metrics.SetBuild(version, commit)
}
