package policy

import (
	"container/list"
	"net"
	"net/netip"
	"sync"
	"time"
)

// MaxBackoffAddrs caps the addresses the login backoff remembers. When it
// is full, the address whose last failure is oldest is forgotten, so a
// client cycling through source addresses costs bounded memory (about
// 200 bytes an address).
const MaxBackoffAddrs = 10000

// Backoff is the login backoff's live configuration: after threshold
// failures in a row an address is refused for first, doubling with each
// further failure up to max. threshold 0 switches the backoff off.
type Backoff struct {
	Threshold  int
	First, Max time.Duration
}

// backoffEntry is one client address's failed logins.
type backoffEntry struct {
	key      netip.Addr
	failures int       // failures in a row
	last     time.Time // of the last failure
	until    time.Time // logins are refused before this
}

// LoginBackoff counts failed logins per client address and says which
// addresses are in backoff. An IPv6 client is counted by its /64 network,
// which one host usually holds whole. It is pure bookkeeping (the caller
// passes the time), safe for concurrent use, and holds at most cap
// addresses.
type LoginBackoff struct {
	mu      sync.Mutex
	cap     int
	entries map[netip.Addr]*list.Element
	// byLast holds the entries, oldest last failure at the front.
	byLast list.List
}

// NewLoginBackoff returns an empty table holding at most capacity
// addresses.
func NewLoginBackoff(capacity int) *LoginBackoff {
	return &LoginBackoff{cap: capacity, entries: make(map[netip.Addr]*list.Element)}
}

// BackoffKey is the address the backoff counts a client under; ok is false
// for an address that is not IP (then it is not tracked).
func BackoffKey(addr net.Addr) (netip.Addr, bool) {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip = a.AddrPort().Addr()
	default:
		ap, err := netip.ParseAddrPort(addr.String())
		if err != nil {
			return netip.Addr{}, false
		}
		ip = ap.Addr()
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			ip = p.Addr()
		}
	}
	return ip, ip.IsValid()
}

// expired reports whether e can be forgotten at now: max passed since its
// last failure and since its refusal ended. An address that keeps failing
// as each refusal ends so stays at one attempt per max.
func (e *backoffEntry) expired(now time.Time, pol Backoff) bool {
	end := e.last
	if e.until.After(end) {
		end = e.until
	}
	return now.Sub(end) >= pol.Max
}

// Blocked returns how long logins from key are still refused at now (0:
// not refused) and the failures in a row that caused it.
func (t *LoginBackoff) Blocked(key netip.Addr, now time.Time, pol Backoff) (time.Duration, int) {
	if pol.Threshold <= 0 {
		return 0, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	el := t.entries[key]
	if el == nil {
		return 0, 0
	}
	e := el.Value.(*backoffEntry)
	if e.expired(now, pol) {
		t.remove(el)
		return 0, 0
	}
	if now.Before(e.until) {
		return e.until.Sub(now), e.failures
	}
	return 0, e.failures
}

// Failed counts a failed login from key at now. It returns the failures in
// a row and, when they reached the threshold, the refusal period that
// starts now (0 otherwise).
func (t *LoginBackoff) Failed(key netip.Addr, now time.Time, pol Backoff) (int, time.Duration) {
	if pol.Threshold <= 0 {
		return 0, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.prune(now, pol)
	var e *backoffEntry
	if el := t.entries[key]; el != nil {
		e = el.Value.(*backoffEntry)
		if e.expired(now, pol) {
			e.failures = 0
		}
		t.byLast.MoveToBack(el)
	} else {
		for len(t.entries) >= t.cap && t.cap > 0 {
			t.remove(t.byLast.Front())
		}
		e = &backoffEntry{key: key}
		t.entries[key] = t.byLast.PushBack(e)
	}
	e.failures++
	e.last = now
	if e.failures < pol.Threshold {
		return e.failures, 0
	}
	d := pol.First
	for i := pol.Threshold; i < e.failures && d < pol.Max; i++ {
		d *= 2
	}
	d = min(d, pol.Max)
	e.until = now.Add(d)
	return e.failures, d
}

// Succeeded forgets key: a successful login ends its backoff.
func (t *LoginBackoff) Succeeded(key netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el := t.entries[key]; el != nil {
		t.remove(el)
	}
}

// Len reports how many addresses are remembered.
func (t *LoginBackoff) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// prune forgets expired entries from the oldest on.
func (t *LoginBackoff) prune(now time.Time, pol Backoff) {
	for el := t.byLast.Front(); el != nil; el = t.byLast.Front() {
		if !el.Value.(*backoffEntry).expired(now, pol) {
			return
		}
		t.remove(el)
	}
}

func (t *LoginBackoff) remove(el *list.Element) {
	delete(t.entries, el.Value.(*backoffEntry).key)
	t.byLast.Remove(el)
}
