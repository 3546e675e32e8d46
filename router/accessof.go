package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// accessOf is what stmts, parsed from one text, need of the account that
// runs them (see Access). It models the statements a DBA grants for: reads,
// writes, DDL, views, routines, temporary tables, LOCK TABLES, files,
// SHOW, SET GLOBAL, FLUSH; anything else is Unknown.
func accessOf(stmts []ast.StmtNode) *Access {
	if len(stmts) > 1 {
		// Several statements: a USE among them changes the database the
		// later ones name tables in, and a failing one may stop the rest;
		// what the text needs as a whole is not modelled.
		return unknownAccess
	}
	var x extractor
	for _, st := range stmts {
		if !x.stmt(st) {
			return unknownAccess
		}
	}
	if len(stmts) == 1 {
		switch s := stmts[0].(type) {
		case *ast.ShowStmt:
			if s.Tp == ast.ShowGrants && (s.User == nil || s.User.CurrentUser) && len(s.Roles) == 0 {
				return &Access{Grants: true}
			}
		case *ast.PrepareStmt:
			inner := prepareAccess(s)
			if inner.Unknown {
				return unknownAccess
			}
			return &Access{Needs: inner.Needs, Prepare: strings.ToLower(s.Name), Inner: inner, literal: true,
				InnerDigest: parser.Normalize(s.SQLText, "ON")}
		case *ast.ExecuteStmt:
			return &Access{Execute: strings.ToLower(s.Name)}
		case *ast.DeallocateStmt:
			return &Access{Deallocate: strings.ToLower(s.Name)}
		case *ast.SetRoleStmt:
			a := &Access{SetRole: true}
			switch s.SetRoleOpt {
			case ast.SetRoleDefault:
				a.Role = "DEFAULT"
			case ast.SetRoleRegular:
				if len(s.RoleList) != 1 {
					return unknownAccess
				}
				a.Role = s.RoleList[0].Username
			case ast.SetRoleNone:
			default:
				return unknownAccess
			}
			return a
		}
	}
	needs := append(x.needs, x.cols...)
	if len(needs) == 0 && !x.account && x.showUser == "" {
		return noAccess
	}
	return &Access{Needs: needs, Account: x.account, ShowUser: x.showUser, ShowHost: x.showHost, literal: x.showUser != ""}
}

// extractor collects the Needs of statements. A scope is one query block's
// table sources, innermost last; ctes the names WITH clauses define.
type extractor struct {
	// needs are checked before cols, as MariaDB checks tables when it
	// opens them and columns only when it resolves them.
	needs []Need
	cols  []Need
	// index finds a need already added (add), so that adding stays
	// linear in the needs of a huge statement.
	index map[needKey]int
	// account: an account statement (Access.Account); showUser, showHost:
	// SHOW GRANTS FOR's account.
	account            bool
	showUser, showHost string
	scopes             [][]source
	ctes               []string
}

// source is one table of a FROM clause: its name as the query refers to it
// (the alias, or the table's name) and, for a real table, where it is.
type source struct {
	ref       string
	db, table string
	derived   bool
}

// needKey is what makes two needs one: the same check of the same
// object, their privileges joined.
type needKey struct {
	level                  NeedLevel
	db, table, col, rtn    string
	any, view, explain     bool
	cmd                    string
	step                   uint8
	aliasDB, late, accHost bool
	loose, function, maybe bool
	code                   uint16
}

// add appends n, or joins its privileges into the need already added
// for the same check of the same object: MariaDB asks a table for
// everything the statement wants of it at once, and names all it lacks.
func (x *extractor) add(n Need) {
	k := needKey{n.Level, n.DB, n.Table, n.Column, n.Routine, n.Any, n.View, n.Explain, n.Cmd, n.Step, n.AliasDB, n.Late, n.AccountHost, n.Loose, n.Function, n.MaybeBuiltin, n.Code}
	if n.Level != NeedTable && n.Level != NeedDB && n.Level != NeedGlobal && n.Level != NeedRoutine {
		// Columns: same key, same privilege to be a duplicate.
		k.cmd += "\x00" + n.Priv.String()
	}
	if n.Level == NeedGlobal || n.Level == NeedDB || n.Level == NeedRoutine {
		// Different privileges there are different checks (different
		// errors).
		k.cmd += "\x00" + n.Priv.String()
	}
	l := &x.needs
	list := 0
	if n.Level == NeedColumn || n.Late {
		l, list = &x.cols, 1
	}
	if x.index == nil {
		x.index = map[needKey]int{}
	}
	if i, ok := x.index[k]; ok && i%2 == list {
		o := &(*l)[i/2]
		o.Priv |= n.Priv
		o.Some |= n.Some
		return
	}
	x.index[k] = 2*len(*l) + list
	*l = append(*l, n)
}

