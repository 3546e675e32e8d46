package dataplane

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// This file serves the statements about connections on the data port. The
// connection id a client sees (the greeting's thread id) is its sluice
// session id, which means nothing to a backend: a KILL of it forwarded as
// it is would kill whichever backend thread has that number, and the
// backends' process lists show sluice's service-account threads. So KILL
// runs on sluice's sessions, and the process list lists them.

// killWait bounds how long KILL QUERY waits for a session that is between
// backends (reading its statement, replaying its state, waiting for a
// pooled connection) to start running its statement on one.
const killWait = 2 * time.Second

// sessionCommand serves a plan the router marked as a session command
// (router.LocalKill and the process list). done reports that it answered
// the client; otherwise q is the command to run in its place (a statement
// reading information_schema.PROCESSLIST, rewritten to read the session
// list), or nil for a plan that is not a session command.
func (s *Session) sessionCommand(plan *router.Plan, p []byte) (q []byte, done bool, err error) {
	switch plan.Local {
	case router.LocalKill:
		err := s.comKill(plan, p[1:])
		// To the client KILL was its previous statement (ROW_COUNT()).
		if s.client.SentErr != 0 {
			s.noteResult(protocol.RelayResult{Err: &protocol.SQLError{Code: s.client.SentErr}})
		} else {
			s.noteResult(protocol.RelayResult{})
		}
		return nil, true, err
	case router.LocalDynamicSQL:
		e := protocol.ERNotSupportedYet.New("sluice does not run PREPARE ... FROM a variable: it cannot read the statement, which could address connections by backend thread ids (KILL, the process list); prepare the text itself (PREPARE s FROM '...')")
		s.noteResult(protocol.RelayResult{Err: e})
		return nil, true, s.client.WriteErr(e)
	case router.LocalThreadPlan:
		e := protocol.ERNotSupportedYet.New("sluice does not show another connection's statement plan: connection ids are sluice session ids, which name no backend thread (SHOW EXPLAIN FOR, SHOW ANALYZE FOR, EXPLAIN FOR CONNECTION)")
		s.noteResult(protocol.RelayResult{Err: e})
		return nil, true, s.client.WriteErr(e)
	case router.LocalShowProcesslist, router.LocalShowFullProcesslist:
		if plan.Multi {
			return nil, true, s.client.WriteErr(protocol.ERNotSupportedYet.New("sluice answers SHOW PROCESSLIST only as a statement of its own, not in a multi-statement text"))
		}
		return nil, true, s.showProcesslist(plan, plan.Local == router.LocalShowFullProcesslist, p[1:])
	case router.LocalProcesslistTable:
		if strings.HasPrefix(plan.Digest, "create ") || strings.HasPrefix(plan.Digest, "alter ") {
			// A view stores its query: rewritten, it would store the
			// session list of this moment, shown to whoever reads it.
			e := protocol.ERNotSupportedYet.New("sluice does not store a definition that reads information_schema.PROCESSLIST: it answers the process list from its own sessions when a statement runs, which a stored view or table definition cannot do")
			s.noteResult(protocol.RelayResult{Err: e})
			return nil, true, s.client.WriteErr(e)
		}
		derived := processlistDerived(s.processList("Filling schema table", p[1:]))
		out, ok, err := router.RewriteProcesslist(string(p[1:]), s.lexModes(), s.schema, derived)
		if err != nil {
			return nil, true, s.client.WriteErr(protocol.ERNotSupportedYet.New("sluice cannot run this statement on information_schema.PROCESSLIST, which it answers from its own sessions: %v", err))
		}
		if !ok {
			return p, false, nil // a PROCESSLIST table of another schema
		}
		return append([]byte{protocol.ComQuery}, out...), false, nil
	}
	return nil, false, nil
}

