// Package admin owns the admin port: its login, the command parser, and
// the commands DBAs steer a running sluice with. It reaches the rest of
// sluice only through Control, which the server implements; it never
// touches a client session.
package admin

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/cache"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/rules"
)

// Control is what the admin port needs of the running server. Its methods
// are safe for concurrent use; errors meant for the admin client are
// *protocol.SQLError naming what failed.
type Control interface {
	// Config is the running configuration.
	Config() *conf.Config
	// Topology is the live topology the prober publishes.
	Topology() *health.Topology
	// Pool describes the data connection pool of the backend at addr.
	Pool(addr string) (PoolInfo, bool)
	// Sessions lists the logged-in client sessions, by id.
	Sessions() []SessionRow
	// Digests and Events are what SHOW QUERY DIGESTS and SHOW EVENTS show.
	Digests() *observe.Digests
	Events() *observe.Events
	// Rules are the query rules in force, with their counters.
	Rules() *rules.Set
	// Firewall is the firewall's allowlist; SaveFirewall writes it to
	// proxy.state_dir now (nothing without one).
	Firewall() *rules.Allowlist
	SaveFirewall() error
	// Cache is the result cache.
	Cache() *cache.Cache
	// Event records a SHOW EVENTS row.
	Event(kind, cluster, backend, detail string)
	// BackendStateChanged publishes a state change an admin command made.
	BackendStateChanged(b *health.Backend, from, to health.State, reason string)
	// ServerVersion is the version string clients are greeted with; ""
	// before a master was reached.
	ServerVersion() string
	// KillConnection closes client session id; KillQuery kills the
	// statement it runs.
	KillConnection(id uint32) error
	KillQuery(id uint32) error
	Switchover(ctx context.Context, cluster, target string) error
	FailoverCluster(ctx context.Context, cluster string) error
	// Reload loads the configuration file again and lists the changes.
	Reload() ([]string, error)
	// FlushPrivileges makes every account's grants stale, to be read again
	// from the auth server.
	FlushPrivileges()
	// Login backoff, shared with the data port (policy.LoginBackoff).
	LoginRefusal(remote net.Addr) *protocol.SQLError
	LoginRefused(remote net.Addr, port string) func(user string)
	LoginSucceeded(remote net.Addr)
	// NextConnectionID numbers a connection, as the data port does.
	NextConnectionID() uint32
	// Fleet lists the fleet's members (SHOW FLEET), asking etcd within
	// ctx; an instance without [fleet] returns the SQL error to send.
	Fleet(ctx context.Context) ([]FleetRow, error)
	// FleetPeers names this instance and the fleet's other members with
	// their admin addresses (the view, no request to etcd); an instance
	// without [fleet] returns the SQL error to send.
	FleetPeers() (self string, peers []FleetPeer, err error)
	// SetBackendFleet stores a SET BACKEND in etcd for every member and
	// applies it here; shared false (and nil) without [fleet], when the
	// caller applies it here alone. An etcd that does not take the write
	// is an error and nothing is applied.
	SetBackendFleet(ctx context.Context, ch BackendChange) (shared bool, err error)
	// ClusterLeader names the fleet's prober-leader of cluster, the only instance that may
	// run SWITCHOVER and FAILOVER on it; self is true when it is this instance, and always
	// without [fleet]. An error when etcd does not answer or no instance leads.
	ClusterLeader(ctx context.Context, cluster string) (leader string, self bool, err error)
}

// PoolInfo is one backend pool's figures for SHOW BACKENDS and SHOW POOLS.
type PoolInfo struct {
	Size, Open, Idle, Closed int
	Queries                  uint64
	WaitTimeout              time.Duration
}

// SessionRow is one client session as SHOW SESSIONS lists it.
type SessionRow struct {
	ID                                         uint32
	User, Client, Schema, Backend, State, Pins string
	Digest                                     string
	Time                                       time.Duration
}

// Options are the admin port's fixed settings.
type Options struct {
	User, Password string
	// Capabilities and Collation are offered in the greeting.
	Capabilities     uint32
	Collation        uint8
	HandshakeTimeout time.Duration
}

// Port serves admin clients on a listener. Its methods are safe for
// concurrent use.
type Port struct {
	ctl  Control
	log  *zap.Logger
	opts Options
	auth *auth.Static

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	ctx   context.Context
	stop  context.CancelFunc
}

