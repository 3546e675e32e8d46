// Package sluicebin builds the sluice binary for tests that run it as a
// process of its own (memory, shutdown, soak, crash and chaos tests), where an
// in-process Server cannot show what the deployed program does, or cannot be
// killed mid-step.
package sluicebin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// built caches the binaries of this test process by their build tags.
var built struct {
	sync.Mutex
	bins map[string]string
}

// Build builds ./cmd/sluice of the module the test runs in and returns the
// binary's path. The binary measured is the one deployed: no race detector
// even when the tests run with -race or GOFLAGS asks for it. A missing go
// command or a failed build fails the test. See BuildTags for how long the
// binary is kept.
func Build(t testing.TB) string {
	t.Helper()
	return BuildTags(t)
}

// BuildTags is Build with build tags (go build -tags), such as "failpoint".
// The binary is built once per test process and set of tags, into the
// temporary directory of the test that first asked for it, and shared by
// the calls that follow while that directory exists; a call after that
// test's end builds again (quickly: Go's build cache keeps the compiled
// packages). A table-driven test therefore builds once in its parent test.
func BuildTags(t testing.TB, tags ...string) string {
	t.Helper()
	key := strings.Join(tags, ",")
	built.Lock()
	defer built.Unlock()
	if bin, ok := built.bins[key]; ok {
		if _, err := os.Stat(bin); err == nil {
			return bin
		}
	}
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
	args := []string{"build", "-race=false", "-o", bin}
	if key != "" {
		args = append(args, "-tags", key)
	}
	build := exec.Command(goBin, append(args, "./cmd/sluice")...)
	build.Dir = filepath.Dir(gomod)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s ./cmd/sluice: %v\n%s", strings.Join(args, " "), err, out)
	}
	if built.bins == nil {
		built.bins = map[string]string{}
	}
	built.bins[key] = bin
	return bin
}

// Process is a sluice program started by Start or Run. The test owns it.
type Process struct {
	Cmd *exec.Cmd
	// Exited receives the process's exit (Wait's error) once. A caller
	// that takes it to see an early exit must send it back for the
	// cleanup (the channel holds one value). Done and Err see the same
	// exit without taking it.
	Exited chan error

	done    chan struct{}
	waitErr error
}

// WriteConfig writes cfg to a new file in a temporary directory of t and
// returns its path, for Run; several processes may be started on one file.
func WriteConfig(t testing.TB, cfg string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Start writes cfg to a file and runs `bin run -config FILE` with its
// stdout and stderr going to out. Stopping it is the caller's (see
// StopAtCleanup).
func Start(t testing.TB, bin, cfg string, out io.Writer) *Process {
	t.Helper()
	return Run(t, bin, WriteConfig(t, cfg), out)
}

// Run runs `bin run -config path` with its stdout and stderr going to out
// and env ("KEY=value", such as SLUICE_FAILPOINT=failover.promoted) added
// to the test's environment. The process gets SIGKILL if the test process
// dies first. Stopping it is the caller's (see StopAtCleanup and
// KillAtCleanup).
func Run(t testing.TB, bin, path string, out io.Writer, env ...string) *Process {
	t.Helper()
	p, err := Launch(bin, path, out, env...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Launch is Run for callers outside the test's goroutine: it returns the
// error instead of failing the test.
func Launch(bin, path string, out io.Writer, env ...string) (*Process, error) {
	cmd := exec.Command(bin, "run", "-config", path)
	cmd.Stdout, cmd.Stderr = out, out
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	// A test binary killed by its -timeout must not leave sluice running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &Process{Cmd: cmd, Exited: make(chan error, 1), done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.waitErr = err
		close(p.done)
		p.Exited <- err
	}()
	return p, nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the process's exit as Wait reported it; valid once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.waitErr
}

// Signal is the signal that ended the process, or 0 when it exited by
// itself; it waits for the exit.
func (p *Process) Signal() syscall.Signal {
	<-p.done
	var ee *exec.ExitError
	if errors.As(p.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return 0
}

// Kill sends SIGKILL and waits, at most 30 s, until the process is gone.
// Killing a process that has exited is a no-op.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.Cmd.Process.Kill()
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("sluice (pid %d) still alive 30s after SIGKILL", p.Cmd.Process.Pid)
	}
}

// KillAtCleanup makes the end of the test kill the process if it is still
// running, for processes a test expects to die or kills on purpose.
func (p *Process) KillAtCleanup(t testing.TB) {
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
	})
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
