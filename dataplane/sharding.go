package dataplane

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/shard"
)

// This file runs statements under sharding ([[shard]] / [[broadcast]]
// rules): the shard package says where a statement goes (a Route), the
// session runs it there. A Route with one Part makes that Part's cluster
// the session's active one and takes the ordinary path (pooled
// connections, replicas, failover); writes with several Parts and
// scatter-gather reads are run here.
//
// Transactions: BEGIN is answered by sluice and sent to a cluster's master
// when the transaction first touches that cluster; it may read from any
// number of clusters but write to one only (a second gets ERR 1235, before
// anything is sent), so COMMIT commits at most one cluster with changes.

// shardQuery routes one COM_QUERY under sharding. It returns the packet the
// ordinary path should forward, after making its cluster the active one,
// with handled false; or handled true once it answered the client itself.
func (s *Session) shardQuery(p []byte, plan *router.Plan, sql string) ([]byte, bool, error) {
	s.scoped.resolved = false
	switch plan.Kind {
	case router.KindTxn:
		return nil, true, s.shardTxn(p, plan, sql)
	case router.KindUse:
		s.useCluster(s.env.defaultCluster())
		return p, false, nil
	}
	mode := s.shardMode()
	if e := s.stopped(); e != nil {
		return nil, true, s.client.WriteErr(e)
	}
	if s.shardOpaque(plan, sql, mode) {
		// The parser's reading may differ from the server's: it cannot
		// place a text that may name a sharded table.
		if err := s.env.shards().CheckOpaque(sql); err != nil {
			return nil, true, s.refuseShard(err)
		}
	}
	if plan.Kind == router.KindSet || plan.ParseErr != nil && mode == 0 {
		// The default cluster runs it as it is (and reports a syntax
		// error), unless it may reach a sharded table: then no one cluster
		// can answer it. (The router parses under the default sql_mode;
		// under another one PrepareMode parses the text as the session's
		// server reads it.)
		if err := s.env.shards().CheckDefault(s.schema, sql, mode); err != nil {
			return nil, true, s.refuseShard(err)
		}
		s.useCluster(s.env.defaultCluster())
		return p, false, nil
	}
	if plan.Scoped != nil && !plan.Scoped.SetsLastInsertID && !invisibleLID(plan, false) {
		// Each Part runs on a pooled connection holding another session's
		// values: the text gets the session's own before it is parsed,
		// routed and cut into Parts.
		if q, ok := s.shardScopedText(plan.Scoped, p); ok {
			p, sql = q, string(q[1:])
			s.scoped.resolved = true
		}
	}
	tpl, err := s.env.shards().PrepareMode(s.schema, sql, mode)
	if err != nil {
		return nil, true, s.refuseShard(err)
	}
	if tpl.Local() == shard.LocalNextID {
		return nil, true, s.answerNextID(tpl)
	}
	route, err := tpl.RouteFor(nil, s.clientCharset())
	if err == nil {
		route, err = s.userVarRoute(tpl, route)
	}
	if err == nil && plan.Scoped != nil && !s.scoped.resolved && !oneOrdinaryPart(s, route, sql) {
		err = scopedRefusal(plan.Scoped)
	}
	if err != nil {
		return nil, true, s.refuseShard(err)
	}
	return s.runRoute(p, plan, sql, route, nil)
}

// oneOrdinaryPart reports whether route runs sql as it is on one cluster,
// through the ordinary path: there scopedText gives the statement the
// session's values on the connection that runs it, as without sharding.
func oneOrdinaryPart(s *Session, route *shard.Route, sql string) bool {
	return route.Rename == nil && (len(route.Parts) == 1 || route.AnyOne) && s.pickPart(route).SQL == sql
}

// scopedRefusal is the error for a statement that reads or sets a value of
// the client's own connection and would run on shards, where sluice cannot
// give it the session's value.
func scopedRefusal(sc *router.Scoped) error {
	var names []string
	if sc.SetsLastInsertID {
		names = append(names, "LAST_INSERT_ID(expr)")
	}
	for _, f := range [...]struct {
		f    router.ScopedFunc
		name string
	}{{router.ScopedLastInsertID, "LAST_INSERT_ID()"}, {router.ScopedRowCount, "ROW_COUNT()"},
		{router.ScopedFoundRows, "FOUND_ROWS()"}, {router.ScopedConnID, "CONNECTION_ID()"}} {
		if sc.Uses&f.f != 0 {
			names = append(names, f.name)
		}
	}
	return fmt.Errorf("%w: the statement uses %s of the client's own connection and runs on shards, where sluice cannot give it the session's value; pass the value as a literal or a parameter",
		shard.ErrUnsupported, strings.Join(names, ", "))
}

