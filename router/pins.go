package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// Pin is a set of reasons a session must keep its backend connections:
// state a statement leaves on the connection that cannot be replayed on
// another one. The proxy multiplexes a session over pooled connections only
// while it has no pins (and no open transaction, which it learns from the
// server's status flags).
type Pin uint8

const (
	// PinUserVars: the statement reads or writes a user variable (@x).
	PinUserVars Pin = 1 << iota
	// PinTempTable: CREATE TEMPORARY TABLE.
	PinTempTable
	// PinLocks: GET_LOCK() or LOCK TABLES.
	PinLocks
	// PinPrepare: SQL-level PREPARE.
	PinPrepare
	// PinFoundRows: SQL_CALC_FOUND_ROWS, for a later FOUND_ROWS().
	PinFoundRows
	// PinUntracked: the statement may change session state sluice does not
	// track (SET TRANSACTION, a SET it cannot replay, multi-statement or
	// unparsed text, CALL), so its connection must not serve anyone else.
	PinUntracked
	// PinRole: SET ROLE, which COM_RESET_CONNECTION does not undo on
	// MariaDB: the session's connections are closed, not reset, when it
	// lets them go.
	PinRole
)

// PinNames name each Pin bit for metrics and SHOW SESSIONS.
var PinNames = map[Pin]string{
	PinUserVars:  "user_variables",
	PinTempTable: "temporary_table",
	PinLocks:     "locks",
	PinPrepare:   "sql_prepare",
	PinFoundRows: "found_rows",
	PinUntracked: "untracked_state",
	PinRole:      "role",
}

// pinsOf walks a parsed statement for the state it pins.
func pinsOf(stmt ast.StmtNode) Pin {
	var w pinWalker
	stmt.Accept(&w)
	return w.pins
}

type pinWalker struct{ pins Pin }

func (w *pinWalker) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.VariableExpr:
		if !x.IsSystem {
			w.pins |= PinUserVars
		}
	case *ast.VariableAssignment:
		if !x.IsSystem {
			w.pins |= PinUserVars
		}
	case *ast.FuncCallExpr:
		if x.Schema.L == "" && x.FnName.L == "get_lock" {
			w.pins |= PinLocks
		}
	case *ast.SelectStmt:
		if x.SelectStmtOpts != nil && x.SelectStmtOpts.CalcFoundRows {
			w.pins |= PinFoundRows
		}
		if x.SelectIntoOpt != nil && x.SelectIntoOpt.Tp == ast.SelectIntoVars {
			w.pins |= PinUserVars
		}
	case *ast.CreateTableStmt:
		if x.TemporaryKeyword != ast.TemporaryNone {
			w.pins |= PinTempTable
		}
	case *ast.LockTablesStmt:
		w.pins |= PinLocks
	case *ast.FlushStmt:
		// FLUSH TABLES [t, ...] WITH READ LOCK holds the lock until UNLOCK
		// TABLES on this connection.
		if x.Tp == ast.FlushTables && x.ReadLock {
			w.pins |= PinLocks
		}
	case *ast.SetRoleStmt:
		// The session's active role changes what it may do; sluice does
		// not replay it, so the connection that has it stays the session's
		// and is closed afterwards (see PinRole).
		w.pins |= PinUntracked | PinRole
	case *ast.PrepareStmt:
		w.pins |= PinPrepare
	}
	return n, false
}

func (*pinWalker) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// pinsOfText guesses the pins of a text the parser rejected, from words
// alone: erring towards a pin only costs multiplexing, erring the other way
// would lose state.
func pinsOfText(sql string) Pin {
	var p Pin
	u := strings.ToUpper(sql)
	for i := 0; i < len(u); i++ {
		if u[i] == '@' {
			if i+1 < len(u) && u[i+1] == '@' {
				i++
				continue
			}
			p |= PinUserVars
			break
		}
	}
	if strings.Contains(u, "TEMPORARY") {
		p |= PinTempTable
	}
	if strings.Contains(u, "GET_LOCK") || strings.Contains(u, "LOCK TABLE") || strings.Contains(u, "READ LOCK") {
		p |= PinLocks
	}
	if strings.Contains(u, "PREPARE") {
		p |= PinPrepare
	}
	if strings.Contains(u, "SQL_CALC_FOUND_ROWS") {
		p |= PinFoundRows
	}
	if strings.Contains(u, "ROLE") {
		p |= PinRole
	}
	return p
}

// LocalFunc is a statement the proxy answers itself from session state.
type LocalFunc uint8

const (
	LocalNone LocalFunc = iota
	// LocalLastInsertID: SELECT LAST_INSERT_ID().
	LocalLastInsertID
	// LocalRowCount: SELECT ROW_COUNT().
	LocalRowCount
)
