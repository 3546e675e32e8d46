package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	// The example (installed as /etc/sluice/sluice.toml) takes its
	// secrets from these.
	t.Setenv("SLUICE_ADMIN_PASSWORD", "a")
	t.Setenv("SLUICE_BACKEND_PASSWORD", "b")
	var out, errb bytes.Buffer
	if code := run([]string{"check-config", "../../deploy/sluice.toml"}, &out, &errb); code != 0 {
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

// TestCheckConfigShardingErrors: each mistake in the sharding keys gives
// exit status 1 and a message naming the rule and the key.
func TestCheckConfigShardingErrors(t *testing.T) {
	const base = "[auth]\naddress = \"127.0.0.1:3310\"\n\n" +
		"[[cluster]]\nname = \"db1\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:3306\"\n\n" +
		"[[cluster]]\nname = \"db2\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:3406\"\n\n"
	rule := func(extra string) string {
		return "[[shard]]\nschema = \"pay\"\ntable = \"orders\"\nkey = \"uid\"\nclusters = [\"db1\", \"db2\"]\n" + extra
	}
	cases := []struct {
		name, toml string
		want       []string
	}{
		{"unknown cluster in a rule", "[[shard]]\nschema = \"pay\"\ntable = \"orders\"\nkey = \"uid\"\nalgorithm = \"mod\"\nclusters = [\"db1\", \"db9\"]\n",
			[]string{"shard[0] (pay.orders)", `no [[cluster]] is named "db9"`}},
		{"date rule without date_unit", rule("algorithm = \"date\"\n"),
			[]string{"shard[0] (pay.orders)", "date_unit is required"}},
		{"unknown date_unit", rule("algorithm = \"date\"\ndate_unit = \"week\"\n"),
			[]string{"shard[0] (pay.orders)", `date_unit: unknown value "week"`}},
		{"date_unit on a mod rule", rule("algorithm = \"mod\"\ndate_unit = \"day\"\n"),
			[]string{"shard[0] (pay.orders)", "date_unit is only used"}},
		{"id_column equal to the key", rule("algorithm = \"mod\"\nid_column = \"UID\"\n"),
			[]string{"shard[0] (pay.orders)", "id_column must differ from key"}},
		{"id_column with too many shards", rule("algorithm = \"mod\"\ntables_per_cluster = 200\nid_column = \"order_id\"\n"),
			[]string{"shard[0] (pay.orders)", "id_column", "400 shards"}},
		{"range boundaries one short", rule("algorithm = \"range\"\ntables_per_cluster = 2\nboundaries = [0, 100, 200, 300]\n"),
			[]string{"shard[0] (pay.orders)", "boundaries define 3 ranges but the rule has 4 physical tables"}},
		{"range with one boundary", rule("algorithm = \"range\"\nboundaries = [0]\n"),
			[]string{"shard[0] (pay.orders)", "boundaries need at least two values"}},
		{"range boundaries not ascending", rule("algorithm = \"range\"\nboundaries = [0, 100, 50]\n"),
			[]string{"shard[0] (pay.orders)", "strictly ascending (50 follows 100)"}},
		{"unknown default_cluster", "[sharding]\ndefault_cluster = \"db7\"\n",
			[]string{"sharding.default_cluster", `"db7"`}},
		{"max_merge_rows zero", "[sharding]\nmax_merge_rows = 0\n",
			[]string{"sharding.max_merge_rows must be >= 1"}},
		{"node_id too large", "[sharding]\nnode_id = 32\n",
			[]string{"sharding.node_id must be between 0 and 31", "32"}},
		{"node_id negative", "[sharding]\nnode_id = -1\n",
			[]string{"sharding.node_id", "-1"}},
	}
	dir := t.TempDir()
	for i, c := range cases {
		file := filepath.Join(dir, fmt.Sprintf("case%d.toml", i))
		if err := os.WriteFile(file, []byte(base+c.toml), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := run([]string{"check-config", file}, &out, &errb)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1 (stdout %q)", c.name, code, out.String())
		}
		msg := strings.TrimRight(errb.String(), "\n")
		if !strings.HasPrefix(msg, file) {
			t.Errorf("%s: %q does not start with the file name", c.name, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not contain %q", c.name, msg, w)
			}
		}
	}
}

// TestCheckConfigShardingValid: a file using every sharding key is accepted
// and its rules are printed.
func TestCheckConfigShardingValid(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sharded.toml")
	text := "[auth]\naddress = \"127.0.0.1:3310\"\n\n" +
		"[[cluster]]\nname = \"db1\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:3306\"\n\n" +
		"[[cluster]]\nname = \"db2\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:3406\"\n\n" +
		"[sharding]\ndefault_cluster = \"db2\"\nmax_merge_rows = 5000\nnode_id = 31\n\n" +
		"[[shard]]\nschema = \"pay\"\ntable = \"orders\"\nkey = \"uid\"\nalgorithm = \"mod\"\nclusters = [\"db1\", \"db2\"]\ntables_per_cluster = 4\nid_column = \"order_id\"\n\n" +
		"[[shard]]\nschema = \"pay\"\ntable = \"events\"\nkey = \"eid\"\nalgorithm = \"range\"\nclusters = [\"db1\", \"db2\"]\nboundaries = [0, 1000, 2000]\n\n" +
		"[[shard]]\nschema = \"pay\"\ntable = \"logs\"\nkey = \"day\"\nalgorithm = \"date\"\ndate_unit = \"month\"\nclusters = [\"db1\", \"db2\"]\n\n" +
		"[[broadcast]]\nschema = \"pay\"\ntable = \"countries\"\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"check-config", file}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, w := range []string{"shard pay.orders: key uid, algorithm mod, 2 cluster(s) x 4 table(s)", "shard pay.events", "shard pay.logs", "broadcast: pay.countries"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
}

// TestCheckConfigWarnsPublicListeners: a listener reachable from other hosts
// without TLS gets one warning line on stderr naming it; the file is still
// valid (exit 0, topology printed). Loopback listeners, and a public client
// port with TLS, give none.
func TestCheckConfigWarnsPublicListeners(t *testing.T) {
	const base = "[auth]\naddress = \"127.0.0.1:3310\"\n\n[[cluster]]\nname = \"main\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:3306\"\n"
	cases := []struct {
		name, proxy string
		want        []string
	}{
		{"loopback everywhere", "", nil},
		{"everything public", "listen = \"0.0.0.0:6033\"\nadmin_listen = \":6032\"\nmetrics_listen = \"[::]:6070\"\n",
			[]string{`proxy.listen "0.0.0.0:6033"`, `proxy.admin_listen ":6032"`, `proxy.metrics_listen "[::]:6070"`}},
		{"public client port with TLS", "listen = \"192.0.2.10:6033\"\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\n", nil},
		{"public client port without TLS", "listen = \"192.0.2.10:6033\"\n", []string{`proxy.listen "192.0.2.10:6033"`}},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "sluice.toml")
		if err := os.WriteFile(path, []byte("[proxy]\n"+c.proxy+"\n"+base), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if code := run([]string{"check-config", path}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d, want 0: %s", c.name, code, errb.String())
		}
		if !strings.Contains(out.String(), "master   127.0.0.1:3306") {
			t.Errorf("%s: topology not printed:\n%s", c.name, out.String())
		}
		lines := strings.Split(strings.TrimRight(errb.String(), "\n"), "\n")
		if errb.Len() == 0 {
			lines = nil
		}
		if len(lines) != len(c.want) {
			t.Errorf("%s: stderr %q, want %d warning(s)", c.name, errb.String(), len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.HasPrefix(lines[i], "warning: "+w) || !strings.Contains(lines[i], "without TLS") {
				t.Errorf("%s: line %q, want a warning about %s without TLS", c.name, lines[i], w)
			}
		}
	}
}

// TestRunCPUProfile: `sluice run -cpuprofile FILE` leaves a complete pprof
// profile (gzip-compressed) however the run ends, here at a configuration
// that does not load; a file that cannot be created stops the run at once.
func TestRunCPUProfile(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.pprof")
	var stderr bytes.Buffer
	if code := run([]string{"run", "-config", filepath.Join(dir, "missing.toml"), "-cpuprofile", prof}, io.Discard, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1 for a missing configuration: %s", code, stderr.String())
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile is %d bytes and not gzip: % x", len(b), b[:min(len(b), 8)])
	}
	stderr.Reset()
	if code := run([]string{"run", "-config", filepath.Join(dir, "missing.toml"), "-cpuprofile", filepath.Join(dir, "no", "such", "dir", "cpu.pprof")}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "cpuprofile") {
		t.Fatalf("exit %d, stderr %q: want 1 naming cpuprofile", code, stderr.String())
	}
}
