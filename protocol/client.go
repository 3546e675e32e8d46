package protocol

import (
	"crypto/tls"
	"fmt"
)

// ClientConfig is what the client side of a handshake towards a backend
// needs: the service account and the capabilities to ask for.
type ClientConfig struct {
	User      string
	Password  string
	Database  string
	Collation uint8
	// Capabilities are intersected with the server's.
	Capabilities uint32
	MaxPacket    uint32
	// TLS, when set, switches the connection to TLS if the server offers
	// it; TLSRequired makes a server without TLS an error.
	TLS         *tls.Config
	TLSRequired bool
}

// BackendCapabilities are the capabilities sluice asks of every backend
// data connection; ClientFoundRows is added per pool, and the
// multi-statement option is switched per connection with COM_SET_OPTION.
const BackendCapabilities = ClientLongPassword | ClientLongFlag | ClientProtocol41 |
	ClientTransactions | ClientSecureConnection | ClientMultiResults | ClientPSMultiResults |
	ClientPluginAuth | ClientPluginAuthLenencClientData

// ClientHandshake authenticates c (a fresh connection to a MySQL server) as
// cfg.User, answering the greeting and any auth switch for
// mysql_native_password and the caching_sha2_password fast path. It returns
// the server's greeting. A server ERR comes back as *SQLError.
func ClientHandshake(c *Conn, cfg ClientConfig) (*Greeting, error) {
	c.ResetSeq()
	p, err := c.ReadPacket()
	if err != nil {
		return nil, fmt.Errorf("reading greeting: %w", err)
	}
	g, err := ParseGreeting(p)
	if err != nil {
		return nil, err
	}
	if g.Capabilities&ClientProtocol41 == 0 {
		return nil, fmt.Errorf("%w: server does not speak protocol 4.1", ErrMalformed)
	}
	caps := cfg.Capabilities & (g.Capabilities | ClientLongPassword)
	if cfg.Database != "" {
		caps |= ClientConnectWithDB
	}
	coll := cfg.Collation
	if coll == 0 {
		coll = defaultServerCollation
	}
	maxPacket := cfg.MaxPacket
	if maxPacket == 0 {
		maxPacket = 1 << 30
	}
	if cfg.TLS != nil && g.Capabilities&ClientSSL != 0 {
		caps |= ClientSSL
		if err := c.WritePacketFlush(SSLRequest(caps, maxPacket, coll)); err != nil {
			return nil, err
		}
		if err := c.UpgradeClientTLS(cfg.TLS); err != nil {
			return nil, err
		}
	} else if cfg.TLSRequired {
		return nil, CRSSLConnection.New("server does not offer TLS, which is required")
	}
	plugin := g.AuthPlugin
	resp, err := authResponse(plugin, g.Scramble, cfg.Password)
	if err != nil {
		plugin = AuthNativePassword
		resp = NativePasswordResponse(g.Scramble, cfg.Password)
	}
	hr := &HandshakeResponse{
		Capabilities:  caps,
		MaxPacketSize: maxPacket,
		Collation:     coll,
		User:          cfg.User,
		AuthResponse:  resp,
		Database:      cfg.Database,
		AuthPlugin:    plugin,
	}
	if err := c.WritePacketFlush(hr.Encode()); err != nil {
		return nil, fmt.Errorf("sending handshake response: %w", err)
	}
	scramble := g.Scramble
	for range 8 {
		p, err := c.ReadPacket()
		if err != nil {
			return nil, fmt.Errorf("reading auth result: %w", err)
		}
		switch {
		case IsOK(p):
			g.Capabilities = caps
			return g, nil
		case IsErr(p):
			e, err := ParseErr(p)
			if err != nil {
				return nil, err
			}
			return nil, e
		case IsAuthSwitch(p):
			name, data, err := ParseAuthSwitch(p)
			if err != nil {
				return nil, err
			}
			plugin, scramble = name, append([]byte(nil), data...)
			r, err := authResponse(plugin, scramble, cfg.Password)
			if err != nil {
				return nil, err
			}
			if err := c.WritePacketFlush(r); err != nil {
				return nil, err
			}
		case IsAuthMoreData(p):
			if len(p) == 2 && p[1] == 3 { // caching_sha2 fast auth succeeded; OK follows
				continue
			}
			return nil, ERNotSupportedAuthMode.New(
				"backend asks for %s full authentication, which sluice does not do: give the service account mysql_native_password", plugin)
		case len(p) == 0:
			return nil, fmt.Errorf("%w: empty packet during authentication", ErrMalformed)
		default:
			return nil, fmt.Errorf("%w: unexpected packet 0x%02x during authentication", ErrMalformed, p[0])
		}
	}
	return nil, fmt.Errorf("%w: authentication did not finish", ErrMalformed)
}

func authResponse(plugin string, scramble []byte, password string) ([]byte, error) {
	switch plugin {
	case AuthNativePassword, "":
		return NativePasswordResponse(scramble, password), nil
	case AuthCachingSHA2:
		return CachingSHA2Response(scramble, password), nil
	}
	return nil, ERNotSupportedAuthMode.New("backend auth plugin %q is not supported for the service account", plugin)
}
