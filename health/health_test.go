package health

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health/loadavg"
)

// testTopology builds a topology of one cluster "main": a master and
// replicas with the given weights, balanced by policy; replicaKeys are
// extra lines for every replica.
func testTopology(t *testing.T, policy string, weights []int, clusterKeys ...string) *Topology {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "[auth]\naddress = \"127.0.0.1:1\"\n[[cluster]]\nname = \"main\"\nuser = \"u\"\nmaster = \"127.0.0.1:10\"\nbalance = %q\n", policy)
	for _, k := range clusterKeys {
		b.WriteString(k + "\n")
	}
	for i, w := range weights {
		fmt.Fprintf(&b, "  [[cluster.replica]]\n  address = \"127.0.0.1:%d\"\n  weight = %d\n", 11+i, w)
	}
	cfg, err := conf.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return NewTopology(cfg)
}

// setLoad publishes a Status with load l on b, as a probe would.
func setLoad(b *Backend, l float64) {
	b.status.Store(&Status{Load: l, LoadSource: "agent"})
}

// picks counts n picks of c's balancer by replica address.
func picks(c *Cluster, n int, skip *Backend) map[string]int {
	got := map[string]int{}
	for range n {
		if b := c.PickReplica(skip); b != nil {
			got[b.Address]++
		} else {
			got["none"]++
		}
	}
	return got
}

func TestRoundRobinIgnoresWeights(t *testing.T) {
	c := testTopology(t, "round-robin", []int{1, 3, 1}).Current().Cluster("main")
	got := picks(c, 300, nil)
	for _, r := range c.Replicas {
		if got[r.Address] != 100 {
			t.Fatalf("round-robin over weights 1:3:1 gave %v, want 100 each", got)
		}
	}
}

func TestRoundRobinSkipsIneligible(t *testing.T) {
	c := testTopology(t, "round-robin", []int{1, 1, 1}).Current().Cluster("main")
	r0, r1, r2 := c.Replicas[0], c.Replicas[1], c.Replicas[2]
	r1.ReportFailure(errors.New("refused"))
	got := picks(c, 100, nil)
	if got[r0.Address] != 50 || got[r2.Address] != 50 {
		t.Fatalf("with r1 down got %v, want 50/50 over r0 and r2", got)
	}
	if got := picks(c, 10, r0); got[r2.Address] != 10 {
		t.Fatalf("with r1 down and r0 skipped got %v, want r2 only", got)
	}
	r2.Hold(StateOffline)
	if b := c.PickReplica(r0); b != nil {
		t.Fatalf("no eligible replica left, got %s", b.Address)
	}
}

func TestWeightedShares(t *testing.T) {
	c := testTopology(t, "weighted", []int{1, 3}).Current().Cluster("main")
	got := picks(c, 400, nil)
	if got["127.0.0.1:11"] != 100 || got["127.0.0.1:12"] != 300 {
		t.Fatalf("weights 1:3 gave %v, want 100/300", got)
	}
}

func TestWeightedKeepsProportionsWithoutIneligible(t *testing.T) {
	c := testTopology(t, "weighted", []int{1, 5, 3}).Current().Cluster("main")
	c.Replicas[1].ReportFailure(errors.New("refused"))
	got := picks(c, 400, nil)
	if got["127.0.0.1:11"] != 100 || got["127.0.0.1:13"] != 300 || got["127.0.0.1:12"] != 0 {
		t.Fatalf("weights 1:(5 down):3 gave %v, want 100/0/300", got)
	}
	got = picks(c, 10, c.Replicas[2])
	if got["127.0.0.1:11"] != 10 {
		t.Fatalf("skipping the weight-3 replica gave %v, want the weight-1 one only", got)
	}
}

func TestLeastLoadPrefersLowLoad(t *testing.T) {
	c := testTopology(t, "least-load", []int{1, 1, 1}).Current().Cluster("main")
	setLoad(c.Replicas[0], 0.5)
	setLoad(c.Replicas[1], 4)
	setLoad(c.Replicas[2], 8)
	got := picks(c, 30000, nil)
	t.Logf("loads 0.5/4/8: %v", got)
	// Two of three random pairs hold the 0.5 replica, one holds 4 and 8:
	// 2/3, 1/3 and nothing.
	if a := got["127.0.0.1:11"]; a < 19000 || a > 21000 {
		t.Fatalf("the least loaded replica got %d of 30000 picks, want about 20000", a)
	}
	if got["127.0.0.1:13"] != 0 {
		t.Fatalf("the most loaded replica got %d picks; it loses every pair", got["127.0.0.1:13"])
	}
}

