package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMetricsAccess: the metrics listener's basic auth takes its password
// from metrics_password_env or metrics_password_file, refuses half a
// user/password or cert/key pair by name, and needs a restart to change.
func TestMetricsAccess(t *testing.T) {
	t.Setenv("SLUICE_TEST_METRICS_PASSWORD", "s3cret")
	c := mustParse(t, base+"[proxy]\nmetrics_user = \"ops\"\nmetrics_password_env = \"SLUICE_TEST_METRICS_PASSWORD\"\n"+
		"metrics_tls_cert = \"c.pem\"\nmetrics_tls_key = \"k.pem\"\n")
	if c.Proxy.MetricsUser != "ops" || c.Proxy.MetricsPassword != "s3cret" {
		t.Errorf("metrics user %q password %q, want ops s3cret", c.Proxy.MetricsUser, c.Proxy.MetricsPassword)
	}
	if !strings.Contains(c.Describe(), `metrics basic auth: user "ops", password from env SLUICE_TEST_METRICS_PASSWORD`) {
		t.Errorf("Describe does not show the metrics basic auth:\n%s", c.Describe())
	}
	if strings.Contains(c.Describe(), "s3cret") {
		t.Errorf("Describe shows the metrics password:\n%s", c.Describe())
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "metrics.password"), []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sluice.toml")
	doc := base + "[proxy]\nmetrics_user = \"ops\"\nmetrics_password_file = \"metrics.password\"\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	fc, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if fc.Proxy.MetricsPassword != "from-file" {
		t.Errorf("password from file = %q, want from-file", fc.Proxy.MetricsPassword)
	}

	for _, bad := range []struct{ name, proxy, want string }{
		{"user without password", `metrics_user = "ops"`,
			"proxy.metrics_user needs proxy.metrics_password_env or proxy.metrics_password_file"},
		{"password without user", `metrics_password_env = "SLUICE_TEST_METRICS_PASSWORD"`,
			"proxy.metrics_password_env and proxy.metrics_password_file need proxy.metrics_user"},
		{"unset variable", "metrics_user = \"ops\"\nmetrics_password_env = \"SLUICE_TEST_METRICS_UNSET\"",
			`proxy.metrics_password_env: environment variable "SLUICE_TEST_METRICS_UNSET" is not set`},
		{"both sources", "metrics_user = \"ops\"\nmetrics_password_env = \"SLUICE_TEST_METRICS_PASSWORD\"\nmetrics_password_file = \"p\"",
			"proxy.metrics_password_env and proxy.metrics_password_file are both set"},
		{"cert without key", `metrics_tls_cert = "c.pem"`, "proxy.metrics_tls_cert and proxy.metrics_tls_key must be set together"},
		{"plain-text password", `metrics_password = "x"`, "metrics_password"},
	} {
		_, err := Parse([]byte(base + "[proxy]\n" + bad.proxy + "\n"))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v, want %q", bad.name, err, bad.want)
		}
	}

	d := Diff(mustParse(t, base), c)
	if d.NeedRestart() != 4 {
		t.Errorf("Diff = %q, want the user, password, cert and key as 4 restart changes", d.Strings())
	}
	if all := strings.Join(d.Strings(), "\n"); strings.Contains(all, "s3cret") || !strings.Contains(all, "proxy.metrics_password: changed") {
		t.Errorf("Diff = %q, want the password change without the password", d.Strings())
	}
	if live := Live(mustParse(t, base), c); live.Proxy.MetricsUser != "" || live.Proxy.MetricsTLSCert != "" {
		t.Errorf("Live took the metrics user %q and cert %q from the file; they need a restart", live.Proxy.MetricsUser, live.Proxy.MetricsTLSCert)
	}
}

// TestMetricsAccessWarnings: a metrics listener on a public address is
// warned about unless it has both basic auth and TLS.
func TestMetricsAccessWarnings(t *testing.T) {
	t.Setenv("SLUICE_TEST_METRICS_PASSWORD", "s3cret")
	auth := "metrics_user = \"ops\"\nmetrics_password_env = \"SLUICE_TEST_METRICS_PASSWORD\"\n"
	tls := "metrics_tls_cert = \"c.pem\"\nmetrics_tls_key = \"k.pem\"\n"
	for _, c := range []struct {
		name, proxy string
		warned      bool
	}{
		{"auth only", auth, true},
		{"tls only", tls, true},
		{"auth and tls", auth + tls, false},
	} {
		cfg := mustParse(t, base+"[proxy]\nmetrics_listen = \"10.1.2.3:6070\"\n"+c.proxy)
		got := strings.Join(cfg.Warnings(), "\n")
		if strings.Contains(got, "proxy.metrics_listen") != c.warned {
			t.Errorf("%s: warnings %q, want a metrics_listen warning: %v", c.name, got, c.warned)
		}
	}
}
