package dataplane

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
	"unique"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/auth/grants"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// Microbenchmarks of a Session's per-statement work, without any network:
// the Server is built from a parsed configuration and never started, and
// connections are benchConns. `make microbench` runs them with -benchmem.

// benchServer returns an Env for a master and one replica that nothing
// listens on; NewEnv dials nothing.
func benchServer(b *testing.B) *Env { return offlineServer(b, "", 1) }

// offlineServer returns an Env, as a server that is never started builds
// it, for a master and replicas on addresses nothing listens on, with
// healthKeys as its [health] table.
func offlineServer(tb testing.TB, healthKeys string, replicas int) *Env {
	return offlineServerWith(tb, healthKeys, replicas, "")
}

// offlineServerWith is offlineServer with extra TOML at the end (shard rules).
func offlineServerWith(tb testing.TB, healthKeys string, replicas int, extra string) *Env {
	tb.Helper()
	doc := "[auth]\naddress = \"127.0.0.1:1\"\n[health]\n" + healthKeys +
		"\n[[cluster]]\nname = \"main\"\nuser = \"sluice\"\nmaster = \"127.0.0.1:2\"\n"
	for i := range replicas {
		doc += fmt.Sprintf("  [[cluster.replica]]\n  address = \"127.0.0.1:%d\"\n", 3+i)
	}
	doc += extra
	cfg, err := conf.Parse([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	return testEnv(tb, cfg)
}

// testHost is the Host of an Env without a server: state changes are
// published on the topology alone, and the admin user is refused.
type testHost struct{}

func (testHost) BackendStateChanged(*health.Backend, health.State, health.State, string) {}

func (testHost) RefuseAdminOnDataPort(host string) *protocol.SQLError {
	return protocol.ERAccessDenied.New("Access denied for user 'admin'@'%s'", host)
}

// testEnv builds the Env of cfg as a server would, without starting
// anything; its pools close with the test.
func testEnv(tb testing.TB, cfg *conf.Config) *Env {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e, err := NewEnv(cfg, Options{Log: zap.NewNop(), Ctx: ctx, Host: testHost{}, Topo: health.NewTopology(cfg),
		Metrics: observe.NewMetrics(), Digests: observe.NewDigests()})
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cancel()
		for _, p := range e.Pools() {
			p.Close()
		}
	})
	return e
}

const benchPointSelect = "SELECT c FROM sbtest1 WHERE id=5012"

// BenchmarkPlanRoutedRead plans a repeated read outside a transaction, as
// Session.comQuery does before it touches a backend: the router's cached
// classification of the COM_QUERY payload, then the session's route.
func BenchmarkPlanRoutedRead(b *testing.B) {
	srv := benchServer(b)
	s := withLegs(&Session{env: srv})
	s.cluster = srv.topo.Current().Clusters[0]
	p := append([]byte{protocol.ComQuery}, benchPointSelect...)
	srv.router.ClassifyBytes(p[1:])
	b.ReportAllocs()
	for b.Loop() {
		plan := s.env.router.ClassifyBytes(p[1:])
		if s.route(plan) != router.TargetReplica {
			b.Fatal("a read outside a transaction was not routed to a replica")
		}
	}
}

// benchConn is a net.Conn whose reads serve a fixed byte slice (then io.EOF)
// and whose writes are counted and dropped. rewind serves the slice again.
type benchConn struct {
	in      []byte
	off     int
	written int64
}

func (c *benchConn) rewind() { c.off = 0 }

func (c *benchConn) Read(p []byte) (int, error) {
	if c.off == len(c.in) {
		return 0, io.EOF
	}
	n := copy(p, c.in[c.off:])
	c.off += n
	return n, nil
}

func (c *benchConn) Write(p []byte) (int, error) {
	c.written += int64(len(p))
	return len(p), nil
}

func (c *benchConn) Close() error                     { return nil }
func (c *benchConn) LocalAddr() net.Addr              { return benchAddr{} }
func (c *benchConn) RemoteAddr() net.Addr             { return benchAddr{} }
func (c *benchConn) SetDeadline(time.Time) error      { return nil }
func (c *benchConn) SetReadDeadline(time.Time) error  { return nil }
func (c *benchConn) SetWriteDeadline(time.Time) error { return nil }

