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

// Outcomes a TopologyRecord carries.
const (
	// OutcomeInitial: the first leader recorded the master it found.
	OutcomeInitial = "initial"
	// OutcomeSwitchover: a planned switchover moved the master; the old one is a replica.
	OutcomeSwitchover = "switchover"
)

// TopologyRecord is one cluster's topology as the fleet shares it: the value of
// <prefix>/clusters/<cluster>/topology, and of the history key written with each change. Its
// etcd ModRevision is the cluster's epoch: an instance sends writes only to the master of the
// highest revision it has seen.
type TopologyRecord struct {
	Cluster string `json:"cluster"`
	// Master is the address of the cluster's master; OldMaster the one it replaced ("" for
	// the initial record).
	Master    string `json:"master"`
	OldMaster string `json:"old_master,omitempty"`
	// Fenced are the old masters failovers replaced that are not back in service: each
	// instance fences one (read-only, no traffic) when it answers again.
	Fenced []string `json:"fenced,omitempty"`
	// Outcome says how the master came to be: OutcomeInitial, OutcomeSwitchover, or a
	// failover's outcome ("promoted", "followed", "failover").
	Outcome string `json:"outcome"`
	// By and At say which instance wrote it and when.
	By string    `json:"by"`
	At time.Time `json:"at"`
	// Revision is the etcd ModRevision of the record (not stored in the value).
	Revision int64 `json:"-"`
}

// ApplyTopology applies a cluster's topology record to this instance. It runs on the fleet's
// watch goroutine, one record at a time, in revision order, and only for a revision higher
// than any applied for the cluster; it must not call back into the Fleet.
type ApplyTopology func(TopologyRecord)

// Hooks are what the topology part of the Fleet asks of the server; set them with OnTopology
// before Start.
type Hooks struct {
	// Clusters are the clusters whose prober leadership this instance campaigns for.
	Clusters []string
	// Apply applies the records the watch delivers.
	Apply ApplyTopology
	// Elected is called, on the election's goroutine, each time this instance becomes a
	// cluster's prober-leader; it must return quickly (start a goroutine for I/O).
	Elected func(Lead)
	// Pending is called, on the watch's goroutine, when another instance writes a cluster's
	// pending record (failover is the server's JSON of the change in progress, at when it
	// was written) and with a nil failover when the record is deleted; it must return quickly.
	Pending func(cluster, by string, at time.Time, failover []byte)
}

// Errors of the guarded writes; test with errors.Is.
var (
	// ErrLostLeadership: the write's leader key is gone or belongs to another session.
	ErrLostLeadership = errors.New("fleet: this instance no longer holds the prober leadership")
	// ErrTopologyMoved: the topology key changed since this instance last applied it.
	ErrTopologyMoved = errors.New("fleet: the cluster's topology changed in etcd meanwhile")
)

// OnTopology sets the topology hooks; call it before Start. Without it the instance neither
// campaigns nor follows the topology.
func (f *Fleet) OnTopology(h Hooks) { f.hooks = h }

func (f *Fleet) onLead(l Lead) {
	if f.hooks.Elected != nil {
		f.hooks.Elected(l)
	}
}

// topologyKey, historyKey and pendingKey are a cluster's topology keys.
func (f *Fleet) topologyKey(cluster string) string { return f.clusterPrefix(cluster) + "topology" }
func (f *Fleet) pendingKey(cluster string) string  { return f.clusterPrefix(cluster) + "pending" }
func (f *Fleet) historyKey(cluster string, prev int64) string {
	return fmt.Sprintf("%shistory/%020d", f.clusterPrefix(cluster), prev)
}

// TopologyRevision is the revision of cluster's topology record this instance applied last;
// 0 before any.
func (f *Fleet) TopologyRevision(cluster string) int64 {
	f.topoMu.Lock()
	defer f.topoMu.Unlock()
	return f.topoRev[cluster]
}

// followTopology reads every cluster's topology record, applies those newer than applied,
// and follows the watch; a failed watch (a compacted revision included) reads them all again.
func (f *Fleet) followTopology() {
	f.loadAndWatch("topology watch", f.loadTopology, f.watchTopology)
}

func (f *Fleet) loadTopology() (int64, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.probeTimeout)
	defer cancel()
	p := f.cfg.Prefix + "/clusters/"
	resp, err := f.cli().Get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("fleet: reading %s: %w", p, err)
	}
	for _, kv := range resp.Kvs {
		f.applyTopologyKV(kv)
		f.pendingEvent(kv, false)
	}
	f.loadedOnce.Do(func() { close(f.topoLoaded) })
	return resp.Header.Revision, nil
}

func (f *Fleet) watchTopology(rev int64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(f.ctx))
	defer cancel()
	for wr := range f.cli().Watch(ctx, f.cfg.Prefix+"/clusters/", clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			switch ev.Type {
			case clientv3.EventTypePut:
				f.applyTopologyKV(ev.Kv)
				f.pendingEvent(ev.Kv, false)
			case clientv3.EventTypeDelete:
				f.pendingEvent(ev.Kv, true)
			}
		}
	}
	return errWatchClosed
}

