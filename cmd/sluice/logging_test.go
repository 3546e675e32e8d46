package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/server"
)

// offlineConfig is a valid configuration whose servers are never reached:
// the test builds a Server and never starts it.
const offlineConfig = `[auth]
address = "127.0.0.1:1"

[[cluster]]
name = "main"
user = "sluice"
master = "127.0.0.1:2"
`

// TestBadReloadLogsOneLine: a SIGHUP reload of a broken file is logged by
// the production logger as one JSON line naming the key and line, with no
// Go stack trace (zap's production default adds one to every error) and
// no second line from the server saying the same.
func TestBadReloadLogsOneLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.toml")
	if err := os.WriteFile(path, []byte(offlineConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := conf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	level := zap.NewAtomicLevel()
	zc, err := loggerConfig("info", false, level)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "sluice.log")
	zc.OutputPaths, zc.ErrorOutputPaths = []string{logPath}, []string{logPath}
	log, err := zc.Build()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// Line 8, in [[cluster]]: a key the schema does not know.
	if err := os.WriteFile(path, []byte(offlineConfig+"wieght = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	reload(srv, level, log)
	_ = log.Sync()

	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var reloadErr map[string]any
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines++
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON log line (a stack trace?): %q", sc.Text())
		}
		if st, ok := line["stacktrace"]; ok {
			t.Errorf("%q is logged with a stack trace:\n%v", line["msg"], st)
		}
		if line["msg"] == "SIGHUP: configuration not reloaded" {
			reloadErr = line
		}
	}
	if reloadErr == nil {
		t.Fatal(`no "SIGHUP: configuration not reloaded" line`)
	}
	if lines != 1 {
		t.Errorf("the failed reload took %d log lines, want 1", lines)
	}
	if reloadErr["level"] != "error" {
		t.Errorf("the failed reload is logged at %v, want error", reloadErr["level"])
	}
	if msg, _ := reloadErr["error"].(string); !strings.Contains(msg, `unknown key "cluster.wieght"`) || !strings.Contains(msg, "line 8") {
		t.Errorf("the failed reload's error %q does not name the key and its line", msg)
	}
}
