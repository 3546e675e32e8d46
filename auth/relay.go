package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-proxy/sluice/auth/grants"
	"github.com/sluice-proxy/sluice/protocol"
)

// Relay authenticates clients against a dedicated auth server (the seed
// design): the auth server's scramble goes to the client, the client's
// answers go to the auth server, and its verdict decides. It holds no
// secrets and is safe for concurrent use.
type Relay struct {
	// Address is the auth server's host:port.
	Address string
	// DialTimeout bounds connecting to the auth server.
	DialTimeout time.Duration
	// TLS, when set, encrypts the auth-server leg if the server offers TLS;
	// TLSRequired makes a server without TLS a login failure. The leg is
	// secured on its own, whatever the client's leg uses: a client on TLS
	// may send a clear-text password, which must not cross a plain link.
	TLS         *tls.Config
	TLSRequired bool
	// MaxPendingHandshakes bounds the handshakes that hold an auth-server
	// connection while they wait for the client's handshake response.
	// Beyond it a handshake is deferred: sluice greets the client with a
	// scramble of its own and reaches the auth server only once the
	// client has answered, then asks the client, with an auth switch
	// carrying the auth server's scramble, to answer again. Silent
	// clients so cannot fill the auth server's max_connections. Zero
	// defers every handshake.
	MaxPendingHandshakes int
	// MaxKeptConnections bounds the auth-server connections kept open
	// after their login for a later COM_CHANGE_USER (see Reauth). Only
	// clients whose connection attributes name libmariadb or libmysql get
	// one, as they cannot answer COM_CHANGE_USER otherwise; each holds one
	// of the auth server's max_connections until its session ends. Zero
	// keeps none.
	MaxKeptConnections int
	// MaxConcurrentLogins bounds the logins and COM_CHANGE_USERs that
	// hold an auth-server connection at once; kept connections are not
	// counted (MaxKeptConnections bounds them). A login beyond it waits
	// for a slot, in order, until its context ends; a login about to
	// wait for its client's handshake response takes a slot only when
	// one is free and fewer than half are held that way, and is
	// deferred otherwise. A storm of logins so queues in sluice instead
	// of meeting the auth server's max_connections (1040). Zero: no
	// bound.
	MaxConcurrentLogins int
	// LearnGrants makes every login read the account's privileges on its
	// own auth-server connection (Login.Grants) before it succeeds.
	LearnGrants bool
	// KnownGrants, when set, returns the grants already held for an
	// account whose SHOW GRANTS printed exactly lines (GrantsCache.Known).
	KnownGrants func(user, host string, lines []string) *grants.Set
	// ProxyProtocol, 1 or 2, makes every auth-server connection start
	// with a PROXY protocol header of that version naming the client's
	// address (Server.ClientAddr), so the auth server matches accounts'
	// host parts as on a direct connection. 0 sends none.
	ProxyProtocol int

	// kept counts the auth-server connections kept for COM_CHANGE_USER.
	kept atomic.Int64
	// pending counts the handshakes holding an auth-server connection
	// while waiting for the client's handshake response.
	pending atomic.Int64
	// slots holds a value per login holding an auth-server connection
	// (MaxConcurrentLogins), made on first use; nil when unbounded.
	slots     chan struct{}
	slotsOnce sync.Once
	// waiting counts the logins waiting for a slot.
	waiting atomic.Int64
	// version is the last auth server's version string, advertised by
	// deferred greetings when the caller gives none.
	version atomic.Pointer[string]
}

// fallbackVersion is what a deferred greeting advertises when neither the
// caller nor an earlier auth-server greeting gave a version.
const fallbackVersion = "5.5.5-10.11.0-sluice"

// PendingHandshakes reports how many handshakes hold an auth-server
// connection while they wait for the client's handshake response.
func (r *Relay) PendingHandshakes() int { return int(r.pending.Load()) }

// admit reserves a pending-handshake slot and a login slot, or reports
// false when the handshake must be deferred: MaxPendingHandshakes are
// already pending, or half the login slots are, or no login slot is free.
// A true result must be matched by one release and one giveSlot.
func (r *Relay) admit() bool {
	limit := int64(r.MaxPendingHandshakes)
	if r.MaxConcurrentLogins > 0 {
		limit = min(limit, int64(r.MaxConcurrentLogins/2))
	}
	if r.pending.Add(1) > limit {
		r.pending.Add(-1)
		return false
	}
	if slots := r.loginSlots(); slots != nil {
		select {
		case slots <- struct{}{}:
		default:
			r.pending.Add(-1)
			return false
		}
	}
	return true
}

