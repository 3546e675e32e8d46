package auth

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-proxy/sluice/auth/grants"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/protocol"
)

// GrantsCache holds the accounts' privileges, each read at most TTL ago:
// a login stores what it learnt on its own connection (Put); a session
// whose entry is older asks Fresh, which reads the account's grants again
// as the auth server's service account. It is safe for concurrent use.
type GrantsCache struct {
	// settings are the TTL and the reader, replaced as a whole on reload.
	settings atomic.Pointer[grantsSettings]

	mu sync.Mutex
	m  map[string]*GrantsEntry
}

type grantsSettings struct {
	ttl    time.Duration
	reader *GrantsReader
}

// Configure sets how old the grants a session checks against may be (ttl)
// and how they are read again (reader; nil, without auth.service_user:
// only at login, and they never expire). Safe at any time.
func (c *GrantsCache) Configure(ttl time.Duration, reader *GrantsReader) {
	c.settings.Store(&grantsSettings{ttl: ttl, reader: reader})
}

// TTL is the configured TTL; 0 before Configure, or when grants are never
// read again.
func (c *GrantsCache) TTL() time.Duration {
	if st := c.settings.Load(); st != nil && st.reader != nil {
		return st.ttl
	}
	return 0
}

// GrantsEntry is one account's grants in a GrantsCache. Sessions of the
// account share it.
type GrantsEntry struct {
	user, host string
	set        atomic.Pointer[grants.Set]
	// fetched is when set was read (mono time).
	fetched atomic.Int64
	// actives are set's Actives by role, made once per set.
	mu      sync.Mutex
	actives map[string]*grants.Active
	// refresh serialises reading the grants again.
	refresh sync.Mutex
	// lent is the last set Known gave a login without its other roles'
	// grants being read again.
	lent atomic.Pointer[grants.Set]
}

// Put stores set, just learnt, as its account's grants and returns the
// account's entry. A set that Known lent to the login is not stored again,
// and counts as read anew only when the login's first answer was all
// there is to it (see Known).
func (c *GrantsCache) Put(set *grants.Set) *GrantsEntry {
	key := set.User + "@" + set.Host
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*GrantsEntry{}
	}
	e := c.m[key]
	if e == nil {
		e = &GrantsEntry{user: set.User, host: set.Host}
		c.m[key] = e
	}
	c.mu.Unlock()
	if set == e.lent.Load() {
		// Its other roles' grants were not read at this login: the set is
		// no fresher than it was, and one stored since is newer.
		return e
	}
	if cur := e.set.Load(); cur != nil && cur.Equal(set) && (set.First == nil || cur.SameFirst(set.First)) {
		// The same grants again (every login of the account): the
		// sessions share the set and its Actives instead of each keeping
		// a copy.
		e.fetched.Store(int64(mono.Now()))
		return e
	}
	e.store(set)
	return e
}

func (e *GrantsEntry) store(set *grants.Set) {
	e.mu.Lock()
	e.set.Store(set)
	e.actives = nil
	e.mu.Unlock()
	e.fetched.Store(int64(mono.Now()))
}

// Known returns the set held for account user@host when its First is
// exactly lines (a login's first SHOW GRANTS answer, as sanitized), else
// nil. Logins use it to share one set. For an account with roles other
// than its default one, whose grants that answer does not show, the set
// is returned only while it is not older than the TTL (so that a login
// reads them again at least that often), and the login does not make it
// count as fresh (Put).
func (c *GrantsCache) Known(user, host string, lines []string) *grants.Set {
	c.mu.Lock()
	e := c.m[user+"@"+host]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	set := e.set.Load()
	if set == nil || !set.SameFirst(lines) {
		return nil
	}
	if len(otherRoles(set)) > 0 {
		st := c.settings.Load()
		if st == nil || e.Stale(mono.Now(), st.ttl) {
			return nil
		}
		e.lent.Store(set)
	}
	return set
}

