package tests

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/sluice-proxy/sluice/sandbox"
)

// TestPreparedDDLAndTempTableAcrossConnections: ALTER TABLE between
// executes of SELECT *, a re-prepare forced by eviction
// (backend_statement_cache = 1), a temporary table created and dropped
// after the PREPARE, and the table dropped: the client sees the columns,
// values and errors a server shows. (It passes; with eventual consistency
// a replica's lag behind the ALTER shows instead.)
func TestPreparedDDLAndTempTableAcrossConnections(t *testing.T) {
	root := mustRoot(t, env.topo.Master)
	o := sandbox.SluiceOptions{ProxyKeys: []string{"backend_statement_cache = 1"}, ClusterKeys: []string{"pool_size = 1", `consistency = "strong"`}}
	compareDirect(t, o, func(open func() *sql.Conn) []string {
		mustExec(t, root, "CREATE OR REPLACE TABLE sluice_test.ps_ddl (a INT)")
		mustExec(t, root, "INSERT INTO sluice_test.ps_ddl VALUES (1)")
		t.Cleanup(func() { mustExec(t, root, "DROP TABLE IF EXISTS sluice_test.ps_ddl") })
		a, b := open(), open()
		mustExecC(t, a, "USE sluice_test")
		mustExecC(t, b, "USE sluice_test")
		s := mustPrepare(t, a, "SELECT * FROM ps_ddl")
		cols := func() string {
			rows, err := s.QueryContext(ctxT(t))
			if err != nil {
				return fmt.Sprint("ERR ", mysqlErrNumber(err))
			}
			defer rows.Close()
			c, _ := rows.Columns()
			return fmt.Sprint(c)
		}
		out := []string{cols()}
		mustExec(t, root, "ALTER TABLE sluice_test.ps_ddl ADD COLUMN b INT")
		out = append(out, cols())
		other := mustPrepare(t, b, "SELECT 5")
		out = append(out, stmtValue(t, other))
		mustExec(t, root, "ALTER TABLE sluice_test.ps_ddl ADD COLUMN c INT")
		out = append(out, cols())
		// A temporary table created after the PREPARE (prepared on a
		// replica through sluice).
		r := mustPrepare(t, a, "SELECT COUNT(*) FROM ps_ddl")
		out = append(out, stmtValue(t, r))
		mustExecC(t, a, "CREATE TEMPORARY TABLE ps_ddl (x INT)")
		out = append(out, stmtValue(t, r), cols())
		mustExecC(t, a, "DROP TEMPORARY TABLE ps_ddl")
		out = append(out, stmtValue(t, r), cols())
		mustExec(t, root, "DROP TABLE sluice_test.ps_ddl")
		out = append(out, cols(), stmtValue(t, r))
		return out
	})
}
