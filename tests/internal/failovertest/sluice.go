// Package failovertest holds what the crash-point and chaos tests of automatic failover
// share: sluice as a process of its own with its log (so a failpoint or a kill -9 can end it
// mid-failover), transactional writers through it that record every acknowledged COMMIT, and
// looks at a sandbox topology's servers from outside sluice (who is writable, who replicates
// from whom, what each holds of the writers' transactions). Nothing here is needed by the
// binary.
package failovertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/tests/internal/sluicebin"
)

// Config is the sluice configuration of these tests: topo's cluster "main" behind listen,
// probes every 500ms, a master down after 3 failed probes, automatic failover, the failover
// state under stateDir, and metrics and admin listeners on free ports.
func Config(topo *sandbox.Topology, listen, stateDir string) string {
	return topo.SluiceConfigWith(sandbox.SluiceOptions{
		Listen: listen,
		ProxyKeys: []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`,
			fmt.Sprintf("state_dir = %q", stateDir)},
		HealthKeys: []string{`interval = "500ms"`, `failures_before_down = 3`, `auto_failover = true`},
	})
}

// Serving is what sluice's "sluice serving" log line reports.
type Serving struct {
	Listen  string `json:"listen"`
	Metrics string `json:"metrics_listen"`
}

// Log keeps every line a sluice process wrote (JSON log lines, and the plain line a failpoint
// prints before it kills the process) and reports the "sluice serving" line. With
// SLUICE_TEST_LOG set the lines are copied to stderr, prefixed with the process's name. Safe
// for concurrent use.
type Log struct {
	name    string
	echo    bool
	mu      sync.Mutex
	partial []byte
	lines   []string
	ready   chan Serving
	served  bool
}

// maxLogLines bounds what a Log keeps; a failover test's sluice logs far less.
const maxLogLines = 100000

// NewLog returns a Log for the process called name.
func NewLog(name string) *Log {
	return &Log{name: name, echo: os.Getenv("SLUICE_TEST_LOG") != "", ready: make(chan Serving, 1)}
}

func (l *Log) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		if l.echo {
			fmt.Fprintf(os.Stderr, "%s: %s\n", l.name, line)
		}
		if len(l.lines) < maxLogLines {
			l.lines = append(l.lines, line)
		}
		if !l.served {
			var m struct {
				Msg string `json:"msg"`
				Serving
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "sluice serving" && m.Listen != "" {
				l.served = true
				l.ready <- m.Serving // buffered; sent once
			}
		}
	}
	l.partial = append([]byte(nil), l.partial...)
	return len(b), nil
}

// Grep returns the lines that contain s.
func (l *Log) Grep(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// Tail returns the last n lines, and an unfinished one, for failure messages.
func (l *Log) Tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	from := max(0, len(l.lines)-n)
	return strings.Join(l.lines[from:], "\n") + string(l.partial)
}

// Sluice is a sluice process started by StartSluice.
type Sluice struct {
	*sluicebin.Process
	Name string
	Log  *Log
	// Addr and Metrics are the client and metrics listen addresses it reported.
	Addr, Metrics string
	// Started is when the process was started, Ready when it reported serving.
	Started, Ready time.Time
}

// FailpointEnv is the environment variable a failpoint build of sluice reads.
const FailpointEnv = "SLUICE_FAILPOINT"

// StartSluice runs bin on the configuration file cfgPath with SLUICE_FAILPOINT set to
// failpoint ("" for none, whatever the test's own environment holds) and waits, at most 30 s,
// until it reports serving. The process is stopped at the end of the test if it still runs
// (SIGTERM, then SIGKILL after 20 s); how it exits then is not checked. A process that exits
// before it serves is returned with an error: a failpoint may kill it during start-up.
func StartSluice(t testing.TB, bin, cfgPath, name, failpoint string) (*Sluice, error) {
	t.Helper()
	s, err := LaunchSluice(bin, cfgPath, name, failpoint)
	if s != nil {
		t.Cleanup(func() { s.Stop(20 * time.Second) })
	}
	return s, err
}

// LaunchSluice is StartSluice without the cleanup, for a caller that stops the process
// itself, from any goroutine. The process is returned, with the error, once it started.
func LaunchSluice(bin, cfgPath, name, failpoint string) (*Sluice, error) {
	log := NewLog(name)
	s := &Sluice{Name: name, Log: log, Started: time.Now()}
	p, err := sluicebin.Launch(bin, cfgPath, log, FailpointEnv+"="+failpoint)
	if err != nil {
		return nil, err
	}
	s.Process = p
	select {
	case l := <-log.ready:
		s.Addr, s.Metrics, s.Ready = l.Listen, l.Metrics, time.Now()
		return s, nil
	case <-s.Done():
		return s, fmt.Errorf("%s exited before serving (%v); log tail:\n%s", name, s.Err(), log.Tail(30))
	case <-time.After(30 * time.Second):
		_ = s.Kill()
		return s, fmt.Errorf("%s did not report serving within 30s; killed; log tail:\n%s", name, log.Tail(30))
	}
}

// Stop sends SIGTERM and waits at most d for the exit, then kills the process. Stopping an
// exited process is a no-op.
func (s *Sluice) Stop(d time.Duration) {
	select {
	case <-s.Done():
		return
	default:
	}
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.Done():
	case <-time.After(d):
		_ = s.Kill()
	}
}

// FailpointLine is the line a failpoint build prints before it kills the process at point ("name"
// or "name#n").
func FailpointLine(point string) string {
	name, n, ok := strings.Cut(point, "#")
	if !ok {
		n = "1"
	}
	return fmt.Sprintf("failpoint: %s#%s: killing the process", name, n)
}
