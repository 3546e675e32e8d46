package tests

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-proxy/sluice/server"
)

// scrape returns the value of one sample line of the shared sluice's /metrics.
func scrape(t *testing.T, sample string) float64 {
	t.Helper()
	return scrapeFrom(t, env.srv, sample)
}

// scrapeFrom returns the value of one sample line of srv's /metrics, 0 when it has none.
func scrapeFrom(t *testing.T, srv *server.Server, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + srv.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// metricFamilies is one parsed scrape of /metrics.
type metricFamilies map[string]*dto.MetricFamily

// scrapeAll fetches and parses srv's /metrics with the Prometheus text
// parser, so a malformed exposition fails the test.
func scrapeAll(t *testing.T, srv *server.Server) metricFamilies {
	t.Helper()
	resp, err := http.Get("http://" + srv.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// find returns the sample of family name whose labels include labels (nil
// when there is none).
func (f metricFamilies) find(name string, labels map[string]string) *dto.Metric {
next:
	for _, m := range f[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is a counter's or gauge's value (0 when absent).
func (f metricFamilies) value(name string, labels map[string]string) float64 {
	m := f.find(name, labels)
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// count is a histogram's sample count (0 when absent).
func (f metricFamilies) count(name string, labels map[string]string) uint64 {
	return f.find(name, labels).GetHistogram().GetSampleCount()
}

// TestMetricsTraffic runs a read, a forced-master read, writes, a failing
// statement and a failed login through sluice and checks each moves the
// counters and histograms it should, by exactly what it did.
func TestMetricsTraffic(t *testing.T) {
	ctx := ctxT(t)
	before := scrapeAll(t, env.srv)
	c := conn(t, appDB(t, "sluice_test", nil))

	serverID(t, ctx, c, "")                     // replica, read
	serverID(t, ctx, c, "/* sluice:master */ ") // master, read
	mustExecC(t, c, "CREATE TABLE IF NOT EXISTS metrics_t (id INT PRIMARY KEY, v INT)")
	mustExecC(t, c, "REPLACE INTO metrics_t VALUES (1, 1)")
	_, err := c.ExecContext(ctx, "SELECT * FROM sluice_test.metrics_no_such_table") // replica, read, 1146
	if n := mysqlErrNumber(err); n != 1146 {
		t.Fatalf("SELECT from a missing table: %v, want error 1146", err)
	}
	o := env.topo.Opts
	bad, err := sql.Open("mysql", dsn(env.addr, o.AppUser, o.AppPassword+"-wrong", "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.PingContext(ctx); mysqlErrNumber(err) != 1045 {
		t.Fatalf("login with a wrong password: %v, want error 1045", err)
	}

	want := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"sluice_statements_total", map[string]string{"route": "replica", "type": "read"}, 2},
		{"sluice_statements_total", map[string]string{"route": "master", "type": "read"}, 1},
		{"sluice_statements_total", map[string]string{"route": "master", "type": "write"}, 2},
		{"sluice_client_errors_total", map[string]string{"code": "1146"}, 1},
		{"sluice_client_errors_total", map[string]string{"code": "1045"}, 1},
		{"sluice_logins_total", map[string]string{"result": "ok"}, 1},
		{"sluice_logins_total", map[string]string{"result": "denied"}, 1},
	}
	// The client has its answer a moment before its session counts it (a
	// denied login is counted after the ERR is written): wait for the
	// counts to arrive, then check they did not overshoot.
	var after metricFamilies
	eventually(t, ctx, "the traffic is counted", func() error {
		after = scrapeAll(t, env.srv)
		for _, tc := range want {
			if d := after.value(tc.name, tc.labels) - before.value(tc.name, tc.labels); d < tc.want {
				return fmt.Errorf("%s%v grew by %v, want %v", tc.name, tc.labels, d, tc.want)
			}
		}
		return nil
	})
	for _, tc := range want {
		if d := after.value(tc.name, tc.labels) - before.value(tc.name, tc.labels); d != tc.want {
			t.Errorf("%s%v grew by %v, want %v", tc.name, tc.labels, d, tc.want)
		}
	}
	for route, want := range map[string]uint64{"replica": 2, "master": 3} {
		l := map[string]string{"route": route}
		if d := after.count("sluice_statement_duration_seconds", l) - before.count("sluice_statement_duration_seconds", l); d != want {
			t.Errorf("sluice_statement_duration_seconds{route=%q} got %d samples, want %d", route, d, want)
		}
	}
	if h := after.find("sluice_statement_duration_seconds", map[string]string{"route": "master"}).GetHistogram(); h.GetSampleSum() <= 0 ||
		len(h.GetBucket()) == 0 || h.GetBucket()[0].GetUpperBound() != 0.0001 {
		t.Errorf("master latency histogram: sum %v, buckets %v", h.GetSampleSum(), h.GetBucket())
	}
	for _, dir := range []string{"to_backend", "to_client"} {
		l := map[string]string{"direction": dir}
		if d := after.value("sluice_relayed_bytes_total", l) - before.value("sluice_relayed_bytes_total", l); d <= 0 {
			t.Errorf("sluice_relayed_bytes_total{direction=%q} grew by %v", dir, d)
		}
	}
	if after.value("sluice_client_connections", nil) < 1 {
		t.Error("sluice_client_connections < 1 with a session open")
	}
}

// TestMetricsPoolsAndBackends checks the gauges read at scrape time: every
// backend of the sandbox up with a sane pool, the replicas' lag known.
func TestMetricsPoolsAndBackends(t *testing.T) {
	// A read and a write, so both kinds of pool have opened a connection.
	c := conn(t, appDB(t, "", nil))
	serverID(t, ctxT(t), c, "")
	serverID(t, ctxT(t), c, "/* sluice:master */ ")
	var f metricFamilies
	backends := append([]string{env.topo.Master.Addr()}, func() []string {
		var out []string
		for _, r := range env.topo.Replicas {
			out = append(out, r.Addr())
		}
		return out
	}()...)
	eventually(t, ctxT(t), "every replica's lag is exported", func() error {
		f = scrapeAll(t, env.srv)
		for _, r := range backends[1:] {
			if f.find("sluice_backend_replication_lag_seconds", map[string]string{"backend": r}) == nil {
				return fmt.Errorf("no lag for replica %s yet", r)
			}
		}
		return nil
	})
	for i, addr := range backends {
		role := "replica"
		if i == 0 {
			role = "master"
		}
		l := map[string]string{"cluster": "main", "backend": addr}
		if v := f.value("sluice_backend_up", map[string]string{"backend": addr, "role": role}); v != 1 {
			t.Errorf("sluice_backend_up{backend=%q,role=%q} = %v, want 1", addr, role, v)
		}
		if v := f.value("sluice_backend_state", map[string]string{"backend": addr, "state": "up"}); v != 1 {
			t.Errorf("sluice_backend_state{backend=%q,state=up} = %v, want 1", addr, v)
		}
		size, open := f.value("sluice_pool_max_connections", l), f.value("sluice_pool_open_connections", l)
		idle, inUse := f.value("sluice_pool_idle_connections", l), f.value("sluice_pool_in_use_connections", l)
		if size <= 0 || open < 0 || open > size || idle+inUse != open {
			t.Errorf("pool of %s: size %v, open %v, idle %v, in use %v", addr, size, open, idle, inUse)
		}
		if f.find("sluice_pool_wait_seconds_total", l) == nil {
			t.Errorf("no sluice_pool_wait_seconds_total for %s", addr)
		}
		if role == "replica" {
			lag := f.value("sluice_backend_replication_lag_seconds", l)
			if lag < 0 || lag > 5 {
				t.Errorf("replica %s lag %vs, want 0..5 on an idle sandbox", addr, lag)
			}
		}
		if f.find("sluice_backend_load", l) == nil {
			t.Errorf("no sluice_backend_load for %s", addr)
		}
	}
	if f.value("sluice_pool_open_connections", map[string]string{"backend": backends[0]}) < 1 {
		t.Error("the master's pool has no open connection after a statement ran there")
	}
	if v := f.value("sluice_cluster_writable", map[string]string{"cluster": "main"}); v != 1 {
		t.Errorf("sluice_cluster_writable{cluster=main} = %v, want 1", v)
	}
}

// TestMetricsReadyz: /readyz answers 200 with the sandbox up.
func TestMetricsReadyz(t *testing.T) {
	resp, err := http.Get("http://" + env.srv.MetricsAddr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ready" {
		t.Fatalf("/readyz = %d %q, want 200 ready", resp.StatusCode, body)
	}
	h, err := http.Get("http://" + env.srv.MetricsAddr().String() + "/healthz")
	if err != nil || h.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %v %v", h, err)
	}
	h.Body.Close()
}

func TestMetricsCountPins(t *testing.T) {
	before := scrape(t, `sluice_session_pins_total{reason="user_variables"}`)
	c := conn(t, appDB(t, "", nil))
	mustExecC(t, c, "SET @pinned = 1")
	mustExecC(t, c, "SET @pinned = 2") // the same reason counts once per session
	if d := scrape(t, `sluice_session_pins_total{reason="user_variables"}`) - before; d != 1 {
		t.Fatalf("user_variables pins grew by %v, want 1", d)
	}
}
