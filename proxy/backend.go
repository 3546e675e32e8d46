package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
)

// BackendConn is one authenticated data connection to a backend, opened with
// the cluster's service account. It remembers the session state it carries
// (schema, replayed variables, multi-statement option) so a session replays
// only what differs. A BackendConn is used by one session at a time.
type BackendConn struct {
	*protocol.Conn
	backend *health.Backend
	key     poolKey

	schema     string
	varsSeq    uint64 // the session-variable sequence applied so far
	multiStmts bool
	status     uint16 // status flags of the last final OK/EOF
	broken     bool
	// stmts maps the session's statement ids to the ids this connection
	// prepared them under; COM_RESET_CONNECTION closes them all.
	stmts map[uint32]backendStmt
}

// poolKey holds what must match between a session and a backend connection
// because it is fixed at the backend's handshake.
type poolKey struct {
	collation uint8
	foundRows bool
	// localFiles: the client may answer LOAD DATA LOCAL INFILE, so the
	// backend may ask for files on this connection.
	localFiles bool
}

// Pool keeps idle data connections to one backend, per poolKey. It is safe
// for concurrent use.
type Pool struct {
	backend     *health.Backend
	user        string
	password    string
	dialTimeout time.Duration
	maxIdle     int
	tls         *tls.Config
	tlsRequired bool
	onGreeting  func(*protocol.Greeting)

	mu     sync.Mutex
	idle   map[poolKey][]*BackendConn
	closed bool
}

// Get returns an idle connection with key, or dials a new one.
func (p *Pool) Get(ctx context.Context, key poolKey) (*BackendConn, error) {
	for {
		p.mu.Lock()
		l := p.idle[key]
		if len(l) == 0 {
			p.mu.Unlock()
			return p.dial(ctx, key)
		}
		bc := l[len(l)-1]
		p.idle[key] = l[:len(l)-1]
		p.mu.Unlock()
		// A connection the server closed while it idled (wait_timeout,
		// KILL, a restart) is dropped here, not handed to a client.
		if err := bc.CheckIdle(); err == nil {
			return bc, nil
		}
		bc.Close()
	}
}

func (p *Pool) dial(ctx context.Context, key poolKey) (*BackendConn, error) {
	d := net.Dialer{Timeout: p.dialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", p.backend.Address)
	if err != nil {
		return nil, err
	}
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
	_ = nc.SetDeadline(time.Time{})
	if p.onGreeting != nil {
		p.onGreeting(g)
	}
	return &BackendConn{Conn: c, backend: p.backend, key: key, status: g.Status}, nil
}

// Put returns bc to the pool after COM_RESET_CONNECTION clears the session
// state it carried (variables, temporary tables, locks, an open
// transaction); a broken connection or one that fails the reset is closed.
func (p *Pool) Put(bc *BackendConn) {
	if bc.broken || !bc.reset(p.dialTimeout) {
		bc.Close()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle[bc.key]) >= p.maxIdle {
		bc.Close()
		return
	}
	if p.idle == nil {
		p.idle = make(map[poolKey][]*BackendConn)
	}
	p.idle[bc.key] = append(p.idle[bc.key], bc)
}

// Close closes every idle connection; later Puts close theirs.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for k, l := range p.idle {
		for _, bc := range l {
			bc.Close()
		}
		delete(p.idle, k)
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
	bc.varsSeq = 0
	clear(bc.stmts)
	return true
}

// simpleCommand sends one command sluice issues itself and reads its
// single-packet answer; a server ERR comes back as *protocol.SQLError, an I/O
// failure marks the connection broken.
func (bc *BackendConn) simpleCommand(payload []byte, kind protocol.ResponseKind) error {
	bc.ResetSeq()
	if err := bc.WritePacketFlush(payload); err != nil {
		bc.broken = true
		return fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	st, err := protocol.ReadResponse(bc.Conn, kind)
	var se *protocol.SQLError
	if err != nil && !errors.As(err, &se) {
		bc.broken = true
		return err
	}
	if err == nil {
		bc.status = st
	}
	return err
}