// release gives a pending-handshake slot reserved by admit back.
func (r *Relay) release() { r.pending.Add(-1) }

// WaitingLogins reports how many logins wait for a login slot
// (MaxConcurrentLogins).
func (r *Relay) WaitingLogins() int { return int(r.waiting.Load()) }

// loginSlots returns the channel of login slots, nil when unbounded.
func (r *Relay) loginSlots() chan struct{} {
	r.slotsOnce.Do(func() {
		if r.MaxConcurrentLogins > 0 {
			r.slots = make(chan struct{}, r.MaxConcurrentLogins)
		}
	})
	return r.slots
}

// takeSlot waits for a login slot until ctx ends. Waiters are served in
// the order they came (a channel's senders queue). On failure it sends the
// client ERR 1040. A nil result must be matched by one giveSlot.
func (r *Relay) takeSlot(ctx context.Context, client *protocol.Conn) error {
	slots := r.loginSlots()
	if slots == nil {
		return nil
	}
	select {
	case slots <- struct{}{}:
		return nil
	default:
	}
	client.ReleaseWriter()
	r.waiting.Add(1)
	defer r.waiting.Add(-1)
	select {
	case slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		_ = client.WriteErr(protocol.ERConCount.New(
			"Too many connections: sluice: %d logins hold auth-server connections (auth.max_concurrent_logins) and this one found none free within handshake_timeout",
			r.MaxConcurrentLogins))
		return fmt.Errorf("%w: no free auth-server login slot: %w", ErrHandshake, context.Cause(ctx))
	}
}

// giveSlot gives back a login slot taken by admit or takeSlot.
func (r *Relay) giveSlot() {
	if slots := r.loginSlots(); slots != nil {
		<-slots
	}
}

// KeptConnections reports how many auth-server connections are kept open
// for a later COM_CHANGE_USER.
func (r *Relay) KeptConnections() int { return int(r.kept.Load()) }

// reauthFor is the Reauth of a login that ran on upstream with the
// capabilities legCaps after the client was given scramble. It keeps
// upstream, which the caller must then not close, when the client needs it
// for COM_CHANGE_USER and a MaxKeptConnections slot is free.
func (r *Relay) reauthFor(login *Login, upstream *protocol.Conn, legCaps uint32, scramble []byte) *Reauth {
	ra := &Reauth{Scramble: scrambleOf(scramble)}
	if !answersFromLoginScramble(login.Attributes) {
		return ra
	}
	if r.kept.Add(1) > int64(r.MaxKeptConnections) {
		r.kept.Add(-1)
		return ra
	}
	ra.leg, ra.legCaps, ra.legAddr = upstream, legCaps, r.Address
	ra.release = func() { r.kept.Add(-1) }
	upstream.Idle()
	_ = upstream.NetConn().SetDeadline(time.Time{})
	return ra
}

// maxAuthRounds bounds the auth-switch / extra-data exchange.
const maxAuthRounds = 8

// connect opens a connection to the auth server for srv's client, sends
// the PROXY header if configured, and reads the greeting. Failures are
// reported to the client as 2003 naming the auth server.
func (r *Relay) connect(ctx context.Context, client *protocol.Conn, srv Server) (*protocol.Conn, *protocol.Greeting, error) {
	d := net.Dialer{Timeout: r.DialTimeout}
	nc, err := d.DialContext(ctx, "tcp", r.Address)
	if err != nil {
		_ = client.WriteErr(protocol.CRCouldNotConnect.New(
			"sluice: cannot reach the auth server %s: %v", r.Address, err))
		return nil, nil, fmt.Errorf("dialing auth server %s: %w: %w", r.Address, ErrAuthServerUnreachable, err)
	}
	// The auth leg lives for one login: a lean connection borrows its
	// write buffer from the shared pool instead of allocating 32 KiB of
	// buffers per login.
	// Its reads can be recorded, so that the SHOW GRANTS answers (password
	// hashes in them) are zeroed once read (learn). Nothing is recorded
	// otherwise: the read buffer is the pool's once the leg is idle, and
	// must never be zeroed then.
	upstream := protocol.NewLeanConn(&wipingConn{Conn: nc, stopped: true})
	upstream.LenientSeq = true
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	if r.ProxyProtocol != 0 {
		if _, err := nc.Write(proxyHeader(r.ProxyProtocol, srv.ClientAddr, srv.LocalAddr)); err != nil {
			upstream.Close()
			_ = client.WriteErr(protocol.CRCouldNotConnect.New(
				"sluice: cannot send the PROXY header to the auth server %s: %v", r.Address, err))
			return nil, nil, fmt.Errorf("sending the PROXY header to the auth server: %w", err)
		}
	}
	p, err := upstream.ReadPacket()
	if err != nil {
		upstream.Close()
		_ = client.WriteErr(protocol.CRCouldNotConnect.New(
			"sluice: auth server %s sent no greeting: %v", r.Address, err))
		return nil, nil, fmt.Errorf("reading auth server greeting: %w: %w", ErrAuthServerUnreachable, err)
	}
	ag, err := protocol.ParseGreeting(p)
	if err != nil {
		upstream.Close()
		_ = client.WriteErr(protocol.CRCouldNotConnect.New(
			"sluice: auth server %s sent a bad greeting: %v", r.Address, err))
		return nil, nil, fmt.Errorf("auth server greeting: %w", err)
	}
	if v := r.version.Load(); v == nil || *v != ag.ServerVersion {
		v := ag.ServerVersion
		r.version.Store(&v)
	}
	return upstream, ag, nil
}

