package dataplane

import (
	"encoding/binary"
	"fmt"
	"unique"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
)

// Binary prepared statements do not pin a session. The client's statements
// live in its Session (preparedStmt); each backend connection keeps the
// statements it prepared, for whichever session runs them next, in a
// bounded cache (stmtCache), keyed by what the server prepared: the text,
// the schema and the replayed session state (SET NAMES, sql_mode, ...) it
// was prepared under, which are the client's at its COM_STMT_PREPARE, as
// on a server. Only an open cursor keeps a session on its connection.

// stmtText is a statement text and the schema it is prepared under; its
// unique.Handle is what caches compare, one pointer instead of the text.
type stmtText struct {
	sql, schema string
}

// stmtKey names a statement prepared on a backend connection: its text and
// schema, and the session state it was prepared under (Session.state).
type stmtKey struct {
	text  unique.Handle[stmtText]
	state unique.Handle[string]
}

// backendStmt is a statement as prepared on one backend connection.
// typesOwner and typesVersion say whose parameter types the server last
// bound to it (a preparedStmt's versions only grow, even across reuse, and
// the pointer keeps it from being freed while it is named here).
type backendStmt struct {
	id           uint32
	key          stmtKey
	typesOwner   *preparedStmt
	typesVersion uint64
	used         uint64
	// gen is the cache's generation when bs was detached for a cursor.
	gen uint64
}

// stmtCache is a backend connection's prepared statements, least recently
// used first out. It belongs to the connection, and so to the one session
// holding it at a time. detached counts statements taken out for an open
// cursor: they stay prepared on the server and count against the bound.
// gen counts resets, which end detached statements too.
type stmtCache struct {
	m        map[stmtKey]*backendStmt
	tick     uint64
	detached int
	gen      uint64
	spare    *backendStmt
}

// get returns bc's statement for key, marked as just used, or nil.
func (c *stmtCache) get(key stmtKey) *backendStmt {
	bs := c.m[key]
	if bs != nil {
		c.tick++
		bs.used = c.tick
	}
	return bs
}

// clear forgets every statement: the server dropped them (a reset).
func (c *stmtCache) clear() {
	clear(c.m)
	c.detached = 0
	c.gen++
}

// makeRoom closes least recently used statements on bc until one more
// fits under bound, and drops any statement already cached as key (the
// caller prepares it again).
func (bc *BackendConn) makeRoom(key stmtKey, bound int) {
	c := &bc.stmts
	if old := c.m[key]; old != nil {
		bc.evict(old)
	}
	for len(c.m) > 0 && len(c.m)+c.detached >= bound {
		var lru *backendStmt
		for _, bs := range c.m {
			if lru == nil || bs.used < lru.used {
				lru = bs
			}
		}
		bc.evict(lru)
	}
}

// closeStmt sends COM_STMT_CLOSE for a backend statement id (no answer
// comes).
func (bc *BackendConn) closeStmt(id uint32) {
	if bc.broken {
		return
	}
	b := binary.LittleEndian.AppendUint32(bc.command(protocol.ComStmtClose, ""), id)
	bc.ResetSeq()
	if err := bc.WritePacketFlush(b); err != nil {
		bc.broken = true
	}
}

// evict closes bs on the server and forgets it.
func (bc *BackendConn) evict(bs *backendStmt) {
	delete(bc.stmts.m, bs.key)
	bc.closeStmt(bs.id)
	*bs = backendStmt{}
	bc.stmts.spare = bs
}

// evictAllFor closes every statement bc caches when e is the server's
// max_prepared_stmt_count refusal (1461) and bc has some to close; it
// reports whether it closed any.
func (bc *BackendConn) evictAllFor(e *protocol.SQLError) bool {
	if e == nil || e.Code != protocol.ERMaxPreparedStmtCount.Code || len(bc.stmts.m) == 0 {
		return false
	}
	for _, bs := range bc.stmts.m {
		bc.evict(bs)
	}
	return !bc.broken
}

// addStmt caches the statement bc just prepared as key under id.
func (bc *BackendConn) addStmt(key stmtKey, id uint32) *backendStmt {
	c := &bc.stmts
	if c.m == nil {
		c.m = make(map[stmtKey]*backendStmt)
	}
	bs := c.spare
	if bs == nil {
		bs = &backendStmt{}
	}
	c.spare = nil
	c.tick++
	*bs = backendStmt{id: id, key: key, used: c.tick}
	c.m[key] = bs
	return bs
}

