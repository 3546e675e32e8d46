package protocol

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// Microbenchmarks of the per-statement protocol work: reading a command,
// writing an OK, relaying a result, decoding a COM_STMT_EXECUTE. They run
// over benchConn, an in-memory net.Conn, so they measure sluice's code and
// not a transport (net.Pipe is synchronous and costs more than what it
// carries). `make microbench` runs them with -benchmem.

// benchConn is a net.Conn whose reads serve a fixed byte slice (then io.EOF)
// and whose writes are counted and dropped. rewind serves the slice again.
// It is not safe for concurrent use.
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

// benchStream frames payloads as consecutive packets from sequence id seq on.
func benchStream(seq uint8, payloads ...[]byte) []byte {
	var b []byte
	for _, p := range payloads {
		b = append(b, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), seq)
		b = append(b, p...)
		seq++
	}
	return b
}

// textResult builds the packets of a text-protocol result set (classic EOF
// framing, as sluice negotiates it) with the given columns and rows.
func textResult(columns []string, rows [][]string) [][]byte {
	packets := [][]byte{AppendLenEncInt(nil, uint64(len(columns)))}
	for _, c := range columns {
		packets = append(packets, colDef(c))
	}
	packets = append(packets, AppendEOF(nil, 0, StatusAutocommit))
	for _, r := range rows {
		packets = append(packets, row(r...))
	}
	return append(packets, AppendEOF(nil, 0, StatusAutocommit))
}

// sbtestC and sbtestPad are values shaped like sysbench's sbtest columns
// c CHAR(120) and pad CHAR(60).
var (
	sbtestC   = strings.Repeat("83868641912-28773972837-60736120486-", 4)[:119]
	sbtestPad = strings.Repeat("67847967377-48000963322-", 3)[:59]
)

// benchRelay relays one response per iteration from a backend Conn serving
// stream to a client Conn that discards it.
func benchRelay(b *testing.B, kind ResponseKind, packets [][]byte) {
	stream := benchStream(1, packets...)
	bnc, cnc := &benchConn{in: stream}, &benchConn{}
	backend, client := NewConn(bnc), NewConn(cnc)
	backend.LenientSeq = true
	payload := 0
	for _, p := range packets {
		payload += len(p)
	}
	relayOnce := func() RelayResult {
		bnc.rewind()
		client.SetSeq(1)
		res, err := Relay(client, backend, kind, false)
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	// Check once that a response is relayed whole and nothing is left over
	// for the next iteration.
	if res := relayOnce(); res.Packets != len(packets) || res.Bytes != int64(payload) || backend.Buffered() != 0 || !res.HasStatus && res.Err == nil {
		b.Fatalf("relayed %d packets, %d bytes, %d left buffered, final status seen %v, ERR %v; want %d packets, %d bytes, 0 left, a status or an ERR",
			res.Packets, res.Bytes, backend.Buffered(), res.HasStatus, res.Err, len(packets), payload)
	}
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		relayOnce()
	}
}

// BenchmarkRelay1Row relays a sysbench point select's answer:
// SELECT c FROM sbtest1 WHERE id=?, one column, one row.
func BenchmarkRelay1Row(b *testing.B) {
	benchRelay(b, ResponseResult, textResult([]string{"c"}, [][]string{{sbtestC}}))
}

// BenchmarkRelay1000Rows relays 1,000 rows of
// SELECT id, k, c, pad FROM sbtest1 WHERE id BETWEEN ? AND ? (about 190 KB,
// so the client's write buffer flushes on its own several times).
func BenchmarkRelay1000Rows(b *testing.B) {
	rows := make([][]string, 1000)
	for i := range rows {
		rows[i] = []string{itoa(10000 + i), itoa(49000 + i*7), sbtestC, sbtestPad}
	}
	benchRelay(b, ResponseResult, textResult([]string{"id", "k", "c", "pad"}, rows))
}

// BenchmarkRelayOK relays the OK packet that answers a write.
func BenchmarkRelayOK(b *testing.B) {
	benchRelay(b, ResponseResult, [][]byte{AppendOK(nil, OK{AffectedRows: 1, Status: StatusAutocommit})})
}

