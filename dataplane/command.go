package dataplane

import (
	"encoding/binary"
	"errors"
	"strconv"
	"time"
	"unsafe"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/shard"
	"go.uber.org/zap"
)

var errQuit = errors.New("client quit")

// dispatch serves one command. An error ends the session; failures the
// client should see are written as ERR packets and return nil.
func (s *Session) dispatch(p []byte) error {
	switch cmd := p[0]; cmd {
	case protocol.ComQuit:
		return errQuit
	case protocol.ComPing:
		return s.writeOK()
	case protocol.ComQuery:
		return s.comQuery(p)
	case protocol.ComInitDB:
		db := string(p[1:])
		if e := s.allowedCommand(router.UseAccess(db)); e != nil {
			return s.client.WriteErr(e)
		}
		return s.forward(router.TargetMaster, p, protocol.ResponseSingle, func(bc *BackendConn, res protocol.RelayResult) {
			if res.Err == nil {
				s.schema, bc.schema = db, db
			}
		})
	case protocol.ComFieldList:
		if e := s.allowedFieldList(p[1:]); e != nil {
			return s.client.WriteErr(e)
		}
		target := router.TargetReplica
		if s.inTransaction() || s.pins&(router.PinTempTable|router.PinUntracked) != 0 {
			target = router.TargetMaster
		}
		return s.forward(target, p, protocol.ResponseFieldList, nil)
	case protocol.ComStatistics:
		return s.forward(router.TargetMaster, p, protocol.ResponseSingle, nil)
	case protocol.ComSetOption:
		if len(p) != 3 {
			return s.client.WriteErr(protocol.ERMalformedPacket.New("Malformed communication packet: COM_SET_OPTION needs 2 bytes"))
		}
		on := binary.LittleEndian.Uint16(p[1:]) == protocol.OptionMultiStatementsOn
		return s.forward(router.TargetMaster, p, protocol.ResponseSingle, func(bc *BackendConn, res protocol.RelayResult) {
			if res.Err == nil {
				s.multiStmts, bc.multiStmts = on, on
			}
		})
	case protocol.ComResetConnection:
		s.resetState()
		s.resetRole()
		return s.writeOK()
	case protocol.ComChangeUser:
		return s.comChangeUser(p)
	case protocol.ComStmtPrepare:
		return s.comStmtPrepare(p)
	case protocol.ComStmtExecute:
		return s.comStmtExecute(p)
	case protocol.ComStmtSendLongData:
		return s.comStmtSendLongData(p)
	case protocol.ComStmtFetch:
		return s.comStmtFetch(p)
	case protocol.ComStmtReset:
		return s.comStmtReset(p)
	case protocol.ComStmtClose:
		return s.comStmtClose(p)
	default:
		return s.client.WriteErr(protocol.ERUnknownCommand.New("Unknown command: sluice does not support %s (0x%02x)", protocol.CommandName(cmd), cmd))
	}
}

