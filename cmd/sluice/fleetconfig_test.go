package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
)

// pushableFile is a file check-config passes with no secret to read.
const pushableFile = `[auth]
address = "127.0.0.1:3310"

[[cluster]]
name = "main"
user = "sluice"
password = "x"
master = "127.0.0.1:3306"
  [[cluster.replica]]
  address = "127.0.0.1:3307"
  weight = 4
`

// runCmd runs the sluice command line and returns its exit status, stdout
// and stderr.
func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestConfigPushRefusesBadFile: a file check-config refuses is refused by
// config push with the same messages and status 1 before anything talks to
// etcd (the local file here names an etcd nobody listens on, and does not
// even exist in the second case); bad arguments exit 2.
func TestConfigPushRefusesBadFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte(strings.Replace(pushableFile, "weight = 4", "weight = 0", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "local.toml")
	if err := os.WriteFile(local, []byte(pushableFile+"\n[fleet]\netcd = [\"127.0.0.1:1\"]\ndial_timeout = \"100ms\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, checkErr := runCmd("check-config", bad)
	if !strings.Contains(checkErr, "weight must be >= 1") {
		t.Fatalf("check-config's message: %q", checkErr)
	}
	for _, l := range []string{local, filepath.Join(dir, "missing.toml")} {
		code, out, errOut := runCmd("config", "push", "-config", l, bad)
		if code != exitError || out != "" || !strings.HasPrefix(errOut, checkErr) || !strings.Contains(errOut, "nothing stored") {
			t.Errorf("config push of a bad file (local %s): status %d, stdout %q, stderr %q; want 1 and check-config's %q",
				filepath.Base(l), code, out, errOut, checkErr)
		}
	}
	for _, args := range [][]string{{"config"}, {"config", "push"}, {"config", "push", "a", "b"}, {"config", "get", "x"}, {"config", "nope"}} {
		if code, _, _ := runCmd(args...); code != exitUsage {
			t.Errorf("%v: status %d, want %d", args, code, exitUsage)
		}
	}
	noFleet := filepath.Join(dir, "nofleet.toml")
	if err := os.WriteFile(noFleet, []byte(pushableFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd("config", "get", "-config", noFleet); code != exitError || !strings.Contains(errOut, "[fleet] names no etcd endpoints") {
		t.Errorf("config get without [fleet]: status %d, %q", code, errOut)
	}
}

// TestConfigPushGet: against a real etcd, config push stores the file and
// prints its revision, and config get prints that revision and the text.
func TestConfigPushGet(t *testing.T) {
	c := sandbox.StartEtcdFor(t, sandbox.EtcdOptions{Members: 1})
	dir := t.TempDir()
	local := filepath.Join(dir, "local.toml")
	prefix := "/sluice/cli-test"
	if err := os.WriteFile(local, []byte(pushableFile+fmt.Sprintf("\n[fleet]\netcd = [%q]\nprefix = %q\n", c.Endpoints()[0], prefix)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCmd("config", "get", "-config", local); code != exitError || !strings.Contains(errOut, "nothing stored under "+prefix+"/config") {
		t.Errorf("config get before any push: status %d, %q", code, errOut)
	}
	file := filepath.Join(dir, "fleet.toml")
	if err := os.WriteFile(file, []byte(pushableFile), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("config", "push", "-config", local, file)
	if code != exitOK {
		t.Fatalf("config push: status %d, %q %q", code, out, errOut)
	}
	var rev int64
	if _, err := fmt.Sscanf(out, "stored "+file+" as "+prefix+"/config, revision %d\n", &rev); err != nil || rev <= 0 {
		t.Fatalf("config push printed %q (%v)", out, err)
	}
	code, out, errOut = runCmd("config", "get", "-config", local)
	want := fmt.Sprintf("# revision %d of %s/config\n%s", rev, prefix, pushableFile)
	if code != exitOK || out != want {
		t.Fatalf("config get: status %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
	// What get prints is a file check-config passes (the comment line aside).
	if _, err := conf.Parse([]byte(out)); err != nil {
		t.Errorf("config get's output does not parse: %v", err)
	}
}
