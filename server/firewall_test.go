package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestFirewallStore: the allowlists survive a save and a load; a missing
// file is an empty allowlist; nothing is written when nothing changed; a
// damaged file stops the load naming it; the write replaces the file
// whole, leaving no temporary file.
func TestFirewallStore(t *testing.T) {
	dir := t.TempDir()
	f, err := loadFirewall(dir, zap.NewNop())
	if err != nil || f.allow.Len() != 0 {
		t.Fatalf("load without a file: %v, %d digests", err, f.allow.Len())
	}
	if err := f.save(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FirewallStateFile)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a save with nothing changed wrote the file (%v)", err)
	}
	at := time.Now()
	f.allow.Learn("app", 1, "select ?", at)
	f.allow.Learn("app", 2, "select ? from t", at)
	if _, err := f.allow.Allow("report", 3, "", at); err != nil {
		t.Fatal(err)
	}
	if err := f.save(); err != nil {
		t.Fatal(err)
	}
	g, err := loadFirewall(dir, zap.NewNop())
	if err != nil || g.allow.Len() != 3 || !g.allow.Allowed("app", 2) || !g.allow.Allowed("report", 3) {
		t.Fatalf("load after save: %v, %d digests", err, g.allow.Len())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the state dir holds %d files, want the state file alone", len(entries))
	}
	if err := os.WriteFile(path, []byte(`{"format": 1, "users": {"app": [{"digest_id": "nothex"}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadFirewall(dir, zap.NewNop()); err == nil || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), `digest_id "nothex"`) {
		t.Fatalf("a damaged file: %v, want an error naming the file and the value", err)
	}
	if f, err := loadFirewall("", zap.NewNop()); err != nil || f.save() != nil {
		t.Fatalf("without a state_dir: %v", err)
	}
}

// TestFirewallStoreRun: the writer saves a learnt digest without a
// shutdown, and stops with its context.
func TestFirewallStoreRun(t *testing.T) {
	dir := t.TempDir()
	f, err := loadFirewall(dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.run(ctx) }()
	f.allow.Learn("app", 42, "select ?", time.Now())
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, err := os.ReadFile(filepath.Join(dir, FirewallStateFile))
		if err == nil && strings.Contains(string(data), `"digest_id": "000000000000002a"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the learnt digest was not written within 20s (%v): %s", err, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the writer did not stop with its context")
	}
}
