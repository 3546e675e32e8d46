package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/shard"
)

// gathered returns the samples of the metric family name on srv's
// registry, nil when it has none.
func gathered(t *testing.T, srv *Server, name string) []*dto.Metric {
	t.Helper()
	fams, err := srv.metrics.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

// sample returns the metric of family name whose labels include want, nil
// when there is none.
func sample(t *testing.T, srv *Server, name string, want map[string]string) *dto.Metric {
	t.Helper()
next:
	for _, m := range gathered(t, srv, name) {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// TestFinishCommand drives the per-command hook with what a statement
// recorded and checks the counters, the latency histogram and the
// slow-query log line it leads to.
func TestFinishCommand(t *testing.T) {
	const query = "SELECT c FROM sbtest1 WHERE id = 4242"
	for _, tc := range []struct {
		name      string
		threshold time.Duration
		logSQL    bool
		took      time.Duration
		errCode   uint16
		wantLog   bool
	}{
		{name: "fast", threshold: time.Second, took: 0},
		{name: "slow", threshold: time.Second, took: 2 * time.Second, wantLog: true},
		{name: "slow with sql", threshold: time.Second, logSQL: true, took: 2 * time.Second, wantLog: true},
		{name: "slow failing", threshold: time.Second, took: 3 * time.Second, errCode: 1146, wantLog: true},
		{name: "slow log off", threshold: 0, took: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := offlineServer(t, "", 1)
			core, logs := observer.New(zapcore.InfoLevel)
			srv.log = zap.New(core)
			srv.SetSlowQueryLog(tc.threshold, tc.logSQL)
			s := newSession(srv, 7, &benchConn{})
			s.user = "alice"
			replica := srv.topo.Current().Clusters[0].Replicas[0]
			p := append([]byte{protocol.ComQuery}, query...)
			s.rec.plan = srv.router.ClassifyBytes(p[1:])
			s.rec.note(replica, &protocol.RelayResult{Columns: true, Bytes: 100})
			s.client.SentErr = tc.errCode

			s.finishCommand(p, mono.Now()-tc.took)

			if s.rec != (commandRecord{}) || s.client.SentErr != 0 {
				t.Fatalf("the record was not cleared: %+v, SentErr %d", s.rec, s.client.SentErr)
			}
			if m := sample(t, srv, "sluice_statements_total", map[string]string{"route": "replica", "type": "read"}); m.GetCounter().GetValue() != 1 {
				t.Fatalf("statements_total{replica,read} = %v, want 1", m.GetCounter().GetValue())
			}
			h := sample(t, srv, "sluice_statement_duration_seconds", map[string]string{"route": "replica"}).GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() < tc.took.Seconds() {
				t.Fatalf("latency histogram: %d samples, sum %v; want 1 sample of >= %v", h.GetSampleCount(), h.GetSampleSum(), tc.took)
			}
			if m := sample(t, srv, "sluice_relayed_bytes_total", map[string]string{"direction": "to_client"}); m.GetCounter().GetValue() != 100 {
				t.Fatalf("to_client bytes = %v, want 100", m.GetCounter().GetValue())
			}
			if m := sample(t, srv, "sluice_relayed_bytes_total", map[string]string{"direction": "to_backend"}); m.GetCounter().GetValue() != float64(len(p)) {
				t.Fatalf("to_backend bytes = %v, want %d", m.GetCounter().GetValue(), len(p))
			}
			errs := sample(t, srv, "sluice_client_errors_total", map[string]string{"code": "1146"})
			if got := errs.GetCounter().GetValue(); (tc.errCode != 0) != (got == 1) {
				t.Fatalf("client_errors_total{code=1146} = %v with error code %d", got, tc.errCode)
			}

			slow := logs.FilterMessage("slow query").All()
			if !tc.wantLog {
				if len(slow) != 0 {
					t.Fatalf("logged %d slow-query lines, want none", len(slow))
				}
				return
			}
			if len(slow) != 1 {
				t.Fatalf("logged %d slow-query lines, want 1", len(slow))
			}
			e := slow[0]
			f := e.ContextMap()
			if e.Level != zapcore.WarnLevel || f["conn_id"] != uint32(7) || f["user"] != "alice" || f["route"] != "replica" ||
				f["backend"] != replica.Address || f["type"] != "read" || f["result_set"] != true {
				t.Fatalf("slow-query line %v %v", e.Level, f)
			}
			if d, _ := f["duration"].(time.Duration); d < tc.took {
				t.Fatalf("duration %v, want >= %v", f["duration"], tc.took)
			}
			if digest, _ := f["digest"].(string); digest == "" || strings.Contains(digest, "4242") {
				t.Fatalf("digest %q: want the normalized text without the literal", digest)
			}
			if sql, ok := f["sql"]; ok != tc.logSQL || (ok && sql != query) {
				t.Fatalf("sql field %q (present %v) with log_sql %v", sql, ok, tc.logSQL)
			}
			if code, ok := f["error_code"]; (tc.errCode != 0) != ok || (ok && code != tc.errCode) {
				t.Fatalf("error_code field %v (present %v), want %d", code, ok, tc.errCode)
			}
		})
	}
}

// TestFinishCommandNotAStatement: a command without a plan (COM_PING, a
// prepare) is neither counted nor timed, but an ERR it sent is.
func TestFinishCommandNotAStatement(t *testing.T) {
	srv := offlineServer(t, "", 1)
	s := newSession(srv, 1, &benchConn{})
	s.client.SentErr = protocol.ErUnknownStmtHandler
	s.finishCommand([]byte{protocol.ComStmtClose, 1, 0, 0, 0}, mono.Now())
	for _, m := range gathered(t, srv, "sluice_statements_total") {
		if m.GetCounter().GetValue() != 0 {
			t.Fatalf("a command without a plan was counted: %v", m)
		}
	}
	if m := sample(t, srv, "sluice_client_errors_total", map[string]string{"code": "1243"}); m.GetCounter().GetValue() != 1 {
		t.Fatalf("client_errors_total{code=1243} = %v, want 1", m.GetCounter().GetValue())
	}
}

// TestReadyz checks /readyz against the topology: ready while every
// cluster has a writable master or a serving replica.
func TestReadyz(t *testing.T) {
	for _, tc := range []struct {
		name       string
		setup      func(t *testing.T, srv *Server, c *health.Cluster)
		wantStatus int
		wantBody   string
	}{
		{"all up", func(*testing.T, *Server, *health.Cluster) {}, http.StatusOK, "ready"},
		{"master offline, a replica up", func(_ *testing.T, _ *Server, c *health.Cluster) {
			c.Master.Hold(health.StateOffline)
		}, http.StatusOK, "ready"},
		{"replicas offline, master up", func(_ *testing.T, _ *Server, c *health.Cluster) {
			for _, r := range c.Replicas {
				r.Hold(health.StateOffline)
			}
		}, http.StatusOK, "ready"},
		{"nothing serves", func(_ *testing.T, _ *Server, c *health.Cluster) {
			c.Master.Hold(health.StateOffline)
			for _, r := range c.Replicas {
				r.Hold(health.StateOffline)
			}
		}, http.StatusServiceUnavailable, "cluster main: master 127.0.0.1:2 is offline; replicas 127.0.0.1:3 offline, 127.0.0.1:4 offline"},
		{"writes refused, replicas offline", func(t *testing.T, srv *Server, c *health.Cluster) {
			for _, r := range c.Replicas {
				r.Hold(health.StateOffline)
			}
			if _, err := srv.topo.RefuseWrites("main", "two writable servers"); err != nil {
				t.Fatal(err)
			}
		}, http.StatusServiceUnavailable, "cluster main: writes refused: two writable servers"},
		{"shutting down", func(_ *testing.T, srv *Server, _ *health.Cluster) { srv.cancel() },
			http.StatusServiceUnavailable, "sluice is shutting down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := offlineServer(t, "", 2)
			tc.setup(t, srv, srv.topo.Current().Clusters[0])
			rec := httptest.NewRecorder()
			srv.metricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != tc.wantStatus || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Fatalf("/readyz = %d %q, want %d with %q", rec.Code, rec.Body.String(), tc.wantStatus, tc.wantBody)
			}
		})
	}
}