// Flush makes every entry stale: the next statement of each session reads
// its account's grants again (RELOAD CONFIG, FLUSH PRIVILEGES).
func (c *GrantsCache) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.m {
		e.fetched.Store(0)
	}
}

// Active returns the privileges of a session of the entry's account with
// role enabled, from the entry's current set.
func (e *GrantsEntry) Active(role string) *grants.Active {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a := e.actives[role]; a != nil {
		return a
	}
	a := e.set.Load().Activate(role)
	if e.actives == nil {
		e.actives = map[string]*grants.Active{}
	}
	e.actives[role] = a
	return a
}

// DefaultActive is Active of the account's default role: the rights it
// has when it runs as a view's or routine's definer.
func (e *GrantsEntry) DefaultActive() *grants.Active {
	return e.Active(e.set.Load().DefaultRole)
}

// Stale reports whether the entry's grants were read more than ttl before
// now (mono time). Cheap: sessions ask it per statement.
func (e *GrantsEntry) Stale(now time.Duration, ttl time.Duration) bool {
	return now-time.Duration(e.fetched.Load()) > ttl
}

// Fresh reads e's grants again when they are older than the cache's TTL
// (one reader at a time; the others wait and use its result). Without a
// Reader it does nothing. When the auth server cannot be asked, the old
// grants stay and are tried again after a second; the error is returned
// for the caller to log.
func (c *GrantsCache) Fresh(ctx context.Context, e *GrantsEntry) error {
	st := c.settings.Load()
	if st == nil || st.reader == nil || !e.Stale(mono.Now(), st.ttl) {
		return nil
	}
	e.refresh.Lock()
	defer e.refresh.Unlock()
	if !e.Stale(mono.Now(), st.ttl) {
		return nil
	}
	set, err := st.reader.Read(ctx, e.user, e.host)
	if err != nil {
		retry := mono.Now() - st.ttl + time.Second
		e.fetched.Store(int64(retry))
		return err
	}
	if cur := e.set.Load(); cur != nil && cur.Equal(set) {
		// Unchanged: the set stays, with its Actives and its First.
		e.fetched.Store(int64(mono.Now()))
		return nil
	}
	e.store(set)
	return nil
}

// GrantsReader reads an account's grants on the auth server as sluice's
// service account there (SHOW GRANTS FOR needs SELECT on mysql.*).
type GrantsReader struct {
	Address, User, Password string
	DialTimeout             time.Duration
}

// dial opens a connection to the auth server as the service account.
// Closing it zeroes the bytes it read (wipingConn): its answers hold the
// IDENTIFIED clauses of SHOW GRANTS FOR.
func (g *GrantsReader) dial(ctx context.Context) (*protocol.Conn, uint32, error) {
	d := net.Dialer{Timeout: g.DialTimeout}
	raw, err := d.DialContext(ctx, "tcp", g.Address)
	if err != nil {
		return nil, 0, fmt.Errorf("auth server %s: %w", g.Address, err)
	}
	nc := &wipingConn{Conn: raw}
	deadline := time.Now().Add(g.DialTimeout + 5*time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = nc.SetDeadline(deadline)
	c := protocol.NewConn(nc)
	c.LenientSeq = true
	caps := protocol.BackendCapabilities
	if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: g.User, Password: g.Password, Capabilities: caps}); err != nil {
		nc.Close()
		return nil, 0, fmt.Errorf("auth server %s, service account %q: %w", g.Address, g.User, err)
	}
	return c, caps, nil
}

