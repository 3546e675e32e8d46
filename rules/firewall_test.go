package rules

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/router"
)

// TestAllowlistLearnAllowForget: learnt and allowed digests are allowed
// for their user only, counted, listed and forgotten; a refused digest's
// text is kept for the ALLOW that follows.
func TestAllowlistLearnAllowForget(t *testing.T) {
	a := NewAllowlist()
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	sel, ins := "select * from t where id = ?", "insert into t values ( ? )"
	selID, insID := router.DigestID(sel), router.DigestID(ins)
	if a.Allowed("app", selID) {
		t.Fatal("an empty allowlist allows a digest")
	}
	if added, err := a.Learn("app", selID, sel, at); !added || err != nil {
		t.Fatalf("Learn: %v %v, want true", added, err)
	}
	if added, err := a.Learn("app", selID, sel, at); added || err != nil {
		t.Fatalf("Learn again: %v %v, want false, nil", added, err)
	}
	if !a.Allowed("app", selID) || a.Allowed("other", selID) || a.Allowed("app", insID) {
		t.Fatal("a learnt digest must be allowed for its user only")
	}
	a.NoteRefused("app", insID, ins)
	if added, err := a.Allow("app", insID, "", at.Add(time.Minute)); !added || err != nil {
		t.Fatalf("Allow: %v %v", added, err)
	}
	if added, err := a.Allow("app", insID, "", at); added || err != nil {
		t.Fatalf("Allow again: %v %v, want false, nil", added, err)
	}
	es := a.Entries("app")
	if len(es) != 2 || es[0].Digest != ins || es[0].Source != Allowed || es[0].Hits() != 0 ||
		es[1].Digest != sel || es[1].Source != Learned || es[1].Hits() != 2 || !es[1].At.Equal(at) {
		t.Fatalf("entries %+v", es)
	}
	if a.Len() != 2 || strings.Join(a.Users(), ",") != "app" {
		t.Fatalf("Len %d Users %v", a.Len(), a.Users())
	}
	if !a.Forget("app", insID) || a.Forget("app", insID) || a.Allowed("app", insID) || a.Len() != 1 {
		t.Fatal("Forget: want true once, then not allowed")
	}
	a.Learn("app", insID, ins, at)
	if n := a.ForgetAll("app"); n != 2 || a.Len() != 0 || len(a.Users()) != 0 || a.Allowed("app", selID) {
		t.Fatalf("ForgetAll = %d, Len %d", n, a.Len())
	}
}

// TestAllowlistBound: learning stops at MaxAllowedDigests, and Allow says
// why it cannot add.
func TestAllowlistBound(t *testing.T) {
	a := NewAllowlist()
	for i := range MaxAllowedDigests {
		if added, err := a.Learn("app", uint64(i), "", time.Time{}); !added || err != nil {
			t.Fatalf("digest %d not learnt: %v", i, err)
		}
	}
	if added, err := a.Learn("app", MaxAllowedDigests, "", time.Time{}); added || !errors.Is(err, ErrAllowlistFull) ||
		!strings.Contains(err.Error(), "the allowlist of 'app' holds 10000 digests") {
		t.Fatalf("learnt past the bound: %v %v", added, err)
	}
	if added, err := a.Learn("app", 1, "", time.Time{}); added || err != nil {
		t.Fatalf("a known digest on a full allowlist: %v %v, want false, nil", added, err)
	}
	if _, err := a.Allow("app", MaxAllowedDigests, "", time.Time{}); !errors.Is(err, ErrAllowlistFull) {
		t.Fatalf("Allow on a full allowlist: %v", err)
	}
	if added, _ := a.Learn("other", 1, "", time.Time{}); !added {
		t.Fatal("the bound is per user")
	}
}

