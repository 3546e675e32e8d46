package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/evloop"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/protocol"
)

// BackendConn is one authenticated data connection to a backend, opened with
// the cluster's service account. It remembers the session state it carries
// (schema, replayed SET statements, multi-statement option) so the next
// session that borrows it replays only what differs. A BackendConn is used
// by one session at a time; between statements it may rest in its Pool.
type BackendConn struct {
	*protocol.Conn
	backend *health.Backend
	pool    *Pool
	key     poolKey

	schema string
	// vars are the SET statements applied since the last reset, in order.
	vars       []string
	multiStmts bool
	// readOnly: the connection's session transaction access mode is READ
	// ONLY (every replica connection's: nothing it runs can change data),
	// and the server reports changes to it and to sql_mode in the status
	// flags (SERVER_SESSION_STATE_CHANGED). tainted: such a change was
	// reported (a stored function ran SET SESSION TRANSACTION READ
	// WRITE), or it refused a statement (its diagnostics area holds the
	// error): the connection is reset before its next use.
	readOnly bool
	tainted  bool
	status   uint16 // status flags of the last final OK/EOF
	mariadb  bool   // the server is MariaDB (else MySQL)
	broken   bool
	cmd      []byte // commands sluice issues itself are built here
	// stmts are the statements this connection has prepared, for any
	// session (stmtcache.go); COM_RESET_CONNECTION closes them all.
	stmts stmtCache
	// idleSince is when the connection last went back to its pool.
	idleSince time.Time
	// lent: the pool lent it to a session and counts it in its backend's
	// in-use connections (health.Backend.InUse) until it comes back;
	// lentAt is its index in the pool's lent list meanwhile.
	lent   bool
	lentAt int
	// prevSid and prevSeq: the connection ran statement prevSeq of session
	// prevSid last, and nothing since; lidSid and lidSeq: its
	// LAST_INSERT_ID() is that session's as of the session's change lidSeq
	// (scoped.go). 0: nobody's.
	prevSid, lidSid uint32
	prevSeq, lidSeq uint64
	// ident names the server thread for KILL QUERY from the admin port.
	ident *backendIdent
	// wire is the socket under Conn (nil for connections not dialled by
	// a pool): the stall watchdog sees pending reads and cuts them there.
	wire *watchedConn
	// lc is wire's connection when it is a loopConn (Pool.loopConns).
	lc *evloop.Conn
}

// idleCheckAfter is how long a connection may rest in its pool before it is
// checked for a server-side close on reuse; one just returned is alive.
const idleCheckAfter = time.Second

// poolKey holds what must match between a session and a backend connection
// because it is fixed at the backend's handshake.
type poolKey struct {
	collation uint8
	foundRows bool
	// localFiles: the client may answer LOAD DATA LOCAL INFILE, so the
	// backend may ask for files on this connection.
	localFiles bool
}

// ErrPoolExhausted reports that no connection to a backend became free
// within the pool's wait timeout.
var ErrPoolExhausted = errors.New("connection pool exhausted")

// Pool holds the data connections to one backend: at most size open at once
// (idle or lent to a session), idle ones kept per poolKey. Sessions borrow a
// connection per statement and give it back, so many clients share few
// connections. It is safe for concurrent use.
type Pool struct {
	// backend is the Backend of the pool's address in the current
	// snapshot; a failover replaces it (SetBackend), and a connection
	// takes the current one when it is lent.
	backend     atomic.Pointer[health.Backend]
	addr        string
	user        string
	password    string
	dialTimeout time.Duration
	size        int
	waitTimeout time.Duration
	tls         *tls.Config
	tlsRequired bool
	onGreeting  func(*protocol.Greeting)
	// trackGTID asks the server to report each transaction's GTID in its
	// OK packets (session tracking), for causal reads.
	trackGTID bool
	// loopConns: connections leave Go's poller after the dial, for
	// sessions on event loops (loopConn).
	loopConns bool

	// queries counts the commands run on the pool's connections (SHOW
	// BACKENDS).
	queries atomic.Uint64

	// waiters are the borrowers waiting for a connection, oldest first.
	// A connection coming back, or a slot freed, wakes the oldest only,
	// and a new borrower queues behind them instead of taking what comes
	// back first: with many more clients than connections, waits are
	// served in order, and none times out while later ones get through.
	waiters []*poolWaiter
	// waits counts borrows that found the pool full and waited, waitNanos
	// their total wait, waitTimeouts those that gave up (for metrics).
	waits, waitNanos, waitTimeouts atomic.Int64

	mu     sync.Mutex
	open   int
	closes int // connections closed so far (broken, dead while idle, recycled)
	idle   map[poolKey][]*BackendConn
	// lent are the connections lent to sessions right now, for CloseLent;
	// each knows its index (BackendConn.lentAt).
	lent   []*BackendConn
	closed bool
}