// preparedSessionCommand refuses to prepare a session command: its
// execution would reach a backend as it is.
func preparedSessionCommand(plan *router.Plan) *protocol.SQLError {
	switch plan.Local {
	case router.LocalKill, router.LocalShowProcesslist, router.LocalShowFullProcesslist, router.LocalProcesslistTable, router.LocalThreadPlan, router.LocalDynamicSQL:
		return protocol.ERUnsupportedPS.New("This command is not supported in the prepared statement protocol yet: sluice answers KILL and the process list in text queries only")
	}
	return nil
}

// comKill runs a client's KILL on sluice's sessions, with MariaDB's
// answers: a session of another user is not the client's to kill (1095),
// an id of no session is unknown (1094), the client's own statement or
// connection ends as on a server (1317, 1927 and a close).
func (s *Session) comKill(plan *router.Plan, sql []byte) error {
	k, err := router.ParseKill(string(sql))
	switch {
	case errors.Is(err, router.ErrNotKill) || err == nil && plan.Multi:
		return s.client.WriteErr(protocol.ERNotSupportedYet.New("sluice runs KILL itself, so only as a statement of its own: not in a multi-statement text or a PREPARE"))
	case err != nil:
		return s.client.WriteErr(protocol.ERParseError.New("You have an error in your SQL syntax: %s", err))
	case k.QueryID:
		return s.client.WriteErr(protocol.ERNotSupportedYet.New("sluice sessions have no query ids, so KILL QUERY ID is not supported: use KILL QUERY <thread id> (SHOW PROCESSLIST lists them)"))
	case k.ByUser:
		return s.killUser(k)
	}
	id := k.ID
	switch {
	case k.Self:
		id = uint64(s.id)
	case !k.IDKnown:
		return s.client.WriteErr(protocol.ERNotSupportedYet.New("sluice takes the thread id of KILL as a number or CONNECTION_ID() only, not %q", k.Expr))
	}
	if id == uint64(s.id) {
		if k.Query {
			return s.client.WriteErr(protocol.ERQueryInterrupted.New("Query execution was interrupted"))
		}
		_ = s.client.WriteErr(protocol.ERConnectionKilled.New("Connection was killed"))
		return errQuit
	}
	var target *Handle
	if id <= math.MaxUint32 {
		target = s.env.reg.ByID(uint32(id))
	}
	var user string
	if target != nil {
		user = loadString(&target.info.user)
	}
	if user == "" { // no such session, or one still logging in
		return s.client.WriteErr(protocol.ERNoSuchThread.New("Unknown thread id: %d", id))
	}
	if user != s.user && !s.grantedGlobal(router.PrivSuper|router.PrivConnectionAdmin) {
		return s.client.WriteErr(protocol.ERKillDenied.New("You are not owner of thread %d", id))
	}
	if k.Query {
		if err := s.env.interruptStatement(target); err != nil {
			return s.client.WriteErr(killFailed(id, err))
		}
	} else {
		s.env.closeSession(target)
	}
	s.log().Info("client killed a session", zap.Uint32("target", target.id), zap.Bool("query", k.Query))
	return s.writeOK()
}

// killFailed is the client's ERR for a KILL QUERY sluice could not carry
// out on the backend.
func killFailed(id uint64, err error) *protocol.SQLError {
	var se *protocol.SQLError
	if errors.As(err, &se) {
		return se
	}
	return protocol.CRCouldNotConnect.New("sluice could not kill the statement of thread %d on its backend: %v", id, err)
}

