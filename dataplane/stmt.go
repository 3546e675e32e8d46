package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unique"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/rules"
	"github.com/sluice-proxy/sluice/shard"
)

// preparedStmt is one statement a client prepared with COM_STMT_PREPARE.
// The client knows it by sluice's id; a backend connection that runs it
// prepares it the first time under an id of its own and keeps it for any
// session (stmtcache.go). A preparedStmt belongs to its Session.
type preparedStmt struct {
	id   uint32
	sql  string
	plan *router.Plan
	// text is sql under the schema it was prepared in, as backend caches
	// know it; variant and variantText are the last other text run for it
	// (a shard's physical text, or connIDText) and its handle.
	text        unique.Handle[stmtText]
	variant     string
	variantText unique.Handle[stmtText]
	// connIDText is sql as prepared on backends when it reads
	// CONNECTION_ID() (Session.connIDText).
	connIDText string
	params     int
	columns    int
	// types are the parameter types of the last execute that bound them;
	// typesVersion counts those executes, and keeps counting when the
	// struct is reused, so a backend statement whose types are not these
	// (backendStmt.typesOwner) gets them re-sent.
	types        []byte
	typesVersion uint64
	// longData holds COM_STMT_SEND_LONG_DATA chunks per parameter until the
	// next execute, which sends them to whichever backend runs it.
	longData     map[int][]byte
	longDataSize int64
	longDataErr  *protocol.SQLError
	// cursor is the backend connection holding this statement's open
	// cursor, which COM_STMT_FETCH must reach, as the statement
	// cursorStmt, taken out of the connection's cache meanwhile.
	cursor     *BackendConn
	cursorStmt *backendStmt
	// rule is the query rules' decision at PREPARE, ruleSet the rules it
	// was made by; executions count it and follow its route.
	rule    rules.Decision
	ruleSet *rules.Set
	// schema is the session's schema when it was prepared, which its
	// unqualified tables keep naming, as on a server; state and vars are
	// the session's replayed SET statements then (sql_mode, character
	// set), under which it is prepared wherever it runs.
	schema string
	state  unique.Handle[string]
	vars   []trackedVar
	// shard is the statement's sharding template; nil without sharding.
	shard *shard.Template
}

// route decides master or replica for a statement of plan, given the
// session's transaction state.
//
// A read goes to a replica only when nothing casts doubt on the router's
// reading of it: the server must lex it as the router did (lexDoubt), and
// every stored function it calls must be declared not to write
// (funcsMayWrite). Should a write still reach a replica, the connection's
// read-only access mode refuses it and the master runs it (exchange).
func (s *Session) route(plan *router.Plan) router.Target {
	if plan.FollowsPrevious && s.diagFrom != nil && s.diagFrom == s.replica && !s.inTransaction() && !s.lexDoubt(plan) {
		return router.TargetReplica
	}
	// A session with temporary tables, or with session state sluice did
	// not track, reads on the master, where they live.
	temp := s.pins&(router.PinTempTable|router.PinUntracked) != 0
	if plan.Target == router.TargetReplica && !s.inTransaction() && !temp && s.consistency != consistencyStrong &&
		!s.lexDoubt(plan) && !s.funcsMayWrite(plan) {
		return router.TargetReplica
	}
	return router.TargetMaster
}

