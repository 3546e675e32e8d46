package proxy

import (
	"container/list"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/protocol"
)

// ErHostIsBlocked is ER_HOST_IS_BLOCKED, the answer to a login from a client
// address in login backoff. MySQL sends it, in place of the greeting, to a
// host that max_connect_errors blocked; sluice does the same for an address
// whose logins failed too often, so the attempt costs no auth-server round
// trip and clients report it as a blocked host, not as a wrong password
// (which 1045 would claim even when the password is right).
const ErHostIsBlocked uint16 = 1129

// maxBackoffAddrs caps the addresses the login backoff remembers. When it
// is full, the address whose last failure is oldest is forgotten, so a
// client cycling through source addresses costs bounded memory (about
// 200 bytes an address).
const maxBackoffAddrs = 10000

// backoffPolicy is the login backoff's live configuration: after threshold
// failures in a row an address is refused for first, doubling with each
// further failure up to max. threshold 0 switches the backoff off.
type backoffPolicy struct {
	threshold  int
	first, max time.Duration
}

// backoffEntry is one client address's failed logins.
type backoffEntry struct {
	key      netip.Addr
	failures int       // failures in a row
	last     time.Time // of the last failure
	until    time.Time // logins are refused before this
}

// loginBackoff counts failed logins per client address and says which
// addresses are in backoff. An IPv6 client is counted by its /64 network,
// which one host usually holds whole. It is pure bookkeeping (the caller
// passes the time), safe for concurrent use, and holds at most cap
// addresses.
type loginBackoff struct {
	mu      sync.Mutex
	cap     int
	entries map[netip.Addr]*list.Element
	// byLast holds the entries, oldest last failure at the front.
	byLast list.List
}

func newLoginBackoff(capacity int) *loginBackoff {
	return &loginBackoff{cap: capacity, entries: make(map[netip.Addr]*list.Element)}
}

// backoffKey is the address the backoff counts a client under; ok is false
// for an address that is not IP (then it is not tracked).
func backoffKey(addr net.Addr) (netip.Addr, bool) {
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
func (e *backoffEntry) expired(now time.Time, pol backoffPolicy) bool {
	end := e.last
	if e.until.After(end) {
		end = e.until
	}
	return now.Sub(end) >= pol.max
}

// blocked returns how long logins from key are still refused at now (0:
// not refused) and the failures in a row that caused it.
func (t *loginBackoff) blocked(key netip.Addr, now time.Time, pol backoffPolicy) (time.Duration, int) {
	if pol.threshold <= 0 {
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

// failed counts a failed login from key at now. It returns the failures in
// a row and, when they reached the threshold, the refusal period that
// starts now (0 otherwise).
func (t *loginBackoff) failed(key netip.Addr, now time.Time, pol backoffPolicy) (int, time.Duration) {
	if pol.threshold <= 0 {
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
	if e.failures < pol.threshold {
		return e.failures, 0
	}
	d := pol.first
	for i := pol.threshold; i < e.failures && d < pol.max; i++ {
		d *= 2
	}
	d = min(d, pol.max)
	e.until = now.Add(d)
	return e.failures, d
}

// succeeded forgets key: a successful login ends its backoff.
func (t *loginBackoff) succeeded(key netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el := t.entries[key]; el != nil {
		t.remove(el)
	}
}

// len reports how many addresses are remembered.
func (t *loginBackoff) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// prune forgets expired entries from the oldest on.
func (t *loginBackoff) prune(now time.Time, pol backoffPolicy) {
	for el := t.byLast.Front(); el != nil; el = t.byLast.Front() {
		if !el.Value.(*backoffEntry).expired(now, pol) {
			return
		}
		t.remove(el)
	}
}

func (t *loginBackoff) remove(el *list.Element) {
	delete(t.entries, el.Value.(*backoffEntry).key)
	t.byLast.Remove(el)
}

// backoffPolicy reads the login backoff settings of the live configuration.
func (s *Server) backoffPolicy() backoffPolicy {
	p := &s.config().Proxy
	return backoffPolicy{threshold: p.LoginFailuresBeforeBackoff, first: p.LoginBackoff.Duration, max: p.LoginBackoffMax.Duration}
}

// errLoginBackoff marks a login refused because the client's address is in
// login backoff.
var errLoginBackoff = errors.New("client address in login backoff")

// loginRefusal returns the ERR 1129 for a login from remote while its
// address is in login backoff, nil otherwise. The caller sends it in place
// of the greeting, before any auth-server round trip.
func (s *Server) loginRefusal(remote net.Addr) *protocol.SQLError {
	key, ok := backoffKey(remote)
	if !ok {
		return nil
	}
	wait, failures := s.logins.blocked(key, time.Now(), s.backoffPolicy())
	if wait <= 0 {
		return nil
	}
	host := remote.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	secs := int((wait + time.Second - 1) / time.Second)
	return protocol.NewError(ErHostIsBlocked,
		"Host '%s' is blocked: too many failed logins from %s (%d in a row); retry in %ds (sluice login backoff)",
		host, host, failures, secs)
}

// loginRefused returns the auth.Server.Refused hook for a login from
// remote on port (named in the log): it counts the failure on the login
// backoff before the client sees the ERR, so a client that tries again at
// once already meets the refusal; a warn line says when a backoff starts.
func (s *Server) loginRefused(remote net.Addr, port string) func(user string) {
	return func(user string) {
		key, ok := backoffKey(remote)
		if !ok {
			return
		}
		failures, wait := s.logins.failed(key, time.Now(), s.backoffPolicy())
		if wait > 0 {
			s.log.Warn("login backoff: refusing logins from the client address", zap.String("port", port),
				zap.String("address", key.String()), zap.String("user", user), zap.Int("failures", failures),
				zap.Duration("backoff", wait))
		}
	}
}

// loginSucceeded forgets remote's failed logins: a successful login ends
// its backoff.
func (s *Server) loginSucceeded(remote net.Addr) {
	if key, ok := backoffKey(remote); ok {
		s.logins.succeeded(key)
	}
}
