package conf

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// withFleet is base with a [fleet] table of lines.
func withFleet(lines string) string { return base + "\n[fleet]\n" + lines + "\n" }

// TestFleetOffByDefault: without [fleet] the fleet is off and nothing of
// it shows in the description.
func TestFleetOffByDefault(t *testing.T) {
	c := mustParse(t, base)
	if c.Fleet.Enabled() || c.Fleet.Prefix != "" {
		t.Errorf("fleet without [fleet]: %+v", c.Fleet)
	}
	if strings.Contains(c.Describe(), "fleet") {
		t.Errorf("Describe mentions a fleet that is off:\n%s", c.Describe())
	}
}

// TestFleetDefaults: endpoints alone give the default prefix, instance,
// dial timeout and session TTL.
func TestFleetDefaults(t *testing.T) {
	c := mustParse(t, withFleet(`etcd = ["127.0.0.1:2379", "https://etcd2.example:2379"]`))
	f := c.Fleet
	if !f.Enabled() || f.Prefix != DefaultFleetPrefix || f.Instance != "" ||
		f.DialTimeout.Duration != DefaultFleetDialTimeout || f.SessionTTL.Duration != DefaultFleetSessionTTL || f.UsesTLS() {
		t.Errorf("defaults: %+v", f)
	}
	if d := c.Describe(); !strings.Contains(d, "fleet: etcd 127.0.0.1:2379,https://etcd2.example:2379, prefix /sluice/default") {
		t.Errorf("Describe:\n%s", d)
	}
}

// TestFleetSecret: etcd_password_env is read, and the description names
// its source, never the password.
func TestFleetSecret(t *testing.T) {
	t.Setenv("SLUICE_TEST_ETCD_PW", "etcd-s3cret")
	c := mustParse(t, withFleet(`etcd = ["127.0.0.1:2379"]
etcd_user = "sluice"
etcd_password_env = "SLUICE_TEST_ETCD_PW"`))
	if c.Fleet.EtcdPassword != "etcd-s3cret" {
		t.Errorf("password = %q", c.Fleet.EtcdPassword)
	}
	if d := c.Describe(); strings.Contains(d, "etcd-s3cret") || !strings.Contains(d, "password from env SLUICE_TEST_ETCD_PW") {
		t.Errorf("Describe:\n%s", d)
	}
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c = mustParse(t, withFleet(`etcd = ["127.0.0.1:2379"]
etcd_user = "sluice"
etcd_password_file = "`+pw+`"`))
	if c.Fleet.EtcdPassword != "from-file" {
		t.Errorf("password from file = %q", c.Fleet.EtcdPassword)
	}
}

// TestFleetValidation: every bad [fleet] value is refused with a message
// naming its key and the line it is on.
func TestFleetValidation(t *testing.T) {
	// base has 10 lines; "[fleet]" is line 12 (where a missing key is
	// placed) and the first key line 13.
	cases := []struct{ lines, want string }{
		{`prefix = "/sluice/x"`, "line 12: fleet.etcd: at least one etcd endpoint is required when fleet.prefix is set"},
		{`etcd = ["nohost"]`, `line 13: fleet.etcd: endpoint 1: "nohost" is not host:port`},
		{`etcd = ["ftp://a:1"]`, `line 13: fleet.etcd: endpoint 1: "ftp://a:1" is neither host:port nor an http:// or https:// URL`},
		{`etcd = ["a:1", "a:1"]`, `line 13: fleet.etcd: endpoint "a:1" is listed twice`},
		{"etcd = [\"a:1\"]\nprefix = \"sluice\"", `line 14: fleet.prefix: "sluice" must start with /`},
		{"etcd = [\"a:1\"]\nprefix = \"/sluice/\"", `line 14: fleet.prefix: "/sluice/" must not end with /`},
		{"etcd = [\"a:1\"]\ninstance = \"a/b\"", `line 14: fleet.instance: "a/b" must not hold /`},
		{"etcd = [\"a:1\"]\netcd_cert = \"c.pem\"", "line 14: fleet.etcd_cert and fleet.etcd_key must be set together"},
		{"etcd = [\"a:1\"]\netcd_user = \"u\"", "line 14: fleet.etcd_user needs fleet.etcd_password_env or fleet.etcd_password_file"},
		{"etcd = [\"a:1\"]\ndial_timeout = \"10ms\"", "line 14: fleet.dial_timeout must be between 100ms and 1m (got 10ms)"},
		{"etcd = [\"a:1\"]\nsession_ttl = \"1s\"", "line 14: fleet.session_ttl must be between 2s and 5m (got 1s)"},
		{"etcd = [\"a:1\"]\nsession_ttl = \"2500ms\"", "line 14: fleet.session_ttl must be whole seconds"},
		{"etcd = [\"a:1\"]\netcd_user = \"u\"\netcd_password_env = \"SLUICE_TEST_NO_SUCH_VAR\"",
			`line 15: fleet.etcd_password_env: environment variable "SLUICE_TEST_NO_SUCH_VAR" is not set`},
		{"etcd = [\"a:1\"]\nendpoints = []", `line 14: unknown key "fleet.endpoints"`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(withFleet(c.lines)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.lines, err, c.want)
		}
	}
}

// TestFleetNeedsRestart: every [fleet] change is listed as needing a
// restart, and a reload keeps the running [fleet].
func TestFleetNeedsRestart(t *testing.T) {
	old := mustParse(t, withFleet(`etcd = ["127.0.0.1:2379"]`))
	n := mustParse(t, withFleet(`etcd = ["127.0.0.1:2379", "127.0.0.1:2380"]
prefix = "/sluice/b"
session_ttl = "30s"`))
	d := Diff(old, n)
	want := []string{
		`needs restart: fleet.etcd: ["127.0.0.1:2379"] -> ["127.0.0.1:2379" "127.0.0.1:2380"]`,
		`needs restart: fleet.prefix: "/sluice/default" -> "/sluice/b"`,
		`needs restart: fleet.session_ttl: 10s -> 30s`,
	}
	if got := d.Strings(); !slices.Equal(got, want) {
		t.Errorf("Diff =\n%q\nwant\n%q", got, want)
	}
	live := Live(old, n)
	if !slices.Equal(live.Fleet.Etcd, old.Fleet.Etcd) || live.Fleet.Prefix != "/sluice/default" || live.Fleet.SessionTTL.Duration != 10*time.Second {
		t.Errorf("Live fleet = %+v, want the running one", live.Fleet)
	}
	if len(Diff(mustParse(t, base), mustParse(t, base))) != 0 {
		t.Error("Diff of two configurations without [fleet] is not empty")
	}
}
