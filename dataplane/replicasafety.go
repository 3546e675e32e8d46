package dataplane

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
	// own SET sql_mode (modesSet), else from the servers' global sql_mode
	// as the probes of round modesRound read it (modesKnown: every server
	// of the cluster reported one).
	modes      router.LexModes
	modesSet   bool
	modesKnown bool
	modesRound uint64
	// shardModes are the flags every cluster's servers agree on, for the
	// sharding rewrite, as read in probe round shardRound (shardKnown).
	shardModes router.LexModes
	shardRound uint64
	shardKnown bool
}

// lexModes returns the sql_mode flags the session's statements are lexed
// under. A session that has not set sql_mode has the servers' global one
// (a connection starts with it), which the probes read: the flags of the
// master and of every replica together, as a replica may differ. Until a
// probe has read each, every flag that changes lexing is assumed. The
// status flags of the last answer add NO_BACKSLASH_ESCAPES whatever the
// rest says.
func (s *Session) lexModes() router.LexModes {
	m := s.lex.modes
	if !s.lex.modesSet {
		if round := s.env.topo.Round(); round != s.lex.modesRound || !s.lex.modesKnown {
			s.lex.modesRound = round
			s.lex.modes, s.lex.modesKnown = globalModes(s.cluster)
		}
		m = s.lex.modes
	}
	if s.lastStatus&protocol.StatusNoBackslashEscape != 0 {
		m |= router.LexNoBackslashEscapes
	}
	return m
}

// globalModes are the lexing flags of the global sql_mode of every server
// of c, as their last probes read it; known is false (and every flag
// assumed) while any has not been read.
func globalModes(c *health.Cluster) (m router.LexModes, known bool) {
	known = true
	add := func(b *health.Backend) {
		if st := b.Status(); st != nil && st.SQLModeKnown {
			m |= router.ParseSQLMode(st.SQLMode)
		} else {
			m, known = m|router.LexUnknown, false
		}
	}
	add(c.Master)
	for _, r := range c.Replicas {
		add(r)
	}
	return m, known
}

// noteSQLMode takes the lexing flags of the session's own accepted SET
// sql_mode. A value the router could not read as a list of modes (DEFAULT,
// a number, an expression such as CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'))
// is read back from bc, the master connection that ran the SET; until that
// succeeds every flag is assumed.
func (s *Session) noteSQLMode(v router.SessionVar, bc *BackendConn) {
	s.lex.modes, s.lex.modesSet = v.Modes, true
	if v.ModesKnown {
		return
	}
	s.lex.modes = router.LexUnknown | router.LexOracle
	if bc == nil {
		return
	}
	mode, err := bc.queryValue("SELECT @@SESSION.sql_mode")
	if err != nil {
		s.log().Warn("could not read back the session's sql_mode", zap.String("backend", bc.backend.Address), zap.Error(err))
		return
	}
	s.lex.modes = router.ParseSQLMode(mode)
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
		if schema == "" {
			return true
		}
		key := health.FunctionKey{Schema: schema, Name: f.Name}
		if f.Maybe && !st.Functions.Has(key) {
			continue // the built-in
		}
		if !st.Functions.ReadOnly(key) {
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
	s.env.metrics.ReplicaRefusals.WithLabelValues(s.cluster.Name).Inc()
	digest := ""
	if s.rec.plan != nil {
		digest = s.rec.plan.Digest
	}
	if s.env.refusals.first(digest) {
		s.log().Warn("replica refused a statement as a write; it runs on the master",
			zap.String("backend", bc.backend.Address), zap.String("digest", digest))
	}
}
