package fakebackend_test

import (
	"errors"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/protocol/fakebackend"
)

func start(t *testing.T, cfg fakebackend.Config) *fakebackend.Server {
	t.Helper()
	srv, err := fakebackend.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// dial logs in to srv with protocol's own client side of the handshake.
func dial(t *testing.T, srv *fakebackend.Server, user, password string) (*protocol.Conn, *protocol.Greeting, error) {
	t.Helper()
	nc, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := protocol.NewConn(nc)
	g, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: user, Password: password, Database: "shop",
		Capabilities: protocol.BackendCapabilities | protocol.ClientFoundRows})
	return c, g, err
}

// answer is a decoded response to a command.
type answer struct {
	ok      protocol.OK
	err     *protocol.SQLError
	eof     bool // a lone EOF (COM_SET_OPTION)
	columns []string
	rows    [][]string // "NULL" for NULL
	status  uint16     // of the OK, or of the EOF that ends the rows
}

// send writes one command and reads its response.
func send(t *testing.T, c *protocol.Conn, cmd byte, arg string) (answer, error) {
	t.Helper()
	c.ResetSeq()
	if err := c.WritePacketFlush(append([]byte{cmd}, arg...)); err != nil {
		return answer{}, err
	}
	return read(c)
}

func read(c *protocol.Conn) (answer, error) {
	var a answer
	p, err := c.ReadPacket()
	if err != nil {
		return a, err
	}
	switch {
	case protocol.IsOK(p):
		a.ok, err = protocol.ParseOK(p)
		a.status = a.ok.Status
		return a, err
	case protocol.IsErr(p):
		a.err, err = protocol.ParseErr(p)
		return a, err
	case protocol.IsEOF(p):
		a.eof, a.status = true, protocol.EOFStatus(p)
		return a, nil
	}
	n, _, _, err := protocol.ReadLenEncInt(p)
	if err != nil {
		return a, err
	}
	for range n {
		if p, err = c.ReadPacket(); err != nil {
			return a, err
		}
		d, err := protocol.ParseColumnDef(p)
		if err != nil {
			return a, err
		}
		a.columns = append(a.columns, string(d.Name))
	}
	if p, err = c.ReadPacket(); err != nil || !protocol.IsEOF(p) {
		return a, errors.Join(err, errors.New("no EOF after the columns"))
	}
	for {
		if p, err = c.ReadPacket(); err != nil {
			return a, err
		}
		if protocol.IsEOF(p) {
			a.status = protocol.EOFStatus(p)
			return a, nil
		}
		vals, err := protocol.ParseTextRow(p, int(n), nil)
		if err != nil {
			return a, err
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = string(v)
			if v == nil {
				row[i] = "NULL"
			}
		}
		a.rows = append(a.rows, row)
	}
}

