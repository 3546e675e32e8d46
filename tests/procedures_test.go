package tests

import (
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/protocol"
)

func createProc(t *testing.T) {
	t.Helper()
	d := appDB(t, "sluice_test", nil)
	mustExec(t, d, "DROP PROCEDURE IF EXISTS sp_multi")
	mustExec(t, d, `CREATE PROCEDURE sp_multi(IN a INT, OUT b INT)
BEGIN
  SELECT a AS first, @@server_id AS sid;
  SELECT a * 2 AS second UNION ALL SELECT a * 4;
  SET b = a * 3;
END`)
	t.Cleanup(func() { mustExec(t, d, "DROP PROCEDURE IF EXISTS sp_multi") })
}

// TestCallTextProtocol: CALL returns every result set and the final OK
// through the text protocol, on the master, and the OUT parameter is read
// back from the session's user variable.
func TestCallTextProtocol(t *testing.T) {
	createProc(t)
	c := conn(t, appDB(t, "sluice_test", func(c *mysql.Config) { c.MultiStatements = true }))
	ctx := ctxT(t)
	rows, err := c.QueryContext(ctx, "CALL sp_multi(5, @out)")
	if err != nil {
		t.Fatal(err)
	}
	var sets [][]string
	for {
		var set []string
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				set = append(set, fmt.Sprintf("%v", v))
			}
		}
		sets = append(sets, set)
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if len(sets) < 2 || fmt.Sprint(sets[0]) != fmt.Sprintf("[5 %d]", env.masterID) || fmt.Sprint(sets[1]) != "[10 20]" {
		t.Fatalf("CALL result sets = %v", sets)
	}
	var out int
	if err := c.QueryRowContext(ctx, "SELECT @out").Scan(&out); err != nil || out != 15 {
		t.Fatalf("OUT parameter = %d, %v", out, err)
	}
}

// TestCallBinaryProtocolOutParams: a prepared CALL returns its result sets
// and then the OUT parameters as a result set flagged
// SERVER_PS_OUT_PARAMS, all relayed.
func TestCallBinaryProtocolOutParams(t *testing.T) {
	createProc(t)
	c := rawLogin(t, env.addr)
	if p := rawCommand(t, c, append([]byte{protocol.ComInitDB}, "sluice_test"...)); !protocol.IsOK(p) {
		t.Fatalf("COM_INIT_DB: % x", p)
	}
	ok := rawPrepare(t, c, "CALL sp_multi(?, ?)")
	if ok.Params != 2 {
		t.Fatalf("CALL has %d parameters", ok.Params)
	}
	c.ResetSeq()
	if err := c.WritePacketFlush(executePacket(ok.StatementID, 0, true, 5, 0)); err != nil {
		t.Fatal(err)
	}
	var rowsPerSet []int
	sawOut := false
	for {
		rows, status, e := readBinaryResult(t, c)
		if e != nil {
			t.Fatalf("CALL: %v", e)
		}
		rowsPerSet = append(rowsPerSet, rows)
		if status&protocol.StatusPSOutParams != 0 {
			sawOut = true
		}
		if status&protocol.StatusMoreResultsExists == 0 {
			break
		}
	}
	if !sawOut || fmt.Sprint(rowsPerSet) != "[1 2 1 0]" {
		t.Fatalf("binary CALL: rows per result %v, OUT-params set seen %v", rowsPerSet, sawOut)
	}
	if got := rawValue(t, c, "SELECT 7"); got != "7" {
		t.Fatalf("session after CALL: %q", got)
	}
}