// applyTopologyKV applies kv when it is a topology key with a newer revision than the one
// applied for its cluster. A value that is not a record is logged and ignored.
func (f *Fleet) applyTopologyKV(kv *mvccpb.KeyValue) {
	rest, ok := strings.CutPrefix(string(kv.Key), f.cfg.Prefix+"/clusters/")
	if !ok {
		return
	}
	cluster, ok := strings.CutSuffix(rest, "/topology")
	if !ok || strings.Contains(cluster, "/") {
		return
	}
	var rec TopologyRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil || rec.Master == "" {
		f.log.Warn("fleet: a topology key holds no topology record; ignored", zap.String("key", string(kv.Key)),
			zap.ByteString("value", kv.Value), zap.Error(err))
		return
	}
	rec.Cluster, rec.Revision = cluster, kv.ModRevision
	f.topoMu.Lock()
	defer f.topoMu.Unlock()
	if f.topoRev[cluster] >= rec.Revision {
		return
	}
	f.topoRev[cluster] = rec.Revision
	if f.hooks.Apply != nil {
		f.hooks.Apply(rec)
	}
}

// pendingEvent hands a change of a cluster's pending key written by another instance to the
// Pending hook (deleted: a nil failover). A record this instance wrote is its own business.
func (f *Fleet) pendingEvent(kv *mvccpb.KeyValue, deleted bool) {
	rest, ok := strings.CutPrefix(string(kv.Key), f.cfg.Prefix+"/clusters/")
	if !ok || f.hooks.Pending == nil {
		return
	}
	cluster, ok := strings.CutSuffix(rest, "/pending")
	if !ok || strings.Contains(cluster, "/") {
		return
	}
	if deleted {
		f.hooks.Pending(cluster, "", time.Time{}, nil)
		return
	}
	var p pendingRecord
	if err := json.Unmarshal(kv.Value, &p); err != nil || p.By == f.self.Instance {
		return
	}
	f.hooks.Pending(cluster, p.By, p.At, p.Failover)
}

// leaderHeld is the compare that guards every write of a leader.
func leaderHeld(l Lead) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.Key), "=", l.Rev)
}

// pendingRecord is the value of a cluster's pending key: a failover in progress (the
// server's JSON, opaque here), by whom, and the topology revision it started from.
type pendingRecord struct {
	TopologyRevision int64           `json:"topology_revision"`
	By               string          `json:"by"`
	At               time.Time       `json:"at"`
	Failover         json.RawMessage `json:"failover"`
}

// WritePending stores value (a failover in progress) as l's cluster's pending failover if l
// still holds the leadership and the cluster's topology is still at the revision this
// instance applied: ErrLostLeadership or ErrTopologyMoved when not, another error when etcd
// did not answer within dial_timeout. Whatever the error, the caller must not change a server.
func (f *Fleet) WritePending(ctx context.Context, l Lead, value []byte) error {
	c := f.cli()
	if c == nil {
		return errNoClient
	}
	prev := f.TopologyRevision(l.Cluster)
	rec, err := json.Marshal(pendingRecord{TopologyRevision: prev, By: f.self.Instance, At: time.Now().UTC(), Failover: value})
	if err != nil {
		return fmt.Errorf("fleet: encoding the pending failover of cluster %s: %w", l.Cluster, err)
	}
	ctx, cancel := context.WithTimeout(ctx, f.probeTimeout)
	defer cancel()
	resp, err := c.Txn(ctx).
		If(leaderHeld(l), clientv3.Compare(clientv3.ModRevision(f.topologyKey(l.Cluster)), "=", prev)).
		Then(clientv3.OpPut(f.pendingKey(l.Cluster), string(rec))).
		Else(clientv3.OpGet(l.Key)).
		Commit()
	if err != nil {
		return fmt.Errorf("fleet: writing the pending failover of cluster %s: %w", l.Cluster, err)
	}
	return f.guardFailed(resp, l, prev)
}

// guardFailed tells why a guarded transaction whose Else read l's key failed; nil when it
// succeeded. A leader key found gone (deleted by hand, or the lease lost before the session
// noticed) ends the leadership here at once, and the instance campaigns again.
func (f *Fleet) guardFailed(resp *clientv3.TxnResponse, l Lead, prev int64) error {
	if resp.Succeeded {
		return nil
	}
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 0 || kvs[0].CreateRevision != l.Rev {
		f.abdicate(l)
		return fmt.Errorf("cluster %s: %w", l.Cluster, ErrLostLeadership)
	}
	return fmt.Errorf("cluster %s (applied revision %d): %w", l.Cluster, prev, ErrTopologyMoved)
}