// comStmtPrepare prepares the statement on the backend it routes to, so the
// client gets the server's own metadata, and hands the client sluice's id.
func (s *Session) comStmtPrepare(p []byte) error {
	if len(s.stmts) >= s.env.config().Proxy.MaxPreparedStatements {
		return s.client.WriteErr(protocol.ERMaxPreparedStmtCount.New("Can't create more than max_prepared_statements statements in one sluice session (current value: %d)",
			s.env.config().Proxy.MaxPreparedStatements))
	}
	plan, sql := s.env.router.ClassifyText(p[1:])
	if e := preparedSessionCommand(plan); e != nil {
		return s.client.WriteErr(e)
	}
	if e := s.preparedRefusal(plan, sql); e != nil {
		return s.client.WriteErr(e)
	}
	if (plan.Opaque || s.lexDoubt(plan)) && router.UnsureConnectionCommand(sql) {
		return s.client.WriteErr(protocol.ERNotSupportedYet.New("sluice does not prepare this text: it cannot be sure how the server reads it, and it may address connections by backend thread ids (KILL, the process list) or run dynamic SQL"))
	}
	if refused, err := s.refuseDefaultRole(plan, p[1:]); refused {
		return err
	}
	// The rules decide at PREPARE; each execution counts and follows
	// that decision.
	rule, ruleSet, back, refused, err := s.prepareRules(plan, p[1:], sql)
	if refused {
		return err
	}
	if back >= 0 {
		defer s.useCluster(back)
	}
	s.pin(plan.Pins &^ router.PinFoundRows) // see comQuery
	if sc := plan.Scoped; sc != nil && sc.Uses&(router.ScopedRowCount|router.ScopedFoundRows) != 0 {
		// The server answers these from the statement its connection
		// ran last, which must be the session's: it keeps its
		// connections from now on.
		s.pin(router.PinUntracked)
	}
	if s.lexDoubt(plan) {
		// The server may prepare another statement than the router read:
		// whatever it does at execution stays on this session's
		// connections.
		s.pin(router.PinUntracked)
	}
	var tpl *shard.Template
	variant := ""
	if s.env.shards() != nil {
		// Prepare one physical text (they all have the same parameters
		// and columns) on its cluster; executions route by their values.
		var err error
		mode := s.shardMode()
		if e := s.stopped(); e != nil {
			return s.client.WriteErr(e)
		}
		if s.shardOpaque(plan, sql, mode) {
			if err = s.env.shards().CheckOpaque(sql); err != nil {
				return s.client.WriteErr(shardError(err))
			}
		}
		if tpl, err = s.env.shards().PrepareMode(s.schema, sql, mode); err != nil {
			return s.client.WriteErr(shardError(err))
		}
		if tpl.Local() != shard.LocalNone {
			return s.client.WriteErr(protocol.ERNotSupportedYet.New("sluice: NEXT_ID() is answered in text queries only; run SELECT NEXT_ID(...) without preparing it"))
		}
		sample := tpl.Sample()
		s.useCluster(sample.Cluster)
		if sample.SQL != sql {
			variant = sample.SQL
			p = append(append(s.shardPkt[:0], protocol.ComStmtPrepare), sample.SQL...)
			s.shardPkt = p
		}
	}
	clientSeq := s.client.Seq()
	// Preparing is no statement to ROW_COUNT() and the like (scoped.go).
	s.scoped.skipNote = true
	defer func() { s.scoped.skipNote = false }()
	text := unique.Make(stmtText{sql: sql, schema: s.schema})
	prepared := text
	if variant != "" {
		prepared = unique.Make(stmtText{sql: variant, schema: s.schema})
	}
	state := s.state()
	return s.exchange(s.ruleTarget(ruleSet, &rule, plan, s.route(plan)), func(bc *BackendConn) (protocol.RelayResult, error) {
		key := stmtKey{text: prepared, state: state}
		bc.makeRoom(key, s.env.config().Proxy.BackendStatementCache)
		first, err := prepareText(bc, p)
		if err != nil {
			return protocol.RelayResult{}, err
		}
		s.client.SetSeq(clientSeq)
		if protocol.IsErr(first) {
			e, _ := protocol.ParseErr(first)
			if err := s.client.WritePacketFlush(first); err != nil {
				return protocol.RelayResult{Packets: 1}, fmt.Errorf("%w: %w", protocol.ErrClientIO, err)
			}
			return protocol.RelayResult{Packets: 1, Err: e}, nil
		}
		ok, err := protocol.ParsePrepareOK(first)
		if err != nil {
			return protocol.RelayResult{}, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
		}
		s.nextStmtID++
		st := s.newStmt()
		st.id, st.sql, st.plan, st.params, st.columns = s.nextStmtID, sql, plan, int(ok.Params), int(ok.Columns)
		st.shard, st.schema, st.text = tpl, s.schema, text
		st.rule, st.ruleSet = rule, ruleSet
		st.state, st.vars = state, append(st.vars[:0], s.vars...)
		if variant != "" {
			st.variant, st.variantText = variant, prepared
		}
		bc.addStmt(key, ok.StatementID)
		s.stmts[st.id] = st
		protocol.SetStmtID(first, st.id)
		if err := s.client.WritePacket(first); err != nil {
			return protocol.RelayResult{Packets: 1}, fmt.Errorf("%w: %w", protocol.ErrClientIO, err)
		}
		if err := protocol.RelayPackets(s.client, bc.Conn, ok.PrepareMetadataPackets(false)); err != nil {
			return protocol.RelayResult{Packets: 1}, err
		}
		return protocol.RelayResult{Packets: 1}, nil
	}, nil)
}

