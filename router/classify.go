package router

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"

	// The parser needs a driver for literal values; without one parser.New panics.
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"
)

// parserPool holds TiDB parsers, which are not safe for concurrent use. A pooled parser is
// always left in defaultSQLMode.
var parserPool = sync.Pool{New: func() any {
	p := parser.New()
	p.SetMariaDB(true)
	p.SetSQLMode(defaultSQLMode)
	return p
}}

var (
	defaultSQLMode = func() mysql.SQLMode {
		m, err := mysql.GetSQLMode(mysql.DefaultSQLMode)
		if err != nil {
			panic(err)
		}
		return m
	}()
)

// sqlModeOf is the parser's sql_mode for the session flags m on top of the
// server's default.
func sqlModeOf(m LexModes) mysql.SQLMode {
	mode := defaultSQLMode
	if m&LexNoBackslashEscapes != 0 {
		mode |= mysql.ModeNoBackslashEscapes
	}
	if m&LexANSIQuotes != 0 {
		mode |= mysql.ModeANSIQuotes
	}
	if m&LexPipesAsConcat != 0 {
		mode |= mysql.ModePipesAsConcat
	}
	return mode
}

// restoreFlags writes strings in single quotes with backslashes escaped (the server's
// default lexing), keywords upper case, names in backquotes, and no "_utf8mb4" introducer
// on plain literals.
const restoreFlags = format.RestoreStringSingleQuotes | format.RestoreStringEscapeBackslash |
	format.RestoreKeyWordUppercase | format.RestoreNameBackQuotes | format.RestoreStringWithoutDefaultCharset

// analysis is what the parser tells about one SQL text, before hints and caching.
type analysis struct {
	kind Kind
	// readOnly: the statement cannot change data (a query: SELECT, set operation, TABLE,
	// VALUES, SHOW, DESCRIBE, EXPLAIN, HELP), so a replica hint may send it to a replica
	// even when kind is KindWrite because it touches session state.
	readOnly bool
	schema   string
	vars     []SessionVar
	multi    bool
	parseErr error
	// modes: sql_mode flags under which the text classifies differently.
	modes LexModes
	// funcs: functions called that are not MariaDB built-ins.
	funcs []FuncRef
	// nonASCII: the text holds a byte of 0x80 or above.
	nonASCII bool
	// localInfile: LOAD DATA LOCAL INFILE, which makes the server ask the
	// client for a file.
	localInfile bool
	// pins: state the statement leaves on its connection.
	pins Pin
	// local, localName: a SELECT LAST_INSERT_ID() / ROW_COUNT() the proxy
	// answers from the session's last OK packet, and its column name.
	local     LocalFunc
	localName string
	// scoped: the connection-scoped values the statement reads or sets.
	scoped *Scoped
	// noTables: a SELECT, SET or DO that names no table.
	noTables bool
	// opaque: the server may read the text otherwise than the parser did
	// (executable comments, /*T! */, bytes the lexers disagree on).
	opaque bool
	// tidbComment and hazard: see Plan.TiDBComment and Plan.Hazard.
	tidbComment, hazard bool
	// previous: the statement asks about the previous statement's
	// diagnostics (SHOW WARNINGS, @@warning_count), which only the
	// connection that ran it can answer.
	previous bool
	// release: the RELEASE clause of COMMIT / ROLLBACK.
	release TxnRelease
	// recognized: the parser rejected the text but the router recognized its leading
	// keywords (XA, BEGIN WORK, ...).
	recognized bool
	// txn: what a KindTxn statement does to the transaction.
	txn TxnOp
	// access: what the statement needs of the account running it.
	access *Access
}

func (a *analysis) sameRouting(b *analysis) bool {
	if a.kind != b.kind || a.readOnly != b.readOnly || a.multi != b.multi ||
		(a.parseErr == nil) != (b.parseErr == nil) || a.schema != b.schema || len(a.vars) != len(b.vars) {
		return false
	}
	for i := range a.vars {
		if a.vars[i] != b.vars[i] {
			return false
		}
	}
	return a.pins == b.pins && slices.Equal(a.funcs, b.funcs)
}

