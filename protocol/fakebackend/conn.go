package fakebackend

import (
	"bytes"
	"errors"
	"net"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// conn is one client connection, served by its own goroutine.
type conn struct {
	srv    *Server
	id     uint32
	pc     *protocol.Conn
	status uint16
}

// serve logs the client in and answers its commands until it quits, the
// connection fails or a script closes it.
func (s *Server) serve(id uint32, nc net.Conn) {
	defer s.wg.Done()
	defer s.forget(id)
	defer nc.Close()
	c := &conn{srv: s, id: id, pc: protocol.NewConn(nc), status: s.cfg.Status}
	if !c.login() {
		return
	}
	for c.command() {
	}
}

// login greets the client, checks its mysql_native_password answer
// (asking for one when it offers another plugin) and says OK or ERR 1045.
func (c *conn) login() bool {
	scramble, err := protocol.NewScramble()
	if err != nil {
		return false
	}
	g := &protocol.Greeting{ServerVersion: c.srv.cfg.ServerVersion, ConnectionID: c.id, Scramble: scramble,
		Capabilities: c.srv.cfg.Capabilities, Collation: 45, Status: c.status, AuthPlugin: protocol.AuthNativePassword}
	if c.pc.WritePacketFlush(g.Encode()) != nil {
		return false
	}
	p, err := c.pc.ReadPacket()
	if err != nil {
		return false
	}
	h, err := protocol.ParseHandshakeResponse(p)
	if err != nil {
		_ = c.pc.WriteErr(protocol.ERHandshake.New("Bad handshake: %v", err))
		return false
	}
	c.srv.record(Command{ConnID: c.id, Command: protocol.ComConnect, Arg: h.User, Database: h.Database,
		Packet: bytes.Clone(p)})
	resp := h.AuthResponse
	if h.Capabilities&protocol.ClientPluginAuth != 0 && h.AuthPlugin != "" && h.AuthPlugin != protocol.AuthNativePassword {
		sw := protocol.AuthSwitchRequest(protocol.AuthNativePassword, append(bytes.Clone(scramble), 0))
		if c.pc.WritePacketFlush(sw) != nil {
			return false
		}
		if resp, err = c.pc.ReadPacket(); err != nil {
			return false
		}
	}
	if !c.srv.allows(h.User, scramble, resp) {
		using := "NO"
		if len(resp) > 0 {
			using = "YES"
		}
		_ = c.pc.WriteErr(protocol.ERAccessDenied.New("Access denied for user '%s'@'localhost' (using password: %s)", h.User, using))
		return false
	}
	return c.pc.WritePacketFlush(protocol.AppendOK(nil, protocol.OK{Status: c.status})) == nil
}

// allows reports whether user may log in with the answer resp to scramble.
func (s *Server) allows(user string, scramble, resp []byte) bool {
	if s.cfg.User == "" {
		return true
	}
	return user == s.cfg.User && protocol.VerifyNativePassword(scramble, resp, s.stored)
}

// command reads, records and answers one command; false ends the
// connection.
func (c *conn) command() bool {
	c.pc.ResetSeq()
	p, err := c.pc.ReadPacket()
	if err != nil {
		if errors.Is(err, protocol.ErrPacketOutOfOrder) || errors.Is(err, protocol.ErrPacketTooLarge) {
			_ = c.pc.WriteErr(protocol.ToSQLError(err))
		}
		return false
	}
	if len(p) == 0 {
		_ = c.pc.WriteErr(protocol.ERMalformedPacket.New("Malformed communication packet: empty command"))
		return false
	}
	cmd := Command{ConnID: c.id, Command: p[0], Packet: bytes.Clone(p)}
	switch p[0] {
	case protocol.ComQuery, protocol.ComInitDB, protocol.ComStmtPrepare:
		cmd.Arg = string(p[1:])
	case protocol.ComFieldList:
		arg, _, _ := bytes.Cut(p[1:], []byte{0})
		cmd.Arg = string(arg)
	}
	c.srv.record(cmd)
	if r, ok := c.srv.script(cmd); ok {
		return c.answer(r)
	}
	switch p[0] {
	case protocol.ComQuit:
		return false
	case protocol.ComPing, protocol.ComInitDB:
		return c.answer(Result{})
	case protocol.ComResetConnection:
		c.status = c.srv.cfg.Status
		return c.answer(Result{})
	case protocol.ComSetOption:
		// A server without CLIENT_DEPRECATE_EOF says EOF to this one.
		return c.pc.WritePacketFlush(protocol.AppendEOF(nil, 0, c.status)) == nil
	case protocol.ComQuery:
		return c.answer(c.srv.unmatchedQuery(cmd.Arg))
	}
	return c.answer(Err(protocol.ERUnknownCommand.New("Unknown command")))
}

// answer sends r after its delay, or as much of it as r.Close lets through;
// false ends the connection.
func (c *conn) answer(r Result) bool {
	if r.Delay > 0 {
		t := time.NewTimer(r.Delay)
		select {
		case <-t.C:
		case <-c.srv.done:
			t.Stop()
			return false
		}
	}
	if r.Status != 0 {
		c.status = r.Status
	}
	packets := r.packets(c.status)
	if r.Close {
		packets = packets[:min(r.CloseAfter, len(packets))]
	}
	for _, p := range packets {
		if c.pc.WritePacket(p) != nil {
			return false
		}
	}
	return c.pc.Flush() == nil && !r.Close
}
