package fleet

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/sluice-proxy/sluice/conf"
)

// recorder keeps the settings a Fleet applied, by address.
type recorder struct {
	mu   sync.Mutex
	all  []BackendSetting
	last map[string]BackendSetting
}

func (r *recorder) apply(s BackendSetting) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, s)
	if r.last == nil {
		r.last = map[string]BackendSetting{}
	}
	if s.State != "" {
		r.last[s.Address+"/state"] = s
	}
}

func (r *recorder) state(addr string) (string, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.last[addr+"/state"]
	return s.State, s.Revision
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.all)
}

// TestApplySettingOrder: a setting older than the one applied for its key
// is dropped, whichever path brings it; a full read applies "online" only
// over an "offline" this instance applied (ONLINE also ends a fence).
func TestApplySettingOrder(t *testing.T) {
	cfg := conf.Fleet{Etcd: []string{"127.0.0.1:1"}, Prefix: "/p", DialTimeout: conf.Duration{Duration: time.Second},
		SessionTTL: conf.Duration{Duration: 2 * time.Second}}
	f, err := New(&cfg, Member{Instance: "a"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var r recorder
	f.OnBackend(r.apply)
	key := "/p/backends/h:1/state"
	f.applySetting(key, BackendSetting{Address: "h:1", State: BackendOffline, Revision: 5}, true)
	f.applySetting(key, BackendSetting{Address: "h:1", State: BackendOnline, Revision: 4}, true)
	f.applySetting(key, BackendSetting{Address: "h:1", State: BackendOnline, Revision: 5}, true)
	if st, rev := r.state("h:1"); st != BackendOffline || rev != 5 || r.count() != 1 {
		t.Fatalf("after offline@5 and online@4,@5: %s@%d, %d applies; want offline@5 once", st, rev, r.count())
	}
	f.applySetting(key, BackendSetting{Address: "h:1", State: BackendOnline, Revision: 9}, false)
	if st, rev := r.state("h:1"); st != BackendOnline || rev != 9 {
		t.Fatalf("a full read's online@9 over offline@5: %s@%d, want online@9", st, rev)
	}
	other := "/p/backends/h:2/state"
	f.applySetting(other, BackendSetting{Address: "h:2", State: BackendOnline, Revision: 3}, false)
	if st, _ := r.state("h:2"); st != "" {
		t.Fatalf("a full read applied online to a backend it never took offline: %s", st)
	}
	f.applySetting(other, BackendSetting{Address: "h:2", State: BackendOnline, Revision: 4}, true)
	if st, _ := r.state("h:2"); st != BackendOnline {
		t.Fatalf("a change to online was not applied: %q", st)
	}
}

// TestBackendSettingsFleetWide: a setting written by one member reaches
// the other within 1 s; a member that starts later applies what is
// stored; two members writing the same key at once end, everywhere, on the
// value etcd kept last (the highest revision).
func TestBackendSettingsFleetWide(t *testing.T) {
	c := startEtcd(t)
	start := func(name string) (*Fleet, *recorder) {
		cfg := conf.Fleet{Etcd: c.Endpoints(), Prefix: "/sluice/bk", DialTimeout: conf.Duration{Duration: 2 * time.Second},
			SessionTTL: conf.Duration{Duration: 3 * time.Second}}
		f, err := New(&cfg, Member{Instance: name, Started: time.Now()}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
		if err != nil {
			t.Fatal(err)
		}
		r := &recorder{}
		f.OnBackend(r.apply)
		f.Start()
		t.Cleanup(func() { _ = f.Close() })
		return f, r
	}
	f1, r1 := start("one")
	f2, r2 := start("two")
	waitFor(t, "both connected", 10*time.Second, func() bool { return f1.Up() && f2.Up() })

	t0 := time.Now()
	rev, err := f1.SetBackend(t.Context(), BackendSetting{Address: "db:3306", State: BackendOffline})
	if err != nil {
		t.Fatal(err)
	}
	if st, got := r1.state("db:3306"); st != BackendOffline || got != rev {
		t.Fatalf("the writer applied %s@%d, want offline@%d at once", st, got, rev)
	}
	took := waitFor(t, "the other member applies offline", time.Second, func() bool {
		st, _ := r2.state("db:3306")
		return st == BackendOffline
	})
	t.Logf("member two applied OFFLINE %v after member one wrote it (%v since the write began)", took.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))

	_, r3 := start("three")
	waitFor(t, "a member started later applies the stored offline", 10*time.Second, func() bool {
		st, _ := r3.state("db:3306")
		return st == BackendOffline
	})

	// Both write the key 20 times at once, alternating states.
	var wg sync.WaitGroup
	for i, f := range []*Fleet{f1, f2} {
		wg.Go(func() {
			for n := range 20 {
				st := BackendOffline
				if (n+i)%2 == 0 {
					st = BackendOnline
				}
				if _, err := f.SetBackend(t.Context(), BackendSetting{Address: "db:3306", State: st}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	resp, err := f1.cli().Get(t.Context(), "/sluice/bk/backends/db:3306/state")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("reading the key: %v %v", resp, err)
	}
	var final BackendSetting
	if err := json.Unmarshal(resp.Kvs[0].Value, &final); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s@%d", final.State, resp.Kvs[0].ModRevision)
	for name, r := range map[string]*recorder{"one": r1, "two": r2, "three": r3} {
		waitFor(t, "member "+name+" ends on etcd's last write", 2*time.Second, func() bool {
			st, rev := r.state("db:3306")
			return fmt.Sprintf("%s@%d", st, rev) == want
		})
	}
	t.Logf("after 40 concurrent writes every member applied %s, the last revision", want)
}