// closeUpstream closes the auth leg and gives its write buffer back.
func closeUpstream(c *protocol.Conn) {
	c.Idle()
	_ = c.Close()
}

// Authenticate implements Authenticator. While fewer than
// MaxPendingHandshakes handshakes wait for their client, the auth server's
// greeting is read first and its scramble greets the client (one round
// trip); otherwise the handshake is deferred (authenticateDeferred).
func (r *Relay) Authenticate(ctx context.Context, client *protocol.Conn, srv Server) (*Login, error) {
	if !r.admit() {
		return r.authenticateDeferred(ctx, client, srv)
	}
	defer r.giveSlot()
	held := true
	defer func() {
		if held {
			r.release()
		}
	}()
	upstream, ag, err := r.connect(ctx, client, srv)
	if err != nil {
		return nil, err
	}
	var login *Login
	defer func() {
		if login == nil || login.Reauth.leg != upstream {
			closeUpstream(upstream)
		}
	}()
	version := srv.ServerVersion
	if version == "" {
		version = ag.ServerVersion
	}
	g := &protocol.Greeting{
		ServerVersion: version,
		ConnectionID:  srv.ConnectionID,
		Scramble:      ag.Scramble,
		Capabilities:  srv.greetingCapabilities(),
		Collation:     srv.Collation,
		Status:        protocol.StatusAutocommit,
		AuthPlugin:    ag.AuthPlugin,
	}
	if err := client.WritePacketFlush(g.Encode()); err != nil {
		return nil, err
	}
	h, err := readHandshakeResponse(client, srv)
	held = false
	r.release()
	if err != nil {
		return nil, err
	}
	fwd := forwardResponse(h, ag)
	l, err := r.exchange(client, upstream, srv, ag, fwd, loginOf(h))
	if err == nil {
		err = r.learn(client, upstream, fwd.Capabilities, l)
	}
	if err != nil {
		return l, err
	}
	l.Reauth = r.reauthFor(l, upstream, fwd.Capabilities, ag.Scramble)
	login = l
	return l, nil
}

// forwardResponse is the client's handshake response h as it goes to the
// auth server. The auth server holds users, not the application's schemas:
// the schema is checked on a backend by the caller.
func forwardResponse(h *protocol.HandshakeResponse, ag *protocol.Greeting) *protocol.HandshakeResponse {
	fwd := *h
	fwd.Capabilities = forwardCapabilities(h.Capabilities, ag)
	fwd.Database = ""
	if fwd.Capabilities&protocol.ClientPluginAuth == 0 {
		fwd.AuthPlugin = ""
	}
	return &fwd
}

