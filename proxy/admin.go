package proxy

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/protocol"
)

// Version is the sluice version SHOW VERSION reports; cmd/sluice sets it
// from its build-time version.
var Version = "dev"

// adminMaxPacket bounds an admin command: every valid one is a few dozen
// bytes, so a client sending a megabyte gets ERR 1153, not a buffer.
const adminMaxPacket = 64 << 10

// adminIdleTimeout closes an admin connection that sends nothing for this
// long, so a forgotten client does not hold a goroutine for ever.
const adminIdleTimeout = 30 * time.Minute

// adminCapabilities are what the admin port offers: plain text commands,
// one at a time.
const adminCapabilities = sluiceCapabilities &^ (protocol.ClientMultiStatements | protocol.ClientMultiResults | protocol.ClientPSMultiResults)

// adminServerVersion is the version string of the admin port's greeting.
const adminServerVersion = "5.5.5-10.11.0-sluice-admin"

// erParse is ER_PARSE_ERROR, the answer to an admin command sluice cannot
// read.
const erParse uint16 = 1064

// ErNoSuchThread is ER_NO_SUCH_THREAD, the answer to KILL of an unknown id.
const ErNoSuchThread uint16 = 1094

// adminAuthenticator returns the authenticator of the admin port: the
// [admin] user with its password as a mysql_native_password hash. Without a
// password it knows no user, so every login is refused with ERR 1045.
func adminAuthenticator(user, password string) (*auth.Static, error) {
	users := map[string]string{}
	if password != "" {
		h1 := sha1.Sum([]byte(password))
		h2 := sha1.Sum(h1[:])
		users[user] = "*" + strings.ToUpper(hex.EncodeToString(h2[:]))
	}
	return auth.NewStatic(users)
}

// startAdmin binds admin_listen and serves the admin port until the
// Server's context ends; "" leaves it off.
func (s *Server) startAdmin() error {
	addr := s.cfg.Proxy.AdminListen
	if addr == "" {
		return nil
	}
	a, err := adminAuthenticator(s.cfg.Admin.User, s.cfg.Admin.Password)
	if err != nil {
		return fmt.Errorf("proxy: admin: %w", err)
	}
	if s.cfg.Admin.Password == "" {
		s.log.Warn("[admin] has no password: the admin port refuses every login", zap.String("admin_listen", addr))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("proxy: admin_listen %s: %w", addr, err)
	}
	s.adminLn, s.adminAuth = ln, a
	s.adminConns = make(map[net.Conn]struct{})
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		<-s.ctx.Done()
		_ = ln.Close()
		s.mu.Lock()
		for nc := range s.adminConns {
			_ = nc.Close()
		}
		s.mu.Unlock()
	}()
	go func() { defer s.wg.Done(); s.serveAdmin(ln) }()
	return nil
}

// AdminAddr is the bound admin address, nil when the admin port is off.
func (s *Server) AdminAddr() net.Addr {
	if s.adminLn == nil {
		return nil
	}
	return s.adminLn.Addr()
}

func (s *Server) serveAdmin(ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Error("admin accept failed", zap.Error(err))
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.adminConns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.adminConn(nc)
	}
}

