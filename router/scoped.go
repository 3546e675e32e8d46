package router

import (
	"strconv"
	"strings"

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
	// Refs are the reads in text order, and Aliases the columns to keep
	// their names, in text order; both nil when the text could not be
	// mapped onto the parse exactly (a read the scan missed or counted
	// twice): the statement can then not be rewritten.
	Refs    []ScopedRef
	Aliases []ScopedAlias
	// SetsLastInsertID: the statement calls LAST_INSERT_ID(expr), which
	// sets the value on the connection that runs it (and which a later
	// LAST_INSERT_ID() in the same statement reads).
	SetsLastInsertID bool
}

// ScopedValues are a session's own connection-scoped values. Skip names
// those the connection that runs the statement already holds for the
// session: their reads are left as written.
type ScopedValues struct {
	LastInsertID uint64
	RowCount     int64
	FoundRows    int64
	ConnID       uint64
	Skip         ScopedFunc
}

// Rewrite appends to dst the text sql (of the plan this Scoped belongs to)
// with each read of a value not in v.Skip replaced by an expression that
// yields the session's value with the type, length and flags the server
// gives the original (IF(1, value, original)), and an alias after every
// select field whose name would change. It reports false, appending
// nothing, when there is nothing to replace.
func (sc *Scoped) Rewrite(dst []byte, sql []byte, v *ScopedValues) ([]byte, bool) {
	if len(sc.Refs) == 0 || sc.Uses&^v.Skip == 0 {
		return dst, false
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
	for _, r := range sc.Refs {
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
// without arguments reads.
func scopedFuncOf(name string) ScopedFunc {
	switch name {
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
// holds.
func scopedVarOf(name string) ScopedFunc {
	switch strings.ToLower(name) {
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
		f := scopedFuncOf(x.FnName.L)
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
			if f := scopedVarOf(x.Name); f != 0 {
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
func scopedOf(stmt ast.StmtNode, sql string) *Scoped {
	var w scopedWalker
	stmt.Accept(&w)
	if w.uses == 0 && !w.sets {
		return nil
	}
	sc := &Scoped{Uses: w.uses, SetsLastInsertID: w.sets}
	if w.uses == 0 {
		return sc
	}
	refs := scanScoped(sql)
	var counts [4]int
	for _, r := range refs {
		counts[scopedIndex(r.Func)]++
	}
	if counts != w.counts {
		return sc
	}
	var aliases []ScopedAlias
	for _, f := range w.fields {
		text := f.Text()
		end := f.Offset + len(text)
		if f.Offset < 0 || end > len(sql) || sql[f.Offset:end] != text {
			return sc
		}
		for _, r := range refs {
			if r.Start >= f.Offset && r.End <= end {
				if len(text) > 250 {
					// Longer than a column alias may be.
					return sc
				}
				aliases = append(aliases, ScopedAlias{At: end, Name: text})
				break
			}
		}
	}
	// Fields nest (a subquery in a select field): keep the aliases in text
	// order, innermost first at the same end.
	for i := 1; i < len(aliases); i++ {
		for j := i; j > 0 && aliases[j].At < aliases[j-1].At; j-- {
			aliases[j], aliases[j-1] = aliases[j-1], aliases[j]
		}
	}
	sc.Refs, sc.Aliases = refs, aliases
	return sc
}

// scanScoped finds in sql, as the server reads it by default, the calls
// LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS(), CONNECTION_ID() (nothing but
// spaces and comments between the parentheses, not qualified by a schema)
// and the session variables @@[session.|local.]last_insert_id, identity and
// pseudo_thread_id, outside strings, quoted names and comments (the inside
// of an executable comment is code).
func scanScoped(sql string) []ScopedRef {
	var refs []ScopedRef
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
			if f := scopedFuncOf(strings.ToLower(sql[start+1 : max(start+1, i-1)])); f != 0 && prev != '.' {
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
			start := i
			j := i + 2
			e := word(j)
			if w := strings.ToLower(sql[j:e]); (w == "session" || w == "local") && e < len(sql) && sql[e] == '.' {
				j = e + 1
				e = word(j)
			}
			if e > j {
				if f := scopedVarOf(sql[j:e]); f != 0 && (e == len(sql) || sql[e] != '.') {
					refs = append(refs, ScopedRef{Start: start, End: e, Func: f})
				}
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
			w := lower[:i-start]
			for k := range w {
				w[k] = lowerASCII(sql[start+k])
			}
			prev = sql[i-1]
			f := scopedFuncOf(string(w))
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