func TestLeastLoadDividesByWeight(t *testing.T) {
	c := testTopology(t, "least-load", []int{1, 4}).Current().Cluster("main")
	setLoad(c.Replicas[0], 1) // score 1
	setLoad(c.Replicas[1], 2) // score 0.5
	if got := picks(c, 100, nil); got["127.0.0.1:12"] != 100 {
		t.Fatalf("load 2 at weight 4 must beat load 1 at weight 1: %v", got)
	}
}

func TestLeastLoadTiesSpread(t *testing.T) {
	c := testTopology(t, "least-load", []int{1, 1, 1}).Current().Cluster("main")
	for _, r := range c.Replicas {
		setLoad(r, 2)
	}
	got := picks(c, 30000, nil)
	t.Logf("tied loads: %v", got)
	for _, r := range c.Replicas {
		if n := got[r.Address]; n < 9000 || n > 11000 {
			t.Fatalf("tied loads gave %v, want about 10000 each", got)
		}
	}
}

func TestLeastLoadSkipsIneligible(t *testing.T) {
	c := testTopology(t, "least-load", []int{1, 1, 1}).Current().Cluster("main")
	setLoad(c.Replicas[0], 0.1)
	setLoad(c.Replicas[1], 5)
	setLoad(c.Replicas[2], 9)
	c.Replicas[0].status.Store(&Status{Load: 0.1, Lagging: true})
	c.Replicas[0].probed.Store(uint32(StateLagging))
	c.Replicas[0].settle(StateLagging)
	got := picks(c, 1000, nil)
	if got["127.0.0.1:11"] != 0 || got["127.0.0.1:12"] != 1000 {
		t.Fatalf("with the least loaded replica lagging got %v, want all on the load-5 one", got)
	}
	if got := picks(c, 10, c.Replicas[1]); got["127.0.0.1:13"] != 10 {
		t.Fatalf("one eligible replica left, got %v", got)
	}
	c.Replicas[2].Hold(StateFenced)
	if b := c.PickReplica(c.Replicas[1]); b != nil {
		t.Fatalf("no eligible replica left, got %s", b.Address)
	}
}

func TestLeastConnPrefersFewestInUsePerWeight(t *testing.T) {
	c := testTopology(t, "least-conn", []int{1, 2, 1}).Current().Cluster("main")
	r0, r1, r2 := c.Replicas[0], c.Replicas[1], c.Replicas[2]
	for range 3 {
		r0.ConnLent()
	}
	for range 4 {
		r1.ConnLent() // 4 at weight 2: 2 per weight
	}
	r2.ConnLent()
	if got := picks(c, 10, nil); got[r2.Address] != 10 {
		t.Fatalf("in use 3/4(w2)/1 gave %v, want the replica with 1", got)
	}
	r2.ConnLent()
	r2.ConnLent() // 3
	if got := picks(c, 10, nil); got[r1.Address] != 10 {
		t.Fatalf("in use 3/4(w2)/3 gave %v, want the weight-2 replica", got)
	}
	if got := picks(c, 3000, r1); got[r0.Address] < 1300 || got[r2.Address] < 1300 {
		t.Fatalf("tie 3/3 with r1 skipped gave %v, want about 1500 each", got)
	}
	r0.ReportFailure(errors.New("refused"))
	if got := picks(c, 10, r1); got[r2.Address] != 10 {
		t.Fatalf("r0 down, r1 skipped gave %v", got)
	}
	for range 3 {
		r0.ConnReturned()
	}
	if r0.InUse() != 0 {
		t.Fatalf("in use after returns: %d", r0.InUse())
	}
}

