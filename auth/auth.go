// Package auth owns client authentication: the relay to a dedicated auth
// server (backend "mysql", the default) and static users that hold only
// mysql_native_password hashes (backend "static"). sluice never sees, stores
// or logs a password; static hashes are compared in constant time.
//
// Authenticators are safe for concurrent use by many sessions; each
// Authenticate call owns the client connection it is given until it returns.
package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"net/netip"

	"github.com/sluice-proxy/sluice/auth/grants"
	"github.com/sluice-proxy/sluice/protocol"
)

// ErrAccessDenied reports a login the auth backend refused. The client has
// already received the ERR packet; the session must close.
var ErrAccessDenied = errors.New("access denied")

// ErrAuthServerUnreachable reports a login that could not reach the auth
// server: no connection to it, or no greeting from it. The client has
// received a 2003 naming the auth server. It is told apart from other
// login errors so that an unreachable auth server can be counted (and
// alerted on) apart from clients that break their handshakes.
var ErrAuthServerUnreachable = errors.New("auth server unreachable")

// ErrHandshake reports a client that broke the handshake protocol. The client
// has received an ERR packet where that was still possible.
var ErrHandshake = errors.New("bad handshake")

// Server describes the proxy side of the greeting: what sluice tells the
// client about itself.
type Server struct {
	ConnectionID  uint32
	ServerVersion string
	// Capabilities are sluice's own capability flags.
	Capabilities uint32
	Collation    uint8
	// ClientHost is the client's address without port, for error messages.
	ClientHost string
	// ClientAddr is the client's address and LocalAddr sluice's end of
	// the client's connection, for the PROXY header (Relay.ProxyProtocol).
	// The zero AddrPort (see AddrPort) stands for an address that is not
	// IP: the header then names none.
	ClientAddr, LocalAddr netip.AddrPort
	// TLS, when set, lets clients switch to TLS (CLIENT_SSL is offered);
	// RequireTLS refuses clients that do not.
	TLS        *tls.Config
	RequireTLS bool
	// Refused, when set, is called with the user name when the backend
	// refuses the login, before the ERR goes to the client: a caller that
	// counts failed logins has counted this one before the client can try
	// again.
	Refused func(user string)
}

// refused calls srv.Refused, if set, for login's user.
func (srv Server) refused(login *Login) {
	if srv.Refused != nil && login != nil {
		srv.Refused(login.User)
	}
}

// greetingCapabilities are the capabilities sluice's greeting offers.
func (srv Server) greetingCapabilities() uint32 {
	c := srv.Capabilities | protocol.ClientPluginAuth | protocol.ClientSecureConnection
	if srv.TLS != nil {
		c |= protocol.ClientSSL
	}
	return c
}

// Login is what a successful authentication established. The client is then
// waiting for the final OK (or ERR) of the handshake, which the caller sends
// after checking Database on a backend.
type Login struct {
	User string
	// Database is the schema the client asked for in its handshake, not
	// yet checked.
	Database string
	// Capabilities are the client's flags limited to sluice's.
	Capabilities uint32
	Collation    uint8
	MaxPacket    uint32
	// Attributes are the client's raw connection attributes.
	Attributes []byte
	// UsedPassword: the client answered the login with a password (MariaDB
	// errors say "using password: YES").
	UsedPassword bool
	// Grants are the account's privileges, as the auth server listed them
	// on the login's own connection (Relay.LearnGrants) or the static
	// configuration gives them; nil when not learnt.
	Grants *grants.Set
	// Reauth is what the session keeps for its COM_CHANGE_USER; never nil
	// after a successful login. The session owns it and closes it at its
	// end (and on a failed login the caller does).
	Reauth *Reauth
}

// Authenticator runs the login exchange on a freshly accepted client
// connection. On failure it has already told the client (ERR packet) where
// the protocol allowed and returns an error wrapping ErrAccessDenied or
// ErrHandshake, or an I/O error; with ErrAccessDenied the Login is returned
// too, so the refused user name can be logged.
type Authenticator interface {
	Authenticate(ctx context.Context, client *protocol.Conn, srv Server) (*Login, error)
	// ChangeUser re-authenticates a logged-in client that sent
	// COM_CHANGE_USER (cu), whose session capabilities are caps and whose
	// login (or last change of user) left prev. The Login returned carries
	// the Reauth for the next change (prev itself when it still serves).
	// Errors are as for Authenticate; the caller closes the session, and
	// prev, on any.
	ChangeUser(ctx context.Context, client *protocol.Conn, srv Server, caps uint32, prev *Reauth, cu *protocol.ChangeUser) (*Login, error)
}

// readHandshakeResponse reads and decodes the client's handshake response,
// answering a malformed one with ERR 1043.
func readHandshakeResponse(client *protocol.Conn, srv Server) (*protocol.HandshakeResponse, error) {
	p, err := readClient(client)
	if err != nil {
		return nil, err
	}
	if protocol.IsSSLRequest(p) {
		if srv.TLS == nil {
			_ = client.WriteErr(protocol.ERHandshake.New(
				"Bad handshake: client asked for TLS, which this sluice listener does not offer"))
			return nil, errors.Join(ErrHandshake, errors.New("TLS requested but not configured"))
		}
		if err := client.UpgradeServerTLS(srv.TLS); err != nil {
			return nil, errors.Join(ErrHandshake, err)
		}
		if p, err = readClient(client); err != nil {
			return nil, errors.Join(ErrHandshake, err)
		}
	} else if srv.RequireTLS {
		_ = client.WriteErr(protocol.ERSecureTransport.New(
			"Connections using insecure transport are prohibited: sluice requires TLS (proxy.require_tls = true)"))
		return nil, errors.Join(ErrHandshake, errors.New("client without TLS refused (require_tls)"))
	}
	h, err := protocol.ParseHandshakeResponse(p)
	if err != nil {
		_ = client.WriteErr(protocol.ERHandshake.New("Bad handshake: %v", err))
		return nil, errors.Join(ErrHandshake, err)
	}
	h.Capabilities &= srv.greetingCapabilities()
	if !client.IsTLS() {
		h.Capabilities &^= protocol.ClientSSL
	}
	return h, nil
}

// readClient reads the client's next packet during authentication. A
// packet out of order or over max_allowed_packet is answered with ERR 1043
// naming the fault and wraps ErrHandshake; an I/O error (the client gone) is
// returned as is. The client's write buffer goes back to its pool while
// the client is waited for (everything sent to it is flushed by then).
func readClient(client *protocol.Conn) ([]byte, error) {
	client.ReleaseWriter()
	p, err := client.ReadPacket()
	if err != nil {
		if errors.Is(err, protocol.ErrPacketTooLarge) || errors.Is(err, protocol.ErrPacketOutOfOrder) {
			_ = client.WriteErr(protocol.ERHandshake.New("Bad handshake: %v", err))
			return nil, errors.Join(ErrHandshake, err)
		}
		return nil, err
	}
	return p, nil
}

func loginOf(h *protocol.HandshakeResponse) *Login {
	return &Login{
		User:         h.User,
		Database:     h.Database,
		Capabilities: h.Capabilities,
		Collation:    h.Collation,
		MaxPacket:    h.MaxPacketSize,
		Attributes:   h.Attributes,
		UsedPassword: len(h.AuthResponse) > 0,
	}
}