type benchAddr struct{}

func (benchAddr) Network() string { return "bench" }
func (benchAddr) String() string  { return "bench" }

// benchPackets frames payloads as consecutive packets from sequence id seq on.
func benchPackets(seq uint8, payloads ...[]byte) []byte {
	var out []byte
	for _, p := range payloads {
		out = append(out, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), seq)
		out = append(out, p...)
		seq++
	}
	return out
}

// benchColumn is the column definition of sbtest1.c CHAR(120).
func benchColumn() []byte {
	col := protocol.AppendLenEncString(nil, []byte("def"))
	for _, s := range []string{"sbtest", "sbtest1", "sbtest1", "c", "c"} {
		col = protocol.AppendLenEncString(col, []byte(s))
	}
	return append(col, 0x0c, 45, 0, 0xe0, 1, 0, 0, 0xfe, 0, 0, 0, 0, 0)
}

var benchC = []byte(strings.Repeat("83868641912-", 10)[:119])

// benchTextResult is a backend's answer to benchPointSelect as COM_QUERY:
// one column, one text row, classic EOF framing.
func benchTextResult() []byte {
	eof := protocol.AppendEOF(nil, 0, protocol.StatusAutocommit)
	return benchPackets(1, []byte{1}, benchColumn(), eof, protocol.AppendLenEncString(nil, benchC), eof)
}

// benchBinaryResult is the same answer to a COM_STMT_EXECUTE: the row in
// the binary protocol (header 0x00, a NULL bitmap of one byte, the value).
func benchBinaryResult() []byte {
	eof := protocol.AppendEOF(nil, 0, protocol.StatusAutocommit)
	row := protocol.AppendLenEncString([]byte{0, 0}, benchC)
	return benchPackets(1, []byte{1}, benchColumn(), eof, row, eof)
}

// benchExecute is a COM_STMT_EXECUTE of statement 1 with one INT parameter
// (id = 5012); bound says whether it carries the parameter type, as the Go
// driver does on every execute, or not, as libmysqlclient (sysbench) does
// after the first.
func benchExecute(bound bool) []byte {
	p := []byte{protocol.ComStmtExecute, 1, 0, 0, 0, protocol.CursorTypeNoCursor, 1, 0, 0, 0, 0}
	if bound {
		p = append(p, 1, protocol.TypeLong, 0)
	} else {
		p = append(p, 0)
	}
	return append(p, 0x94, 0x13, 0, 0)
}

// probed gives every backend of c the status a probe of a MariaDB server
// with the default sql_mode and no stored functions leaves, as a running
// Server's prober would have.
func probed(c *health.Cluster) {
	st := &health.Status{SQLMode: "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION",
		SQLModeKnown: true, Functions: health.Functions{}}
	c.Master.SetStatus(st)
	for _, r := range c.Replicas {
		r.SetStatus(st)
	}
}