// adminConn serves one admin client: login as the [admin] user, then one
// command at a time.
func (s *Server) adminConn(nc net.Conn) {
	log := s.log.With(zap.String("admin_client", nc.RemoteAddr().String()))
	defer func() {
		if r := recover(); r != nil {
			log.Error("admin connection panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
		nc.Close()
		s.mu.Lock()
		delete(s.adminConns, nc)
		s.mu.Unlock()
		s.wg.Done()
	}()
	c := protocol.NewConn(nc)
	c.MaxPacket = adminMaxPacket
	if e := s.loginRefusal(nc.RemoteAddr()); e != nil {
		_ = nc.SetDeadline(time.Now().Add(s.cfg.Proxy.HandshakeTimeout.Duration))
		_ = c.WriteErr(e)
		log.Info("admin login refused: client address in login backoff", zap.String("error", e.Message))
		return
	}
	deadline := time.Now().Add(s.cfg.Proxy.HandshakeTimeout.Duration)
	_ = nc.SetDeadline(deadline)
	ctx, cancel := context.WithDeadline(s.ctx, deadline)
	host, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
	login, err := s.adminAuth.Authenticate(ctx, c, auth.Server{
		ConnectionID:  s.nextID.Add(1),
		ServerVersion: adminServerVersion,
		Capabilities:  adminCapabilities,
		Collation:     defaultCollation,
		ClientHost:    host,
		Refused:       s.loginRefused(nc.RemoteAddr(), "admin"),
	})
	cancel()
	user := ""
	if login != nil {
		user = login.User
	}
	if err != nil {
		log.Warn("admin login failed", zap.String("user", user), zap.Error(err))
		return
	}
	s.loginSucceeded(nc.RemoteAddr())
	if err := c.WritePacketFlush(protocol.AppendOK(nil, protocol.OK{Status: protocol.StatusAutocommit})); err != nil {
		return
	}
	log.Info("admin connected", zap.String("user", login.User))
	a := &adminSession{srv: s, c: c, log: log}
	for {
		_ = nc.SetDeadline(time.Now().Add(adminIdleTimeout))
		c.ResetSeq()
		p, err := c.ReadPacket()
		if err != nil {
			if errors.Is(err, protocol.ErrPacketTooLarge) || errors.Is(err, protocol.ErrPacketOutOfOrder) {
				_ = c.WriteErr(protocol.NewError(protocol.ErNetPacketTooLarge,
					"sluice admin: command larger than %d bytes; admin commands are short", adminMaxPacket))
			}
			if !errors.Is(err, io.EOF) && s.ctx.Err() == nil {
				log.Info("admin connection ended", zap.Error(err))
			}
			return
		}
		if len(p) == 0 {
			if c.WriteErr(protocol.NewError(protocol.ErMalformedPacket, "Malformed communication packet: empty command")) != nil {
				return
			}
			continue
		}
		var werr error
		switch p[0] {
		case protocol.ComQuit:
			return
		case protocol.ComPing, protocol.ComInitDB, protocol.ComResetConnection:
			werr = a.ok("")
		case protocol.ComQuery:
			werr = a.query(string(p[1:]))
		default:
			werr = c.WriteErr(protocol.NewError(protocol.ErUnknownCommand,
				"sluice admin: %s is not supported on the admin port; send SQL text (HELP lists the commands)", protocol.CommandName(p[0])))
		}
		if werr != nil {
			return
		}
	}
}

// adminSession is one logged-in admin connection, owned by its goroutine.
type adminSession struct {
	srv *Server
	c   *protocol.Conn
	log *zap.Logger
	buf []byte
}

// adminResult is a result set the admin port builds: every value is text.
type adminResult struct {
	cols []string
	rows [][]string
}

func (a *adminSession) ok(info string) error {
	b := protocol.AppendOK(a.buf[:0], protocol.OK{Status: protocol.StatusAutocommit})
	if info != "" {
		// The human-readable info after the fixed fields; libmariadb
		// and libmysqlclient read it length-encoded.
		b = protocol.AppendLenEncString(b, []byte(info))
	}
	a.buf = b
	return a.c.WritePacketFlush(b)
}

// utf8Charset is utf8mb3_general_ci: admin text columns are shown as text
// by every client (binary columns may be printed in hex).
const utf8Charset = 33

func (a *adminSession) write(r adminResult) error {
	b := protocol.AppendLenEncInt(a.buf[:0], uint64(len(r.cols)))
	if err := a.c.WritePacket(b); err != nil {
		return err
	}
	for _, name := range r.cols {
		cd := protocol.ColumnDef{Name: []byte(name), Charset: utf8Charset, Length: 1024, Type: protocol.TypeVarString}
		b = cd.Append(b[:0])
		if err := a.c.WritePacket(b); err != nil {
			return err
		}
	}
	b = protocol.AppendEOF(b[:0], 0, protocol.StatusAutocommit)
	if err := a.c.WritePacket(b); err != nil {
		return err
	}
	vals := make([][]byte, len(r.cols))
	for _, row := range r.rows {
		for i := range vals {
			vals[i] = nil
			if i < len(row) {
				vals[i] = []byte(row[i])
			}
		}
		b = protocol.AppendTextRow(b[:0], vals)
		if err := a.c.WritePacket(b); err != nil {
			return err
		}
	}
	b = protocol.AppendEOF(b[:0], 0, protocol.StatusAutocommit)
	a.buf = b
	return a.c.WritePacketFlush(b)
}

// query runs one admin command and answers it.
func (a *adminSession) query(q string) error {
	if isVersionCommentQuery(q) {
		// The mysql and mariadb CLIs ask this once they are connected.
		return a.write(adminResult{cols: []string{"@@version_comment"}, rows: [][]string{{"sluice admin"}}})
	}
	cmd, err := parseAdmin(q)
	if err != nil {
		return a.c.WriteErr(&protocol.SQLError{Code: erParse, State: "42000", Message: "sluice admin: " + err.Error()})
	}
	res, info, err := a.srv.runAdmin(a, cmd)
	if err != nil {
		var se *protocol.SQLError
		if errors.As(err, &se) {
			return a.c.WriteErr(se)
		}
		return a.c.WriteErr(protocol.NewError(protocol.ErUnknownError, "sluice admin: %v", err))
	}
	if res == nil {
		return a.ok(info)
	}
	return a.write(*res)
}

// isVersionCommentQuery reports whether q is the query command-line
// clients send after connecting.
func isVersionCommentQuery(q string) bool {
	q = strings.TrimRight(strings.TrimSpace(q), ";")
	return strings.EqualFold(strings.Join(strings.Fields(q), " "), "select @@version_comment limit 1")
}

// refuseAdminOnDataPort is the ERR the data port gives the admin user.
func (s *Server) refuseAdminOnDataPort(host string) *protocol.SQLError {
	where := "the admin port"
	if s.adminLn != nil {
		where = "the admin port " + s.adminLn.Addr().String()
	} else if s.cfg.Proxy.AdminListen != "" {
		where = "the admin port " + s.cfg.Proxy.AdminListen
	}
	return protocol.NewError(protocol.ErAccessDenied,
		"Access denied for user '%s'@'%s': it is sluice's admin user, which logs in only on %s", s.cfg.Admin.User, host, where)
}
