package dataplane

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/protocol/fakebackend"
)

// Unit tests of a Session against scripted backends: a master and a
// replica are fakebackend servers on loopback ports, the Env is built
// from a configuration naming them (no Server, no probes: backend states
// are what a test sets), and the client is a wireClient that keeps what
// the session writes. Commands are fed to dispatch one at a time, as the
// serve loop does.

// serviceUser and servicePassword are the cluster's service account, the
// one account the fake backends let in.
const (
	serviceUser     = "sluice"
	servicePassword = "svc-pw"
)

// readOnlySetup is what sluice sends on every new replica connection to a
// MariaDB server (setReadOnly): the fake replica accepts it.
const readOnlySetup = `SET SESSION tx_read_only = 1, SESSION session_track_system_variables = .*`

// fakeCluster is a Session of cluster "main" whose master and replica are
// fake backends.
type fakeCluster struct {
	t               *testing.T
	master, replica *fakebackend.Server
	env             *Env
	s               *Session
	client          *wireClient
}

// newFakeCluster starts the two fake backends and builds the Env and a
// logged-in Session (no schema, no SET yet) for them. healthKeys go in the
// [health] table, clusterKeys in the [[cluster]] table. Everything is
// closed when the test ends, and the test fails if a goroutine of the
// fakes, the pools or the session outlives it.
func newFakeCluster(t *testing.T, healthKeys, clusterKeys string) *fakeCluster {
	t.Helper()
	return newFakeClusterWith(t, healthKeys, clusterKeys, "")
}

// newFakeClusterWith is newFakeCluster with the backend named by
// unreachable ("master" or "replica") at an address that refuses
// connections instead of a fake; its field stays nil.
func newFakeClusterWith(t *testing.T, healthKeys, clusterKeys, unreachable string) *fakeCluster {
	t.Helper()
	t.Cleanup(func() { checkNoLeaks(t) }) // runs last
	fc := &fakeCluster{t: t}
	addr := func(role string, srv **fakebackend.Server) string {
		if role == unreachable {
			return refusingAddr(t)
		}
		*srv = startFake(t)
		return (*srv).Addr()
	}
	masterAddr, replicaAddr := addr("master", &fc.master), addr("replica", &fc.replica)
	if fc.replica != nil {
		fc.replica.OnPattern(readOnlySetup, fakebackend.OK(0, 0))
	}
	doc := fmt.Sprintf("[auth]\naddress = \"127.0.0.1:1\"\n[health]\n%s\n"+
		"[[cluster]]\nname = \"main\"\nuser = %q\npassword = %q\nmaster = %q\n%s\n"+
		"  [[cluster.replica]]\n  address = %q\n",
		healthKeys, serviceUser, servicePassword, masterAddr, clusterKeys, replicaAddr)
	cfg, err := conf.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	fc.env = testEnv(t, cfg)
	fc.client = &wireClient{}
	s := newSession(fc.env, 1, fc.client)
	// What a login with the default collation and no schema leaves.
	s.user, s.key = "app", poolKey{collation: DefaultCollation}
	s.initLeg(s.clusterLeg, 0)
	probed(s.cluster)
	fc.s = s
	t.Cleanup(s.close) // runs first: the connections go back before the pools close
	return fc
}

// refusingAddr returns a loopback address that refuses connections until
// the test ends: the local end of an open connection, whose port no
// listener (of this process or another test binary) can take meanwhile,
// as it could a closed listener's.
func refusingAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		peer.Close()
	})
	return c.LocalAddr().String()
}

