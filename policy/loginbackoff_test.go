package policy

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

var testPolicy = Backoff{Threshold: 3, First: time.Second, Max: 8 * time.Second}

// TestLoginBackoffTable: below the threshold nothing is refused; at it the
// address is refused for the first period, doubling with each further
// failure up to the max; other addresses are unaffected; a success forgets
// the address.
func TestLoginBackoffTable(t *testing.T) {
	tb := NewLoginBackoff(100)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	t0 := time.Unix(1000, 0)
	for i := 1; i <= 2; i++ {
		if n, d := tb.Failed(a, t0, testPolicy); n != i || d != 0 {
			t.Fatalf("failure %d: (%d, %s), want (%d, 0)", i, n, d, i)
		}
		if w, _ := tb.Blocked(a, t0, testPolicy); w != 0 {
			t.Fatalf("refused after %d failures (threshold 3)", i)
		}
	}
	wants := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
	now := t0
	for i, want := range wants {
		n, d := tb.Failed(a, now, testPolicy)
		if n != 3+i || d != want {
			t.Fatalf("failure %d: (%d, %s), want (%d, %s)", 3+i, n, d, 3+i, want)
		}
		if w, f := tb.Blocked(a, now, testPolicy); w != want || f != n {
			t.Fatalf("blocked after failure %d: (%s, %d), want (%s, %d)", n, w, f, want, n)
		}
		if w, _ := tb.Blocked(a, now.Add(want-time.Millisecond), testPolicy); w != time.Millisecond {
			t.Fatalf("1ms before the end: wait %s", w)
		}
		if w, _ := tb.Blocked(b, now, testPolicy); w != 0 {
			t.Fatalf("another address is refused")
		}
		now = now.Add(want)
		if w, _ := tb.Blocked(a, now, testPolicy); w != 0 {
			t.Fatalf("still refused when the period ended: %s", w)
		}
	}
	tb.Succeeded(a)
	if tb.Len() != 0 {
		t.Fatalf("success did not forget the address: %d remembered", tb.Len())
	}
	if n, _ := tb.Failed(a, now, testPolicy); n != 1 {
		t.Fatalf("after a success the count restarts at 1, got %d", n)
	}
}

// TestLoginBackoffForgets: an address is forgotten, and counts from 1
// again, once max passed since its last failure and since its refusal
// ended.
func TestLoginBackoffForgets(t *testing.T) {
	tb := NewLoginBackoff(100)
	a := netip.MustParseAddr("192.0.2.1")
	t0 := time.Unix(1000, 0)
	for range 4 {
		tb.Failed(a, t0, testPolicy)
	}
	// Refused for 2s, then remembered for max more.
	end := t0.Add(2 * time.Second)
	if w, f := tb.Blocked(a, end.Add(testPolicy.Max-time.Nanosecond), testPolicy); w != 0 || f != 4 {
		t.Fatalf("just before expiry: wait %s, failures %d; want 0, 4", w, f)
	}
	later := end.Add(testPolicy.Max)
	if w, f := tb.Blocked(a, later, testPolicy); w != 0 || f != 0 || tb.Len() != 0 {
		t.Fatalf("not forgotten after Max: wait %s, failures %d, %d remembered", w, f, tb.Len())
	}
	if n, d := tb.Failed(a, later, testPolicy); n != 1 || d != 0 {
		t.Fatalf("(%d, %s), want (1, 0)", n, d)
	}
}

// TestLoginBackoffOff: threshold 0 tracks and refuses nothing.
func TestLoginBackoffOff(t *testing.T) {
	tb := NewLoginBackoff(100)
	off := Backoff{First: time.Second, Max: time.Minute}
	a := netip.MustParseAddr("192.0.2.1")
	for range 50 {
		if n, d := tb.Failed(a, time.Unix(1000, 0), off); n != 0 || d != 0 {
			t.Fatalf("off: (%d, %s)", n, d)
		}
	}
	if w, _ := tb.Blocked(a, time.Unix(1000, 0), off); w != 0 || tb.Len() != 0 {
		t.Fatalf("off: refused %s, %d remembered", w, tb.Len())
	}
}

// TestLoginBackoffBounded: a client cycling through a million source
// addresses leaves at most cap of them remembered; the oldest go first, and
// expired ones are pruned.
func TestLoginBackoffBounded(t *testing.T) {
	const capacity = 1000
	tb := NewLoginBackoff(capacity)
	t0 := time.Unix(1000, 0)
	for i := range 1 << 20 {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		tb.Failed(ip, t0.Add(time.Duration(i)*time.Microsecond), testPolicy)
	}
	if n := tb.Len(); n != capacity {
		t.Fatalf("%d addresses remembered, want the cap %d", n, capacity)
	}
	newest := netip.AddrFrom4([4]byte{10, 15, 255, 255})
	if _, f := tb.Blocked(newest, t0.Add(2*time.Second), testPolicy); f != 1 {
		t.Fatalf("the newest address lost its count: %d", f)
	}
	// Everything expires max after its last failure: one more failure
	// prunes them all.
	tb.Failed(netip.MustParseAddr("192.0.2.9"), t0.Add(time.Hour), testPolicy)
	if n := tb.Len(); n != 1 {
		t.Fatalf("%d remembered after pruning, want 1", n)
	}
}

func TestBackoffKey(t *testing.T) {
	cases := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 5}, "127.0.0.2"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.1"), Port: 5}, "192.0.2.1"},
		// One IPv6 host usually holds a whole /64.
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), Port: 5}, "2001:db8:1:2::"},
		{&net.UnixAddr{Name: "/tmp/x", Net: "unix"}, ""},
	}
	for _, c := range cases {
		k, ok := BackoffKey(c.addr)
		if got := k.String(); (c.want == "" && ok) || (c.want != "" && got != c.want) {
			t.Errorf("BackoffKey(%v) = %s, %v; want %q", c.addr, got, ok, c.want)
		}
	}
}