// shardScopedText returns the COM_QUERY packet p with the session's own
// values in place of every read of a connection-scoped value (see
// scoped.go), whichever connections its Parts will run on. It reports
// false when it cannot: a value sluice does not know exactly, or reads the
// text cannot replace.
func (s *Session) shardScopedText(sc *router.Scoped, p []byte) ([]byte, bool) {
	if !sc.Rewritable {
		return nil, false
	}
	sv := &s.scoped
	if sv.prevStale && !s.readBackPrevious() && sc.Uses&(router.ScopedRowCount|router.ScopedFoundRows) != 0 {
		return nil, false
	}
	if sc.Uses&router.ScopedLastInsertID != 0 {
		// After an INSERT that gave its AUTO_INCREMENT column explicit
		// values the OK packet's id is not LAST_INSERT_ID(): a held
		// connection with the session's value is the exact source.
		learnt := false
		var holder *BackendConn
		s.heldConns(func(bc *BackendConn) bool {
			if !s.holdsLID(bc) {
				return false
			}
			holder, learnt = bc, s.learnLID(bc) == nil
			if s.ranPrevious(bc) {
				// Its ROW_COUNT() is now the read's, no longer the
				// session's previous statement's.
				bc.prevSid = 0
			}
			return true
		})
		s.dropIfBroken(holder)
		if sv.lidStale && !learnt {
			return nil, false
		}
	}
	v := router.ScopedValues{ConnID: uint64(s.id), LastInsertID: s.lastInsertID, RowCount: s.rowCount,
		FoundRows: sv.foundRows, Refs: sv.refs}
	s.identity(&v, sc.Uses)
	buf := append(sv.shardBuf[:0], protocol.ComQuery)
	buf, ok := sc.Rewrite(buf, p[1:], &v)
	sv.shardBuf, sv.refs = buf, v.Refs
	return buf, ok
}

// refuseShard answers the client with the ERR of a planning error and
// notes it as the statement's result.
func (s *Session) refuseShard(err error) error {
	e := shardError(err)
	s.noteResult(protocol.RelayResult{Err: e})
	return s.client.WriteErr(e)
}

// userVarRoute checks a Route of a statement that reads or assigns a user
// variable: the variable exists only on the session's connection to the
// default cluster, so the statement may run there alone. A broadcast read
// is narrowed to the default cluster's copy; any other Route reaching
// another cluster, or several Parts, is refused naming the variable.
func (s *Session) userVarRoute(tpl *shard.Template, route *shard.Route) (*shard.Route, error) {
	v := tpl.UserVar()
	if v == "" {
		return route, nil
	}
	def := s.env.defaultCluster()
	if route.AnyOne {
		for i := range route.Parts {
			if route.Parts[i].Cluster == def {
				return &shard.Route{Parts: route.Parts[i : i+1], Write: route.Write}, nil
			}
		}
	}
	if len(route.Parts) == 1 && route.Parts[0].Cluster == def {
		return route, nil
	}
	names := s.env.shards().Clusters()
	where := "cluster " + names[route.Parts[0].Cluster]
	if len(route.Parts) > 1 {
		where = fmt.Sprintf("%d shards", len(route.Parts))
	}
	return nil, fmt.Errorf("%w: the statement uses user variable %s, which exists on the default cluster %s only, and would run on %s; pass the value as a literal or a parameter",
		shard.ErrUnsupported, v, names[def], where)
}

// shardOpaque reports whether the parser may read sql otherwise than the
// server under the session's sql_mode mode and character set, for reasons
// the sharding rewrite does not check itself: several statements, a /*T!,
// /*M! or versioned /*! comment, a byte the lexers disagree on where this mode reads code, or
// non-ASCII text in a character set the parser does not follow. A text
// the router could not parse under the default sql_mode is not: the
// rewrite parses it under the session's.
func (s *Session) shardOpaque(plan *router.Plan, sql string, mode shard.SQLMode) bool {
	if plan.ParseErr != nil {
		return false
	}
	if plan.Multi || plan.TiDBComment || plan.NonASCII && s.unsafeCharset() {
		return true
	}
	if !plan.Hazard {
		return false
	}
	if mode&shard.ModeUnsure != 0 {
		return true
	}
	var m router.LexModes
	if mode&shard.ModeNoBackslashEscapes != 0 {
		m |= router.LexNoBackslashEscapes
	}
	if mode&shard.ModeANSIQuotes != 0 {
		m |= router.LexANSIQuotes
	}
	return router.HazardUnder(sql, m)
}

