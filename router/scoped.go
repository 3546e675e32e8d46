package router

import (
	"math/bits"
	"strconv"
	"strings"
	"unsafe"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// ScopedFunc is a set of values that live in the client's own connection
// on a server, which a statement may read: under multiplexing the backend
// connection that runs the statement holds another session's values (or
// none), so the proxy supplies the session's own.
type ScopedFunc uint8

const (
	// ScopedLastInsertID: LAST_INSERT_ID(), @@last_insert_id, @@identity.
	ScopedLastInsertID ScopedFunc = 1 << iota
	// ScopedRowCount: ROW_COUNT().
	ScopedRowCount
	// ScopedFoundRows: FOUND_ROWS().
	ScopedFoundRows
	// ScopedConnID: CONNECTION_ID(), @@pseudo_thread_id.
	ScopedConnID
	// ScopedCurrentUser: CURRENT_USER(), the account the session runs as;
	// ScopedUser: USER(), SESSION_USER(), SYSTEM_USER(), the name the
	// client logged in with and its address; ScopedCurrentRole:
	// CURRENT_ROLE(). The backends know only sluice's service account.
	ScopedCurrentUser
	ScopedUser
	ScopedCurrentRole
)

// ScopedIdentity are the reads of who the session is.
const ScopedIdentity = ScopedCurrentUser | ScopedUser | ScopedCurrentRole

// scopedKinds is how many kinds of connection-scoped values there are.
const scopedKinds = 7

// ScopedRef is one read of a connection-scoped value in a statement's text:
// Text[Start:End] is the call or the variable as written.
type ScopedRef struct {
	Start, End int
	Func       ScopedFunc
}

// ScopedAlias is a select field without an alias whose expression holds a
// ScopedRef. The server names such a column after the expression's text,
// which the rewrite changes: At is where the field's text ends, Name that
// text.
type ScopedAlias struct {
	At   int
	Name string
}

// Scoped describes the connection-scoped values a statement reads or sets.
// It is part of a shared Plan and must not be modified.
type Scoped struct {
	// Uses are the values the statement reads.
	Uses ScopedFunc
	// Rewritable: the reads can be replaced in the text. Refs are the
	// reads in text order and Aliases the columns to keep their names, in
	// text order; or, with TextRefs, the reads are found again in the text
	// at hand (a plan shared by texts that differ in literals: no select
	// field holds a read, so no alias is needed), Counts of each kind.
	Rewritable bool
	Refs       []ScopedRef
	Aliases    []ScopedAlias
	TextRefs   bool
	Counts     [scopedKinds]int
	// SetsLastInsertID: the statement calls LAST_INSERT_ID(expr), which
	// sets the value on the connection that runs it (and which a later
	// LAST_INSERT_ID() in the same statement reads).
	SetsLastInsertID bool
}

// ScopedValues are a session's own connection-scoped values. Skip names
// those the connection that runs the statement already holds for the
// session: their reads are left as written. Refs is scratch space the
// caller keeps between calls (TextRefs).
type ScopedValues struct {
	LastInsertID uint64
	RowCount     int64
	FoundRows    int64
	ConnID       uint64
	// CurrentUser, User and CurrentRole are the session's identity
	// (user@host of the account, user@client address, the enabled role;
	// RoleNone: no role enabled, NULL).
	CurrentUser, User, CurrentRole string
	RoleNone                       bool
	Skip                           ScopedFunc
	Refs                           []ScopedRef
}

// Rewrite appends to dst the text sql (of the plan this Scoped belongs to)
// with each read of a value not in v.Skip replaced by an expression that
// yields the session's value with the type, length and flags the server
// gives the original (IF(1, value, original)), and an alias after every
// select field whose name would change. It reports false, appending
// nothing, when there is nothing to replace or the text cannot be
// rewritten. It allocates only to grow dst and v.Refs.
func (sc *Scoped) Rewrite(dst []byte, sql []byte, v *ScopedValues) ([]byte, bool) {
	if !sc.Rewritable || sc.Uses&^v.Skip == 0 {
		return dst, false
	}
	refs := sc.Refs
	if sc.TextRefs {
		v.Refs = scanScoped(v.Refs[:0], unsafe.String(unsafe.SliceData(sql), len(sql)))
		if countScoped(v.Refs) != sc.Counts {
			return dst, false
		}
		refs = v.Refs
	}
	pos, ai := 0, 0
	aliasesUpTo := func(at int) {
		for ; ai < len(sc.Aliases) && sc.Aliases[ai].At <= at; ai++ {
			a := sc.Aliases[ai]
			dst = append(dst, sql[pos:a.At]...)
			dst = append(dst, " AS `"...)
			for i := 0; i < len(a.Name); i++ {
				if a.Name[i] == '`' {
					dst = append(dst, '`')
				}
				dst = append(dst, a.Name[i])
			}
			dst = append(dst, '`')
			pos = a.At
		}
	}
	for _, r := range refs {
		if r.Func&v.Skip != 0 {
			continue
		}
		aliasesUpTo(r.Start)
		dst = append(dst, sql[pos:r.Start]...)
		dst = append(dst, "IF(1,"...)
		switch r.Func {
		case ScopedLastInsertID:
			dst = appendUnsigned(dst, v.LastInsertID)
		case ScopedConnID:
			dst = appendUnsigned(dst, v.ConnID)
		case ScopedRowCount:
			dst = strconv.AppendInt(dst, v.RowCount, 10)
		case ScopedFoundRows:
			dst = strconv.AppendInt(dst, v.FoundRows, 10)
		case ScopedCurrentUser:
			dst = appendQuoted(dst, v.CurrentUser)
		case ScopedUser:
			dst = appendQuoted(dst, v.User)
		case ScopedCurrentRole:
			if v.RoleNone {
				dst = append(dst, "NULL"...)
			} else {
				dst = appendQuoted(dst, v.CurrentRole)
			}
		}
		dst = append(dst, ',')
		dst = append(dst, sql[r.Start:r.End]...)
		dst = append(dst, ')')
		pos = r.End
	}
	aliasesUpTo(len(sql))
	return append(dst, sql[pos:]...), true
}

// appendQuoted writes s as a string expression that reads the same under
// every sql_mode: a literal with quotes doubled, and a backslash, which
// NO_BACKSLASH_ESCAPES reads otherwise, as CHAR(92) in a CONCAT.
func appendQuoted(dst []byte, s string) []byte {
	if strings.IndexByte(s, '\\') >= 0 {
		dst = append(dst, "CONCAT("...)
		for i, part := range strings.Split(s, "\\") {
			if i > 0 {
				dst = append(dst, ",CHAR(92 USING utf8mb4),"...)
			}
			dst = appendQuoted(dst, part)
		}
		return append(dst, ')')
	}
	dst = append(dst, '\'')
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			dst = append(dst, '\'')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '\'')
}

