package shard

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/mysql"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// SQLMode is the set of a session's sql_mode flags that change how the
// server reads a statement's text. A Template is built for one set: the
// statement is parsed as the server will read it and rewritten so the
// server reads the rewrite the same way.
type SQLMode uint8

const (
	// ModeANSIQuotes: "x" is an identifier, not a string.
	ModeANSIQuotes SQLMode = 1 << iota
	// ModeNoBackslashEscapes: a backslash in a string is an ordinary
	// character, so a rewrite must not escape one.
	ModeNoBackslashEscapes
	// ModePipesAsConcat: || concatenates instead of OR.
	ModePipesAsConcat
	// ModeHighNotPrecedence: NOT binds tighter than comparisons.
	ModeHighNotPrecedence
	// ModeUnsure: the session's modes are not known, or hold one the
	// parser cannot follow (ORACLE). A statement that may name a sharded
	// or broadcast table is refused: sluice cannot be sure it reads it as
	// the server will.
	ModeUnsure
)

// tidbMode is the parser's sql_mode for m: the parser's default plus the
// lexing flags of m.
func (m SQLMode) tidbMode() mysql.SQLMode {
	t := defaultSQLMode
	if m&ModeANSIQuotes != 0 {
		t |= mysql.ModeANSIQuotes
	}
	if m&ModeNoBackslashEscapes != 0 {
		t |= mysql.ModeNoBackslashEscapes
	}
	if m&ModePipesAsConcat != 0 {
		t |= mysql.ModePipesAsConcat
	}
	if m&ModeHighNotPrecedence != 0 {
		t |= mysql.ModeHighNotPrecedence
	}
	return t
}

// restoreFlags are the flags that write an AST back as text the server
// reads the same way under m: strings in single quotes (a string under
// every mode), names in backquotes (a name under every mode), and
// backslashes doubled only where the server takes them for escapes.
func (m SQLMode) restoreFlags() format.RestoreFlags {
	if m&ModeNoBackslashEscapes != 0 {
		return restoreFlags &^ format.RestoreStringEscapeBackslash
	}
	return restoreFlags
}

