package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-proxy/sluice/health"
)

// poolCollector exports every backend pool's connections at scrape time,
// from the pools' own counts: the data plane updates no gauge for them. It
// is safe for concurrent use (Pool is).
type poolCollector struct {
	s                          *Server
	open, idle, inUse, maxSize *prometheus.Desc
	waits, waitSeconds         *prometheus.Desc
	waitTimeouts, closed       *prometheus.Desc
}

func newPoolCollector(s *Server) *poolCollector {
	l := []string{"cluster", "backend"}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, l, nil) }
	return &poolCollector{
		s:           s,
		open:        d("sluice_pool_open_connections", "Data connections open to the backend (idle and in use)."),
		idle:        d("sluice_pool_idle_connections", "Data connections resting in the backend's pool."),
		inUse:       d("sluice_pool_in_use_connections", "Data connections lent to sessions right now."),
		maxSize:     d("sluice_pool_max_connections", "The pool's size (cluster pool_size): most data connections open at once."),
		waits:       d("sluice_pool_waits_total", "Borrows that found the pool full and waited for a connection."),
		waitSeconds: d("sluice_pool_wait_seconds_total", "Time borrows spent waiting for a connection of a full pool."),
		waitTimeouts: d("sluice_pool_wait_timeouts_total",
			"Borrows that waited pool_wait_timeout in vain (the client got error 1040 or the read went elsewhere)."),
		closed: d("sluice_pool_closed_connections_total", "Data connections closed (broken, dead while idle, or closed to make room)."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.idle, c.inUse, c.maxSize, c.waits, c.waitSeconds, c.waitTimeouts, c.closed} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for addr, p := range c.s.env.Pools() {
		st := p.Figures()
		cluster := p.Backend().Cluster
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, cluster, addr)
		}
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, cluster, addr)
		}
		gauge(c.open, float64(st.Open))
		gauge(c.idle, float64(st.Idle))
		gauge(c.inUse, float64(st.InUse))
		gauge(c.maxSize, float64(st.Size))
		counter(c.waits, float64(st.Waits))
		counter(c.waitSeconds, st.WaitTime.Seconds())
		counter(c.waitTimeouts, float64(st.WaitTimeouts))
		counter(c.closed, float64(st.Closes))
	}
}

// backendCollector exports the current topology snapshot at scrape time:
// each watched backend's state, replication lag and load as the prober
// last found them, and whether each cluster can serve (as /readyz judges).
// It reads atomics only and is safe for concurrent use.
type backendCollector struct {
	s                        *Server
	state, up                *prometheus.Desc
	lag, load, threads       *prometheus.Desc
	writable, serving, epoch *prometheus.Desc
}

var allStates = [...]health.State{health.StateUp, health.StateDown, health.StateLagging, health.StateFenced, health.StateOffline}

func newBackendCollector(s *Server) *backendCollector {
	return &backendCollector{
		s: s,
		state: prometheus.NewDesc("sluice_backend_state",
			"1 for the backend's current state (up, down, lagging, fenced, offline), 0 for the others.",
			[]string{"cluster", "backend", "role", "state"}, nil),
		up: prometheus.NewDesc("sluice_backend_up", "1 when the backend is up (serving), else 0.",
			[]string{"cluster", "backend", "role"}, nil),
		lag: prometheus.NewDesc("sluice_backend_replication_lag_seconds",
			"Replication lag the prober last estimated for a replica; absent while unknown (not replicating).",
			[]string{"cluster", "backend"}, nil),
		load: prometheus.NewDesc("sluice_backend_load",
			"The least-load balancer's signal: the host's 1-minute load per CPU from its agent (source agent), else Threads_running (source threads_running).",
			[]string{"cluster", "backend", "source"}, nil),
		threads: prometheus.NewDesc("sluice_backend_threads_running", "Threads_running as the prober last read it, without its own thread.",
			[]string{"cluster", "backend"}, nil),
		writable: prometheus.NewDesc("sluice_cluster_writable", "1 when the cluster has a master that is up, writable and not refused, else 0.",
			[]string{"cluster"}, nil),
		serving: prometheus.NewDesc("sluice_cluster_serving_replicas", "Replicas of the cluster that are up (may take reads).",
			[]string{"cluster"}, nil),
		epoch: prometheus.NewDesc("sluice_topology_epoch", "Epoch of the current topology snapshot (grows with each failover or change).", nil, nil),
	}
}

