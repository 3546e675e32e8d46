package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/promtest"
)

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

	gauge := func(name string, labels map[string]string) float64 {
		t.Helper()
		m := promtest.Sample(t, srv.metrics.Reg, name, labels)
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
		{"sluice_pool_idle_connections", map[string]string{"backend": r0.Address}, 0},
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
	if m := promtest.Gathered(t, srv.metrics.Reg, "sluice_backend_replication_lag_seconds"); len(m) != 0 {
		t.Errorf("lag exported before any probe: %v", m)
	}
	// The shard and scatter series exist even without sharding rules (a
	// reload may add some), at zero.
	if m := promtest.Sample(t, srv.metrics.Reg, "sluice_statements_total", map[string]string{"route": "scatter", "type": "read"}); m == nil || m.GetCounter().GetValue() != 0 {
		t.Errorf("scatter route series without sharding: %v, want present at 0", m)
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