// newPool builds a Pool; size must be positive.
func newPool(b *health.Backend, size int) *Pool {
	p := &Pool{addr: b.Address, size: size, lent: make([]*BackendConn, 0, size)}
	p.backend.Store(b)
	return p
}

// Backend returns the Backend the pool's connections are lent for now.
func (p *Pool) Backend() *health.Backend { return p.backend.Load() }

// SetBackend makes b, a Backend of the pool's address in a new snapshot,
// the one connections are lent for from now on (with its role).
func (p *Pool) SetBackend(b *health.Backend) { p.backend.Store(b) }

// CloseLent closes the network connections of everything the pool has lent
// and every idle one: a session blocked reading from a dead server fails at
// once (its statement gets an ERR) instead of hanging until TCP gives up.
// The sessions discard the broken connections as usual. It returns how many
// lent connections it closed.
func (p *Pool) CloseLent() int {
	p.mu.Lock()
	lent := append([]*BackendConn(nil), p.lent...)
	var idle []*BackendConn
	for k, l := range p.idle {
		idle = append(idle, l...)
		delete(p.idle, k)
	}
	p.mu.Unlock()
	for _, bc := range lent {
		// Only the socket: the session owns bc and discards it when its
		// I/O fails.
		_ = bc.Conn.NetConn().Close()
	}
	for _, bc := range idle {
		bc.discard()
	}
	return len(lent)
}

// takeAnyIdle removes and returns an idle connection that does not fit
// (key, noSchema), or nil. The caller holds p.mu.
func (p *Pool) takeAnyIdle(key poolKey, noSchema bool) *BackendConn {
	for k, l := range p.idle {
		if len(l) == 0 || (k == key && !noSchema) {
			continue
		}
		bc := l[0]
		p.idle[k] = l[1:]
		return bc
	}
	return nil
}

// release frees the slot of a connection that closed and wakes a waiter.
func (p *Pool) release() {
	p.mu.Lock()
	p.open--
	p.closes++
	p.wakeLocked()
	p.mu.Unlock()
}

// signal wakes the oldest waiter, if any.
func (p *Pool) signal() {
	p.mu.Lock()
	p.wakeLocked()
	p.mu.Unlock()
}

// Stats reports the open and idle connections, and how many were closed
// so far.
func (p *Pool) Stats() (open, idle, closes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.idle {
		idle += len(l)
	}
	return p.open, idle, p.closes
}

