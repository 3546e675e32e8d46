package protocol

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Greeting is the server's initial handshake packet (protocol version 10).
type Greeting struct {
	ServerVersion string
	ConnectionID  uint32
	// Scramble is the 20-byte nonce the client hashes its password with
	// (auth-plugin-data parts 1 and 2, without the trailing NUL).
	Scramble     []byte
	Capabilities uint32
	Collation    uint8
	Status       uint16
	// MariaDBCapabilities are MariaDB's extended capability bits, present
	// when the server clears ClientLongPassword ("CLIENT_MYSQL").
	MariaDBCapabilities uint32
	AuthPlugin          string
}

// ParseGreeting decodes a server greeting. Errors wrap ErrMalformed.
func ParseGreeting(p []byte) (*Greeting, error) {
	if len(p) > 0 && p[0] == headerErr {
		e, err := ParseErr(p)
		if err != nil {
			return nil, err
		}
		return nil, e
	}
	if len(p) < 1 || p[0] != 10 {
		return nil, fmt.Errorf("%w: greeting is not protocol version 10", ErrMalformed)
	}
	g := &Greeting{}
	p = p[1:]
	v, n, err := readNulString(p)
	if err != nil {
		return nil, err
	}
	g.ServerVersion = string(v)
	p = p[n:]
	if len(p) < 4+8+1+2 {
		return nil, fmt.Errorf("%w: greeting truncated", ErrMalformed)
	}
	g.ConnectionID = binary.LittleEndian.Uint32(p)
	scramble := append([]byte(nil), p[4:12]...)
	p = p[13:]
	g.Capabilities = uint32(binary.LittleEndian.Uint16(p))
	p = p[2:]
	authDataLen := 0
	if len(p) >= 16 {
		g.Collation = p[0]
		g.Status = binary.LittleEndian.Uint16(p[1:])
		g.Capabilities |= uint32(binary.LittleEndian.Uint16(p[3:])) << 16
		authDataLen = int(p[5])
		if g.Capabilities&ClientLongPassword == 0 {
			g.MariaDBCapabilities = binary.LittleEndian.Uint32(p[12:])
		}
		p = p[16:]
		if g.Capabilities&ClientSecureConnection != 0 {
			n2 := max(13, authDataLen-8)
			if len(p) < n2 {
				return nil, fmt.Errorf("%w: greeting scramble truncated", ErrMalformed)
			}
			part2 := p[:n2]
			if i := bytes.IndexByte(part2, 0); i >= 0 {
				part2 = part2[:i]
			}
			scramble = append(scramble, part2...)
			p = p[n2:]
		}
		if g.Capabilities&ClientPluginAuth != 0 {
			name, _, err := readNulString(p)
			if err != nil {
				// Some servers omit the final NUL.
				name = p
			}
			g.AuthPlugin = string(name)
		}
	}
	g.Scramble = scramble
	if g.AuthPlugin == "" {
		g.AuthPlugin = AuthNativePassword
	}
	return g, nil
}

// Encode returns the greeting's payload.
func (g *Greeting) Encode() []byte {
	b := make([]byte, 0, 128)
	b = append(b, 10)
	b = append(b, g.ServerVersion...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, g.ConnectionID)
	s := g.Scramble
	var part1 [8]byte
	copy(part1[:], s)
	b = append(b, part1[:]...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(g.Capabilities))
	b = append(b, g.Collation)
	b = binary.LittleEndian.AppendUint16(b, g.Status)
	b = binary.LittleEndian.AppendUint16(b, uint16(g.Capabilities>>16))
	if g.Capabilities&ClientPluginAuth != 0 {
		b = append(b, byte(len(s)+1))
	} else {
		b = append(b, 0)
	}
	b = append(b, make([]byte, 6)...)
	b = binary.LittleEndian.AppendUint32(b, g.MariaDBCapabilities)
	if g.Capabilities&ClientSecureConnection != 0 {
		var part2 []byte
		if len(s) > 8 {
			part2 = s[8:]
		}
		b = append(b, part2...)
		for i := len(part2); i < 12; i++ {
			b = append(b, 0)
		}
		b = append(b, 0)
	}
	if g.Capabilities&ClientPluginAuth != 0 {
		b = append(b, g.AuthPlugin...)
		b = append(b, 0)
	}
	return b
}

// HandshakeResponse is the client's answer to the greeting
// (HandshakeResponse41).
type HandshakeResponse struct {
	Capabilities        uint32
	MaxPacketSize       uint32
	Collation           uint8
	MariaDBCapabilities uint32
	User                string
	AuthResponse        []byte
	Database            string
	AuthPlugin          string
	// Attributes is the raw connection-attribute block (without its
	// length prefix), passed on unchanged.
	Attributes []byte
}

