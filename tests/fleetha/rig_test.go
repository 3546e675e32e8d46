package fleetha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/sandbox"
	ft "github.com/sluice-proxy/sluice/tests/internal/failovertest"
	"github.com/sluice-proxy/sluice/tests/internal/sluicebin"
)

// cluster is the name failovertest.Config gives the topology's cluster.
const cluster = "main"

// writerSplit is how many of the 8 writers each of the 3 sluices gets.
var writerSplit = []int{3, 3, 2}

// rig is one test's fleet: a 3-member etcd cluster, a master with two
// semi-synchronous replicas, three sluice processes (sluice1..sluice3) with
// [fleet] on that etcd under a prefix of the test's own, and the writers
// through each. Everything is stopped at the test's end. The test's
// goroutine owns it; its fields are set once by newRig.
type rig struct {
	t      *testing.T
	ctx    context.Context
	etcd   *sandbox.EtcdCluster
	cli    *clientv3.Client
	topo   *sandbox.Topology
	prefix string
	// sluices[i] is the instance named names[i].
	sluices []*ft.Sluice
	names   []string
	writers []*ft.Writers
	http    *http.Client
}

// newRig starts the rig of t and waits until every sluice has applied the
// cluster's first topology and writes go through every sluice. A missing
// etcd skips t outside CI and fails it in CI.
func newRig(t *testing.T, ctx context.Context) *rig {
	t.Helper()
	if os.Getenv(sandbox.ProxyKeysEnv) != "" {
		t.Skip("failover does not depend on how sessions run; the default run covers it")
	}
	r := &rig{t: t, ctx: ctx, http: &http.Client{Timeout: 2 * time.Second}}
	r.etcd = startEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: r.etcd.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	r.cli = cli
	r.prefix = fmt.Sprintf("/sluice/fleetha-%s-%d", t.Name(), time.Now().UnixNano())

	r.topo, err = sandbox.Start(ctx, sandbox.Options{Replicas: 2, SemiSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.topo.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := ft.CreateSchema(ctx, r.topo); err != nil {
		t.Fatal(err)
	}

	bin := sluicebin.Build(t)
	for i := range 3 {
		name := fmt.Sprintf("sluice%d", i+1)
		cfg := sluicebin.WriteConfig(t, r.config(name, t.TempDir()))
		s, err := ft.StartSluice(t, bin, cfg, name, "")
		if err != nil {
			t.Fatal(err)
		}
		r.sluices = append(r.sluices, s)
		r.names = append(r.names, name)
	}
	r.waitInitialTopology()

	first := 0
	for i, s := range r.sluices {
		w, err := ft.StartWriters(ctx, ft.ClientDSN(r.topo, s.Addr), writerSplit[i], first)
		if err != nil {
			t.Fatal(err)
		}
		first += writerSplit[i]
		t.Cleanup(w.Halt) // before the sluices stop (cleanups run last-in first-out)
		r.writers = append(r.writers, w)
	}
	if err := ft.Eventually(ctx, 30*time.Second, "writes through every sluice", func() error {
		for i, w := range r.writers {
			if n := w.Total(); n < 50 {
				return fmt.Errorf("%s: %d transactions acknowledged (%d failed: %v)", r.names[i], n, w.Failed(), ft.First(w.Errors(), 3))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

// config is failovertest's configuration (probes every 500ms, a master down
// after 3 failures, automatic failover, admin and metrics on free ports)
// with [fleet] on the rig's etcd as instance name, a 2s lease so a lost
// member or quorum shows quickly.
func (r *rig) config(name, stateDir string) string {
	return ft.Config(r.topo, "127.0.0.1:0", stateDir) + fmt.Sprintf(`
[fleet]
etcd = ["%s"]
prefix = %q
instance = %q
session_ttl = "2s"
dial_timeout = "1s"
`, strings.Join(r.etcd.Endpoints(), `", "`), r.prefix, name)
}

// startEtcd starts a 3-member etcd cluster for t, stopped at its end.
func startEtcd(t *testing.T) *sandbox.EtcdCluster {
	t.Helper()
	return sandbox.StartEtcdFor(t, sandbox.EtcdOptions{Members: 3})
}

// waitInitialTopology waits until the topology key records the master the
// first leader found and every sluice reports that revision applied.
func (r *rig) waitInitialTopology() {
	r.t.Helper()
	start := time.Now()
	if err := ft.Eventually(r.ctx, 30*time.Second, "every sluice applies the initial topology", func() error {
		top, err := r.topology()
		if err != nil {
			return err
		}
		if top.Master != r.topo.Master.Addr() {
			return fmt.Errorf("the topology key names master %q, want %s: %+v", top.Master, r.topo.Master.Addr(), top)
		}
		return r.allApplied(top.ModRev, r.sluices)
	}); err != nil {
		r.t.Fatalf("%v\n%s", err, r.tails(20))
	}
	top, _ := r.topology()
	r.t.Logf("every sluice applied topology revision %d (%s by %s) %v after the last start", top.ModRev, top.Outcome, top.By, time.Since(start).Round(time.Millisecond))
}

// allApplied is nil when every one of ss reports topology revision rev applied.
func (r *rig) allApplied(rev int64, ss []*ft.Sluice) error {
	for _, s := range ss {
		m, err := r.scrape(s)
		if err != nil {
			return err
		}
		if got, ok := m.value("sluice_fleet_topology_revision", map[string]string{"cluster": cluster}); !ok || int64(got) != rev {
			return fmt.Errorf("%s: sluice_fleet_topology_revision = %v (present %v), want %d", s.Name, got, ok, rev)
		}
	}
	return nil
}

// record is one topology or history value, with where etcd keeps it.
type record struct {
	Cluster   string `json:"cluster"`
	Master    string `json:"master"`
	OldMaster string `json:"old_master"`
	Outcome   string `json:"outcome"`
	By        string `json:"by"`
	At        string `json:"at"`
	Key       string `json:"-"`
	ModRev    int64  `json:"-"`
}

func (rec record) String() string {
	return fmt.Sprintf("%s@%d{%s %s -> %s by %s at %s}", rec.Key, rec.ModRev, rec.Outcome, rec.OldMaster, rec.Master, rec.By, rec.At)
}

func (r *rig) clusterKey(sub string) string { return r.prefix + "/clusters/" + cluster + "/" + sub }

func parseRecord(key string, value []byte, modRev int64) (record, error) {
	rec := record{Key: key, ModRev: modRev}
	if err := json.Unmarshal(value, &rec); err != nil {
		return rec, fmt.Errorf("%s holds no topology record: %w: %q", key, err, value)
	}
	return rec, nil
}

// topology reads the cluster's topology key.
func (r *rig) topology() (record, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.clusterKey("topology"))
	if err != nil {
		return record{}, err
	}
	if len(resp.Kvs) == 0 {
		return record{}, errors.New("no topology key yet")
	}
	kv := resp.Kvs[0]
	return parseRecord(string(kv.Key), kv.Value, kv.ModRevision)
}

// history reads the cluster's history entries in key order (the topology
// revision each replaced).
func (r *rig) history() ([]record, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.clusterKey("history/"), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	var out []record
	for _, kv := range resp.Kvs {
		rec, err := parseRecord(string(kv.Key), kv.Value, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// historyAfter is the history entries written after etcd revision rev.
func (r *rig) historyAfter(rev int64) ([]record, error) {
	all, err := r.history()
	return slices.DeleteFunc(all, func(rec record) bool { return rec.ModRev <= rev }), err
}

// revision is etcd's current revision.
func (r *rig) revision() (int64, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.clusterKey("topology"))
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// leader is the instance whose election key has the lowest CreateRevision.
func (r *rig) leader() (string, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 3*time.Second)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.clusterKey("leader/"), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", errors.New("no election key")
	}
	return string(resp.Kvs[0].Value), nil
}

// server is the topology's server at addr, nil when none is.
func (r *rig) server(addr string) *sandbox.Server {
	for _, s := range r.topo.Servers() {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// index is the position of instance name in r.sluices, -1 when none.
func (r *rig) index(name string) int { return slices.Index(r.names, name) }

// tails is the end of every sluice's log, for failure messages.
func (r *rig) tails(n int) string {
	var b strings.Builder
	for _, s := range r.sluices {
		fmt.Fprintf(&b, "--- %s's log tail:\n%s\n", s.Name, s.Log.Tail(n))
	}
	return b.String()
}

// families is one parsed scrape of a sluice's /metrics.
type families map[string]*dto.MetricFamily

// scrape fetches s's /metrics; a stopped process fails after 2 s.
func (r *rig) scrape(s *ft.Sluice) (families, error) {
	resp, err := r.http.Get("http://" + s.Metrics + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: parsing /metrics: %w", s.Name, err)
	}
	return families(fams), nil
}

// value is the counter or gauge of family name whose labels include
// labels; ok is false when there is none.
func (f families) value(name string, labels map[string]string) (v float64, ok bool) {
next:
	for _, m := range f[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, want := range labels {
			if have[k] != want {
				continue next
			}
		}
		if c := m.GetCounter(); c != nil {
			return c.GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

// sumMetric is the sum of a series over ss; every one must answer.
func (r *rig) sumMetric(ss []*ft.Sluice, name string, labels map[string]string) (float64, []float64, error) {
	var sum float64
	each := make([]float64, len(ss))
	for i, s := range ss {
		m, err := r.scrape(s)
		if err != nil {
			return 0, nil, err
		}
		each[i], _ = m.value(name, labels)
		sum += each[i]
	}
	return sum, each, nil
}

// promoted is the sum of sluice_failovers_total{outcome="promoted"} over ss.
func (r *rig) promoted(ss []*ft.Sluice) (float64, []float64, error) {
	return r.sumMetric(ss, "sluice_failovers_total", map[string]string{"cluster": cluster, "outcome": "promoted"})
}

// markAll starts counting, on every writer set, the transactions begun from now on.
func (r *rig) markAll() {
	for _, w := range r.writers {
		w.Mark()
	}
}

// resumed waits, polling every 10 ms, until each writer set of idx has a
// transaction acknowledged that began after its Mark, or until bound has
// passed since since; it returns, per sluice of idx, how long after since it
// saw the first (at most 10 ms late), 0 for none.
func (r *rig) resumed(idx []int, since time.Time, bound time.Duration) []time.Duration {
	out := make([]time.Duration, len(idx))
	for time.Since(since) < bound && r.ctx.Err() == nil {
		left := 0
		for k, i := range idx {
			if out[k] == 0 {
				if r.writers[i].AfterMark() > 0 {
					out[k] = time.Since(since)
				} else {
					left++
				}
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // the poll's period, not a wait for a state
	}
	return out
}

// checkResumed fails the test for every sluice of idx whose writes did not
// resume within limit (resumed's figures) and logs them all.
func (r *rig) checkResumed(what string, idx []int, took []time.Duration, limit time.Duration) {
	r.t.Helper()
	var parts []string
	for k, i := range idx {
		w := r.writers[i]
		if took[k] == 0 {
			parts = append(parts, r.names[i]+": none")
			r.t.Errorf("%s: no write through %s acknowledged (%d failed: %v)", what, r.names[i], w.Failed(), ft.First(w.Errors(), 3))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: %v", r.names[i], took[k].Round(time.Millisecond)))
		if took[k] > limit {
			r.t.Errorf("%s: first write through %s acknowledged after %v, want within %v", what, r.names[i], took[k].Round(time.Millisecond), limit)
		}
	}
	r.t.Logf("%s: first acknowledged write per sluice: %s", what, strings.Join(parts, ", "))
}

// newMaster waits until the topology key names a master other than old that
// is the only writable live server, and returns it.
func (r *rig) newMaster(old *sandbox.Server, bound time.Duration) (*sandbox.Server, record) {
	r.t.Helper()
	var master *sandbox.Server
	var top record
	if err := ft.Eventually(r.ctx, bound, "a new master in the topology key, the only writable server", func() error {
		var err error
		if top, err = r.topology(); err != nil {
			return err
		}
		if master = r.server(top.Master); master == nil || master == old {
			return fmt.Errorf("topology names master %q: %s", top.Master, top)
		}
		views := ft.LookAll(r.ctx, r.topo.Replicas)
		if w := ft.Writable(views); len(w) != 1 || w[0] != master {
			return fmt.Errorf("topology names %s; servers:\n%s", master.Name, ft.Describe(views))
		}
		return nil
	}); err != nil {
		r.t.Fatalf("%v\n%s", err, r.tails(30))
	}
	return master, top
}

// checkNoLoss halts the writers and checks that every acknowledged
// transaction is on master, whole.
func (r *rig) checkNoLoss(master *sandbox.Server) {
	r.t.Helper()
	var acked []int64
	var failed []string
	for i, w := range r.writers {
		w.Halt()
		acked = append(acked, w.IDs()...)
		failed = append(failed, fmt.Sprintf("%s %d (%v)", r.names[i], w.Failed(), ft.First(w.Errors(), 2)))
	}
	r.t.Logf("%d transactions acknowledged; failed attempts: %s", len(acked), strings.Join(failed, "; "))
	cont, err := ft.ReadContents(r.ctx, master)
	if err != nil {
		r.t.Fatal(err)
	}
	if missing := cont.Missing(acked); len(missing) > 0 {
		r.t.Errorf("the new master %s lacks %d of %d acknowledged transactions, first: %v", master.Name, len(missing), len(acked), ft.First(missing, 10))
	}
	if torn := cont.Torn(); len(torn) > 0 {
		r.t.Errorf("the new master %s holds %d torn transactions, first: %v", master.Name, len(torn), ft.First(torn, 5))
	}
}

// watch records every change under the cluster's keys from etcd revision
// from+1 on, independently of how the instances keep their history. Safe
// for concurrent use.
type watch struct {
	mu     sync.Mutex
	events []record
	errs   []string
	cancel context.CancelFunc
	done   chan struct{}
}

// watchCluster starts a watch of the cluster's keys after revision from.
func (r *rig) watchCluster(from int64) *watch {
	ctx, cancel := context.WithCancel(r.ctx)
	w := &watch{cancel: cancel, done: make(chan struct{})}
	ch := r.cli.Watch(clientv3.WithRequireLeader(ctx), r.clusterKey(""), clientv3.WithPrefix(), clientv3.WithRev(from+1))
	go func() {
		defer close(w.done)
		for resp := range ch {
			w.mu.Lock()
			if err := resp.Err(); err != nil {
				w.errs = append(w.errs, err.Error())
			}
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				if ev.Type != clientv3.EventTypePut || !(strings.HasSuffix(key, "/topology") || strings.Contains(key, "/history/")) {
					continue
				}
				rec, err := parseRecord(key, ev.Kv.Value, ev.Kv.ModRevision)
				if err != nil {
					w.errs = append(w.errs, err.Error())
				}
				w.events = append(w.events, rec)
			}
			w.mu.Unlock()
		}
	}()
	r.t.Cleanup(w.stop)
	return w
}

// stop ends the watch and returns the topology and history writes it saw.
func (w *watch) stop() {
	w.cancel()
	<-w.done
}

// seen is what the watch recorded so far.
func (w *watch) seen() ([]record, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events), slices.Clone(w.errs)
}
