package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// unitSettings reads a unit file's Key=Value lines (all sections together;
// a key given twice keeps every value in order).
func unitSettings(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			m[k] = append(m[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestServiceMatchesExample ties sluice.service to the installed
// configuration and to what sluice run does: it starts the binary the
// package installs with the file the package installs, waits for sd_notify,
// reloads with SIGHUP, is hardened, its StateDirectory is the file's
// state_dir, and its LimitNOFILE covers the file's max_client_connections
// with as many backend connections again.
func TestServiceMatchesExample(t *testing.T) {
	u := unitSettings(t, filepath.Join(repoRoot, "deploy/systemd/sluice.service"))
	one := func(key string) string {
		t.Helper()
		if len(u[key]) != 1 {
			t.Fatalf("sluice.service: %s set %d times, want once", key, len(u[key]))
		}
		return u[key][0]
	}
	var example struct {
		Proxy struct {
			StateDir             string `toml:"state_dir"`
			MaxClientConnections int    `toml:"max_client_connections"`
		} `toml:"proxy"`
	}
	if _, err := toml.DecodeFile(filepath.Join(repoRoot, "deploy/sluice.toml"), &example); err != nil {
		t.Fatal(err)
	}
	var confDst string
	for _, c := range contents("bin", repoRoot) {
		if c.Source == filepath.Join(repoRoot, "deploy/sluice.toml") {
			confDst = c.Destination
		}
	}

	for key, want := range map[string]string{
		"Type":            "notify",
		"ExecStart":       "/usr/bin/sluice run -config " + confDst,
		"ExecReload":      "/bin/kill -HUP $MAINPID",
		"DynamicUser":     "yes",
		"NoNewPrivileges": "yes",
		"ProtectSystem":   "strict",
		"StateDirectory":  "sluice",
	} {
		if got := one(key); got != want {
			t.Errorf("sluice.service: %s=%s, want %s", key, got, want)
		}
	}
	if want := "/var/lib/" + one("StateDirectory"); example.Proxy.StateDir != want {
		t.Errorf("deploy/sluice.toml: state_dir = %q, want the unit's StateDirectory %q", example.Proxy.StateDir, want)
	}
	n, err := strconv.Atoi(one("LimitNOFILE"))
	if err != nil {
		t.Fatalf("sluice.service: LimitNOFILE=%s: %v", one("LimitNOFILE"), err)
	}
	if need := 2 * example.Proxy.MaxClientConnections; n < need {
		t.Errorf("sluice.service: LimitNOFILE=%d is below 2 x max_client_connections (%d)", n, need)
	}
}
