package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// BackendSetting is one admin setting of a backend as the fleet shares it:
// the value of <prefix>/backends/<address>/state ("offline" or "online")
// or <prefix>/backends/<address>/weight (a weight).
type BackendSetting struct {
	// Address is the backend's address, as SHOW BACKENDS lists it.
	Address string `json:"address"`
	// State is "offline" or "online" for a state key, "" for a weight key.
	State string `json:"state,omitempty"`
	// Weight is the balancer weight of a weight key, 0 for a state key.
	Weight int `json:"weight,omitempty"`
	// By and At say which instance wrote it and when, for the log.
	By string    `json:"by"`
	At time.Time `json:"at"`
	// Revision is the etcd revision of the write (not stored in the value).
	Revision int64 `json:"-"`
}

// Backend states a BackendSetting carries.
const (
	BackendOffline = "offline"
	BackendOnline  = "online"
)

// ApplyFunc applies one backend setting to this instance's topology. It
// runs on the fleet's goroutines (or SetBackend's caller) with the fleet's
// setting lock held, so it must not call back into the Fleet and must be
// quick: it flips in-memory state only.
type ApplyFunc func(BackendSetting)

// appliedSetting is what applySetting last saw of one settings key.
type appliedSetting struct {
	rev   int64
	state string
}

// errNoClient refuses a write before the client exists.
var errNoClient = errors.New("fleet: not connected to etcd yet")

// OnBackend sets the function that applies the fleet's backend settings;
// call it before Start. Without one the settings are not followed.
func (f *Fleet) OnBackend(apply ApplyFunc) { f.applyBackend = apply }

// backendsPrefix is where backend settings live, ending in "/".
func (f *Fleet) backendsPrefix() string { return f.cfg.Prefix + "/backends/" }

// SetBackend stores a backend setting in etcd for every instance and, once
// etcd took it, applies it here at once (the watch would, a moment later).
// s.State or s.Weight says which key it writes. When etcd does not take
// the write within dial_timeout it returns the error and nothing is
// applied: an instance never drifts from the fleet on its own.
func (f *Fleet) SetBackend(ctx context.Context, s BackendSetting) (int64, error) {
	c := f.cli()
	if c == nil {
		return 0, errNoClient
	}
	key := f.backendsPrefix() + s.Address + "/weight"
	if s.State != "" {
		key = f.backendsPrefix() + s.Address + "/state"
	}
	s.By, s.At = f.self.Instance, time.Now().UTC()
	value, err := json.Marshal(s)
	if err != nil {
		return 0, fmt.Errorf("fleet: encoding %s: %w", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.probeTimeout)
	defer cancel()
	resp, err := c.Put(ctx, key, string(value))
	if err != nil {
		return 0, fmt.Errorf("fleet: writing %s to etcd: %w", key, err)
	}
	s.Revision = resp.Header.Revision
	f.applySetting(key, s, true)
	return s.Revision, nil
}

// applySetting applies s, the value of key, unless a later revision of the
// key was applied already: the watch and SetBackend's own apply may come
// in either order, and the last write to etcd must win everywhere. A
// change (not a full read) applies "online" always; a full read applies it
// only over an "offline" this instance applied, since ONLINE also ends a
// fence, and an old "online" must not un-fence a master failed over since.
func (f *Fleet) applySetting(key string, s BackendSetting, change bool) {
	f.settingsMu.Lock()
	defer f.settingsMu.Unlock()
	prev := f.applied[key]
	if prev.rev >= s.Revision {
		return
	}
	f.applied[key] = appliedSetting{rev: s.Revision, state: s.State}
	if s.State == BackendOnline && !change && prev.state != BackendOffline {
		return
	}
	if f.applyBackend != nil {
		f.applyBackend(s)
	}
}

// followBackends reads every backend setting, applies them (the settings
// stored before this instance started included), and follows the watch;
// a failed watch starts it over, as follow does for the members.
func (f *Fleet) followBackends() {
	f.loadAndWatch("backend settings watch", f.loadBackends, f.watchBackends)
}

// loadBackends applies every stored backend setting and returns the
// revision it read at.
func (f *Fleet) loadBackends() (int64, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.probeTimeout)
	defer cancel()
	p := f.backendsPrefix()
	resp, err := f.cli().Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("fleet: reading %s: %w", p, err)
	}
	for _, kv := range resp.Kvs {
		if s, ok := f.decodeSetting(kv); ok {
			f.applySetting(string(kv.Key), s, false)
		}
	}
	return resp.Header.Revision, nil
}

// watchBackends applies the settings written after rev until the watch
// fails or the Fleet closes. A deleted state key (etcdctl del) puts the
// backend online; a deleted weight key changes nothing.
func (f *Fleet) watchBackends(rev int64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(f.ctx))
	defer cancel()
	p := f.backendsPrefix()
	for wr := range f.cli().Watch(ctx, p, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			key := string(ev.Kv.Key)
			switch ev.Type {
			case clientv3.EventTypePut:
				if s, ok := f.decodeSetting(ev.Kv); ok {
					f.applySetting(key, s, true)
				}
			case clientv3.EventTypeDelete:
				if addr, ok := strings.CutSuffix(strings.TrimPrefix(key, p), "/state"); ok {
					f.applySetting(key, BackendSetting{Address: addr, State: BackendOnline, By: "(key deleted)", Revision: ev.Kv.ModRevision}, true)
				}
			}
		}
	}
	return errWatchClosed
}

// decodeSetting reads a backend setting key; the address and kind come
// from the key, whatever the value says. A value that is not a setting is
// logged and ignored.
func (f *Fleet) decodeSetting(kv *mvccpb.KeyValue) (BackendSetting, bool) {
	rest := strings.TrimPrefix(string(kv.Key), f.backendsPrefix())
	i := strings.LastIndexByte(rest, '/')
	var s BackendSetting
	err := json.Unmarshal(kv.Value, &s)
	if err == nil && i > 0 {
		s.Address, s.Revision = rest[:i], kv.ModRevision
		switch rest[i+1:] {
		case "state":
			if s.State == BackendOffline || s.State == BackendOnline {
				s.Weight = 0
				return s, true
			}
		case "weight":
			if s.Weight >= 1 {
				s.State = ""
				return s, true
			}
		}
	}
	f.log.Warn("fleet: a backend settings key holds no valid setting; ignored",
		zap.String("key", string(kv.Key)), zap.ByteString("value", kv.Value), zap.Error(err))
	return BackendSetting{}, false
}
