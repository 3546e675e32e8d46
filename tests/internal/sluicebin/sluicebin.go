// Package sluicebin builds the sluice binary for tests that run it as a
// process of its own (memory, shutdown and soak tests), where an in-process
// Server cannot show what the deployed program does.
package sluicebin

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Build builds ./cmd/sluice of the module the test runs in into a
// temporary directory of t and returns the binary's path. The binary
// measured is the one deployed: no race detector even when the tests run
// with -race or GOFLAGS asks for it. A missing go command or a failed
// build fails the test.
func Build(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build sluice: %v", err)
	}
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD: not inside a module (%q)", gomod)
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	build := exec.Command(goBin, "build", "-race=false", "-o", bin, "./cmd/sluice")
	build.Dir = filepath.Dir(gomod)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sluice: %v\n%s", err, out)
	}
	return bin
}

// Process is a sluice program started by Start. The test owns it.
type Process struct {
	Cmd *exec.Cmd
	// Exited receives the process's exit (Wait's error) once. A caller
	// that takes it to see an early exit must send it back for the
	// cleanup (the channel holds one value).
	Exited chan error
}

// Start writes cfg to a file and runs `bin run -config FILE` with its
// stdout and stderr going to out. Stopping it is the caller's (see
// StopAtCleanup).
func Start(t testing.TB, bin, cfg string, out io.Writer) *Process {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-config", path)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, Exited: make(chan error, 1)}
	go func() { p.Exited <- cmd.Wait() }()
	return p
}

// StopAtCleanup makes the end of the test send the process SIGTERM and
// fail the test unless it exits with status 0 within d (then it is
// killed); tail gives the end of its log for the message.
func (p *Process) StopAtCleanup(t testing.TB, d time.Duration, tail func() string) {
	t.Cleanup(func() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.Exited:
			if err != nil {
				t.Errorf("sluice exited with %v after SIGTERM; log tail:\n%s", err, tail())
			}
		case <-time.After(d):
			_ = p.Cmd.Process.Kill()
			<-p.Exited
			t.Errorf("sluice did not exit within %v of SIGTERM; killed; log tail:\n%s", d, tail())
		}
	})
}
