package tests

import (
	"encoding/binary"
	"testing"

	"github.com/sluice-proxy/sluice/protocol"
)

// rawPrepare prepares sql on a raw connection and returns sluice's statement
// id and its parameter and column counts.
func rawPrepare(t *testing.T, c *protocol.Conn, sql string) protocol.PrepareOK {
	t.Helper()
	first := rawCommand(t, c, append([]byte{protocol.ComStmtPrepare}, sql...))
	if protocol.IsErr(first) {
		e, _ := protocol.ParseErr(first)
		t.Fatalf("prepare %q: %v", sql, e)
	}
	ok, err := protocol.ParsePrepareOK(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.DiscardPackets(c, ok.PrepareMetadataPackets(false)); err != nil {
		t.Fatal(err)
	}
	return ok
}

// executePacket builds a COM_STMT_EXECUTE binding LONGLONG parameters.
func executePacket(id uint32, flags byte, bindTypes bool, vals ...int64) []byte {
	p := []byte{protocol.ComStmtExecute, 0, 0, 0, 0, flags, 1, 0, 0, 0}
	binary.LittleEndian.PutUint32(p[1:], id)
	if len(vals) == 0 {
		return p
	}
	p = append(p, make([]byte, (len(vals)+7)/8)...)
	if bindTypes {
		p = append(p, 1)
		for range vals {
			p = append(p, protocol.TypeLongLong, 0)
		}
	} else {
		p = append(p, 0)
	}
	for _, v := range vals {
		p = binary.LittleEndian.AppendUint64(p, uint64(v))
	}
	return p
}

// readBinaryResult reads one binary result set (or OK/ERR) and returns the
// number of rows and the final status.
func readBinaryResult(t *testing.T, c *protocol.Conn) (rows int, status uint16, err *protocol.SQLError) {
	t.Helper()
	p, rerr := c.ReadPacket()
	if rerr != nil {
		t.Fatal(rerr)
	}
	if protocol.IsErr(p) {
		e, _ := protocol.ParseErr(p)
		return 0, 0, e
	}
	if protocol.IsOK(p) {
		ok, _ := protocol.ParseOK(p)
		return 0, ok.Status, nil
	}
	n, _, _, _ := protocol.ReadLenEncInt(p)
	if err := protocol.DiscardPackets(c, int(n)); err != nil {
		t.Fatal(err)
	}
	eof, _ := c.ReadPacket()
	status = uint16(eof[3]) | uint16(eof[4])<<8
	if status&protocol.StatusCursorExists != 0 {
		return 0, status, nil
	}
	for {
		p, rerr := c.ReadPacket()
		if rerr != nil {
			t.Fatal(rerr)
		}
		if protocol.IsEOF(p) {
			return rows, uint16(p[3]) | uint16(p[4])<<8, nil
		}
		if protocol.IsErr(p) {
			e, _ := protocol.ParseErr(p)
			return rows, 0, e
		}
		rows++
	}
}

// TestPreparedStatementCursorFetch opens a read-only cursor and fetches its
// rows in batches from the backend connection that holds it.
func TestPreparedStatementCursorFetch(t *testing.T) {
	c := rawLogin(t, env.addr)
	ok := rawPrepare(t, c, "SELECT seq FROM information_schema.columns c JOIN (SELECT 1 AS seq UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5) s LIMIT ?")
	c.ResetSeq()
	if err := c.WritePacketFlush(executePacket(ok.StatementID, protocol.CursorTypeReadOnly, true, 5)); err != nil {
		t.Fatal(err)
	}
	_, status, e := readBinaryResult(t, c)
	if e != nil || status&protocol.StatusCursorExists == 0 {
		t.Fatalf("execute with cursor: status %#x, %v", status, e)
	}
	total := 0
	for range 10 {
		fetch := []byte{protocol.ComStmtFetch, 0, 0, 0, 0, 2, 0, 0, 0}
		binary.LittleEndian.PutUint32(fetch[1:], ok.StatementID)
		c.ResetSeq()
		if err := c.WritePacketFlush(fetch); err != nil {
			t.Fatal(err)
		}
		rows, st := readUntilEOF(t, c, "COM_STMT_FETCH")
		if rows > 2 {
			t.Fatalf("fetch of 2 returned %d rows", rows)
		}
		total += rows
		if st&protocol.StatusLastRowSent != 0 {
			break
		}
	}
	if total != 5 {
		t.Fatalf("fetched %d rows through the cursor, want 5", total)
	}
	// The cursor is done: another fetch is refused cleanly.
	fetch := []byte{protocol.ComStmtFetch, 0, 0, 0, 0, 2, 0, 0, 0}
	binary.LittleEndian.PutUint32(fetch[1:], ok.StatementID)
	c.ResetSeq()
	if err := c.WritePacketFlush(fetch); err != nil {
		t.Fatal(err)
	}
	readErr(t, c, 1421)
}

// TestPreparedStatementTypesKeptBetweenExecutes: an execute that does not
// re-send parameter types (new-params-bound = 0) works, also on a backend
// that never saw the statement before (re-sent with the stored types).
func TestPreparedStatementTypesKeptBetweenExecutes(t *testing.T) {
	c := rawLogin(t, env.addr)
	ok := rawPrepare(t, c, "SELECT ? + 1")
	for i, bind := range []bool{true, false, false} {
		c.ResetSeq()
		if err := c.WritePacketFlush(executePacket(ok.StatementID, 0, bind, int64(i))); err != nil {
			t.Fatal(err)
		}
		if rows, _, e := readBinaryResult(t, c); e != nil || rows != 1 {
			t.Fatalf("execute %d (types bound: %v): rows %d, %v", i, bind, rows, e)
		}
	}
	// BEGIN moves the statement to the master, which has never seen it or
	// its types: sluice must prepare it there and bind the stored types.
	if _, err := rawQuery(t, c, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	c.ResetSeq()
	if err := c.WritePacketFlush(executePacket(ok.StatementID, 0, false, 7)); err != nil {
		t.Fatal(err)
	}
	if rows, _, e := readBinaryResult(t, c); e != nil || rows != 1 {
		t.Fatalf("execute on the master without types: rows %d, %v", rows, e)
	}
	if _, err := rawQuery(t, c, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
}

func TestBadInputStmtExecute(t *testing.T) {
	c := rawLogin(t, env.addr)
	ok := rawPrepare(t, c, "SELECT ?, ?")
	good := executePacket(ok.StatementID, 0, true, 1, 2)
	cases := map[string][]byte{
		"unknown statement id": executePacket(ok.StatementID+100, 0, true, 1, 2),
		"truncated parameters": good[:len(good)-3],
		"short null bitmap":    good[:10],
		"bad type byte": func() []byte {
			p := append([]byte(nil), good...)
			p[12] = 0x42 // first parameter's type
			return p
		}(),
		"no types ever bound": executePacket(ok.StatementID, 0, false, 1, 2),
		"trailing bytes":      append(append([]byte(nil), good...), 9, 9),
	}
	want := map[string]uint16{"unknown statement id": 1243}
	for name, p := range cases {
		c.ResetSeq()
		if err := c.WritePacketFlush(p); err != nil {
			t.Fatal(err)
		}
		code := want[name]
		if code == 0 {
			code = 1210
		}
		e := readErr(t, c, code)
		t.Logf("%s: %d %s", name, e.Code, e.Message)
	}
	// The session is still usable, and the statement too.
	c.ResetSeq()
	if err := c.WritePacketFlush(good); err != nil {
		t.Fatal(err)
	}
	if rows, _, e := readBinaryResult(t, c); e != nil || rows != 1 {
		t.Fatalf("good execute after bad ones: %d rows, %v", rows, e)
	}
}

func TestBadInputStmtFetchWithoutCursor(t *testing.T) {
	c := rawLogin(t, env.addr)
	ok := rawPrepare(t, c, "SELECT 1")
	fetch := []byte{protocol.ComStmtFetch, 0, 0, 0, 0, 1, 0, 0, 0}
	binary.LittleEndian.PutUint32(fetch[1:], ok.StatementID)
	c.ResetSeq()
	if err := c.WritePacketFlush(fetch); err != nil {
		t.Fatal(err)
	}
	readErr(t, c, 1421)
	binary.LittleEndian.PutUint32(fetch[1:], 999999)
	c.ResetSeq()
	if err := c.WritePacketFlush(fetch); err != nil {
		t.Fatal(err)
	}
	readErr(t, c, 1243)
	if got := rawValue(t, c, "SELECT 2"); got != "2" {
		t.Fatalf("session after bad fetches: %q", got)
	}
}

// TestBadInputLenEncPrefixWhereStringIsDue: 0xFB–0xFF where a
// length-encoded string is due, in the handshake response (auth data) and
// in a COM_STMT_EXECUTE string parameter: an ERR, never a panic, and the
// proxy serves on.
func TestBadInputLenEncPrefixWhereStringIsDue(t *testing.T) {
	for _, prefix := range []byte{0xfb, 0xfc, 0xfd, 0xfe, 0xff} {
		c := rawDial(t, env.addr)
		if _, err := c.ReadPacket(); err != nil {
			t.Fatal(err)
		}
		caps := protocol.BackendCapabilities
		p := binary.LittleEndian.AppendUint32(nil, caps)
		p = binary.LittleEndian.AppendUint32(p, 1<<24)
		p = append(p, 45)
		p = append(p, make([]byte, 23)...)
		p = append(p, "app\x00"...)
		p = append(p, prefix, 0xff, 0xff) // auth data "length", then too little
		if err := c.WritePacketFlush(p); err != nil {
			t.Fatal(err)
		}
		readErr(t, c, protocol.ERHandshake.Code)
		requireClosed(t, c)
	}
	c := rawLogin(t, env.addr)
	ok := rawPrepare(t, c, "SELECT CONCAT(?, 'x')")
	for _, prefix := range []byte{0xfb, 0xfc, 0xfd, 0xfe, 0xff} {
		p := []byte{protocol.ComStmtExecute, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, protocol.TypeVarString, 0, prefix, 0xff}
		binary.LittleEndian.PutUint32(p[1:], ok.StatementID)
		c.ResetSeq()
		if err := c.WritePacketFlush(p); err != nil {
			t.Fatal(err)
		}
		readErr(t, c, 1210)
	}
	if got := rawValue(t, c, "SELECT 5"); got != "5" {
		t.Fatalf("session after bad parameters: %q", got)
	}
	requireServes(t, env.addr)
}