func (x *extractor) global(p Priv) { x.add(Need{Level: NeedGlobal, Priv: p}) }

func (x *extractor) db(name string, p Priv) {
	x.add(Need{Level: NeedDB, DB: strings.Clone(name), Priv: p})
}

func (x *extractor) table(t *ast.TableName, p, some Priv) {
	if p|some == 0 {
		return
	}
	x.add(Need{Level: NeedTable, DB: strings.Clone(t.Schema.O), Table: strings.Clone(t.Name.O), Priv: p, Some: some})
}

func (x *extractor) anyOn(t *ast.TableName, cmd string) {
	x.add(Need{Level: NeedTable, DB: strings.Clone(t.Schema.O), Table: strings.Clone(t.Name.O), Any: true, Cmd: cmd})
}

func (x *extractor) routine(db, name string, p Priv, function bool) {
	x.add(Need{Level: NeedRoutine, DB: strings.Clone(db), Routine: strings.Clone(name), Priv: p, Function: function})
}

// stmt adds st's Needs; false: st is not modelled.
func (x *extractor) stmt(st ast.StmtNode) bool {
	switch s := st.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
		x.query(s.(ast.ResultSetNode))
	case *ast.InsertStmt:
		return x.insert(s)
	case *ast.UpdateStmt:
		x.update(s)
	case *ast.DeleteStmt:
		x.delete(s)
	case *ast.LoadDataStmt:
		if s.FileLocRef != ast.FileLocClient {
			x.add(Need{Level: NeedGlobal, Priv: PrivFile, Code: 1045})
		}
		p := PrivInsert
		if s.OnDuplicate == ast.OnDuplicateKeyHandlingReplace {
			p |= PrivDelete
		}
		x.table(s.Table, p, 0)
		// SET col = expr reads what expr reads (a subquery too).
		x.withScope([]source{{ref: s.Table.Name.L, db: s.Table.Schema.O, table: s.Table.Name.O}}, func() {
			for _, a := range s.ColumnAssignments {
				x.expr(a.Expr, PrivSelect)
			}
		})
	case *ast.ExplainStmt:
		if s.Stmt == nil {
			return false
		}
		if _, show := s.Stmt.(*ast.ShowStmt); show {
			// DESCRIBE t.
			return x.stmt(s.Stmt)
		}
		n := len(x.needs)
		if !x.stmt(s.Stmt) {
			return false
		}
		// EXPLAIN of a view also needs SHOW VIEW and its query's needs.
		for i := n; i < len(x.needs); i++ {
			if x.needs[i].Level == NeedTable {
				x.needs[i].Explain = true
			}
		}
	case *ast.ShowStmt:
		return x.show(s)
	case *ast.SetStmt:
		return x.set(s)
	case *ast.UseStmt:
		x.db(s.DBName, 0)
	case *ast.DoStmt:
		x.withScope(nil, func() {
			for _, e := range s.Exprs {
				x.expr(e, PrivSelect)
			}
		})
	case *ast.CallStmt:
		x.routine(s.Procedure.Schema.O, s.Procedure.FnName.O, PrivExecute, false)
		x.withScope(nil, func() {
			for _, e := range s.Procedure.Args {
				x.expr(e, PrivSelect)
			}
		})
	case *ast.BeginStmt, *ast.CommitStmt, *ast.RollbackStmt, *ast.SavepointStmt, *ast.ReleaseSavepointStmt,
		*ast.UnlockTablesStmt, *ast.DeallocateStmt, *ast.ExecuteStmt, *ast.HelpStmt, *ast.KillStmt, *ast.SetRoleStmt:
		// KILL is checked where sluice answers it; EXECUTE ran its
		// checks at PREPARE.
	case *ast.PrepareStmt:
		return x.prepare(s)
	case *ast.FlushStmt:
		x.global(PrivReload)
	case *ast.GrantStmt:
		x.account = true
		return x.grant(s.Privs, s.Level, s.ObjectType)
	case *ast.RevokeStmt:
		x.account = true
		return x.grant(s.Privs, s.Level, s.ObjectType)
	case *ast.CreateUserStmt, *ast.DropUserStmt, *ast.AlterUserStmt, *ast.RenameUserStmt, *ast.GrantRoleStmt, *ast.RevokeRoleStmt, *ast.SetPwdStmt:
		x.account = true
		x.global(PrivCreateUser)
	default:
		return x.ddl(st)
	}
	return true
}