// detach takes bs out of the cache while a cursor of it is open: nobody
// else may run it meanwhile, and no eviction may close the cursor.
func (bc *BackendConn) detach(bs *backendStmt) {
	if bc.stmts.m[bs.key] == bs {
		delete(bc.stmts.m, bs.key)
		bc.stmts.detached++
		bs.gen = bc.stmts.gen
	}
}

// reattach ends bs's cursor. When keep is set (the server closed the
// cursor, or the next execution of bs will) bs goes back to the cache if
// its key is free; otherwise it is closed, and its cursor with it.
func (bc *BackendConn) reattach(bs *backendStmt, keep bool) {
	if bs.gen != bc.stmts.gen || bc.broken {
		return // a reset closed it
	}
	bc.stmts.detached--
	if keep && bc.stmts.m[bs.key] == nil {
		bc.stmts.m[bs.key] = bs
		return
	}
	bc.closeStmt(bs.id)
}

// endCursor forgets st's open cursor; keep as for reattach.
func (s *Session) endCursor(st *preparedStmt, keep bool) {
	if st.cursor == nil {
		return
	}
	st.cursor.reattach(st.cursorStmt, keep)
	st.cursor, st.cursorStmt = nil, nil
	s.cursors--
}

// stmtHandle is the cache handle of text run for st: its own or, for a
// shard's physical text or connIDText, the variant's, made once per
// variant in a row.
func stmtHandle(st *preparedStmt, variant string) unique.Handle[stmtText] {
	if variant == "" {
		return st.text
	}
	if st.variant != variant {
		st.variant, st.variantText = variant, unique.Make(stmtText{sql: variant, schema: st.schema})
	}
	return st.variantText
}

// state is the session's replayed SET statements as one comparable value;
// it is made again only after they change.
func (s *Session) state() unique.Handle[string] {
	if !s.stateOK {
		b := s.scratch2[:0]
		for _, v := range s.vars {
			b = append(append(b, v.SQL...), 0)
		}
		s.scratch2 = b
		s.stateH, s.stateOK = unique.Make(string(b)), true
	}
	return s.stateH
}

// prepareState gives bc, which carries the session's current state, the
// state st was prepared under, so that the server reads st as it did at
// the client's COM_STMT_PREPARE (another sql_mode or character set reads
// another statement). It resets bc and replays st's SET statements;
// stateBack then replays the session's. It reports false, doing nothing,
// when the states are equal or bc holds what a reset would lose (a
// transaction, an open cursor, state the session is pinned for): st is
// then prepared under the current state, as it was before statements
// stopped pinning.
func (s *Session) prepareState(bc *BackendConn, st *preparedStmt) (bool, error) {
	if st.state == s.state() || s.inTransaction() || s.pins != 0 || s.cursors != 0 || s.replay.insertID != 0 ||
		bc.inTransaction() || s.txBegin != "" {
		return false, nil
	}
	if !bc.reset(s.env.config().Proxy.ConnectTimeout.Duration) {
		bc.broken = true
		return false, fmt.Errorf("%w: COM_RESET_CONNECTION failed", protocol.ErrBackendIO)
	}
	return true, s.replayOn(bc, st.vars)
}

// stateBack replays the session's SET statements on bc after
// prepareState; bc then carries the session's state again, as every
// variable st set is set again (the session only adds variables between
// resets). Should one not be, bc is reset before its next use.
func (s *Session) stateBack(bc *BackendConn, st *preparedStmt) error {
	for _, v := range st.vars {
		found := false
		for _, w := range s.vars {
			found = found || w.Name == v.Name
		}
		if !found {
			bc.tainted = true
		}
	}
	return s.replayOn(bc, s.vars)
}

// replayOn runs vars' SET statements on bc and records them as bc's
// state; a replica connection stays read-only, as in sync.
func (s *Session) replayOn(bc *BackendConn, vars []trackedVar) error {
	replica := bc.backend.Role == health.RoleReplica
	bc.vars = bc.vars[:0]
	for _, v := range vars {
		if !(replica && v.Name == "transaction_read_only") {
			if err := bc.simpleCommand(bc.command(protocol.ComQuery, v.SQL), protocol.ResponseResult); err != nil {
				bc.tainted = true
				return err
			}
		}
		bc.vars = append(bc.vars, v.SQL)
	}
	return nil
}