// RoleExists reports whether the auth server has a role of that name.
func (g *GrantsReader) RoleExists(ctx context.Context, role string) (bool, error) {
	c, caps, err := g.dial(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	rs, err := queries(c, caps, "SELECT COUNT(*) FROM mysql.user WHERE is_role = 'Y' AND User = "+quoteString(role))
	if err != nil {
		return false, err
	}
	return len(rs[0]) == 1 && rs[0][0] != "0", nil
}

// RoleExists asks the auth server whether role exists, as the service
// account; known is false without one (or when it cannot be asked).
func (c *GrantsCache) RoleExists(ctx context.Context, role string) (exists, known bool) {
	st := c.settings.Load()
	if st == nil || st.reader == nil {
		return false, false
	}
	ok, err := st.reader.RoleExists(ctx, role)
	return ok, err == nil
}

// Read returns the grants of account user@host and of every role it holds,
// each line sanitized as it is read.
func (g *GrantsReader) Read(ctx context.Context, user, host string) (*grants.Set, error) {
	c, caps, err := g.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rs, err := queries(c, caps, "SHOW GRANTS FOR "+quoteString(user)+"@"+quoteString(host))
	if err != nil {
		return nil, err
	}
	lines := rs[0]
	first, err := grants.Parse(user, host, lines)
	if err != nil {
		return nil, err
	}
	// Every role reachable from the account, breadth first.
	seen := map[string]bool{}
	todo := append([]string(nil), first.Granted...)
	for len(todo) > 0 {
		var texts, names []string
		for _, r := range todo {
			if !seen[r] {
				seen[r] = true
				names = append(names, r)
				texts = append(texts, "SHOW GRANTS FOR "+quoteName(r))
			}
		}
		todo = nil
		if len(texts) == 0 {
			break
		}
		rs, err := queries(c, caps, texts...)
		if err != nil {
			return nil, err
		}
		for i, r := range rs {
			lines = append(lines, r...)
			for _, l := range r {
				// GRANT `x` TO `role`: x is reachable too.
				if strings.HasPrefix(l, "GRANT `") && strings.HasSuffix(l, " TO "+quoteName(names[i])) {
					if end := strings.Index(l[7:], "`"); end >= 0 {
						todo = append(todo, l[7:7+end])
					}
				}
			}
		}
	}
	return grants.Parse(user, host, lines)
}

// wipingConn is a connection that zeroes, when it is closed, every byte
// its reads delivered: the read buffer above it (protocol.Conn's) keeps
// the raw packets, password hashes of SHOW GRANTS answers included, until
// it is reused, and a closed connection's buffer never is.
type wipingConn struct {
	net.Conn
	mu sync.Mutex
	// filled are the parts of the callers' buffers that reads filled;
	// stopped: wipe ran, nothing more is recorded.
	filled  [][]byte
	stopped bool
}

func (w *wipingConn) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if n > 0 {
		w.mu.Lock()
		if !w.stopped {
			w.filled = append(w.filled, p[:n])
		}
		w.mu.Unlock()
	}
	return n, err
}

// record starts recording what reads fill.
func (w *wipingConn) record() {
	w.mu.Lock()
	w.stopped = false
	w.mu.Unlock()
}

// forget stops recording and drops what was recorded, zeroing nothing:
// for a read buffer that may still hold bytes not yet consumed.
func (w *wipingConn) forget() {
	w.mu.Lock()
	w.filled, w.stopped = nil, true
	w.mu.Unlock()
}

// wipe zeroes what the reads so far filled and stops recording: for a
// connection that goes on (a login's, kept for COM_CHANGE_USER, or whose
// read buffer goes back to a shared pool) once every byte read has been
// consumed. Its caller must make sure nothing read is still unconsumed.
func (w *wipingConn) wipe() {
	w.mu.Lock()
	for _, b := range w.filled {
		clear(b)
	}
	w.filled, w.stopped = nil, true
	w.mu.Unlock()
}

// Close closes the connection, then zeroes what its reads filled.
func (w *wipingConn) Close() error {
	err := w.Conn.Close()
	w.mu.Lock()
	for _, b := range w.filled {
		clear(b)
	}
	w.filled = nil
	w.mu.Unlock()
	return err
}
