package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestCheckConfigBadFiles: each broken file gives exit status 1 and exactly
// one line that names the problem.
func TestCheckConfigBadFiles(t *testing.T) {
	cases := []struct {
		file string
		want []string
	}{
		{"../../conf/testdata/bad-typo.toml", []string{`unknown key "cluster.replica.wieght"`, "line 12"}},
		{"../../conf/testdata/bad-missing-master.toml", []string{`cluster[0] ("main"): master is required`}},
		{"../../conf/testdata/bad-duration.toml", []string{`proxy.handshake_timeout: invalid duration "5 parsecs"`, "line 3"}},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run([]string{"check-config", c.file}, &out, &errb)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", c.file, code)
		}
		if out.Len() != 0 {
			t.Errorf("%s: stdout %q, want nothing", c.file, out.String())
		}
		msg := strings.TrimRight(errb.String(), "\n")
		if strings.Count(msg, "\n") != 0 {
			t.Errorf("%s: %d lines, want one:\n%s", c.file, strings.Count(msg, "\n")+1, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not contain %q", c.file, msg, w)
			}
		}
	}
}

func TestCheckConfigGoodFilePrintsTopology(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"check-config", "../../conf/testdata/sluice.toml"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, w := range []string{"master   127.0.0.1:3306", "replica  127.0.0.1:3307", `cluster "db1"`} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("topology lacks %q:\n%s", w, out.String())
		}
	}
}

func TestUnknownSubcommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
