package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluice-proxy/sluice/conf"
)

// The fleet's configuration is one key, <prefix>/config, holding the TOML
// text sluice config push stored; its ModRevision is the configuration's
// revision everywhere (membership records, SHOW FLEET, metrics).

// ConfigKey is the etcd key of the fleet configuration under prefix.
func ConfigKey(prefix string) string { return prefix + "/config" }

// ErrNoConfig is GetConfig's answer when nothing was pushed under the prefix.
var ErrNoConfig = errors.New("fleet: no configuration has been pushed")

// Dial makes an etcd client for [fleet] cfg, for a command that talks to
// etcd once (config push, config get); the caller closes it.
func Dial(cfg *conf.Fleet) (*clientv3.Client, error) {
	if !cfg.Enabled() {
		return nil, errors.New("fleet: [fleet] has no etcd endpoints")
	}
	tlsConf, err := clientTLS(cfg)
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: cfg.Etcd, DialTimeout: cfg.DialTimeout.Duration, TLS: tlsConf,
		Username: cfg.EtcdUser, Password: cfg.EtcdPassword,
		Logger: zap.NewNop().WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel)),
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: connecting to etcd %v: %w", cfg.Etcd, err)
	}
	return c, nil
}

// CheckConfigFile validates the file at path exactly as sluice check-config
// does and returns its text; skipSecrets is check-config's -skip-secrets.
// The error is check-config's (every problem, one per line).
func CheckConfigFile(path string, skipSecrets bool) ([]byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if _, err := conf.LoadWith(path, conf.LoadOptions{SkipSecrets: skipSecrets}); err != nil {
		return nil, err
	}
	// What is stored must be what was checked.
	again, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	if !bytes.Equal(text, again) {
		return nil, fmt.Errorf("%s changed while it was checked; push it again", path)
	}
	return text, nil
}

// PushConfig stores text as the fleet configuration under prefix and
// returns its revision. The caller validated text (CheckConfigFile): etcd
// stores what it is given.
func PushConfig(ctx context.Context, c *clientv3.Client, prefix string, text []byte) (int64, error) {
	resp, err := c.Put(ctx, ConfigKey(prefix), string(text))
	if err != nil {
		return 0, fmt.Errorf("fleet: storing %s: %w", ConfigKey(prefix), err)
	}
	return resp.Header.Revision, nil
}

// GetConfig reads the fleet configuration under prefix: its text and
// revision, or ErrNoConfig.
func GetConfig(ctx context.Context, c *clientv3.Client, prefix string) ([]byte, int64, error) {
	resp, err := c.Get(ctx, ConfigKey(prefix))
	if err != nil {
		return nil, 0, fmt.Errorf("fleet: reading %s: %w", ConfigKey(prefix), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, ErrNoConfig
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, nil
}

// ApplyConfig is how the server applies a pushed configuration: the text
// of revision rev. A nil error means it is in effect (restart-only keys
// aside); an error means the instance kept what it ran.
type ApplyConfig func(text []byte, rev int64) error

// OnConfig makes the Fleet follow the fleet configuration and hand each new
// revision to apply, one at a time, in revision order, from its own
// goroutine. Call it before Start, at most once.
func (f *Fleet) OnConfig(apply ApplyConfig) { f.applyConfig = apply }

// ConfigRevision is the revision of the fleet configuration this instance
// applied; 0 before any.
func (f *Fleet) ConfigRevision() int64 { return f.configRev.Load() }

// RejectedRevision is the last revision this instance refused (it did not
// validate or could not be applied) and why; 0 and "" when none was, or a
// later one was applied.
func (f *Fleet) RejectedRevision() (int64, string) {
	f.rejectMu.Lock()
	defer f.rejectMu.Unlock()
	return f.rejected, f.rejectedWhy
}

// followConfig reads the configuration key, hands a revision newer than
// the one applied to applyConfig, then watches the key from the revision
// read + 1. A watch that fails (compacted revision, no leader, lost
// connection) reads the key again, so a revision missed meanwhile is not
// lost: only the newest matters.
func (f *Fleet) followConfig() {
	key := ConfigKey(f.cfg.Prefix)
	load := func() (int64, error) {
		ctx, cancel := context.WithTimeout(f.ctx, f.probeTimeout)
		defer cancel()
		resp, err := f.cli().Get(ctx, key)
		if err != nil {
			return 0, err
		}
		if len(resp.Kvs) > 0 {
			f.offerConfig(resp.Kvs[0])
		}
		return resp.Header.Revision, nil
	}
	f.loadAndWatch("configuration watch", load, func(rev int64) error { return f.watchConfig(key, rev) })
}

// watchConfig offers each new value of key after rev until the watch fails
// or the Fleet closes.
func (f *Fleet) watchConfig(key string, rev int64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(f.ctx))
	defer cancel()
	for wr := range f.cli().Watch(ctx, key, clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			switch ev.Type {
			case clientv3.EventTypePut:
				f.offerConfig(ev.Kv)
			case clientv3.EventTypeDelete:
				f.log.Warn("fleet: the fleet configuration was deleted; this instance keeps the one it applied",
					zap.String("key", key), zap.Int64("config_revision", f.ConfigRevision()))
			}
		}
	}
	return errWatchClosed
}

// offerConfig applies kv when its revision is newer than the last one
// offered, and records the outcome: the applied revision in the membership
// record, or the refused one.
func (f *Fleet) offerConfig(kv *mvccpb.KeyValue) {
	rev := kv.ModRevision
	if f.applyConfig == nil || rev <= f.offered {
		return
	}
	f.offered = rev
	if err := f.applyConfig(kv.Value, rev); err != nil {
		f.rejectMu.Lock()
		f.rejected, f.rejectedWhy = rev, err.Error()
		f.rejectMu.Unlock()
		f.log.Error("fleet: configuration revision refused; this instance keeps the one it applied",
			zap.Int64("revision", rev), zap.Int64("config_revision", f.ConfigRevision()), zap.Error(err))
		return
	}
	f.rejectMu.Lock()
	f.rejected, f.rejectedWhy = 0, ""
	f.rejectMu.Unlock()
	f.configRev.Store(rev)
	f.log.Info("fleet: configuration revision applied", zap.Int64("config_revision", rev))
	// The membership key says so too: register rewrites it.
	select {
	case f.refresh <- struct{}{}:
	default:
	}
}