// prepareText sends the client's COM_STMT_PREPARE p to bc and returns the
// first packet of the answer. When the server has reached its
// max_prepared_stmt_count, bc's cached statements are closed and p is
// sent once more: they are sluice's, and a server would have prepared it.
func prepareText(bc *BackendConn, p []byte) ([]byte, error) {
	for try := 0; ; try++ {
		bc.ResetSeq()
		if err := bc.WritePacketFlush(p); err != nil {
			return nil, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
		}
		first, err := bc.ReadPacket()
		if err != nil || try > 0 || !protocol.IsErr(first) {
			if err != nil {
				err = fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
			}
			return first, err
		}
		if e, _ := protocol.ParseErr(first); !bc.evictAllFor(e) {
			return first, nil
		}
	}
}

// prepareOn returns st as prepared on bc, preparing it there first (as
// the physical text variant when that is not "") when bc has not cached
// it yet; the server's metadata is read and dropped (the client has it
// already).
func (s *Session) prepareOn(bc *BackendConn, st *preparedStmt, variant string) (*backendStmt, error) {
	key := stmtKey{text: stmtHandle(st, variant), state: st.state}
	if bs := bc.stmts.get(key); bs != nil {
		return bs, nil
	}
	switched, err := s.prepareState(bc, st)
	if err != nil {
		return nil, err
	}
	if !switched {
		// Prepared under the session's current state instead (see
		// prepareState), it is cached as that.
		key.state = s.state()
		if bs := bc.stmts.get(key); bs != nil {
			return bs, nil
		}
	}
	bs, err := s.prepareUnder(bc, st, variant, key)
	if switched {
		if e := s.stateBack(bc, st); e != nil && err == nil {
			return nil, e
		}
	}
	return bs, err
}

// prepareUnder prepares st on bc in st's schema and caches it as key.
// When the server has reached its max_prepared_stmt_count, bc's cached
// statements are closed and the prepare is tried once more: they are
// sluice's, and a server would have prepared the client's statement.
func (s *Session) prepareUnder(bc *BackendConn, st *preparedStmt, variant string, key stmtKey) (*backendStmt, error) {
	sql := st.sql
	if variant != "" {
		sql = variant
	}
	bc.makeRoom(key, s.env.config().Proxy.BackendStatementCache)
	restore, err := s.prepareSchema(bc, st)
	if err != nil {
		return nil, err
	}
	var ok protocol.PrepareOK
	for try := 0; ; try++ {
		bc.ResetSeq()
		if err := bc.WritePacketFlush(bc.command(protocol.ComStmtPrepare, sql)); err != nil {
			bc.broken = true
			return nil, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
		}
		first, err := bc.ReadPacket()
		if err != nil {
			bc.broken = true
			return nil, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
		}
		if protocol.IsErr(first) {
			e, _ := protocol.ParseErr(first)
			if try == 0 && bc.evictAllFor(e) {
				continue
			}
			if err := s.schemaBack(bc, restore); err != nil {
				return nil, err
			}
			return nil, e
		}
		if ok, err = protocol.ParsePrepareOK(first); err != nil {
			bc.broken = true
			return nil, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
		}
		break
	}
	if err := protocol.DiscardPackets(bc.Conn, ok.PrepareMetadataPackets(false)); err != nil {
		bc.broken = true
		return nil, err
	}
	if err := s.schemaBack(bc, restore); err != nil {
		return nil, err
	}
	if int(ok.Params) != st.params || st.shard != nil && variant != "" && int(ok.Columns) != st.columns {
		// The statement means something else here (a table changed):
		// executing it with the client's parameters would be wrong. Under
		// sharding another physical text (the rules changed) must also
		// give the result columns the client was told of.
		bc.closeStmt(ok.StatementID)
		return nil, protocol.ERNeedReprepare.New("Prepared statement needs to be re-prepared: %s %s has %d parameters and %d result columns for it, the client prepared %d and %d",
			bc.backend.Role, bc.backend.Address, ok.Params, ok.Columns, st.params, st.columns)
	}
	return bc.addStmt(key, ok.StatementID), nil
}

