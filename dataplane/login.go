package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/policy"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// backoffPolicy reads the login backoff settings of the live configuration.
func (e *Env) backoffPolicy() policy.Backoff {
	p := &e.config().Proxy
	return policy.Backoff{Threshold: p.LoginFailuresBeforeBackoff, First: p.LoginBackoff.Duration, Max: p.LoginBackoffMax.Duration}
}

// errLoginBackoff marks a login refused because the client's address is in
// login backoff.
var errLoginBackoff = errors.New("client address in login backoff")

// loginRefusal returns the ERR 1129 (ER_HOST_IS_BLOCKED) for a login from
// remote while its address is in login backoff, nil otherwise. The caller
// sends it in place of the greeting, before any auth-server round trip:
// MySQL does the same for a host max_connect_errors blocked, and clients
// report it as a blocked host, not as a wrong password (which 1045 would
// claim even when the password is right).
func (e *Env) loginRefusal(remote net.Addr) *protocol.SQLError {
	key, ok := policy.BackoffKey(remote)
	if !ok {
		return nil
	}
	wait, failures := e.logins.Blocked(key, time.Now(), e.backoffPolicy())
	if wait <= 0 {
		return nil
	}
	host := remote.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	secs := int((wait + time.Second - 1) / time.Second)
	return protocol.ERHostIsBlocked.New(
		"Host '%s' is blocked: too many failed logins from %s (%d in a row); retry in %ds (sluice login backoff)",
		host, host, failures, secs)
}

// loginRefused returns the auth.Server.Refused hook for a login from
// remote on port (named in the log): it counts the failure on the login
// backoff before the client sees the ERR, so a client that tries again at
// once already meets the refusal; a warn line says when a backoff starts.
func (e *Env) loginRefused(remote net.Addr, port string) func(user string) {
	return func(user string) {
		key, ok := policy.BackoffKey(remote)
		if !ok {
			return
		}
		failures, wait := e.logins.Failed(key, time.Now(), e.backoffPolicy())
		if wait > 0 {
			e.log.Warn("login backoff: refusing logins from the client address", zap.String("port", port),
				zap.String("address", key.String()), zap.String("user", user), zap.Int("failures", failures),
				zap.Duration("backoff", wait))
		}
	}
}

// loginSucceeded forgets remote's failed logins: a successful login ends
// its backoff.
func (e *Env) loginSucceeded(remote net.Addr) {
	if key, ok := policy.BackoffKey(remote); ok {
		e.logins.Succeeded(key)
	}
}

// LoginRefusal is loginRefusal, for the admin port.
func (e *Env) LoginRefusal(remote net.Addr) *protocol.SQLError { return e.loginRefusal(remote) }

// LoginRefused is loginRefused, for the admin port.
func (e *Env) LoginRefused(remote net.Addr, port string) func(user string) {
	return e.loginRefused(remote, port)
}

// LoginSucceeded is loginSucceeded, for the admin port.
func (e *Env) LoginSucceeded(remote net.Addr) { e.loginSucceeded(remote) }

// login runs the handshake on the accepting goroutine: its stack grows
// deep in the auth relay and the schema check, and it ends after the login,
// so the goroutine that then serves the commands starts with a small stack
// and keeps it while it waits (a goroutine's stack shrinks only when a GC
// finds a quarter of it in use, which an idle session's never is). A panic
// fails the login and is logged.
func (s *Session) login(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log().Error("login panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			err = fmt.Errorf("login panicked: %v", r)
		}
	}()
	return s.handshake(ctx)
}

// handshake authenticates the client within handshake_timeout, checks the
// schema it asked for on a backend, and sends the final OK.
func (s *Session) handshake(ctx context.Context) error {
	deadline := time.Now().Add(s.env.config().Proxy.HandshakeTimeout.Duration)
	_ = s.client.SetDeadline(deadline)
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	remote := s.client.NetConn().RemoteAddr()
	if e := s.env.loginRefusal(remote); e != nil {
		_ = s.client.WriteErr(e)
		return fmt.Errorf("%w: %w", errLoginBackoff, e)
	}
	host, _, _ := net.SplitHostPort(remote.String())
	version := s.env.serverVersion()
	if version == "" && s.env.config().Auth.Backend == "static" {
		version = fallbackVersion
	}
	login, err := s.env.auth.Authenticate(actx, s.client, auth.Server{
		ConnectionID:  s.id,
		ServerVersion: version,
		Capabilities:  s.env.clientCaps,
		Collation:     DefaultCollation,
		ClientHost:    host,
		ClientAddr:    auth.AddrPort(remote),
		LocalAddr:     auth.AddrPort(s.client.NetConn().LocalAddr()),
		TLS:           s.env.tls,
		RequireTLS:    s.env.cfg.Proxy.RequireTLS,
		Refused:       s.env.loginRefused(remote, "client"),
	})
	if login != nil {
		s.user = login.User
	}
	if err != nil {
		return err
	}
	s.env.loginSucceeded(remote)
	s.user = login.User
	s.reauth = login.Reauth
	if login.User == s.env.cfg.Admin.User {
		e := s.env.host.RefuseAdminOnDataPort(host)
		_ = s.client.WriteErr(e)
		return fmt.Errorf("%w: %w", auth.ErrAccessDenied, e)
	}
	if e := s.acquireUser(login.User); e != nil {
		_ = s.client.WriteErr(e)
		return e
	}
	s.multiStmts = login.Capabilities&protocol.ClientMultiStatements != 0
	s.key = poolKey{
		collation:  login.Collation,
		foundRows:  login.Capabilities&protocol.ClientFoundRows != 0,
		localFiles: login.Capabilities&protocol.ClientLocalFiles != 0,
	}
	s.useCluster(s.env.defaultCluster())
	s.caps = login.Capabilities
	if e := s.admitAccount(login); e != nil {
		_ = s.client.WriteErr(e)
		return e
	}
	if err := s.client.WritePacketFlush(protocol.AppendOK(nil, protocol.OK{Status: protocol.StatusAutocommit})); err != nil {
		return err
	}
	return s.client.SetDeadline(time.Time{})
}

