package dataplane

import (
	"strconv"
	"testing"

	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/router"
)

// TestRefusalLogOncePerDigest: a replica's refusal is logged the first time
// its digest is refused, and the set of logged digests is bounded.
func TestRefusalLogOncePerDigest(t *testing.T) {
	var l refusalLog
	if !l.first("select f ( ? )") || l.first("select f ( ? )") {
		t.Fatal("a digest is not logged exactly once")
	}
	if !l.first("select g ( ? )") {
		t.Fatal("a second digest is not logged")
	}
	for i := range maxRefusalDigests {
		l.first("d" + strconv.Itoa(i))
	}
	if l.first("one more") {
		t.Fatalf("more than %d digests remembered", maxRefusalDigests)
	}
}

// TestFuncsMayWrite: a read that calls a stored function goes to a replica
// only when the master's catalog says each is NO SQL or READS SQL DATA; an
// ambiguous call (`now`()) only when the schema has no such function.
func TestFuncsMayWrite(t *testing.T) {
	srv := offlineServer(t, "", 1)
	s := withLegs(&Session{env: srv, schema: "app"})
	s.cluster = srv.topo.Current().Clusters[0]
	r := router.New(0)
	if !s.funcsMayWrite(r.Classify("SELECT f_ro()")) {
		t.Fatal("with no catalog yet, a stored function is not taken to write")
	}
	s.cluster.Master.SetStatus(&health.Status{Functions: health.Functions{
		{Schema: "app", Name: "f_ro"}:   "READS SQL DATA",
		{Schema: "app", Name: "f_no"}:   "NO SQL",
		{Schema: "app", Name: "f_cs"}:   "CONTAINS SQL",
		{Schema: "app", Name: "f_ins"}:  "MODIFIES SQL DATA",
		{Schema: "other", Name: "trim"}: "MODIFIES SQL DATA",
	}})
	for sql, want := range map[string]bool{
		"SELECT f_ro(), f_no()":             false,
		"SELECT app.f_ro(), F_RO()":         false,
		"SELECT f_ro(), f_cs()":             true,
		"SELECT f_ins('x')":                 true,
		"SELECT f_unknown()":                true,
		"SELECT other.f_ro()":               true,
		"SELECT `trim`('a'), `now`()":       false,
		"SELECT 1 FROM t WHERE a = `x`(1)":  false,
		"SELECT CONCAT('a'), NOW(), f_no()": false,
	} {
		if got := s.funcsMayWrite(r.Classify(sql)); got != want {
			t.Errorf("funcsMayWrite(%q) = %v, want %v", sql, got, want)
		}
	}
	s.schema = "other"
	if !s.funcsMayWrite(r.Classify("SELECT `trim`('a')")) {
		t.Error("`trim`() in a schema with a writing stored function trim is not taken to write")
	}
	s.schema = ""
	if !s.funcsMayWrite(r.Classify("SELECT f_ro()")) {
		t.Error("an unqualified stored function without a default schema is not taken to write")
	}
}

// TestLexDoubt: the session judges the router's reading by the sql_mode of
// every server of its cluster (or its own), its character set, and
// ORACLE mode, and is in doubt until the probes have read the modes.
func TestLexDoubt(t *testing.T) {
	srv := offlineServer(t, "", 2)
	s := withLegs(&Session{env: srv, key: poolKey{collation: DefaultCollation}})
	s.cluster = srv.topo.Current().Clusters[0]
	r := router.New(0)
	escaped := r.Classify(`SELECT 'a\', NEXTVAL(s) -- '`)
	plain := r.Classify(`SELECT 'O\'Brien' FROM t`)
	if !s.lexDoubt(escaped) {
		t.Fatal("before any probe read the servers' sql_mode, an escape-sensitive text is not in doubt")
	}
	set := func(b *health.Backend, mode string) {
		b.SetStatus(&health.Status{SQLMode: mode, SQLModeKnown: true})
	}
	set(s.cluster.Master, "STRICT_TRANS_TABLES")
	set(s.cluster.Replicas[0], "STRICT_TRANS_TABLES")
	s.lex = lexState{}
	if !s.lexDoubt(escaped) {
		t.Fatal("with one replica's sql_mode unknown, an escape-sensitive text is not in doubt")
	}
	set(s.cluster.Replicas[1], "")
	s.lex = lexState{}
	if s.lexDoubt(escaped) || s.lexDoubt(plain) {
		t.Fatal("under the default modes the texts are in doubt")
	}
	// A replica whose global mode differs counts.
	set(s.cluster.Replicas[1], "NO_BACKSLASH_ESCAPES")
	s.lex = lexState{}
	if !s.lexDoubt(escaped) || !s.lexDoubt(plain) {
		t.Fatal("with a replica under NO_BACKSLASH_ESCAPES, escape-sensitive texts are not in doubt")
	}
	// The session's own sql_mode wins.
	s.recordVars(r.Classify("SET sql_mode = 'STRICT_ALL_TABLES'").Vars, nil)
	if s.lexDoubt(escaped) {
		t.Fatal("after the session set its own sql_mode, the servers' still counts")
	}
	s.recordVars(r.Classify("SET sql_mode = 'ORACLE'").Vars, nil)
	if !s.lexDoubt(r.Classify("SELECT 1")) {
		t.Fatal("in ORACLE mode a plain SELECT is not in doubt")
	}
	s.resetState()
	s.recordVars(r.Classify("SET sql_mode = ''").Vars, nil)
	// The client character set: non-ASCII text under gbk.
	utf := r.Classify("SELECT '\xe4\xb8\xad' FROM t")
	if s.lexDoubt(utf) {
		t.Fatal("non-ASCII text under utf8mb4 is in doubt")
	}
	s.recordVars(r.Classify("SET NAMES gbk").Vars, nil)
	if !s.lexDoubt(utf) || s.lexDoubt(r.Classify("SELECT 'x' FROM t")) {
		t.Fatal("under SET NAMES gbk, non-ASCII text is not in doubt, or ASCII text is")
	}
	s.recordVars(r.Classify("SET NAMES utf8mb4").Vars, nil)
	s.key.collation = 28 // gbk_chinese_ci at the handshake: the SET NAMES wins
	if s.lexDoubt(utf) {
		t.Fatal("after SET NAMES utf8mb4 the handshake's gbk still counts")
	}
	s.vars = nil
	if !s.lexDoubt(utf) {
		t.Fatal("a gbk handshake does not put non-ASCII text in doubt")
	}
}
