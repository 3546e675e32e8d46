package proxy

import (
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// This file holds the session's checks that keep a statement off a replica
// when the router's reading of it is not enough: the sql_mode and client
// character set the server will lex it under, and the stored functions it
// calls. Behind them stands the replica connection's read-only access mode
// (backend.go), whose refusals the session re-runs on the master (exchange).

// lexState is what the session knows of how the server lexes its
// statements. The Session owns it.
type lexState struct {
	// modes are the session's lexing sql_mode flags: from the client's
	// own SET sql_mode (modesSet), else from the server's global sql_mode
	// as the cluster master's last probe read it (modesFrom).
	modes     router.LexModes
	modesSet  bool
	modesFrom *health.Status
}

// lexModes returns the sql_mode flags the session's statements are lexed
// under. A session that has not set sql_mode has the server's global one,
// which it learns from the master's probes; until a probe has read it,
// every flag that changes lexing is assumed. The status flags of the last
// answer add NO_BACKSLASH_ESCAPES whatever the rest says.
func (s *Session) lexModes() router.LexModes {
	m := s.lex.modes
	if !s.lex.modesSet {
		st := s.cluster.Master.Status()
		if st != s.lex.modesFrom || st == nil {
			s.lex.modesFrom = st
			s.lex.modes = router.LexUnknown
			if st != nil && st.SQLModeKnown {
				s.lex.modes = router.ParseSQLMode(st.SQLMode)
			}
		}
		m = s.lex.modes
	}
	if s.lastStatus&protocol.StatusNoBackslashEscape != 0 {
		m |= router.LexNoBackslashEscapes
	}
	return m
}

// noteSQLMode takes the lexing flags of the session's own accepted SET
// sql_mode; DEFAULT gives the session the server's global mode again.
func (s *Session) noteSQLMode(v router.SessionVar) {
	s.lex.modes, s.lex.modesSet, s.lex.modesFrom = v.Modes, v.ModesKnown, nil
}

// unsafeCharset reports whether the session's client character set is one
// in which a non-ASCII statement may lex differently in the TiDB parser and
// in the server (gbk, big5, sjis, cp932): the last tracked SET NAMES, SET
// CHARACTER SET or character_set_client, else the handshake's collation.
func (s *Session) unsafeCharset() bool {
	for i := len(s.vars) - 1; i >= 0; i-- {
		switch s.vars[i].Name {
		case "names", "character set", "character_set_client":
			return router.UnsafeClientCharset(s.vars[i].Charset)
		}
	}
	return router.UnsafeCollation(s.key.collation)
}

// lexDoubt reports whether the server may read plan's text otherwise than
// the router did, given the session's sql_mode and character set: then the
// statement runs on the master and nothing is tracked from it. In ORACLE
// mode every statement is in doubt: the TiDB parser does not know the
// grammar.
func (s *Session) lexDoubt(plan *router.Plan) bool {
	if plan.NonASCII && s.unsafeCharset() {
		return true
	}
	m := s.lexModes()
	return m&router.LexOracle != 0 || plan.Modes&m != 0
}

// funcsMayWrite reports whether a function plan calls may change data:
// one not known, from the cluster master's catalog, to be declared NO SQL
// or READS SQL DATA. An unqualified call resolves in the session's schema.
func (s *Session) funcsMayWrite(plan *router.Plan) bool {
	if len(plan.Funcs) == 0 {
		return false
	}
	st := s.cluster.Master.Status()
	if st == nil || st.Functions == nil {
		return true
	}
	for _, f := range plan.Funcs {
		schema := f.Schema
		if schema == "" {
			schema = s.schema
		}
		if schema == "" || !st.Functions.ReadOnly(health.FunctionKey{Schema: schema, Name: f.Name}) {
			return true
		}
	}
	return false
}

// refusalLog remembers the digests whose replica refusals were logged, so
// each is logged once. It stops remembering (and logging) new digests at
// maxRefusalDigests; the counter still counts every refusal.
type refusalLog struct {
	seen sync.Map
	n    atomic.Int32
}

const maxRefusalDigests = 1024

// first reports whether digest is logged for the first time.
func (l *refusalLog) first(digest string) bool {
	if l.n.Load() >= maxRefusalDigests {
		return false
	}
	if _, loaded := l.seen.LoadOrStore(digest, struct{}{}); loaded {
		return false
	}
	l.n.Add(1)
	return true
}

// replicaRefused counts and, once per digest, logs a statement that the
// replica connection bc refused as a write (1792): the router or the
// function catalog judged it a read, and it is about to run on the master.
func (s *Session) replicaRefused(bc *BackendConn) {
	s.srv.metrics.replicaRefusals.WithLabelValues(s.cluster.Name).Inc()
	digest := ""
	if s.rec.plan != nil {
		digest = s.rec.plan.Digest
	}
	if s.srv.refusals.first(digest) {
		s.log().Warn("replica refused a statement as a write; it runs on the master",
			zap.String("backend", bc.backend.Address), zap.String("digest", digest))
	}
}
