package fleet

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// errWatchClosed ends a watch whose channel closed without an error.
var errWatchClosed = errors.New("fleet: member watch closed")

// follow keeps the view of the members: it reads them all, then applies
// the watch's events from the next revision on; a watch that fails (no
// leader, a compacted revision, a lost connection) starts it over. While
// etcd does not answer, the last view stays.
func (f *Fleet) follow() { f.loadAndWatch("member watch", f.load, f.watch) }

// loadAndWatch runs what every follower of a part of the prefix does until
// the Fleet closes: load reads that part whole (and applies it) and
// returns the revision it read at, watch applies the changes after that
// revision until it fails; then it starts over. A load that fails is
// retried with a growing pause, so an etcd outage costs nothing but
// waiting; what was applied last stays in force meanwhile.
func (f *Fleet) loadAndWatch(what string, load func() (int64, error), watch func(int64) error) {
	wait := 100 * time.Millisecond
	for f.ctx.Err() == nil {
		rev, err := load()
		if err != nil {
			if !f.pause(wait) {
				return
			}
			wait = backoff(wait)
			continue
		}
		wait = 100 * time.Millisecond
		err = watch(rev)
		if f.ctx.Err() != nil {
			return
		}
		f.log.Debug("fleet: "+what+" ended; reading again", zap.Error(err))
		if !f.pause(100 * time.Millisecond) {
			return
		}
	}
}

// load reads every membership key into the view and returns the revision
// it read at.
func (f *Fleet) load() (int64, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.probeTimeout)
	defer cancel()
	resp, err := f.cli().Get(ctx, f.membersPrefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("fleet: reading %s: %w", f.membersPrefix, err)
	}
	members := make(map[string]Member, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if m, ok := f.decode(kv); ok {
			members[m.Instance] = m
		}
	}
	f.mu.Lock()
	f.members = members
	f.mu.Unlock()
	if _, ok := members[f.self.Instance]; !ok {
		f.keyGone()
	}
	return resp.Header.Revision, nil
}

// watch applies membership changes after rev to the view until the watch
// fails or the Fleet closes. It asks for a leader, so a member that lost
// its quorum ends the watch instead of keeping it silent.
func (f *Fleet) watch(rev int64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(f.ctx))
	defer cancel()
	for wr := range f.cli().Watch(ctx, f.membersPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		f.mu.Lock()
		for _, ev := range wr.Events {
			switch ev.Type {
			case clientv3.EventTypePut:
				if m, ok := f.decode(ev.Kv); ok {
					f.members[m.Instance] = m
				}
			case clientv3.EventTypeDelete:
				delete(f.members, strings.TrimPrefix(string(ev.Kv.Key), f.membersPrefix))
				if string(ev.Kv.Key) == f.key {
					f.keyGone()
				}
			}
		}
		f.mu.Unlock()
	}
	return errWatchClosed
}

// decode reads a membership key; the instance name comes from the key,
// whatever the value says. A value that is not a record is logged and left
// out of the view.
func (f *Fleet) decode(kv *mvccpb.KeyValue) (Member, bool) {
	name := strings.TrimPrefix(string(kv.Key), f.membersPrefix)
	var m Member
	if err := json.Unmarshal(kv.Value, &m); err != nil || name == "" || strings.Contains(name, "/") {
		f.log.Warn("fleet: a membership key holds no member record; left out of SHOW FLEET",
			zap.String("key", string(kv.Key)), zap.Error(err))
		return Member{}, false
	}
	m.Instance, m.Lease = name, kv.Lease
	return m, true
}

func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int { return cmp.Compare(a.Instance, b.Instance) })
}
