package server

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-proxy/sluice/internal/promtest"
	"github.com/sluice-proxy/sluice/router"
)

// probeReadings are the documented gauges that hold what the prober last
// read from a backend (lag, load, Threads_running): they exist once a
// probe has read it, so a sluice that has not probed yet has none. The
// end-to-end TestMetricsDocumented (tests/) sees them after the first
// probe of a real topology.
var probeReadings = map[string]bool{
	"sluice_backend_replication_lag_seconds": true,
	"sluice_backend_load":                    true,
	"sluice_backend_threads_running":         true,
}

// TestMetricsAtStart: a sluice that has served nothing exports every
// metric docs/operations.md lists, and lists every metric it exports; its
// counters are at 0, with a series for each label value known at start.
func TestMetricsAtStart(t *testing.T) {
	documented, err := promtest.DocumentedMetrics("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	// Two query rules; offlineServer puts its first argument after
	// [health], where TOML lets [[rule]] tables follow.
	srv := offlineServer(t, "[[rule]]\nname = \"deny-drops\"\npattern = \"^DROP\"\nerror = true\n[[rule]]\nname = \"log-all\"\nlog = true\n", 2)
	fams, err := srv.metrics.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "sluice_") {
			exported[f.GetName()] = f
		}
	}
	var missing, undocumented []string
	for name := range documented {
		if exported[name] == nil && !probeReadings[name] {
			missing = append(missing, name)
		}
	}
	for name := range exported {
		if !documented[name] {
			undocumented = append(undocumented, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(undocumented)
	if len(missing) > 0 {
		t.Errorf("documented in docs/operations.md but not exported at start: %v", missing)
	}
	if len(undocumented) > 0 {
		t.Errorf("exported but missing from the tables of docs/operations.md's Metrics section: %v", undocumented)
	}
	for name, f := range exported {
		for _, m := range f.GetMetric() {
			if f.GetType() == dto.MetricType_COUNTER && m.GetCounter().GetValue() != 0 {
				t.Errorf("%s%v = %v at start, want 0", name, m.GetLabel(), m.GetCounter().GetValue())
			}
		}
	}

	want := []struct {
		name   string
		labels map[string]string
	}{
		{"sluice_backend_errors_total", map[string]string{"role": "master"}},
		{"sluice_backend_errors_total", map[string]string{"role": "replica"}},
		{"sluice_client_errors_total", map[string]string{"code": "1040"}},
		{"sluice_client_errors_total", map[string]string{"code": "2003"}},
		{"sluice_rate_limited_statements_total", map[string]string{"user": "default", "result": "refused"}},
		{"sluice_rate_limited_statements_total", map[string]string{"user": "default", "result": "delayed"}},
		{"sluice_replica_write_refusals_total", map[string]string{"cluster": "main"}},
		{"sluice_statements_total", map[string]string{"route": "scatter", "type": "write"}},
		{"sluice_auth_mirror_runs_total", map[string]string{"result": "error"}},
		{"sluice_auth_server_unreachable_total", nil},
		{"sluice_query_timeouts_total", nil},
		{"sluice_rule_hits_total", map[string]string{"rule": "deny-drops"}},
		{"sluice_rule_hits_total", map[string]string{"rule": "log-all"}},
	}
	for _, o := range failoverOutcomes {
		want = append(want, struct {
			name   string
			labels map[string]string
		}{"sluice_failovers_total", map[string]string{"cluster": "main", "outcome": o}})
	}
	for _, r := range []string{"ok", "denied", "error", "blocked"} {
		want = append(want, struct {
			name   string
			labels map[string]string
		}{"sluice_logins_total", map[string]string{"result": r}})
	}
	for _, reason := range router.PinNames {
		want = append(want, struct {
			name   string
			labels map[string]string
		}{"sluice_session_pins_total", map[string]string{"reason": reason}})
	}
	for _, b := range []string{"127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"} {
		for _, to := range []string{"up", "down", "lagging", "fenced", "offline"} {
			want = append(want, struct {
				name   string
				labels map[string]string
			}{"sluice_backend_state_changes_total", map[string]string{"cluster": "main", "backend": b, "to": to}})
		}
	}
	for _, w := range want {
		if promtest.Sample(t, srv.metrics.Reg, w.name, w.labels) == nil {
			t.Errorf("no series %s%v at start", w.name, w.labels)
		}
	}
}

// TestBuildInfo: sluice_build_info is 1 with the version and commit the
// binary passes in (dev and unknown before), and the Go version.
func TestBuildInfo(t *testing.T) {
	srv := offlineServer(t, "", 0)
	check := func(version, commit string) {
		t.Helper()
		m := promtest.Sample(t, srv.metrics.Reg, "sluice_build_info",
			map[string]string{"version": version, "commit": commit, "go_version": runtime.Version()})
		if m == nil || m.GetGauge().GetValue() != 1 {
			t.Fatalf("sluice_build_info{version=%q,commit=%q} = %v; have %v", version, commit, m,
				promtest.Gathered(t, srv.metrics.Reg, "sluice_build_info"))
		}
		if n := len(promtest.Gathered(t, srv.metrics.Reg, "sluice_build_info")); n != 1 {
			t.Fatalf("%d sluice_build_info series, want 1", n)
		}
	}
	check("dev", "unknown")
	srv.SetBuildInfo("v1.2.0-3-gabcdef0", "abcdef0123")
	check("v1.2.0-3-gabcdef0", "abcdef0123")
}

// TestDocsNameOnlyListedMetrics: a metric named in code style anywhere in
// the documentation (a section on failover or the login backoff, the
// README) is one the Metrics tables list, which TestMetricsAtStart holds
// equal to what sluice exports; a renamed metric cannot linger in prose.
func TestDocsNameOnlyListedMetrics(t *testing.T) {
	documented, err := promtest.DocumentedMetrics("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md", "../bench/README.md")
	named := regexp.MustCompile("`(sluice_[a-z0-9_]+)")
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			seen++
			if !documented[m[1]] {
				t.Errorf("%s names metric %s, which the Metrics tables of docs/operations.md do not list", f, m[1])
			}
		}
	}
	if seen <= len(documented) {
		t.Fatalf("found %d metric names in the docs, fewer than the %d listed: is the pattern broken?", seen, len(documented))
	}
}