// literalTok is a number, hexadecimal or bit literal as written in a
// statement's text.
type literalTok struct {
	text string
	bin  bool // hexadecimal or bit: its spelling changes its meaning
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanLiterals lists the number, hexadecimal and bit literals of sql in
// text order, reading quotes and comments as the server does under m.
// A literal after a character set introducer (_latin1 0x41) is listed with
// it, as the parser writes the two together.
func scanLiterals(sql string, m SQLMode) []literalTok {
	out, _ := scanText(sql, m)
	return out
}

// scanText is scanLiterals, and also returns, when the text holds one, a
// construct the parser reads otherwise than MariaDB, so that no rewrite of
// it can be trusted (hazard is "" when there is none):
//   - the JSON operators -> and ->>, which MariaDB does not have (the
//     parser takes them for JSON_EXTRACT);
//   - /*M! comments, which MariaDB runs and the parser drops, and /*!
//     comments with a version past 5.6, which MariaDB runs only from
//     that version on (MySQL's 5.7 and later never) and the parser
//     always;
//   - a string after an introduced one (N'a' 'b', _latin1'a' 'b'), one
//     string to MariaDB and a string with an alias to the parser;
//   - the names char_func and insert_func, which the parser gives the
//     built-ins CHAR(...) and INSERT(...) too.
func scanText(sql string, m SQLMode) (out []literalTok, hazard string) {
	afterIntroducer := false
	introducer := 0     // where the introducer before a literal starts
	introduced := false // the last token was a string after an introducer
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' && m&ModeANSIQuotes == 0:
			if introduced {
				hazard = "a string after a string with a character set introducer"
			}
			i = skipQuoted(sql, i, m&ModeNoBackslashEscapes != 0)
			introduced, afterIntroducer = afterIntroducer, false
			continue
		case c == '`' || c == '"':
			i = skipQuoted(sql, i, true)
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			rest := sql[i+2:]
			if strings.HasPrefix(rest, "!") || strings.HasPrefix(rest, "M!") {
				j := i + 3
				if rest[0] == 'M' {
					j++
				}
				k := j
				for k < len(sql) && sql[k] >= '0' && sql[k] <= '9' {
					k++
				}
				if v, _ := strconv.Atoi(sql[j:k]); k > j && (k-j != 5 || v >= 50700) {
					// MariaDB runs /*!NNNNN from 5.7 on (MySQL's versions)
					// never, and /*!NNNNNN from its own version on.
					hazard = "a /*! comment for a server version"
				}
				if rest[0] == 'M' {
					hazard = "a /*M! comment"
				}
				i = k
				continue // the comment's body is code; its end is skipped below
			}
			j := strings.Index(rest, "*/")
			if j < 0 {
				return out, hazard
			}
			i += 2 + j + 2
			continue // a comment is no token
		case c == '*' && i+1 < len(sql) && sql[i+1] == '/':
			i += 2 // the end of an executable comment
			continue
		case c == '#' || c == '-' && strings.HasPrefix(sql[i:], "--") && (i+2 == len(sql) || sql[i+2] <= ' '):
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				return out, hazard
			}
			i += j + 1
			continue
		case c == '-' && i+1 < len(sql) && sql[i+1] == '>':
			hazard = "the JSON operator -> or ->> (MariaDB has neither)"
			i += 2
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		case (c == 'x' || c == 'X' || c == 'b' || c == 'B') && i+1 < len(sql) && sql[i+1] == '\'':
			j := strings.IndexByte(sql[i+2:], '\'')
			if j < 0 {
				return out, hazard
			}
			end := i + 2 + j + 1
			start := i
			if afterIntroducer {
				start = introducer
			}
			out = append(out, literalTok{text: sql[start:end], bin: true})
			i = end
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(sql) && sql[i+1] >= '0' && sql[i+1] <= '9' && (i == 0 || !isIdentByte(sql[i-1]) && sql[i-1] != '`'):
			j, bin := scanNumber(sql, i)
			if j < len(sql) && isIdentByte(sql[j]) {
				// An identifier that starts with digits (1abc, 0x1g).
				for j < len(sql) && isIdentByte(sql[j]) {
					j++
				}
			} else {
				start := i
				if afterIntroducer {
					start = introducer
				}
				out = append(out, literalTok{text: sql[start:j], bin: bin})
			}
			i = j
		case isIdentByte(c) || c == '@':
			j := i + 1
			for j < len(sql) && isIdentByte(sql[j]) {
				j++
			}
			// _latin1 'x', or N'x' (no space allowed).
			intro := c == '_' && j-i > 1 || j-i == 1 && (c == 'N' || c == 'n') && j < len(sql) && sql[j] == '\''
			if w := sql[i:j]; strings.EqualFold(w, "char_func") || strings.EqualFold(w, "insert_func") {
				hazard = "the name " + w + ", which the parser also gives CHAR(...) and INSERT(...)"
			}
			afterIntroducer, introducer, introduced = intro, i, false
			i = j
			continue
		default:
			i++
		}
		afterIntroducer, introduced = false, false
	}
	return out, hazard
}

// scanNumber returns the end of the number that starts at sql[i] and
// whether it is a 0x hexadecimal or 0b bit literal.
func scanNumber(sql string, i int) (int, bool) {
	if sql[i] == '0' && i+2 < len(sql) && (sql[i+1] == 'x' || sql[i+1] == 'b') {
		j := i + 2
		for j < len(sql) && (sql[i+1] == 'x' && isHexDigit(sql[j]) || sql[i+1] == 'b' && (sql[j] == '0' || sql[j] == '1')) {
			j++
		}
		if j > i+2 {
			return j, true
		}
	}
	j := i
	for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
		j++
	}
	if j < len(sql) && sql[j] == '.' {
		j++
		for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
			j++
		}
	}
	if j < len(sql) && (sql[j] == 'e' || sql[j] == 'E') {
		k := j + 1
		if k < len(sql) && (sql[k] == '+' || sql[k] == '-') {
			k++
		}
		if k < len(sql) && sql[k] >= '0' && sql[k] <= '9' {
			for k < len(sql) && sql[k] >= '0' && sql[k] <= '9' {
				k++
			}
			j = k
		}
	}
	return j, false
}