// comQuery classifies a statement and forwards it to the master or a
// replica.
func (s *Session) comQuery(p []byte) error {
	var plan *router.Plan
	var sql string
	if s.env.shards() != nil {
		plan, sql = s.env.router.ClassifyText(p[1:])
	} else {
		plan = s.env.router.ClassifyBytes(p[1:])
	}
	s.rec.plan = plan
	s.info.setText(p[1:])
	if e := s.localInfileRefusal(plan); e != nil {
		return s.client.WriteErr(e)
	}
	doubt := s.lexDoubt(plan)
	if done, err := s.grantsAndFirewall(plan, p[1:], doubt); done {
		return err
	}
	rule, ruleSet, back, refused, err := s.applyRules(plan, p[1:], sql)
	if refused {
		return err
	}
	if back >= 0 {
		defer s.useCluster(back) // a rule routed the statement to another cluster
	}
	if (plan.Opaque || doubt) && !answeredBySluice(plan) && router.UnsureConnectionCommand(unsafe.String(unsafe.SliceData(p[1:]), len(p)-1)) {
		// sluice cannot tell what this text does with connection ids.
		e := protocol.ERNotSupportedYet.New("sluice does not run this text: it cannot be sure how the server reads it (it does not parse it, it holds several statements, or the session's sql_mode or character set changes its reading), and it may address connections by backend thread ids (KILL, the process list, SHOW EXPLAIN FOR) or run dynamic SQL it cannot read; send such a statement on its own, in plain text")
		s.noteResult(protocol.RelayResult{Err: e})
		return s.client.WriteErr(e)
	}
	if plan.Local != router.LocalNone {
		// KILL and the process list: sessioncmds.go.
		q, done, err := s.sessionCommand(plan, p)
		if done {
			return err
		}
		if q == nil {
			return s.answerLocal(plan)
		}
		p = q
	}
	if refused, err := s.refuseDefaultRole(plan, p[1:]); refused {
		return err
	}
	if plan.LoadDataLocal {
		// The client streams the file as part of the command.
		s.disarmIdle()
	}
	defer s.catalogFence(plan)()
	s.beginStatement(plan)
	// Pin before running: even a failing statement may have left state.
	// SQL_CALC_FOUND_ROWS does not pin: sluice learns the count once the
	// statement ran (scoped.go).
	s.pin(plan.Pins &^ router.PinFoundRows)
	if s.env.shards() != nil && back < 0 {
		q, handled, err := s.shardQuery(p, plan, sql)
		if handled {
			return err
		}
		p = q
	}
	target := s.ruleTarget(ruleSet, &rule, plan, s.route(plan))
	var after func(*BackendConn, protocol.RelayResult)
	kind := plan.Kind
	if doubt {
		// Under the session's sql_mode or character set the server may
		// read other statements in the text than the router saw: route()
		// sent it to the master, and nothing is tracked from it: the
		// session keeps its connections, whatever the text changed.
		kind = router.KindWrite
		s.pin(router.PinUntracked)
	}
	switch kind {
	case router.KindUse:
		after = func(bc *BackendConn, res protocol.RelayResult) {
			if res.Err == nil {
				s.schema, bc.schema = plan.Schema, plan.Schema
			}
		}
	case router.KindSet:
		after = s.afterSet(plan)
	case router.KindTxn:
		if s.releases(plan) {
			after = s.afterRelease
		}
	}
	resp := s.resultKind()
	// A question about a previous statement that ended clean (no
	// warning, no error) must find the diagnostics area empty, as on the
	// session's own server connection; a pooled connection holds what
	// its last statement left.
	clearDiag := plan.FollowsPrevious && !s.holdWarnings
	if isXA(plan) {
		s.xa = true
	}
	// Before it is sent: a write begins on its tables' cache counters.
	s.noteWrites(plan, doubt, s.schema)
	if invisible := invisibleLID(plan, doubt); plan.Scoped != nil || invisible || clearDiag {
		return s.scopedExchange(target, p, plan, resp, clearDiag, invisible, after)
	}
	if rule.CacheTTL > 0 {
		if done, err := s.cachedQuery(plan, p, resp, rule.CacheTTL); done {
			return err
		}
	}
	err = s.forward(target, p, resp, after)
	if err == nil && s.replay.quit {
		// COMMIT / ROLLBACK RELEASE: the server ended the connection.
		return errQuit
	}
	return err
}

// resultKind is how a text statement's answer is framed: with LOAD DATA
// LOCAL INFILE requests when the client allows local files.
func (s *Session) resultKind() protocol.ResponseKind {
	if s.key.localFiles {
		return protocol.ResponseResultLocalInfile
	}
	return protocol.ResponseResult
}

// scopedExchange runs a statement that reads values of the client's own
// connection (see scoped.go), or that must find the diagnostics area
// empty (clearDiag).
func (s *Session) scopedExchange(target router.Target, p []byte, plan *router.Plan, resp protocol.ResponseKind, clearDiag, invisible bool,
	after func(*BackendConn, protocol.RelayResult)) error {
	clientSeq := s.client.Seq()
	return s.exchange(target, func(bc *BackendConn) (protocol.RelayResult, error) {
		if clearDiag {
			// A statement that reads a table and raises nothing
			// empties the diagnostics area.
			if _, err := bc.queryValue("SELECT 1 FROM information_schema.ENGINES LIMIT 0"); err != nil {
				return protocol.RelayResult{}, err
			}
			if plan.Scoped == nil && !invisible {
				return s.send(bc, p, clientSeq, resp)
			}
		}
		q, err := s.scopedText(bc, p, plan, invisible)
		if err != nil {
			return protocol.RelayResult{}, err
		}
		return s.send(bc, q, clientSeq, resp)
	}, after)
}

