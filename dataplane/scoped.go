package dataplane

import (
	"errors"
	"strconv"
	"strings"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// scopedState is what a session knows of the values MariaDB keeps per
// connection and a statement may read: LAST_INSERT_ID() (Session.lastInsertID),
// ROW_COUNT() (Session.rowCount), FOUND_ROWS() and CONNECTION_ID() (the
// session id). Under multiplexing the backend connection that runs a
// statement has another session's values, so a statement that reads them
// is sent with the session's own in their place (router.Scoped.Rewrite),
// unless that connection is known to hold them:
//
//   - a connection that ran the session's previous statement, with nothing
//     in between, has its ROW_COUNT() (BackendConn.prevSid and prevSeq
//     against stmtSeq), and its FOUND_ROWS() when that statement returned
//     rows (prevFound): a statement without a result set leaves
//     FOUND_ROWS() as the connection had it, from another session or from
//     sluice's own read-backs;
//   - a connection on which the session's LAST_INSERT_ID() last changed,
//     and that nobody used since, has that value (lidSid and lidSeq). It
//     is the only exact source after an INSERT that gave its
//     AUTO_INCREMENT column explicit values: the OK packet then carries
//     the inserted id although LAST_INSERT_ID() did not change.
//
// Owned by the session's goroutine; the marks on a BackendConn are written
// by the session that holds it.
type scopedState struct {
	// stmtSeq counts the statements of the session; lidSeq the changes of
	// its LAST_INSERT_ID().
	stmtSeq, lidSeq uint64
	foundRows       int64
	// lidStale, prevStale: the value changed in a way sluice did not see
	// (LAST_INSERT_ID(expr) in a SELECT, a procedure, several statements
	// in one text, SQL_CALC_FOUND_ROWS): only the connection that ran it
	// holds it.
	lidStale, prevStale bool
	// skipNote: the command running is no statement to the server's
	// ROW_COUNT() (COM_STMT_PREPARE).
	skipNote bool
	// prevFound: the session's previous statement set FOUND_ROWS() on the
	// connection that ran it (it returned a result set).
	prevFound bool
	buf       []byte
	refs      []router.ScopedRef
	// resolved: under sharding the statement's text already has the
	// session's values in place of all its reads (shardScopedText).
	resolved bool
	shardBuf []byte
}

// resetScoped puts the values as a fresh server connection has them.
func (s *Session) resetScoped() {
	s.lastInsertID, s.rowCount = 0, 0
	s.scoped.foundRows = 0
	s.scoped.lidStale, s.scoped.prevStale = false, false
	s.scoped.stmtSeq++
	s.scoped.lidSeq++
}

// ranPrevious reports whether bc ran the session's previous statement and
// nothing since.
func (s *Session) ranPrevious(bc *BackendConn) bool {
	return bc.prevSid == s.id && bc.prevSeq == s.scoped.stmtSeq
}

// holdsLID reports whether bc's LAST_INSERT_ID() is the session's.
func (s *Session) holdsLID(bc *BackendConn) bool {
	return bc.lidSid == s.id && bc.lidSeq == s.scoped.lidSeq
}

// noteScoped updates the session's connection-scoped values after bc ran
// its statement (plan; nil for commands that are not statements) with
// result res (noteResult, and what only the plan tells), and marks bc as
// holding them.
func (s *Session) noteScoped(bc *BackendConn, plan *router.Plan, res *protocol.RelayResult) {
	sc := &s.scoped
	if sc.skipNote {
		return
	}
	held := s.holdsLID(bc)
	lidSeq := sc.lidSeq
	s.noteResult(*res)
	bc.prevSid, bc.prevSeq = s.id, sc.stmtSeq
	changed := sc.lidSeq != lidSeq
	foundOnBC := false
	if plan != nil {
		switch {
		case plan.Found == router.FoundKept:
			// SHOW WARNINGS and SHOW ERRORS leave FOUND_ROWS() alone;
			// SHOW COUNT(*) WARNINGS, a SELECT of @@warning_count to the
			// server, sets it like any other result.
		case res.Columns:
			sc.foundRows, sc.prevFound = res.Rows, true
		case res.Err == nil && plan.Found == router.FoundBySelect:
			// FOUND_ROWS() is now the count of the statement's SELECT,
			// which only bc knows.
			sc.prevFound, foundOnBC = true, true
		default:
			sc.prevFound = false
		}
		// A text the router could not parse is opaque, unless the server
		// refused it too: one statement that failed changed nothing.
		opaque := plan.Multi || plan.ParseErr != nil && res.Err == nil || plan.Call
		if opaque || plan.Pins&router.PinFoundRows != 0 || foundOnBC {
			sc.prevStale = true
		} else if res.Err == nil || res.Packets > 0 {
			sc.prevStale = false
		}
		if invisibleLID(plan, false) || plan.Scoped != nil && plan.Scoped.SetsLastInsertID {
			if !changed {
				sc.lidSeq++
			}
			changed, sc.lidStale = true, true
		}
	}
	if changed || held {
		bc.lidSid, bc.lidSeq = s.id, sc.lidSeq
	} else if bc.lidSid == s.id {
		bc.lidSid = 0
	}
	if plan == nil || res.Err != nil || res.Warnings > 0 {
		// Reading a value back would clear the warnings the client may
		// still ask for; the connection that has them stays the source.
		return
	}
	if plan.Scoped != nil && plan.Scoped.SetsLastInsertID && s.holdsLID(bc) {
		if s.learnLID(bc) == nil {
			// The read was a statement: ROW_COUNT() and FOUND_ROWS() are
			// sluice's to answer now.
			sc.prevStale = sc.prevStale && plan.Pins&router.PinFoundRows != 0
		}
	}
	if (plan.Pins&router.PinFoundRows != 0 || foundOnBC) && s.ranPrevious(bc) {
		// SQL_CALC_FOUND_ROWS, INSERT ... SELECT: the count is on bc
		// alone, which is about to serve someone else.
		if v, err := bc.queryValue("SELECT FOUND_ROWS()"); err == nil {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				sc.foundRows, sc.prevStale = n, false
			}
		}
	}
}

