// Package observe owns what sluice tells about itself: the Prometheus
// metrics, the statement digests of SHOW QUERY DIGESTS, the SHOW EVENTS
// ring and the slow-query log's settings. The data plane records into it;
// it imports nothing of the data plane. Everything here is safe for
// concurrent use.
package observe

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// Route is where a statement ran, as the route label of the statement
// metrics says it.
type Route uint8

const (
	// RouteNone: the command reached no backend (sluice answered it, or
	// it failed before one was picked).
	RouteNone Route = iota
	RouteMaster
	RouteReplica
	// RouteShard: a statement on a sharded table that ran on one shard.
	RouteShard
	// RouteScatter: a statement sluice ran on several shards and merged.
	RouteScatter
	numRoutes
)

var routeNames = [numRoutes]string{"", "master", "replica", "shard", "scatter"}

func (r Route) String() string { return routeNames[r] }

// numKinds is how many router.Kind values there are (KindTxn is the last).
const numKinds = int(router.KindTxn) + 1

// latencyBuckets span 100µs (a point select on a warm replica over
// loopback) to 10s, in roughly 1-2.5-5 steps.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Metrics are the Server's Prometheus collectors, on a registry of its own
// so several Servers (tests) never collide. Every name starts with sluice_.
// Collectors are safe for concurrent use. What a statement updates is
// resolved to label children once, in NewMetrics, so the hot path costs
// atomic adds and one histogram Observe, with no label lookup or
// allocation.
type Metrics struct {
	Reg         *prometheus.Registry
	Clients     prometheus.Gauge
	Logins      *prometheus.CounterVec // by result
	statements  *prometheus.CounterVec // by route and type
	latency     *prometheus.HistogramVec
	errors      *prometheus.CounterVec // ERR packets sent to clients, by code
	BackendErrs *prometheus.CounterVec // by role
	Pins        *prometheus.CounterVec // sessions pinned, by reason
	bytes       *prometheus.CounterVec // by direction
	// ReplicaRefusals counts statements a read-only replica connection
	// refused with 1792 and the master ran instead, by cluster.
	ReplicaRefusals *prometheus.CounterVec
	// AuthUnreachable counts logins that could not reach the auth server
	// (no connection, or no greeting from it).
	AuthUnreachable prometheus.Counter
	// build is the sluice_build_info collector (SetBuild).
	build *buildInfo

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

func NewMetrics() *Metrics {
	m := &Metrics{
		Reg: prometheus.NewRegistry(),
		Clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_client_connections", Help: "Client connections currently open.",
		}),
		Logins: prometheus.NewCounterVec(prometheus.CounterOpts{
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
		BackendErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_backend_errors_total", Help: "Backend connections that failed or broke, by role.",
		}, []string{"role"}),
		Pins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_session_pins_total",
			Help: "Sessions pinned to their backend connections (no multiplexing until reset or end), by the reason that pinned them first.",
		}, []string{"reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_relayed_bytes_total",
			Help: "Payload bytes relayed: client commands forwarded to backends (to_backend) and backend answers relayed to clients (to_client).",
		}, []string{"direction"}),
		ReplicaRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_replica_write_refusals_total",
			Help: "Statements sluice sent to a replica that its read-only connection refused as a write (error 1792), re-run on the master, by cluster.",
		}, []string{"cluster"}),
		AuthUnreachable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_auth_server_unreachable_total",
			Help: "Client logins that could not reach the auth server (no connection to it, or no greeting from it); each also counts as a login error.",
		}),
		build:     newBuildInfo(),
		errByCode: make(map[uint16]prometheus.Counter),
	}
	m.Reg.MustRegister(m.Clients, m.Logins, m.statements, m.latency, m.errors, m.BackendErrs, m.Pins, m.bytes, m.ReplicaRefusals,
		m.AuthUnreachable, m.build,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	m.AddRoutes(RouteMaster, RouteReplica)
	m.toBackend = m.bytes.WithLabelValues("to_backend")
	m.toClient = m.bytes.WithLabelValues("to_client")
	m.initLabels()
	return m
}

