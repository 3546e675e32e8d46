package dataplane

import (
	"encoding/hex"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// This file holds what a session does with the SET statements it ran, so
// that each of its later statements sees the session state a single server
// would give it, on whichever pooled connection it runs (issue 19):
//
//   - A value that is not a constant (CONCAT(@@sql_mode, ...), a parameter
//     of a prepared SET, a subquery) is read back from the connection that
//     ran it and replayed as a literal: replaying the expression would
//     evaluate it again, elsewhere, in another state.
//   - Variables that are not lasting session settings are never replayed:
//     insert_id is consumed by the next INSERT that generates an id, so the
//     session keeps the connection that holds it until then;
//     last_insert_id / identity set the session's own LAST_INSERT_ID();
//     rand_seed1/2 set the state of that connection's RAND() generator and
//     gtid_seq_no the GTID of its next binlogged transaction, which only
//     that connection can carry: the session stays on it.
//   - completion_type = RELEASE, and COMMIT / ROLLBACK RELEASE, end the
//     connection after the transaction: the backend connection is dropped
//     and the client's closed after the reply, as the server does.

// setReplay is the session's state of this file. The Session owns it.
type setReplay struct {
	// insertID is the session's pending insert_id (0: none), held by its
	// master connection, which the session keeps until an INSERT used it.
	insertID uint64
	// release: the session's completion_type is RELEASE.
	release bool
	// quit: the statement just run ended the connection (RELEASE).
	quit bool
}

// connVars are session variables whose value belongs to the connection
// that ran the SET (a generator's state, the next binlogged GTID) and
// cannot be given to another: the session keeps its connections.
var connVars = map[string]bool{
	"rand_seed1":        true,
	"rand_seed2":        true,
	"gtid_seq_no":       true,
	"wsrep_gtid_seq_no": true,
	"debug_sync":        true,
}

// afterSet is the exchange callback of a SET that succeeded on bc: it
// records the statement's assignments and marks bc as carrying exactly the
// session's replayed state.
func (s *Session) afterSet(plan *router.Plan) func(*BackendConn, protocol.RelayResult) {
	return func(bc *BackendConn, res protocol.RelayResult) {
		if res.Err != nil {
			return
		}
		s.recordSet(plan.Vars, bc)
		if bc.broken {
			s.dropIfBroken(bc)
			return
		}
		// bc ran the SET itself: its effect equals the session's list,
		// whatever moved in it.
		bc.vars = bc.vars[:0]
		for _, v := range s.vars {
			bc.vars = append(bc.vars, v.SQL)
		}
	}
}

// recordSet adds the assignments of a SET that bc just ran to the session's
// state, reading back from bc what the SQL alone does not tell.
func (s *Session) recordSet(vars []router.SessionVar, bc *BackendConn) {
	for i := range vars {
		v := vars[i]
		switch {
		case v.Name == "insert_id":
			s.replay.insertID = 0
			if val, ok := s.readBack(bc, "SELECT @@SESSION.insert_id"); ok && !val.null {
				s.replay.insertID, _ = strconv.ParseUint(val.text, 10, 64)
			}
			s.dropVar(v.Name)
			continue
		case v.Name == "last_insert_id" || v.Name == "identity":
			// The session's LAST_INSERT_ID(), which sluice answers
			// itself: the server's value after the SET.
			val, ok := s.readBack(bc, "SELECT @@SESSION.last_insert_id")
			n, err := strconv.ParseUint(val.text, 10, 64)
			s.setLID(bc, n, ok && !val.null && err == nil)
			s.dropVar(v.Name)
			continue
		case connVars[v.Name]:
			s.pin(router.PinUntracked)
			s.dropVar(v.Name)
			continue
		}
		if v.ReadBack != "" || v.Name == "completion_type" {
			val, ok := s.readBack(bc, v.ReadBackQuery())
			if !ok {
				// The value stays on bc, unknown: the session keeps bc
				// and replays no older value of the variable elsewhere.
				s.pin(router.PinUntracked)
				s.dropVar(v.Name)
				continue
			}
			v.SQL = v.ReplaySQL(sqlLiteral(val))
			switch v.Name {
			case "sql_mode":
				v.Modes, v.ModesKnown = router.ParseSQLMode(val.text), true
			case "completion_type":
				s.replay.release = val.text == "RELEASE" || val.text == "2"
			}
		}
		s.recordVar(v, bc)
	}
}

// recordVar records one assignment (recordVars for one).
func (s *Session) recordVar(v router.SessionVar, bc *BackendConn) {
	one := [1]router.SessionVar{v}
	s.recordVars(one[:], bc)
}

// readBack runs a read-back query on bc; ok is false when it failed (bc may
// then be broken).
func (s *Session) readBack(bc *BackendConn, q string) (scalar, bool) {
	val, err := bc.queryScalar(q)
	if err != nil {
		s.log().Warn("could not read back a session variable", zap.String("backend", bc.backend.Address),
			zap.String("query", q), zap.Error(err))
		return scalar{}, false
	}
	return val, true
}

// sqlLiteral writes a value read back as an SQL literal the server reads
// back as the same value under any sql_mode: NULL, a number bare (numeric
// variables refuse strings), printable ASCII quoted with doubled quotes
// (NO_BACKSLASH_ESCAPES or not), anything else as a hexadecimal string.
func sqlLiteral(v scalar) string {
	if v.null {
		return "NULL"
	}
	switch v.typ {
	case protocol.TypeTiny, protocol.TypeShort, protocol.TypeLong, protocol.TypeInt24, protocol.TypeLongLong,
		protocol.TypeFloat, protocol.TypeDouble, protocol.TypeDecimal, protocol.TypeNewDecimal, protocol.TypeYear:
		if numeric(v.text) {
			return v.text
		}
	}
	plain := true
	for i := 0; i < len(v.text) && plain; i++ {
		c := v.text[i]
		plain = c >= 0x20 && c < 0x7f && c != '\\'
	}
	if !plain {
		return "X'" + hex.EncodeToString([]byte(v.text)) + "'"
	}
	b := make([]byte, 0, len(v.text)+2)
	b = append(b, '\'')
	for i := 0; i < len(v.text); i++ {
		if v.text[i] == '\'' {
			b = append(b, '\'')
		}
		b = append(b, v.text[i])
	}
	return string(append(b, '\''))
}

// numeric reports whether t is a number as the server writes one.
func numeric(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c >= '0' && c <= '9', c == '.', c == 'e', c == 'E':
		case (c == '-' || c == '+') && (i == 0 || t[i-1] == 'e' || t[i-1] == 'E'):
		default:
			return false
		}
	}
	return true
}

