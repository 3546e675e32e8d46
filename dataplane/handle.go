package dataplane

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// backendIdent names the server thread of one data connection: its pool
// (address and service account) and the connection id the server's
// greeting gave. It is immutable; KILL QUERY uses it.
type backendIdent struct {
	pool     *Pool
	threadID uint32
	// conn is the data connection; Shutdown closes it to cut off a
	// statement still running when shutdown_timeout ends.
	conn *protocol.Conn
}

// sessionInfo is what SHOW SESSIONS and KILL read of a Session from other
// goroutines. Only the session's goroutine writes it, with atomics, so
// readers never race; it stores pointers to strings that already exist (a
// cached plan's digest, a backend's address) so the statement path
// allocates nothing for it. The plain fields after the atomics are the
// session goroutine's own bookkeeping of the statement it runs.
type sessionInfo struct {
	user    atomic.Pointer[string]
	schema  atomic.Pointer[string]
	backend atomic.Pointer[string] // address of the backend of the last statement
	digest  atomic.Pointer[string] // digest of the running statement; nil when idle
	start   atomic.Int64           // when the running statement started (UnixNano); 0 when idle
	running atomic.Pointer[backendIdent]
	pins    atomic.Uint32 // router.Pin
	inTx    atomic.Bool
	// idleSince is when the session's last statement ended, or when it
	// began (monoNow): the process list's Time of a sleeping session.
	idleSince atomic.Int64
	// text is the running statement's text for the process list's Info;
	// textMu guards it. The session copies each statement into it (a
	// reused buffer, so the statement path allocates nothing once it has
	// grown), readers copy it out.
	textMu sync.Mutex
	text   []byte

	// Owned by the session goroutine: the statement being run.
	stmtDigest string
	stmtRows   uint64
	stmtFailed bool
	stmtRoute  uint32
	stmtActive bool
}

// sessionView is a copy of a sessionInfo for display.
type sessionView struct {
	user, schema, backend, digest, state, pins string
	time                                       time.Duration
}

func loadString(p *atomic.Pointer[string]) string {
	if v := p.Load(); v != nil {
		return *v
	}
	return ""
}

// view reads the info for SHOW SESSIONS (any goroutine).
func (si *sessionInfo) view(now time.Duration) sessionView {
	v := sessionView{user: loadString(&si.user), schema: loadString(&si.schema), backend: loadString(&si.backend),
		digest: loadString(&si.digest)}
	inTx := si.inTx.Load()
	v.pins = pinNames(router.Pin(si.pins.Load()), inTx)
	switch start := si.start.Load(); {
	case start != 0:
		v.state = "query"
		v.time = now - time.Duration(start-1)
	case inTx:
		v.state = "idle in transaction"
	default:
		v.state = "idle"
	}
	return v
}

// maxKeptText is the longest statement text buffer a session keeps between
// statements; a longer one is let go at the statement's end.
const maxKeptText = 64 << 10

// setText records the text of the statement the session starts.
func (si *sessionInfo) setText(b []byte) {
	si.textMu.Lock()
	si.text = append(si.text[:0], b...)
	si.textMu.Unlock()
}

// setTextString is setText for a prepared statement's text.
func (si *sessionInfo) setTextString(sql string) {
	si.textMu.Lock()
	si.text = append(si.text[:0], sql...)
	si.textMu.Unlock()
}

// dropLongText lets go of a statement text buffer past maxKeptText.
func (si *sessionInfo) dropLongText() {
	if cap(si.text) <= maxKeptText {
		return
	}
	si.textMu.Lock()
	si.text = nil
	si.textMu.Unlock()
}

// copyText returns a copy of the recorded statement text (any goroutine).
func (si *sessionInfo) copyText() []byte {
	si.textMu.Lock()
	defer si.textMu.Unlock()
	return append([]byte{}, si.text...)
}