// NewPort returns a Port for the [admin] user of opts. Without a password
// it knows no user, so every login is refused with ERR 1045.
func NewPort(ctl Control, log *zap.Logger, opts Options) (*Port, error) {
	a, err := authenticator(opts.User, opts.Password)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &Port{ctl: ctl, log: log, opts: opts, auth: a, conns: make(map[net.Conn]struct{}), ctx: ctx, stop: stop}, nil
}

// adminMaxPacket bounds an admin command: every valid one is a few dozen
// bytes, so a client sending a megabyte gets ERR 1153, not a buffer.
const adminMaxPacket = 64 << 10

// adminIdleTimeout closes an admin connection that sends nothing for this
// long, so a forgotten client does not hold a goroutine for ever.
const adminIdleTimeout = 30 * time.Minute

// adminCommandsOnly are the capabilities the admin port takes away from
// the data port's: plain text commands, one at a time.
const adminCommandsOnly = protocol.ClientMultiStatements | protocol.ClientMultiResults | protocol.ClientPSMultiResults

// adminServerVersion is the version string of the admin port's greeting.
const adminServerVersion = "5.5.5-10.11.0-sluice-admin"

// authenticator returns the authenticator of the admin port: the
// [admin] user with its password as a mysql_native_password hash. Without a
// password it knows no user, so every login is refused with ERR 1045.
func authenticator(user, password string) (*auth.Static, error) {
	users := map[string]string{}
	if password != "" {
		h1 := sha1.Sum([]byte(password))
		h2 := sha1.Sum(h1[:])
		users[user] = "*" + strings.ToUpper(hex.EncodeToString(h2[:]))
	}
	return auth.NewStatic(users)
}

// Serve accepts admin clients on ln until Close; it closes ln.
func (p *Port) Serve(ln net.Listener) {
	p.wg.Add(1)
	defer p.wg.Done()
	go func() { <-p.ctx.Done(); _ = ln.Close() }()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			p.log.Error("admin accept failed", zap.Error(err))
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		p.mu.Lock()
		if p.ctx.Err() != nil {
			p.mu.Unlock()
			nc.Close()
			return
		}
		p.conns[nc] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serveConn(nc)
	}
}