func TestLeastConnTiesSpread(t *testing.T) {
	c := testTopology(t, "least-conn", []int{1, 1, 1}).Current().Cluster("main")
	got := picks(c, 3000, nil)
	for _, r := range c.Replicas {
		if n := got[r.Address]; n < 850 || n > 1150 {
			t.Fatalf("idle replicas gave %v, want about 1000 each", got)
		}
	}
}

func TestBalancersAllocateNothing(t *testing.T) {
	for _, policy := range []string{"round-robin", "weighted", "least-load", "least-conn"} {
		c := testTopology(t, policy, []int{1, 2, 3}).Current().Cluster("main")
		setLoad(c.Replicas[0], 1)
		skip := c.Replicas[1]
		if n := testing.AllocsPerRun(1000, func() { c.PickReplica(skip) }); n != 0 {
			t.Errorf("%s: %v allocations per pick", policy, n)
		}
	}
}

// TestBalancersConcurrent picks from many goroutines while states and
// loads change (for the race detector): every pick is an eligible replica
// or nil.
func TestBalancersConcurrent(t *testing.T) {
	for _, policy := range []string{"round-robin", "weighted", "least-load", "least-conn"} {
		c := testTopology(t, policy, []int{1, 2, 3}).Current().Cluster("main")
		var writer, readers sync.WaitGroup
		stop := make(chan struct{})
		writer.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := c.Replicas[i%3]
				if i%2 == 0 {
					r.ReportFailure(errors.New("x"))
				} else {
					r.probed.Store(uint32(StateUp))
					r.settle(StateUp)
				}
				setLoad(r, float64(i%7))
			}
		})
		for range 4 {
			readers.Go(func() {
				for range 2000 {
					if b := c.PickReplica(c.Replicas[0]); b != nil {
						if b == c.Replicas[0] {
							t.Errorf("%s picked the skipped replica", policy)
						}
						b.ConnLent()
						b.ConnReturned()
					}
				}
			})
		}
		readers.Wait()
		close(stop)
		writer.Wait()
		for _, r := range c.Replicas {
			if r.InUse() != 0 {
				t.Errorf("%s: %s in use %d after balanced lends and returns", policy, r.Address, r.InUse())
			}
		}
	}
}

func TestUnknownBalancer(t *testing.T) {
	b, err := NewBalancer("random", nil)
	if err == nil || b == nil {
		t.Fatalf("NewBalancer(random) = %v, %v; want round-robin and an error", b, err)
	}
}

func TestHoldAndRelease(t *testing.T) {
	c := testTopology(t, "round-robin", []int{1}).Current().Cluster("main")
	r := c.Replicas[0]
	if prev := r.Hold(StateOffline); prev != StateUp || r.State() != StateOffline || r.Up() {
		t.Fatalf("Hold(offline) from up: prev %s, now %s", prev, r.State())
	}
	if r.ReportFailure(errors.New("refused")) || r.State() != StateOffline {
		t.Fatalf("ReportFailure changed an offline backend to %s", r.State())
	}
	if r.Hold(StateUp); r.State() != StateOffline {
		t.Fatalf("Hold(up) is not a hold, but changed the state to %s", r.State())
	}
	// The failure above is what the data plane found: Release takes it.
	if got := r.Release(); got != StateDown {
		t.Fatalf("Release after a failure gave %s, want down", got)
	}
	if got := r.Release(); got != StateDown {
		t.Fatalf("a second Release changed the state to %s", got)
	}
}

func TestStateNames(t *testing.T) {
	want := map[State]string{StateUp: "up", StateDown: "down", StateLagging: "lagging", StateFenced: "fenced",
		StateOffline: "offline", State(99): "unknown"}
	for s, name := range want {
		if s.String() != name {
			t.Errorf("State(%d) = %q, want %q", s, s.String(), name)
		}
	}
}

func TestReplicaStates(t *testing.T) {
	c := testTopology(t, "round-robin", []int{1, 1, 1}).Current().Cluster("main")
	c.Replicas[1].ReportFailure(errors.New("x"))
	c.Replicas[2].Hold(StateFenced)
	if got, want := c.ReplicaStates(), "127.0.0.1:11 up, 127.0.0.1:12 down, 127.0.0.1:13 fenced"; got != want {
		t.Fatalf("ReplicaStates = %q, want %q", got, want)
	}
}

