package conf

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLoginBackoffAndShutdownDefaults: the login backoff is on (5 failures,
// 1s doubling to 30s), shutdown waits 30s for work in flight and starts at
// once, and the admin and metrics ports listen on loopback.
func TestLoginBackoffAndShutdownDefaults(t *testing.T) {
	c := mustParse(t, base)
	x := c.Proxy
	if x.LoginFailuresBeforeBackoff != 5 || x.LoginBackoff.Duration != time.Second || x.LoginBackoffMax.Duration != 30*time.Second {
		t.Errorf("login backoff defaults: %d, %s, %s; want 5, 1s, 30s", x.LoginFailuresBeforeBackoff, x.LoginBackoff, x.LoginBackoffMax)
	}
	if x.ShutdownDelay.Duration != 0 || x.ShutdownTimeout.Duration != 30*time.Second {
		t.Errorf("shutdown defaults: delay %s, timeout %s; want 0s, 30s", x.ShutdownDelay, x.ShutdownTimeout)
	}
	if !IsLoopbackListen(x.AdminListen) || !IsLoopbackListen(x.MetricsListen) || !IsLoopbackListen(x.Listen) {
		t.Errorf("default listeners not on loopback: %s, %s, %s", x.Listen, x.AdminListen, x.MetricsListen)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("the defaults give warnings: %q", w)
	}
}

func TestLoginBackoffAndShutdownParse(t *testing.T) {
	c := mustParse(t, base+"[proxy]\nlogin_failures_before_backoff = 3\nlogin_backoff = \"200ms\"\nlogin_backoff_max = \"2s\"\n"+
		"shutdown_delay = \"5s\"\nshutdown_timeout = \"1m\"\n")
	x := c.Proxy
	if x.LoginFailuresBeforeBackoff != 3 || x.LoginBackoff.Duration != 200*time.Millisecond || x.LoginBackoffMax.Duration != 2*time.Second ||
		x.ShutdownDelay.Duration != 5*time.Second || x.ShutdownTimeout.Duration != time.Minute {
		t.Errorf("parsed %+v", x)
	}
	if _, err := Parse([]byte(base + "[proxy]\nlogin_failures_before_backoff = 0\n")); err != nil {
		t.Errorf("0 (off) refused: %v", err)
	}
}

func TestLoginBackoffAndShutdownInvalid(t *testing.T) {
	cases := []struct{ name, toml, want string }{
		{"negative failures", "login_failures_before_backoff = -1",
			"proxy.login_failures_before_backoff must be >= 0 (0 switches the login backoff off; got -1)"},
		{"zero backoff", `login_backoff = "0s"`, "proxy.login_backoff must be > 0 (got 0s)"},
		{"max below first", "login_backoff = \"10s\"\nlogin_backoff_max = \"5s\"",
			"proxy.login_backoff_max must be >= proxy.login_backoff (got 5s < 10s)"},
		{"negative delay", `shutdown_delay = "-1s"`, "proxy.shutdown_delay must be >= 0 (got -1s)"},
		{"zero timeout", `shutdown_timeout = "0s"`, "proxy.shutdown_timeout must be > 0 (got 0s)"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(base + "[proxy]\n" + c.toml + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// TestLoginBackoffAndShutdownReloadLive: the new keys apply on reload.
func TestLoginBackoffAndShutdownReloadLive(t *testing.T) {
	old := mustParse(t, base)
	n := mustParse(t, base)
	n.Proxy.LoginFailuresBeforeBackoff = 0
	n.Proxy.LoginBackoff = Duration{2 * time.Second}
	n.Proxy.LoginBackoffMax = Duration{time.Minute}
	n.Proxy.ShutdownDelay = Duration{time.Second}
	n.Proxy.ShutdownTimeout = Duration{5 * time.Second}
	got := Diff(old, n).Strings()
	want := []string{
		"proxy.login_failures_before_backoff: 5 -> 0",
		"proxy.login_backoff: 1s -> 2s",
		"proxy.login_backoff_max: 30s -> 1m",
		"proxy.shutdown_delay: 0s -> 1s",
		"proxy.shutdown_timeout: 30s -> 5s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Diff = %q, want %q", got, want)
	}
	if l := Live(old, n); l.Proxy.ShutdownTimeout.Duration != 5*time.Second || l.Proxy.LoginFailuresBeforeBackoff != 0 {
		t.Errorf("Live did not take the new values: %+v", l.Proxy)
	}
}

func TestIsLoopbackListen(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:6033":       true,
		"127.0.0.2:6033":       true,
		"[::1]:6033":           true,
		"localhost:6033":       true,
		"[::ffff:127.0.0.1]:1": true,
		":6033":                false,
		"0.0.0.0:6033":         false,
		"[::]:6033":            false,
		"10.0.0.5:6033":        false,
		"203.0.113.7:6033":     false,
		"db.example.com:6033":  false,
		"garbage":              false,
	} {
		if got := IsLoopbackListen(addr); got != want {
			t.Errorf("IsLoopbackListen(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestWarningsPublicListeners(t *testing.T) {
	cases := []struct {
		name, proxy string
		want        []string
	}{
		{"public client port without TLS", `listen = "0.0.0.0:6033"`, []string{`proxy.listen "0.0.0.0:6033" accepts clients from other hosts without TLS`}},
		{"public client port with TLS", "listen = \":6033\"\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"", nil},
		{"public admin port", `admin_listen = "[::]:6032"`, []string{`proxy.admin_listen "[::]:6032" accepts admin logins from other hosts`}},
		{"public metrics port", `metrics_listen = "10.1.2.3:6070"`, []string{`proxy.metrics_listen "10.1.2.3:6070" serves /metrics to other hosts`}},
		{"admin and metrics off", "admin_listen = \"\"\nmetrics_listen = \"\"", nil},
		{"all public", "listen = \":6033\"\nadmin_listen = \":6032\"\nmetrics_listen = \"db1:6070\"",
			[]string{"proxy.listen", "proxy.admin_listen", "proxy.metrics_listen"}},
	}
	for _, c := range cases {
		cfg := mustParse(t, base+"[proxy]\n"+c.proxy+"\n")
		got := cfg.Warnings()
		if len(got) != len(c.want) {
			t.Errorf("%s: warnings %q, want %d", c.name, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.HasPrefix(got[i], w) {
				t.Errorf("%s: warning %q, want it to start with %q", c.name, got[i], w)
			}
		}
	}
}
