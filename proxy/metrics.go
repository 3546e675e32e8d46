package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/router"
)

// stmtRoute is where a statement ran, as the route label of the statement
// metrics says it.
type stmtRoute uint8

const (
	// routeNone: the command reached no backend (sluice answered it, or
	// it failed before one was picked).
	routeNone stmtRoute = iota
	routeMaster
	routeReplica
	// routeShard: a statement on a sharded table that ran on one shard.
	routeShard
	// routeScatter: a statement sluice ran on several shards and merged.
	routeScatter
	numRoutes
)

var routeNames = [numRoutes]string{"", "master", "replica", "shard", "scatter"}

func (r stmtRoute) String() string { return routeNames[r] }

// numKinds is how many router.Kind values there are (KindTxn is the last).
const numKinds = int(router.KindTxn) + 1

// latencyBuckets span 100µs (a point select on a warm replica over
// loopback) to 10s, in roughly 1-2.5-5 steps.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// metrics are the Server's Prometheus collectors, on a registry of its own
// so several Servers (tests) never collide. Every name starts with sluice_.
// Collectors are safe for concurrent use. What a statement updates is
// resolved to label children once, in newMetrics, so the hot path costs
// atomic adds and one histogram Observe, with no label lookup or
// allocation.
type metrics struct {
	reg         *prometheus.Registry
	clients     prometheus.Gauge
	logins      *prometheus.CounterVec // by result
	statements  *prometheus.CounterVec // by route and type
	latency     *prometheus.HistogramVec
	errors      *prometheus.CounterVec // ERR packets sent to clients, by code
	backendErrs *prometheus.CounterVec // by role
	pins        *prometheus.CounterVec // sessions pinned, by reason
	bytes       *prometheus.CounterVec // by direction
	// replicaRefusals counts statements a read-only replica connection
	// refused with 1792 and the master ran instead, by cluster.
	replicaRefusals *prometheus.CounterVec

	// stmt and observe are the resolved children, by route and kind;
	// nil for routes the Server cannot take (shard and scatter without
	// sharding rules), whose series are then never exported.
	stmt    [numRoutes][numKinds]prometheus.Counter
	observe [numRoutes]prometheus.Observer
	// toBackend and toClient count the bytes of the client commands
	// forwarded to backends and of the answers relayed back.
	toBackend, toClient prometheus.Counter

	// errMu guards errByCode, the error counter children resolved so far:
	// codes are few, errors are not the hot path, and a child resolved
	// once costs no formatting after.
	errMu     sync.RWMutex
	errByCode map[uint16]prometheus.Counter

	// slowThreshold (nanoseconds; 0: off) and logSQL are the slow-query
	// log's settings (Server.SetSlowQueryLog).
	slowThreshold atomic.Int64
	logSQL        atomic.Bool
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_client_connections", Help: "Client connections currently open.",
		}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_logins_total", Help: "Client logins by result (ok, denied, error, blocked: refused by the login backoff).",
		}, []string{"result"}),
		statements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_statements_total",
			Help: "Client statements (COM_QUERY, COM_STMT_EXECUTE) that reached a backend, by route (master, replica, shard, scatter) and type (read, write, txn, set, use).",
		}, []string{"route", "type"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_statement_duration_seconds",
			Help:    "Time from reading a client statement to the end of its answer, by route.",
			Buckets: latencyBuckets,
		}, []string{"route"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_client_errors_total",
			Help: "ERR packets sent to clients (relayed from a backend or made by sluice), by MySQL error code.",
		}, []string{"code"}),
		backendErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_backend_errors_total", Help: "Backend connections that failed or broke, by role.",
		}, []string{"role"}),
		pins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_session_pins_total",
			Help: "Sessions pinned to their backend connections (no multiplexing until reset or end), by the reason that pinned them first.",
		}, []string{"reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_relayed_bytes_total",
			Help: "Payload bytes relayed: client commands forwarded to backends (to_backend) and backend answers relayed to clients (to_client).",
		}, []string{"direction"}),
		replicaRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_replica_write_refusals_total",
			Help: "Statements sluice sent to a replica that its read-only connection refused as a write (error 1792), re-run on the master, by cluster.",
		}, []string{"cluster"}),
		errByCode: make(map[uint16]prometheus.Counter),
	}
	m.reg.MustRegister(m.clients, m.logins, m.statements, m.latency, m.errors, m.backendErrs, m.pins, m.bytes, m.replicaRefusals,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	m.addRoutes(routeMaster, routeReplica)
	m.toBackend = m.bytes.WithLabelValues("to_backend")
	m.toClient = m.bytes.WithLabelValues("to_client")
	return m
}

// addRoutes resolves the statement children of routes; the Server calls
// it before serving, so the data plane reads them without a lock.
func (m *metrics) addRoutes(routes ...stmtRoute) {
	for _, r := range routes {
		for k := range numKinds {
			m.stmt[r][k] = m.statements.WithLabelValues(r.String(), router.Kind(k).String())
		}
		m.observe[r] = m.latency.WithLabelValues(r.String())
	}
}

// clientError counts one ERR packet with code sent to a client.
func (m *metrics) clientError(code uint16) {
	m.errMu.RLock()
	c := m.errByCode[code]
	m.errMu.RUnlock()
	if c == nil {
		m.errMu.Lock()
		if c = m.errByCode[code]; c == nil {
			c = m.errors.WithLabelValues(strconv.Itoa(int(code)))
			m.errByCode[code] = c
		}
		m.errMu.Unlock()
	}
	c.Inc()
}

// serveMetrics serves /metrics, /healthz and /readyz on addr until ctx
// ends.
func (s *Server) serveMetrics(ctx context.Context, addr string) (net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: s.metricsHandler(), ReadHeaderTimeout: 5 * time.Second}
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

// metricsHandler routes the metrics listener's paths.
func (s *Server) metricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", s.serveReadyz)
	return mux
}