// spellings maps the parser's spelling of each number, hexadecimal and bit
// literal of sql to the spelling the client wrote: the parser writes
// 0x0b as X'0b', which MariaDB reads as a string, not a number, and 1e0
// as 1e+00, which names a result column otherwise. A spelling the client
// wrote in two ways maps to "" (ambiguous); bin lists the parser's
// spellings of hexadecimal and bit literals. ok is false when the
// literals could not be told apart.
type spellings struct {
	to  map[string]string
	bin map[string]bool
	ok  bool
}

func newSpellings(sql string, m SQLMode) *spellings {
	toks := scanLiterals(sql, m)
	sp := &spellings{to: make(map[string]string, len(toks)), bin: make(map[string]bool), ok: true}
	if len(toks) == 0 {
		return sp
	}
	var sb strings.Builder
	sb.WriteString("SELECT ")
	for i, tk := range toks {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(tk.text)
	}
	stmts, err := parse(sb.String(), m)
	sel, isSel := firstStmt(stmts).(*ast.SelectStmt)
	if err != nil || !isSel || sel.Fields == nil || len(sel.Fields.Fields) != len(toks) {
		sp.ok = false
		return sp
	}
	flags := m.restoreFlags()
	for i, f := range sel.Fields.Fields {
		v, isVal := f.Expr.(*test_driver.ValueExpr)
		if !isVal {
			sp.ok = false
			return sp
		}
		var d strings.Builder
		if err := v.Restore(format.NewRestoreCtx(flags, &d)); err != nil {
			sp.ok = false
			return sp
		}
		key := d.String()
		if toks[i].bin {
			sp.bin[key] = true
		}
		switch old, seen := sp.to[key]; {
		case !seen:
			sp.to[key] = toks[i].text
		case old != toks[i].text && !(isBitSpelling(old) && isBitSpelling(toks[i].text)):
			// b'101' and 0b101 mean the same; 0x41 and X'41' do not.
			sp.to[key] = ""
		}
	}
	return sp
}

// isBitSpelling reports whether a literal is written b'..' or 0b..
// (MariaDB reads both alike).
func isBitSpelling(s string) bool {
	return strings.HasPrefix(s, "0b") || strings.HasPrefix(s, "b'") || strings.HasPrefix(s, "B'")
}

func firstStmt(stmts []ast.StmtNode) ast.StmtNode {
	if len(stmts) == 0 {
		return nil
	}
	return stmts[0]
}

// spelledExpr stands in for a literal while a statement is restored, and
// writes the literal as the client spelled it.
type spelledExpr struct {
	*test_driver.ValueExpr
	text string
}

// Restore writes the literal as the client wrote it.
func (s *spelledExpr) Restore(ctx *format.RestoreCtx) error {
	ctx.WritePlain(s.text)
	return nil
}

// Accept visits the stand-in alone: a literal has no children.
func (s *spelledExpr) Accept(v ast.Visitor) (ast.Node, bool) {
	n, _ := v.Enter(s)
	return v.Leave(n)
}

// charFuncExpr stands in for CHAR(n, ... USING charset), which the parser
// holds as a call of CHAR_FUNC with the character set as its last argument
// and would write back as a call of that name, unknown to the server.
type charFuncExpr struct {
	*ast.FuncCallExpr
}

// Restore writes CHAR(args USING charset), or CHAR(args) when the call
// names no character set.
func (c *charFuncExpr) Restore(ctx *format.RestoreCtx) error {
	args := c.Args
	ctx.WriteKeyWord("CHAR")
	ctx.WritePlain("(")
	cs := args[len(args)-1]
	for i, a := range args[:len(args)-1] {
		if i > 0 {
			ctx.WritePlain(", ")
		}
		if err := a.Restore(ctx); err != nil {
			return err
		}
	}
	if v, ok := cs.(*test_driver.ValueExpr); ok && v.Kind() == test_driver.KindString {
		ctx.WriteKeyWord(" USING ")
		ctx.WriteKeyWord(v.GetString())
	}
	ctx.WritePlain(")")
	return nil
}

// Accept visits the stand-in and its arguments, so the literals among them
// are swapped like any other.
func (c *charFuncExpr) Accept(v ast.Visitor) (ast.Node, bool) { return acceptCall(c, c.Args, v) }