// killUser runs KILL [CONNECTION | QUERY] USER: the sessions of that
// account, which must be the client's own user (as on MariaDB for an
// account without the privilege to kill others' threads, another user's
// sessions are not counted or touched). The OK counts the sessions killed,
// the client's own included; its own connection closes after the answer.
func (s *Session) killUser(k router.Kill) error {
	name := k.User
	if k.CurrentUser {
		name = s.user
	}
	var targets []*Handle
	self := false
	if name == s.user || s.grantedGlobal(router.PrivSuper|router.PrivConnectionAdmin) {
		for _, sess := range s.env.reg.All() {
			if loadString(&sess.info.user) != name || k.Host != "" && !hostMatches(sess.client.NetConn().RemoteAddr(), k.Host) {
				continue
			}
			if sess == &s.Handle {
				self = true
			} else {
				targets = append(targets, sess)
			}
		}
	}
	for _, t := range targets {
		if k.Query {
			if err := s.env.interruptStatement(t); err != nil {
				s.log().Warn("KILL QUERY USER: cannot kill a statement", zap.Uint32("target", t.id), zap.Error(err))
			}
		} else {
			s.env.closeSession(t)
		}
	}
	n := uint64(len(targets))
	if self {
		n++
	}
	s.scratch = protocol.AppendOK(s.scratch[:0], protocol.OK{AffectedRows: n, Status: s.status()})
	err := s.client.WritePacketFlush(s.scratch)
	if err == nil && self && !k.Query {
		return errQuit
	}
	return err
}

// hostMatches reports whether a client address matches the host part of an
// account as KILL USER gives it: a pattern with % and _, in any letter
// case, against the client's IP address (and localhost for a loopback one).
func hostMatches(addr net.Addr, pattern string) bool {
	ip := addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok {
		ip = ta.IP.String()
		if ta.IP.IsLoopback() && likeMatch("localhost", strings.ToLower(pattern)) {
			return true
		}
	}
	return likeMatch(strings.ToLower(ip), strings.ToLower(pattern))
}

// likeMatch matches s against a LIKE pattern (% any run, _ one byte).
func likeMatch(s, p string) bool {
	if p == "" {
		return s == ""
	}
	switch p[0] {
	case '%':
		for i := 0; i <= len(s); i++ {
			if likeMatch(s[i:], p[1:]) {
				return true
			}
		}
		return false
	case '_':
		return s != "" && likeMatch(s[1:], p[1:])
	}
	return s != "" && s[0] == p[0] && likeMatch(s[1:], p[1:])
}

// interruptStatement kills the command sess is serving (KILL QUERY): a
// statement running on its backend is killed there (its client then gets
// the server's ERR 1317); a command waiting for a pool connection, a
// master or its statement rate has its wait ended with sluice's ERR 1317,
// and is watched for up to killWait in case it reaches a backend
// meanwhile. An idle session is left alone, as KILL QUERY of an idle
// thread does nothing on MariaDB, and so is any later command.
func (e *Env) interruptStatement(sess *Handle) error {
	_, err := e.interrupt(sess)
	return err
}

// interrupt is interruptStatement; run is the backend statement it killed,
// nil when it killed none there.
func (e *Env) interrupt(sess *Handle) (run *backendIdent, err error) {
	gen := sess.cmd.generation()
	if !sess.busy() {
		return nil, nil
	}
	deadline := time.Now().Add(killWait)
	for sess.serving(gen) {
		if run := sess.info.running.Load(); run != nil {
			// still: the same connection runs the same command (a pooled
			// connection serves the session's next one too).
			return run, e.killBackendQuery(run, func() bool { return sess.info.running.Load() == run && sess.serving(gen) })
		}
		if time.Now().After(deadline) {
			break
		}
		sess.cmd.interrupt(gen)
		time.Sleep(time.Millisecond) // the command has no event for reaching a backend
	}
	return nil, nil
}

// closeSession ends sess as a KILL CONNECTION does on MariaDB: the
// statement it runs is killed on its backend and its client connection is
// closed, without an ERR (its client sees the connection lost).
func (e *Env) closeSession(sess *Handle) {
	if sess.info.running.Load() != nil {
		if err := e.interruptStatement(sess); err != nil {
			e.log.Warn("KILL: cannot kill the statement of a session being closed", zap.Uint32("conn_id", sess.id), zap.Error(err))
		}
	}
	_ = sess.Close()
}

