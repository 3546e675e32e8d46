package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/rules"
)

// FirewallStateFile is the file under proxy.state_dir that keeps the
// firewall's allowlists across restarts.
const FirewallStateFile = "firewall.json"

// firewallSaveDelay gathers the digests a burst of learning adds into one
// write of the state file.
const firewallSaveDelay = time.Second

// firewallStore persists the firewall's allowlist (rules.Allowlist) in
// proxy.state_dir: read once at start, written atomically (a temporary
// file renamed over the old one) a moment after learning changed it, at
// once after an admin command changed it, and at shutdown. Without a
// state_dir it writes nothing. Its methods are safe for concurrent use.
type firewallStore struct {
	dir   string
	allow *rules.Allowlist
	log   *zap.Logger

	mu sync.Mutex // one write at a time
	// saved is the allowlist's Version the file holds.
	saved uint64
}

// loadFirewall reads the allowlists kept in dir ("" keeps none). A missing
// file is an empty allowlist; a file that does not read is an error
// naming it: starting without the allowlists would make every enforcing
// user's statements fail.
func loadFirewall(dir string, log *zap.Logger) (*firewallStore, error) {
	f := &firewallStore{dir: dir, allow: rules.NewAllowlist(), log: log}
	if dir == "" {
		return f, nil // conf.Warnings says what that means, and New logs it
	}
	path := filepath.Join(dir, FirewallStateFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("proxy: firewall allowlists: %w", err)
	}
	if err := f.allow.UnmarshalState(data); err != nil {
		return nil, fmt.Errorf("proxy: firewall allowlists %s (fix or remove the file): %w", path, err)
	}
	f.saved = f.allow.Version()
	log.Info("firewall allowlists loaded", zap.String("path", path), zap.Int("digests", f.allow.Len()))
	return f, nil
}

// run writes the allowlists a moment after each change until ctx ends.
func (f *firewallStore) run(ctx context.Context) {
	if f.dir == "" {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.allow.Changed():
		}
		t := time.NewTimer(firewallSaveDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return // Close writes what is left
		case <-t.C:
		}
		if err := f.save(); err != nil {
			f.log.Error("cannot write the firewall allowlists", zap.Error(err))
		}
	}
}

// save writes the allowlists when they changed since the last write.
func (f *firewallStore) save() error {
	if f.dir == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.allow.Version() == f.saved {
		return nil
	}
	data, v, err := f.allow.MarshalState()
	if err != nil {
		return fmt.Errorf("firewall allowlists: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(f.dir, FirewallStateFile), append(data, '\n')); err != nil {
		return fmt.Errorf("firewall allowlists: %w", err)
	}
	f.saved = v
	return nil
}

// writeFileAtomic replaces path with data so that a crash leaves the old
// or the new content: a synced temporary file in the same directory,
// renamed over path, and the directory synced.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// saveFirewall is the admin port's SaveFirewall: the change is on disk
// when the command answers.
func (srv *Server) saveFirewall() error {
	if err := srv.fw.save(); err != nil {
		srv.log.Error("cannot write the firewall allowlists", zap.Error(err))
		return protocol.ERUnknownError.New("sluice admin: the change applies, but writing it to proxy.state_dir failed (a restart would lose it): %v", err)
	}
	return nil
}