// prepareSchema makes st's schema bc's current one for preparing it, when
// the session has moved to another since it prepared st: unqualified
// tables keep naming the schema of the PREPARE, as on a server. It returns
// the schema to go back to, or "".
func (s *Session) prepareSchema(bc *BackendConn, st *preparedStmt) (string, error) {
	if st.schema == "" || bc.schema == st.schema {
		return "", nil
	}
	back := bc.schema
	if err := bc.simpleCommand(bc.command(protocol.ComInitDB, st.schema), protocol.ResponseSingle); err != nil {
		var se *protocol.SQLError
		if st.plan.NoTables && errors.As(err, &se) && !bc.broken {
			// The schema is gone (or closed to the service account),
			// and the statement names no table: a server runs it all
			// the same.
			return "", nil
		}
		return "", err
	}
	bc.schema = st.schema
	return back, nil
}

// schemaBack undoes prepareSchema.
func (s *Session) schemaBack(bc *BackendConn, back string) error {
	if back == "" {
		return nil
	}
	if err := bc.simpleCommand(bc.command(protocol.ComInitDB, back), protocol.ResponseSingle); err != nil {
		bc.broken = true // its schema is not the session's
		return err
	}
	bc.schema = back
	return nil
}

// lookupStmt finds the client's statement of a command packet, answering
// ERR 1243 for an unknown id (or a truncated packet) when answer is set.
func (s *Session) lookupStmt(p []byte, answer bool) (*preparedStmt, error) {
	id, err := protocol.StmtID(p)
	if err == nil {
		if st := s.stmts[id]; st != nil {
			return st, nil
		}
	}
	if answer {
		return nil, s.client.WriteErr(protocol.ERUnknownStmtHandler.New("Unknown prepared statement handler (%d) given to %s", id, protocol.CommandName(p[0])))
	}
	return nil, nil
}

// comStmtExecute runs a prepared statement on the backend its plan routes
// to, preparing it there first if needed, sending buffered long data, and
// re-sending parameter types a backend has not seen.
func (s *Session) comStmtExecute(p []byte) error {
	st, err := s.lookupStmt(p, true)
	if st == nil {
		return err
	}
	s.rec.plan, s.rec.sql = st.plan, st.sql
	defer s.catalogFence(st.plan)()
	// Executions count in SHOW QUERY DIGESTS under the prepared text's
	// digest, as text statements do.
	s.beginStatement(st.plan)
	s.info.setTextString(st.sql)
	if e := st.longDataErr; e != nil {
		st.clearLongData()
		return s.client.WriteErr(e)
	}
	if e := s.allowedPrepared(st.plan); e != nil {
		// Grants changed since the PREPARE (MariaDB checks each
		// execution).
		st.clearLongData()
		s.noteResult(protocol.RelayResult{Err: e})
		return s.client.WriteErr(e)
	}
	ex, err := protocol.ParseExecute(p, st.params, st.types, st.hasLongData)
	if err != nil {
		st.clearLongData()
		return s.client.WriteErr(protocol.ERWrongArguments.New("Incorrect arguments to mysqld_stmt_execute: %v", err))
	}
	if ex.NewParamsBound {
		st.types = append(st.types[:0], ex.Types...)
		st.typesVersion++
	}
	// A new execute closes the statement's open cursor (the server does
	// when it runs the statement again).
	s.endCursor(st, true)
	defer st.clearLongData()
	variant := ""
	if st.shard != nil {
		if e := s.currentTemplate(st); e != nil {
			s.noteResult(protocol.RelayResult{Err: e})
			return s.client.WriteErr(e)
		}
		part, done, err := s.shardExecute(p, st, ex)
		if done {
			return err
		}
		if part.SQL != st.sql {
			variant = part.SQL
		}
	}
	if sc := st.plan.Scoped; sc != nil && sc.Uses&(router.ScopedConnID|router.ScopedIdentity) != 0 && variant == "" {
		variant = s.connIDText(st)
	}
	var after func(*BackendConn, protocol.RelayResult)
	if st.plan.Kind == router.KindSet && !s.lexDoubt(st.plan) {
		// A SET run as a prepared statement changes the session as the
		// text one does; its parameters' values are read back.
		after = s.afterSet(st.plan)
	} else if s.releases(st.plan) {
		after = s.afterRelease
	}
	back, refused, rerr := s.executeRules(st, p, ex)
	if refused {
		return rerr
	}
	if back >= 0 {
		defer s.useCluster(back)
	}
	target := s.ruleTarget(st.ruleSet, &st.rule, st.plan, s.route(st.plan))
	s.noteWrites(st.plan, s.lexDoubt(st.plan), st.schema)
	if st.rule.CacheTTL > 0 && after == nil {
		if done, err := s.cachedExecute(st, p, ex, variant, st.rule.CacheTTL); done {
			return err
		}
	}
	err = s.executeOn(target, st, p, ex, variant, after)
	if err == nil && s.replay.quit {
		return errQuit
	}
	return err
}