// localInfileRefusal is the error for LOAD DATA LOCAL INFILE when sluice
// or the client does not allow local files, else nil.
func (s *Session) localInfileRefusal(plan *router.Plan) *protocol.SQLError {
	if !plan.LoadDataLocal || s.key.localFiles {
		return nil
	}
	if !s.env.cfg.Proxy.LocalInfile {
		return protocol.ERNotAllowedCommand.New("sluice: LOAD DATA LOCAL INFILE is disabled ([proxy] local_infile = false)")
	}
	return protocol.ERNotAllowedCommand.New("sluice: LOAD DATA LOCAL INFILE needs a client that allows local files (CLIENT_LOCAL_FILES)")
}

// inTransaction reports whether the session has a transaction open on the
// master, or autocommit off, as the master's last status flags say.
func (s *Session) inTransaction() bool {
	if s.master != nil && s.master.inTransaction() {
		return true
	}
	if s.txBegin != "" {
		return true
	}
	if len(s.legs) == 1 {
		return false // the one leg is the active one
	}
	for i := range s.legs {
		if m := s.legs[i].master; m != nil && m.inTransaction() {
			return true
		}
	}
	return false
}

// recordVars adds SET assignments to the session state. A re-assigned
// variable moves to the end so replay keeps the client's order.
//
// bc is the connection that ran them (nil when they were not just run):
// an sql_mode whose lexing flags the router could not tell is read back
// from it.
func (s *Session) recordVars(vars []router.SessionVar, bc *BackendConn) {
	for _, v := range vars {
		for i := range s.vars {
			if s.vars[i].Name == v.Name {
				s.vars = append(s.vars[:i], s.vars[i+1:]...)
				break
			}
		}
		s.vars = append(s.vars, trackedVar{SessionVar: v})
		s.stateOK = false
		if v.Name == "sql_mode" {
			s.noteSQLMode(v, bc)
		}
	}
}

// dropVar forgets a tracked session variable.
func (s *Session) dropVar(name string) {
	for i := range s.vars {
		if s.vars[i].Name == name {
			s.vars = append(s.vars[:i], s.vars[i+1:]...)
			s.stateOK = false
			if name == "sql_mode" {
				s.lex = lexState{}
			}
			return
		}
	}
}

// resetState implements COM_RESET_CONNECTION: the data connections go back
// to their pools (which reset them) and the tracked state is cleared. The
// schema stays, as on MySQL.
func (s *Session) resetState() {
	s.release(true)
	s.xa = false // its connections were closed
	s.vars = s.vars[:0]
	s.stateOK = false
	s.lex = lexState{}
	s.pins = 0
	s.holdWarnings = false
	s.resetScoped()
	s.replay = setReplay{}
	clear(s.stmts)
	s.cursors = 0 // the release closed them
}

// afterCommand gives the connections back to the pools between statements
// unless the session is pinned, so many clients share few connections.
func (s *Session) afterCommand() {
	s.endWrites(false)
	if s.masterBusy.Load() != 0 && !s.inTransaction() {
		s.masterBusy.Store(0)
	}
	if !s.pinned() {
		s.release(false)
	}
	s.publishInfo()
}

func (s *Session) writeOK() error {
	st := s.status()
	s.scratch = protocol.AppendOK(s.scratch[:0], protocol.OK{Status: st})
	return s.client.WritePacketFlush(s.scratch)
}

// status is the server status sluice reports in answers it makes itself:
// the active master's last flags, with a transaction sharding has not yet
// started on any cluster shown as open.
func (s *Session) status() uint16 {
	// Without a master connection the session is in no transaction and
	// has autocommit on (either would pin one); NO_BACKSLASH_ESCAPES
	// follows its sql_mode, as the last backend reply showed it.
	st := protocol.StatusAutocommit | s.lastStatus&protocol.StatusNoBackslashEscape
	if s.master != nil {
		st = s.master.status &^ protocol.StatusMoreResultsExists
	}
	if s.txBegin != "" {
		st |= protocol.StatusInTrans
	}
	return st
}

// noteResult keeps what SELECT LAST_INSERT_ID() and ROW_COUNT() report,
// as the server would for this session: the first id the last INSERT
// generated, and the rows the previous statement changed (-1 after a
// result set, as the server says).
func (s *Session) noteResult(res protocol.RelayResult) {
	s.scoped.stmtSeq++
	switch {
	case res.Err != nil:
		s.rowCount = -1
	case res.Columns:
		s.rowCount = -1
	default:
		s.rowCount = int64(res.OK.AffectedRows)
		if res.OK.LastInsertID != 0 {
			s.lastInsertID = res.OK.LastInsertID
			s.scoped.lidSeq++
			s.scoped.lidStale = false
		}
	}
}

