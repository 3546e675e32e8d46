package binlog

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the tailers' Prometheus metrics, one series per cluster.
// One Metrics serves every tailer of a process; a nil *Metrics records
// nothing. Safe for concurrent use.
type Metrics struct {
	events     *prometheus.CounterVec
	reconnects *prometheus.CounterVec
	lagSeconds *prometheus.GaugeVec
}

// NewMetrics registers the tailers' metrics with reg (documented in
// docs/operations.md).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_binlog_events_total",
			Help: "Binary log events the cache's binlog tailer read from the cluster's master.",
		}, []string{"cluster"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_binlog_reconnects_total",
			Help: "Connections of the binlog tailer to the cluster's master that broke or could not be opened (the tailer reconnects).",
		}, []string{"cluster"}),
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_binlog_lag_seconds",
			Help: "How far behind the master the binlog tailer is: now less the timestamp of the last event read, 0 once the master has sent all it has.",
		}, []string{"cluster"}),
	}
	reg.MustRegister(m.events, m.reconnects, m.lagSeconds)
	return m
}

// Cluster creates the cluster's series at 0, so they exist from start.
func (m *Metrics) Cluster(cluster string) {
	if m == nil {
		return
	}
	m.events.WithLabelValues(cluster)
	m.reconnects.WithLabelValues(cluster)
	m.lagSeconds.WithLabelValues(cluster)
}

func (m *Metrics) event(cluster string) {
	if m != nil {
		m.events.WithLabelValues(cluster).Inc()
	}
}

func (m *Metrics) reconnect(cluster string) {
	if m != nil {
		m.reconnects.WithLabelValues(cluster).Inc()
	}
}

func (m *Metrics) lag(cluster string, ts uint32) {
	if m != nil && ts != 0 {
		m.lagSeconds.WithLabelValues(cluster).Set(lagNow(ts))
	}
}

func (m *Metrics) caughtUp(cluster string) {
	if m != nil {
		m.lagSeconds.WithLabelValues(cluster).Set(0)
	}
}