// checkSchema makes db the session's schema after checking it exists on a
// backend. The auth server does not hold the application's schemas: an
// unknown one fails the login here, as MySQL would, not at the first query.
// A pooled connection that turns out dead (the pool hands out connections
// that rested less than idleCheckAfter unchecked) fails nothing: as a read
// would be, the check is retried once, after the pools have dropped the
// idle connections the servers closed with it.
func (s *Session) checkSchema(db string) *protocol.SQLError {
	if db == "" {
		return nil
	}
	if st := s.cluster.Master.Status(); st != nil && st.Schemas.Has(db) {
		// The master's last probe saw it: no backend connection needed,
		// so a login (a driver's cancel connection among them) does not
		// queue behind busy pools.
		s.schema = db
		return nil
	}
	// Ask the pool for a connection as the session will want it: one that
	// already has db selected proves the schema exists at no cost.
	prev := s.schema
	s.schema = db
	var bc *BackendConn
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		s.aside = true
		bc, err = s.backendFor(router.TargetReplica, nil)
		s.aside = false
		if err != nil {
			break
		}
		if err = s.sync(bc); err == nil {
			return nil
		}
		dead := bc.broken
		s.dropIfBroken(bc)
		if !dead {
			break
		}
		s.env.metrics.BackendErrs.WithLabelValues(bc.backend.Role.String()).Inc()
		s.env.dropDeadIdle()
	}
	s.schema = prev
	var se *protocol.SQLError
	if err != nil && !errors.As(err, &se) {
		return protocol.CRServerLost.New("Lost connection to %s while selecting schema %q: %v", describe(bc), db, err)
	}
	return protocol.ToSQLError(err)
}

// comChangeUser re-authenticates the client through the auth backend and
// starts a fresh session state, as COM_CHANGE_USER does on a server. A
// failed change closes the connection, as MySQL does.
func (s *Session) comChangeUser(p []byte) error {
	cu, err := protocol.ParseChangeUser(p, s.caps)
	if err != nil {
		_ = s.client.WriteErr(protocol.ERMalformedPacket.New("Malformed communication packet: COM_CHANGE_USER: %v", err))
		return err
	}
	s.resetState()
	s.schema = ""
	// The auth server's connection is in Go's poller: off the loop.
	if s.task.Detach() {
		defer s.task.Attach()
	}
	ctx, cancel := context.WithTimeout(s.env.ctx, s.env.config().Proxy.HandshakeTimeout.Duration)
	defer cancel()
	_ = s.client.SetDeadline(time.Now().Add(s.env.config().Proxy.HandshakeTimeout.Duration))
	defer s.client.SetDeadline(time.Time{})
	s.lims.idleArmed = false // replaced by the login's deadline
	remote := s.client.NetConn().RemoteAddr()
	if e := s.env.loginRefusal(remote); e != nil {
		_ = s.client.WriteErr(e)
		return fmt.Errorf("%w: %w", errLoginBackoff, e)
	}
	host, _, _ := net.SplitHostPort(remote.String())
	login, err := s.env.auth.ChangeUser(ctx, s.client, auth.Server{
		ConnectionID: s.id,
		Capabilities: s.env.clientCaps,
		Collation:    s.key.collation,
		ClientHost:   host,
		ClientAddr:   auth.AddrPort(remote),
		LocalAddr:    auth.AddrPort(s.client.NetConn().LocalAddr()),
		Refused:      s.env.loginRefused(remote, "client"),
	}, s.caps, s.reauth, cu)
	if login != nil && login.Reauth != nil {
		s.reauth = login.Reauth
	}
	if err != nil {
		s.log().Info("change user refused", zap.String("new_user", cu.User), zap.Error(err))
		return err
	}
	s.env.loginSucceeded(remote)
	if login.User == s.env.cfg.Admin.User {
		// As at login: the admin user's name is the admin port's, even
		// when the auth server has an account of that name.
		e := s.env.host.RefuseAdminOnDataPort(host)
		s.log().Info("change user refused", zap.String("new_user", login.User), zap.Error(e))
		_ = s.client.WriteErr(e)
		return fmt.Errorf("%w: %w", auth.ErrAccessDenied, e)
	}
	if e := s.acquireUser(login.User); e != nil {
		s.log().Info("change user refused", zap.String("new_user", login.User), zap.Error(e))
		_ = s.client.WriteErr(e)
		return e
	}
	s.log().Info("user changed", zap.String("new_user", login.User))
	s.user = login.User
	if login.Collation != 0 {
		s.key.collation = login.Collation
	}
	if e := s.admitAccount(login); e != nil {
		_ = s.client.WriteErr(e)
		return e
	}
	return s.writeOK() // serve releases the connection after the command
}

// admitAccount is what a login and a COM_CHANGE_USER do once the auth server
// accepted the account: learn its grants, then check that it may use the
// schema it asked for and that the schema exists. The caller writes the
// error to the client.
func (s *Session) admitAccount(login *auth.Login) *protocol.SQLError {
	if e := s.startGrants(login); e != nil {
		return e
	}
	if e := s.loginSchemaAllowed(login.Database); e != nil {
		return e
	}
	return s.checkSchema(login.Database)
}