// analyze parses sql and classifies it.
func analyze(sql string, flags textFlags) analysis {
	p := parserPool.Get().(*parser.Parser)
	a, broken := analyzeWith(p, sql)
	if flags&flagAmbiguousCall != 0 {
		// `now`() or NOW () may call a stored function named now, where
		// the parser reports the built-in: the proxy asks its catalog
		// (for a read's route) and the grants check asks EXECUTE of it
		// when it exists (for any statement).
		var maybe []Need
		for _, name := range ambiguousCalls(sql) {
			f := FuncRef{Name: name, Maybe: true}
			if a.kind == KindRead && !slices.Contains(a.funcs, f) {
				a.funcs = append(a.funcs, f)
			}
			maybe = append(maybe, Need{Level: NeedRoutine, Routine: name, Function: true, Priv: PrivExecute, MaybeBuiltin: true})
		}
		if len(maybe) > 0 && a.access != nil {
			a.access = a.access.join(&Access{Needs: maybe})
		}
	}
	if flags&modeFlags != 0 && !broken {
		// The server lexes the text differently under some sql_modes; see
		// Plan.Modes.
		a.modes, broken = modeSensitivity(p, sql, flags, &a)
		if !broken {
			a.access, broken = accessUnderModes(p, sql, flags, a.access)
		}
	}
	if !broken {
		parserPool.Put(p)
	}
	if flags&(flagConditional|flagTiDBComment|flagHazard) != 0 {
		// What the server runs is not what the parser read: only an
		// account that may do anything may run it.
		a.access = unknownAccess
		// The server may see a table the parser did not.
		a.noTables, a.opaque = false, true
		// The server may execute more or less than the TiDB lexer saw: never send such a
		// text to a replica on the strength of our reading of it.
		if a.kind == KindRead {
			a.kind = KindWrite
		}
		a.readOnly = false
	}
	a.tidbComment, a.hazard = flags&(flagTiDBComment|flagConditional) != 0, flags&flagHazard != 0
	if flags&(flagTiDBComment|flagHazard) != 0 {
		// Here the server's reading may have nothing in common with the
		// parser's: nothing is tracked from the text, and the session keeps
		// whatever state it left on its connection.
		if a.kind != KindRead && a.kind != KindWrite {
			a.kind = KindWrite
		}
		a.schema, a.vars, a.txn = "", nil, TxnOther
		a.local, a.localName, a.previous = LocalNone, "", false
		a.pins |= PinUntracked
		if a.scoped != nil {
			// Where the server reads them is not known: not rewritable.
			a.scoped = &Scoped{Uses: a.scoped.Uses, SetsLastInsertID: a.scoped.SetsLastInsertID}
		}
	}
	if a.local != LocalKill && killText(sql) {
		// Connection ids are sluice's: see sessioncmds.go.
		a.local, a.localName = LocalKill, ""
	} else if threadPlanText(sql) {
		a.local, a.localName = LocalThreadPlan, ""
	}
	a.nonASCII = flags&flagNonASCII != 0
	return a
}

// modeSensitivity parses sql again under every combination of the sql_mode
// flags its text gives a reason for (a backslash: NO_BACKSLASH_ESCAPES; a
// double quote: ANSI_QUOTES; "||": PIPES_AS_CONCAT) and returns all those
// flags when any combination classifies differently from a, none otherwise.
// broken reports a parser that panicked; p is left in defaultSQLMode.
func modeSensitivity(p *parser.Parser, sql string, flags textFlags, a *analysis) (LexModes, bool) {
	relevant := relevantModes(flags)
	defer p.SetSQLMode(defaultSQLMode)
	for m := LexModes(1); m <= relevant; m++ {
		if m&^relevant != 0 {
			continue
		}
		p.SetSQLMode(sqlModeOf(m))
		b, broken := analyzeWith(p, sql)
		if broken {
			return relevant, true
		}
		if !a.sameRouting(&b) {
			return relevant, false
		}
	}
	return 0, false
}

// relevantModes is the sql_mode flags the text's flags give a reason to
// try: a backslash, a double quote or "||" in it.
func relevantModes(flags textFlags) LexModes {
	var relevant LexModes
	if flags&flagBackslash != 0 {
		relevant |= LexNoBackslashEscapes
	}
	if flags&flagDoubleQuote != 0 {
		relevant |= LexANSIQuotes
	}
	if flags&flagPipes != 0 {
		relevant |= LexPipesAsConcat
	}
	return relevant
}