// IsSSLRequest reports whether p is a short SSLRequest packet rather than a
// full handshake response.
func IsSSLRequest(p []byte) bool {
	return len(p) == 32 && binary.LittleEndian.Uint32(p)&ClientSSL != 0
}

// ParseHandshakeResponse decodes a HandshakeResponse41. Every length in it is
// checked against the packet; errors wrap ErrMalformed.
func ParseHandshakeResponse(p []byte) (*HandshakeResponse, error) {
	if len(p) < 32 {
		return nil, fmt.Errorf("%w: handshake response of %d bytes is too short", ErrMalformed, len(p))
	}
	h := &HandshakeResponse{}
	h.Capabilities = binary.LittleEndian.Uint32(p)
	if h.Capabilities&ClientProtocol41 == 0 {
		return nil, fmt.Errorf("%w: client does not speak protocol 4.1", ErrMalformed)
	}
	h.MaxPacketSize = binary.LittleEndian.Uint32(p[4:])
	h.Collation = p[8]
	if h.Capabilities&ClientLongPassword == 0 {
		h.MariaDBCapabilities = binary.LittleEndian.Uint32(p[28:])
	}
	p = p[32:]
	user, n, err := readNulString(p)
	if err != nil {
		return nil, fmt.Errorf("user name: %w", err)
	}
	h.User = string(user)
	p = p[n:]
	switch {
	case h.Capabilities&ClientPluginAuthLenencClientData != 0:
		a, n, err := ReadLenEncString(p)
		if err != nil {
			return nil, fmt.Errorf("auth response: %w", err)
		}
		h.AuthResponse = append([]byte(nil), a...)
		p = p[n:]
	case h.Capabilities&ClientSecureConnection != 0:
		if len(p) < 1 || len(p) < 1+int(p[0]) {
			return nil, fmt.Errorf("%w: auth response truncated", ErrMalformed)
		}
		h.AuthResponse = append([]byte(nil), p[1:1+int(p[0])]...)
		p = p[1+int(p[0]):]
	default:
		a, n, err := readNulString(p)
		if err != nil {
			return nil, fmt.Errorf("auth response: %w", err)
		}
		h.AuthResponse = append([]byte(nil), a...)
		p = p[n:]
	}
	if h.Capabilities&ClientConnectWithDB != 0 && len(p) > 0 {
		db, n, err := readNulString(p)
		if err != nil {
			return nil, fmt.Errorf("database: %w", err)
		}
		h.Database = string(db)
		p = p[n:]
	}
	if h.Capabilities&ClientPluginAuth != 0 && len(p) > 0 {
		name, n, err := readNulString(p)
		if err != nil {
			// libmysqlclient before 5.6.6 omits the NUL at the very end.
			name, n = p, len(p)
		}
		h.AuthPlugin = string(name)
		p = p[n:]
	}
	if h.Capabilities&ClientConnectAttrs != 0 && len(p) > 0 {
		a, _, err := ReadLenEncString(p)
		if err != nil {
			return nil, fmt.Errorf("connection attributes: %w", err)
		}
		h.Attributes = append([]byte(nil), a...)
	}
	return h, nil
}

// Encode returns the response's payload. Fields are written as its
// Capabilities say.
func (h *HandshakeResponse) Encode() []byte {
	b := make([]byte, 0, 64+len(h.User)+len(h.AuthResponse)+len(h.Database)+len(h.Attributes))
	b = binary.LittleEndian.AppendUint32(b, h.Capabilities)
	b = binary.LittleEndian.AppendUint32(b, h.MaxPacketSize)
	b = append(b, h.Collation)
	b = append(b, make([]byte, 19)...)
	b = binary.LittleEndian.AppendUint32(b, h.MariaDBCapabilities)
	b = append(b, h.User...)
	b = append(b, 0)
	switch {
	case h.Capabilities&ClientPluginAuthLenencClientData != 0:
		b = AppendLenEncString(b, h.AuthResponse)
	case h.Capabilities&ClientSecureConnection != 0:
		b = append(b, byte(len(h.AuthResponse)))
		b = append(b, h.AuthResponse...)
	default:
		b = append(b, h.AuthResponse...)
		b = append(b, 0)
	}
	if h.Capabilities&ClientConnectWithDB != 0 {
		b = append(b, h.Database...)
		b = append(b, 0)
	}
	if h.Capabilities&ClientPluginAuth != 0 {
		b = append(b, h.AuthPlugin...)
		b = append(b, 0)
	}
	if h.Capabilities&ClientConnectAttrs != 0 {
		b = AppendLenEncString(b, h.Attributes)
	}
	return b
}