// Close stops accepting, closes every admin connection and waits for
// their goroutines.
func (p *Port) Close() {
	p.stop()
	p.mu.Lock()
	for nc := range p.conns {
		_ = nc.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// serveConn serves one admin client: login as the [admin] user, then one
// command at a time.
func (p *Port) serveConn(nc net.Conn) {
	log := p.log.With(zap.String("admin_client", nc.RemoteAddr().String()))
	defer func() {
		if r := recover(); r != nil {
			log.Error("admin connection panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
		nc.Close()
		p.mu.Lock()
		delete(p.conns, nc)
		p.mu.Unlock()
		p.wg.Done()
	}()
	c := protocol.NewConn(nc)
	c.MaxPacket = adminMaxPacket
	if e := p.ctl.LoginRefusal(nc.RemoteAddr()); e != nil {
		_ = nc.SetDeadline(time.Now().Add(p.opts.HandshakeTimeout))
		_ = c.WriteErr(e)
		log.Info("admin login refused: client address in login backoff", zap.String("error", e.Message))
		return
	}
	deadline := time.Now().Add(p.opts.HandshakeTimeout)
	_ = nc.SetDeadline(deadline)
	ctx, cancel := context.WithDeadline(p.ctx, deadline)
	host, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
	login, err := p.auth.Authenticate(ctx, c, auth.Server{
		ConnectionID:  p.ctl.NextConnectionID(),
		ServerVersion: adminServerVersion,
		Capabilities:  p.opts.Capabilities &^ adminCommandsOnly,
		Collation:     p.opts.Collation,
		ClientHost:    host,
		Refused:       p.ctl.LoginRefused(nc.RemoteAddr(), "admin"),
	})
	cancel()
	user := ""
	if login != nil {
		user = login.User
	}
	if err != nil {
		log.Warn("admin login failed", zap.String("user", user), zap.Error(err))
		return
	}
	p.ctl.LoginSucceeded(nc.RemoteAddr())
	if err := c.WritePacketFlush(protocol.AppendOK(nil, protocol.OK{Status: protocol.StatusAutocommit})); err != nil {
		return
	}
	log.Info("admin connected", zap.String("user", login.User))
	a := &session{port: p, c: c, log: log}
	for {
		_ = nc.SetDeadline(time.Now().Add(adminIdleTimeout))
		c.ResetSeq()
		pkt, err := c.ReadPacket()
		if err != nil {
			if errors.Is(err, protocol.ErrPacketTooLarge) || errors.Is(err, protocol.ErrPacketOutOfOrder) {
				_ = c.WriteErr(protocol.ERNetPacketTooLarge.New("sluice admin: command larger than %d bytes; admin commands are short", adminMaxPacket))
			}
			if !errors.Is(err, io.EOF) && p.ctx.Err() == nil {
				log.Info("admin connection ended", zap.Error(err))
			}
			return
		}
		if len(pkt) == 0 {
			if c.WriteErr(protocol.ERMalformedPacket.New("Malformed communication packet: empty command")) != nil {
				return
			}
			continue
		}
		var werr error
		switch pkt[0] {
		case protocol.ComQuit:
			return
		case protocol.ComPing, protocol.ComInitDB, protocol.ComResetConnection:
			werr = a.ok("")
		case protocol.ComQuery:
			werr = a.query(string(pkt[1:]))
		default:
			werr = c.WriteErr(protocol.ERUnknownCommand.New("sluice admin: %s is not supported on the admin port; send SQL text (HELP lists the commands)", protocol.CommandName(pkt[0])))
		}
		if werr != nil {
			return
		}
	}
}

// session is one logged-in admin connection, owned by its goroutine.
type session struct {
	port *Port
	c    *protocol.Conn
	log  *zap.Logger
	buf  []byte
}

// Table is a result set as the admin port shows it: column names and rows
// of text. The SHOW functions build one for the admin port and for the
// status page's JSON alike, so both show the same data.
type Table struct {
	Columns []string
	Rows    [][]string
}

func (a *session) ok(info string) error {
	b := protocol.AppendOK(a.buf[:0], protocol.OK{Status: protocol.StatusAutocommit})
	if info != "" {
		// The human-readable info after the fixed fields; libmariadb
		// and libmysqlclient read it length-encoded.
		b = protocol.AppendLenEncString(b, []byte(info))
	}
	a.buf = b
	return a.c.WritePacketFlush(b)
}

// utf8Charset is utf8mb3_general_ci: admin text columns are shown as text
// by every client (binary columns may be printed in hex).
const utf8Charset = 33

func (a *session) write(r Table) error {
	b := protocol.AppendLenEncInt(a.buf[:0], uint64(len(r.Columns)))
	if err := a.c.WritePacket(b); err != nil {
		return err
	}
	for _, name := range r.Columns {
		cd := protocol.ColumnDef{Name: []byte(name), Charset: utf8Charset, Length: 1024, Type: protocol.TypeVarString}
		b = cd.Append(b[:0])
		if err := a.c.WritePacket(b); err != nil {
			return err
		}
	}
	b = protocol.AppendEOF(b[:0], 0, protocol.StatusAutocommit)
	if err := a.c.WritePacket(b); err != nil {
		return err
	}
	vals := make([][]byte, len(r.Columns))
	for _, row := range r.Rows {
		for i := range vals {
			vals[i] = nil
			if i < len(row) {
				vals[i] = []byte(row[i])
			}
		}
		b = protocol.AppendTextRow(b[:0], vals)
		if err := a.c.WritePacket(b); err != nil {
			return err
		}
	}
	b = protocol.AppendEOF(b[:0], 0, protocol.StatusAutocommit)
	a.buf = b
	return a.c.WritePacketFlush(b)
}

// query runs one admin command and answers it.
func (a *session) query(q string) error {
	if isVersionCommentQuery(q) {
		// The mysql and mariadb CLIs ask this once they are connected.
		return a.write(Table{Columns: []string{"@@version_comment"}, Rows: [][]string{{"sluice admin"}}})
	}
	cmd, err := parseAdmin(q)
	if err != nil {
		return a.c.WriteErr(protocol.ERParseError.New("sluice admin: %s", err))
	}
	res, info, err := a.port.run(a, cmd)
	if err != nil {
		var se *protocol.SQLError
		if errors.As(err, &se) {
			return a.c.WriteErr(se)
		}
		return a.c.WriteErr(protocol.ERUnknownError.New("sluice admin: %v", err))
	}
	if res == nil {
		return a.ok(info)
	}
	return a.write(*res)
}

// isVersionCommentQuery reports whether q is the query command-line
// clients send after connecting.
func isVersionCommentQuery(q string) bool {
	q = strings.TrimRight(strings.TrimSpace(q), ";")
	return strings.EqualFold(strings.Join(strings.Fields(q), " "), "select @@version_comment limit 1")
}
