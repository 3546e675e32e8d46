package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/sluice-proxy/sluice/conf"
)

// TestFollowConfig: a Fleet applies the configuration stored before it
// started, then each new revision in order; the applied revision reaches
// its membership record; a revision its apply refuses is recorded as
// refused and leaves the applied one; a deleted key changes nothing.
func TestFollowConfig(t *testing.T) {
	c := startEtcd(t)
	cfg := conf.Fleet{Etcd: c.Endpoints(), Prefix: "/sluice/cfgtest", DialTimeout: conf.Duration{Duration: 2 * time.Second},
		SessionTTL: conf.Duration{Duration: 10 * time.Second}}
	cli, err := Dial(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, err := GetConfig(ctx, cli, cfg.Prefix); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("GetConfig before any push: %v, want ErrNoConfig", err)
	}
	rev1, err := PushConfig(ctx, cli, cfg.Prefix, []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var got []int64
	f, err := New(&cfg, Member{Instance: "x", Address: "x:6033", Version: "test", Started: time.Now()},
		zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)))
	if err != nil {
		t.Fatal(err)
	}
	f.OnConfig(func(text []byte, rev int64) error {
		mu.Lock()
		got = append(got, rev)
		mu.Unlock()
		if string(text) == "bad" {
			return errors.New("does not validate")
		}
		return nil
	})
	f.Start()
	t.Cleanup(func() { _ = f.Close() })
	waitFor(t, "the stored revision applied at start", 10*time.Second, func() bool { return f.ConfigRevision() == rev1 })
	recorded := func() int64 {
		resp, err := cli.Get(ctx, cfg.Prefix+"/members/x")
		if err != nil || len(resp.Kvs) == 0 {
			return -1
		}
		var m Member
		if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
			t.Fatal(err)
		}
		return m.ConfigRevision
	}
	waitFor(t, "the membership record carries the applied revision", 10*time.Second, func() bool { return recorded() == rev1 })

	var last int64
	for _, v := range []string{"v2", "v3", "v4"} {
		if last, err = PushConfig(ctx, cli, cfg.Prefix, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the newest revision applied", 10*time.Second, func() bool { return f.ConfigRevision() == last })
	waitFor(t, "the record follows", 10*time.Second, func() bool { return recorded() == last })

	bad, err := PushConfig(ctx, cli, cfg.Prefix, []byte("bad"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bad revision refused", 10*time.Second, func() bool { r, _ := f.RejectedRevision(); return r == bad })
	if r, why := f.RejectedRevision(); f.ConfigRevision() != last || why != "does not validate" {
		t.Errorf("after a refused revision %d: applied %d (want %d kept), why %q", r, f.ConfigRevision(), last, why)
	}
	if _, err := cli.Delete(ctx, ConfigKey(cfg.Prefix)); err != nil {
		t.Fatal(err)
	}
	good, err := PushConfig(ctx, cli, cfg.Prefix, []byte("v5"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a good revision after the bad one", 10*time.Second, func() bool { return f.ConfigRevision() == good })
	if r, _ := f.RejectedRevision(); r != 0 {
		t.Errorf("RejectedRevision %d after a good revision, want 0", r)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Errorf("revisions offered out of order or twice: %v", got)
		}
	}
	if got[0] != rev1 || got[len(got)-1] != good {
		t.Errorf("revisions offered: %v, want from %d to %d", got, rev1, good)
	}
}
