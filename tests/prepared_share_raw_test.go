package tests

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/sandbox"
)

// cursorText returns up to ? rows; the server opens a cursor for it.
const cursorText = "SELECT seq FROM information_schema.columns c JOIN (SELECT 1 AS seq UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5) s LIMIT ?"

// rawLoginAsUser logs in on addr as user (no TLS, no schema).
func rawLoginAsUser(t *testing.T, addr, user, password string) *protocol.Conn {
	t.Helper()
	c := rawDial(t, addr)
	if _, err := protocol.ClientHandshake(c, protocol.ClientConfig{User: user, Password: password,
		Capabilities: protocol.BackendCapabilities}); err != nil {
		t.Fatalf("raw login to %s: %v", addr, err)
	}
	return c
}

// cursorExec executes statement id with a read-only cursor and limit, and
// says what came back.
func cursorExec(t *testing.T, c *protocol.Conn, id uint32, limit int64) string {
	t.Helper()
	c.ResetSeq()
	if err := c.WritePacketFlush(executePacket(id, protocol.CursorTypeReadOnly, true, limit)); err != nil {
		t.Fatal(err)
	}
	rows, status, e := readBinaryResult(t, c)
	if e != nil {
		return fmt.Sprintf("ERR %d", e.Code)
	}
	if status&protocol.StatusCursorExists != 0 {
		return "cursor"
	}
	return fmt.Sprintf("%d rows", rows)
}

// cursorFetch fetches up to n rows of id's cursor.
func cursorFetch(t *testing.T, c *protocol.Conn, id uint32, n uint32) string {
	t.Helper()
	p := []byte{protocol.ComStmtFetch, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(p[1:], id)
	binary.LittleEndian.PutUint32(p[5:], n)
	c.ResetSeq()
	if err := c.WritePacketFlush(p); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for {
		q, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if protocol.IsErr(q) {
			e, _ := protocol.ParseErr(q)
			return fmt.Sprintf("ERR %d", e.Code)
		}
		if protocol.IsEOF(q) {
			st := uint16(q[3]) | uint16(q[4])<<8
			return fmt.Sprintf("%d rows last=%v", rows, st&protocol.StatusLastRowSent != 0)
		}
		rows++
	}
}

// stmtCommand sends a COM_STMT_CLOSE or COM_STMT_RESET for id; a reset's
// answer is returned.
func stmtCommand(t *testing.T, c *protocol.Conn, cmd byte, id uint32) string {
	t.Helper()
	p := binary.LittleEndian.AppendUint32([]byte{cmd}, id)
	c.ResetSeq()
	if err := c.WritePacketFlush(p); err != nil {
		t.Fatal(err)
	}
	if cmd == protocol.ComStmtClose {
		return "closed"
	}
	q, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	if protocol.IsErr(q) {
		e, _ := protocol.ParseErr(q)
		return fmt.Sprintf("ERR %d", e.Code)
	}
	return "OK"
}

// TestPreparedCursorsShareText: two statements of one session with the same
// text, each with an open cursor, interleaved fetches, a cursor closed by
// COM_STMT_CLOSE, COM_STMT_RESET and COM_RESET_CONNECTION with cursors
// open, and a client leaving with a cursor open: the client sees what a
// server shows, and no backend statement is left beyond the cache's bound.
func TestPreparedCursorsShareText(t *testing.T) {
	const cache = 2
	steps := func(login func() *protocol.Conn) []string {
		a := login()
		s1 := rawPrepare(t, a, cursorText).StatementID
		s2 := rawPrepare(t, a, cursorText).StatementID
		out := []string{cursorExec(t, a, s1, 5), cursorExec(t, a, s2, 3)}
		out = append(out, cursorFetch(t, a, s1, 2), cursorFetch(t, a, s2, 2), cursorFetch(t, a, s1, 10), cursorFetch(t, a, s2, 10))
		out = append(out, cursorExec(t, a, s1, 4), stmtCommand(t, a, protocol.ComStmtClose, s1))
		out = append(out, cursorExec(t, a, s2, 2), cursorFetch(t, a, s2, 10), cursorFetch(t, a, s1, 1))
		out = append(out, cursorExec(t, a, s2, 5), cursorFetch(t, a, s2, 1), stmtCommand(t, a, protocol.ComStmtReset, s2), cursorFetch(t, a, s2, 1))
		// A plain execute after a cursor one, then a cursor again.
		c := a
		c.ResetSeq()
		if err := c.WritePacketFlush(executePacket(s2, 0, true, 3)); err != nil {
			t.Fatal(err)
		}
		rows, _, e := readBinaryResult(t, c)
		out = append(out, fmt.Sprint("plain ", rows, " ", e))
		out = append(out, cursorExec(t, a, s2, 5))
		p := rawCommand(t, a, []byte{protocol.ComResetConnection})
		out = append(out, fmt.Sprint("reset ok=", protocol.IsOK(p)), cursorFetch(t, a, s2, 1))
		s3 := rawPrepare(t, a, cursorText).StatementID
		out = append(out, cursorExec(t, a, s3, 5))
		a.Close()
		b := login()
		return append(out, rawValue(t, b, "SELECT 7"))
	}
	direct := steps(func() *protocol.Conn { return rawLoginAsUser(t, env.topo.Master.Addr(), "root", "") })
	before := preparedCounts(t)
	srv, err := startProxyWith(env.topo, sandbox.SluiceOptions{ProxyKeys: []string{"backend_statement_cache = " + strconv.Itoa(cache)},
		ClusterKeys: []string{"pool_size = 1", `consistency = "strong"`}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	o := env.topo.Opts
	got := steps(func() *protocol.Conn { return rawLoginAsUser(t, srv.Addr().String(), o.AppUser, o.AppPassword) })
	if fmt.Sprint(got) != fmt.Sprint(direct) {
		t.Fatalf("through sluice %q\ndirect         %q", got, direct)
	}
	t.Logf("transcript %q", got)
	checkPreparedGrowth(t, before, cache, "after the cursor steps")
}