// appendUnsigned writes v as an unsigned expression: a bare literal would
// turn IF(1, v, LAST_INSERT_ID()) into a DECIMAL.
func appendUnsigned(dst []byte, v uint64) []byte {
	dst = append(dst, "CAST("...)
	dst = strconv.AppendUint(dst, v, 10)
	return append(dst, " AS UNSIGNED)"...)
}

// scopedFuncOf names the connection-scoped value a call of a built-in
// without arguments reads; name is in lower case.
func scopedFuncOf(name []byte) ScopedFunc {
	switch string(name) {
	case "last_insert_id":
		return ScopedLastInsertID
	case "row_count":
		return ScopedRowCount
	case "found_rows":
		return ScopedFoundRows
	case "connection_id":
		return ScopedConnID
	case "current_user":
		return ScopedCurrentUser
	case "user", "session_user", "system_user":
		return ScopedUser
	case "current_role":
		return ScopedCurrentRole
	}
	return 0
}

// scopedVarOf names the connection-scoped value a session system variable
// holds; name is in lower case.
func scopedVarOf(name []byte) ScopedFunc {
	switch string(name) {
	case "last_insert_id", "identity":
		return ScopedLastInsertID
	case "pseudo_thread_id":
		return ScopedConnID
	}
	return 0
}

// scopedWalker counts the reads of connection-scoped values in a parse.
type scopedWalker struct {
	uses   ScopedFunc
	counts [scopedKinds]int
	sets   bool
	fields []*ast.SelectField
}

func scopedIndex(f ScopedFunc) int {
	return bits.TrailingZeros8(uint8(f))
}