// noteInsertIDUse learns whether the statement just run on the session's
// master connection bc used the pending insert_id: an INSERT that did
// reports it as its first id, and the server has then cleared it. Only
// then is it read back, so the other statements cost nothing, and a
// statement whose warnings or result SHOW WARNINGS / FOUND_ROWS() may still
// ask about is not followed by sluice's own query.
func (s *Session) noteInsertIDUse(bc *BackendConn, res protocol.RelayResult) {
	if bc != s.master || res.Err != nil || res.Columns || res.Warnings > 0 || res.OK.LastInsertID != s.replay.insertID {
		return
	}
	val, ok := s.readBack(bc, "SELECT @@SESSION.insert_id")
	if !ok {
		// The connection that held it is gone or unusable.
		s.replay.insertID = 0
		s.dropIfBroken(bc)
		return
	}
	if val.null || val.text == "0" {
		s.replay.insertID = 0
	}
}

// releases reports whether plan, run successfully, makes the server close
// the connection: COMMIT or ROLLBACK with RELEASE, or without NO RELEASE
// under completion_type = RELEASE.
func (s *Session) releases(plan *router.Plan) bool {
	return plan.Kind == router.KindTxn && plan.Txn == router.TxnEnd &&
		(plan.Release == router.ReleaseYes || plan.Release == router.ReleaseDefault && s.replay.release)
}

// afterRelease is the exchange callback of a statement that releases: the
// server closes bc after its OK, so bc is dropped, and the session ends once
// the reply is with the client, as its connection to a single server would.
func (s *Session) afterRelease(bc *BackendConn, res protocol.RelayResult) {
	if res.Err != nil {
		return
	}
	bc.broken = true
	s.dropIfBroken(bc)
	s.replay.quit = true
}

// refuseDefaultRole answers with an ERR a statement that would change the
// account it runs as (router.SelfAccountStatement): SET DEFAULT ROLE or
// SET PASSWORD for the current account, ALTER / DROP / RENAME USER of it
// or of a service account. On a server the current account is the
// client's own; run by sluice it is the service account every backend
// connection logs in with: a default role would reach every later session
// of every user, a new password or a dropped account would lock sluice out
// of the backend. The client's accounts live on the auth server.
func (s *Session) refuseDefaultRole(plan *router.Plan, text []byte) (bool, error) {
	d := plan.Digest
	if !strings.HasPrefix(d, "set default role") && !strings.HasPrefix(d, "set password") &&
		!strings.HasPrefix(d, "alter user") && !strings.HasPrefix(d, "drop user") && !strings.HasPrefix(d, "rename user") {
		return false, nil
	}
	cfg := s.env.config()
	users := make([]string, 0, len(cfg.Clusters))
	for i := range cfg.Clusters {
		users = append(users, cfg.Clusters[i].User)
	}
	what, self := router.SelfAccountStatement(string(text), users)
	if !self {
		return false, nil
	}
	return true, s.client.WriteErr(protocol.ERNotSupportedYet.New("sluice: %s of the current account (or of sluice's service account) would change the account sluice's backend connections use, not %s's; change %s's account on the auth server, or name another account with FOR", what, s.user, s.user))
}