// processRow is one row of the process list.
type processRow struct {
	id                  uint32
	user, host, command string
	state               string
	db, info            []byte // nil: NULL
	time                time.Duration
}

// processList lists the sessions of the client's user, by id. The
// client's own session is running the statement text, in state selfState.
func (s *Session) processList(selfState string, text []byte) []processRow {
	sessions := make([]*Handle, 0, 8)
	all := s.grantedGlobal(router.PrivProcess)
	for _, sess := range s.env.reg.All() {
		if u := loadString(&sess.info.user); sess == &s.Handle || u == s.user || all && u != "" {
			sessions = append(sessions, sess)
		}
	}
	now := mono.Now()
	rows := make([]processRow, 0, len(sessions))
	for _, sess := range sessions {
		r := processRow{id: sess.id, user: loadString(&sess.info.user), host: sess.client.NetConn().RemoteAddr().String()}
		if sess == &s.Handle {
			r.user = s.user
		}
		si := &sess.info
		if db := loadString(&si.schema); db != "" {
			r.db = []byte(db)
		}
		if sess == &s.Handle {
			if s.schema != "" {
				r.db = []byte(s.schema)
			}
			r.command, r.state, r.info, r.time = "Query", selfState, append([]byte{}, text...), now-s.cmdStart
		} else if start := si.start.Load(); start != 0 {
			r.command, r.state, r.info, r.time = "Query", "executing", si.copyText(), now-time.Duration(start-1)
		} else {
			r.command, r.time = "Sleep", now-time.Duration(si.idleSince.Load())
		}
		rows = append(rows, r)
	}
	return rows
}

// showProcesslist answers SHOW [FULL] PROCESSLIST with the user's
// sessions. The column definitions are a backend's own answer to the same
// statement (types, lengths and character set follow the session's
// character_set_results exactly); the rows are sluice's.
func (s *Session) showProcesslist(plan *router.Plan, full bool, text []byte) error {
	rows := s.processList("starting", text)
	cmd := []byte("\x03SHOW PROCESSLIST")
	if full {
		cmd = []byte("\x03SHOW FULL PROCESSLIST")
	}
	clientSeq := s.client.Seq()
	return s.exchange(s.route(plan), func(bc *BackendConn) (protocol.RelayResult, error) {
		return s.relayProcesslist(bc, cmd, clientSeq, rows, full)
	}, nil)
}

// relayProcesslist sends cmd to bc, relays the column definitions of its
// answer to the client, and sends rows in place of the backend's.
func (s *Session) relayProcesslist(bc *BackendConn, cmd []byte, clientSeq uint8, rows []processRow, full bool) (protocol.RelayResult, error) {
	var res protocol.RelayResult
	bc.ResetSeq()
	if err := bc.WritePacketFlush(cmd); err != nil {
		return res, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	s.client.SetSeq(clientSeq)
	read := func() ([]byte, error) {
		p, err := bc.ReadPacket()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
		}
		return p, nil
	}
	write := func(p []byte) error {
		res.Packets++
		if err := s.client.WritePacket(p); err != nil {
			return fmt.Errorf("%w: %w", protocol.ErrClientIO, err)
		}
		return nil
	}
	p, err := read()
	if err != nil {
		return res, err
	}
	if protocol.IsErr(p) {
		res.Err, _ = protocol.ParseErr(p)
		if err := write(p); err != nil {
			return res, err
		}
		return res, s.flushClient()
	}
	n, _, _, err := protocol.ReadLenEncInt(p)
	if err != nil || n == 0 || n > 64 {
		return res, fmt.Errorf("%w: SHOW PROCESSLIST answered % x", protocol.ErrBackendIO, p[:min(len(p), 8)])
	}
	res.Columns = true
	if err := write(p); err != nil {
		return res, err
	}
	for range n + 1 { // the definitions and their EOF
		if p, err = read(); err != nil {
			return res, err
		}
		if err := write(p); err != nil {
			return res, err
		}
	}
	for { // the backend's rows: its service-account threads
		if p, err = read(); err != nil {
			return res, err
		}
		if protocol.IsEOF(p) {
			res.Status, res.HasStatus = protocol.EOFStatus(p), true
			break
		}
		if protocol.IsErr(p) {
			return res, fmt.Errorf("%w: SHOW PROCESSLIST failed midway", protocol.ErrBackendIO)
		}
	}
	var b []byte
	var vals [9][]byte
	for _, r := range rows {
		info := r.info
		if !full {
			info = truncateChars(info, 100)
		}
		vals = [9][]byte{strconv.AppendUint(nil, uint64(r.id), 10), []byte(r.user), []byte(r.host), r.db,
			[]byte(r.command), strconv.AppendInt(nil, int64(r.time/time.Second), 10), []byte(r.state), info, []byte("0.000")}
		b = protocol.AppendTextRow(b[:0], vals[:])
		if err := write(b); err != nil {
			return res, err
		}
	}
	res.Rows = int64(len(rows)) // what FOUND_ROWS() reports next
	if err := write(protocol.AppendEOF(b[:0], 0, res.Status)); err != nil {
		return res, err
	}
	return res, s.flushClient()
}

