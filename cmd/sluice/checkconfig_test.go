package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkConfigFile is a valid configuration apart from its secrets, which
// name the variable and the file below.
const checkConfigFile = `[admin]
password_env = "SLUICE_CHECK_CONFIG_TEST_ADMIN"

[auth]
address = "127.0.0.1:3310"

[[cluster]]
name = "main"
user = "sluice"
master = "127.0.0.1:3306"
password_file = "backend.secret"
`

// TestCheckConfigExitCodes: check-config exits 0 for a good file, 1 for a
// file with problems (all of them printed, one per line, with file and
// line), and 2 for bad arguments; -h is not an error. Secrets that cannot be
// read fail the check with a hint, unless -skip-secrets is given, which
// then says that it left them unread.
func TestCheckConfigExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "sluice.toml")
	if err := os.WriteFile(good, []byte(checkConfigFile), 0o600); err != nil {
		t.Fatal(err)
	}
	// A rule that could route writes to a replica (no kind = "read").
	replicaRule := filepath.Join(dir, "replica-rule.toml")
	if err := os.WriteFile(replicaRule, []byte(checkConfigFile+"\n[[rule]]\nname = \"reports\"\nuser = \"reporting\"\nroute = \"replica\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A rule with a route, a timeout and a mirror that are each wrong.
	badActions := filepath.Join(dir, "bad-actions.toml")
	if err := os.WriteFile(badActions, []byte(checkConfigFile+"\n[[cluster]]\nname = \"b\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:3406\"\n"+
		"\n[[rule]]\nname = \"bad\"\nroute = \"nowhere\"\ntimeout = \"-1s\"\nmirror = \"main\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "backend.secret")
	const admin = "SLUICE_CHECK_CONFIG_TEST_ADMIN"
	t.Setenv(admin, "")
	os.Unsetenv(admin) // t.Setenv restores it after the test
	t.Setenv("SLUICE_MANY_PROBLEMS_ADMIN_PASSWORD", "")
	os.Unsetenv("SLUICE_MANY_PROBLEMS_ADMIN_PASSWORD")
	const many = "../../conf/testdata/many-problems.toml"
	const note = "note: -skip-secrets: password_env and password_file were not read"
	const hint = "hint: set the variables and files the secrets name"

	cases := []struct {
		name      string
		args      []string
		secrets   bool     // set the variable and write the file first
		code      int      // wanted exit status
		stdout    []string // lines or parts stdout must hold
		stderr    []string // lines stderr must be, in order ("" for none)
		stderrHas []string // parts stderr must hold, when its lines are not listed
	}{
		{name: "no file", args: nil, code: exitUsage, stderrHas: []string{"usage: sluice check-config [-skip-secrets] FILE"}},
		{name: "two files", args: []string{good, good}, code: exitUsage, stderrHas: []string{"usage:"}},
		{name: "unknown flag", args: []string{"-skip-secret", good}, code: exitUsage, stderrHas: []string{"flag provided but not defined: -skip-secret"}},
		{name: "help", args: []string{"-h"}, code: exitOK, stdout: []string{"-skip-secrets"}, stderr: []string{}},
		{name: "missing file", args: []string{filepath.Join(dir, "nope.toml")}, code: exitError, stderrHas: []string{"nope.toml: no such file"}},
		{name: "secrets set", args: []string{good}, secrets: true, code: exitOK,
			stdout: []string{"master   127.0.0.1:3306", "password from env " + admin}, stderr: []string{}},
		{name: "secrets unset", args: []string{good}, code: exitError, stderr: []string{
			good + `: line 2: admin.password_env: environment variable "` + admin + `" is not set`,
			good + `: line 11: cluster[0] ("main"): password_file: open ` + secret + `: no such file or directory`,
			hint + ", or check the rest of the file with sluice check-config -skip-secrets",
		}},
		{name: "secrets skipped", args: []string{"-skip-secrets", good}, code: exitOK,
			stdout: []string{"master   127.0.0.1:3306"}, stderr: []string{note + ", so secrets are not checked"}},
		{name: "a rule that could route writes to a replica", args: []string{"-skip-secrets", replicaRule}, code: exitError, stderr: []string{
			note + ", so secrets are not checked",
			replicaRule + `: line 16: rule[0] ("reports"): route = "replica" needs kind = "read": without it the rule could send writes to a replica (got kind "")`,
		}},
		{name: "a rule whose route, timeout and mirror are wrong", args: []string{"-skip-secrets", badActions}, code: exitError, stderr: []string{
			note + ", so secrets are not checked",
			badActions + `: line 20: rule[0] ("bad"): route must be "master", "replica" or the name of a [[cluster]] (got "nowhere", and no [[cluster]] is named so)`,
			badActions + `: line 21: rule[0] ("bad"): timeout must be > 0 (got -1s)`,
			badActions + `: line 22: rule[0] ("bad"): mirror = "main" is the cluster the rule's statements run on: the copy would run every write twice there`,
		}},
		{name: "every problem", args: []string{many}, code: exitError, stderr: []string{
			many + ": line 7: proxy.max_client_connections: want an integer, got a string",
			many + `: line 8: proxy.handshake_timeout: invalid duration "5 parsecs" (use a number with a unit: "500ms", "5s", "10m")`,
			many + `: line 9: unknown key "proxy.lisen" (did you mean "listen"?)`,
			many + `: line 12: admin.password_env: environment variable "SLUICE_MANY_PROBLEMS_ADMIN_PASSWORD" is not set`,
			many + `: line 17: cluster[0] ("main"): master is required`,
			many + `: line 22: cluster[0] ("main"): replica[0].weight must be >= 1 (got 0)`,
			many + `: line 29: shard[0] (pay.orders): clusters: no [[cluster]] is named "db9"`,
			hint + ", or check the rest of the file with sluice check-config -skip-secrets",
		}},
		{name: "every problem but secrets", args: []string{"-skip-secrets", many}, code: exitError, stderr: []string{
			note + ", so secrets are not checked",
			many + ": line 7: proxy.max_client_connections: want an integer, got a string",
			many + `: line 8: proxy.handshake_timeout: invalid duration "5 parsecs" (use a number with a unit: "500ms", "5s", "10m")`,
			many + `: line 9: unknown key "proxy.lisen" (did you mean "listen"?)`,
			many + `: line 17: cluster[0] ("main"): master is required`,
			many + `: line 22: cluster[0] ("main"): replica[0].weight must be >= 1 (got 0)`,
			many + `: line 29: shard[0] (pay.orders): clusters: no [[cluster]] is named "db9"`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(secret)
			os.Unsetenv(admin)
			if c.secrets {
				t.Setenv(admin, "admin-secret")
				if err := os.WriteFile(secret, []byte("backend-secret\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			code, out, errOut := runCLI(append([]string{"check-config"}, c.args...)...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, out, errOut)
			}
			for _, w := range c.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if c.code != exitOK && out != "" {
				t.Errorf("stdout %q, want nothing on failure", out)
			}
			if c.stderr != nil {
				if want := strings.Join(c.stderr, "\n"); strings.TrimRight(errOut, "\n") != want {
					t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
				}
			}
			for _, w := range c.stderrHas {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			for _, secret := range []string{"admin-secret", "backend-secret"} {
				if strings.Contains(out+errOut, secret) {
					t.Errorf("output shows the secret %q", secret)
				}
			}
		})
	}
}