// accessUnderModes is a, the Access of sql read in the default sql_mode,
// joined with its Access under every combination of the sql_mode flags the
// text gives a reason for: a session in ANSI_QUOTES reads "c" as a column,
// and the check must ask for whatever any reading needs. broken reports a
// parser that panicked.
func accessUnderModes(p *parser.Parser, sql string, flags textFlags, a *Access) (*Access, bool) {
	relevant := relevantModes(flags)
	defer p.SetSQLMode(defaultSQLMode)
	out := a
	for m := LexModes(1); m <= relevant; m++ {
		if m&^relevant != 0 {
			continue
		}
		p.SetSQLMode(sqlModeOf(m))
		stmts, broken, err := parseSafe(p, sql)
		if broken {
			return unknownAccess, true
		}
		if err != nil {
			// A reading the parser rejects is one the server may run.
			return unknownAccess, false
		}
		out = out.join(accessOf(stmts))
	}
	return out, false
}

// analyzeWith classifies sql with p. broken reports that the parser
// panicked and must not be used again; the text is then a parse failure.
func analyzeWith(p *parser.Parser, sql string) (a analysis, broken bool) {
	stmts, broken, err := parseSafe(p, sql)
	if broken {
		return analysis{kind: KindWrite, parseErr: fmt.Errorf("%w: %v", ErrParse, err), pins: pinsOfText(sql) | PinUntracked, access: unknownAccess}, true
	}
	a = analyzeParsed(stmts, err, sql)
	switch {
	case err == nil:
		if a.access = accessOf(stmts); a.access.Unknown {
			a.access = textAccess(sql)
		}
	case a.recognized:
		a.access = noAccess
	default:
		a.access = textAccess(sql)
	}
	return a, false
}

// parseSafe is p.Parse that turns a panic inside the parser into an error.
// The literal driver the parser is built with panics on some numbers it
// cannot hold (an integer of 82 digits); a client's text must never take
// its session down, so such a text is a parse failure and goes to the
// server, which answers it. broken reports the panic.
func parseSafe(p *parser.Parser, sql string) (stmts []ast.StmtNode, broken bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			stmts, broken, err = nil, true, fmt.Errorf("parser failed: %v", r)
		}
	}()
	stmts, _, err = p.Parse(sql, "", "")
	return stmts, false, err
}

func analyzeParsed(stmts []ast.StmtNode, err error, sql string) analysis {
	if err != nil {
		if k, op, ok := recognizeUnparsed(sql); ok {
			a := analysis{kind: k, txn: op, recognized: true, pins: pinsOfText(sql)}
			if op == TxnEnd {
				a.release = releaseOf(ast.CompletionTypeDefault, sql)
			}
			return a
		}
		if w := leadingWords(sql, 2); singleStatementText(sql) && (wordsAre(w, "SHOW", "WARNINGS") || wordsAre(w, "SHOW", "ERRORS")) {
			// SHOW WARNINGS LIMIT n, which the parser rejects: a question
			// about the previous statement like any SHOW WARNINGS.
			return analysis{kind: KindWrite, readOnly: true, previous: true, recognized: true}
		}
		// Keep the message only: the parser's error carries a stack trace.
		return analysis{kind: KindWrite, parseErr: fmt.Errorf("%w: %s", ErrParse, err), pins: pinsOfText(sql) | PinUntracked}
	}
	switch len(stmts) {
	case 0:
		return analysis{kind: KindWrite, parseErr: ErrEmptyStatement}
	case 1:
		a := classifyStmt(stmts[0], sql)
		if ld, ok := stmts[0].(*ast.LoadDataStmt); ok && ld.FileLocRef == ast.FileLocClient {
			a.localInfile = true
		}
		a.pins = pinsOf(stmts[0])
		switch st := stmts[0].(type) {
		case *ast.SetStmt:
			if a.kind != KindSet {
				// SET TRANSACTION, or a SET of session variables that
				// sluice does not replay (mixed with user variables or
				// GLOBAL ones): only user variables are pinned otherwise.
				for _, va := range st.Variables {
					if va.IsSystem && !va.IsGlobal && !va.IsInstance {
						a.pins |= PinUntracked
						break
					}
				}
			}
		case *ast.CallStmt:
			// A procedure may change session variables, create temporary
			// tables or take locks.
			a.pins |= PinUntracked
		}
		a.local, a.localName = localFuncOf(stmts[0])
		a.scoped = scopedOf(stmts[0], sql)
		a.noTables = namesNoTable(stmts[0])
		return a
	default:
		// Its SETs and USEs are not tracked one by one.
		a := analysis{kind: KindWrite, multi: true, pins: PinUntracked}
		for _, st := range stmts {
			a.pins |= pinsOf(st)
			a.local = max(a.local, sessionCommandOf(st))
		}
		return a
	}
}

