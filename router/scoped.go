package router

import (
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
)

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
	Counts     [4]int
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
	Skip         ScopedFunc
	Refs         []ScopedRef
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
		}
		dst = append(dst, ',')
		dst = append(dst, sql[r.Start:r.End]...)
		dst = append(dst, ')')
		pos = r.End
	}
	aliasesUpTo(len(sql))
	return append(dst, sql[pos:]...), true
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
	counts [4]int
	sets   bool
	fields []*ast.SelectField
}

func scopedIndex(f ScopedFunc) int {
	switch f {
	case ScopedLastInsertID:
		return 0
	case ScopedRowCount:
		return 1
	case ScopedFoundRows:
		return 2
	}
	return 3
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
func countScoped(refs []ScopedRef) [4]int {
	var n [4]int
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
	skipSpace := func(i int) int {
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
	word := func(i int) int {
		for i < len(sql) && isWordByte(sql[i]) && sql[i] < 0x80 {
			i++
		}
		return i
	}
	// emptyParens reports whether "()" (spaces and comments allowed)
	// follows at i, and where it ends.
	emptyParens := func(i int) (int, bool) {
		j := skipSpace(i)
		if j >= len(sql) || sql[j] != '(' {
			return 0, false
		}
		j = skipSpace(j + 1)
		if j >= len(sql) || sql[j] != ')' {
			return 0, false
		}
		return j + 1, true
	}
	prev := byte(0)
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"':
			i = skipQuoted(sql, i, c, true)
			prev = c
		case c == '`':
			// A quoted name followed by "(" still calls the built-in.
			start := i
			i = skipQuoted(sql, i, c, false)
			var lower [16]byte
			if f := scopedFuncOf(lowerInto(lower[:0], sql[start+1:max(start+1, i-1)])); f != 0 && prev != '.' {
				if end, ok := emptyParens(i); ok {
					refs = append(refs, ScopedRef{Start: start, End: end, Func: f})
					i = end
				}
			}
			prev = c
		case c == '/' && strings.HasPrefix(sql[i:], "/*!"), c == '/' && strings.HasPrefix(sql[i:], "/*M!"):
			// Executable comment: its text is code.
			i += 3
			if sql[i-1] == 'M' {
				i++
			}
			for i < len(sql) && sql[i] >= '0' && sql[i] <= '9' {
				i++
			}
		case c == '*' && strings.HasPrefix(sql[i:], "*/"):
			i += 2
		case c == '/' && strings.HasPrefix(sql[i:], "/*"), c == '#', c == '-' && strings.HasPrefix(sql[i:], "--") && (i+2 == len(sql) || sql[i+2] <= ' '):
			if c == '/' {
				i = skipSpace(i)
				continue
			}
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				return refs
			}
			i += end + 1
		case c == '@' && strings.HasPrefix(sql[i:], "@@"):
			// @@name, @@session.name, @@local.name; each part bare or in
			// backquotes.
			start := i
			var lower [16]byte
			part := func(j int) (name []byte, end int) {
				if j < len(sql) && sql[j] == '`' {
					end = skipQuoted(sql, j, '`', false)
					return lowerInto(lower[:0], sql[j+1:max(j+1, end-1)]), end
				}
				end = word(j)
				return lowerInto(lower[:0], sql[j:end]), end
			}
			w, e := part(i + 2)
			if (string(w) == "session" || string(w) == "local") && e < len(sql) && sql[e] == '.' {
				w, e = part(e + 1)
			}
			if f := scopedVarOf(w); f != 0 && (e == len(sql) || sql[e] != '.') {
				refs = append(refs, ScopedRef{Start: start, End: e, Func: f})
			}
			i, prev = max(e, i+2), '@'
		case isWordByte(c) && c < 0x80:
			start := i
			i = word(i)
			if prev == '.' || prev == '@' || i-start > len("last_insert_id") {
				prev = sql[i-1]
				continue
			}
			var lower [16]byte
			prev = sql[i-1]
			f := scopedFuncOf(lowerInto(lower[:0], sql[start:i]))
			if f == 0 {
				continue
			}
			end, ok := emptyParens(i)
			if !ok {
				continue
			}
			refs = append(refs, ScopedRef{Start: start, End: end, Func: f})
			i, prev = end, ')'
		default:
			if !isSpace(c) {
				prev = c
			}
			i++
		}
	}
	return refs
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