func (w *scopedWalker) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.FuncCallExpr:
		if x.Schema.L != "" {
			break
		}
		f := scopedFuncOf([]byte(x.FnName.L))
		if f == ScopedLastInsertID && len(x.Args) > 0 {
			w.sets = true
			break
		}
		if f != 0 && len(x.Args) == 0 {
			w.uses |= f
			w.counts[scopedIndex(f)]++
		}
	case *ast.VariableExpr:
		if x.IsSystem && !x.IsGlobal && !x.IsInstance {
			if f := scopedVarOf([]byte(strings.ToLower(x.Name))); f != 0 {
				w.uses |= f
				w.counts[scopedIndex(f)]++
			}
		}
	case *ast.SelectField:
		if x.Expr != nil && x.AsName.L == "" {
			w.fields = append(w.fields, x)
		}
	}
	return n, false
}

func (*scopedWalker) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// scopedOf finds the connection-scoped values stmt reads or sets, and
// where in sql (its whole text) they are read; nil when there are none.
// Only statements that evaluate expressions as they run are rewritten: the
// text of DDL (a view, a column default) keeps what it says, which the
// server evaluates later, in whatever connection uses it.
func scopedOf(stmt ast.StmtNode, sql string) *Scoped {
	switch stmt.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt, *ast.InsertStmt, *ast.UpdateStmt, *ast.DeleteStmt,
		*ast.SetStmt, *ast.DoStmt, *ast.CallStmt:
	default:
		return nil
	}
	var w scopedWalker
	stmt.Accept(&w)
	refs := scanScoped(nil, sql)
	counts := countScoped(refs)
	var scanned ScopedFunc
	for _, r := range refs {
		scanned |= r.Func
	}
	if w.uses|scanned == 0 && !w.sets {
		return nil
	}
	// A read the parser did not see (in /*M! */, which MariaDB runs and
	// the parser skips) leaves the statement unrewritable; the proxy then
	// sets LAST_INSERT_ID() on the connection instead.
	sc := &Scoped{Uses: w.uses | scanned, SetsLastInsertID: w.sets}
	if len(refs) == 0 || counts != w.counts {
		return sc
	}
	var aliases []ScopedAlias
	for _, f := range w.fields {
		text := f.Text()
		end := f.Offset + len(text)
		if f.Offset < 0 || end > len(sql) || sql[f.Offset:end] != text {
			return sc
		}
		code := f.Offset + codeEnd(text)
		for _, r := range refs {
			if r.Start >= f.Offset && r.End <= code {
				name := columnName(text)
				if len(name) > 250 {
					// Longer than a column alias may be.
					return sc
				}
				aliases = append(aliases, ScopedAlias{At: code, Name: name})
				break
			}
		}
	}
	// Fields nest (a subquery in a select field): keep the aliases in text
	// order.
	for i := 1; i < len(aliases); i++ {
		for j := i; j > 0 && aliases[j].At < aliases[j-1].At; j-- {
			aliases[j], aliases[j-1] = aliases[j-1], aliases[j]
		}
	}
	sc.Rewritable = true
	if len(aliases) == 0 {
		// Nothing depends on where the reads are: texts that differ in
		// literals may share the plan.
		sc.TextRefs, sc.Counts = true, counts
		return sc
	}
	sc.Refs, sc.Aliases = refs, aliases
	return sc
}

// countScoped counts the reads of each kind.
func countScoped(refs []ScopedRef) [scopedKinds]int {
	var n [scopedKinds]int
	for _, r := range refs {
		n[scopedIndex(r.Func)]++
	}
	return n
}

// codeEnd is where the code of a select field's text ends: before the
// comments and spaces that trail it (the parser's field text runs to the
// next token).
func codeEnd(text string) int {
	end := 0
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			i = skipQuoted(text, i, c, c != '`')
			end = i
		case c == '/' && strings.HasPrefix(text[i:], "/*") && !strings.HasPrefix(text[i:], "/*!") && !strings.HasPrefix(text[i:], "/*M!"):
			e := strings.Index(text[i+2:], "*/")
			if e < 0 {
				return end
			}
			i += 2 + e + 2
		case c == '#' || c == '-' && strings.HasPrefix(text[i:], "--") && (i+2 == len(text) || text[i+2] <= ' '):
			e := strings.IndexByte(text[i:], '\n')
			if e < 0 {
				return end
			}
			i += e + 1
		case isSpace(c):
			i++
		default:
			i++
			end = i
		}
	}
	return end
}

