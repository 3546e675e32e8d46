package auth

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"

	"github.com/sluice-proxy/sluice/protocol"
)

// proxyV2Signature opens every PROXY protocol version 2 header.
var proxyV2Signature = [12]byte{0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a}

// The version 2 header's command byte (version 2 in the high nibble) and
// its address family and transport byte.
const (
	proxyV2Local  = 0x20 // LOCAL: the receiver keeps the connection's own addresses
	proxyV2Proxy  = 0x21 // PROXY: the addresses below are the client's
	proxyV2TCP4   = 0x11
	proxyV2TCP6   = 0x21
	proxyV2Unspec = 0x00
)

// AddrPort is a's IP address and port, with an IPv4 address mapped into
// IPv6 unmapped; the zero AddrPort when a is not an IP address (a unix
// socket, or nil).
func AddrPort(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case nil:
		return netip.AddrPort{}
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		var err error
		if ap, err = netip.ParseAddrPort(a.String()); err != nil {
			return netip.AddrPort{}
		}
	}
	if !ap.Addr().IsValid() {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// proxyPeers returns the source and destination of a PROXY header for a
// connection from src to dst, both as IPv4 or both as IPv6 (an IPv4
// address next to an IPv6 one is mapped into IPv6). ok is false when
// either is not an IP address: the header then names no addresses.
func proxyPeers(src, dst netip.AddrPort) (s, d netip.AddrPort, ok bool) {
	if !src.Addr().IsValid() || !dst.Addr().IsValid() {
		return s, d, false
	}
	sa, da := src.Addr().Unmap().WithZone(""), dst.Addr().Unmap().WithZone("")
	if sa.Is4() != da.Is4() {
		sa, da = netip.AddrFrom16(sa.As16()), netip.AddrFrom16(da.As16())
	}
	return netip.AddrPortFrom(sa, src.Port()), netip.AddrPortFrom(da, dst.Port()), true
}

// proxyHeader is the PROXY protocol header of the given version (1, the
// text form, or 2, the binary one) that tells the auth server a
// connection comes from the client at src and reached sluice at dst. When
// src or dst is not an IP address (the zero AddrPort) the header says so:
// "PROXY UNKNOWN" in version 1, the LOCAL command in version 2, and the
// auth server then uses the connection's own addresses, that is sluice's.
func proxyHeader(version int, src, dst netip.AddrPort) []byte {
	s, d, ok := proxyPeers(src, dst)
	if version == 1 {
		if !ok {
			return []byte("PROXY UNKNOWN\r\n")
		}
		fam := "TCP4 "
		if s.Addr().Is6() {
			fam = "TCP6 "
		}
		b := append([]byte("PROXY "), fam...)
		b = s.Addr().AppendTo(b)
		b = append(b, ' ')
		b = d.Addr().AppendTo(b)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(s.Port()), 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(d.Port()), 10)
		return append(b, '\r', '\n')
	}
	b := append([]byte(nil), proxyV2Signature[:]...)
	if !ok {
		return append(b, proxyV2Local, proxyV2Unspec, 0, 0)
	}
	fam := byte(proxyV2TCP4)
	if s.Addr().Is6() {
		fam = proxyV2TCP6
	}
	sa, da := s.Addr().AsSlice(), d.Addr().AsSlice()
	b = append(b, proxyV2Proxy, fam)
	b = binary.BigEndian.AppendUint16(b, uint16(2*len(sa)+4))
	b = append(append(b, sa...), da...)
	b = binary.BigEndian.AppendUint16(b, s.Port())
	return binary.BigEndian.AppendUint16(b, d.Port())
}

// relayRefusal relays to the client the ERR an auth server sent before it
// closed the connection unread, and reports whether there was one: sluice's
// handshake response then fails to reach it, and the server's reason is of
// more use to the client than the broken write. MariaDB so refuses a PROXY
// header from an address outside its proxy_protocol_networks (1130).
func relayRefusal(client, upstream *protocol.Conn) bool {
	p, err := upstream.ReadPacket()
	if err != nil || !protocol.IsErr(p) {
		return false
	}
	_ = client.WritePacketFlush(p)
	return true
}