// startFake starts a fake backend with the service account; it is closed
// when the test ends.
func startFake(t *testing.T) *fakebackend.Server {
	t.Helper()
	srv, err := fakebackend.Start(fakebackend.Config{User: serviceUser, Password: servicePassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// masterBackend and replicaBackend are the session's health.Backends.
func (fc *fakeCluster) masterBackend() *health.Backend  { return fc.s.cluster.Master }
func (fc *fakeCluster) replicaBackend() *health.Backend { return fc.s.cluster.Replicas[0] }

// run serves the command payload p as the serve loop does once it has
// read it: dispatch, then the per-command bookkeeping and the release of
// connections an unpinned session does not keep. It returns dispatch's
// error (one that ends the session).
func (fc *fakeCluster) run(p []byte) error {
	s := fc.s
	s.client.ResetSeq()
	s.client.SetSeq(1) // the command packet was number 0
	s.pendingTxWrite = -1
	s.drain.Store(drainBusy) // what awake and the next idleForDrain do
	s.cmd.reset()
	defer s.drain.Store(drainIdle)
	s.cmdStart = mono.Now()
	err := s.dispatch(p)
	if err == nil {
		s.finishCommand(p, s.cmdStart)
		s.afterCommand()
	}
	return err
}

// command runs p and returns the packets the client got, and dispatch's
// error.
func (fc *fakeCluster) command(p []byte) ([][]byte, error) {
	fc.t.Helper()
	err := fc.run(p)
	return fc.client.take(fc.t), err
}

// query serves COM_QUERY sql and returns the client's one reply; dispatch
// must not end the session.
func (fc *fakeCluster) query(sql string) reply {
	fc.t.Helper()
	pkts, err := fc.command(comQuery(sql))
	if err != nil {
		fc.t.Fatalf("%q ended the session: %v", sql, err)
	}
	return oneReply(fc.t, sql, pkts)
}

func comQuery(sql string) []byte { return append([]byte{protocol.ComQuery}, sql...) }

// wireClient is the client's end of a Session under test: it has nothing
// to read (commands are handed to dispatch) and keeps what is written.
type wireClient struct {
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *wireClient) Read([]byte) (int, error) { return 0, io.EOF }

func (c *wireClient) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}

func (c *wireClient) Close() error                     { return nil }
func (c *wireClient) LocalAddr() net.Addr              { return benchAddr{} }
func (c *wireClient) RemoteAddr() net.Addr             { return benchAddr{} }
func (c *wireClient) SetDeadline(time.Time) error      { return nil }
func (c *wireClient) SetReadDeadline(time.Time) error  { return nil }
func (c *wireClient) SetWriteDeadline(time.Time) error { return nil }

// take returns the payloads of the packets written since the last take,
// checking that their sequence ids count up from 1 (the command was 0).
func (c *wireClient) take(t *testing.T) [][]byte {
	t.Helper()
	c.mu.Lock()
	b := bytes.Clone(c.out.Bytes())
	c.out.Reset()
	c.mu.Unlock()
	var pkts [][]byte
	for seq := byte(1); len(b) > 0; seq++ {
		if len(b) < 4 {
			t.Fatalf("client got a torn packet header % x", b)
		}
		n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		if len(b) < 4+n {
			t.Fatalf("client got a torn packet: %d of %d bytes", len(b)-4, n)
		}
		if b[3] != seq {
			t.Fatalf("client packet %d has sequence id %d, want %d", len(pkts), b[3], seq)
		}
		pkts = append(pkts, b[4:4+n])
		b = b[4+n:]
	}
	return pkts
}

// reply is one answer as the client read it: an OK, an ERR, or a text
// result set (which may end in an ERR instead of its EOF).
type reply struct {
	ok   *protocol.OK
	err  *protocol.SQLError
	cols int
	rows [][]string // NULL reads as "NULL"
}

func (r reply) String() string {
	switch {
	case r.err != nil && r.cols > 0:
		return fmt.Sprintf("%d columns, rows %q, then ERR %d %s", r.cols, r.rows, r.err.Code, r.err.Message)
	case r.err != nil:
		return fmt.Sprintf("ERR %d %s", r.err.Code, r.err.Message)
	case r.ok != nil:
		return fmt.Sprintf("OK (%d rows affected, status %#x)", r.ok.AffectedRows, r.ok.Status)
	}
	return fmt.Sprintf("%d columns, rows %q", r.cols, r.rows)
}

// oneReply parses pkts as exactly one reply to what.
func oneReply(t *testing.T, what string, pkts [][]byte) reply {
	t.Helper()
	if len(pkts) == 0 {
		t.Fatalf("%s: the client got no answer", what)
	}
	var r reply
	first := pkts[0]
	rest := pkts[1:]
	switch {
	case protocol.IsErr(first):
		e, err := protocol.ParseErr(first)
		if err != nil {
			t.Fatalf("%s: bad ERR % x: %v", what, first, err)
		}
		r.err = e
	case protocol.IsOK(first):
		ok, err := protocol.ParseOK(first)
		if err != nil {
			t.Fatalf("%s: bad OK % x: %v", what, first, err)
		}
		r.ok = &ok
	default:
		n, _, _, err := protocol.ReadLenEncInt(first)
		if err != nil || n == 0 || int(n) >= len(pkts) {
			t.Fatalf("%s: bad result set header % x in %d packets", what, first, len(pkts))
		}
		r.cols = int(n)
		if !protocol.IsEOF(pkts[1+r.cols]) {
			t.Fatalf("%s: no EOF after the %d column definitions", what, r.cols)
		}
		rest = pkts[2+r.cols:]
		for len(rest) > 0 {
			p := rest[0]
			rest = rest[1:]
			if protocol.IsEOF(p) {
				break
			}
			if protocol.IsErr(p) {
				r.err, _ = protocol.ParseErr(p)
				break
			}
			vals, err := protocol.ParseTextRow(p, r.cols, nil)
			if err != nil {
				t.Fatalf("%s: bad row % x: %v", what, p, err)
			}
			row := make([]string, len(vals))
			for i, v := range vals {
				row[i] = string(v)
				if v == nil {
					row[i] = "NULL"
				}
			}
			r.rows = append(r.rows, row)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%s: %d packets after the answer %v", what, len(rest), r)
	}
	return r
}

// wantRows fails unless r is a result set of exactly rows.
func wantRows(t *testing.T, what string, r reply, rows ...[]string) {
	t.Helper()
	if r.err != nil || r.ok != nil || !slices.EqualFunc(r.rows, rows, slices.Equal) {
		t.Fatalf("%s: got %v, want rows %q", what, r, rows)
	}
}

// wantErr fails unless r is ERR code (a result set cut short by it
// included) and its message holds each of parts.
func wantErr(t *testing.T, what string, r reply, code uint16, parts ...string) {
	t.Helper()
	if r.err == nil || r.err.Code != code {
		t.Fatalf("%s: got %v, want ERR %d", what, r, code)
	}
	for _, p := range parts {
		if !strings.Contains(r.err.Message, p) {
			t.Fatalf("%s: ERR %d %q does not say %q", what, code, r.err.Message, p)
		}
	}
}

// received renders what a fake backend received, logins left out, as
// "COMMAND arg" lines; readOnlySetup reads "READ ONLY".
func received(srv *fakebackend.Server) []string {
	var out []string
	for _, c := range srv.Commands() {
		switch {
		case c.Command == protocol.ComConnect:
		case c.Command == protocol.ComQuery && strings.HasPrefix(c.Arg, "SET SESSION tx_read_only = 1,"):
			out = append(out, "READ ONLY")
		case c.Arg != "":
			out = append(out, protocol.CommandName(c.Command)+" "+c.Arg)
		default:
			out = append(out, protocol.CommandName(c.Command))
		}
	}
	return out
}

// wantReceived fails unless srv received exactly want since its log was
// last cleared, then clears it.
func wantReceived(t *testing.T, name string, srv *fakebackend.Server, want ...string) {
	t.Helper()
	got := received(srv)
	srv.ClearCommands()
	if !slices.Equal(got, want) {
		t.Fatalf("the %s received:\n\t%s\nwant:\n\t%s", name, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// logins counts the connections opened to srv so far.
func logins(srv *fakebackend.Server) int {
	n := 0
	for _, c := range srv.Commands() {
		if c.Command == protocol.ComConnect {
			n++
		}
	}
	return n
}

// allStacks returns the stacks of all goroutines.
func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// checkNoLeaks fails the test if a goroutine of the fake backends, the
// data plane or the event loops is still running, after giving those that
// are ending a moment to end.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	var left string
	for deadline := time.Now().Add(5 * time.Second); ; {
		left = leakedStacks()
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	t.Errorf("goroutines left behind:\n%s", left)
}

// leakedStacks returns the stacks of goroutines, other than the caller's,
// that run code of the fakes, the data plane or the event loops.
func leakedStacks() string {
	var left []string
	for i, g := range strings.Split(allStacks(), "\n\n") {
		if i == 0 {
			continue // the caller's own
		}
		for _, mark := range []string{"fakebackend.", "dataplane.(*", "internal/evloop."} {
			if strings.Contains(g, mark) {
				left = append(left, g)
				break
			}
		}
	}
	return strings.Join(left, "\n\n")
}
