package router

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
)

// TableRef is a table (or view, or sequence) qualified with its schema, as
// the statement spelled the names.
type TableRef struct {
	Schema, Table string
}

// Writes is what one statement of a binary log changes, as WrittenTables
// reads it from the statement's text.
type Writes struct {
	// Tables are the tables whose rows or definitions the statement changes,
	// each once, in the order the statement names them.
	Tables []TableRef
	// DDL: the statement changes definitions (CREATE, ALTER, DROP, RENAME,
	// TRUNCATE of tables, views, indexes and sequences), not only rows.
	DDL bool
	// All: the statement may change tables it does not name (DROP DATABASE,
	// a stored routine call, a call of a function that is not built in,
	// a SELECT that the server logged because it changed data): a reader
	// cannot tell which, and must assume any.
	All bool
	// Routines: the statement creates, replaces or drops a trigger, stored
	// routine or event; it changes no rows, but what later statements
	// write may change with it.
	Routines bool
}

// ErrUnreadable is returned by WrittenTables for a text the parser cannot
// read and that is not one of the few statements known to write nothing.
var ErrUnreadable = errors.New("statement not understood")

// WrittenTables reports the tables the SQL text writes, each unqualified
// name qualified with schema (the statement's current database), parsed
// under the lexing of modes. It is meant for the statements of a binary
// log in statement format, which are what the server ran, so one text may
// hold one statement only. It is pure and safe for concurrent use.
//
// A text the parser cannot read is an error wrapping ErrUnreadable, except
// CREATE and DROP of triggers, routines and events (which the TiDB parser
// does not know; they write no rows), reported with Routines set.
func WrittenTables(sql, schema string, modes LexModes) (Writes, error) {
	if modes&LexOracle != 0 {
		return Writes{}, fmt.Errorf("%w: sql_mode ORACLE", ErrUnreadable)
	}
	p := parserPool.Get().(*parser.Parser)
	p.SetSQLMode(sqlModeOf(modes))
	// The parser reuses its nodes' memory on its next parse: the tree is
	// walked before the parser goes back to the pool.
	defer func() {
		p.SetSQLMode(defaultSQLMode)
		parserPool.Put(p)
	}()
	stmts, _, err := parseSafe(p, sql)
	if err != nil || len(stmts) != 1 {
		if routineDDL(sql) {
			return Writes{Routines: true}, nil
		}
		if words := leadingWords(sql, 1); len(words) == 1 && strings.EqualFold(words[0], "XA") {
			return Writes{}, nil // XA transaction control: the rows come in their own events
		}
		if err == nil {
			err = fmt.Errorf("%d statements in one text", len(stmts))
		}
		return Writes{}, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	w := &writesOf{schema: schema}
	w.stmt(stmts[0])
	if !w.All && callsStoredFunction(stmts[0]) {
		w.All = true
	}
	return w.Writes, nil
}

// writesOf collects one statement's Writes.
type writesOf struct {
	Writes
	schema string
}

func (w *writesOf) add(t *ast.TableName) {
	if t == nil {
		return
	}
	ref := TableRef{Schema: t.Schema.O, Table: t.Name.O}
	if ref.Schema == "" {
		ref.Schema = w.schema
	}
	for _, have := range w.Tables {
		if have == ref {
			return
		}
	}
	w.Tables = append(w.Tables, ref)
}

func (w *writesOf) ddl(ts ...*ast.TableName) {
	w.DDL = true
	for _, t := range ts {
		w.add(t)
	}
}

// stmt fills w from one statement. Statements that change no table's rows
// or definition (transaction control, SET, account management, database
// creation) leave it empty; a kind it does not know sets All.
func (w *writesOf) stmt(st ast.StmtNode) {
	switch s := st.(type) {
	case *ast.InsertStmt:
		if t := target(s.Table); t != nil {
			w.add(t)
		} else {
			w.All = true
		}
	case *ast.UpdateStmt:
		w.update(s)
	case *ast.DeleteStmt:
		w.delete(s)
	case *ast.LoadDataStmt:
		w.add(s.Table)
	case *ast.CreateTableStmt:
		w.ddl(s.Table)
	case *ast.DropTableStmt:
		w.ddl(s.Tables...)
	case *ast.AlterTableStmt:
		w.ddl(s.Table)
		for _, sp := range s.Specs {
			if sp.Tp == ast.AlterTableRenameTable {
				w.add(sp.NewTable)
			}
		}
	case *ast.RenameTableStmt:
		for _, tt := range s.TableToTables {
			w.ddl(tt.OldTable, tt.NewTable)
		}
	case *ast.TruncateTableStmt:
		w.ddl(s.Table)
	case *ast.CreateIndexStmt:
		w.ddl(s.Table)
	case *ast.DropIndexStmt:
		w.ddl(s.Table)
	case *ast.CreateViewStmt:
		w.ddl(s.ViewName)
	case *ast.CreateSequenceStmt:
		w.ddl(s.Name)
	case *ast.AlterSequenceStmt:
		w.ddl(s.Name)
	case *ast.DropSequenceStmt:
		w.ddl(s.Sequences...)
	case *ast.OptimizeTableStmt:
		// InnoDB rebuilds the table; rows stay, but treat it as a change
		// of definition, as the server does for its own caches.
		w.ddl(s.Tables...)
	case *ast.DropProcedureStmt, *ast.ProcedureInfo:
		w.Routines = true
	case *ast.BeginStmt, *ast.CommitStmt, *ast.RollbackStmt, *ast.SavepointStmt, *ast.ReleaseSavepointStmt,
		*ast.SetStmt, *ast.UseStmt, *ast.GrantStmt, *ast.RevokeStmt, *ast.GrantRoleStmt, *ast.RevokeRoleStmt,
		*ast.CreateUserStmt, *ast.AlterUserStmt, *ast.DropUserStmt, *ast.RenameUserStmt, *ast.SetPwdStmt,
		*ast.SetDefaultRoleStmt, *ast.SetRoleStmt, *ast.FlushStmt, *ast.AnalyzeTableStmt,
		*ast.CreateDatabaseStmt, *ast.AlterDatabaseStmt:
		// No table's rows or definition change.
	default:
		// DROP DATABASE, CALL, DO, a SELECT the server logged because a
		// function it called wrote, and anything not listed above.
		w.All = true
	}
}

// update adds the tables an UPDATE assigns to: for a multi-table UPDATE,
// the tables (or aliases) its SET list qualifies; an unqualified column
// there could belong to any of them, so then all are added.
func (w *writesOf) update(s *ast.UpdateStmt) {
	if t := target(s.TableRefs); t != nil {
		w.add(t)
		return
	}
	if s.TableRefs == nil {
		w.All = true
		return
	}
	srcs := baseTables(s.TableRefs.TableRefs, nil)
	for _, a := range s.List {
		if a.Column == nil || a.Column.Table.L == "" {
			for _, src := range srcs {
				w.add(src.name)
			}
			return
		}
	}
	for _, a := range s.List {
		if !w.addNamed(srcs, a.Column.Schema.L, a.Column.Table.L) {
			w.All = true
		}
	}
}

// delete adds the tables a DELETE removes rows from.
func (w *writesOf) delete(s *ast.DeleteStmt) {
	if !s.IsMultiTable {
		if t := target(s.TableRefs); t != nil {
			w.add(t)
		} else {
			w.All = true
		}
		return
	}
	if s.Tables == nil || s.TableRefs == nil {
		w.All = true
		return
	}
	srcs := baseTables(s.TableRefs.TableRefs, nil)
	for _, t := range s.Tables.Tables {
		if !w.addNamed(srcs, t.Schema.L, t.Name.L) {
			w.All = true
		}
	}
}

// addNamed adds the base table that the name (an alias, or a table name
// with or without its schema) refers to among srcs, and reports whether
// one did.
func (w *writesOf) addNamed(srcs []tableSource, schema, name string) bool {
	for _, src := range srcs {
		if src.alias != "" {
			if schema == "" && src.alias == name {
				w.add(src.name)
				return true
			}
			continue
		}
		if src.name.Name.L != name {
			continue
		}
		if schema == "" || schema == src.name.Schema.L ||
			(src.name.Schema.L == "" && schema == strings.ToLower(w.schema)) {
			w.add(src.name)
			return true
		}
	}
	return false
}

// tableSource is a base table of a join and the alias it goes by.
type tableSource struct {
	name  *ast.TableName
	alias string
}

// baseTables lists the base tables a join names (not derived tables).
func baseTables(n ast.ResultSetNode, out []tableSource) []tableSource {
	switch j := n.(type) {
	case *ast.Join:
		out = baseTables(j.Left, out)
		if j.Right != nil {
			out = baseTables(j.Right, out)
		}
	case *ast.TableSource:
		switch src := j.Source.(type) {
		case *ast.TableName:
			out = append(out, tableSource{name: src, alias: j.AsName.L})
		case *ast.Join:
			out = baseTables(src, out)
		}
	}
	return out
}

// callsStoredFunction reports whether the statement calls a function that
// is not built in: a stored function, which may write tables of its own
// that the statement's text does not name.
func callsStoredFunction(st ast.StmtNode) bool {
	v := &storedCallFinder{}
	st.Accept(v)
	return v.found
}

type storedCallFinder struct{ found bool }

func (v *storedCallFinder) Enter(n ast.Node) (ast.Node, bool) {
	if f, ok := n.(*ast.FuncCallExpr); ok && (f.Schema.L != "" || !isBuiltinFunc(f.FnName.L)) {
		v.found = true
	}
	return n, v.found
}

func (v *storedCallFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// routineDDL reports whether the text is CREATE or DROP of a trigger,
// stored procedure or function, or event (CREATE may carry OR REPLACE, a
// DEFINER clause and AGGREGATE, as the binary log writes them).
func routineDDL(sql string) bool {
	toks := tokens(sql, 12)
	if len(toks) < 2 {
		return false
	}
	switch strings.ToUpper(toks[0]) {
	case "DROP":
		return routineWord(toks[1])
	case "CREATE":
	default:
		return false
	}
	rest := toks[1:]
	if len(rest) >= 2 && strings.EqualFold(rest[0], "OR") && strings.EqualFold(rest[1], "REPLACE") {
		rest = rest[2:]
	}
	if len(rest) >= 3 && strings.EqualFold(rest[0], "DEFINER") && rest[1] == "=" {
		// DEFINER = user [@ host] | CURRENT_USER [()]
		rest = rest[3:]
		if len(rest) >= 2 && rest[0] == "@" {
			rest = rest[2:]
		} else if len(rest) >= 2 && rest[0] == "(" && rest[1] == ")" {
			rest = rest[2:]
		}
	}
	if len(rest) >= 1 && strings.EqualFold(rest[0], "AGGREGATE") {
		rest = rest[1:]
	}
	return len(rest) > 0 && routineWord(rest[0])
}

// tokens splits the start of sql into at most n tokens: words, quoted
// names and strings (kept whole with their quotes), and single other
// bytes; leading comments are skipped.
func tokens(sql string, n int) []string {
	first := leadingWords(sql, 1)
	if len(first) == 0 {
		return nil
	}
	i := strings.Index(sql, first[0])
	var out []string
	for i < len(sql) && len(out) < n {
		c := sql[i]
		switch {
		case isSpace(c):
			i++
		case isWordByte(c):
			j := i
			for j < len(sql) && isWordByte(sql[j]) {
				j++
			}
			out = append(out, sql[i:j])
			i = j
		case c == '`' || c == '\'' || c == '"':
			j := strings.IndexByte(sql[i+1:], c)
			if j < 0 {
				return out
			}
			out = append(out, sql[i:i+j+2])
			i += j + 2
		default:
			out = append(out, sql[i:i+1])
			i++
		}
	}
	return out
}

func routineWord(w string) bool {
	switch strings.ToUpper(w) {
	case "TRIGGER", "PROCEDURE", "FUNCTION", "EVENT":
		return true
	}
	return false
}