// recognizeUnparsed classifies the few statements the TiDB parser rejects but whose kind
// their first keywords settle.
func recognizeUnparsed(sql string) (Kind, TxnOp, bool) {
	if !singleStatementText(sql) {
		return 0, 0, false
	}
	w := leadingWords(sql, 2)
	switch {
	case wordsAre(w, "XA"):
		return KindTxn, TxnOther, true
	case wordsAre(w, "BEGIN", "WORK"), wordsAre(w, "START", "TRANSACTION"):
		return KindTxn, TxnBegin, true
	case wordsAre(w, "COMMIT", "WORK"), wordsAre(w, "ROLLBACK", "WORK"):
		return KindTxn, TxnEnd, true
	}
	return 0, 0, false
}

// classifyStmt classifies one parsed statement; sql is its whole text.
func classifyStmt(stmt ast.StmtNode, sql string) analysis {
	switch s := stmt.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt:
		return classifyQuery(s)
	case *ast.ShowStmt:
		a := classifyQuery(s)
		switch s.Tp {
		case ast.ShowWarnings, ast.ShowErrors:
			// About the previous statement: only the connection that ran
			// it can answer.
			a.kind = KindWrite
			a.previous = true
		case ast.ShowProfile, ast.ShowProfiles, ast.ShowSessionStates:
			// About this connection's history.
			a.kind = KindWrite
		case ast.ShowMasterStatus, ast.ShowBinlogStatus:
			// The master's binary log position.
			a.kind = KindWrite
		}
		return a
	case *ast.ExplainStmt:
		switch {
		case s.Stmt == nil:
			return analysis{kind: KindWrite}
		case s.Analyze:
			// EXPLAIN ANALYZE executes the statement.
			inner := classifyStmt(s.Stmt, "")
			if inner.kind != KindRead {
				inner.kind = KindWrite
			}
			return analysis{kind: inner.kind, readOnly: inner.readOnly, funcs: inner.funcs}
		}
		// DESCRIBE t, EXPLAIN <statement>: only a plan, nothing runs; but
		// the server opens the tables as the statement would, and a
		// read-only replica connection refuses that for a write.
		inner := classifyStmt(s.Stmt, "")
		if !inner.readOnly {
			return analysis{kind: KindWrite, funcs: inner.funcs}
		}
		return analysis{kind: KindRead, readOnly: true, funcs: inner.funcs}
	case *ast.HelpStmt:
		return analysis{kind: KindRead, readOnly: true}
	case *ast.UseStmt:
		return analysis{kind: KindUse, schema: strings.Clone(s.DBName)}
	case *ast.BeginStmt:
		return analysis{kind: KindTxn, txn: TxnBegin}
	case *ast.CommitStmt:
		return analysis{kind: KindTxn, txn: TxnEnd, release: releaseOf(s.CompletionType, sql)}
	case *ast.RollbackStmt:
		if s.SavepointName != "" {
			return analysis{kind: KindTxn, txn: TxnOther}
		}
		return analysis{kind: KindTxn, txn: TxnEnd, release: releaseOf(s.CompletionType, sql)}
	case *ast.SavepointStmt:
		return analysis{kind: KindTxn, txn: TxnSavepoint}
	case *ast.ReleaseSavepointStmt:
		return analysis{kind: KindTxn, txn: TxnOther}
	case *ast.SetStmt:
		return classifySet(s, sql)
	}
	// DML, DDL, LOCK/UNLOCK TABLES, GRANT, CALL, DO, LOAD DATA, FLUSH, KILL, PREPARE/EXECUTE,
	// SET PASSWORD/ROLE, EXPLAIN FOR CONNECTION and everything else.
	return analysis{kind: KindWrite}
}