// authenticateDeferred logs a client in without holding an auth-server
// connection while the client is silent: sluice greets it with a scramble
// of its own (mysql_native_password advertised), connects to the auth
// server only once the handshake response has arrived, then asks the client
// with an auth switch to answer the auth server's scramble and plugin, and
// relays that answer as the handshake response's auth data. It costs one
// round trip more than the direct path and needs a client that supports
// authentication plugins; others get ERR 1251.
func (r *Relay) authenticateDeferred(ctx context.Context, client *protocol.Conn, srv Server) (*Login, error) {
	version := srv.ServerVersion
	if version == "" {
		version = fallbackVersion
		if v := r.version.Load(); v != nil {
			version = *v
		}
	}
	_, h, err := greetNative(client, srv, version)
	if err != nil {
		return nil, err
	}
	if h.Capabilities&protocol.ClientPluginAuth == 0 {
		_ = client.WriteErr(protocol.ERNotSupportedAuthMode.New(
			"sluice: more than %d handshakes are waiting for their clients (auth.max_pending_handshakes), and a login then needs a client that supports authentication plugins (CLIENT_PLUGIN_AUTH); retry later",
			r.MaxPendingHandshakes))
		return nil, fmt.Errorf("%w: deferred handshake of a client without CLIENT_PLUGIN_AUTH", ErrHandshake)
	}
	if err := r.takeSlot(ctx, client); err != nil {
		return nil, err
	}
	defer r.giveSlot()
	upstream, ag, err := r.connect(ctx, client, srv)
	if err != nil {
		return nil, err
	}
	var login *Login
	defer func() {
		if login == nil || login.Reauth.leg != upstream {
			closeUpstream(upstream)
		}
	}()
	answer, err := switchClient(client, ag)
	if err != nil {
		return nil, err
	}
	fwd := forwardResponse(h, ag)
	fwd.AuthResponse = answer
	fwd.AuthPlugin = ag.AuthPlugin
	l, err := r.exchange(client, upstream, srv, ag, fwd, loginOf(h))
	if err == nil {
		err = r.learn(client, upstream, fwd.Capabilities, l)
	}
	if err != nil {
		return l, err
	}
	// The client took the auth switch's scramble as its own.
	l.Reauth = r.reauthFor(l, upstream, fwd.Capabilities, ag.Scramble)
	login = l
	return l, nil
}

// switchClient asks the client, with an auth switch, to answer the auth
// server's plugin and scramble from greeting ag, and returns the answer.
func switchClient(client *protocol.Conn, ag *protocol.Greeting) ([]byte, error) {
	if err := client.WritePacketFlush(protocol.AuthSwitchRequest(ag.AuthPlugin, append(append([]byte(nil), ag.Scramble...), 0))); err != nil {
		return nil, err
	}
	answer, err := readClient(client)
	if err != nil {
		return nil, errors.Join(ErrHandshake, err)
	}
	return append([]byte(nil), answer...), nil
}

// ChangeUser implements Authenticator. The client computed its answer from
// the login's scramble. When the login's auth-server connection was kept
// (prev), the COM_CHANGE_USER goes there, as to a single server, and the
// auth server checks the answer against the scramble it issued. Otherwise a
// new auth-server connection, which does not know that scramble, is used:
// the client is asked, with an auth switch carrying the new connection's
// scramble, to answer again, and that answer is relayed as at login.
func (r *Relay) ChangeUser(ctx context.Context, client *protocol.Conn, srv Server, caps uint32, prev *Reauth, cu *protocol.ChangeUser) (*Login, error) {
	if caps&protocol.ClientPluginAuth == 0 {
		_ = client.WriteErr(protocol.ERNotSupportedAuthMode.New(
			"sluice: COM_CHANGE_USER needs a client that supports authentication plugins"))
		return nil, fmt.Errorf("%w: client without CLIENT_PLUGIN_AUTH", ErrHandshake)
	}
	login := &Login{User: cu.User, Database: cu.Database, Capabilities: caps, Collation: cu.Collation, Attributes: cu.Attributes, UsedPassword: len(cu.AuthResponse) > 0}
	if leg, legCaps, addr := prev.takeLeg(); leg != nil {
		if addr != r.Address {
			// A reload moved the auth server since the login.
			prev.dropLeg(leg)
		} else if l, done, err := r.changeUserOnLeg(ctx, client, srv, prev, leg, legCaps, cu, login); done {
			return l, err
		}
	}
	login.Reauth = &Reauth{}
	if prev != nil {
		login.Reauth.Scramble = prev.Scramble
	}
	if len(cu.AuthResponse) > 0 && answersFromLoginScramble(cu.Attributes) {
		// Its answer to an auth switch would be the one it has sent:
		// only the login's auth-server connection could check it.
		_ = client.WriteErr(protocol.ERNotSupportedAuthMode.New(
			"sluice: this client (MariaDB Connector/C or libmysqlclient) answers COM_CHANGE_USER from its login's scramble, which only the login's auth-server connection can check, and that connection was not kept (auth.max_kept_auth_connections = %d reached, the auth server closed it, or a reload moved the auth server); reconnect instead",
			r.MaxKeptConnections))
		return nil, fmt.Errorf("%w: COM_CHANGE_USER from a client answering from its login scramble, without a kept auth-server connection", ErrHandshake)
	}
	if err := r.takeSlot(ctx, client); err != nil {
		return nil, err
	}
	defer r.giveSlot()
	upstream, ag, err := r.connect(ctx, client, srv)
	if err != nil {
		return nil, err
	}
	defer closeUpstream(upstream)
	answer, err := switchClient(client, ag)
	if err != nil {
		return nil, err
	}
	fwd := &protocol.HandshakeResponse{
		Capabilities:  forwardCapabilities(caps, ag),
		MaxPacketSize: 1 << 24,
		Collation:     cu.Collation,
		User:          cu.User,
		AuthResponse:  answer,
		AuthPlugin:    ag.AuthPlugin,
		Attributes:    cu.Attributes,
	}
	if fwd.Collation == 0 {
		fwd.Collation = srv.Collation
	}
	l, err := r.exchange(client, upstream, srv, ag, fwd, login)
	if err == nil {
		err = r.learn(client, upstream, fwd.Capabilities, l)
	}
	return l, err
}