// loginResults are the result label values of sluice_logins_total.
var loginResults = []string{"ok", "denied", "error", "blocked"}

// watchedCodes are the client error codes whose series exist from start,
// so that the alert rules and dashboards that rate() them see a 0 rather
// than nothing before the first such error: 1040 (no free connection or
// too many clients), 1045 (access denied), 1226 (rate limit refusal),
// 2003 (auth server or master unreachable), 2013 (backend connection
// lost). Other codes appear with their first error: there are too many to
// export them all at 0.
var watchedCodes = []uint16{1040, 1045, 1226, 2003, 2013}

// initLabels creates the series whose label values are known before the
// first event, so each exists at 0 from start: a counter that appears only
// when something happens cannot be told apart from one that is missing,
// and rate() or increase() over its first sample misses the first event.
func (m *Metrics) initLabels() {
	for _, r := range loginResults {
		m.Logins.WithLabelValues(r)
	}
	for _, role := range []string{"master", "replica"} {
		m.BackendErrs.WithLabelValues(role)
	}
	for _, name := range router.PinNames {
		m.Pins.WithLabelValues(name)
	}
	for _, code := range watchedCodes {
		m.errByCode[code] = m.errors.WithLabelValues(strconv.Itoa(int(code)))
	}
}

// AddClusters creates the per-cluster series of clusters at 0; the Server
// calls it with the configured clusters before serving.
func (m *Metrics) AddClusters(clusters ...string) {
	for _, c := range clusters {
		m.ReplicaRefusals.WithLabelValues(c)
	}
}

// SetBuild sets the version and commit sluice_build_info reports; the
// binary's main calls it with the values the build stamped.
func (m *Metrics) SetBuild(version, commit string) { m.build.set(version, commit) }

// AddRoutes resolves the statement children of routes; the Server calls
// it before serving, so the data plane reads them without a lock.
func (m *Metrics) AddRoutes(routes ...Route) {
	for _, r := range routes {
		for k := range numKinds {
			m.stmt[r][k] = m.statements.WithLabelValues(r.String(), router.Kind(k).String())
		}
		m.observe[r] = m.latency.WithLabelValues(r.String())
	}
}

// ClientError counts one ERR packet with code sent to a client.
func (m *Metrics) ClientError(code uint16) {
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

// LoginFailed counts the ERR a failed login sent the client: the auth
// server's own (relayed, carried in err) or one sluice wrote (sent).
func (m *Metrics) LoginFailed(err error, sent uint16) {
	var se *protocol.SQLError
	if errors.As(err, &se) {
		sent = se.Code
	}
	if sent != 0 {
		m.ClientError(sent)
	}
}

// SetSlowLog sets the slow-query log's threshold (0 switches it off) and
// whether its lines carry the statement text.
func (m *Metrics) SetSlowLog(threshold time.Duration, logSQL bool) {
	m.slowThreshold.Store(int64(max(threshold, 0)))
	m.logSQL.Store(logSQL)
}

// LogSQL reports whether slow-query log lines carry the statement text.
func (m *Metrics) LogSQL() bool { return m.logSQL.Load() }

// Command accounts for one answered client command: the ERR code it sent
// the client (0: none), the bytes it forwarded to a backend and relayed
// back, and for a statement of kind that reached a backend (route not
// RouteNone; statement false for other commands) its count and latency d.
// It reports whether the statement belongs in the slow-query log. It
// allocates nothing unless it meets an error code for the first time.
func (m *Metrics) Command(code uint16, route Route, toBackend, toClient int64, statement bool, kind router.Kind, d time.Duration) (slow bool) {
	if code != 0 {
		m.ClientError(code)
	}
	if route != RouteNone {
		m.toBackend.Add(float64(toBackend))
	}
	if toClient > 0 {
		m.toClient.Add(float64(toClient))
	}
	if !statement {
		return false
	}
	if k := int(kind); route != RouteNone && k < numKinds {
		if c := m.stmt[route][k]; c != nil {
			c.Inc()
			m.observe[route].Observe(d.Seconds())
		}
	}
	t := m.slowThreshold.Load()
	return t > 0 && int64(d) >= t
}