func (p *Pool) dial(ctx context.Context, key poolKey) (*BackendConn, error) {
	d := net.Dialer{Timeout: p.dialTimeout, KeepAlive: 30 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	var lc *evloop.Conn
	wire := &watchedConn{}
	// A TLS connection's Close writes an alert on the closing goroutine
	// (the stall watchdog's, say), which must not wait on a session's
	// loop: those stay in Go's poller.
	if p.loopConns && p.tls == nil {
		if lc, err = evloop.DialConn(raw); err != nil {
			return nil, err
		}
		wire.Conn = lc
	} else {
		wire.Conn = evloop.NewSockConn(raw)
	}
	var nc net.Conn = wire
	c := protocol.NewConn(nc)
	c.LenientSeq = true
	_ = nc.SetDeadline(time.Now().Add(p.dialTimeout))
	caps := protocol.BackendCapabilities
	if key.foundRows {
		caps |= protocol.ClientFoundRows
	}
	if key.localFiles {
		caps |= protocol.ClientLocalFiles
	}
	if p.trackGTID {
		caps |= protocol.ClientSessionTrack
	}
	g, err := protocol.ClientHandshake(c, protocol.ClientConfig{
		User:         p.user,
		Password:     p.password,
		Collation:    key.collation,
		Capabilities: caps,
		TLS:          p.tls,
		TLSRequired:  p.tlsRequired,
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	bc := &BackendConn{Conn: c, backend: p.Backend(), pool: p, key: key, status: g.Status,
		mariadb: strings.Contains(g.ServerVersion, "MariaDB"), ident: &backendIdent{pool: p, threadID: g.ConnectionID, conn: c}, wire: wire, lc: lc}
	if p.trackGTID && g.Capabilities&protocol.ClientSessionTrack != 0 {
		c.SessionTrack = true
		if err := bc.trackGTIDs(); err != nil {
			nc.Close()
			return nil, fmt.Errorf("enabling GTID session tracking on %s: %w", p.addr, err)
		}
	}
	if bc.backend.Role == health.RoleReplica {
		if err := bc.setReadOnly(); err != nil {
			nc.Close()
			return nil, fmt.Errorf("making the connection to replica %s read-only: %w", p.addr, err)
		}
	}
	_ = nc.SetDeadline(time.Time{})
	if p.onGreeting != nil {
		p.onGreeting(g)
	}
	return bc, nil
}

// These make the server report the GTID of each transaction the connection
// commits in the OK packet that ends it.
const (
	trackGTIDMariaDB = "SET SESSION session_track_system_variables = 'last_gtid'"
	trackGTIDMySQL   = "SET SESSION session_track_gtids = OWN_GTID"
)

// trackGTIDs switches GTID tracking on; COM_RESET_CONNECTION switches it
// off again, so reset calls it too.
func (bc *BackendConn) trackGTIDs() error {
	q := trackGTIDMySQL
	if bc.mariadb {
		q = trackGTIDMariaDB
	}
	return bc.simpleCommand(bc.command(protocol.ComQuery, q), protocol.ResponseResult)
}

// These make a replica connection read-only, and have the server flag any
// later change of its access mode or sql_mode (session state tracking sets
// SERVER_SESSION_STATE_CHANGED in the status flags, even for a client
// that did not ask for the tracking data itself). The tracked list keeps
// last_gtid where causal reads track it (bc.SessionTrack).
const (
	setReadOnlyMariaDB        = "SET SESSION tx_read_only = 1, SESSION session_track_system_variables = 'tx_read_only,sql_mode'"
	setReadOnlyMariaDBTracked = "SET SESSION tx_read_only = 1, SESSION session_track_system_variables = 'tx_read_only,sql_mode,last_gtid'"
	setReadOnlyMySQL          = "SET SESSION transaction_read_only = 1, SESSION session_track_system_variables = 'transaction_read_only,sql_mode'"
)

// setReadOnly makes the connection read-only, as every replica connection
// is: a statement sluice misjudged as a read fails there with 1792 instead
// of changing data (whatever the service account may do), and the session
// re-runs it on the master (exchange). A connection leaves read-only
// only through a reset (reset, sync).
func (bc *BackendConn) setReadOnly() error {
	q := setReadOnlyMySQL
	if bc.mariadb {
		q = setReadOnlyMariaDB
		if bc.SessionTrack {
			q = setReadOnlyMariaDBTracked
		}
	}
	if err := bc.simpleCommand(bc.command(protocol.ComQuery, q), protocol.ResponseResult); err != nil {
		return err
	}
	bc.readOnly, bc.tainted = true, false
	return nil
}

// Put takes bc back as it is: the state it carries is replayable and the
// next borrower adjusts it. A broken connection is closed instead.
func (p *Pool) Put(bc *BackendConn) {
	if bc.broken {
		bc.discard()
		return
	}
	p.mu.Lock()
	bc.giveBackLocked(p)
	if p.closed {
		p.mu.Unlock()
		bc.discard()
		return
	}
	if p.idle == nil {
		p.idle = make(map[poolKey][]*BackendConn)
	}
	bc.idleSince = time.Now()
	p.idle[bc.key] = append(p.idle[bc.key], bc)
	p.wakeLocked()
	p.mu.Unlock()
}

// PutReset takes bc back after COM_RESET_CONNECTION clears state that
// cannot be replayed (user variables, temporary tables, locks, prepared
// statements, an open transaction).
func (p *Pool) PutReset(bc *BackendConn) {
	if bc.broken || !bc.reset(p.dialTimeout) {
		bc.discard()
		return
	}
	p.Put(bc)
}

// Close closes every idle connection; later Puts close theirs.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	for _, w := range p.waiters {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	var all []*BackendConn
	for k, l := range p.idle {
		all = append(all, l...)
		delete(p.idle, k)
	}
	p.mu.Unlock()
	for _, bc := range all {
		bc.discard()
	}
}

// lendLocked counts bc in the pool's current backend's in-use connections
// and in the pool's lent set; bc serves as that backend (its role) until it
// comes back. The caller holds p.mu.
func (p *Pool) lendLocked(bc *BackendConn) {
	bc.backend = p.Backend()
	bc.lent = true
	bc.backend.ConnLent()
	bc.lentAt = len(p.lent)
	p.lent = append(p.lent, bc)
}

// giveBack ends what lendLocked counted, once.
func (bc *BackendConn) giveBack() {
	if bc.lent {
		if p := bc.pool; p != nil {
			p.mu.Lock()
			bc.giveBackLocked(p)
			p.mu.Unlock()
			return
		}
		bc.lent = false
		bc.backend.ConnReturned()
	}
}

// giveBackLocked is giveBack with p.mu, bc's pool's, held.
func (bc *BackendConn) giveBackLocked(p *Pool) {
	if bc.lent {
		bc.lent = false
		bc.backend.ConnReturned()
		last := len(p.lent) - 1
		moved := p.lent[last]
		p.lent[bc.lentAt], moved.lentAt = moved, bc.lentAt
		p.lent[last] = nil
		p.lent = p.lent[:last]
	}
}

// discard closes bc and frees its slot in the pool.
func (bc *BackendConn) discard() {
	bc.giveBack()
	bc.broken = true
	bc.Conn.Close()
	if bc.pool != nil {
		bc.pool.release()
		bc.pool = nil
	}
}

// reset sends COM_RESET_CONNECTION and forgets the replayed state.
func (bc *BackendConn) reset(timeout time.Duration) bool {
	_ = bc.SetDeadline(time.Now().Add(timeout))
	defer bc.SetDeadline(time.Time{})
	bc.ResetSeq()
	if err := bc.WritePacketFlush([]byte{protocol.ComResetConnection}); err != nil {
		return false
	}
	st, err := protocol.ReadResponse(bc.Conn, protocol.ResponseSingle)
	if err != nil {
		return false
	}
	bc.status = st
	bc.vars = bc.vars[:0]
	bc.prevSid, bc.lidSid = 0, 0
	bc.stmts.clear()
	if bc.SessionTrack && bc.trackGTIDs() != nil {
		return false
	}
	// The reset put the access mode back to the server's default: a
	// replica connection is made read-only again before anyone uses it.
	bc.readOnly, bc.tainted = false, false
	if bc.backend.Role == health.RoleReplica && bc.setReadOnly() != nil {
		return false
	}
	return true
}

// simpleCommand sends one command sluice issues itself and reads its
// single-packet answer; a server ERR comes back as *protocol.SQLError, an I/O
// failure marks the connection broken.
func (bc *BackendConn) simpleCommand(payload []byte, kind protocol.ResponseKind) error {
	bc.prevSid = 0 // it is a statement of its own (ROW_COUNT())
	bc.ResetSeq()
	if err := bc.WritePacketFlush(payload); err != nil {
		bc.broken = true
		return fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	st, err := protocol.ReadResponse(bc.Conn, kind)
	if err != nil {
		// se is declared here: errors.As moves it to the heap, which
		// only the failure path should pay for.
		var se *protocol.SQLError
		if !errors.As(err, &se) {
			bc.broken = true
		}
		return err
	}
	bc.status = st
	return nil
}

// queryValue runs a query sluice issues itself that returns one column and
// at most one row, and returns the row's value ("" for none or NULL). A
// server ERR comes back as *protocol.SQLError; an I/O failure or a reply of
// another shape marks the connection broken.
func (bc *BackendConn) queryValue(q string) (string, error) {
	v, err := bc.queryScalar(q)
	return v.text, err
}

// scalar is the one value of a query sluice issues itself: its text, the
// column's type, and whether it is NULL (or no row came).
type scalar struct {
	text string
	typ  byte
	null bool
}

// queryScalar is queryValue that also reports the column's type and NULL.
func (bc *BackendConn) queryScalar(q string) (scalar, error) {
	bc.prevSid = 0 // it is a statement of its own (ROW_COUNT())
	bc.ResetSeq()
	if err := bc.WritePacketFlush(bc.command(protocol.ComQuery, q)); err != nil {
		bc.broken = true
		return scalar{}, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	fail := func(err error) (scalar, error) {
		bc.broken = true
		return scalar{}, fmt.Errorf("%w: %s: %w", protocol.ErrBackendIO, q, err)
	}
	p, err := bc.ReadPacket()
	if err != nil {
		return fail(err)
	}
	if protocol.IsErr(p) {
		e, _ := protocol.ParseErr(p)
		return scalar{}, e
	}
	if n, _, _, err := protocol.ReadLenEncInt(p); err != nil || n != 1 {
		return fail(fmt.Errorf("want one column, got %d (%v)", n, err))
	}
	value := scalar{null: true}
	for state := 0; ; {
		if p, err = bc.ReadPacket(); err != nil {
			return fail(err)
		}
		switch {
		case state == 0: // the column definition
			state = 1
			if c, err := protocol.ParseColumnDef(p); err == nil {
				value.typ = c.Type
			}
		case protocol.IsEOF(p):
			if state == 1 {
				state = 2 // the end of the column definitions
				continue
			}
			bc.status = protocol.EOFStatus(p)
			return value, nil
		case protocol.IsErr(p):
			e, _ := protocol.ParseErr(p)
			return scalar{}, e
		default: // a row
			if len(p) > 0 && p[0] != 0xfb {
				v, _, err := protocol.ReadLenEncString(p)
				if err != nil {
					return fail(err)
				}
				value.text, value.null = string(v), false
			}
		}
	}
}

// command builds a command sluice issues itself (cmd, then arg) in bc's own
// buffer, valid until the next call.
func (bc *BackendConn) command(cmd byte, arg string) []byte {
	bc.cmd = append(append(bc.cmd[:0], cmd), arg...)
	return bc.cmd
}

// clientTLS builds the TLS configuration of a leg towards a server (the auth
// server or a backend) for mode "off", "preferred" or "required": nil when
// off. With a CA file the server's certificate is verified against it and
// the address's host; without one the link is encrypted but the server is
// not verified, as MySQL clients do with ssl-mode=REQUIRED. key names the
// setting in errors.
func clientTLS(key, mode, caFile, addr string) (*tls.Config, bool, error) {
	if mode == "" || mode == "off" {
		return nil, false, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		cfg.InsecureSkipVerify = true
	} else {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, false, fmt.Errorf("%s.tls_ca: %w", key, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, false, fmt.Errorf("%s.tls_ca: %s holds no PEM certificate", key, caFile)
		}
		cfg.RootCAs = pool
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	return cfg, mode == "required", nil
}

// Size is the pool's bound on open connections.
func (p *Pool) Size() int { return p.size }

// Queries counts the statements the pool's connections ran.
func (p *Pool) Queries() uint64 { return p.queries.Load() }

// WaitTimeout is how long a borrow waits for a connection.
func (p *Pool) WaitTimeout() time.Duration { return p.waitTimeout }

// PoolStats are a pool's figures for the metrics, read at one moment.
type PoolStats struct {
	Open, Idle, InUse, Closes, Size int
	Waits, WaitTimeouts             uint64
	WaitTime                        time.Duration
}

// Figures reads the pool's figures; safe for concurrent use.
func (p *Pool) Figures() PoolStats {
	p.mu.Lock()
	st := PoolStats{Open: p.open, InUse: len(p.lent), Closes: p.closes, Size: p.size}
	for _, l := range p.idle {
		st.Idle += len(l)
	}
	p.mu.Unlock()
	st.Waits, st.WaitTimeouts = uint64(p.waits.Load()), uint64(p.waitTimeouts.Load())
	st.WaitTime = time.Duration(p.waitNanos.Load())
	return st
}

// TLS is the TLS configuration towards the pool's backend and whether it
// is required (control connections use the same).
func (p *Pool) TLS() (*tls.Config, bool) { return p.tls, p.tlsRequired }

// ClientTLS builds the TLS configuration towards a server of what (auth,
// a cluster) from its tls mode and CA file.
func ClientTLS(what, mode, caFile, addr string) (*tls.Config, bool, error) {
	return clientTLS(what, mode, caFile, addr)
}

// watchedConn is the network connection under a pooled BackendConn. It
// records when a read from the backend began and has not returned, so the
// stall watchdog tells a statement blocked on a server that stopped
// answering from one whose result streams, or whose relay waits for a slow
// client (a write, not a read). The session's goroutine reads through it;
// the watchdog reads readSince and closes the socket from its own; cut is
// written before that close and read by the session after its read failed.
type watchedConn struct {
	net.Conn
	// readSince is mono.Now()+1 when the pending Read began, 0 while no
	// Read is pending.
	readSince atomic.Int64
	// cut says why the proxy closed the connection (cutStalled,
	// cutDown), cutNone if it did not.
	cut atomic.Uint32
}

// Read reads from the backend, marking the read pending meanwhile. It costs
// two atomic stores per read from the socket (not per packet).
func (w *watchedConn) Read(p []byte) (int, error) {
	w.readSince.Store(int64(mono.Now()) + 1)
	n, err := w.Conn.Read(p)
	w.readSince.Store(0)
	return n, err
}

// SyscallConn gives the idle check (protocol.Conn.CheckIdle) the socket
// under the wrapper.
func (w *watchedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := w.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("proxy: data connection has no socket to check")
	}
	return sc.SyscallConn()
}

// readBlocked reports whether a read has been pending for at least d at
// now (mono.Now()).
func (w *watchedConn) readBlocked(d, now time.Duration) bool {
	since := w.readSince.Load()
	return since != 0 && now-time.Duration(since-1) >= d
}