// BenchmarkSession serves one whole command per iteration through a
// Session's command loop (serve): read the client's packet, classify, route,
// borrow a data connection from the pool, forward, relay the answer, flush,
// give the connection back unless the session is pinned, then see the
// client's EOF. The client and the data connections are benchConns lent by
// the Server's real pools; nothing is dialed. (A benchConn has no socket, so
// the pool's idle check is free here: BenchmarkCheckIdle in protocol
// measures it.) It is the per-statement cost of the proxy's glue on top of
// the protocol and router benchmarks.
func BenchmarkSession(b *testing.B) {
	okPacket := benchPackets(1, protocol.AppendOK(nil, protocol.OK{AffectedRows: 1, Status: protocol.StatusAutocommit}))
	pointSelect := append([]byte{protocol.ComQuery}, benchPointSelect...)
	okThen := func(response []byte) []byte { return append(okPacket[:len(okPacket):len(okPacket)], response...) }
	for _, bc := range []struct {
		name     string
		command  []byte
		response []byte
		replica  bool // served by the replica, else by the master
		prepared bool // the session has prepared benchPointSelect
		// sharded: sbtest1 is sharded by id over two tables of the one
		// cluster, so the statement is planned by package shard and
		// rewritten for sbtest1_0.
		sharded bool
		// replay: "schema" lends the pooled connection each time with
		// another session's default schema, "set" without the session's
		// SET NAMES, so sluice replays it (COM_INIT_DB, COM_QUERY) before
		// the command, as multiplexing does when connections change hands.
		replay string
	}{
		{"query-point-select", pointSelect, benchTextResult(), true, false, false, ""},
		// limited: the user has a statement rate (never reached) and a
		// query_timeout, so the command pays the bucket and the timer.
		{"query-point-select-limited", pointSelect, benchTextResult(), true, false, false, ""},
		{"query-point-select-sharded", pointSelect, benchTextResult(), true, false, true, ""},
		// grants: the account may SELECT on sbtest.* (not everything), so
		// each statement is checked against its grants.
		{"query-point-select-grants", pointSelect, benchTextResult(), true, false, false, ""},
		{"query-point-select-replay-schema", pointSelect, okThen(benchTextResult()), true, false, false, "schema"},
		{"query-point-select-replay-set", pointSelect, okThen(benchTextResult()), true, false, false, "set"},
		{"query-update", append([]byte{protocol.ComQuery}, "UPDATE sbtest1 SET k=k+1 WHERE id=5012"...), okPacket, false, false, false, ""},
		// scoped: LAST_INSERT_ID() on a connection that does not hold the
		// session's: sent with the session's value in its place.
		{"query-insert-scoped", append([]byte{protocol.ComQuery}, "INSERT INTO sbtest1 (k, c, pad) VALUES (LAST_INSERT_ID(), '', '')"...), okPacket, false, false, false, ""},
		{"execute-point-select-bound", benchExecute(true), benchBinaryResult(), true, true, false, ""},
		{"execute-point-select-unbound", benchExecute(false), benchBinaryResult(), true, true, false, ""},
		{"execute-point-select-bound-grants", benchExecute(true), benchBinaryResult(), true, true, false, ""},
		// rules: 20 query rules are loaded, none of which matches the
		// statement (each match field in turn), so each is tried.
		{"query-point-select-rules", pointSelect, benchTextResult(), true, false, false, ""},
		{"execute-point-select-bound-rules", benchExecute(true), benchBinaryResult(), true, true, false, ""},
		// firewall: the user enforces the firewall, and the statement's
		// digest is on its allowlist.
		{"query-point-select-firewall", pointSelect, benchTextResult(), true, false, false, ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := benchServer(b)
			if bc.sharded {
				srv = offlineServerWith(b, "", 1, "[[shard]]\nschema = \"sbtest\"\ntable = \"sbtest1\"\nkey = \"id\"\n"+
					"algorithm = \"mod\"\nclusters = [\"main\"]\ntables_per_cluster = 2\n")
			}
			if strings.HasSuffix(bc.name, "-rules") {
				srv = offlineServerWith(b, "", 1, benchRules)
				if srv.Rules().Len() != 20 {
					b.Fatalf("%d rules loaded", srv.Rules().Len())
				}
			}
			if strings.HasSuffix(bc.name, "-firewall") {
				srv = offlineServerWith(b, "", 1, "[firewall]\nmode = \"enforce\"\n")
			}
			if strings.HasSuffix(bc.name, "-limited") {
				srv = offlineServerWith(b, "", 1, "[limits]\nmax_statements_per_second = 10000000\nburst = 100000000\nquery_timeout = \"1h\"\n")
			}
			cluster := srv.topo.Current().Clusters[0]
			probed(cluster)
			cnc := &benchConn{in: benchPackets(0, bc.command)}
			s := newSession(srv, 1, cnc)
			// What handshake would have set; sysbench logs in with a
			// default schema.
			s.cluster, s.schema = cluster, "sbtest"
			// The statement sysbench prepares, as comStmtPrepare leaves
			// it: known to the client as 1, prepared on the data
			// connection as 7, its INT type seen there.
			st := &preparedStmt{id: 1, sql: benchPointSelect, plan: srv.router.Classify(benchPointSelect),
				params: 1, columns: 1, types: []byte{protocol.TypeLong, 0}, typesVersion: 1,
				schema: s.schema, text: unique.Make(stmtText{sql: benchPointSelect, schema: s.schema})}
			if bc.prepared {
				s.stmts[st.id] = st
				s.nextStmtID = st.id
			}
			if bc.replay == "set" {
				s.recordVars(srv.router.Classify("SET NAMES utf8mb4").Vars, nil)
			}
			if strings.HasSuffix(bc.name, "-grants") {
				benchGrants(b, srv, s)
			}
			if strings.HasSuffix(bc.name, "-firewall") {
				benchFirewall(b, s)
			}
			// One idle data connection in the pool of the backend that
			// serves the command, as one an earlier session gave back.
			be := cluster.Master
			if bc.replica {
				be = cluster.Replicas[0]
			}
			served := &benchConn{in: bc.response}
			c := protocol.NewConn(served)
			c.LenientSeq = true
			pool := srv.pool(be.Address)
			// A replica connection is read-only from its dial on.
			conn := &BackendConn{Conn: c, backend: be, pool: pool, key: s.key, status: protocol.StatusAutocommit, schema: s.schema, readOnly: bc.replica}
			st.state = s.state()
			bs := conn.addStmt(stmtKey{text: st.text, state: st.state}, 7)
			bs.typesOwner, bs.typesVersion = st, st.typesVersion
			pool.Put(conn)
			serveOne := func() {
				cnc.rewind()
				served.rewind()
				switch bc.replay {
				case "schema":
					conn.schema = "sbtest_other"
				case "set":
					conn.vars = conn.vars[:0]
				}
				if err := s.serve(); err != nil {
					b.Fatal(err)
				}
			}
			serveOne()
			if sent := served.written; bc.name == "query-insert-scoped" && sent <= int64(4+len(bc.command)) {
				b.Fatalf("the statement reached the backend as %d bytes, LAST_INSERT_ID() not replaced", sent)
			}
			if sent := served.written; bc.sharded && sent <= int64(4+len(bc.command)) {
				// sbtest1 became `sbtest1_0` AS `sbtest1`: the text grew.
				b.Fatalf("the sharded statement reached the backend as %d bytes, not rewritten", sent)
			}
			// The client got the backend's answer, whole and alone.
			want := int64(len(served.in))
			if bc.replay != "" {
				want -= int64(len(okPacket)) // the replayed command's OK stays in sluice
			}
			if served.off != len(served.in) || conn.Buffered() != 0 || conn.broken || cnc.written != want ||
				conn.schema != s.schema || len(conn.vars) != len(s.vars) {
				b.Fatalf("the command was not served whole by the pooled data connection: client got %d bytes, want %d",
					cnc.written, want)
			}
			if open, idle, _ := pool.Stats(); idle == 0 {
				b.Fatalf("pool has %d open, %d idle connections after the command; the session is pinned: %v", open, idle, s.pinned())
			}
			b.ReportAllocs()
			for b.Loop() {
				serveOne()
			}
		})
	}
}

