package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// runMainEnv makes the test binary act as the sluice command (TestMain
// calls main), so a test can run `sluice run` as a real process without
// building the binary again.
const runMainEnv = "SLUICE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer a process may write to while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSystemdNotify runs `sluice run` as a process with NOTIFY_SOCKET
// pointing at a unixgram socket of the test, as systemd does for a
// Type=notify unit, and checks what sluice tells it: READY=1 once the
// client listener accepts connections, RELOADING=1 (with MONOTONIC_USEC)
// and then READY=1 around a SIGHUP reload, STOPPING=1 at SIGTERM, in that
// order and nothing else.
func TestSystemdNotify(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// No backend needs to answer: sluice serves (and reports the master
	// down) without one. Port 1 on loopback refuses at once.
	cfg := filepath.Join(dir, "sluice.toml")
	writeFile(t, cfg, `[proxy]
listen = "127.0.0.1:0"
admin_listen = ""
metrics_listen = ""

[auth]
backend = "static"
  [[auth.user]]
  name = "app"
  password_hash = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"

[[cluster]]
name = "main"
user = "sluice"
password = "unused"
master = "127.0.0.1:1"
`)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "run", "-config", cfg)
	cmd.Env = append(os.Environ(), runMainEnv+"=1", "NOTIFY_SOCKET="+sock)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()

	next := func(what string) string {
		t.Helper()
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 4096)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("waiting for %s: %v\nsluice's log:\n%s", what, err, stderr.String())
		}
		return string(buf[:n])
	}
	expect := func(msg string, want ...string) {
		t.Helper()
		lines := strings.Split(msg, "\n")
		for _, w := range want {
			if !slicesContainsMatch(lines, w) {
				t.Fatalf("message %q lacks a line matching %q", msg, w)
			}
		}
	}

	expect(next("READY=1"), `^READY=1$`, `^STATUS=serving on 127\.0\.0\.1:\d+$`)
	// READY=1 means the listener is open: a client connects at once.
	addr := regexp.MustCompile(`"listen":"([^"]+)"`)
	var m []string
	deadline := time.Now().Add(10 * time.Second)
	for m = addr.FindStringSubmatch(stderr.String()); m == nil && time.Now().Before(deadline); m = addr.FindStringSubmatch(stderr.String()) {
		time.Sleep(10 * time.Millisecond)
	}
	if m == nil {
		t.Fatalf("no listen address in the log:\n%s", stderr.String())
	}
	c, err := net.DialTimeout("tcp", m[1], 5*time.Second)
	if err != nil {
		t.Fatalf("READY=1 sent but %s refuses: %v", m[1], err)
	}
	c.Close()

	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	expect(next("RELOADING=1"), `^RELOADING=1$`, `^MONOTONIC_USEC=[1-9]\d*$`)
	expect(next("READY=1 after the reload"), `^READY=1$`, `^STATUS=serving; configuration reloaded$`)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	expect(next("STOPPING=1"), `^STOPPING=1$`)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("sluice run exited with %v:\n%s", waitErr, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice run did not exit after SIGTERM:\n%s", stderr.String())
	}
	// Nothing more after STOPPING=1.
	conn.SetReadDeadline(time.Now())
	if n, _ := conn.Read(make([]byte, 4096)); n > 0 {
		t.Errorf("a message after STOPPING=1")
	}
}

// TestSystemdNotifyWithoutSocket: without NOTIFY_SOCKET, notifying is a
// silent no-op (sluice started by hand logs no warning).
func TestSystemdNotifyWithoutSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	var logged syncBuffer
	log := testLogger(&logged)
	notifySystemd(log, "READY=1")
	log.Sync()
	if logged.String() != "" {
		t.Errorf("logged %q", logged.String())
	}
}

func slicesContainsMatch(lines []string, pattern string) bool {
	re := regexp.MustCompile(pattern)
	for _, l := range lines {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// testLogger logs JSON lines to w.
func testLogger(w *syncBuffer) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), zap.DebugLevel))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