// shardMode is the session's sql_mode as the sharding rewrite takes it:
// the flags that change how the server reads a statement, or ModeUnsure
// while they are not known or the parser cannot follow them (ORACLE). A
// session that has not set sql_mode runs each cluster's statements under
// that cluster's global one: the probes' readings of every server, which
// must agree. Until the first probe round has read them (just after
// start-up) the session waits for it, for two probe intervals and at least
// 5 s, before it gives up (ModeUnsure).
func (s *Session) shardMode() shard.SQLMode {
	m := s.lexModes()
	if !s.lex.modesSet {
		var known bool
		if m, known = s.shardGlobalModes(); !known {
			cfg := s.env.config().Health
			deadline := time.Now().Add(max(5*time.Second, 2*cfg.Interval.Duration+2*cfg.Timeout.Duration))
			// Only the first probe round may still be reading them: a
			// server down or clusters that disagree after it are an
			// answer (ModeUnsure), not a reason to wait on every
			// statement.
			if s.env.topo.Round() < 1 && s.task.Detach() {
				// Off the event loop while it waits: the loop's other
				// sessions go on.
				defer s.task.Attach()
			}
			for !known && s.env.topo.Round() < 1 && time.Now().Before(deadline) && s.cmd.Err() == nil {
				time.Sleep(10 * time.Millisecond) // the probe round has no event to wait on
				m, known = s.shardGlobalModes()
			}
			if !known {
				return shard.ModeUnsure
			}
		}
		if s.lastStatus&protocol.StatusNoBackslashEscape != 0 {
			m |= router.LexNoBackslashEscapes
		}
	}
	if m&router.LexOracle != 0 {
		return shard.ModeUnsure
	}
	var sm shard.SQLMode
	if m&router.LexANSIQuotes != 0 {
		sm |= shard.ModeANSIQuotes
	}
	if m&router.LexNoBackslashEscapes != 0 {
		sm |= shard.ModeNoBackslashEscapes
	}
	if m&router.LexPipesAsConcat != 0 {
		sm |= shard.ModePipesAsConcat
	}
	if m&router.LexHighNotPrecedence != 0 {
		sm |= shard.ModeHighNotPrecedence
	}
	return sm
}

// shardGlobalModes returns the lexing flags of the global sql_mode of
// every server of every cluster, known when the probes have read each and
// they agree; the answer is kept for the probe round.
func (s *Session) shardGlobalModes() (router.LexModes, bool) {
	round := s.env.topo.Round()
	if s.lex.shardKnown && round == s.lex.shardRound {
		return s.lex.shardModes, true
	}
	var first router.LexModes
	for i, c := range s.env.topo.Current().Clusters {
		m, known := globalModes(c)
		if !known || i > 0 && m != first {
			s.lex.shardKnown = false
			return 0, false
		}
		first = m
	}
	s.lex.shardModes, s.lex.shardRound, s.lex.shardKnown = first, round, true
	return first, true
}

// answerNextID answers SELECT NEXT_ID('table'[, key]) with a new global id.
func (s *Session) answerNextID(tpl *shard.Template) error {
	id, err := tpl.NextID(nil, s.clientCharset())
	if err != nil {
		return s.client.WriteErr(shardError(err))
	}
	v := strconv.AppendInt(s.scratch2[:0], id, 10)
	s.scratch2 = v
	s.scratch, err = protocol.WriteSingleValue(s.client, s.scratch, tpl.LocalColumn(), protocol.TypeLongLong,
		protocol.FlagNotNull|protocol.FlagBinary, 20, v, s.status())
	return err
}

