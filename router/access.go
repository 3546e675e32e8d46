package router

import (
	"math/bits"
	"reflect"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser"
)

// Priv is a set of MariaDB privileges, one bit each, in the order of
// MariaDB's own privilege bits: the order in which its error messages list
// missing privileges ("INSERT, CREATE command denied …").
type Priv uint64

// The privileges of MariaDB 10.11.
const (
	PrivSelect Priv = 1 << iota
	PrivInsert
	PrivUpdate
	PrivDelete
	PrivCreate
	PrivDrop
	PrivReload
	PrivShutdown
	PrivProcess
	PrivFile
	PrivGrant
	PrivReferences
	PrivIndex
	PrivAlter
	PrivShowDB
	PrivSuper
	PrivCreateTmp
	PrivLockTables
	PrivExecute
	PrivReplSlave
	PrivBinlogMonitor
	PrivCreateView
	PrivShowView
	PrivCreateRoutine
	PrivAlterRoutine
	PrivCreateUser
	PrivEvent
	PrivTrigger
	PrivCreateTablespace
	PrivDeleteHistory
	PrivSetUser
	PrivFederatedAdmin
	PrivConnectionAdmin
	PrivReadOnlyAdmin
	PrivReplSlaveAdmin
	PrivReplMasterAdmin
	PrivBinlogAdmin
	PrivBinlogReplay
	PrivSlaveMonitor

	privEnd
)

// PrivAll is ALL PRIVILEGES (without GRANT OPTION, which MariaDB grants
// apart).
const PrivAll = (privEnd - 1) &^ PrivGrant

// PrivTableLevel are the privileges a GRANT ON db.table may give; PrivDBLevel
// those a GRANT ON db.* may; PrivColumnLevel and PrivRoutineLevel likewise.
const (
	PrivTableLevel   = PrivSelect | PrivInsert | PrivUpdate | PrivDelete | PrivCreate | PrivDrop | PrivGrant | PrivReferences | PrivIndex | PrivAlter | PrivCreateView | PrivShowView | PrivTrigger | PrivDeleteHistory
	PrivDBLevel      = PrivTableLevel | PrivCreateTmp | PrivLockTables | PrivExecute | PrivCreateRoutine | PrivAlterRoutine | PrivEvent
	PrivColumnLevel  = PrivSelect | PrivInsert | PrivUpdate | PrivReferences
	PrivRoutineLevel = PrivExecute | PrivAlterRoutine | PrivGrant
)

// privNames are the privileges' names as SHOW GRANTS and error messages
// spell them, by bit.
var privNames = [...]string{
	"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "RELOAD", "SHUTDOWN", "PROCESS", "FILE",
	"GRANT", "REFERENCES", "INDEX", "ALTER", "SHOW DATABASES", "SUPER", "CREATE TEMPORARY TABLES",
	"LOCK TABLES", "EXECUTE", "REPLICATION SLAVE", "BINLOG MONITOR", "CREATE VIEW", "SHOW VIEW",
	"CREATE ROUTINE", "ALTER ROUTINE", "CREATE USER", "EVENT", "TRIGGER", "CREATE TABLESPACE",
	"DELETE HISTORY", "SET USER", "FEDERATED ADMIN", "CONNECTION ADMIN", "READ_ONLY ADMIN",
	"REPLICATION SLAVE ADMIN", "REPLICATION MASTER ADMIN", "BINLOG ADMIN", "BINLOG REPLAY", "SLAVE MONITOR",
}

// privAliases are other spellings MariaDB accepts or prints for a privilege.
var privAliases = map[string]Priv{
	"REPLICATION CLIENT":        PrivBinlogMonitor,
	"REPLICA MONITOR":           PrivSlaveMonitor,
	"REPLICATION REPLICA":       PrivReplSlave,
	"REPLICATION REPLICA ADMIN": PrivReplSlaveAdmin,
	"GRANT OPTION":              PrivGrant,
}

// PrivByName returns the privilege a SHOW GRANTS or GRANT spelling names
// (upper case, words separated by one space).
func PrivByName(name string) (Priv, bool) {
	for i, n := range privNames {
		if n == name {
			return 1 << i, true
		}
	}
	p, ok := privAliases[name]
	return p, ok
}