// acceptCall visits a stand-in n for a function call and then its
// arguments args, replacing each by what the visitor returns.
func acceptCall(n ast.Node, args []ast.ExprNode, v ast.Visitor) (ast.Node, bool) {
	out, skip := v.Enter(n)
	if skip {
		return v.Leave(out)
	}
	for i, a := range args {
		na, ok := a.Accept(v)
		if !ok {
			return n, false
		}
		args[i] = na.(ast.ExprNode)
	}
	return v.Leave(out)
}

// insertFuncExpr stands in for the string function INSERT(s, pos, len,
// new), which the parser holds as a call of INSERT_FUNC.
type insertFuncExpr struct {
	*ast.FuncCallExpr
}

// Restore writes INSERT(args).
func (c *insertFuncExpr) Restore(ctx *format.RestoreCtx) error {
	ctx.WriteKeyWord("INSERT")
	ctx.WritePlain("(")
	for i, a := range c.Args {
		if i > 0 {
			ctx.WritePlain(", ")
		}
		if err := a.Restore(ctx); err != nil {
			return err
		}
	}
	ctx.WritePlain(")")
	return nil
}

// Accept visits the stand-in and its arguments.
func (c *insertFuncExpr) Accept(v ast.Visitor) (ast.Node, bool) { return acceptCall(c, c.Args, v) }

// swapper replaces, on the way out of each node, the nodes the parser
// would write back with another meaning by stand-ins that write them as
// the server reads them, and back again.
type swapper struct {
	b    *builder
	back bool
	err  error
}

func (w *swapper) Enter(n ast.Node) (ast.Node, bool) {
	_, spelled := n.(*spelledExpr)
	return n, spelled
}

func (w *swapper) Leave(n ast.Node) (ast.Node, bool) {
	if w.back {
		switch x := n.(type) {
		case *spelledExpr:
			return x.ValueExpr, true
		case *charFuncExpr:
			return x.FuncCallExpr, true
		case *insertFuncExpr:
			return x.FuncCallExpr, true
		}
		return n, true
	}
	switch x := n.(type) {
	case *test_driver.ValueExpr:
		switch x.Kind() {
		case test_driver.KindInt64, test_driver.KindUint64, test_driver.KindFloat32, test_driver.KindFloat64,
			test_driver.KindMysqlDecimal, test_driver.KindBinaryLiteral:
		default:
			return n, true
		}
		if x.Type.GetFlag()&mysql.IsBooleanFlag != 0 {
			return n, true // TRUE, FALSE
		}
		var d strings.Builder
		if err := x.Restore(format.NewRestoreCtx(w.b.flags, &d)); err != nil {
			return n, true
		}
		sp := w.b.spellings()
		s, found := sp.to[d.String()]
		switch {
		case found && s != "":
			return &spelledExpr{ValueExpr: x, text: s}, true
		case x.Kind() == test_driver.KindBinaryLiteral:
			// The client wrote it both as 0x.. and as X'..', or sluice
			// could not read how: the two mean different values.
			w.err = fmt.Errorf("cannot tell how the literal %s is spelled in the statement", d.String())
		}
	case *ast.FuncCallExpr:
		switch {
		case x.FnName.L == ast.CharFunc && len(x.Args) > 0:
			return &charFuncExpr{x}, true
		case x.FnName.L == ast.InsertFunc:
			return &insertFuncExpr{x}, true
		}
	}
	return n, true
}

// swap puts the stand-ins into n; unswap takes them out again.
func (b *builder) swap(n ast.Node) (ast.Node, error) {
	w := &swapper{b: b}
	n, _ = n.Accept(w)
	return n, w.err
}

func (b *builder) unswap(n ast.Node) ast.Node {
	n, _ = n.Accept(&swapper{b: b, back: true})
	return n
}

func (b *builder) spellings() *spellings {
	if b.spell == nil {
		b.spell = newSpellings(b.sql, b.mode)
	}
	return b.spell
}

// refuseRestore returns an error for a construct the parser writes back
// in a form MariaDB rejects or reads otherwise, and that has no stand-in.
func refuseRestore(n ast.Node) error {
	var err error
	walk(n, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectStmt:
			if x.LockInfo != nil && x.LockInfo.LockType == ast.SelectLockForShare {
				// LOCK IN SHARE MODE comes back as FOR SHARE.
				err = errors.New("LOCK IN SHARE MODE is written back as FOR SHARE, which MariaDB does not have")
			}
		}
		return err != nil
	})
	return err
}
