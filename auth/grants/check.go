package grants

import (
	"strings"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// Who is how MariaDB's privilege errors name a session: the address the
// client connects from (table and column errors) and whether it logged in
// with a password (error 1045).
type Who struct {
	ClientHost string
	Password   bool
}

// maxBodyDepth bounds how deep INVOKER views and routines are followed
// into each other; deeper is refused.
const maxBodyDepth = 8

// Check returns nil when the session may run a statement that needs acc,
// or MariaDB's error for the first need it lacks. curDB is the session's
// current database, for names without one; cat finds views and routines
// (nil: none known). It allocates only to build an error.
func (a *Active) Check(acc *router.Access, curDB string, who Who, cat Catalog) *protocol.SQLError {
	if a.all {
		return nil
	}
	return a.check(acc, curDB, who, cat, 0)
}

func (a *Active) check(acc *router.Access, curDB string, who Who, cat Catalog, depth int) *protocol.SQLError {
	if acc.Unknown {
		return protocol.ERSpecificAccessDenied.New(
			"Access denied; you need (at least one of) the %s privilege(s) for this operation (sluice cannot tell what this statement needs; only an account with ALL PRIVILEGES ON *.* may run it)",
			router.PrivSuper)
	}
	for i := range acc.Needs {
		n := &acc.Needs[i]
		if n.Level == router.NeedCurrentDB {
			if curDB == "" {
				// The server answers 1046 No database selected.
				return nil
			}
			continue
		}
		db := n.DB
		if db == "" && n.Level != router.NeedGlobal {
			if db = curDB; db == "" {
				// The server answers 1046 No database selected.
				continue
			}
		}
		if err := a.need(n, db, curDB, who, cat, depth); err != nil {
			return err
		}
	}
	return nil
}

// need is Check of one need, in database db.
func (a *Active) need(n *router.Need, db, curDB string, who Who, cat Catalog, depth int) *protocol.SQLError {
	switch n.Level {
	case router.NeedGlobal:
		return a.checkGlobal(n, who)
	case router.NeedDB:
		if isInfoSchema(db) {
			return nil
		}
		have := a.db(db)
		switch {
		case n.Priv == 0 && (have&router.PrivDBLevel != 0 || a.anyInDB(db) || n.Loose && a.global != 0):
			return nil
		case n.Priv != 0 && n.Priv&^have == 0:
			return nil
		}
		return protocol.ERDBAccessDenied.New("Access denied for user '%s'@'%s' to database '%s'", a.Set.User, a.Set.Host, db)
	case router.NeedTable:
		if err := a.checkTable(n, db, who.ClientHost, curDB); err != nil {
			return err
		}
		return a.throughObject(n, db, who, cat, depth)
	case router.NeedColumn:
		if isInfoSchema(db) {
			return nil
		}
		if n.Priv&^a.column(db, n.Table, n.Column) != 0 {
			return protocol.ERColumnAccessDenied.New("%s command denied to user '%s'@'%s' for column '%s' in table '%s'",
				n.Priv, a.Set.User, who.ClientHost, n.Column, n.Table)
		}
	case router.NeedRoutine:
		return a.checkRoutine(n, db, who, cat, depth)
	}
	return nil
}

// checkGlobal checks a NeedGlobal: at least one of its privileges ON *.*.
func (a *Active) checkGlobal(n *router.Need, who Who) *protocol.SQLError {
	if a.global&n.Priv != 0 {
		return nil
	}
	switch n.Code {
	case 1045:
		using := "NO"
		if who.Password {
			using = "YES"
		}
		return protocol.ERAccessDenied.New("Access denied for user '%s'@'%s' (using password: %s)", a.Set.User, a.Set.Host, using)
	case 1419:
		return protocol.ERBinlogCreateRoutineNeedSuper.New("You do not have the SUPER privilege and binary logging is enabled (you *might* want to use the less safe log_bin_trust_function_creators variable)")
	}
	return protocol.ERSpecificAccessDenied.New("Access denied; you need (at least one of) the %s privilege(s) for this operation", n.Priv)
}

// checkTable is the grants part of a NeedTable.
func (a *Active) checkTable(n *router.Need, db, clientHost, curDB string) *protocol.SQLError {
	if isInfoSchema(db) {
		return nil
	}
	have := a.table(db, n.Table)
	cols := a.colsOf(db, n.Table)
	var missing router.Priv
	cmd := n.Cmd
	if n.Any {
		// SHOW CREATE TABLE wants a privilege on the table itself;
		// SHOW COLUMNS and DESCRIBE one on a column will do.
		if have&router.PrivTableLevel != 0 || cols != 0 && n.Cmd != "SHOW" {
			return nil
		}
	} else {
		missing = n.Priv&^have | n.Some&^(have|cols)
		if missing == 0 {
			return nil
		}
		if cmd == "" {
			cmd = missing.String()
		}
	}
	named := db
	if n.AliasDB && curDB != "" {
		named = curDB
	}
	if n.AccountHost {
		clientHost = a.Set.Host
	}
	return protocol.ERTableAccessDenied.New("%s command denied to user '%s'@'%s' for table `%s`.`%s`",
		cmd, a.Set.User, clientHost, named, n.Table)
}

// throughObject adds what a table need asks when the name is a view: SHOW
// VIEW for SHOW CREATE and EXPLAIN, and, for EXPLAIN and for reading an
// SQL SECURITY INVOKER view, the rights its query needs.
func (a *Active) throughObject(n *router.Need, db string, who Who, cat Catalog, depth int) *protocol.SQLError {
	if cat == nil || isInfoSchema(db) {
		return nil
	}
	o := cat.Object(db, n.Table, 't')
	if o == nil || o.Kind != 'v' {
		return nil
	}
	switch {
	case n.View:
		if a.table(db, n.Table)&router.PrivShowView == 0 {
			return protocol.ERTableAccessDenied.New("SHOW VIEW command denied to user '%s'@'%s' for table `%s`.`%s`",
				a.Set.User, who.ClientHost, db, n.Table)
		}
	case n.Explain:
		if a.table(db, n.Table)&router.PrivShowView == 0 || a.body(o, db, who, cat, depth) != nil {
			return protocol.ERViewNoExplain.New("ANALYZE/EXPLAIN/SHOW can not be issued; lacking privileges for underlying table")
		}
	case n.Cmd == "" && (n.Some|n.Priv)&(router.PrivSelect|router.PrivInsert|router.PrivUpdate|router.PrivDelete) != 0:
		reader := a
		if !o.Invoker {
			if reader = o.DefinerRights; reader == nil || reader.all {
				return nil
			}
		}
		if reader.body(o, db, who, cat, depth) != nil {
			return protocol.ERViewInvalid.New("View '%s.%s' references invalid table(s) or column(s) or function(s) or definer/invoker of view lack rights to use them", db, n.Table)
		}
	}
	return nil
}

// body checks what an object's query or body needs, in its database.
func (a *Active) body(o *Object, db string, who Who, cat Catalog, depth int) *protocol.SQLError {
	if depth >= maxBodyDepth || o.Body == nil {
		return a.check(router.UnknownAccess, db, who, cat, depth+1)
	}
	return a.check(o.Body, db, who, cat, depth+1)
}

// checkRoutine checks a NeedRoutine, and the body of an SQL SECURITY
// INVOKER routine it executes.
func (a *Active) checkRoutine(n *router.Need, db string, who Who, cat Catalog, depth int) *protocol.SQLError {
	kind := byte('p')
	if n.Function {
		kind = 'f'
	}
	if n.MaybeBuiltin && cat != nil && cat.Object(db, n.Routine, kind) == nil {
		// No stored function of that name: the server calls nothing of
		// the account's (or says it does not exist).
		return nil
	}
	have := a.routine(db, n.Routine, kind)
	if n.Any {
		if have&router.PrivRoutineLevel != 0 || a.table("mysql", "proc")&router.PrivSelect != 0 {
			return nil
		}
		what := "PROCEDURE"
		if n.Function {
			what = "FUNCTION"
		}
		return protocol.ERSPDoesNotExist.New("%s %s does not exist", what, n.Routine)
	}
	if n.Priv&^have != 0 {
		return protocol.ERProcAccessDenied.New("%s command denied to user '%s'@'%s' for routine '%s.%s'",
			strings.ToLower((n.Priv &^ have).String()), a.Set.User, a.Set.Host, db, n.Routine)
	}
	if n.Priv&router.PrivExecute == 0 || cat == nil {
		return nil
	}
	o := cat.Object(db, n.Routine, kind)
	switch {
	case o == nil:
		return nil
	case o.Invoker:
		return a.body(o, db, who, cat, depth)
	case o.DefinerRights != nil && !o.DefinerRights.all:
		// Its definer's rights, as on a single server.
		return o.DefinerRights.body(o, db, who, cat, depth)
	}
	return nil
}

func isInfoSchema(db string) bool { return strings.EqualFold(db, "information_schema") }

// db is the privileges on database name: global, and each layer's first
// matching database grant.
func (a *Active) db(name string) router.Priv {
	p := a.global
	for _, l := range a.layers {
		for i := range l.dbs {
			if wildMatch(l.dbs[i].pattern, name) {
				p |= l.dbs[i].priv
				break
			}
		}
	}
	return p
}

// table is the privileges on db.table from every level above columns.
func (a *Active) table(db, table string) router.Priv {
	p := a.db(db)
	k := tableKey{db, table}
	for _, l := range a.layers {
		p |= l.tables[k]
	}
	return p
}

// colsOf is the union of the column privileges granted on db.table.
func (a *Active) colsOf(db, table string) router.Priv {
	var p router.Priv
	k := colKey{db, table, ""}
	for _, l := range a.layers {
		p |= l.columns[k]
	}
	return p
}

// column is the privileges on one column, from every level.
func (a *Active) column(db, table, col string) router.Priv {
	p := a.table(db, table)
	k := colKey{db, table, strings.ToLower(col)}
	for _, l := range a.layers {
		p |= l.columns[k]
	}
	return p
}

// routine is the privileges on a procedure or function.
func (a *Active) routine(db, name string, kind byte) router.Priv {
	p := a.db(db)
	k := routineKey{db, strings.ToLower(name), kind}
	for _, l := range a.layers {
		p |= l.routines[k]
	}
	return p
}

// anyInDB reports a table, column or routine grant in database db.
func (a *Active) anyInDB(db string) bool {
	for _, l := range a.layers {
		for k, p := range l.tables {
			if k.db == db && p != 0 {
				return true
			}
		}
		for k, p := range l.columns {
			if k.db == db && p != 0 {
				return true
			}
		}
		for k, p := range l.routines {
			if k.db == db && p != 0 {
				return true
			}
		}
	}
	return false
}

// wildMatch matches name against a database pattern of a grant: % any
// run, _ any one byte, \ escapes the next.
func wildMatch(pattern, name string) bool {
	for len(pattern) > 0 {
		c := pattern[0]
		switch c {
		case '%':
			for len(pattern) > 0 && pattern[0] == '%' {
				pattern = pattern[1:]
			}
			if pattern == "" {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if wildMatch(pattern, name[i:]) {
					return true
				}
			}
			return false
		case '_':
			if name == "" {
				return false
			}
		case '\\':
			if len(pattern) > 1 {
				pattern = pattern[1:]
				c = pattern[0]
			}
			fallthrough
		default:
			if name == "" || name[0] != c {
				return false
			}
		}
		pattern, name = pattern[1:], name[1:]
	}
	return name == ""
}
