package protocol

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
)

// UpgradeServerTLS switches an accepted connection to TLS as the server,
// after the client's SSLRequest. The sequence ids carry on.
func (c *Conn) UpgradeServerTLS(cfg *tls.Config) error {
	tc := tls.Server(c.nc, cfg)
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	c.setNetConn(tc)
	return nil
}

// UpgradeClientTLS switches a connection to a server to TLS as the client,
// after sluice sent an SSLRequest.
func (c *Conn) UpgradeClientTLS(cfg *tls.Config) error {
	tc := tls.Client(c.nc, cfg)
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

func (c *Conn) setNetConn(nc net.Conn) {
	c.nc = nc
	c.br.Reset(nc)
	c.bw.Reset(nc)
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
