package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-proxy/sluice/router"
)

// MaxAllowedDigests bounds one user's allowlist. Learning stops adding at
// the bound (the statement still runs) so that an application that builds
// statement texts without end cannot grow sluice's memory without end.
const MaxAllowedDigests = 10000

// maxRefusedNotes bounds the refused digests the Allowlist remembers the
// text of, for a later FIREWALL ALLOW; the oldest are forgotten.
const maxRefusedNotes = 1024

// Source says how a digest came onto an allowlist.
type Source uint8

const (
	// Learned: the user ran it while in learn mode.
	Learned Source = iota + 1
	// Allowed: FIREWALL ALLOW on the admin port.
	Allowed
)

func (s Source) String() string {
	if s == Allowed {
		return "admin"
	}
	return "learned"
}

// AllowEntry is one digest on a user's allowlist.
type AllowEntry struct {
	ID uint64
	// Digest is the normalised text, as SHOW QUERY DIGESTS prints it; ""
	// for a digest allowed by id that sluice has not seen.
	Digest string
	// At is when it was learnt or allowed.
	At     time.Time
	Source Source
	hits   atomic.Uint64
}

// Hits returns how many statements the entry let through.
func (e *AllowEntry) Hits() uint64 { return e.hits.Load() }

// Allowlist is the firewall's allowlists: per user, the set of statement
// digests (by router.DigestID) the user may run. It is pure state with no
// I/O: the server persists it through MarshalState and UnmarshalState.
//
// All methods are safe for concurrent use. The statement path (Allowed)
// takes a read lock and allocates nothing; changes take the write lock
// and are announced on Changed, coalesced.
type Allowlist struct {
	mu    sync.RWMutex
	users map[string]map[uint64]*AllowEntry
	// refused remembers the texts of refused digests by user and id.
	refused map[refusedKey]string
	total   atomic.Int64
	// version counts changes; Version lets a saver skip a write when
	// nothing changed since the last.
	version atomic.Uint64
	changed chan struct{}
}

type refusedKey struct {
	user string
	id   uint64
}

// NewAllowlist returns an empty Allowlist.
func NewAllowlist() *Allowlist {
	return &Allowlist{users: map[string]map[uint64]*AllowEntry{}, refused: map[refusedKey]string{},
		changed: make(chan struct{}, 1)}
}

// Allowed reports whether id is on user's allowlist, and counts the hit.
// It allocates nothing.
func (a *Allowlist) Allowed(user string, id uint64) bool {
	a.mu.RLock()
	e := a.users[user][id]
	a.mu.RUnlock()
	if e == nil {
		return false
	}
	e.hits.Add(1)
	return true
}

// Learn adds id, whose normalised text is digest, to user's allowlist as
// learnt at, and counts it as one hit. added is false when the entry was
// there already; the error (ErrAllowlistFull) reports a full allowlist
// (MaxAllowedDigests), to which nothing is added.
func (a *Allowlist) Learn(user string, id uint64, digest string, at time.Time) (added bool, err error) {
	return a.add(user, id, digest, at, Learned, 1)
}

// Allow adds id to user's allowlist as the admin port's doing. digest may
// be "": the text of a digest the user was refused is taken from the
// refusal (NoteRefused). added is false when the digest was there already;
// the error reports a full allowlist.
func (a *Allowlist) Allow(user string, id uint64, digest string, at time.Time) (added bool, err error) {
	return a.add(user, id, digest, at, Allowed, 0)
}

// ErrAllowlistFull is the error of Allow on a full allowlist.
var ErrAllowlistFull = errors.New("allowlist full")

func (a *Allowlist) add(user string, id uint64, digest string, at time.Time, src Source, hits uint64) (bool, error) {
	a.mu.Lock()
	l := a.users[user]
	if _, had := l[id]; had {
		a.mu.Unlock()
		return false, nil
	}
	if n := len(l); n >= MaxAllowedDigests {
		a.mu.Unlock()
		return false, fmt.Errorf("the allowlist of '%s' holds %d digests, the most it may: %w", user, n, ErrAllowlistFull)
	}
	if l == nil {
		l = map[uint64]*AllowEntry{}
		a.users[user] = l
	}
	k := refusedKey{user, id}
	if digest == "" {
		digest = a.refused[k]
	}
	delete(a.refused, k)
	e := &AllowEntry{ID: id, Digest: digest, At: at, Source: src}
	e.hits.Store(hits)
	l[id] = e
	a.mu.Unlock()
	a.total.Add(1)
	a.changedNow()
	return true, nil
}

// NoteRefused remembers the text of a digest refused to user, so that a
// FIREWALL ALLOW of its id shows it. It runs on the refusal path only.
func (a *Allowlist) NoteRefused(user string, id uint64, digest string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := refusedKey{user, id}
	if _, ok := a.refused[k]; ok {
		return
	}
	if len(a.refused) >= maxRefusedNotes {
		for old := range a.refused {
			delete(a.refused, old)
			break
		}
	}
	a.refused[k] = digest
}