// fakeChecks serves Prober.Check from per-backend functions the test swaps.
type fakeChecks struct {
	mu sync.Mutex
	fn map[string]func() (*Status, error)
	n  map[string]int
}

func (f *fakeChecks) set(addr string, fn func() (*Status, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fn[addr] = fn
}

func (f *fakeChecks) count(addr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[addr]
}

func (f *fakeChecks) check(_ context.Context, b *Backend) (*Status, error) {
	f.mu.Lock()
	fn := f.fn[b.Address]
	f.n[b.Address]++
	f.mu.Unlock()
	if fn == nil {
		return &Status{SecondsBehind: 0, Replicating: b.Role == RoleReplica, IORunning: true, SQLRunning: true}, nil
	}
	return fn()
}

type change struct {
	addr     string
	from, to State
}

// startProber runs a Prober with fake checks over topo until the test ends.
func startProber(t *testing.T, topo *Topology, failures int) (*fakeChecks, chan change, *Prober) {
	t.Helper()
	f := &fakeChecks{fn: map[string]func() (*Status, error){}, n: map[string]int{}}
	changes := make(chan change, 64)
	p := &Prober{
		Topology:           topo,
		Interval:           5 * time.Millisecond,
		Timeout:            time.Second,
		FailuresBeforeDown: failures,
		Check:              f.check,
		OnChange: func(b *Backend, from, to State, _ string) {
			changes <- change{b.Address, from, to}
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f, changes, p
}

// nextChange waits for the next state change.
func nextChange(t *testing.T, changes chan change) change {
	t.Helper()
	select {
	case c := <-changes:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no state change within 10s")
		return change{}
	}
}

// waitFor polls cond until it holds or 10s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestProberMarksDownAfterFailuresAndUpAgain(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1, 1})
	r := topo.Current().Cluster("main").Replicas[0]
	f, changes, _ := startProber(t, topo, 3)
	var failing atomic.Bool
	failing.Store(true)
	f.set(r.Address, func() (*Status, error) {
		if failing.Load() {
			return nil, errors.New("probe failed")
		}
		return &Status{Replicating: true, IORunning: true, SQLRunning: true}, nil
	})
	if c := nextChange(t, changes); c.addr != r.Address || c.to != StateDown {
		t.Fatalf("first change %+v, want %s down", c, r.Address)
	}
	if n := f.count(r.Address); n < 3 {
		t.Fatalf("went down after %d checks, want >= 3", n)
	}
	if r.LastError() != "probe failed" {
		t.Fatalf("LastError = %q", r.LastError())
	}
	failing.Store(false)
	if c := nextChange(t, changes); c.to != StateUp || c.from != StateDown {
		t.Fatalf("second change %+v, want down -> up", c)
	}
	if st := r.Status(); st == nil || st.Lagging {
		t.Fatalf("Status after recovery: %+v", st)
	}
}

func TestProberLaggingAndBack(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1, 1}, `max_replication_lag = "2s"`)
	r := topo.Current().Cluster("main").Replicas[1]
	f, changes, _ := startProber(t, topo, 3)
	var behind atomic.Int64
	behind.Store(5)
	f.set(r.Address, func() (*Status, error) {
		return &Status{Replicating: true, IORunning: true, SQLRunning: true, SecondsBehind: behind.Load()}, nil
	})
	if c := nextChange(t, changes); c.addr != r.Address || c.from != StateUp || c.to != StateLagging {
		t.Fatalf("change %+v, want %s up -> lagging", c, r.Address)
	}
	if st := r.Status(); !st.Lagging || st.Lag != 5*time.Second {
		t.Fatalf("lagging Status: %+v", st)
	}
	behind.Store(2) // at the limit is not over it
	if c := nextChange(t, changes); c.from != StateLagging || c.to != StateUp {
		t.Fatalf("change %+v, want lagging -> up", c)
	}
}

