package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestBuildInfoStamped: a binary built with the Makefile's -X stamps
// exports them in sluice_build_info from `sluice run`, as the version line
// prints them. It builds the binary, serves an offline configuration (no
// backend needs to answer before the first client) on free ports, reads
// the bound metrics address from the start-up log line, and scrapes it.
func TestBuildInfoStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go tool to build sluice with: %v", err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sluice")
	const version, commit = "v9.8.7-3-gfeedfac", "feedfacecafe"
	build := exec.Command(goTool, "build", "-ldflags", "-X main.version="+version+" -X main.commit="+commit, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !regexp.MustCompile(`^sluice `+regexp.QuoteMeta(version)+` \(commit `+commit+`, go`).Match(out) {
		t.Fatalf("sluice version = %q, %v", out, err)
	}

	cfg := filepath.Join(dir, "sluice.toml")
	doc := "[proxy]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"\"\nmetrics_listen = \"127.0.0.1:0\"\n\n" + offlineConfig
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-config", cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	// The start-up line names the bound metrics address; the rest of the
	// log is drained so sluice never blocks on a full pipe.
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct {
				MetricsListen string `json:"metrics_listen"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.MetricsListen != "" {
				select {
				case addr <- line.MetricsListen:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	var metrics string
	select {
	case metrics = <-addr:
	case err := <-exited:
		exited <- err
		t.Fatalf("sluice exited before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("sluice did not log its metrics address within 30s")
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := `sluice_build_info{commit="` + commit + `",go_version="` + runtime.Version() + `",version="` + version + `"} 1`
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want) + `$`).Match(body) {
		t.Fatalf("/metrics lacks %s; its build_info lines:\n%s", want,
			regexp.MustCompile(`(?m)^sluice_build_info.*$`).FindAll(body, -1))
	}
}