// benchRules are 20 query rules that do not match the benchmarks'
// statements: one per match field in turn, the last of each kind with an
// action.
var benchRules = func() string {
	fields := []string{`pattern = "(?i)^UPDATE sbtest2"`, `digest = "select c from sbtest2 where id = ?"`,
		`digest = "0123456789abcdef"`, `user = "nobody"`, `schema = "other"`, `client_address = "192.168.0.0/16"`,
		`kind = "ddl"`, `cluster = "main"` + "\nuser = \"nobody\"", `kind = "txn"`, `pattern = "FOR UPDATE$"`}
	var b strings.Builder
	for i := range 20 {
		fmt.Fprintf(&b, "[[rule]]\nname = \"r%d\"\n%s\n", i, fields[i%len(fields)])
		if i >= 10 {
			b.WriteString("route = \"master\"\nlog = true\n")
		}
	}
	return b.String()
}()

// BenchmarkSessionPrepareExecuteClose serves the three commands the Go
// driver sends for one db.Query with arguments (without interpolateParams):
// COM_STMT_PREPARE, COM_STMT_EXECUTE and COM_STMT_CLOSE of the point select,
// through the Session's command loop and a pooled replica connection.
func BenchmarkSessionPrepareExecuteClose(b *testing.B) {
	srv := benchServer(b)
	cluster := srv.topo.Current().Clusters[0]
	prepare := append([]byte{protocol.ComStmtPrepare}, benchPointSelect...)
	execute := benchExecute(true)
	closeStmt := []byte{protocol.ComStmtClose, 1, 0, 0, 0}
	client := append(append(benchPackets(0, prepare), benchPackets(0, execute)...), benchPackets(0, closeStmt)...)
	// Where the statement id sits in the client's stream: sluice hands out
	// a new one per prepare.
	executeID := len(benchPackets(0, prepare)) + 4 + 1
	closeID := len(client) - len(closeStmt) + 1
	cnc := &benchConn{in: client}
	s := newSession(srv, 1, cnc)
	s.cluster, s.schema = cluster, "sbtest"

	// The replica's answers: PrepareOK (statement 7, 1 column, 1
	// parameter), the parameter and column definitions, then the result.
	prepareOK := []byte{0, 7, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0}
	eof := protocol.AppendEOF(nil, 0, protocol.StatusAutocommit)
	replica := append(benchPackets(1, prepareOK, benchColumn(), eof, benchColumn(), eof), benchBinaryResult()...)
	rnc := &benchConn{in: replica}
	c := protocol.NewConn(rnc)
	c.LenientSeq = true
	be := cluster.Replicas[0]
	pool := srv.pool(be.Address)
	conn := &BackendConn{Conn: c, backend: be, pool: pool, key: s.key, status: protocol.StatusAutocommit, schema: s.schema, readOnly: true}
	pool.Put(conn)
	serveThree := func() {
		cnc.rewind()
		rnc.rewind()
		id := s.nextStmtID + 1
		binary.LittleEndian.PutUint32(client[executeID:], id)
		binary.LittleEndian.PutUint32(client[closeID:], id)
		if err := s.serve(); err != nil {
			b.Fatal(err)
		}
	}
	serveThree()
	wantClient := int64(len(replica)) // all of it, with sluice's statement id
	if rnc.off != len(rnc.in) || conn.broken || cnc.written != wantClient || len(s.stmts) != 0 {
		b.Fatalf("prepare, execute, close not served: client got %d bytes, want %d; %d statements left",
			cnc.written, wantClient, len(s.stmts))
	}
	if _, idle, _ := pool.Stats(); idle != 1 {
		b.Fatal("the replica connection did not go back to its pool after COM_STMT_CLOSE")
	}
	b.ReportAllocs()
	for b.Loop() {
		serveThree()
	}
}

// withLegs gives a Session made as a literal the one leg and the context
// newSession makes.
func withLegs(s *Session) *Session {
	s.legs = make([]clusterLeg, 1)
	s.clusterLeg = &s.legs[0]
	return s
}

// benchGrants gives session s an account that may read sbtest.* (a
// database grant, so every statement is checked, not waved through as for
// ALL PRIVILEGES ON *.*).
func benchGrants(b *testing.B, env *Env, s *Session) {
	set, err := grants.Parse("bench", "%", []string{
		"GRANT USAGE ON *.* TO `bench`@`%`",
		"GRANT SELECT ON `sbtest`.* TO `bench`@`%`",
	})
	if err != nil {
		b.Fatal(err)
	}
	env.grants = &auth.GrantsCache{}
	e := env.grants.Put(set)
	s.grants = &sessionGrants{entry: e, active: e.Active("")}
	if s.grants.active.All() {
		b.Fatal("the bench account may do everything: nothing would be checked")
	}
}