// grant adds what GRANT or REVOKE of privs at level needs: GRANT OPTION
// and the privileges themselves, where they are given.
func (x *extractor) grant(privs []*ast.PrivElem, level *ast.GrantLevel, obj ast.ObjectTypeType) bool {
	if level == nil || obj != ast.ObjectTypeNone && obj != ast.ObjectTypeTable {
		return false
	}
	want := PrivGrant
	for _, pe := range privs {
		if pe.Priv == mysql.AllPriv {
			want |= PrivAll
			continue
		}
		name := strings.ToUpper(pe.Priv.String())
		if pe.Name != "" {
			name = strings.ToUpper(pe.Name)
		}
		p, ok := PrivByName(name)
		if !ok {
			return false
		}
		want |= p
	}
	switch level.Level {
	case ast.GrantLevelGlobal:
		x.add(Need{Level: NeedGlobal, Priv: want, Code: 1045})
	case ast.GrantLevelDB:
		x.db(level.DBName, want)
	case ast.GrantLevelTable:
		// A privilege held on some of the table's columns counts.
		x.add(Need{Level: NeedTable, DB: strings.Clone(level.DBName), Table: strings.Clone(level.TableName), Priv: PrivGrant, Some: want &^ PrivGrant})
	default:
		return false
	}
	return true
}

// ddl adds the Needs of a data-definition statement; false: not modelled.
func (x *extractor) ddl(st ast.StmtNode) bool {
	switch s := st.(type) {
	case *ast.CreateTableStmt:
		return x.createTable(s)
	case *ast.DropTableStmt:
		if s.TemporaryKeyword == ast.TemporaryNone || s.IsView {
			for _, t := range s.Tables {
				x.table(t, PrivDrop, 0)
			}
		}
	case *ast.TruncateTableStmt:
		x.table(s.Table, PrivDrop, 0)
	case *ast.AlterTableStmt:
		return x.alterTable(s)
	case *ast.RenameTableStmt:
		for _, tt := range s.TableToTables {
			x.table(tt.OldTable, PrivAlter|PrivDrop, 0)
			x.table(tt.NewTable, PrivCreate|PrivInsert, 0)
		}
	case *ast.CreateIndexStmt:
		x.table(s.Table, PrivIndex, 0)
	case *ast.DropIndexStmt:
		x.table(s.Table, PrivIndex, 0)
	case *ast.CreateViewStmt:
		p := PrivCreateView
		if s.OrReplace {
			p |= PrivDrop
		}
		x.table(s.ViewName, p, 0)
		rs, ok := s.Select.(ast.ResultSetNode)
		if !ok {
			return false
		}
		n := len(x.needs)
		x.query(rs)
		// MariaDB words a view's missing table rights "ANY command
		// denied … for table", naming the account's host.
		for i := n; i < len(x.needs); i++ {
			if x.needs[i].Level == NeedTable && x.needs[i].Priv == 0 && !x.needs[i].Any {
				x.needs[i].Cmd, x.needs[i].AccountHost = "ANY", true
			}
		}
		if s.Definer != nil && !s.Definer.CurrentUser {
			// Naming another definer needs SUPER or SET USER (asked of
			// any DEFINER clause: sluice does not compare it with the
			// session's account), once the query's tables are checked.
			x.global(PrivSuper | PrivSetUser)
		}
	case *ast.CreateDatabaseStmt:
		x.db(s.Name.O, PrivCreate)
	case *ast.DropDatabaseStmt:
		x.db(s.Name.O, PrivDrop)
	case *ast.AlterDatabaseStmt:
		if s.AlterDefaultDatabase {
			return false
		}
		x.db(s.Name.O, PrivAlter)
	case *ast.LockTablesStmt:
		for _, tl := range s.TableLocks {
			x.db(tl.Table.Schema.O, PrivLockTables)
		}
		for _, tl := range s.TableLocks {
			x.table(tl.Table, 0, PrivSelect)
		}
	case *ast.ProcedureInfo:
		x.db(s.ProcedureName.Schema.O, PrivCreateRoutine)
		x.add(Need{Level: NeedRoutine, DB: strings.Clone(s.ProcedureName.Schema.O), Routine: strings.Clone(s.ProcedureName.Name.O), Creates: true})
	case *ast.DropProcedureStmt:
		x.routine(s.ProcedureName.Schema.O, s.ProcedureName.Name.O, PrivAlterRoutine, false)
	case *ast.AnalyzeTableStmt:
		for _, t := range s.TableNames {
			x.table(t, PrivSelect|PrivInsert, 0)
		}
	default:
		return false
	}
	return true
}

