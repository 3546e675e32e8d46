package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-proxy/sluice/protocol"
)

// rawQuery sends one COM_QUERY on a raw connection and decodes the text
// result sets it gets back (rows of strings, NULL as "NULL"). A server ERR
// is returned as *protocol.SQLError.
func rawQuery(t *testing.T, c *protocol.Conn, sql string) ([][][]string, error) {
	t.Helper()
	c.ResetSeq()
	c.LenientSeq = true
	if err := c.WritePacketFlush(append([]byte{protocol.ComQuery}, sql...)); err != nil {
		t.Fatal(err)
	}
	var sets [][][]string
	for {
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if protocol.IsErr(p) {
			e, _ := protocol.ParseErr(p)
			return sets, e
		}
		var status uint16
		if protocol.IsOK(p) {
			ok, _ := protocol.ParseOK(p)
			sets = append(sets, nil)
			status = ok.Status
		} else {
			n, _, _, err := protocol.ReadLenEncInt(p)
			if err != nil {
				t.Fatal(err)
			}
			for range n + 1 { // column definitions and their EOF
				if _, err := c.ReadPacket(); err != nil {
					t.Fatal(err)
				}
			}
			var rows [][]string
			for {
				p, err := c.ReadPacket()
				if err != nil {
					t.Fatal(err)
				}
				if protocol.IsErr(p) {
					e, _ := protocol.ParseErr(p)
					return sets, e
				}
				if protocol.IsEOF(p) {
					status = uint16(p[3]) | uint16(p[4])<<8
					break
				}
				var row []string
				for len(p) > 0 {
					if p[0] == 0xfb {
						row, p = append(row, "NULL"), p[1:]
						continue
					}
					s, n, err := protocol.ReadLenEncString(p)
					if err != nil {
						t.Fatal(err)
					}
					row, p = append(row, string(s)), p[n:]
				}
				rows = append(rows, row)
			}
			sets = append(sets, rows)
		}
		if status&protocol.StatusMoreResultsExists == 0 {
			return sets, nil
		}
	}
}

func rawValue(t *testing.T, c *protocol.Conn, sql string) string {
	t.Helper()
	sets, err := rawQuery(t, c, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if len(sets) != 1 || len(sets[0]) != 1 || len(sets[0][0]) != 1 {
		t.Fatalf("%s: got %v, want one value", sql, sets)
	}
	return sets[0][0][0]
}

// rawCommand sends a command and returns its single response packet.
func rawCommand(t *testing.T, c *protocol.Conn, payload []byte) []byte {
	t.Helper()
	c.ResetSeq()
	c.LenientSeq = true
	if err := c.WritePacketFlush(payload); err != nil {
		t.Fatal(err)
	}
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), p...)
}

func TestComPingAndStatistics(t *testing.T) {
	c := rawLogin(t, env.addr)
	if p := rawCommand(t, c, []byte{protocol.ComPing}); !protocol.IsOK(p) {
		t.Fatalf("COM_PING answered % x", p)
	}
	if p := rawCommand(t, c, []byte{protocol.ComStatistics}); !strings.HasPrefix(string(p), "Uptime:") {
		t.Fatalf("COM_STATISTICS answered %q", p)
	}
	// COM_STATISTICS's bare answer carries no status flags: the session
	// must not take it for "autocommit off" and pin reads to the master.
	id, _ := strconv.Atoi(rawValue(t, c, "SELECT @@server_id"))
	if !env.replicaIDs[uint32(id)] {
		t.Fatalf("read after COM_STATISTICS ran on %d, want a replica", id)
	}
}