// releaseOf reads the RELEASE clause of a COMMIT or ROLLBACK. The parser
// folds NO RELEASE into the default, which completion_type = RELEASE makes
// a difference for, and rejects some forms (ROLLBACK WORK ...): the words
// tell them apart.
func releaseOf(ct ast.CompletionType, sql string) TxnRelease {
	// COMMIT WORK AND NO CHAIN NO RELEASE is the longest form.
	w := leadingWords(sql, 8)
	for i := 1; i < len(w); i++ {
		if strings.EqualFold(w[i], "RELEASE") {
			if strings.EqualFold(w[i-1], "NO") {
				return ReleaseNo
			}
			return ReleaseYes
		}
	}
	if ct == ast.CompletionTypeRelease {
		return ReleaseYes
	}
	return ReleaseDefault
}

// classifyQuery classifies a statement that only reads (SELECT, set operation, SHOW) by
// what its expressions and clauses touch.
func classifyQuery(n ast.Node) analysis {
	var in inspector
	n.Accept(&in)
	a := analysis{kind: KindRead, readOnly: !in.mutates, funcs: in.funcs}
	if in.locks || in.session || in.diagnostics {
		a.kind = KindWrite
	}
	a.previous = in.diagnostics && !in.locks && !in.session && !in.mutates
	return a
}

// inspector walks a statement looking for what keeps it off replicas.
type inspector struct {
	session bool // reads or writes state that lives only in this connection
	locks   bool // takes row locks or writes (FOR UPDATE, FOR SHARE, INTO, SQL_CALC_FOUND_ROWS)
	// mutates: changes data even inside a SELECT (sequence functions), takes
	// row locks, or writes a file (INTO OUTFILE / DUMPFILE): a replica's
	// read-only connection would refuse it, so no hint sends it there.
	// LASTVAL() and seq.currval count too: sequences are the master's.
	mutates bool
	// funcs are the functions called that are not MariaDB built-ins.
	funcs []FuncRef
	// diagnostics: reads @@warning_count or @@error_count, which describe
	// the previous statement on the same connection.
	diagnostics bool
}

// sessionFuncs are built-in functions whose result depends on the connection they run on.
// CONNECTION_ID() is left out on purpose: the proxy answers it with the session's id
// wherever the statement runs (Plan.Scoped).
var sessionFuncs = map[string]bool{
	"last_insert_id":    true,
	"row_count":         true,
	"found_rows":        true,
	"get_lock":          true,
	"release_lock":      true,
	"release_all_locks": true,
	"is_free_lock":      true,
	"is_used_lock":      true,
	"lastval":           true,
}

// mutatingFuncs change data when called from a SELECT (MariaDB sequences).
var mutatingFuncs = map[string]bool{
	"nextval": true,
	"setval":  true,
}

// sessionSysVars are system variables whose value is a by-product of earlier statements on
// the same connection, so that reading them elsewhere gives a wrong answer. Variables a
// client sets itself (sql_mode, time_zone, ...) are tracked and replayed, so reading them
// on a replica is fine.
var sessionSysVars = map[string]bool{
	"last_insert_id": true,
	"identity":       true,
	// A pending insert_id lives on the master connection that set it
	// until an INSERT uses it (it is never replayed).
	"insert_id":      true,
	"last_gtid":      true,
	"in_transaction": true,
	// A replica connection runs read-only whatever the session set: the
	// session's own value is the master connection's.
	"tx_read_only":          true,
	"transaction_read_only": true,
}