func (c *backendCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.up, c.lag, c.load, c.threads, c.writable, c.serving, c.epoch} {
		ch <- d
	}
}

func (c *backendCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.topo.Current()
	ch <- prometheus.MustNewConstMetric(c.epoch, prometheus.GaugeValue, float64(snap.Epoch))
	seen := make(map[string]bool)
	for _, cl := range snap.Clusters {
		ch <- prometheus.MustNewConstMetric(c.writable, prometheus.GaugeValue, boolValue(masterWritable(cl)), cl.Name)
		ch <- prometheus.MustNewConstMetric(c.serving, prometheus.GaugeValue, float64(servingReplicas(cl)), cl.Name)
		for _, b := range cl.Watched() {
			if seen[b.Address] {
				continue
			}
			seen[b.Address] = true
			st := b.State()
			role := b.Role.String()
			for _, s := range allStates {
				ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, boolValue(s == st), cl.Name, b.Address, role, s.String())
			}
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, boolValue(st == health.StateUp), cl.Name, b.Address, role)
			status := b.Status()
			if status == nil {
				continue
			}
			if status.Lag >= 0 && b.Role == health.RoleReplica {
				ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, status.Lag.Seconds(), cl.Name, b.Address)
			}
			if status.LoadSource != "" {
				ch <- prometheus.MustNewConstMetric(c.load, prometheus.GaugeValue, status.Load, cl.Name, b.Address, status.LoadSource)
			}
			ch <- prometheus.MustNewConstMetric(c.threads, prometheus.GaugeValue, float64(status.ThreadsRunning), cl.Name, b.Address)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// ruleCollector exports each query rule's hits and mirror copies at
// scrape time from the rules' own counters (rules.Set): every configured
// rule has its series from start, at 0, and a rule a reload removes
// disappears.
type ruleCollector struct {
	s                                  *Server
	hits, mirrored, dropped, mirrorErr *prometheus.Desc
}

func newRuleCollector(s *Server) *ruleCollector {
	label := []string{"rule"}
	return &ruleCollector{s: s, hits: prometheus.NewDesc("sluice_rule_hits_total",
		"Statements each query rule ([[rule]]) matched; a prepared statement counts at each execution.", label, nil),
		mirrored: prometheus.NewDesc("sluice_rule_mirrored_total",
			"Copies of statements a query rule mirrors that ran on the mirror cluster (their results, errors included, are discarded).", label, nil),
		dropped: prometheus.NewDesc("sluice_rule_mirror_dropped_total",
			"Copies of statements a query rule mirrors dropped because the mirror queue ([proxy] mirror_queue) was full.", label, nil),
		mirrorErr: prometheus.NewDesc("sluice_rule_mirror_failed_total",
			"Copies of statements a query rule mirrors that could not run: no master up on the mirror cluster, a connection or schema failure.", label, nil)}
}

func (c *ruleCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hits
	ch <- c.mirrored
	ch <- c.dropped
	ch <- c.mirrorErr
}

func (c *ruleCollector) Collect(ch chan<- prometheus.Metric) {
	rs := c.s.env.Rules().Rules()
	for i := range rs {
		r := &rs[i]
		ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(r.Hits()), r.Name)
		m, d, f := r.MirrorCounts()
		ch <- prometheus.MustNewConstMetric(c.mirrored, prometheus.CounterValue, float64(m), r.Name)
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(d), r.Name)
		ch <- prometheus.MustNewConstMetric(c.mirrorErr, prometheus.CounterValue, float64(f), r.Name)
	}
}