// changeUserOnLeg sends the client's COM_CHANGE_USER cu, without its
// schema, on the login's kept auth-server connection leg (negotiated with
// legCaps) and relays the exchange until the auth server's verdict. done is
// false when leg turned out dead before anything reached the client (the
// auth server's wait_timeout, a restart): leg is then closed and the caller
// goes on without it.
func (r *Relay) changeUserOnLeg(ctx context.Context, client *protocol.Conn, srv Server, prev *Reauth, leg *protocol.Conn, legCaps uint32, cu *protocol.ChangeUser, login *Login) (_ *Login, done bool, _ error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = leg.NetConn().SetDeadline(dl)
	}
	fwd := *cu
	fwd.Database = ""
	if fwd.Collation == 0 {
		fwd.Collation = srv.Collation
	}
	leg.ResetSeq()
	err := leg.WritePacketFlush(fwd.Encode(legCaps))
	var p []byte
	if err == nil {
		p, err = leg.ReadPacket()
	}
	if err == nil {
		login.Reauth = prev
		l, err := r.verdict(client, leg, srv, login, p)
		if err == nil {
			err = r.learn(client, leg, legCaps, l)
		}
		if err != nil {
			prev.dropLeg(leg)
			return l, true, err
		}
		prev.putLeg(leg)
		return l, true, nil
	}
	prev.dropLeg(leg)
	return nil, false, err
}

// secure switches the auth-server leg to TLS as configured, before the
// handshake response crosses it.
func (r *Relay) secure(client, upstream *protocol.Conn, ag *protocol.Greeting, fwd *protocol.HandshakeResponse) error {
	if r.TLS == nil {
		return nil
	}
	if ag.Capabilities&protocol.ClientSSL == 0 {
		if !r.TLSRequired {
			return nil
		}
		_ = client.WriteErr(protocol.CRSSLConnection.New(
			"sluice: the auth server %s does not offer TLS (auth.tls = \"required\")", r.Address))
		return fmt.Errorf("auth server %s without TLS", r.Address)
	}
	fwd.Capabilities |= protocol.ClientSSL
	if err := upstream.WritePacketFlush(protocol.SSLRequest(fwd.Capabilities, fwd.MaxPacketSize, fwd.Collation)); err != nil {
		_ = client.WriteErr(protocol.CRCouldNotConnect.New("sluice: lost the auth server %s: %v", r.Address, err))
		return err
	}
	if err := upstream.UpgradeClientTLS(r.TLS); err != nil {
		_ = client.WriteErr(protocol.CRSSLConnection.New("sluice: TLS towards the auth server %s failed: %v", r.Address, err))
		return err
	}
	return nil
}

// forwardCapabilities are the client's capabilities as sent to the auth
// server: no schema (checked on a backend), no TLS or compression on that
// leg, nothing the auth server did not offer.
func forwardCapabilities(client uint32, ag *protocol.Greeting) uint32 {
	c := client &^ (protocol.ClientConnectWithDB | protocol.ClientSSL | protocol.ClientCompress)
	return c & (ag.Capabilities | protocol.ClientLongPassword)
}