func TestScriptedAnswers(t *testing.T) {
	srv := start(t, fakebackend.Config{User: "app", Password: "pw"})
	srv.OnQuery("SELECT id, name FROM t", fakebackend.Rows([]string{"id", "name"}, []any{1, "a"}, []any{2, nil}))
	srv.OnQuery("INSERT INTO t VALUES (3)", fakebackend.OK(1, 3))
	srv.OnQuery("BEGIN", fakebackend.Result{Status: protocol.StatusAutocommit | protocol.StatusInTrans})
	srv.OnQuery("SELECT nope", fakebackend.Err(protocol.NewError(1146, "Table 'shop.nope' doesn't exist")))
	c, g, err := dial(t, srv, "app", "pw")
	if err != nil {
		t.Fatal(err)
	}
	if g.ConnectionID != 1 || !strings.Contains(g.ServerVersion, "MariaDB") {
		t.Errorf("greeting: connection %d, version %q", g.ConnectionID, g.ServerVersion)
	}
	a, err := send(t, c, protocol.ComQuery, "SELECT id, name FROM t")
	if err != nil || !slices.Equal(a.columns, []string{"id", "name"}) ||
		!slices.EqualFunc(a.rows, [][]string{{"1", "a"}, {"2", "NULL"}}, slices.Equal) || a.status != protocol.StatusAutocommit {
		t.Errorf("result set: %+v %v", a, err)
	}
	if a, err = send(t, c, protocol.ComQuery, "INSERT INTO t VALUES (3)"); err != nil || a.ok.AffectedRows != 1 || a.ok.LastInsertID != 3 {
		t.Errorf("OK: %+v %v", a, err)
	}
	if a, err = send(t, c, protocol.ComQuery, "SELECT nope"); err != nil || a.err == nil ||
		*a.err != (protocol.SQLError{Code: 1146, State: "HY000", Message: "Table 'shop.nope' doesn't exist"}) {
		t.Errorf("ERR: %+v %v", a, err)
	}
	if a, err = send(t, c, protocol.ComQuery, "SELECT unscripted"); err != nil || a.err == nil ||
		a.err.Code != protocol.ERUnknownError.Code || !strings.Contains(a.err.Message, "SELECT unscripted") {
		t.Errorf("unscripted query: %+v %v", a, err)
	}
	// The status a script set stays until another answer changes it or
	// the connection is reset.
	inTrans := protocol.StatusAutocommit | protocol.StatusInTrans
	if a, err = send(t, c, protocol.ComQuery, "BEGIN"); err != nil || a.status != inTrans {
		t.Errorf("BEGIN: %+v %v", a, err)
	}
	if a, err = send(t, c, protocol.ComPing, ""); err != nil || a.err != nil || a.eof || a.status != inTrans {
		t.Errorf("COM_PING: %+v %v", a, err)
	}
	if a, err = send(t, c, protocol.ComResetConnection, ""); err != nil || a.err != nil || a.status != protocol.StatusAutocommit {
		t.Errorf("COM_RESET_CONNECTION: %+v %v", a, err)
	}
	if a, err = send(t, c, protocol.ComInitDB, "other"); err != nil || a.err != nil || a.eof {
		t.Errorf("COM_INIT_DB: %+v %v", a, err)
	}
	if a, err = send(t, c, protocol.ComSetOption, "\x00\x00"); err != nil || !a.eof {
		t.Errorf("COM_SET_OPTION: %+v %v", a, err)
	}
	if a, err = send(t, c, protocol.ComStmtPrepare, "SELECT ?"); err != nil || a.err == nil || a.err.Code != protocol.ERUnknownCommand.Code {
		t.Errorf("COM_STMT_PREPARE: %+v %v", a, err)
	}
	if _, err = send(t, c, protocol.ComQuit, ""); err != io.EOF {
		t.Errorf("COM_QUIT: %v, want the connection closed", err)
	}
	var log []string
	for _, cmd := range srv.Commands() {
		log = append(log, cmd.String())
	}
	want := []string{`conn 1 login app (database "shop")`, "conn 1 COM_QUERY SELECT id, name FROM t",
		"conn 1 COM_QUERY INSERT INTO t VALUES (3)", "conn 1 COM_QUERY SELECT nope", "conn 1 COM_QUERY SELECT unscripted",
		"conn 1 COM_QUERY BEGIN", "conn 1 COM_PING ", "conn 1 COM_RESET_CONNECTION ", "conn 1 COM_INIT_DB other",
		"conn 1 COM_SET_OPTION ", "conn 1 COM_STMT_PREPARE SELECT ?", "conn 1 COM_QUIT "}
	if !slices.Equal(log, want) {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	if q := srv.Queries(); len(q) != 5 || q[4] != "BEGIN" {
		t.Errorf("Queries: %q", q)
	}
	srv.ClearCommands()
	if n := len(srv.Commands()); n != 0 {
		t.Errorf("%d commands after ClearCommands", n)
	}
}

func TestLogin(t *testing.T) {
	srv := start(t, fakebackend.Config{User: "app", Password: "pw"})
	for _, tc := range []struct{ user, password, using string }{{"app", "bad", "YES"}, {"other", "pw", "YES"}, {"app", "", "NO"}} {
		_, _, err := dial(t, srv, tc.user, tc.password)
		var se *protocol.SQLError
		if !errors.As(err, &se) || se.Code != protocol.ERAccessDenied.Code || se.State != "28000" ||
			!strings.Contains(se.Message, "'"+tc.user+"'") || !strings.Contains(se.Message, "using password: "+tc.using) {
			t.Errorf("%s/%q: %v, want ERR 1045", tc.user, tc.password, err)
		}
	}
	// A client that offers another plugin is asked for
	// mysql_native_password.
	nc, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := protocol.NewConn(nc)
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	g, err := protocol.ParseGreeting(p)
	if err != nil {
		t.Fatal(err)
	}
	hr := &protocol.HandshakeResponse{Capabilities: protocol.BackendCapabilities, User: "app",
		AuthResponse: protocol.CachingSHA2Response(g.Scramble, "pw"), AuthPlugin: protocol.AuthCachingSHA2}
	if err := c.WritePacketFlush(hr.Encode()); err != nil {
		t.Fatal(err)
	}
	if p, err = c.ReadPacket(); err != nil || !protocol.IsAuthSwitch(p) {
		t.Fatalf("%q %v, want an auth switch", p, err)
	}
	plugin, scramble, err := protocol.ParseAuthSwitch(p)
	if err != nil || plugin != protocol.AuthNativePassword {
		t.Fatalf("switch to %q: %v", plugin, err)
	}
	if err := c.WritePacketFlush(protocol.NativePasswordResponse(scramble, "pw")); err != nil {
		t.Fatal(err)
	}
	if p, err = c.ReadPacket(); err != nil || !protocol.IsOK(p) {
		t.Fatalf("%q %v, want OK", p, err)
	}

	open := start(t, fakebackend.Config{})
	if _, _, err := dial(t, open, "anyone", "anything"); err != nil {
		t.Errorf("a server without a User refused a login: %v", err)
	}
}

func TestRuleOrder(t *testing.T) {
	srv := start(t, fakebackend.Config{})
	srv.OnPattern(`SELECT \d+`, fakebackend.Rows([]string{"n"}, []any{"pattern"}))
	srv.OnQuery("SELECT 2", fakebackend.Rows([]string{"n"}, []any{"exact"}))
	srv.OnUnmatched(fakebackend.OK(0, 0))
	srv.OnFunc(func(c fakebackend.Command) (fakebackend.Result, bool) {
		if c.Command == protocol.ComInitDB && c.Arg == "nope" {
			return fakebackend.Err(protocol.ERBadDB.New("Unknown database 'nope'")), true
		}
		return fakebackend.Result{}, false
	})
	c, _, err := dial(t, srv, "u", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ query, want string }{
		{"SELECT 1", "pattern"}, {"SELECT 2", "exact"}, {"SELECT 1 ", ""}, {"xSELECT 1", ""},
	} {
		a, err := send(t, c, protocol.ComQuery, tc.query)
		got := ""
		if len(a.rows) == 1 {
			got = a.rows[0][0]
		}
		if err != nil || got != tc.want || a.err != nil {
			t.Errorf("%q: %+v %v, want %q", tc.query, a, err, tc.want)
		}
	}
	if a, err := send(t, c, protocol.ComInitDB, "nope"); err != nil || a.err == nil || a.err.Code != protocol.ERBadDB.Code {
		t.Errorf("COM_INIT_DB nope: %+v %v", a, err)
	}
	if a, err := send(t, c, protocol.ComInitDB, "shop"); err != nil || a.err != nil {
		t.Errorf("COM_INIT_DB shop: %+v %v", a, err)
	}
}

func TestDelay(t *testing.T) {
	srv := start(t, fakebackend.Config{})
	const delay = 30 * time.Millisecond
	srv.OnQuery("SELECT SLEEP(0.03)", fakebackend.Result{Delay: delay, Columns: fakebackend.Cols("s"), Rows: [][]any{{0}}})
	c, _, err := dial(t, srv, "u", "")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	a, err := send(t, c, protocol.ComQuery, "SELECT SLEEP(0.03)")
	if took := time.Since(t0); err != nil || len(a.rows) != 1 || took < delay {
		t.Errorf("%+v %v after %v, want the row after %v", a, err, took, delay)
	}
}

// TestCloseOnQuery drops the connection before the answer and in the middle
// of a result set; the server forgets the connection either way.
func TestCloseOnQuery(t *testing.T) {
	srv := start(t, fakebackend.Config{})
	srv.OnQuery("SELECT lost", fakebackend.Result{Close: true})
	srv.OnQuery("SELECT torn", fakebackend.Result{Columns: fakebackend.Cols("a"), Rows: [][]any{{1}, {2}, {3}},
		Close: true, CloseAfter: 4})
	c, _, err := dial(t, srv, "u", "")
	if err != nil {
		t.Fatal(err)
	}
	if a, err := send(t, c, protocol.ComQuery, "SELECT lost"); err != io.EOF {
		t.Errorf("%+v %v, want EOF", a, err)
	}
	c, _, err = dial(t, srv, "u", "")
	if err != nil {
		t.Fatal(err)
	}
	// Column count, definition, EOF, the first row; then nothing.
	a, err := send(t, c, protocol.ComQuery, "SELECT torn")
	if err != io.EOF || len(a.rows) != 1 {
		t.Errorf("%+v %v, want one row and EOF", a, err)
	}
	waitConns(t, srv, 0)
}

// waitConns polls until srv has n connections open.
func waitConns(t *testing.T, srv *fakebackend.Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(srv.Conns()) != n; {
		if time.Now().After(deadline) {
			t.Fatalf("connections %v, want %d", srv.Conns(), n)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

func TestKill(t *testing.T) {
	srv := start(t, fakebackend.Config{})
	c1, g1, err := dial(t, srv, "u", "")
	if err != nil {
		t.Fatal(err)
	}
	c2, g2, err := dial(t, srv, "u", "")
	if err != nil {
		t.Fatal(err)
	}
	if ids := srv.Conns(); len(ids) != 2 || g1.ConnectionID == g2.ConnectionID {
		t.Fatalf("connections %v, greetings %d and %d", ids, g1.ConnectionID, g2.ConnectionID)
	}
	if !srv.Kill(g1.ConnectionID) {
		t.Fatal("Kill found no connection")
	}
	if _, err := send(t, c1, protocol.ComPing, ""); err == nil {
		t.Error("a killed connection answered")
	}
	if _, err := send(t, c2, protocol.ComPing, ""); err != nil {
		t.Errorf("the other connection: %v", err)
	}
	waitConns(t, srv, 1)
	if srv.Kill(g1.ConnectionID) {
		t.Error("Kill found a closed connection")
	}
}

// TestConcurrentClients records the commands of several connections, each
// under its own id, in the order each sent them.
func TestConcurrentClients(t *testing.T) {
	srv := start(t, fakebackend.Config{})
	srv.OnPattern(`SELECT .*`, fakebackend.Rows([]string{"x"}, []any{1}))
	const clients, queries = 4, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		c, _, err := dial(t, srv, "u", "")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := range queries {
				if _, err := send(t, c, protocol.ComQuery, "SELECT "+string(rune('a'+i))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	next := map[uint32]int{}
	for _, c := range srv.Commands() {
		if c.Command != protocol.ComQuery {
			continue
		}
		if want := "SELECT " + string(rune('a'+next[c.ConnID])); c.Arg != want {
			t.Errorf("conn %d: %q, want %q", c.ConnID, c.Arg, want)
		}
		next[c.ConnID]++
	}
	if len(next) != clients {
		t.Errorf("queries of %d connections, want %d", len(next), clients)
	}
}

// TestCloseLeavesNoGoroutines closes a server with a client idle, one
// waiting for a delayed answer and one that never finished its login:
// Close returns at once and no goroutine of the server is left.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	srv, err := fakebackend.Start(fakebackend.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv.OnQuery("SELECT slow", fakebackend.Result{Delay: time.Hour})
	if _, _, err := dial(t, srv, "u", ""); err != nil {
		t.Fatal(err)
	}
	slow, _, err := dial(t, srv, "u", "")
	if err != nil {
		t.Fatal(err)
	}
	slow.ResetSeq()
	if err := slow.WritePacketFlush(append([]byte{protocol.ComQuery}, "SELECT slow"...)); err != nil {
		t.Fatal(err)
	}
	half, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	for deadline := time.Now().Add(5 * time.Second); len(srv.Queries()) == 0 || len(srv.Conns()) < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("queries %q, connections %v", srv.Queries(), srv.Conns())
		}
		time.Sleep(time.Millisecond)
	}
	t0 := time.Now()
	srv.Close()
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("Close took %v", took)
	}
	// A serve goroutine's last step is its deferred wg.Done, so Close may
	// return while that goroutine is still leaving its final frame: wait
	// (bounded) for it to be gone rather than snapshot once.
	s := serverStacks()
	for deadline := time.Now().Add(2 * time.Second); s != "" && time.Now().Before(deadline); s = serverStacks() {
		time.Sleep(time.Millisecond)
	}
	if s != "" {
		t.Errorf("goroutines left after Close:\n%s", s)
	}
	if _, err := read(slow); err == nil {
		t.Error("the waiting client got an answer after Close")
	}
	srv.Close() // a second Close is harmless
}

// serverStacks returns the stacks of goroutines running the server's code.
func serverStacks() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "fakebackend.(*Server)") || strings.Contains(g, "fakebackend.(*conn)") {
			left = append(left, g)
		}
	}
	return strings.Join(left, "\n\n")
}

func BenchmarkStartClose(b *testing.B) {
	for b.Loop() {
		srv, err := fakebackend.Start(fakebackend.Config{})
		if err != nil {
			b.Fatal(err)
		}
		srv.Close()
	}
}

func BenchmarkLoginQuery(b *testing.B) {
	srv, err := fakebackend.Start(fakebackend.Config{User: "app", Password: "pw"})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	srv.OnQuery("SELECT 1", fakebackend.Rows([]string{"1"}, []any{1}))
	for b.Loop() {
		nc, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			b.Fatal(err)
		}
		c := protocol.NewConn(nc)
		if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: "app", Password: "pw",
			Capabilities: protocol.BackendCapabilities}); err != nil {
			b.Fatal(err)
		}
		c.ResetSeq()
		if err := c.WritePacketFlush(append([]byte{protocol.ComQuery}, "SELECT 1"...)); err != nil {
			b.Fatal(err)
		}
		if _, err := read(c); err != nil {
			b.Fatal(err)
		}
		nc.Close()
	}
}