// String lists the privileges of p by name, separated by ", ", in
// MariaDB's order.
func (p Priv) String() string {
	var b strings.Builder
	for p != 0 {
		i := bits.TrailingZeros64(uint64(p))
		p &^= 1 << i
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		if i < len(privNames) {
			b.WriteString(privNames[i])
		}
	}
	return b.String()
}

// NeedLevel is where a Need asks for its privileges.
type NeedLevel uint8

const (
	// NeedGlobal: at least one of Priv, granted ON *.* (error 1227).
	NeedGlobal NeedLevel = iota
	// NeedDB: all of Priv on database DB (error 1044). With Priv zero,
	// any privilege in DB at any level (USE, SHOW TABLES).
	NeedDB
	// NeedTable: all of Priv on DB.Table, from the table, its database or
	// globally (error 1142). Some are needed on the table or on at least
	// one of its columns. With Any, any privilege on the table or one of
	// its columns will do (SHOW CREATE TABLE, DESCRIBE); Cmd then names the
	// command in the error.
	NeedTable
	// NeedColumn: all of Priv on column Column of DB.Table (error 1143).
	NeedColumn
	// NeedRoutine: all of Priv on the procedure or function DB.Routine
	// (error 1370). With Any (SHOW CREATE PROCEDURE), any privilege on
	// it, or SELECT on mysql.proc; else, as MariaDB hides what it may not
	// show, error 1305 "does not exist".
	NeedRoutine
	// NeedCurrentDB: the statement names a table by an alias MariaDB
	// looks up in the current database (the targets of a multi-table
	// DELETE); with none selected the server answers 1046 before any
	// privilege check, so the check stops and lets it.
	NeedCurrentDB
)

// Need is one privilege check of a statement. Names are as written, with
// DB "" meaning the session's current database.
type Need struct {
	Level   NeedLevel
	Priv    Priv
	Some    Priv
	Any     bool
	Cmd     string
	DB      string
	Table   string
	Column  string
	Routine string
	// Function: the routine is a stored function (else a procedure).
	Function bool
	// Loose: a NeedDB that any global privilege also meets (SHOW TABLES
	// FROM db lists nothing then, but runs).
	Loose bool
	// Code, when not 0, is the error MariaDB gives instead of the usual
	// one: 1045 for a server-side LOAD DATA without FILE.
	Code uint16
	// View: on a view, the table need also asks SHOW VIEW (SHOW CREATE
	// TABLE / VIEW), or, with Explain, SHOW VIEW and what the view's
	// query needs (EXPLAIN, error 1345).
	View    bool
	Explain bool
	// Step keeps needs of one table apart that MariaDB checks one after
	// the other (a multi-table UPDATE's SELECT, then its UPDATE).
	Step uint8
	// AliasDB: the error names the table in the current database (a
	// multi-table DELETE's target given by its alias), as MariaDB does.
	AliasDB bool
	// MaybeBuiltin: a NeedRoutine of a call written like a built-in with a
	// space before its parenthesis (NOW ()), which the server reads as a
	// stored function of the current database: asked only when one
	// exists (or sluice does not know).
	MaybeBuiltin bool
	// Creates: a NeedRoutine that asks nothing and names the routine the
	// statement creates.
	Creates bool
	// Late: checked with the columns, after the other table needs (a
	// multi-table UPDATE asks UPDATE once its columns are resolved).
	Late bool
	// AccountHost: the error names the account's host, not the client's
	// (the tables of CREATE VIEW).
	AccountHost bool
}

