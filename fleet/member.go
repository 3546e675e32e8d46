package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// register keeps this instance's membership key: it joins (a lease, the
// key bound to it, a session keeping the lease alive), waits until the
// session is lost or the Fleet closes, and joins again after a loss. Only
// its goroutine touches the session.
func (f *Fleet) register() {
	wait := 100 * time.Millisecond
	var prev clientv3.LeaseID
	for f.ctx.Err() == nil {
		sess, err := f.join(prev)
		if err != nil {
			if f.ctx.Err() != nil {
				return
			}
			f.log.Debug("fleet: joining failed; trying again", zap.Duration("in", wait), zap.Error(err))
			if !f.pause(wait) {
				return
			}
			wait = backoff(wait)
			continue
		}
		wait = 100 * time.Millisecond
		prev = sess.Lease()
		f.setSession(sess)
		again := f.hold(sess)
		f.setSession(nil)
		if !again {
			return
		}
	}
}

// hold keeps the membership key of sess until the session is lost (it
// returns true: join again) or the Fleet closes (it leaves and returns
// false). A key someone else deleted is written again under the same lease.
func (f *Fleet) hold(sess *concurrency.Session) bool {
	// retry is set while a rewrite of the record (a new applied
	// configuration revision) failed and waits to be tried again.
	var retry <-chan time.Time
	for {
		select {
		case <-f.ctx.Done():
			f.leave(sess)
			return false
		case <-f.lost:
			if err := f.rewrite(sess.Lease()); err != nil {
				// A lease that expired fails here; sess.Done follows.
				f.log.Warn("fleet: the membership key was deleted and cannot be written again yet", zap.Error(err))
				continue
			}
			f.log.Warn("fleet: the membership key was deleted by someone else; written again", zap.String("key", f.key))
		case <-f.refresh:
			retry = f.rewriteRevision(sess)
		case <-retry:
			retry = f.rewriteRevision(sess)
		case <-sess.Done():
			f.registered.Store(false)
			if f.ctx.Err() != nil {
				f.leave(sess)
				return false
			}
			// The client gives a lease up once it went a whole TTL
			// without an answer; etcd drops it and its key likewise.
			f.log.Warn("fleet: membership lease lost (etcd did not answer for session_ttl); registering again when it answers",
				zap.String("lease", fmt.Sprintf("%x", int64(sess.Lease()))), zap.Duration("session_ttl", f.cfg.SessionTTL.Duration))
			return true
		}
	}
}

// rewriteRevision writes the membership record again after the applied
// configuration revision changed; on failure it returns a timer to try
// again on (a lost lease ends the session instead, and joining writes the
// record anew).
func (f *Fleet) rewriteRevision(sess *concurrency.Session) <-chan time.Time {
	if err := f.rewrite(sess.Lease()); err != nil {
		f.log.Warn("fleet: could not write the applied configuration revision into the membership key; trying again",
			zap.Int64("config_revision", f.configRev.Load()), zap.Error(err))
		return time.After(500 * time.Millisecond)
	}
	return nil
}

// record is this instance's membership value under lease.
func (f *Fleet) record(lease clientv3.LeaseID) (string, error) {
	self := f.self
	self.Lease = int64(lease)
	self.ConfigRevision = f.configRev.Load()
	value, err := json.Marshal(self)
	if err != nil {
		return "", fmt.Errorf("fleet: encoding the membership record: %w", err)
	}
	return string(value), nil
}

// rewrite writes the membership key again under lease, if the lease lives.
func (f *Fleet) rewrite(lease clientv3.LeaseID) error {
	value, err := f.record(lease)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(f.ctx, f.probeTimeout)
	defer cancel()
	_, err = f.cli().Put(ctx, f.key, value, clientv3.WithLease(lease))
	return err
}

// keyGone is the view's report that this instance's key is absent: while
// registered, register writes it again.
func (f *Fleet) keyGone() {
	if !f.registered.Load() {
		return
	}
	select {
	case f.lost <- struct{}{}:
	default:
	}
}

// join grants a lease, writes the membership key bound to it and starts
// the session that keeps the lease alive. prev is the lease of this
// instance's last session, which may still hold the key.
func (f *Fleet) join(prev clientv3.LeaseID) (*concurrency.Session, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.probeTimeout)
	defer cancel()
	grant, err := f.cli().Grant(ctx, int64(f.cfg.SessionTTL.Duration/time.Second))
	if err != nil {
		return nil, fmt.Errorf("fleet: granting the membership lease: %w", err)
	}
	value, err := f.record(grant.ID)
	if err != nil {
		f.revoke(grant.ID)
		return nil, err
	}
	put, err := f.cli().Put(ctx, f.key, value, clientv3.WithLease(grant.ID), clientv3.WithPrevKV())
	if err != nil {
		f.revoke(grant.ID)
		return nil, fmt.Errorf("fleet: writing %s: %w", f.key, err)
	}
	if p := put.PrevKv; p != nil && p.Lease != 0 && clientv3.LeaseID(p.Lease) != prev {
		f.log.Warn("fleet: the instance's key was held under another lease: another sluice with the same instance name, or this one's previous run",
			zap.String("key", f.key), zap.String("lease", fmt.Sprintf("%x", p.Lease)))
	}
	sess, err := concurrency.NewSession(f.cli(), concurrency.WithLease(grant.ID), concurrency.WithContext(f.ctx))
	if err != nil {
		f.revoke(grant.ID)
		return nil, fmt.Errorf("fleet: keeping the membership lease alive: %w", err)
	}
	f.registered.Store(true)
	n := f.registrations.Add(1)
	f.log.Info("fleet: joined", zap.String("key", f.key), zap.String("lease", fmt.Sprintf("%x", int64(grant.ID))),
		zap.Uint64("registrations", n))
	return sess, nil
}

// leave revokes the session's lease, which deletes the membership key at
// once; the session's keep-alive ends with the Fleet's context.
func (f *Fleet) leave(sess *concurrency.Session) {
	f.registered.Store(false)
	if err := f.revoke(sess.Lease()); err != nil {
		f.log.Warn("fleet: could not revoke the membership lease; the key stays until it expires",
			zap.Duration("session_ttl", f.cfg.SessionTTL.Duration), zap.Error(err))
		return
	}
	f.log.Info("fleet: left", zap.String("key", f.key))
}

// revoke revokes lease within the request bound; the Fleet's context may
// already have ended.
func (f *Fleet) revoke(lease clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(context.Background(), f.probeTimeout)
	defer cancel()
	_, err := f.cli().Revoke(ctx, lease)
	return err
}
