package protocol

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
)

// UpgradeServerTLS switches an accepted connection to TLS as the server,
// after the client's SSLRequest. The sequence ids carry on.
func (c *Conn) UpgradeServerTLS(cfg *tls.Config) error {
	tc := tls.Server(c.readAhead(), cfg)
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	c.setNetConn(tc)
	return nil
}

// UpgradeClientTLS switches a connection to a server to TLS as the client,
// after sluice sent an SSLRequest.
func (c *Conn) UpgradeClientTLS(cfg *tls.Config) error {
	tc := tls.Client(c.readAhead(), cfg)
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	c.setNetConn(tc)
	return nil
}

// IsTLS reports whether the connection runs over TLS.
func (c *Conn) IsTLS() bool {
	_, ok := c.nc.(*tls.Conn)
	return ok
}

// readAhead returns the connection for a TLS layer to run on: bytes the
// read buffer already holds (a client's ClientHello that arrived with its
// SSLRequest) are read first.
func (c *Conn) readAhead() net.Conn {
	if c.Buffered() == 0 {
		return c.nc
	}
	pending := make([]byte, c.Buffered())
	_, _ = io.ReadFull(c.br, pending)
	return &prefixConn{Conn: c.nc, prefix: pending}
}

// prefixConn is a net.Conn whose first reads return prefix.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

func (c *Conn) setNetConn(nc net.Conn) {
	c.nc = nc
	if c.br != nil {
		if c.lean {
			c.br.Reset(c.src)
		} else {
			c.br.Reset(nc)
		}
	}
	if c.bw != nil {
		c.bw.Reset(nc)
	}
}

// SSLRequest builds the short handshake response that asks a server to
// switch to TLS.
func SSLRequest(caps uint32, maxPacket uint32, collation uint8) []byte {
	b := make([]byte, 0, 32)
	b = binary.LittleEndian.AppendUint32(b, caps|ClientSSL)
	b = binary.LittleEndian.AppendUint32(b, maxPacket)
	b = append(b, collation)
	return append(b, make([]byte, 23)...)
}