// answerLocal answers SELECT LAST_INSERT_ID() / SELECT ROW_COUNT() from the
// session's own record: the connection that ran the INSERT may be serving
// another client by now.
func (s *Session) answerLocal(plan *router.Plan) error {
	st := s.status()
	var v []byte
	var flags uint16 = protocol.FlagNotNull | protocol.FlagBinary
	switch plan.Local {
	case router.LocalLastInsertID:
		v = strconv.AppendUint(s.scratch2[:0], s.lastInsertID, 10)
		flags |= protocol.FlagUnsigned
	default:
		v = strconv.AppendInt(s.scratch2[:0], s.rowCount, 10)
	}
	s.scratch2 = v
	var err error
	s.scratch, err = protocol.WriteSingleValue(s.client, s.scratch, plan.LocalName, protocol.TypeLongLong, flags, 21, v, st)
	// To the client this was a SELECT of one row.
	s.answeredLocally(1)
	return err
}

// pin adds sticky pins and counts each reason the first time it pins this
// session.
func (s *Session) pin(p router.Pin) {
	if added := p &^ s.pins; added != 0 {
		for bit, name := range router.PinNames {
			if added&bit != 0 {
				s.env.metrics.Pins.WithLabelValues(name).Inc()
			}
		}
		s.pins |= p
	}
}

// beginStatement marks the session running a statement of plan.
// The statement started when the command was read (Session.cmdStart, on
// the monotonic clock shared with the statement metrics); si.start holds
// it plus one, so 0 means idle.
func (s *Session) beginStatement(plan *router.Plan) {
	si := &s.info
	si.stmtDigest, si.stmtRows, si.stmtFailed, si.stmtRoute, si.stmtActive = plan.Digest, 0, false, 0, true
	si.digest.Store(&plan.Digest)
	si.start.Store(int64(s.cmdStart) + 1)
}

// runningOn records that bc is about to run the session's statement.
func (s *Session) runningOn(bc *BackendConn) {
	if bc.ident != nil {
		s.info.running.Store(bc.ident)
	}
	if b := bc.backend; b != nil {
		if cur := s.info.backend.Load(); cur != &b.Address {
			s.info.backend.Store(&b.Address)
		}
		if b.Role == health.RoleMaster {
			s.info.stmtRoute |= observe.DigestMaster
		} else {
			s.info.stmtRoute |= observe.DigestReplica
		}
	}
}

// ranOn records the outcome of the exchange runningOn announced.
func (s *Session) ranOn(res protocol.RelayResult, err error) {
	s.info.running.Store(nil)
	si := &s.info
	if err != nil || res.Err != nil {
		si.stmtFailed = true
	}
	if !res.Columns {
		si.stmtRows += res.OK.AffectedRows
	}
}

// endStatement counts the statement, which took d, in the digest store
// and marks the session idle.
func (s *Session) endStatement(d time.Duration) {
	si := &s.info
	if !si.stmtActive {
		return
	}
	si.stmtActive = false
	if si.stmtRoute == 0 && s.env.shards() != nil {
		si.stmtRoute = observe.DigestShard
	}
	s.env.digests.Record(si.stmtDigest, d, si.stmtRows, si.stmtFailed, si.stmtRoute)
	si.idleSince.Store(int64(mono.Now()))
	si.start.Store(0)
	si.digest.Store(nil)
	si.running.Store(nil)
	si.dropLongText()
}

// publishInfo copies the session's user, schema, pins and transaction
// state where SHOW SESSIONS reads them; it allocates only when the user or
// schema changed.
func (s *Session) publishInfo() {
	si := &s.info
	if u := si.user.Load(); (u == nil && s.user != "") || (u != nil && *u != s.user) {
		v := s.user
		si.user.Store(&v)
	}
	if d := si.schema.Load(); (d == nil && s.schema != "") || (d != nil && *d != s.schema) {
		v := s.schema
		si.schema.Store(&v)
	}
	si.pins.Store(uint32(s.pins))
	si.inTx.Store(s.inTransaction())
}