// executeOn runs the execution p of st (parsed as ex) on a backend of
// target: prepared there first if needed, with its long data and the
// parameter types the backend has not seen.
func (s *Session) executeOn(target router.Target, st *preparedStmt, p []byte, ex protocol.Execute, variant string,
	after func(*BackendConn, protocol.RelayResult)) error {
	clientSeq := s.client.Seq()
	return s.exchange(target, func(bc *BackendConn) (protocol.RelayResult, error) {
		// Prepared first: preparing it under its own state may reset bc.
		bs, err := s.prepareOn(bc, st, variant)
		if err != nil {
			return protocol.RelayResult{}, err
		}
		if sc := st.plan.Scoped; sc != nil && (sc.SetsLastInsertID || sc.Uses&router.ScopedLastInsertID != 0) || invisibleLID(st.plan, false) {
			// The statement is prepared once per connection: the
			// session's value is set on the connection instead.
			if err := s.primeLID(bc); err != nil {
				return protocol.RelayResult{}, err
			}
		}
		if err := s.sendLongData(bc, st, bs.id); err != nil {
			return protocol.RelayResult{}, err
		}
		pkt := p
		if st.params > 0 && !ex.NewParamsBound && (bs.typesOwner != st || bs.typesVersion != st.typesVersion) {
			s.scratch = protocol.AppendExecuteWithTypes(s.scratch, p, ex, st.params, st.types)
			pkt = s.scratch
		}
		protocol.SetStmtID(pkt, bs.id)
		res, err := s.send(bc, pkt, clientSeq, protocol.ResponseExecute)
		if err == nil {
			bs.typesOwner, bs.typesVersion = st, st.typesVersion
			if res.Status&protocol.StatusCursorExists != 0 {
				// The session stays on bc until the cursor ends.
				bc.detach(bs)
				st.cursor, st.cursorStmt = bc, bs
				s.cursors++
			}
		}
		return res, err
	}, after)
}

// currentTemplate makes st's sharding template the one the running rules
// make of its text: RELOAD CONFIG may have changed the rules since it was
// prepared, and key-column types learnt since change what a template
// checks (the rules' template cache is emptied then). The text, and so the
// parameters the client was told of, stay; each backend connection
// prepares the physical text the new template gives when it first runs it,
// and refuses it (1615) if the server's parameters or columns for it are
// not those the client was told. A cache hit costs no allocation.
func (s *Session) currentTemplate(st *preparedStmt) *protocol.SQLError {
	rules := s.env.shards()
	if rules == nil {
		// Sharding is off now: the client's text runs as it is.
		st.shard = nil
		return nil
	}
	tpl, err := rules.PrepareMode(st.schema, st.sql, st.shard.Mode())
	if err != nil {
		return shardError(err)
	}
	if tpl == st.shard {
		return nil
	}
	if tpl.Local() != shard.LocalNone {
		return protocol.ERNeedReprepare.New("Prepared statement needs to be re-prepared: the sharding rules changed since it was prepared")
	}
	st.shard = tpl
	return nil
}

// sendLongData replays the buffered COM_STMT_SEND_LONG_DATA chunks to bc.
func (s *Session) sendLongData(bc *BackendConn, st *preparedStmt, backendID uint32) error {
	for param, data := range st.longData {
		s.scratch = append(s.scratch[:0], protocol.ComStmtSendLongData, 0, 0, 0, 0, byte(param), byte(param>>8))
		binary.LittleEndian.PutUint32(s.scratch[1:], backendID)
		s.scratch = append(s.scratch, data...)
		bc.ResetSeq()
		if err := bc.WritePacket(s.scratch); err != nil {
			return fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
		}
	}
	return nil
}

func (st *preparedStmt) hasLongData(i int) bool {
	_, ok := st.longData[i]
	return ok
}

func (st *preparedStmt) clearLongData() {
	st.longData, st.longDataSize, st.longDataErr = nil, 0, nil
}