func (s *Session) flushClient() error {
	if err := s.client.Flush(); err != nil {
		return fmt.Errorf("%w: %w", protocol.ErrClientIO, err)
	}
	return nil
}

// truncateChars returns the first n characters of the UTF-8 text b (as
// SHOW PROCESSLIST without FULL shows Info).
func truncateChars(b []byte, n int) []byte {
	i := 0
	for c := 0; c < n && i < len(b); c++ {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return b[:i]
}

// processlistDerived is a derived table with information_schema.PROCESSLIST's
// columns and the rows: the empty SELECT of the real table first gives the
// union its column names and types.
func processlistDerived(rows []processRow) string {
	var b strings.Builder
	b.WriteString("SELECT * FROM information_schema.PROCESSLIST WHERE 0")
	str := func(v []byte) {
		if v == nil {
			b.WriteString("NULL")
			return
		}
		b.WriteString("CONVERT(X'")
		b.WriteString(hex.EncodeToString(v))
		b.WriteString("' USING utf8mb4)")
	}
	for _, r := range rows {
		b.WriteString(" UNION ALL SELECT ")
		b.WriteString(strconv.FormatUint(uint64(r.id), 10))
		b.WriteByte(',')
		str([]byte(r.user))
		b.WriteByte(',')
		str([]byte(r.host))
		b.WriteByte(',')
		str(r.db)
		b.WriteByte(',')
		str([]byte(r.command))
		b.WriteByte(',')
		b.WriteString(strconv.FormatInt(int64(r.time/time.Second), 10))
		b.WriteByte(',')
		str([]byte(r.state))
		b.WriteByte(',')
		str(r.info)
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(float64(r.time)/float64(time.Millisecond), 'f', 3, 64))
		// STAGE, MAX_STAGE, PROGRESS, MEMORY_USED, MAX_MEMORY_USED,
		// EXAMINED_ROWS, QUERY_ID: sluice does not know them.
		b.WriteString(",0,0,0.000,0,0,0,0,")
		if r.info == nil {
			b.WriteString("NULL")
		} else {
			b.WriteString("X'" + hex.EncodeToString(r.info) + "'")
		}
		b.WriteString(",0") // TID
	}
	return b.String()
}

// answeredBySluice reports whether sluice answers or refuses plan itself,
// never sending its text to a backend (KILL, SHOW EXPLAIN FOR, PREPARE
// from a variable).
func answeredBySluice(plan *router.Plan) bool {
	switch plan.Local {
	case router.LocalKill, router.LocalThreadPlan, router.LocalDynamicSQL:
		return true
	}
	return false
}