// alterTable adds ALTER TABLE's Needs: ALTER, and what its clauses do to
// other tables (RENAME, EXCHANGE PARTITION, a foreign key's REFERENCES)
// or to rows (TRUNCATE / DROP PARTITION delete them: DROP).
func (x *extractor) alterTable(s *ast.AlterTableStmt) bool {
	x.table(s.Table, PrivAlter, 0)
	for _, spec := range s.Specs {
		switch spec.Tp {
		case ast.AlterTableRenameTable:
			if spec.NewTable != nil {
				x.table(s.Table, PrivAlter|PrivDrop, 0)
				x.table(spec.NewTable, PrivCreate|PrivInsert, 0)
			}
		case ast.AlterTableExchangePartition:
			if spec.NewTable == nil {
				return false
			}
			p := PrivAlter | PrivInsert | PrivCreate | PrivDrop
			x.table(s.Table, p, 0)
			x.table(spec.NewTable, p, 0)
		case ast.AlterTableTruncatePartition, ast.AlterTableDropPartition:
			x.table(s.Table, PrivDrop, 0)
		case ast.AlterTableAddConstraint:
			x.references(spec.Constraint)
		case ast.AlterTableOption:
			if !x.tableOptions(spec.Options) {
				return false
			}
		case ast.AlterTableAddColumns, ast.AlterTableModifyColumn, ast.AlterTableChangeColumn:
			for _, c := range spec.NewColumns {
				x.columnRefs(c)
			}
		}
	}
	return true
}

// references adds REFERENCES on the table a foreign key names.
func (x *extractor) references(c *ast.Constraint) {
	if c != nil && c.Refer != nil && c.Refer.Table != nil {
		x.table(c.Refer.Table, PrivReferences, 0)
	}
}

// columnRefs adds REFERENCES on the table a column's REFERENCES names.
func (x *extractor) columnRefs(c *ast.ColumnDef) {
	for _, o := range c.Options {
		if o.Tp == ast.ColumnOptionReference && o.Refer != nil && o.Refer.Table != nil {
			x.table(o.Refer.Table, PrivReferences, 0)
		}
	}
}

// tableOptions reports false for options sluice does not model: a MERGE
// table's UNION names other tables it then reads and writes.
func (x *extractor) tableOptions(opts []*ast.TableOption) bool {
	for _, o := range opts {
		if o.Tp == ast.TableOptionUnion || len(o.TableNames) > 0 {
			return false
		}
	}
	return true
}

// createTable adds CREATE TABLE's Needs.
func (x *extractor) createTable(s *ast.CreateTableStmt) bool {
	if !x.tableOptions(s.Options) {
		return false
	}
	for _, c := range s.Constraints {
		x.references(c)
	}
	for _, c := range s.Cols {
		x.columnRefs(c)
	}
	if s.TemporaryKeyword != ast.TemporaryNone {
		x.db(s.Table.Schema.O, PrivCreateTmp)
	} else {
		p := PrivCreate
		if s.Select != nil {
			p |= PrivInsert
		}
		x.table(s.Table, p, 0)
	}
	if s.ReferTable != nil {
		x.table(s.ReferTable, PrivSelect, 0)
	}
	if s.Select != nil {
		rs, ok := s.Select.(ast.ResultSetNode)
		if !ok {
			return false
		}
		x.query(rs)
	}
	return true
}

// prepare models PREPARE … FROM 'text': the text's Needs are required at
// PREPARE (MariaDB checks them at EXECUTE; sluice checks both). Text
// from a variable is not known.
func (x *extractor) prepare(s *ast.PrepareStmt) bool {
	inner := prepareAccess(s)
	if inner.Unknown {
		return false
	}
	for _, n := range inner.Needs {
		x.add(n)
	}
	return true
}

// prepareAccess is what the text of PREPARE … FROM 'text' needs; Unknown
// for text from a variable, comments, several statements, or text the
// parser rejects.
func prepareAccess(s *ast.PrepareStmt) *Access {
	if s.SQLVar != nil || strings.Contains(s.SQLText, "/*") || strings.Contains(s.SQLText, "#") || strings.Contains(s.SQLText, "--") {
		return unknownAccess
	}
	p := parserPool.Get().(*parser.Parser)
	stmts, broken, err := parseSafe(p, s.SQLText)
	if !broken {
		// The parser reuses its nodes' memory: back to the pool only once the tree is read.
		defer parserPool.Put(p)
	}
	if err != nil || len(stmts) != 1 {
		return unknownAccess
	}
	if _, nested := stmts[0].(*ast.PrepareStmt); nested {
		return unknownAccess
	}
	return accessOf(stmts)
}