// comStmtSendLongData buffers a parameter chunk; the protocol has no answer,
// so problems are reported by the next execute, as the server does.
func (s *Session) comStmtSendLongData(p []byte) error {
	st, _ := s.lookupStmt(p, false)
	if st == nil || st.longDataErr != nil {
		return nil
	}
	if len(p) < 7 {
		st.longDataErr = protocol.ERWrongArguments.New("Incorrect arguments to mysqld_stmt_send_long_data: packet of %d bytes", len(p))
		return nil
	}
	param := int(binary.LittleEndian.Uint16(p[5:]))
	if param >= st.params {
		st.longDataErr = protocol.ERWrongArguments.New("Incorrect arguments to mysqld_stmt_send_long_data: parameter %d of a statement with %d", param, st.params)
		return nil
	}
	st.longDataSize += int64(len(p) - 7)
	if st.longDataSize > s.env.config().Proxy.MaxAllowedPacket {
		st.longDataErr = protocol.ERNetPacketTooLarge.New("Parameter data sent with COM_STMT_SEND_LONG_DATA exceeds max_allowed_packet (%d bytes)", s.env.config().Proxy.MaxAllowedPacket)
		st.longData = nil
		return nil
	}
	if st.longData == nil {
		st.longData = make(map[int][]byte)
	}
	st.longData[param] = append(st.longData[param], p[7:]...)
	return nil
}

// comStmtFetch reads rows from the statement's open cursor, on the backend
// connection that holds it.
func (s *Session) comStmtFetch(p []byte) error {
	st, err := s.lookupStmt(p, true)
	if st == nil {
		return err
	}
	bc := st.cursor
	if bc == nil || len(p) != 9 {
		return s.client.WriteErr(protocol.ERStmtHasNoOpenCursor.New("The statement (%d) has no open cursor.", st.id))
	}
	protocol.SetStmtID(p, st.cursorStmt.id)
	res, err := s.send(bc, p, s.client.Seq(), protocol.ResponseRows)
	if err != nil {
		s.endCursor(st, false)
		return s.backendLost(bc, err, "COM_STMT_FETCH")
	}
	if res.Status&protocol.StatusLastRowSent != 0 || res.Err != nil {
		s.endCursor(st, true)
	}
	return nil
}

// comStmtReset clears long data and closes an open cursor.
func (s *Session) comStmtReset(p []byte) error {
	st, err := s.lookupStmt(p, true)
	if st == nil {
		return err
	}
	st.clearLongData()
	if bc := st.cursor; bc != nil {
		protocol.SetStmtID(p, st.cursorStmt.id)
		_, err := s.send(bc, p, s.client.Seq(), protocol.ResponseSingle)
		s.endCursor(st, err == nil)
		if err != nil {
			return s.backendLost(bc, err, "COM_STMT_RESET")
		}
		return nil
	}
	return s.writeOK()
}

// comStmtClose forgets a statement; the backend connections keep what they
// prepared for it in their caches, for any session. The protocol has no
// answer.
func (s *Session) comStmtClose(p []byte) error {
	st, _ := s.lookupStmt(p, false)
	if st == nil {
		return nil
	}
	delete(s.stmts, st.id)
	if bc := st.cursor; bc != nil {
		s.endCursor(st, false)
		s.dropIfBroken(bc)
	}
	s.freeStmt(st)
	return nil
}

// forgetConn drops what the session's statements know about bc, which is
// leaving the session: an open cursor there is closed.
func (s *Session) forgetConn(bc *BackendConn) {
	if s.diagFrom == bc {
		s.diagFrom = nil
	}
	if s.cursors == 0 {
		return
	}
	for _, st := range s.stmts {
		if st.cursor == bc {
			s.endCursor(st, false)
		}
	}
}

// newStmt takes a preparedStmt from the session's free list, or a new one.
func (s *Session) newStmt() *preparedStmt {
	if n := len(s.freeStmts); n > 0 {
		st := s.freeStmts[n-1]
		s.freeStmts = s.freeStmts[:n-1]
		return st
	}
	return &preparedStmt{}
}

// freeStmt keeps a closed statement, and its types buffer, for the next
// prepare (drivers that prepare, execute and close per query).
func (s *Session) freeStmt(st *preparedStmt) {
	if len(s.freeStmts) < 16 {
		// The versions go on from the last one: a backend statement
		// whose types this struct bound in its last life must not pass
		// for one bound in the next.
		*st = preparedStmt{types: st.types[:0], typesVersion: st.typesVersion + 1}
		s.freeStmts = append(s.freeStmts, st)
	}
}