// BenchmarkRelayErr relays the ERR packet that answers a failed statement
// (a duplicate key), which the relay also decodes into RelayResult.Err.
func BenchmarkRelayErr(b *testing.B) {
	benchRelay(b, ResponseResult, [][]byte{AppendErr(nil, &SQLError{Code: 1062, State: "23000",
		Message: "Duplicate entry '5012' for key 'PRIMARY'"})})
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// benchParam is one parameter of a COM_STMT_EXECUTE built by benchExecute.
type benchParam struct {
	typ   byte
	value []byte // encoded as the binary protocol sends it
}

// benchExecute builds a COM_STMT_EXECUTE for statement 1 (no NULLs) and
// returns it with its parameter types; bound says whether the packet carries
// the types (new-params-bound flag 1).
func benchExecute(bound bool, params []benchParam) (p, types []byte) {
	p = append(p, ComStmtExecute, 1, 0, 0, 0, CursorTypeNoCursor, 1, 0, 0, 0)
	p = append(p, make([]byte, (len(params)+7)/8)...)
	for _, prm := range params {
		types = append(types, prm.typ, 0)
	}
	if bound {
		p = append(p, 1)
		p = append(p, types...)
	} else {
		p = append(p, 0)
	}
	for _, prm := range params {
		p = append(p, prm.value...)
	}
	return p, types
}

func longParam(v int32) benchParam {
	return benchParam{TypeLong, binary.LittleEndian.AppendUint32(nil, uint32(v))}
}

func stringParam(s string) benchParam {
	return benchParam{TypeString, AppendLenEncString(nil, []byte(s))}
}

// benchStmt stands for a session's prepared statement: ParseExecute gets
// its long-data test as a method value, as the proxy passes it.
type benchStmt struct{ longData map[int][]byte }

func (st *benchStmt) hasLongData(i int) bool {
	_, ok := st.longData[i]
	return ok
}

// BenchmarkParseExecute decodes COM_STMT_EXECUTE packets shaped like
// sysbench's: four INT parameters with their types (the Go driver's way,
// types on every execute), the same without types (libmysqlclient's way
// after the first execute), and oltp_insert's INSERT INTO sbtest1 (id, k,
// c, pad) VALUES (?, ?, ?, ?) with two strings.
func BenchmarkParseExecute(b *testing.B) {
	ints := []benchParam{longParam(5012), longParam(5111), longParam(4987), longParam(50000)}
	insert := []benchParam{longParam(5012), longParam(49876), stringParam(sbtestC), stringParam(sbtestPad)}
	for _, bc := range []struct {
		name   string
		bound  bool
		params []benchParam
	}{
		{"ints-bound", true, ints},
		{"ints-unbound", false, ints},
		{"strings-bound", true, insert},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, types := benchExecute(bc.bound, bc.params)
			st := &benchStmt{}
			if bc.bound {
				types = nil // as the proxy has them before the first execute
			}
			if _, err := ParseExecute(p, len(bc.params), types, st.hasLongData); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				e, err := ParseExecute(p, len(bc.params), types, st.hasLongData)
				if err != nil || e.StatementID != 1 {
					b.Fatal(e, err)
				}
			}
		})
	}
}

// BenchmarkReadPacket reads one small COM_QUERY from a client, as the
// session's command loop does.
func BenchmarkReadPacket(b *testing.B) {
	payload := append([]byte{ComQuery}, "SELECT c FROM sbtest1 WHERE id=5012"...)
	nc := &benchConn{in: benchStream(0, payload)}
	c := NewConn(nc)
	b.SetBytes(int64(len(nc.in)))
	b.ReportAllocs()
	for b.Loop() {
		nc.rewind()
		c.ResetSeq()
		p, err := c.ReadPacket()
		if err != nil || len(p) != len(payload) {
			b.Fatal(len(p), err)
		}
	}
}

// BenchmarkWriteOK writes and flushes the OK packet of a command sluice
// answers itself (COM_PING, COM_RESET_CONNECTION, the end of a login):
// "alloc" builds the payload in a new slice each time, as
// proxy.Session.writeOK does; "reuse" appends to a buffer kept between
// commands.
func BenchmarkWriteOK(b *testing.B) {
	ok := OK{Status: StatusAutocommit}
	b.Run("alloc", func(b *testing.B) {
		nc := &benchConn{}
		c := NewConn(nc)
		b.ReportAllocs()
		for b.Loop() {
			c.SetSeq(1)
			if err := c.WritePacketFlush(AppendOK(nil, ok)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reuse", func(b *testing.B) {
		nc := &benchConn{}
		c := NewConn(nc)
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			c.SetSeq(1)
			buf = AppendOK(buf[:0], ok)
			if err := c.WritePacketFlush(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCheckIdle is the liveness check a pool makes before it lends an
// idle backend connection, on a real loopback TCP connection (it peeks at
// the socket, which a benchConn does not have). With a connection borrowed
// per statement it runs once per statement.
func BenchmarkCheckIdle(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Skip("no loopback TCP:", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, _ := ln.Accept()
		accepted <- nc
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	if peer := <-accepted; peer != nil {
		defer peer.Close()
	}
	c := NewConn(nc)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.CheckIdle(); err != nil {
			b.Fatal(err)
		}
	}
}