// Forget removes id from user's allowlist; false when it was not there.
func (a *Allowlist) Forget(user string, id uint64) bool {
	a.mu.Lock()
	l := a.users[user]
	_, had := l[id]
	if had {
		delete(l, id)
		if len(l) == 0 {
			delete(a.users, user)
		}
	}
	a.mu.Unlock()
	if had {
		a.total.Add(-1)
		a.changedNow()
	}
	return had
}

// ForgetAll empties user's allowlist and returns how many digests it held.
func (a *Allowlist) ForgetAll(user string) int {
	a.mu.Lock()
	n := len(a.users[user])
	delete(a.users, user)
	a.mu.Unlock()
	if n > 0 {
		a.total.Add(int64(-n))
		a.changedNow()
	}
	return n
}

// Len returns how many digests all allowlists hold together.
func (a *Allowlist) Len() int { return int(a.total.Load()) }

// Users returns the users with an allowlist, sorted.
func (a *Allowlist) Users() []string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Sorted(maps.Keys(a.users))
}

// Entries returns user's allowlist sorted by digest text, then id. The
// entries are shared: read them, do not modify them.
func (a *Allowlist) Entries(user string) []*AllowEntry {
	a.mu.RLock()
	out := slices.Collect(maps.Values(a.users[user]))
	a.mu.RUnlock()
	slices.SortFunc(out, func(x, y *AllowEntry) int {
		if c := strings.Compare(x.Digest, y.Digest); c != 0 {
			return c
		}
		return compareIDs(x.ID, y.ID)
	})
	return out
}

func compareIDs(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// Changed is signalled (at most one pending signal) after each change, for
// the goroutine that persists the allowlists.
func (a *Allowlist) Changed() <-chan struct{} { return a.changed }

// Version counts the changes so far.
func (a *Allowlist) Version() uint64 { return a.version.Load() }

func (a *Allowlist) changedNow() {
	a.version.Add(1)
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// stateFile is the persisted form of the allowlists (format 1).
type stateFile struct {
	Format int                    `json:"format"`
	Users  map[string][]stateItem `json:"users"`
}

type stateItem struct {
	ID     string    `json:"digest_id"`
	Digest string    `json:"digest"`
	At     time.Time `json:"at"`
	Source string    `json:"source"`
	Hits   uint64    `json:"hits"`
}

// MarshalState encodes every allowlist, with the Version it holds.
func (a *Allowlist) MarshalState() (data []byte, version uint64, err error) {
	f := stateFile{Format: 1, Users: map[string][]stateItem{}}
	a.mu.RLock()
	version = a.version.Load()
	for user, l := range a.users {
		items := make([]stateItem, 0, len(l))
		for _, e := range l {
			items = append(items, stateItem{ID: router.FormatDigestID(e.ID), Digest: e.Digest, At: e.At.UTC(),
				Source: e.Source.String(), Hits: e.hits.Load()})
		}
		slices.SortFunc(items, func(x, y stateItem) int { return strings.Compare(x.ID, y.ID) })
		f.Users[user] = items
	}
	a.mu.RUnlock()
	data, err = json.MarshalIndent(f, "", "  ")
	return data, version, err
}

// UnmarshalState replaces every allowlist with those data holds, as
// MarshalState wrote them. On an error nothing changes; the error names
// what is wrong.
func (a *Allowlist) UnmarshalState(data []byte) error {
	var f stateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("firewall state: %w", err)
	}
	if f.Format != 1 {
		return fmt.Errorf("firewall state: format %d, this sluice reads format 1", f.Format)
	}
	users := make(map[string]map[uint64]*AllowEntry, len(f.Users))
	total := 0
	for user, items := range f.Users {
		if len(items) > MaxAllowedDigests {
			return fmt.Errorf("firewall state: user %q has %d digests, at most %d are kept", user, len(items), MaxAllowedDigests)
		}
		l := make(map[uint64]*AllowEntry, len(items))
		for _, it := range items {
			id, ok := router.ParseDigestID(it.ID)
			if !ok {
				return fmt.Errorf("firewall state: user %q: digest_id %q is not 16 hex digits", user, it.ID)
			}
			src := Learned
			if it.Source == Allowed.String() {
				src = Allowed
			}
			e := &AllowEntry{ID: id, Digest: it.Digest, At: it.At, Source: src}
			e.hits.Store(it.Hits)
			l[id] = e
		}
		if len(l) > 0 {
			users[user] = l
			total += len(l)
		}
	}
	a.mu.Lock()
	a.users = users
	a.mu.Unlock()
	a.total.Store(int64(total))
	return nil
}