// runRoute runs a Route of a text statement (prepared is nil) or of a
// prepared statement's execution whose Parts must run as text with the
// parameters written in (prepared is the statement; its results go to the
// client in the binary protocol).
func (s *Session) runRoute(p []byte, plan *router.Plan, sql string, route *shard.Route, prepared *preparedStmt) ([]byte, bool, error) {
	s.noteShardRoute(route)
	if route.Write {
		if e := s.checkTxnWrite(route, plan); e != nil {
			return nil, true, s.client.WriteErr(e)
		}
	}
	if route.Rename != nil {
		return nil, true, s.scatter(plan, route, prepared != nil)
	}
	if prepared == nil && (len(route.Parts) == 1 || route.AnyOne) {
		part := s.pickPart(route)
		s.useCluster(part.Cluster)
		if route.Write {
			s.pendingTxWrite = part.Cluster
		}
		if part.SQL == sql {
			return p, false, nil
		}
		s.shardPkt = append(append(s.shardPkt[:0], protocol.ComQuery), part.SQL...)
		return s.shardPkt, false, nil
	}
	if route.Write {
		return nil, true, s.writeParts(route)
	}
	return nil, true, s.scatter(plan, route, prepared != nil)
}

// pickPart chooses the Part of a one-Part route, or of a broadcast read the
// one on the active cluster when there is one (its connection may be held
// already), else the default cluster's, else the first.
func (s *Session) pickPart(route *shard.Route) *shard.Part {
	if !route.AnyOne {
		return &route.Parts[0]
	}
	best := &route.Parts[0]
	for i := range route.Parts {
		switch route.Parts[i].Cluster {
		case s.clusterIdx:
			return &route.Parts[i]
		case s.env.defaultCluster():
			best = &route.Parts[i]
		}
	}
	return best
}

// checkTxnWrite refuses, inside a transaction, a write that would make the
// transaction change a second cluster: without distributed transactions
// its COMMIT could not be atomic.
func (s *Session) checkTxnWrite(route *shard.Route, plan *router.Plan) *protocol.SQLError {
	if !s.inTransaction() {
		return nil
	}
	names := s.env.shards().Clusters()
	c := route.Parts[0].Cluster
	for _, pt := range route.Parts[1:] {
		if pt.Cluster != c {
			return protocol.ERNotSupportedYet.New("sluice: inside a transaction a statement may write to one cluster only, and this one writes to clusters %s and %s (distributed transactions are not supported yet); run it outside the transaction: %s",
				names[c], names[pt.Cluster], plan.Digest)
		}
	}
	if s.txWrites >= 0 && s.txWrites != c {
		return protocol.ERNotSupportedYet.New("sluice: this transaction already wrote to cluster %s and cannot also write to cluster %s (distributed transactions are not supported yet); COMMIT or ROLLBACK first: %s",
			names[s.txWrites], names[c], plan.Digest)
	}
	return nil
}

// shardTxn handles transaction control under sharding.
func (s *Session) shardTxn(p []byte, plan *router.Plan, sql string) error {
	switch plan.Txn {
	case router.TxnBegin:
		// BEGIN inside a transaction commits it first, as on a server.
		if e := s.endTxnQuietly("COMMIT"); e != nil {
			return s.client.WriteErr(e)
		}
		s.txBegin = strings.Clone(sql)
		s.txWrites = -1
		return s.writeOK()
	case router.TxnEnd:
		s.txBegin = ""
		s.txWrites = -1
		s.txSavepoints = s.txSavepoints[:0]
		legs := s.legsInTxn()
		if len(legs) == 0 {
			return s.writeOK()
		}
		last := legs[len(legs)-1]
		for _, i := range legs[:len(legs)-1] {
			s.useCluster(i)
			s.txBegun = false
			if _, err := s.master.execOK(sql); err != nil {
				s.dropIfBroken(s.master)
				s.useCluster(last)
				return s.client.WriteErr(protocol.ERUnknownError.New("sluice: %s failed on cluster %s: %v", plan.Digest, s.cluster.Name, err))
			}
			s.absorbGTID(s.master)
		}
		s.useCluster(last)
		s.txBegun = false
		return s.forward(router.TargetMaster, p, protocol.ResponseResult, nil)
	}
	// SAVEPOINT, RELEASE / ROLLBACK TO SAVEPOINT, XA: every cluster the
	// transaction touched. A savepoint is also kept and set on each
	// cluster the transaction reaches later, so a ROLLBACK TO it works
	// wherever the transaction wrote.
	legs := s.legsInTxn()
	if plan.Txn == router.TxnSavepoint && s.inTransaction() {
		s.txSavepoints = append(s.txSavepoints, strings.Clone(sql))
		if len(legs) == 0 {
			return s.writeOK()
		}
	}
	if len(legs) == 0 {
		s.useCluster(s.env.defaultCluster())
		return s.forward(router.TargetMaster, p, protocol.ResponseResult, nil)
	}
	last := legs[len(legs)-1]
	for _, i := range legs[:len(legs)-1] {
		s.useCluster(i)
		if _, err := s.master.execOK(sql); err != nil {
			s.dropIfBroken(s.master)
			s.useCluster(last)
			return s.client.WriteErr(partError(err, s.cluster.Name))
		}
	}
	s.useCluster(last)
	return s.forward(router.TargetMaster, p, protocol.ResponseResult, nil)
}