func TestProberKeepsHeldStates(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1, 1})
	c := topo.Current().Cluster("main")
	fenced, offline := c.Master, c.Replicas[0]
	fenced.Hold(StateFenced)
	offline.Hold(StateOffline)
	f, changes, _ := startProber(t, topo, 1)
	waitFor(t, "probes of the held backends", func() bool {
		return f.count(fenced.Address) >= 3 && f.count(offline.Address) >= 3
	})
	if fenced.State() != StateFenced || offline.State() != StateOffline {
		t.Fatalf("successful probes changed held states: %s, %s", fenced.State(), offline.State())
	}
	f.set(offline.Address, func() (*Status, error) { return nil, errors.New("gone") })
	n := f.count(offline.Address)
	waitFor(t, "failed probes of the offline backend", func() bool { return f.count(offline.Address) >= n+3 })
	if offline.State() != StateOffline {
		t.Fatalf("failed probes changed offline to %s", offline.State())
	}
	select {
	case ch := <-changes:
		t.Fatalf("held backends changed state: %+v", ch)
	default:
	}
	if got := offline.Release(); got != StateDown {
		t.Fatalf("Release of an offline backend whose probes fail gave %s, want down", got)
	}
	if got := fenced.Release(); got != StateUp {
		t.Fatalf("Release of a fenced backend whose probes succeed gave %s, want up", got)
	}
}

// TestProberSlowBackendDelaysNoOther holds one backend's probe until the
// others were probed several times: a backend that does not answer must
// not hold up the probes of the rest. Rounds wait for it.
func TestProberSlowBackendDelaysNoOther(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1, 1})
	c := topo.Current().Cluster("main")
	slow, fast := c.Replicas[0], c.Replicas[1]
	release := make(chan struct{})
	f := &fakeChecks{fn: map[string]func() (*Status, error){}, n: map[string]int{}}
	f.set(slow.Address, func() (*Status, error) {
		<-release
		return &Status{Replicating: true, IORunning: true, SQLRunning: true}, nil
	})
	p := &Prober{Topology: topo, Interval: 5 * time.Millisecond, Timeout: time.Second, FailuresBeforeDown: 1, Check: f.check}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "5 probes of the other replica while one hangs", func() bool { return f.count(fast.Address) >= 5 })
	if r := topo.Round(); r != 0 {
		t.Fatalf("round %d finished while a probe of the first round hangs", r)
	}
	close(release)
	waitFor(t, "rounds after the slow probe returned", func() bool { return topo.Round() >= 3 })
}

