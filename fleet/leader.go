package fleet

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Lead is this instance's leadership of one cluster's prober election: while it holds, this
// instance alone may change the cluster's servers (promote, switch over, repair), and every
// write it makes to the cluster's keys in etcd is guarded by Key's CreateRevision, so a
// leader that lost its session without noticing yet writes nothing. A Lead is a value; Done
// is shared.
type Lead struct {
	Cluster string
	// Key is the election key this instance holds; Rev its CreateRevision.
	Key string
	Rev int64
	// Done is closed when the leadership ends: the session was lost or the Fleet closed.
	Done <-chan struct{}
}

// Context returns a context that ends with parent or when the leadership ends, whichever
// comes first; a failover runs under it so that no step runs after Done.
func (l Lead) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-l.Done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// setSession publishes the membership session the elections campaign under (nil while there
// is none); called by register's goroutine only.
func (f *Fleet) setSession(s *concurrency.Session) {
	f.sessMu.Lock()
	f.sess = s
	close(f.sessChanged)
	f.sessChanged = make(chan struct{})
	f.sessMu.Unlock()
}

// waitSession returns the live membership session, waiting for one; nil when the Fleet closes.
func (f *Fleet) waitSession() *concurrency.Session {
	for {
		f.sessMu.Lock()
		s, changed := f.sess, f.sessChanged
		f.sessMu.Unlock()
		if s != nil {
			select {
			case <-s.Done():
			default:
				return s
			}
		}
		select {
		case <-f.ctx.Done():
			return nil
		case <-changed:
		}
	}
}

// Leader returns this instance's leadership of cluster, false when it does not lead it.
func (f *Fleet) Leader(cluster string) (Lead, bool) {
	f.leadMu.Lock()
	defer f.leadMu.Unlock()
	l, ok := f.leads[cluster]
	return l, ok
}

// electionPrefix is where cluster's prober election keys live.
func (f *Fleet) electionPrefix(cluster string) string { return f.clusterPrefix(cluster) + "leader" }

// clusterPrefix is where cluster's keys live, ending in "/".
func (f *Fleet) clusterPrefix(cluster string) string {
	return f.cfg.Prefix + "/clusters/" + cluster + "/"
}

// campaign runs cluster's prober election for as long as the Fleet lives: it campaigns under
// the membership session, holds the leadership until that session is lost, and campaigns
// again under the next one. Elected, it calls the topology's onLead hook.
func (f *Fleet) campaign(cluster string) {
	wait := 100 * time.Millisecond
	for {
		sess := f.waitSession()
		if sess == nil {
			return
		}
		ctx, cancel := context.WithCancel(f.ctx)
		go func() {
			select {
			case <-sess.Done():
				cancel()
			case <-ctx.Done():
			}
		}()
		e := concurrency.NewElection(sess, f.electionPrefix(cluster))
		if err := e.Campaign(ctx, f.self.Instance); err != nil {
			cancel()
			if f.ctx.Err() != nil {
				return
			}
			f.log.Debug("fleet: campaign for the prober leadership failed; trying again", zap.String("cluster", cluster), zap.Error(err))
			if !f.pause(wait) {
				return
			}
			wait = backoff(wait)
			continue
		}
		wait = 100 * time.Millisecond
		done, lost := make(chan struct{}), make(chan struct{}, 1)
		l := Lead{Cluster: cluster, Key: e.Key(), Rev: e.Rev(), Done: done}
		f.leadMu.Lock()
		f.leads[cluster] = l
		f.leadLost[cluster] = lost
		f.leadMu.Unlock()
		f.log.Warn("fleet: this instance is the prober-leader of the cluster: it alone fails it over",
			zap.String("cluster", cluster), zap.String("key", l.Key), zap.Int64("create_revision", l.Rev))
		f.onLead(l)
		abdicated := false
		select {
		case <-sess.Done():
		case <-f.ctx.Done():
		case <-lost:
			abdicated = true
		}
		f.leadMu.Lock()
		delete(f.leads, cluster)
		delete(f.leadLost, cluster)
		f.leadMu.Unlock()
		close(done)
		cancel()
		if f.ctx.Err() != nil {
			f.resign(e)
			return
		}
		if abdicated {
			f.resign(e)
			f.log.Warn("fleet: the prober leader key is gone from etcd; this instance campaigns again", zap.String("cluster", cluster))
			continue
		}
		f.log.Warn("fleet: prober leadership lost with the etcd session; this instance only observes until elected again",
			zap.String("cluster", cluster), zap.String("lease", fmt.Sprintf("%x", int64(sess.Lease()))))
	}
}

// abdicate ends l at once: a guarded write found its key gone.
func (f *Fleet) abdicate(l Lead) {
	f.leadMu.Lock()
	defer f.leadMu.Unlock()
	if cur, ok := f.leads[l.Cluster]; ok && cur.Key == l.Key && cur.Rev == l.Rev {
		select {
		case f.leadLost[l.Cluster] <- struct{}{}:
		default:
		}
	}
}

// resign gives the leadership up on close, so another instance is elected at once rather
// than after session_ttl.
func (f *Fleet) resign(e *concurrency.Election) {
	ctx, cancel := context.WithTimeout(context.Background(), f.probeTimeout)
	defer cancel()
	if err := e.Resign(ctx); err != nil {
		f.log.Debug("fleet: resigning the prober leadership", zap.Error(err))
	}
}

// LeaderOf asks etcd which instance leads cluster's prober election ("" when none does).
func (f *Fleet) LeaderOf(ctx context.Context, cluster string) (string, error) {
	c := f.cli()
	if c == nil {
		return "", errNoClient
	}
	ctx, cancel := context.WithTimeout(ctx, f.probeTimeout)
	defer cancel()
	resp, err := c.Get(ctx, f.electionPrefix(cluster)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("fleet: asking etcd for the prober-leader of cluster %s: %w", cluster, err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}