// answeredLocally accounts for a statement sluice answered itself with a
// result set of rows rows: to the client it was the previous statement.
func (s *Session) answeredLocally(rows int64) {
	s.rowCount = -1
	s.scoped.foundRows = rows
	s.scoped.prevStale = false
	s.scoped.stmtSeq++
}

// scopedText returns the statement text to send on bc for the client's
// COM_QUERY p of plan: p itself, or p with the session's values in place
// of the reads bc cannot answer for it. A statement that sets
// LAST_INSERT_ID() first gets the session's value set on bc.
//
// A statement sluice cannot follow (invisibleLID) may read or change
// LAST_INSERT_ID() where sluice cannot see it: it too first gets the
// session's value set on bc, so that whatever bc holds afterwards is the
// session's.
func (s *Session) scopedText(bc *BackendConn, p []byte, plan *router.Plan, invisible bool) ([]byte, error) {
	sc := plan.Scoped
	if sc == nil {
		return p, s.primeLID(bc)
	}
	if s.scoped.resolved {
		return p, nil
	}
	v, err := s.scopedValues(bc, sc)
	if err != nil {
		return nil, err
	}
	if invisible || sc.SetsLastInsertID || !sc.Rewritable && sc.Uses&router.ScopedLastInsertID != 0 {
		if err := s.primeLID(bc); err != nil {
			return nil, err
		}
		v.Skip |= router.ScopedLastInsertID
	}
	if invisible {
		return p, nil
	}
	v.Refs = s.scoped.refs
	buf := append(s.scoped.buf[:0], protocol.ComQuery)
	buf, ok := sc.Rewrite(buf, p[1:], &v)
	s.scoped.buf, s.scoped.refs = buf, v.Refs
	if !ok {
		return p, nil
	}
	return buf, nil
}

// invisibleLID reports whether a statement may change LAST_INSERT_ID()
// where sluice does not see it: a procedure, several statements in one
// text, a text the parser rejected (sluice sees no reads in it either), or
// one the server may read otherwise than the parser did (doubt).
func invisibleLID(plan *router.Plan, doubt bool) bool {
	return doubt || plan.Multi || plan.ParseErr != nil || plan.Call
}

// scopedValues gathers the session's values for the reads of sc that bc
// cannot answer; those it can, or that nobody can tell, are left as
// written (ScopedValues.Skip).
func (s *Session) scopedValues(bc *BackendConn, sc *router.Scoped) (router.ScopedValues, error) {
	sv := &s.scoped
	v := router.ScopedValues{ConnID: uint64(s.id)}
	s.identity(&v, sc.Uses)
	if sc.Uses&(router.ScopedRowCount|router.ScopedFoundRows) != 0 {
		if s.ranPrevious(bc) {
			v.Skip |= router.ScopedRowCount
			if sv.prevFound || sv.prevStale {
				v.Skip |= router.ScopedFoundRows
			}
		} else if sv.prevStale {
			if !s.readBackPrevious() {
				v.Skip |= router.ScopedRowCount | router.ScopedFoundRows
			}
		}
	}
	if sc.Uses&router.ScopedLastInsertID != 0 {
		if s.holdsLID(bc) {
			v.Skip |= router.ScopedLastInsertID
		} else if sv.lidStale {
			if err := s.readBackLID(); err != nil {
				return v, err
			}
		}
	}
	v.LastInsertID, v.RowCount, v.FoundRows = s.lastInsertID, s.rowCount, sv.foundRows
	return v, nil
}