// columnName is the name MariaDB gives a select field without an alias:
// its text as written up to the end of its code (a trailing comment is
// not part of it), without the markers of executable comments ("/*!50000"
// and its "*/"), trailing spaces trimmed. Checked on MariaDB 10.11.
func columnName(text string) string {
	text = text[:codeEnd(text)]
	var b strings.Builder
	exec := 0 // open executable comments
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			e := skipQuoted(text, i, c, c != '`')
			b.WriteString(text[i:e])
			i = e
		case strings.HasPrefix(text[i:], "/*!") || strings.HasPrefix(text[i:], "/*M!"):
			i += 3
			if text[i-1] == 'M' {
				i++
			}
			for i < len(text) && text[i] >= '0' && text[i] <= '9' {
				i++
			}
			exec++
		case exec > 0 && strings.HasPrefix(text[i:], "*/"):
			i += 2
			exec--
		case strings.HasPrefix(text[i:], "/*"):
			e := strings.Index(text[i+2:], "*/")
			if e < 0 {
				e = len(text) - i - 4
			}
			b.WriteString(text[i : i+2+e+2])
			i += 2 + e + 2
		default:
			b.WriteByte(c)
			i++
		}
	}
	return strings.TrimRight(b.String(), " \t\r\n")
}

// scanScoped finds in sql, as the server reads it by default, the calls
// LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS(), CONNECTION_ID() (nothing but
// spaces and comments between the parentheses, not qualified by a schema)
// and the session variables @@[session.|local.]last_insert_id, identity and
// pseudo_thread_id, outside strings, quoted names and comments (the inside
// of an executable comment is code).
func scanScoped(refs []ScopedRef, sql string) []ScopedRef {
	sc := scopedScanner{sql: sql, refs: refs}
	for sc.i < len(sql) {
		c := sql[sc.i]
		switch {
		case c == '\'' || c == '"':
			sc.i = skipQuoted(sql, sc.i, c, true)
			sc.prev = c
		case c == '`':
			sc.quotedName()
		case c == '/' && strings.HasPrefix(sql[sc.i:], "/*!"), c == '/' && strings.HasPrefix(sql[sc.i:], "/*M!"):
			sc.executableComment()
		case c == '*' && strings.HasPrefix(sql[sc.i:], "*/"):
			sc.i += 2
		case c == '/' && strings.HasPrefix(sql[sc.i:], "/*"):
			sc.i = sc.skipSpace(sc.i)
		case c == '#', c == '-' && strings.HasPrefix(sql[sc.i:], "--") && (sc.i+2 == len(sql) || sql[sc.i+2] <= ' '):
			sc.lineComment()
		case c == '@' && strings.HasPrefix(sql[sc.i:], "@@"):
			sc.sysVar()
		case isWordByte(c) && c < 0x80:
			// Most words call nothing: they are passed here, without a
			// call per word.
			start := sc.i
			sc.i = sc.wordEnd(start)
			qualified := sc.prev == '.' || sc.prev == '@'
			sc.prev = sql[sc.i-1]
			if !qualified && sc.i-start <= len("last_insert_id") {
				sc.call(start)
			}
		default:
			if !isSpace(c) {
				sc.prev = c
			}
			sc.i++
		}
	}
	return sc.refs
}

// scopedScanner is scanScoped's walk over one text: the position i, the
// last byte before it that is neither space nor comment (a '.' or '@'
// there qualifies the name that follows), and the references found.
type scopedScanner struct {
	sql  string
	i    int
	prev byte
	refs []ScopedRef
}

// skipSpace returns where the spaces and plain comments from i end.
func (sc *scopedScanner) skipSpace(i int) int {
	sql := sc.sql
	for i < len(sql) {
		switch {
		case isSpace(sql[i]):
			i++
		case strings.HasPrefix(sql[i:], "/*") && !strings.HasPrefix(sql[i:], "/*!") && !strings.HasPrefix(sql[i:], "/*M!"):
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return len(sql)
			}
			i += 2 + end + 2
		default:
			return i
		}
	}
	return i
}

// wordEnd returns where the bare word at i ends.
func (sc *scopedScanner) wordEnd(i int) int {
	for i < len(sc.sql) && isWordByte(sc.sql[i]) && sc.sql[i] < 0x80 {
		i++
	}
	return i
}