func TestComFieldList(t *testing.T) {
	d := appDB(t, "sluice_test", nil)
	mustExec(t, d, "CREATE TABLE IF NOT EXISTS fl_t (a INT, b VARCHAR(10), c DATE)")
	t.Cleanup(func() { mustExec(t, d, "DROP TABLE IF EXISTS fl_t") })
	if err := env.topo.WaitReplicated(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	c := rawLogin(t, env.addr)
	if p := rawCommand(t, c, append([]byte{protocol.ComInitDB}, "sluice_test"...)); !protocol.IsOK(p) {
		t.Fatalf("COM_INIT_DB answered % x", p)
	}
	c.ResetSeq()
	if err := c.WritePacketFlush(append(append([]byte{protocol.ComFieldList}, "fl_t"...), 0)); err != nil {
		t.Fatal(err)
	}
	cols, _ := readUntilEOF(t, c, "COM_FIELD_LIST")
	if cols != 3 {
		t.Fatalf("COM_FIELD_LIST returned %d columns, want 3", cols)
	}
	// An unknown table gets the server's ERR and the session goes on.
	c.ResetSeq()
	if err := c.WritePacketFlush(append(append([]byte{protocol.ComFieldList}, "no_such_table"...), 0)); err != nil {
		t.Fatal(err)
	}
	readErr(t, c, 1146)
	if got := rawValue(t, c, "SELECT DATABASE()"); got != "sluice_test" {
		t.Fatalf("DATABASE() = %q", got)
	}
}

func TestComSetOptionTogglesMultiStatements(t *testing.T) {
	c := rawLogin(t, env.addr) // logs in without CLIENT_MULTI_STATEMENTS
	const multi = "SELECT 1; SELECT 2"
	if _, err := rawQuery(t, c, multi); err == nil || err.(*protocol.SQLError).Code != 1064 {
		t.Fatalf("multi-statement without the option: err = %v, want 1064", err)
	}
	if p := rawCommand(t, c, []byte{protocol.ComSetOption, 0, 0}); protocol.IsErr(p) {
		t.Fatalf("COM_SET_OPTION on: % x", p)
	}
	sets, err := rawQuery(t, c, multi)
	if err != nil || fmt.Sprint(sets) != "[[[1]] [[2]]]" {
		t.Fatalf("multi-statement with the option: %v, %v", sets, err)
	}
	if p := rawCommand(t, c, []byte{protocol.ComSetOption, 1, 0}); protocol.IsErr(p) {
		t.Fatalf("COM_SET_OPTION off: % x", p)
	}
	if _, err := rawQuery(t, c, multi); err == nil {
		t.Fatal("multi-statement accepted after the option went off")
	}
	readErrMalformed := rawCommand(t, c, []byte{protocol.ComSetOption, 0})
	if !protocol.IsErr(readErrMalformed) {
		t.Fatalf("short COM_SET_OPTION answered % x", readErrMalformed)
	}
}

func TestComResetConnectionClearsSessionState(t *testing.T) {
	c := rawLogin(t, env.addr)
	def := rawValue(t, c, "SELECT @@sql_mode")
	if _, err := rawQuery(t, c, "SET SESSION sql_mode = 'ANSI'"); err != nil {
		t.Fatal(err)
	}
	if got := rawValue(t, c, "SELECT @@sql_mode"); !strings.Contains(got, "ANSI") {
		t.Fatalf("sql_mode on the replica = %q, want ANSI", got)
	}
	if _, err := rawQuery(t, c, "SET @u = 42"); err != nil {
		t.Fatal(err)
	}
	if p := rawCommand(t, c, []byte{protocol.ComResetConnection}); !protocol.IsOK(p) {
		t.Fatalf("COM_RESET_CONNECTION answered % x", p)
	}
	if got := rawValue(t, c, "SELECT @@sql_mode"); got != def {
		t.Fatalf("sql_mode after reset on the replica = %q, want %q", got, def)
	}
	if got := rawValue(t, c, "/* sluice:master */ SELECT @@sql_mode"); got != def {
		t.Fatalf("sql_mode after reset on the master = %q, want %q", got, def)
	}
	if got := rawValue(t, c, "SELECT @u"); got != "NULL" {
		t.Fatalf("@u after reset = %q, want NULL", got)
	}
}

// TestCapabilityNegotiation: sluice offers neither CLIENT_DEPRECATE_EOF nor
// compression, so a client asking for them gets the classic EOF framing
// from every backend (negotiated identically on both legs) and plain
// packets; the mariadb CLI with --compress works uncompressed.
func TestCapabilityNegotiation(t *testing.T) {
	c := rawDial(t, env.addr)
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	g, err := protocol.ParseGreeting(p)
	if err != nil {
		t.Fatal(err)
	}
	if g.Capabilities&(protocol.ClientDeprecateEOF|protocol.ClientCompress|protocol.ClientSSL) != 0 {
		t.Fatalf("greeting offers %#x", g.Capabilities)
	}
	if g.ConnectionID == 0 || g.AuthPlugin != protocol.AuthNativePassword || len(g.Scramble) != 20 {
		t.Fatalf("greeting %+v", g)
	}
	c2 := rawDial(t, env.addr)
	_, err = protocol.ClientHandshake(c2, protocol.ClientConfig{
		User: env.topo.Opts.AppUser, Password: env.topo.Opts.AppPassword,
		Capabilities: protocol.BackendCapabilities | protocol.ClientDeprecateEOF | protocol.ClientCompress,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT 1", "/* sluice:master */ SELECT 2"} {
		// rawQuery understands only the classic framing.
		if got := rawValue(t, c2, q); got != q[len(q)-1:] {
			t.Fatalf("%s = %q", q, got)
		}
	}
	out, errOut, err := mariadbCLI(t, env.topo.Opts.AppPassword, "--compress", "-e", "SELECT 40 + 2")
	if err != nil || out != "42" {
		t.Fatalf("mariadb --compress: %q %v %s", out, err, errOut)
	}
}

// readUntilEOF counts the packets before an EOF (column definitions, rows)
// and returns the EOF's status; an ERR fails the test.
func readUntilEOF(t *testing.T, c *protocol.Conn, what string) (int, uint16) {
	t.Helper()
	n := 0
	for {
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if protocol.IsErr(p) {
			e, _ := protocol.ParseErr(p)
			t.Fatalf("%s: %v", what, e)
		}
		if protocol.IsEOF(p) {
			return n, uint16(p[3]) | uint16(p[4])<<8
		}
		n++
	}
}