// finishCommand accounts for the client command p, read at start (monoNow), once it
// is answered: the ERR it sent to the client by code, the bytes relayed,
// and for a statement that reached a backend its count by route and type,
// its latency, and a slow-query log line when it took slow_query_threshold
// or longer. It allocates nothing unless it logs (or meets an error code
// for the first time).
func (s *Session) finishCommand(p []byte, start time.Duration) {
	r := &s.rec
	code := s.client.SentErr
	if code == 0 {
		code = r.errCode
	}
	route := r.route
	if route == observe.RouteNone && r.backend != nil {
		route = observe.RouteReplica
		if r.backend.Role == health.RoleMaster {
			route = observe.RouteMaster
		}
	}
	var d time.Duration
	if r.plan != nil || s.info.stmtActive {
		// One clock read times the statement for the metrics, the slow
		// log and the digest store.
		d = mono.Now() - start
	}
	s.endStatement(d)
	var kind router.Kind
	if r.plan != nil {
		kind = r.plan.Kind
	}
	if s.env.metrics.Command(code, route, int64(len(p)), r.toClient, r.plan != nil, kind, d) {
		s.logSlow(p, route, code, d)
	}
	if r.plan != nil && r.plan.DDL && (code == 0 || r.plan.Multi) && s.env.schemaChanged != nil {
		s.env.schemaChanged()
	}
	*r = commandRecord{}
	s.client.SentErr = 0
}

// logSlow writes the slow-query log line of the statement p that took d.
func (s *Session) logSlow(p []byte, route observe.Route, code uint16, d time.Duration) {
	r := &s.rec
	backend := ""
	if r.backend != nil {
		backend = r.backend.Address
	}
	fields := make([]zap.Field, 0, 9)
	fields = append(fields, zap.String("digest", r.plan.Digest), zap.String("type", r.plan.Kind.String()),
		zap.String("route", route.String()), zap.String("backend", backend), zap.Duration("duration", d))
	if r.resultSet {
		fields = append(fields, zap.Bool("result_set", true))
	} else {
		fields = append(fields, zap.Uint64("affected_rows", r.affected))
	}
	if code != 0 {
		fields = append(fields, zap.Uint16("error_code", code))
	}
	if s.env.metrics.LogSQL() {
		switch {
		case r.sql != "":
			fields = append(fields, zap.String("sql", r.sql))
		case len(p) > 0 && p[0] == protocol.ComQuery:
			fields = append(fields, zap.ByteString("sql", p[1:]))
		}
	}
	s.log().Warn("slow query", fields...)
}

// commandRecord is what the client command being served recorded for the
// statement metrics and the slow-query log; Session.finishCommand reads it
// once the command is answered and clears it. It belongs to its Session.
type commandRecord struct {
	// plan is the statement's plan (COM_QUERY, COM_STMT_EXECUTE); nil for
	// a command that is no statement, which is not timed or counted.
	plan *router.Plan
	// sql is the prepared statement's text of a COM_STMT_EXECUTE (a
	// COM_QUERY's is its packet).
	sql string
	// route is set by the sharding path (shard, scatter); otherwise the
	// role of backend, the last backend the command ran on, says it.
	route   observe.Route
	backend *health.Backend
	// errCode is the code of an ERR a backend answered that reached the
	// client some other way than WriteErr or Relay (COM_STMT_PREPARE's).
	errCode uint16
	// affected is the final OK's affected rows, when there was no result
	// set (resultSet).
	affected  uint64
	resultSet bool
	// toClient counts the answer bytes relayed to the client.
	toClient int64
}

// note records one exchange of the command with backend b and its result.
func (r *commandRecord) note(b *health.Backend, res *protocol.RelayResult) {
	r.backend = b
	r.toClient += res.Bytes
	r.resultSet = res.Columns
	r.affected = res.OK.AffectedRows
	if res.Err != nil {
		r.errCode = res.Err.Code
	}
}

// noteShardRoute records the route of a statement on sharded tables: one
// shard, or several (scatter). A statement on unsharded or broadcast tables
// only keeps the route its backend's role gives.
func (s *Session) noteShardRoute(rt *shard.Route) {
	if len(rt.Parts) > 1 && !rt.AnyOne {
		s.rec.route = observe.RouteScatter
		return
	}
	for i := range rt.Parts {
		if rt.Parts[i].Shards != nil {
			s.rec.route = observe.RouteShard
			return
		}
	}
}