// AuthSwitchRequest builds the payload asking a client to answer with plugin
// over data (0xfe + plugin name + NUL + data).
func AuthSwitchRequest(plugin string, data []byte) []byte {
	b := make([]byte, 0, 2+len(plugin)+len(data)+1)
	b = append(b, headerEOF)
	b = append(b, plugin...)
	b = append(b, 0)
	return append(b, data...)
}

// ParseAuthSwitch decodes an auth switch request: plugin name and data
// (the trailing NUL of a scramble removed).
func ParseAuthSwitch(p []byte) (plugin string, data []byte, err error) {
	if len(p) < 1 || p[0] != headerEOF {
		return "", nil, fmt.Errorf("%w: not an auth switch request", ErrMalformed)
	}
	name, n, err := readNulString(p[1:])
	if err != nil {
		return "", nil, err
	}
	data = p[1+n:]
	if len(data) > 0 && data[len(data)-1] == 0 {
		data = data[:len(data)-1]
	}
	return string(name), data, nil
}

// IsAuthSwitch reports whether p, read during authentication, is an auth
// switch request.
func IsAuthSwitch(p []byte) bool { return len(p) > 0 && p[0] == headerEOF }

// IsAuthMoreData reports whether p, read during authentication, is an
// extra-data packet (0x01 ...).
func IsAuthMoreData(p []byte) bool { return len(p) > 0 && p[0] == headerAuthMore }

// ChangeUser is a decoded COM_CHANGE_USER packet.
type ChangeUser struct {
	User         string
	AuthResponse []byte
	Database     string
	// Collation is 0 when the client sent none.
	Collation  uint8
	AuthPlugin string
	Attributes []byte
}

// ParseChangeUser decodes a COM_CHANGE_USER packet sent by a client with
// the capabilities caps. Errors wrap ErrMalformed.
func ParseChangeUser(p []byte, caps uint32) (*ChangeUser, error) {
	if len(p) < 2 || p[0] != ComChangeUser {
		return nil, fmt.Errorf("%w: COM_CHANGE_USER of %d bytes", ErrMalformed, len(p))
	}
	cu := &ChangeUser{}
	p = p[1:]
	user, n, err := readNulString(p)
	if err != nil {
		return nil, fmt.Errorf("user name: %w", err)
	}
	cu.User = string(user)
	p = p[n:]
	if caps&ClientSecureConnection != 0 {
		if len(p) < 1 || len(p) < 1+int(p[0]) {
			return nil, fmt.Errorf("%w: auth response truncated", ErrMalformed)
		}
		cu.AuthResponse = append([]byte(nil), p[1:1+int(p[0])]...)
		p = p[1+int(p[0]):]
	} else {
		a, n, err := readNulString(p)
		if err != nil {
			return nil, fmt.Errorf("auth response: %w", err)
		}
		cu.AuthResponse = append([]byte(nil), a...)
		p = p[n:]
	}
	db, n, err := readNulString(p)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	cu.Database = string(db)
	p = p[n:]
	if len(p) >= 2 {
		cu.Collation = p[0]
		p = p[2:]
	}
	if caps&ClientPluginAuth != 0 && len(p) > 0 {
		name, n, err := readNulString(p)
		if err != nil {
			name, n = p, len(p)
		}
		cu.AuthPlugin = string(name)
		p = p[n:]
	}
	if caps&ClientConnectAttrs != 0 && len(p) > 0 {
		a, _, err := ReadLenEncString(p)
		if err != nil {
			return nil, fmt.Errorf("connection attributes: %w", err)
		}
		cu.Attributes = append([]byte(nil), a...)
	}
	return cu, nil
}

// Encode returns the COM_CHANGE_USER payload for a client with caps.
func (cu *ChangeUser) Encode(caps uint32) []byte {
	b := []byte{ComChangeUser}
	b = append(b, cu.User...)
	b = append(b, 0)
	if caps&ClientSecureConnection != 0 {
		b = append(b, byte(len(cu.AuthResponse)))
		b = append(b, cu.AuthResponse...)
	} else {
		b = append(b, cu.AuthResponse...)
		b = append(b, 0)
	}
	b = append(b, cu.Database...)
	b = append(b, 0)
	b = append(b, cu.Collation, 0)
	if caps&ClientPluginAuth != 0 {
		b = append(b, cu.AuthPlugin...)
		b = append(b, 0)
	}
	if caps&ClientConnectAttrs != 0 {
		b = AppendLenEncString(b, cu.Attributes)
	}
	return b
}
