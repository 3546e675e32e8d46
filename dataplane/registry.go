package dataplane

import (
	"slices"
	"sync"
)

// Registry holds every client session by id: the server adds and removes
// sessions, the admin port and KILL find them. It is safe for concurrent
// use.
type Registry struct {
	mu       sync.Mutex
	sessions map[uint32]*Handle
	nextID   uint32
}

func newRegistry() *Registry { return &Registry{sessions: make(map[uint32]*Handle)} }

// NewID returns the id of a new session: the next one, skipping 0 and any
// still held by a live session once the counter wraps, so ids are unique
// across the process's lifetime in practice and always among live
// sessions.
func (r *Registry) NewID() uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		r.nextID++
		if id := r.nextID; id != 0 && r.sessions[id] == nil {
			return id
		}
	}
}

// NextConnectionID numbers a connection that is no session (the admin
// port's) from the same counter.
func (r *Registry) NextConnectionID() uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	return r.nextID
}

// Add registers sess unless limit sessions are registered already; it
// reports whether it did.
func (r *Registry) Add(sess *Handle, limit int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sessions) >= limit {
		return false
	}
	r.sessions[sess.id] = sess
	return true
}

// Remove unregisters sess.
func (r *Registry) Remove(sess *Handle) {
	r.mu.Lock()
	delete(r.sessions, sess.id)
	r.mu.Unlock()
}

// ByID returns session id, or nil.
func (r *Registry) ByID(id uint32) *Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[id]
}

// All returns the registered sessions by id.
func (r *Registry) All() []*Handle {
	r.mu.Lock()
	out := make([]*Handle, 0, len(r.sessions))
	for _, s := range r.sessions {
		out = append(out, s)
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b *Handle) int { return int(a.id) - int(b.id) })
	return out
}

// Len counts the registered sessions.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sessions)
}

// Each calls f with every registered session, in no order, under the
// registry's lock: f must neither block nor call back into the Registry
// (logins and session ends wait meanwhile). Closing connections is for
// All.
func (r *Registry) Each(f func(*Handle)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.sessions {
		f(h)
	}
}
