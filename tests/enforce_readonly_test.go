package tests

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

// startObservedProxy starts sluice in front of the shared topology with
// extra [health] lines, logging into an observer the test can read.
func startObservedProxy(t *testing.T, healthKeys ...string) *observer.ObservedLogs {
	t.Helper()
	cfg, err := conf.Parse([]byte(env.topo.SluiceConfigWith(sandbox.SluiceOptions{
		Listen:     "127.0.0.1:0",
		ProxyKeys:  []string{`metrics_listen = ""`, `admin_listen = ""`},
		HealthKeys: healthKeys,
	})))
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	srv, err := server.New(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return logs
}

// readOnly reads @@read_only of a sandbox server as root.
func readOnly(t *testing.T, s *sandbox.Server) bool {
	t.Helper()
	var on bool
	if err := mustRoot(t, s).QueryRowContext(ctxT(t), "SELECT @@global.read_only").Scan(&on); err != nil {
		t.Fatal(err)
	}
	return on
}

// TestWritableReplicaReportedOrFenced: a configured replica found writable
// at start-up is reported, and with enforce_read_only set read-only.
func TestWritableReplicaReportedOrFenced(t *testing.T) {
	r := env.topo.Replicas[1]
	root := mustRoot(t, r)
	setReadOnly := func(on bool) {
		q := "SET GLOBAL read_only = OFF"
		if on {
			q = "SET GLOBAL read_only = ON"
		}
		if _, err := root.ExecContext(ctxT(t), q); err != nil {
			t.Fatal(err)
		}
	}
	setReadOnly(false)
	t.Cleanup(func() { setReadOnly(true) })

	logs := startObservedProxy(t)
	if readOnly(t, r) {
		t.Fatal("without enforce_read_only sluice changed the replica's read_only")
	}
	if n := logs.FilterMessageSnippet("replica is writable").FilterField(zap.String("backend", r.Addr())).Len(); n != 1 {
		t.Fatalf("writable replica %s reported %d times at start-up, want once (logs: %v)", r.Addr(), n, logs.All())
	}

	logs = startObservedProxy(t, "enforce_read_only = true")
	deadline := time.Now().Add(10 * time.Second)
	for !readOnly(t, r) {
		if time.Now().After(deadline) {
			t.Fatalf("enforce_read_only: replica %s still writable", r.Addr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if logs.FilterMessageSnippet("set read-only (enforce_read_only)").Len() != 1 {
		t.Fatalf("the fence was not logged: %v", logs.All())
	}
}