// TestCollectors checks the pool and backend gauges read at scrape time.
func TestCollectors(t *testing.T) {
	srv := offlineServer(t, "", 2)
	c := srv.topo.Current().Clusters[0]
	c.Replicas[1].Hold(health.StateOffline)
	r0 := c.Replicas[0]
	pool := srv.pool(r0.Address)
	conn := &BackendConn{Conn: protocol.NewConn(&benchConn{}), backend: r0, pool: pool}
	pool.Put(conn)

	gauge := func(name string, labels map[string]string) float64 {
		t.Helper()
		m := sample(t, srv, name, labels)
		if m == nil {
			t.Fatalf("no %s%v", name, labels)
		}
		return m.GetGauge().GetValue()
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sluice_pool_max_connections", map[string]string{"backend": c.Master.Address, "cluster": "main"}, 128},
		{"sluice_pool_idle_connections", map[string]string{"backend": r0.Address}, 1},
		{"sluice_pool_idle_connections", map[string]string{"backend": c.Master.Address}, 0},
		{"sluice_pool_in_use_connections", map[string]string{"backend": r0.Address}, 0},
		{"sluice_backend_up", map[string]string{"backend": c.Master.Address, "role": "master"}, 1},
		{"sluice_backend_up", map[string]string{"backend": c.Replicas[1].Address, "role": "replica"}, 0},
		{"sluice_backend_state", map[string]string{"backend": c.Replicas[1].Address, "state": "offline"}, 1},
		{"sluice_backend_state", map[string]string{"backend": c.Replicas[1].Address, "state": "up"}, 0},
		{"sluice_cluster_writable", map[string]string{"cluster": "main"}, 1},
		{"sluice_cluster_serving_replicas", map[string]string{"cluster": "main"}, 1},
		{"sluice_topology_epoch", nil, 1},
	} {
		if got := gauge(tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	// No probe has run: lag and load are unknown, so not exported.
	if m := gathered(t, srv, "sluice_backend_replication_lag_seconds"); len(m) != 0 {
		t.Errorf("lag exported before any probe: %v", m)
	}
	// The shard and scatter series exist even without sharding rules (a
	// reload may add some), at zero.
	if m := sample(t, srv, "sluice_statements_total", map[string]string{"route": "scatter", "type": "read"}); m == nil || m.GetCounter().GetValue() != 0 {
		t.Errorf("scatter route series without sharding: %v, want present at 0", m)
	}
}

// BenchmarkFinishCommand is the per-statement cost of the metrics hook: the
// clock read at the start, the counters, the histogram and the clear.
func BenchmarkFinishCommand(b *testing.B) {
	srv := benchServer(b)
	s := newSession(srv, 1, &benchConn{})
	replica := srv.topo.Current().Clusters[0].Replicas[0]
	p := append([]byte{protocol.ComQuery}, benchPointSelect...)
	plan := srv.router.ClassifyBytes(p[1:])
	res := protocol.RelayResult{Columns: true, Bytes: 120}
	b.ReportAllocs()
	for b.Loop() {
		start := mono.Now()
		s.rec.plan = plan
		s.rec.note(replica, &res)
		s.finishCommand(p, start)
	}
}

// TestDashboardUsesOnlyExportedMetrics: every sluice_ metric the Grafana
// dashboard queries is one sluice exports (with each labelled family given
// a sample, as traffic would).
func TestDashboardUsesOnlyExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../deploy/grafana-sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	srv := offlineServer(t, "", 1)
	m := srv.metrics
	m.Logins.WithLabelValues("ok").Inc()
	m.ClientError(1146)
	srv.stateChanges.WithLabelValues("main", "127.0.0.1:2", "down").Inc()
	srv.failover.total.WithLabelValues("main", "promoted").Inc()
	exported := map[string]bool{}
	fams, err := m.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		exported[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				exported[f.GetName()+suffix] = true
			}
		}
	}
	// Not exported before the first probe, which an offline server never
	// runs.
	exported["sluice_backend_replication_lag_seconds"] = true
	exported["sluice_backend_load"] = true
	name := regexp.MustCompile(`sluice_[a-z_]+`)
	used := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				used++
				if !exported[n] {
					t.Errorf("the dashboard queries %s, which sluice does not export", n)
				}
			}
		}
	}
	if used == 0 {
		t.Fatal("the dashboard queries no sluice_ metric")
	}
}

// TestNoteShardRoute: the route label a sharded statement gets from its
// shard.Route.
func TestNoteShardRoute(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route shard.Route
		want  observe.Route
	}{
		{"unsharded table", shard.Route{Parts: []shard.Part{{Cluster: 0}}}, observe.RouteNone},
		{"one shard", shard.Route{Parts: []shard.Part{{Cluster: 1, Shards: []int{3}}}}, observe.RouteShard},
		{"broadcast read", shard.Route{AnyOne: true, Parts: []shard.Part{{Cluster: 0}, {Cluster: 1}}}, observe.RouteNone},
		{"several shards", shard.Route{Parts: []shard.Part{{Cluster: 0, Shards: []int{0}}, {Cluster: 1, Shards: []int{1}}}}, observe.RouteScatter},
	} {
		s := &Session{}
		s.noteShardRoute(&tc.route)
		if s.rec.route != tc.want {
			t.Errorf("%s: route %q, want %q", tc.name, s.rec.route, tc.want)
		}
	}
}