// Access is what a statement needs of the account that runs it: its Needs
// in the order MariaDB checks them, the first one unmet deciding the error.
// Unknown: sluice cannot tell what the statement needs (unparsed text,
// executable comments, statements it does not model); only an account
// holding every privilege globally may run it. An Access belongs to a
// cached Plan and is never modified after the plan is built.
type Access struct {
	Needs   []Need
	Unknown bool
	// Grants marks SHOW GRANTS of the session's own account and SetRole
	// SET ROLE, which sluice answers itself; Role is the role named ("" for
	// NONE, "DEFAULT" upper case for DEFAULT).
	Grants  bool
	SetRole bool
	Role    string
	// ShowUser and ShowHost are the account of SHOW GRANTS FOR user@host
	// (ShowHost "%" when not given): the session's own one is answered
	// as SHOW GRANTS.
	ShowUser, ShowHost string
	// Account marks GRANT, REVOKE and the account statements: accounts
	// live on the auth server, and sluice does not run them on backends.
	Account bool
	// Prepare names the statement SQL-level PREPARE … FROM 'text'
	// prepares, and Inner is what the text needs, asked again at each
	// EXECUTE Execute of it; Deallocate names DEALLOCATE PREPARE's.
	Prepare, Execute, Deallocate string
	Inner                        *Access
	// InnerDigest is the digest of PREPARE's text (as Plan.Digest is of
	// a statement's), which the PREPARE's own digest hides as a literal:
	// the firewall checks both.
	InnerDigest string
	// literal: what the statement needs depends on its literals (the
	// text of PREPARE, the account of SHOW GRANTS FOR), so its plan must
	// not be shared with texts that differ only in them.
	literal bool
}

// unknownAccess is the Access of every statement sluice does not model.
var unknownAccess = &Access{Unknown: true}

// UnknownAccess is an Access whose needs are not known.
var UnknownAccess = unknownAccess

// noAccess is the Access of statements that need no privilege.
var noAccess = &Access{}

// join is the Access that needs everything a or b needs. Accesses that
// differ in what they are besides their needs (SHOW GRANTS, SET ROLE,
// PREPARE, an account statement, …) do not join: Unknown.
func (a *Access) join(b *Access) *Access {
	if a.Unknown || b.Unknown {
		return unknownAccess
	}
	sa, sb := *a, *b
	sa.Needs, sb.Needs, sa.Inner, sb.Inner = nil, nil, nil, nil
	if !reflect.DeepEqual(sa, sb) || (a.Inner == nil) != (b.Inner == nil) {
		return unknownAccess
	}
	if a.Inner != nil && b.Inner != nil && a.Inner != b.Inner {
		// Two readings of a PREPAREd text: it needs what either needs.
		sa.Inner = a.Inner.join(b.Inner)
	} else {
		sa.Inner = a.Inner
	}
	out := sa
	out.Needs = append([]Need(nil), a.Needs...)
	for _, n := range b.Needs {
		if !slices.Contains(out.Needs, n) {
			out.Needs = append(out.Needs, n)
		}
	}
	return &out
}

// UseAccess is what selecting database db needs (USE, COM_INIT_DB, the
// schema of a login): any privilege in it.
func UseAccess(db string) *Access {
	return &Access{Needs: []Need{{Level: NeedDB, DB: db}}}
}

// FieldListAccess is what COM_FIELD_LIST of table needs, as SHOW COLUMNS.
func FieldListAccess(table string) *Access {
	return &Access{Needs: []Need{{Level: NeedTable, Table: table, Any: true, Cmd: "SELECT"}}}
}

// BodyAccess is what the query of a view (information_schema.VIEWS
// VIEW_DEFINITION) or the body of a stored routine (ROUTINES
// ROUTINE_DEFINITION) needs when it runs with the invoker's privileges. A
// function body RETURN expr is read as SELECT expr; a compound body
// (BEGIN … END) or anything the parser rejects is Unknown.
func BodyAccess(body string) *Access {
	text := strings.TrimSpace(body)
	if len(text) > 7 && strings.EqualFold(text[:7], "RETURN ") {
		text = "SELECT " + text[7:]
	}
	if strings.Contains(text, "/*") {
		return unknownAccess
	}
	p := parserPool.Get().(*parser.Parser)
	stmts, broken, err := parseSafe(p, text)
	if !broken {
		// The parser reuses its nodes' memory: back to the pool only once the tree is read.
		defer parserPool.Put(p)
	}
	if err != nil || len(stmts) != 1 {
		return unknownAccess
	}
	return accessOf(stmts)
}