// exchange sends the handshake response to the auth server and relays the
// auth-switch / extra-data exchange both ways until the auth server says OK
// (login returned) or ERR (relayed unchanged to the client: 1045 with the
// auth server's own message).
func (r *Relay) exchange(client, upstream *protocol.Conn, srv Server, ag *protocol.Greeting, fwd *protocol.HandshakeResponse, login *Login) (*Login, error) {
	if err := r.secure(client, upstream, ag, fwd); err != nil {
		return nil, err
	}
	if err := upstream.WritePacketFlush(fwd.Encode()); err != nil {
		if relayRefusal(client, upstream) {
			return nil, fmt.Errorf("auth server %s refused the connection before the handshake response: %w", r.Address, err)
		}
		_ = client.WriteErr(protocol.CRCouldNotConnect.New(
			"sluice: lost the auth server %s: %v", r.Address, err))
		return nil, err
	}
	p, err := upstream.ReadPacket()
	if err != nil {
		_ = client.WriteErr(protocol.CRCouldNotConnect.New(
			"sluice: lost the auth server %s during login: %v", r.Address, err))
		return nil, fmt.Errorf("reading auth server: %w", err)
	}
	return r.verdict(client, upstream, srv, login, p)
}

// verdict relays the auth server's answers, starting with p, to the client
// and the client's back until the auth server says OK (login returned) or
// ERR (relayed unchanged to the client).
func (r *Relay) verdict(client, upstream *protocol.Conn, srv Server, login *Login, p []byte) (*Login, error) {
	for round := range maxAuthRounds {
		if round > 0 {
			var err error
			if p, err = upstream.ReadPacket(); err != nil {
				_ = client.WriteErr(protocol.CRCouldNotConnect.New(
					"sluice: lost the auth server %s during login: %v", r.Address, err))
				return nil, fmt.Errorf("reading auth server: %w", err)
			}
		}
		switch {
		case protocol.IsOK(p):
			return login, nil
		case protocol.IsErr(p):
			srv.refused(login)
			if err := client.WritePacketFlush(p); err != nil {
				return nil, err
			}
			if e, perr := protocol.ParseErr(p); perr == nil {
				return login, fmt.Errorf("%w: %w", ErrAccessDenied, e)
			}
			return login, ErrAccessDenied
		case protocol.IsAuthSwitch(p) || protocol.IsAuthMoreData(p):
			if err := client.WritePacketFlush(p); err != nil {
				return nil, err
			}
			// caching_sha2_password's "fast auth succeeded" expects no
			// answer; the OK follows.
			if len(p) == 2 && p[0] == 0x01 && p[1] == 0x03 {
				continue
			}
			ans, err := readClient(client)
			if err != nil {
				return nil, errors.Join(ErrHandshake, err)
			}
			if err := upstream.WritePacketFlush(ans); err != nil {
				_ = client.WriteErr(protocol.CRCouldNotConnect.New(
					"sluice: lost the auth server %s: %v", r.Address, err))
				return nil, err
			}
		default:
			_ = client.WriteErr(protocol.ERHandshake.New(
				"Bad handshake: auth server %s sent an unexpected packet", r.Address))
			return nil, fmt.Errorf("%w: auth server sent an unexpected packet of %d bytes", ErrHandshake, len(p))
		}
	}
	_ = client.WriteErr(protocol.ERHandshake.New("Bad handshake: authentication did not finish"))
	return nil, fmt.Errorf("%w: too many auth rounds", ErrHandshake)
}

// learn reads the privileges of the account login matched on upstream,
// the connection that logged it in (negotiated with caps), when
// LearnGrants is set. A failure is told to the client (ERR 1045: without
// its privileges sluice cannot let the session run anything).
func (r *Relay) learn(client, upstream *protocol.Conn, caps uint32, login *Login) error {
	if !r.LearnGrants {
		return nil
	}
	w, _ := upstream.NetConn().(*wipingConn)
	if w != nil {
		w.record()
	}
	set, err := learnGrants(upstream, caps, r.KnownGrants)
	switch {
	case w == nil:
	case upstream.Buffered() == 0:
		// Every byte read is consumed: zero the raw answers before the
		// read buffer goes back to the pool shared with other connections.
		w.wipe()
	default:
		w.forget()
	}
	if err != nil {
		_ = client.WriteErr(protocol.ERAccessDenied.New(
			"sluice: the auth server %s accepted the login of '%s' but its privileges could not be read: %v", r.Address, login.User, err))
		return fmt.Errorf("%w: reading the grants of %q: %w", ErrAccessDenied, login.User, err)
	}
	login.Grants = set
	return nil
}