// TestProberAgentLoad polls a real agent handler for a replica's load and
// falls back to Threads_running when the agent fails, reporting each
// change once.
func TestProberAgentLoad(t *testing.T) {
	file := filepath.Join(t.TempDir(), "loadavg")
	if err := os.WriteFile(file, []byte("3.00 2.00 1.00 1/100 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := httptest.NewServer(loadavg.Handler(file, 4))
	defer agent.Close()
	cfg, err := conf.Parse([]byte(`
[auth]
address = "127.0.0.1:1"
[[cluster]]
name = "main"
user = "u"
master = "127.0.0.1:10"
balance = "least-load"
  [[cluster.replica]]
  address = "127.0.0.1:11"
  agent = "` + agent.URL + `"
`))
	if err != nil {
		t.Fatal(err)
	}
	topo := NewTopology(cfg)
	r := topo.Current().Cluster("main").Replicas[0]
	agentChanges := make(chan error, 16)
	f := &fakeChecks{fn: map[string]func() (*Status, error){}, n: map[string]int{}}
	f.set(r.Address, func() (*Status, error) {
		return &Status{Replicating: true, IORunning: true, SQLRunning: true, ThreadsRunning: 7}, nil
	})
	p := &Prober{Topology: topo, Interval: 5 * time.Millisecond, Timeout: time.Second, FailuresBeforeDown: 1, Check: f.check,
		OnAgent: func(_ *Backend, err error) { agentChanges <- err }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "a load from the agent", func() bool { st := r.Status(); return st != nil && st.LoadSource == "agent" })
	if st := r.Status(); st.Load != 0.75 || st.Load1 != 3 || st.Load15 != 1 || st.CPUs != 4 {
		t.Fatalf("agent load: %+v", st)
	}
	if err := os.WriteFile(file, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fallback to Threads_running", func() bool {
		st := r.Status()
		return st.LoadSource == "threads_running"
	})
	if st := r.Status(); st.Load != 7 {
		t.Fatalf("fallback load: %+v", st)
	}
	if r.State() != StateUp {
		t.Fatalf("a failing agent made the replica %s", r.State())
	}
	if err := <-agentChanges; err == nil || !strings.Contains(err.Error(), "status 500") {
		t.Fatalf("agent failure reported as %v", err)
	}
	if err := os.WriteFile(file, []byte("0.40 0.30 0.20 1/100 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the agent's load again", func() bool { st := r.Status(); return st.LoadSource == "agent" })
	if err := <-agentChanges; err != nil {
		t.Fatalf("recovery reported as %v", err)
	}
	select {
	case err := <-agentChanges:
		t.Fatalf("a change was reported twice: %v", err)
	default:
	}
}

func TestJudgeLag(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	maria := func(io, sql bool, behind int64, received, applied string) *Status {
		return &Status{Flavor: FlavorMariaDB, Replicating: true, IORunning: io, SQLRunning: sql, SecondsBehind: behind,
			ReceivedGTID: received, AppliedGTID: applied}
	}
	master := &Status{Flavor: FlavorMariaDB, ExecutedGTID: "0-1-50"}
	for _, tc := range []struct {
		name        string
		st          *Status
		master      *Status
		since       time.Time // behindSince before
		lagging     bool
		lag         time.Duration
		sinceAfter  time.Time
		noteContain string
	}{
		{"caught up", maria(true, true, 0, "0-1-50", "0-1-50"), master, time.Time{}, false, 0, time.Time{}, "Seconds_Behind_Master"},
		{"behind under max", maria(true, true, 3, "0-1-50", "0-1-40"), master, time.Time{}, false, 3 * time.Second, time.Time{}, ""},
		{"behind over max", maria(true, true, 6, "0-1-50", "0-1-40"), master, time.Time{}, true, 6 * time.Second, time.Time{}, ""},
		{"sql stopped, first seen behind", maria(true, false, -1, "0-1-50", "0-1-40"), master, time.Time{}, false, 0, t0, "received 0-1-50"},
		{"sql stopped, behind long", maria(true, false, -1, "0-1-50", "0-1-40"), master, t0.Add(-6 * time.Second), true, 6 * time.Second, t0.Add(-6 * time.Second), ""},
		{"sql stopped, nothing pending", maria(true, false, -1, "0-1-50", "0-1-50"), master, t0.Add(-time.Minute), false, 0, time.Time{}, ""},
		{"io stopped, master ahead", maria(false, true, -1, "0-1-40", "0-1-40"), master, t0.Add(-10 * time.Second), true, 10 * time.Second, t0.Add(-10 * time.Second), "master executed"},
		{"io stopped, master unknown", maria(false, true, -1, "0-1-40", "0-1-40"), nil, time.Time{}, false, 0, time.Time{}, ""},
		{"other domain ahead", maria(true, false, -1, "0-1-40,1-2-9", "0-1-40,1-2-3"), master, t0.Add(-6 * time.Second), true, 6 * time.Second, t0.Add(-6 * time.Second), ""},
		{"not replicating", &Status{SecondsBehind: -1}, master, t0, true, -1, time.Time{}, "not configured"},
		{"replication status refused", &Status{SecondsBehind: -1, ReplicationError: "SHOW ALL SLAVES STATUS: error 1227: denied"},
			master, t0, true, -1, time.Time{}, "needs SLAVE MONITOR"},
		{"mysql sql stopped behind", &Status{Flavor: FlavorMySQL, Replicating: true, IORunning: true, SecondsBehind: -1,
			ReceivedGTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-50", AppliedGTID: "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-49"},
			nil, t0.Add(-6 * time.Second), true, 6 * time.Second, t0.Add(-6 * time.Second), ""},
		{"mysql sql stopped caught up", &Status{Flavor: FlavorMySQL, Replicating: true, IORunning: true, SecondsBehind: -1,
			ReceivedGTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:10-50", AppliedGTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-50,\nab:1-2"},
			nil, t0.Add(-6 * time.Second), false, 0, time.Time{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			since := tc.since
			judgeLag(tc.st, tc.master, 5*time.Second, &since, t0)
			if tc.st.Lagging != tc.lagging || tc.st.Lag != tc.lag || !since.Equal(tc.sinceAfter) {
				t.Fatalf("lagging %v lag %v since %v (%s); want %v %v %v", tc.st.Lagging, tc.st.Lag, since, tc.st.LagNote,
					tc.lagging, tc.lag, tc.sinceAfter)
			}
			if !strings.Contains(tc.st.LagNote, tc.noteContain) {
				t.Fatalf("note %q does not say %q", tc.st.LagNote, tc.noteContain)
			}
		})
	}
}

func TestGTIDAhead(t *testing.T) {
	const u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	for _, tc := range []struct {
		f    Flavor
		a, b string
		want bool
	}{
		{FlavorMariaDB, "0-1-5", "0-1-5", false},
		{FlavorMariaDB, "0-1-6", "0-1-5", true},
		{FlavorMariaDB, "0-2-6", "0-1-5", true}, // another server wrote later in the domain
		{FlavorMariaDB, "0-1-5", "0-1-6", false},
		{FlavorMariaDB, "0-1-5,1-1-3", "0-1-5", true},
		{FlavorMariaDB, "0-1-5", "0-1-5,1-1-3", false},
		{FlavorMariaDB, "", "0-1-5", false},
		{FlavorMariaDB, "junk", "0-1-5", false}, // unparsable: not judged by GTIDs
		{FlavorMySQL, u + ":3-7", u + ":1-10", false},
		{FlavorMySQL, u + ":3-8", u + ":1-5:6-10", false}, // adjacent intervals merge
		{FlavorMySQL, u + ":3-8", u + ":1-5:7-10", true},
		{FlavorMySQL, u + ":11", u + ":1-10", true},
		{FlavorMySQL, "", u + ":1-10", false},
	} {
		if got := gtidAhead(tc.f, tc.a, tc.b); got != tc.want {
			t.Errorf("gtidAhead(%v, %q, %q) = %v, want %v", tc.f, tc.a, tc.b, got, tc.want)
		}
	}
}

func TestFlavorOf(t *testing.T) {
	if flavorOf("5.5.5-10.11.19-MariaDB-0+deb12u1") != FlavorMariaDB || flavorOf("8.0.36") != FlavorMySQL {
		t.Fatal("flavor misread")
	}
}

// TestUnresponsive: a backend whose probe hangs is unresponsive once the
// probe has run for the timeout, one whose latest probe failed at once, and
// one that answers never (however long its probes take below the timeout).
func TestUnresponsive(t *testing.T) {
	topo := testTopology(t, "round-robin", []int{1, 1})
	c := topo.Current().Cluster("main")
	hung, failing := c.Replicas[0], c.Replicas[1]
	const timeout = time.Hour // the test moves the clock instead of waiting
	release := make(chan struct{})
	f := &fakeChecks{fn: map[string]func() (*Status, error){}, n: map[string]int{}}
	f.set(hung.Address, func() (*Status, error) {
		<-release
		return &Status{Replicating: true, IORunning: true, SQLRunning: true}, nil
	})
	f.set(failing.Address, func() (*Status, error) { return nil, errors.New("connection refused") })
	p := &Prober{Topology: topo, Interval: 5 * time.Millisecond, Timeout: time.Second, FailuresBeforeDown: 3, Check: f.check}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "a failed probe", func() bool { return f.count(failing.Address) >= 1 && failing.LastError() != "" })
	if !failing.Unresponsive(timeout, time.Now()) {
		t.Error("a backend whose latest probe failed is not unresponsive")
	}
	waitFor(t, "the hung probe started", func() bool { return f.count(hung.Address) >= 1 })
	if hung.Unresponsive(timeout, time.Now()) {
		t.Error("a backend whose probe runs for less than the timeout is unresponsive")
	}
	if !hung.Unresponsive(timeout, time.Now().Add(timeout)) {
		t.Error("a backend whose probe has run for the timeout is not unresponsive")
	}
	if c.Master.Unresponsive(timeout, time.Now()) {
		t.Error("a backend that answers its probes is unresponsive")
	}
	close(release)
	waitFor(t, "the hung probe finished", func() bool { return !hung.Unresponsive(timeout, time.Now().Add(timeout)) })
}