// DropPending deletes l's cluster's pending failover while l leads: a failover given up
// (the master answers again, an operator's failed FAILOVER) must not be resumed later, and a
// change that wrote it after its topology record (a switchover's repoints) leaves nothing
// for another leader to finish.
func (f *Fleet) DropPending(ctx context.Context, l Lead) error {
	c := f.cli()
	if c == nil {
		return errNoClient
	}
	ctx, cancel := context.WithTimeout(ctx, f.probeTimeout)
	defer cancel()
	resp, err := c.Txn(ctx).If(leaderHeld(l)).Then(clientv3.OpDelete(f.pendingKey(l.Cluster))).Else(clientv3.OpGet(l.Key)).Commit()
	if err != nil {
		return fmt.Errorf("fleet: deleting the pending failover of cluster %s: %w", l.Cluster, err)
	}
	return f.guardFailed(resp, l, 0)
}

// WriteTopology records rec as l's cluster's topology, with its history key, and drops the
// pending failover, in one transaction that holds only while l leads and the topology key is
// still at the revision this instance applied last (none: it must not exist). It returns the
// record's revision, which counts as applied here (the watch does not apply it again).
func (f *Fleet) WriteTopology(ctx context.Context, l Lead, rec TopologyRecord) (int64, error) {
	c := f.cli()
	if c == nil {
		return 0, errNoClient
	}
	rec.Cluster, rec.By, rec.At = l.Cluster, f.self.Instance, time.Now().UTC()
	value, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("fleet: encoding the topology of cluster %s: %w", l.Cluster, err)
	}
	key := f.topologyKey(l.Cluster)
	f.topoMu.Lock()
	defer f.topoMu.Unlock()
	prev := f.topoRev[l.Cluster]
	ctx, cancel := context.WithTimeout(ctx, f.probeTimeout)
	defer cancel()
	resp, err := c.Txn(ctx).
		If(leaderHeld(l), clientv3.Compare(clientv3.ModRevision(key), "=", prev)).
		Then(clientv3.OpPut(key, string(value)), clientv3.OpPut(f.historyKey(l.Cluster, prev), string(value)),
			clientv3.OpDelete(f.pendingKey(l.Cluster))).
		Else(clientv3.OpGet(l.Key)).
		Commit()
	if err != nil {
		return 0, fmt.Errorf("fleet: writing the topology of cluster %s: %w", l.Cluster, err)
	}
	if err := f.guardFailed(resp, l, prev); err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	f.topoRev[l.Cluster] = rev
	f.log.Warn("fleet: topology recorded", zap.String("cluster", l.Cluster), zap.String("master", rec.Master),
		zap.String("outcome", rec.Outcome), zap.Int64("revision", rev))
	return rev, nil
}

// Pending reads cluster's pending failover (nil when none, or when it started from another
// topology revision than the one this instance applied: it is about a master the fleet has
// replaced since); a leader elected after another died part way uses it to finish that
// failover rather than start another.
func (f *Fleet) Pending(ctx context.Context, cluster string) ([]byte, error) {
	c := f.cli()
	if c == nil {
		return nil, errNoClient
	}
	ctx, cancel := context.WithTimeout(ctx, f.probeTimeout)
	defer cancel()
	resp, err := c.Get(ctx, f.pendingKey(cluster))
	if err != nil {
		return nil, fmt.Errorf("fleet: reading the pending failover of cluster %s: %w", cluster, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var p pendingRecord
	if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil {
		return nil, fmt.Errorf("fleet: the pending failover of cluster %s: %w", cluster, err)
	}
	if p.TopologyRevision != f.TopologyRevision(cluster) {
		return nil, nil
	}
	return p.Failover, nil
}

// ReadTopology reads cluster's topology record from etcd with a quorum read (ok false when
// none is stored): what an instance checks before it trusts a master it saw go down and
// come back, since its watch may be cut off from etcd.
func (f *Fleet) ReadTopology(ctx context.Context, cluster string) (rec TopologyRecord, ok bool, err error) {
	c := f.cli()
	if c == nil {
		return rec, false, errNoClient
	}
	ctx, cancel := context.WithTimeout(ctx, f.probeTimeout)
	defer cancel()
	resp, err := c.Get(ctx, f.topologyKey(cluster))
	if err != nil {
		return rec, false, fmt.Errorf("fleet: reading the topology of cluster %s: %w", cluster, err)
	}
	if len(resp.Kvs) == 0 {
		return rec, false, nil
	}
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		return rec, false, fmt.Errorf("fleet: the topology of cluster %s: %w", cluster, err)
	}
	rec.Cluster, rec.Revision = cluster, resp.Kvs[0].ModRevision
	return rec, true, nil
}

// WaitTopology waits up to d until the topology records were read from etcd once (and
// applied); false when d passed first. The server waits for it before serving, so that it
// does not send writes to a master the fleet replaced while it was down.
func (f *Fleet) WaitTopology(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.topoLoaded:
		return true
	case <-t.C:
		return false
	}
}