// pinNames spells a session's pins for SHOW SESSIONS.
func pinNames(p router.Pin, inTx bool) string {
	var l []string
	if inTx {
		l = append(l, "transaction")
	}
	for bit, name := range router.PinNames {
		if p&bit != 0 {
			l = append(l, name)
		}
	}
	slices.Sort(l[min(len(l), boolInt(inTx)):])
	return strings.Join(l, ",")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Handle is the part of a Session other goroutines may read or act on:
// the admin port (SHOW SESSIONS, KILL), KILL from another session, a
// graceful shutdown and a switchover's drain. Everything here is an
// atomic, immutable after the session starts, or (the client connection)
// used only to close it or read its address.
type Handle struct {
	id     uint32
	client *protocol.Conn
	// cmd is the context of the command being served: KILL QUERY ends
	// it, the session's end (Close) ends it for good.
	cmd commandCtx
	// info is what the admin port reads of the session.
	info sessionInfo
	// drain is where the session stands for a graceful shutdown
	// (shutdown.go): busy, waiting for a command (inside a transaction or
	// not), or closed by Shutdown while it waited.
	drain atomic.Int32
	// masterBusy has bit clusterIdx%64 set while a statement of the session
	// may be on its way to that cluster's master or a transaction is open
	// there; a switchover drains on it (switchover.go). Written by the
	// session's goroutine, read by the switchover's.
	masterBusy atomic.Uint64
}

// busy reports whether the session is serving a command (or logging in),
// as opposed to waiting for one.
func (h *Handle) busy() bool { return h.drain.Load() == drainBusy }

// serving reports whether the session still serves command gen
// (commandCtx.generation).
func (h *Handle) serving(gen uint64) bool { return h.cmd.generation() == gen && h.busy() }

// ID is the session's connection id.
func (h *Handle) ID() uint32 { return h.id }

// Client is the client's address.
func (h *Handle) Client() string { return h.client.NetConn().RemoteAddr().String() }

// Close closes the client connection, as KILL CONNECTION does: the
// session's goroutine sees it gone and ends the session.
func (h *Handle) Close() error {
	h.cmd.kill()
	return h.client.Close()
}

// Refuse answers a client the server will not serve with e (its
// goroutine only, before the session starts).
func (h *Handle) Refuse(e *protocol.SQLError) { _ = h.client.WriteErr(e) }

// CloseIfIdle closes the session if it waits for a command outside a
// transaction (a graceful shutdown); inTx reports one waiting inside a
// transaction.
func (h *Handle) CloseIfIdle() (inTx bool) {
	if h.drain.CompareAndSwap(drainIdle, drainClosed) {
		_ = h.Close()
	}
	return h.drain.Load() == drainIdleTx
}

// Cut closes the client connection and the data connection of any
// statement still running, so the session ends without waiting for its
// backend.
func (h *Handle) Cut() {
	_ = h.Close()
	if run := h.info.running.Load(); run != nil && run.conn != nil {
		_ = run.conn.Close()
	}
}

// MasterBusy reports whether the session may have a statement on its way
// to the master of cluster idx or a transaction open there.
func (h *Handle) MasterBusy(idx int) bool {
	return h.masterBusy.Load()&(1<<(uint(idx)%64)) != 0
}

// SessionView is a session as SHOW SESSIONS lists it.
type SessionView struct {
	User, Schema, Backend, State, Digest, Pins string
	Time                                       time.Duration
}

// View is the session's SHOW SESSIONS row at now (mono.Now); ok is false
// while it is still logging in.
func (h *Handle) View(now time.Duration) (v SessionView, ok bool) {
	sv := h.info.view(now)
	if sv.user == "" {
		return v, false
	}
	return SessionView{User: sv.user, Schema: sv.schema, Backend: sv.backend, State: sv.state, Digest: sv.digest,
		Pins: sv.pins, Time: sv.time}, true
}

// KillQuery kills the command h serves, as KILL QUERY on the data port
// does (interruptStatement): a statement on a backend is killed there with
// KILL QUERY of its backend thread, sent on a connection of its own (the
// session's is busy); a wait between backends ends with ERR 1317. ran
// reports whether a backend statement was killed (backend and threadID
// name it); the backend's refusal comes back as its *protocol.SQLError.
func (e *Env) KillQuery(h *Handle) (backend string, threadID uint32, ran bool, err error) {
	run, err := e.interrupt(h)
	if run == nil {
		return "", 0, false, err
	}
	return run.pool.addr, run.threadID, true, err
}

// errShutdown ends a session that a graceful shutdown closed between
// commands.
var errShutdown = errors.New("sluice is shutting down")

// Where a session stands for a graceful shutdown (Session.drain). The
// session's goroutine moves between busy and the two idle states; Shutdown
// moves a session from drainIdle to drainClosed, and only then closes its
// client connection, so a command the session is serving is never cut.
const (
	drainBusy   int32 = iota // logging in or serving a command
	drainIdle                // waiting for a command, no transaction open
	drainIdleTx              // waiting for a command inside a transaction
	drainClosed              // closed by Shutdown while drainIdle
)