// TestAllowlistState: MarshalState and UnmarshalState round-trip every
// field; a damaged state is refused naming what is wrong and changes
// nothing.
func TestAllowlistState(t *testing.T) {
	a := NewAllowlist()
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	a.Learn("app", 1, "select ?", at)
	a.Allowed("app", 1)
	if _, err := a.Allow("app", 0xfeedface00000001, "", at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	a.Learn("report", 7, "select * from r", at)
	data, v, err := a.MarshalState()
	if err != nil || v != a.Version() || v != 3 {
		t.Fatalf("MarshalState: version %d (%v), want 3", v, err)
	}
	b := NewAllowlist()
	if err := b.UnmarshalState(data); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 3 || !b.Allowed("app", 1) || !b.Allowed("app", 0xfeedface00000001) || !b.Allowed("report", 7) {
		t.Fatalf("loaded %d digests: %s", b.Len(), data)
	}
	es := b.Entries("app")
	if es[1].Digest != "select ?" || es[1].Hits() != 3 || !es[1].At.Equal(at) || es[1].Source != Learned ||
		es[0].Source != Allowed || !es[0].At.Equal(at.Add(time.Hour)) {
		t.Fatalf("loaded entries %+v %+v", es[0], es[1])
	}
	for _, tc := range []struct{ data, want string }{
		{"{", "firewall state: unexpected end"},
		{`{"format": 2}`, "format 2"},
		{`{"format": 1, "users": {"app": [{"digest_id": "xyz"}]}}`, `user "app": digest_id "xyz" is not 16 hex digits`},
	} {
		err := b.UnmarshalState([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("UnmarshalState(%s) = %v, want %q", tc.data, err, tc.want)
		}
		if b.Len() != 3 || !b.Allowed("report", 7) {
			t.Fatalf("a refused state changed the allowlists")
		}
	}
}

// TestAllowlistChanged: each change signals Changed, coalesced; a check
// does not.
func TestAllowlistChanged(t *testing.T) {
	a := NewAllowlist()
	pending := func() bool {
		select {
		case <-a.Changed():
			return true
		default:
			return false
		}
	}
	a.Learn("app", 1, "", time.Time{})
	a.Learn("app", 2, "", time.Time{})
	if !pending() || pending() {
		t.Fatal("two learns: want one pending signal")
	}
	a.Allowed("app", 1)
	a.Learn("app", 1, "", time.Time{})
	if pending() {
		t.Fatal("a check or a known digest signalled a change")
	}
	a.Forget("app", 1)
	if !pending() {
		t.Fatal("Forget did not signal")
	}
}

// TestAllowlistAllowedAllocatesNothing: the enforce check of an allowed
// and of an unknown statement allocates nothing.
func TestAllowlistAllowedAllocatesNothing(t *testing.T) {
	a := NewAllowlist()
	a.Learn("app", 42, "select ?", time.Time{})
	user := strings.Clone("app")
	if n := testing.AllocsPerRun(1000, func() {
		if !a.Allowed(user, 42) || a.Allowed(user, 43) {
			t.Fatal("wrong answer")
		}
	}); n != 0 {
		t.Errorf("Allowed allocates %v times per call", n)
	}
}

// TestAllowlistConcurrent: sessions checking and learning while the admin
// allows and forgets and the saver marshals (run with -race).
func TestAllowlistConcurrent(t *testing.T) {
	a := NewAllowlist()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := fmt.Sprintf("u%d", w%2)
			for i := range 2000 {
				id := uint64(i % 50)
				if !a.Allowed(user, id) {
					a.Learn(user, id, "d", time.Time{})
				}
				switch i % 500 {
				case 0:
					a.ForgetAll(user)
				case 1:
					if _, _, err := a.MarshalState(); err != nil {
						t.Error(err)
					}
				case 2:
					a.Forget(user, id)
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	for _, u := range a.Users() {
		n += len(a.Entries(u))
	}
	if n != a.Len() {
		t.Errorf("Len %d, entries %d", a.Len(), n)
	}
}