func (in *inspector) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.VariableExpr:
		if !x.IsSystem {
			in.session = true // @user_var
		} else if name := strings.ToLower(x.Name); x.IsGlobal {
		} else if name == "warning_count" || name == "error_count" {
			in.diagnostics = true
		} else if sessionSysVars[name] {
			in.session = true
		}
	case *ast.FuncCallExpr:
		if x.Schema.L == "" {
			if sessionFuncs[x.FnName.L] {
				in.session = true
			}
			if mutatingFuncs[x.FnName.L] || x.FnName.L == "lastval" {
				// Sequences are the master's: no hint sends their
				// functions elsewhere.
				in.session, in.mutates = true, true
			}
		}
		if x.Schema.L != "" || !isBuiltinFunc(x.FnName.L) || !geometryArity(x.FnName.L, len(x.Args)) {
			// A stored (or loadable) function may write: the proxy asks its
			// catalog whether it is declared not to.
			in.addFunc(FuncRef{Schema: strings.Clone(x.Schema.O), Name: strings.Clone(x.FnName.L)})
		}
	case *ast.AggregateFuncExpr:
		if name := strings.ToLower(x.F); !isBuiltinFunc(name) {
			in.addFunc(FuncRef{Name: name})
		}
	case *ast.WindowFuncExpr:
		if name := strings.ToLower(x.Name); !isBuiltinFunc(name) {
			in.addFunc(FuncRef{Name: name})
		}
	case *ast.ColumnNameExpr:
		// seq.nextval, db.seq.currval: MariaDB's Oracle-mode sequence
		// syntax, which the parser reads as a column.
		if n := x.Name; n.Table.L != "" {
			switch n.Name.L {
			case "nextval":
				in.session, in.mutates = true, true
			case "currval", "lastval":
				in.session, in.mutates = true, true
			}
		}
	case *ast.SelectStmt:
		if x.SelectIntoOpt != nil ||
			x.LockInfo != nil && x.LockInfo.LockType != ast.SelectLockNone ||
			x.SelectStmtOpts != nil && x.SelectStmtOpts.CalcFoundRows {
			in.locks = true
		}
		if x.SelectIntoOpt != nil && x.SelectIntoOpt.Tp != ast.SelectIntoVars ||
			x.LockInfo != nil && x.LockInfo.LockType != ast.SelectLockNone {
			in.mutates = true
		}
	}
	return n, false
}

func (*inspector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// geometryArity reports whether a call of name with n arguments is the
// built-in: MariaDB resolves the geometry constructors to a stored function
// of the same name when called with other argument counts (POINT()).
func geometryArity(name string, n int) bool {
	switch name {
	case "point":
		return n == 2
	case "linestring", "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection":
		return n >= 1
	}
	return true
}

// addFunc records f once.
func (in *inspector) addFunc(f FuncRef) {
	if !slices.Contains(in.funcs, f) {
		in.funcs = append(in.funcs, f)
	}
}

func restore(n ast.Node) (string, error) {
	var sb strings.Builder
	if err := n.Restore(format.NewRestoreCtx(restoreFlags, &sb)); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// localFuncOf recognizes the plain SELECT LAST_INSERT_ID() and SELECT
// ROW_COUNT() (an alias allowed, nothing else) and returns the column name
// the server would give the result.
func localFuncOf(stmt ast.StmtNode) (LocalFunc, string) {
	if lf := sessionCommandOf(stmt); lf != LocalNone {
		return lf, ""
	}
	sel, ok := stmt.(*ast.SelectStmt)
	if !ok || sel.From != nil || sel.Where != nil || sel.GroupBy != nil || sel.Having != nil ||
		sel.OrderBy != nil || sel.Limit != nil || sel.SelectIntoOpt != nil || sel.LockInfo != nil ||
		sel.Fields == nil || len(sel.Fields.Fields) != 1 || sel.With != nil {
		return LocalNone, ""
	}
	f := sel.Fields.Fields[0]
	call, ok := f.Expr.(*ast.FuncCallExpr)
	if !ok || call.Schema.L != "" || len(call.Args) != 0 {
		return LocalNone, ""
	}
	var lf LocalFunc
	switch call.FnName.L {
	case "last_insert_id":
		lf = LocalLastInsertID
	case "row_count":
		lf = LocalRowCount
	default:
		return LocalNone, ""
	}
	name := f.AsName.O
	if name == "" {
		name = f.Text()
	}
	return lf, name
}

// namesNoTable reports whether stmt is a SELECT, SET or DO that names no
// table. MariaDB keeps the previous statement's warnings and errors across
// such a statement when it raises none of its own ("the list of messages
// is reset for each new statement that uses a table").
func namesNoTable(stmt ast.StmtNode) bool {
	switch stmt.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt, *ast.SetStmt, *ast.DoStmt:
	default:
		return false
	}
	var f tableFinder
	stmt.Accept(&f)
	return !f.found
}

type tableFinder struct{ found bool }

func (f *tableFinder) Enter(n ast.Node) (ast.Node, bool) {
	if _, ok := n.(*ast.TableName); ok {
		f.found = true
	}
	return n, f.found
}

func (*tableFinder) Leave(n ast.Node) (ast.Node, bool) { return n, true }
