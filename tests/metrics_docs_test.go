package tests

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/internal/promtest"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// startLoggedProxy starts a sluice in front of the shared topology on free
// ports whose log lines at info and above are kept; edit, when set,
// changes its configuration text first.
func startLoggedProxy(t *testing.T, edit func(string) string) (*server.Server, *observer.ObservedLogs) {
	t.Helper()
	text := env.topo.SluiceConfigWith(sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = ""`}})
	if edit != nil {
		text = edit(text)
	}
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	srv, err := server.New(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv, logs
}

// TestMetricsDocumented: a sluice in front of a real topology exports, once
// its prober has read every backend, every metric docs/operations.md lists
// (the probe readings included), and the documentation lists every metric
// it exports.
func TestMetricsDocumented(t *testing.T) {
	documented, err := promtest.DocumentedMetrics("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	// A query rule, so sluice_rule_hits_total has a series.
	srv, _ := startLoggedProxy(t, func(text string) string { return text + "\n[[rule]]\nname = \"count-all\"\n" })
	probed := func(fams metricFamilies) bool {
		up := fams["sluice_backend_up"]
		lag := fams["sluice_backend_replication_lag_seconds"]
		if up == nil || lag == nil || len(lag.GetMetric()) != len(env.topo.Replicas) {
			return false
		}
		for _, m := range up.GetMetric() {
			if m.GetGauge().GetValue() != 1 {
				return false
			}
		}
		return fams["sluice_backend_load"] != nil && fams["sluice_backend_threads_running"] != nil
	}
	var fams metricFamilies
	for deadline := time.Now().Add(20 * time.Second); ; {
		if fams = scrapeAll(t, srv); probed(fams) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the prober did not read every backend within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var missing, undocumented []string
	for name := range documented {
		if fams[name] == nil {
			missing = append(missing, name)
		}
	}
	for name := range fams {
		if strings.HasPrefix(name, "sluice_") && !documented[name] {
			undocumented = append(undocumented, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(undocumented)
	if len(missing) > 0 {
		t.Errorf("documented but not exported: %v", missing)
	}
	if len(undocumented) > 0 {
		t.Errorf("exported but not documented: %v", undocumented)
	}
	if f := fams["sluice_failovers_total"]; f == nil || len(f.GetMetric()) != 6 {
		t.Errorf("sluice_failovers_total has %d series at start, want one per outcome (6)", len(f.GetMetric()))
	}
}

// labelCount is how many times a log entry carries the field key,
// whether from the session's child logger or the call itself.
func labelCount(e observer.LoggedEntry, key string) int {
	n := 0
	for _, f := range e.Context {
		if f.Key == key {
			n++
		}
	}
	return n
}

// TestLoginFailedLogLine: a refused login is logged once, as "login
// failed", with the user exactly once (the session's fields already held
// it, and the line added it again: JSON with a duplicate key).
func TestLoginFailedLogLine(t *testing.T) {
	srv, logs := startLoggedProxy(t, nil)
	err := loginOnce(t, srv.Addr().String(), env.topo.Opts.AppUser, "not-the-password", "")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1045 {
		t.Fatalf("login with a wrong password: %v, want 1045", err)
	}
	var lines []observer.LoggedEntry
	for deadline := time.Now().Add(5 * time.Second); ; {
		if lines = logs.FilterMessage("login failed").All(); len(lines) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(lines) != 1 {
		t.Fatalf("%d \"login failed\" lines, want 1", len(lines))
	}
	if n := labelCount(lines[0], "user"); n != 1 {
		t.Fatalf("\"login failed\" carries \"user\" %d times, want once: %v", n, lines[0].Context)
	}
	if u := lines[0].ContextMap()["user"]; u != env.topo.Opts.AppUser {
		t.Fatalf("\"login failed\" names user %v, want %q", u, env.topo.Opts.AppUser)
	}
}

// TestAuthServerUnreachableCounted: a login that cannot reach the auth
// server is counted in sluice_auth_server_unreachable_total (what the
// SluiceAuthServerUnreachable alert watches) and as a login error.
func TestAuthServerUnreachableCounted(t *testing.T) {
	// Port 1 (tcpmux) has no listener on any machine the tests run on:
	// a connection there is refused at once, as by an auth server that is
	// down. A port freed a moment ago could be taken again meanwhile.
	const dead = "127.0.0.1:1"
	srv, _ := startLoggedProxy(t, func(text string) string {
		from := fmt.Sprintf("address = %q", env.topo.Auth.Addr())
		if !strings.Contains(text, from) {
			t.Fatalf("the configuration has no %s", from)
		}
		return strings.Replace(text, from, fmt.Sprintf("address = %q", dead), 1)
	})
	counter := func(name, label, value string) float64 {
		f := scrapeAll(t, srv)[name]
		if f == nil {
			t.Fatalf("no %s", name)
		}
		for _, m := range f.GetMetric() {
			if label == "" || hasLabel(m, label, value) {
				return m.GetCounter().GetValue()
			}
		}
		t.Fatalf("no %s{%s=%q}", name, label, value)
		return 0
	}
	if v := counter("sluice_auth_server_unreachable_total", "", ""); v != 0 {
		t.Fatalf("sluice_auth_server_unreachable_total = %v at start", v)
	}
	err := loginOnce(t, srv.Addr().String(), env.topo.Opts.AppUser, env.topo.Opts.AppPassword, "")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 2003 || !strings.Contains(me.Message, dead) {
		t.Fatalf("login with the auth server gone: %v, want 2003 naming %s", err, dead)
	}
	// The session counts its failed login after the client got the ERR.
	for deadline := time.Now().Add(5 * time.Second); counter("sluice_logins_total", "result", "error") != 1; {
		if time.Now().After(deadline) {
			t.Fatal("sluice_logins_total{result=\"error\"} did not reach 1 within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := counter("sluice_auth_server_unreachable_total", "", ""); v != 1 {
		t.Fatalf("sluice_auth_server_unreachable_total = %v, want 1", v)
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