// endTxnQuietly sends end (COMMIT) to every cluster holding the session's
// transaction without answering the client.
func (s *Session) endTxnQuietly(end string) *protocol.SQLError {
	s.txBegin = ""
	s.txWrites = -1
	s.txSavepoints = s.txSavepoints[:0]
	for _, i := range s.legsInTxn() {
		s.useCluster(i)
		s.txBegun = false
		if _, err := s.master.execOK(end); err != nil {
			s.dropIfBroken(s.master)
			return protocol.ERUnknownError.New("sluice: %s failed on cluster %s: %v", end, s.cluster.Name, err)
		}
		s.absorbGTID(s.master)
	}
	return nil
}

// writeParts runs a write with several Parts and answers one OK whose
// affected rows are the Parts' sum. Outside a transaction each cluster's
// Parts run in a transaction of their own, committed only when every Part
// succeeded, so a failing Part (a duplicate key, say) leaves nothing
// written anywhere.
func (s *Session) writeParts(route *shard.Route) error {
	implicit := !s.inTransaction()
	var total protocol.OK
	var failed *protocol.SQLError
	for i := range route.Parts {
		pt := &route.Parts[i]
		bc, err := s.masterFor(pt.Cluster)
		if err == nil && implicit && !s.txBegun {
			err = bc.simpleCommand(bc.command(protocol.ComQuery, "BEGIN"), protocol.ResponseResult)
			if err == nil {
				s.txBegun = true
			}
		}
		var ok protocol.OK
		if err == nil {
			ok, err = bc.execOK(pt.SQL)
		}
		if err != nil {
			if bc != nil {
				s.dropIfBroken(bc)
			}
			failed = partError(err, s.cluster.Name)
			break
		}
		// A broadcast table's copies change alike: the client sees one
		// copy's count, as from one table.
		if pt.Shards != nil || i == 0 {
			total.AffectedRows += ok.AffectedRows
			total.Warnings += ok.Warnings
		}
		// LAST_INSERT_ID() is the id of the statement's first row.
		if i == route.FirstRow || total.LastInsertID == 0 && i < route.FirstRow {
			total.LastInsertID = ok.LastInsertID
		}
		s.absorbGTID(bc)
	}
	if implicit {
		end := "COMMIT"
		if failed != nil {
			end = "ROLLBACK"
		}
		for _, i := range s.legsInTxn() {
			s.useCluster(i)
			s.txBegun = false
			_, err := s.master.execOK(end)
			s.absorbGTID(s.master)
			if err != nil {
				s.dropIfBroken(s.master)
				if failed == nil {
					failed = protocol.ERUnknownError.New("sluice: COMMIT of a write over several shards failed on cluster %s (other clusters may have committed): %v", s.cluster.Name, err)
				}
			}
		}
	} else if failed == nil {
		s.txWrites = route.Parts[0].Cluster
	}
	if failed != nil {
		s.noteResult(protocol.RelayResult{Err: failed})
		return s.client.WriteErr(failed)
	}
	s.noteResult(protocol.RelayResult{OK: total})
	total.Status = s.status()
	s.scratch = protocol.AppendOK(s.scratch[:0], total)
	return s.client.WritePacketFlush(s.scratch)
}

// partError turns a Part's failure into the client's ERR: the server's own
// error as it is, anything else as a lost connection naming the cluster.
func partError(err error, cluster string) *protocol.SQLError {
	var se *protocol.SQLError
	if errors.As(err, &se) {
		return se
	}
	return protocol.CRServerLost.New("Lost connection to cluster %s during query: %v", cluster, err)
}