// heldConns calls f with each data connection the session holds.
func (s *Session) heldConns(f func(bc *BackendConn) bool) {
	done := false
	s.eachLeg(func(l *clusterLeg) {
		for _, bc := range [2]*BackendConn{l.master, l.replica} {
			if bc != nil && !done {
				done = f(bc)
			}
		}
	})
}

// readBackPrevious asks the held connection that ran the session's
// previous statement for its ROW_COUNT() and FOUND_ROWS(), which sluice
// could not follow; it reports whether it learnt them.
func (s *Session) readBackPrevious() bool {
	learnt := false
	s.heldConns(func(bc *BackendConn) bool {
		if !s.ranPrevious(bc) {
			return false
		}
		v, err := bc.queryValue("SELECT CONCAT(ROW_COUNT(), ',', FOUND_ROWS())")
		rc, fr, ok := strings.Cut(v, ",")
		if err != nil || !ok {
			return true
		}
		r, err1 := strconv.ParseInt(rc, 10, 64)
		f, err2 := strconv.ParseInt(fr, 10, 64)
		if err1 == nil && err2 == nil {
			s.rowCount, s.scoped.foundRows, s.scoped.prevStale, learnt = r, f, false, true
		}
		return true
	})
	return learnt
}

// readBackLID asks the held connection that has the session's
// LAST_INSERT_ID() for it, when a statement sluice could not follow set
// it. Without such a connection the last value sluice saw stands.
func (s *Session) readBackLID() error {
	var err error
	s.heldConns(func(bc *BackendConn) bool {
		if !s.holdsLID(bc) {
			return false
		}
		err = s.learnLID(bc)
		return true
	})
	if errors.Is(err, protocol.ErrBackendIO) {
		return err
	}
	return nil
}

// learnLID reads LAST_INSERT_ID() from bc, which holds the session's.
func (s *Session) learnLID(bc *BackendConn) error {
	v, err := bc.queryValue("SELECT LAST_INSERT_ID()")
	if err != nil {
		return err
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil
	}
	s.lastInsertID, s.scoped.lidStale = n, false
	return nil
}

// primeLID sets the session's LAST_INSERT_ID() on bc, unless bc has it.
func (s *Session) primeLID(bc *BackendConn) error {
	if s.holdsLID(bc) {
		return nil
	}
	if s.scoped.lidStale {
		if err := s.readBackLID(); err != nil {
			return err
		}
	}
	q := strconv.AppendUint(bc.command(protocol.ComQuery, "SET @@session.last_insert_id = "), s.lastInsertID, 10)
	if err := bc.simpleCommand(q, protocol.ResponseSingle); err != nil {
		return err
	}
	bc.lidSid, bc.lidSeq = s.id, s.scoped.lidSeq
	return nil
}

// connIDText is the text of prepared statement st with the session's id
// in place of CONNECTION_ID() and @@pseudo_thread_id, and its identity in
// place of CURRENT_USER() and the like: constant for the session (the
// identity until a SET ROLE or COM_CHANGE_USER, so a text reading it is
// made again each time), so it is prepared once per connection like the
// client's text. (ROW_COUNT() and FOUND_ROWS() in a prepared statement are
// left to the connection that runs it.)
func (s *Session) connIDText(st *preparedStmt) string {
	identity := st.plan.Scoped.Uses&router.ScopedIdentity != 0
	if st.connIDText == "" || identity {
		v := router.ScopedValues{ConnID: uint64(s.id), Skip: ^(router.ScopedConnID | router.ScopedIdentity)}
		s.identity(&v, st.plan.Scoped.Uses)
		b, ok := st.plan.Scoped.Rewrite(nil, []byte(st.sql), &v)
		if !ok {
			return ""
		}
		st.connIDText = string(b)
	}
	return st.connIDText
}

// setLID records that the session's LAST_INSERT_ID() was just set on bc
// (SET last_insert_id = n): to v when known, else to what bc now holds.
func (s *Session) setLID(bc *BackendConn, v uint64, known bool) {
	s.scoped.lidSeq++
	s.scoped.lidStale = !known
	if known {
		s.lastInsertID = v
	}
	bc.lidSid, bc.lidSeq = s.id, s.scoped.lidSeq
}
