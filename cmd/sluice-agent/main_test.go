package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/health/loadavg"
)

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-bogus"}, {"extra"}, {"-cpus", "-1"}} {
		var out strings.Builder
		if code := run(args, &out); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (%s)", args, code, out.String())
		}
	}
	var out strings.Builder
	if code := run([]string{"-listen", "127.0.0.1:99999"}, &out); code != 1 || !strings.Contains(out.String(), "99999") {
		t.Errorf("bad listen address: status %d, %q", code, out.String())
	}
}

// TestVersion: -version prints the stamped version and commit and exits 0
// without serving.
func TestVersion(t *testing.T) {
	var out strings.Builder
	code := run([]string{"-version", "-listen", "127.0.0.1:99999"}, &out)
	if want := "sluice-agent dev (commit unknown, go"; code != 0 || !strings.HasPrefix(out.String(), want) {
		t.Errorf("-version: status %d, %q, want 0 and %q...", code, out.String(), want)
	}
}

// TestServesAndStops runs the agent on 127.0.0.1:0 with a chosen file and
// CPU count, reads its report over HTTP, and stops it with SIGTERM.
func TestServesAndStops(t *testing.T) {
	file := filepath.Join(t.TempDir(), "loadavg")
	if err := os.WriteFile(file, []byte("2.00 1.00 0.50 1/10 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	status := make(chan int, 1)
	go func() {
		status <- run([]string{"-listen", "127.0.0.1:0", "-loadavg", file, "-cpus", "4"}, pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var url string
	for lines.Scan() {
		if m := regexp.MustCompile(`serving (http://\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			url = m[1]
			break
		}
	}
	if url == "" {
		t.Fatal("the agent did not say where it serves")
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := loadavg.Fetch(ctx, http.DefaultClient, url)
	if err != nil || r != (loadavg.Report{Load1: 2, Load5: 1, Load15: 0.5, CPUs: 4}) {
		t.Fatalf("report %+v, %v", r, err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-status:
		if code != 0 {
			t.Fatalf("exit status %d after SIGTERM", code)
		}
	case <-ctx.Done():
		t.Fatal("the agent did not stop on SIGTERM")
	}
}