// emptyParens reports whether "()" (spaces and comments allowed) follows
// at i, and where it ends.
func (sc *scopedScanner) emptyParens(i int) (int, bool) {
	sql := sc.sql
	j := sc.skipSpace(i)
	if j >= len(sql) || sql[j] != '(' {
		return 0, false
	}
	j = sc.skipSpace(j + 1)
	if j >= len(sql) || sql[j] != ')' {
		return 0, false
	}
	return j + 1, true
}

// quotedName passes a name in backquotes; one followed by "()" still calls
// the built-in of that name.
func (sc *scopedScanner) quotedName() {
	start := sc.i
	sc.i = skipQuoted(sc.sql, sc.i, '`', false)
	var lower [16]byte
	if f := scopedFuncOf(lowerInto(lower[:0], sc.sql[start+1:max(start+1, sc.i-1)])); f != 0 && sc.prev != '.' {
		if end, ok := sc.emptyParens(sc.i); ok {
			sc.refs = append(sc.refs, ScopedRef{Start: start, End: end, Func: f})
			sc.i = end
		}
	}
	sc.prev = '`'
}

// executableComment passes the opening of /*! or /*M! and its version
// number: the comment's text is code.
func (sc *scopedScanner) executableComment() {
	sc.i += 3
	if sc.sql[sc.i-1] == 'M' {
		sc.i++
	}
	for sc.i < len(sc.sql) && sc.sql[sc.i] >= '0' && sc.sql[sc.i] <= '9' {
		sc.i++
	}
}

// lineComment passes a # or -- comment up to the end of its line.
func (sc *scopedScanner) lineComment() {
	end := strings.IndexByte(sc.sql[sc.i:], '\n')
	if end < 0 {
		sc.i = len(sc.sql)
		return
	}
	sc.i += end + 1
}

// sysVar passes @@name, @@session.name or @@local.name, each part bare or
// in backquotes, and records it when it names a session-scoped value.
func (sc *scopedScanner) sysVar() {
	start := sc.i
	var lower [16]byte
	w, e := sc.varPart(sc.i+2, &lower)
	if (string(w) == "session" || string(w) == "local") && e < len(sc.sql) && sc.sql[e] == '.' {
		w, e = sc.varPart(e+1, &lower)
	}
	if f := scopedVarOf(w); f != 0 && (e == len(sc.sql) || sc.sql[e] != '.') {
		sc.refs = append(sc.refs, ScopedRef{Start: start, End: e, Func: f})
	}
	sc.i, sc.prev = max(e, sc.i+2), '@'
}

// varPart returns the part of a variable's name at j lower-cased into
// lower, and where it ends.
func (sc *scopedScanner) varPart(j int, lower *[16]byte) (name []byte, end int) {
	if j < len(sc.sql) && sc.sql[j] == '`' {
		end = skipQuoted(sc.sql, j, '`', false)
		return lowerInto(lower[:0], sc.sql[j+1:max(j+1, end-1)]), end
	}
	end = sc.wordEnd(j)
	return lowerInto(lower[:0], sc.sql[j:end]), end
}

// call records the bare word from start to i, with the "()" after it,
// when it calls one of the functions.
func (sc *scopedScanner) call(start int) {
	var lower [16]byte
	f := scopedFuncOf(lowerInto(lower[:0], sc.sql[start:sc.i]))
	if f == 0 {
		return
	}
	end, ok := sc.emptyParens(sc.i)
	if !ok {
		if f == ScopedCurrentUser || f == ScopedCurrentRole {
			if j := sc.skipSpace(sc.i); j >= len(sc.sql) || sc.sql[j] != '(' {
				// CURRENT_USER and CURRENT_ROLE are calls without
				// parentheses too.
				sc.refs = append(sc.refs, ScopedRef{Start: start, End: sc.i, Func: f})
			}
		}
		return
	}
	sc.refs = append(sc.refs, ScopedRef{Start: start, End: end, Func: f})
	sc.i, sc.prev = end, ')'
}

// lowerASCII lower-cases an ASCII letter and leaves other bytes alone.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// lowerInto appends s lower-cased to dst, up to dst's capacity: a longer s
// comes back cut, which names no scoped value.
func lowerInto(dst []byte, s string) []byte {
	for i := 0; i < len(s) && len(dst) < cap(dst); i++ {
		dst = append(dst, lowerASCII(s[i]))
	}
	if len(s) > cap(dst) {
		return dst[:0]
	}
	return dst
}
