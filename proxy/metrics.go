package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// metrics are the Server's Prometheus collectors, on a registry of its own
// so several Servers (tests) never collide. Every name starts with sluice_.
// Collectors are safe for concurrent use.
type metrics struct {
	reg         *prometheus.Registry
	clients     prometheus.Gauge
	logins      *prometheus.CounterVec // by result
	statements  *prometheus.CounterVec // by route
	backendErrs *prometheus.CounterVec // by role
	pins        *prometheus.CounterVec // sessions pinned, by reason
	// routeMaster and routeReplica are resolved once: a statement costs an
	// atomic add, no label lookup.
	routeMaster, routeReplica prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_client_connections", Help: "Client connections currently open.",
		}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_logins_total", Help: "Client logins by result (ok, denied, error).",
		}, []string{"result"}),
		statements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_statements_total", Help: "Client commands forwarded, by route (master, replica).",
		}, []string{"route"}),
		backendErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_backend_errors_total", Help: "Backend connections that failed or broke, by role.",
		}, []string{"role"}),
		pins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_session_pins_total",
			Help: "Sessions pinned to their backend connections (no multiplexing until reset or end), by the reason that pinned them first.",
		}, []string{"reason"}),
	}
	m.reg.MustRegister(m.clients, m.logins, m.statements, m.backendErrs, m.pins,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	m.routeMaster = m.statements.WithLabelValues("master")
	m.routeReplica = m.statements.WithLabelValues("replica")
	return m
}

// serveMetrics serves /metrics and /healthz on addr until ctx ends. The
// admin port and /readyz come with the management milestone.
func (s *Server) serveMetrics(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics listener failed", zap.Error(err))
		}
	}()
	go func() {
		defer s.wg.Done()
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	return ln.Addr(), nil
}
