package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-proxy/sluice/auth/grants"
	"github.com/sluice-proxy/sluice/protocol"
)

// Static authenticates clients against mysql_native_password hashes held in
// the configuration (SHA1(SHA1(password)), as PASSWORD() prints it). It is
// immutable after construction and safe for concurrent use.
type Static struct {
	users  map[string][]byte
	grants map[string]*grants.Set
}

// SetGrants gives user the privileges of lines (GRANT statements in SHOW
// GRANTS form; TO CURRENT_USER or TO the user), which its logins carry as
// Login.Grants. Call it only before the Static is used.
func (s *Static) SetGrants(user string, lines []string) error {
	set, err := grants.Parse(user, "%", lines)
	if err != nil {
		return fmt.Errorf("user %q: %w", user, err)
	}
	if s.grants == nil {
		s.grants = map[string]*grants.Set{}
	}
	s.grants[user] = set
	return nil
}

// NewStatic builds a Static from user name → "*HEX" hash.
func NewStatic(users map[string]string) (*Static, error) {
	s := &Static{users: make(map[string][]byte, len(users))}
	for name, hash := range users {
		h, err := protocol.ParseNativeHash(hash)
		if err != nil {
			return nil, fmt.Errorf("user %q: %w", name, err)
		}
		s.users[name] = h
	}
	return s, nil
}

// dummyHash keeps the work for an unknown user the same as for a known one.
var dummyHash = make([]byte, 20)

// Authenticate implements Authenticator.
func (s *Static) Authenticate(_ context.Context, client *protocol.Conn, srv Server) (*Login, error) {
	scramble, h, err := greetNative(client, srv, srv.ServerVersion)
	if err != nil {
		return nil, err
	}
	resp := h.AuthResponse
	if h.Capabilities&protocol.ClientPluginAuth != 0 && h.AuthPlugin != "" && h.AuthPlugin != protocol.AuthNativePassword {
		// Ask the client to answer mysql_native_password instead.
		if resp, err = switchToNative(client, scramble); err != nil {
			return nil, err
		}
	}
	login, err := s.verify(client, srv, scramble, resp, loginOf(h))
	if err != nil {
		return login, err
	}
	login.Reauth = &Reauth{Scramble: scrambleOf(scramble)}
	return login, nil
}

// ChangeUser implements Authenticator. As on a single server, the
// COM_CHANGE_USER's own answer is checked against the login's scramble
// (prev): Connector/C and libmysqlclient know no other. A client whose
// answer does not match (another plugin, or a wrong password) answers an
// auth switch carrying a fresh scramble, which decides.
func (s *Static) ChangeUser(_ context.Context, client *protocol.Conn, srv Server, caps uint32, prev *Reauth, cu *protocol.ChangeUser) (*Login, error) {
	if caps&protocol.ClientPluginAuth == 0 {
		_ = client.WriteErr(protocol.ERNotSupportedAuthMode.New(
			"sluice: COM_CHANGE_USER needs a client that supports authentication plugins"))
		return nil, fmt.Errorf("%w: client without CLIENT_PLUGIN_AUTH", ErrHandshake)
	}
	login := &Login{User: cu.User, Database: cu.Database, Capabilities: caps, Collation: cu.Collation, Attributes: cu.Attributes, UsedPassword: len(cu.AuthResponse) > 0, Reauth: prev}
	if prev != nil && len(prev.Scramble) > 0 && (cu.AuthPlugin == "" || cu.AuthPlugin == protocol.AuthNativePassword) {
		stored, known := s.users[login.User]
		if !known {
			stored = dummyHash
		}
		if protocol.VerifyNativePassword(prev.Scramble, cu.AuthResponse, stored) && known {
			s.grant(login)
			return login, nil
		}
	}
	scramble, err := protocol.NewScramble()
	if err != nil {
		return nil, err
	}
	resp, err := switchToNative(client, scramble)
	if err != nil {
		return nil, err
	}
	return s.verify(client, srv, scramble, resp, login)
}

// switchToNative asks the client for a mysql_native_password answer over
// scramble and returns it.
func switchToNative(client *protocol.Conn, scramble []byte) ([]byte, error) {
	if err := client.WritePacketFlush(protocol.AuthSwitchRequest(protocol.AuthNativePassword, append(append([]byte(nil), scramble...), 0))); err != nil {
		return nil, err
	}
	resp, err := readClient(client)
	if err != nil {
		return nil, errors.Join(ErrHandshake, err)
	}
	return append([]byte(nil), resp...), nil
}

// verify checks resp for login.User in constant time and answers ERR 1045
// on failure.
func (s *Static) verify(client *protocol.Conn, srv Server, scramble, resp []byte, login *Login) (*Login, error) {
	stored, known := s.users[login.User]
	if !known {
		stored = dummyHash
	}
	ok := protocol.VerifyNativePassword(scramble, resp, stored) && known
	if !ok {
		using := "NO"
		if len(resp) > 0 {
			using = "YES"
		}
		e := protocol.ERAccessDenied.New("Access denied for user '%s'@'%s' (using password: %s)",
			login.User, srv.ClientHost, using)
		srv.refused(login)
		_ = client.WriteErr(e)
		return login, fmt.Errorf("%w: %w", ErrAccessDenied, e)
	}
	s.grant(login)
	return login, nil
}

// grant gives a login its user's grants from the configuration.
func (s *Static) grant(login *Login) {
	login.Grants = s.grants[login.User]
	if login.Grants == nil {
		// A user without grants may log in and do nothing else.
		login.Grants, _ = grants.Parse(login.User, "%", nil)
	}
}

// greetNative greets the client with a fresh scramble of sluice's own,
// advertising mysql_native_password and version, and reads its handshake
// response (readHandshakeResponse: TLS and the checks of a first packet).
func greetNative(client *protocol.Conn, srv Server, version string) (scramble []byte, h *protocol.HandshakeResponse, err error) {
	scramble, err = protocol.NewScramble()
	if err != nil {
		return nil, nil, err
	}
	g := &protocol.Greeting{
		ServerVersion: version,
		ConnectionID:  srv.ConnectionID,
		Scramble:      scramble,
		Capabilities:  srv.greetingCapabilities(),
		Collation:     srv.Collation,
		Status:        protocol.StatusAutocommit,
		AuthPlugin:    protocol.AuthNativePassword,
	}
	if err := client.WritePacketFlush(g.Encode()); err != nil {
		return nil, nil, err
	}
	h, err = readHandshakeResponse(client, srv)
	if err != nil {
		return nil, nil, err
	}
	return scramble, h, nil
}
