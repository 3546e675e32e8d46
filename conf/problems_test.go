package conf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryProblemInOneRun checks that one load reports every problem of a
// file, whatever stage finds it (types, durations, unknown keys, secrets,
// validation and cross-checks), one per line with the file and line, in
// file order; and that -skip-secrets (SkipSecrets) leaves secrets unread.
func TestEveryProblemInOneRun(t *testing.T) {
	const file = "testdata/many-problems.toml"
	unsetEnv(t, "SLUICE_MANY_PROBLEMS_ADMIN_PASSWORD")
	typesAndKeys := []string{
		`line 7: proxy.max_client_connections: want an integer, got a string`,
		`line 8: proxy.handshake_timeout: invalid duration "5 parsecs" (use a number with a unit: "500ms", "5s", "10m")`,
		`line 9: unknown key "proxy.lisen" (did you mean "listen"?)`,
	}
	secret := `line 12: admin.password_env: environment variable "SLUICE_MANY_PROBLEMS_ADMIN_PASSWORD" is not set`
	validation := []string{
		`line 17: cluster[0] ("main"): master is required`,
		`line 22: cluster[0] ("main"): replica[0].weight must be >= 1 (got 0)`,
		`line 29: shard[0] (pay.orders): clusters: no [[cluster]] is named "db9"`,
	}
	tests := []struct {
		name       string
		opts       LoadOptions
		want       []string
		wantSecret bool // whether the error matches ErrSecret
	}{
		{"secrets read", LoadOptions{}, join(typesAndKeys, []string{secret}, validation), true},
		{"secrets skipped", LoadOptions{SkipSecrets: true}, join(typesAndKeys, validation), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadWith(file, tt.opts)
			if err == nil {
				t.Fatalf("LoadWith succeeded: %+v", c)
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, file+": "+w)
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
			if got := errors.Is(err, ErrSecret); got != tt.wantSecret {
				t.Errorf("errors.Is(err, ErrSecret) = %v, want %v", got, tt.wantSecret)
			}
		})
	}
}

// TestProblemLines checks which line each kind of problem gets, and that a
// value reported as wrong is not reported again by the checks that run on
// the rest of the document.
func TestProblemLines(t *testing.T) {
	unsetEnv(t, "SLUICE_PROBLEM_LINES_UNSET")
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"a missing key is placed at its table", "\n[auth]\naddress = \"127.0.0.1:3310\"\n\n[[cluster]]\nname = \"main\"\n",
			"line 5: cluster[0] (\"main\"): user is required\nline 5: cluster[0] (\"main\"): master is required"},
		{"a key in the last element has its line", auth + cluster("a", "127.0.0.1:3306") + cluster("b", "127.0.0.1:3306"),
			`line 14: cluster[1] ("b"): master "127.0.0.1:3306" is already used by cluster[0] ("a") master`},
		{"a key in an earlier element has none", auth + cluster("a", "127.0.0.1:3306", "balance = \"x\"") + cluster("b", "127.0.0.1:3406", "balance = \"y\""),
			"line 15: cluster[1] (\"b\"): balance: unknown value \"y\" (want \"round-robin\", \"weighted\", \"least-load\" or \"least-conn\")\n" +
				"cluster[0] (\"a\"): balance: unknown value \"x\" (want \"round-robin\", \"weighted\", \"least-load\" or \"least-conn\")"},
		{"a wrong value is not also missing", auth + cluster("main", "", "master = 3306"),
			`line 8: cluster[0].master: want a string, got an integer`},
		{"a wrong value does not hide unknown keys", auth + cluster("main", "127.0.0.1:3306", "weigth = 1", "pool_size = \"big\""),
			"line 9: unknown key \"cluster.weigth\"\nline 10: cluster[0].pool_size: want an integer, got a string"},
		{"an unset secret and a bad value", "[admin]\npassword_env = \"SLUICE_PROBLEM_LINES_UNSET\"\n[health]\ninterval = \"soon\"\n" + base,
			"line 2: admin.password_env: environment variable \"SLUICE_PROBLEM_LINES_UNSET\" is not set\n" +
				"line 4: health.interval: invalid duration \"soon\" (use a number with a unit: \"500ms\", \"5s\", \"10m\")"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v\n--- document ---\n%s", c, tt.doc)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n got %s\nwant %s\n--- document ---\n%s", got, tt.want, tt.doc)
			}
		})
	}
}

// TestSkipSecretsStillChecksKeys: with SkipSecrets no secret is read, so
// none can fail, but keys that contradict each other are still an error.
func TestSkipSecretsStillChecksKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.toml")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	unsetEnv(t, "SLUICE_SKIP_SECRETS_UNSET")
	write(auth + cluster("main", "127.0.0.1:3306", `password_env = "SLUICE_SKIP_SECRETS_UNSET"`, `password_file = "missing"`))
	_, err := LoadWith(path, LoadOptions{SkipSecrets: true})
	want := path + `: line 9: cluster[0] ("main"): password_env and password_file are both set; set at most one of them`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}

	write(auth + cluster("main", "127.0.0.1:3306", `password_file = "missing"`))
	c, err := LoadWith(path, LoadOptions{SkipSecrets: true})
	if err != nil {
		t.Fatalf("LoadWith: %v", err)
	}
	if c.Clusters[0].Password != "" {
		t.Errorf("password = %q, want it unread", c.Clusters[0].Password)
	}
	if _, err := Load(path); !errors.Is(err, ErrSecret) || !strings.Contains(err.Error(), "password_file: open "+filepath.Join(dir, "missing")) {
		t.Errorf("Load: err = %v, want the missing file named, matching ErrSecret", err)
	}
}

// unsetEnv unsets name for the test and restores it after.
func unsetEnv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "")
	os.Unsetenv(name)
}

func join(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestMessagePath: the key a validation or secret message is about is read
// from its start, in each form those messages take; a message that starts
// otherwise gives a path that names no key.
func TestMessagePath(t *testing.T) {
	tests := []struct{ msg, want string }{
		{`proxy.listen: "x" is not host:port`, "proxy.listen"},
		{`health.timeout must be > 0 (got 0s)`, "health.timeout"},
		{`auth.backend = "static" needs at least one [[auth.user]]`, "auth.backend"},
		{`admin.password and admin.password_env are both set; set at most one of them`, "admin.password"},
		{`cluster[0] ("main"): master is required`, "cluster[0].master"},
		{`cluster[0]: name is required`, "cluster[0].name"},
		{`cluster[2] ("a"): replica[1].weight must be >= 1 (got 0)`, "cluster[2].replica[1].weight"},
		{`cluster[0] ("main"): password_env: environment variable "X" is not set`, "cluster[0].password_env"},
		{`shard[0] (pay.orders): clusters: no [[cluster]] is named "db9"`, "shard[0].clusters"},
		{`limits.user[1] ("app"): max_connections must be >= 0`, "limits.user[1].max_connections"},
		{`cluster: at least one [[cluster]] is required`, "cluster"},
		{`... and 3 more unknown keys`, ""},
	}
	for _, tt := range tests {
		if got := messagePath(tt.msg); got != tt.want {
			t.Errorf("messagePath(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}