// execOK runs a statement that answers with OK or ERR on bc.
func (bc *BackendConn) execOK(sql string) (protocol.OK, error) {
	bc.ResetSeq()
	if err := bc.WritePacketFlush(bc.command(protocol.ComQuery, sql)); err != nil {
		bc.broken = true
		return protocol.OK{}, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	p, err := bc.ReadPacket()
	if err != nil {
		bc.broken = true
		return protocol.OK{}, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	switch {
	case protocol.IsErr(p):
		se, err := protocol.ParseErr(p)
		if err != nil {
			bc.broken = true
			return protocol.OK{}, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
		}
		return protocol.OK{}, se
	case protocol.IsOK(p):
		ok, err := protocol.ParseOK(p)
		if err != nil {
			bc.broken = true
			return ok, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
		}
		bc.status = ok.Status
		bc.NoteTrackedGTID(p)
		return ok, nil
	}
	// A result set where an OK was due (INSERT ... RETURNING): the
	// connection is mid-result; drop it rather than read it.
	bc.broken = true
	return protocol.OK{}, protocol.ERNotSupportedYet.New("sluice: a write over several shards returned rows (RETURNING is not supported over shards)")
}

// shardExecute routes one execution of a prepared statement by its
// parameter values. When a single Part takes the client's packet as it is
// it makes that Part's cluster active and returns the Part for the ordinary
// path (done false); otherwise it runs the execution itself, the values
// written into each Part's text, and returns done true.
func (s *Session) shardExecute(p []byte, st *preparedStmt, ex protocol.Execute) (*shard.Part, bool, error) {
	args, types := s.args[:0], s.argTypes[:0]
	s.argText = s.argText[:0]
	err := protocol.ExecuteParams(p, ex, st.params, st.types, func(i int) ([]byte, bool) {
		d, ok := st.longData[i]
		return d, ok
	}, func(i int, v protocol.Param) error {
		args = append(args, paramValue(v, &s.argText))
		types = append(types, paramType(v.Type))
		return nil
	})
	s.args, s.argTypes = args, types
	if err != nil {
		return nil, true, s.client.WriteErr(protocol.ERWrongArguments.New("Incorrect arguments to mysqld_stmt_execute: %v", err))
	}
	route, err := st.shard.RouteFor(args, s.clientCharset())
	if err == nil {
		route, err = s.userVarRoute(st.shard, route)
	}
	if err != nil {
		return nil, true, s.client.WriteErr(shardError(err))
	}
	s.noteShardRoute(route)
	if route.Write {
		if e := s.checkTxnWrite(route, st.plan); e != nil {
			return nil, true, s.client.WriteErr(e)
		}
	}
	// The ordinary path gives a prepared statement the session's
	// LAST_INSERT_ID() (set on its connection) and, for the client's own
	// text, its connection id; other reads of connection-scoped values
	// get them written into the text below.
	sc := st.plan.Scoped
	ordinary := sc == nil || sc.Uses&^router.ScopedLastInsertID == 0
	if (len(route.Parts) == 1 || route.AnyOne) && !route.PerExecution && route.Rename == nil && ordinary {
		part := s.pickPart(route)
		if part.Params == nil {
			s.useCluster(part.Cluster)
			if route.Write {
				s.pendingTxWrite = part.Cluster
			}
			return part, false, nil
		}
	}
	// Run the Parts as text with the values written in, which reads as
	// the statement only under the sql_mode its texts were written for.
	m := s.shardMode()
	if e := s.stopped(); e != nil {
		return nil, true, s.client.WriteErr(e)
	}
	if m != st.shard.Mode() {
		return nil, true, s.client.WriteErr(protocol.ERNotSupportedYet.New("sluice: the session's sql_mode changed since the statement was prepared; prepare it again"))
	}
	if sc != nil {
		// The Parts run as text on connections that hold other sessions'
		// values (the ordinary path primes LAST_INSERT_ID() on its one
		// connection instead): the session's values go into the text,
		// which is routed again.
		if route, err = s.scopedExecuteRoute(st, sc, args); err != nil {
			var e *protocol.SQLError
			if errors.As(err, &e) {
				s.noteResult(protocol.RelayResult{Err: e})
				return nil, true, s.client.WriteErr(e)
			}
			return nil, true, s.refuseShard(err)
		}
	}
	nbe := s.lastStatus&protocol.StatusNoBackslashEscape != 0
	text := &shard.Route{Write: route.Write, AnyOne: route.AnyOne, Merge: route.Merge, Rename: route.Rename,
		FirstRow: route.FirstRow, Parts: make([]shard.Part, len(route.Parts))}
	for i, pt := range route.Parts {
		q, err := shard.Interpolate(pt.SQL, args, types, pt.Params, nbe)
		if err != nil {
			return nil, true, s.client.WriteErr(shardError(err))
		}
		text.Parts[i] = shard.Part{Cluster: pt.Cluster, SQL: q, Shards: pt.Shards}
	}
	if text.AnyOne || len(text.Parts) == 1 {
		part := s.pickPart(text)
		text.Parts, text.AnyOne = []shard.Part{*part}, false
		if !text.Write && text.Merge == nil {
			text.Merge = passThrough
		}
	}
	if text.Write {
		return nil, true, s.writeParts(text)
	}
	return nil, true, s.scatter(st.plan, text, true)
}

// scopedExecuteRoute is the Route of an execution of st, whose text reads
// connection-scoped values sc, with the session's values written into the
// text in their place, for the parameter values args.
func (s *Session) scopedExecuteRoute(st *preparedStmt, sc *router.Scoped, args []shard.Value) (*shard.Route, error) {
	if sc.SetsLastInsertID || invisibleLID(st.plan, false) {
		return nil, scopedRefusal(sc)
	}
	s.shardPkt = append(append(s.shardPkt[:0], protocol.ComQuery), st.sql...)
	q, ok := s.shardScopedText(sc, s.shardPkt)
	if !ok {
		return nil, scopedRefusal(sc)
	}
	tpl, err := s.env.shards().PrepareMode(st.schema, string(q[1:]), st.shard.Mode())
	if err != nil {
		return nil, err
	}
	route, err := tpl.RouteFor(args, s.clientCharset())
	if err == nil {
		route, err = s.userVarRoute(tpl, route)
	}
	if err == nil && route.Write {
		if e := s.checkTxnWrite(route, st.plan); e != nil {
			return nil, e
		}
	}
	return route, err
}

// paramValue converts a prepared statement's parameter to a shard key
// value; text forms are built in *buf, which the values alias until the
// next execution.
func paramValue(v protocol.Param, buf *[]byte) shard.Value {
	switch {
	case v.Null:
		return shard.Value{Kind: shard.KindNull}
	case v.IsInteger() && v.Unsigned:
		return shard.Value{Kind: shard.KindUint, U: v.Uint()}
	case v.IsInteger():
		return shard.Value{Kind: shard.KindInt, I: v.Int()}
	case v.IsFloat():
		return shard.Value{Kind: shard.KindFloat, F: v.Float()}
	}
	start := len(*buf)
	*buf = v.AppendText(*buf)
	return shard.Value{Kind: shard.KindString, S: (*buf)[start:len(*buf):len(*buf)],
		Decimal: v.Type == protocol.TypeNewDecimal || v.Type == protocol.TypeDecimal}
}

// paramType is what of a parameter's bound type decides the type the
// server gives it (see shard.Interpolate).
func paramType(t byte) shard.ParamType {
	switch t {
	case protocol.TypeTiny:
		return shard.ParamInt1
	case protocol.TypeShort, protocol.TypeYear:
		return shard.ParamInt2
	case protocol.TypeLong, protocol.TypeInt24:
		return shard.ParamInt4
	case protocol.TypeLongLong:
		return shard.ParamInt8
	case protocol.TypeNewDecimal, protocol.TypeDecimal:
		return shard.ParamDecimal
	case protocol.TypeDate, protocol.TypeNewDate:
		return shard.ParamDate
	case protocol.TypeDatetime, protocol.TypeTimestamp, protocol.TypeTimestamp2, protocol.TypeDatetime2:
		return shard.ParamDatetime
	case protocol.TypeTime, protocol.TypeTime2:
		return shard.ParamTime
	case protocol.TypeTinyBlob, protocol.TypeMediumBlob, protocol.TypeLongBlob, protocol.TypeBlob:
		return shard.ParamBinary
	}
	return shard.ParamString
}

// shardError maps a planning or merge error of package shard to the ERR a
// client sees.
func shardError(err error) *protocol.SQLError {
	return protocol.KindOf(err, protocol.ERUnknownError).New("sluice: %v", err)
}
