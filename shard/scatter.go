package shard

import (
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// Hidden sort-key expressions. A scatter-gather merge never compares text
// itself: the Parts compute, next to each value the merge compares, the
// collation's sort key (WEIGHT_STRING) and whether the collation pads with
// spaces, and for ENUM and SET the position the server sorts them by. The
// merge picks among them by the column's type in the result metadata.

func funcCall(name string, args ...ast.ExprNode) *ast.FuncCallExpr {
	return &ast.FuncCallExpr{FnName: ast.NewCIStr(name), Args: args}
}

func paren(e ast.ExprNode) ast.ExprNode { return &ast.ParenthesesExpr{Expr: e} }

// weightExpr is WEIGHT_STRING(e): the sort key of e's value in e's
// collation, NULL for a number or NULL.
func weightExpr(e ast.ExprNode) ast.ExprNode {
	return funcCall(ast.WeightString, e)
}

// padExpr tells how the server pads e's sort key: 'P' when e's collation
// is PAD SPACE (e equals e followed by a space), else 'N', followed by the
// sort key of a space in that collation, which also shows whether the
// collation compares at one level. The space is cut from e itself so that
// it carries e's collation.
func padExpr(e ast.ExprNode) ast.ExprNode {
	withSpace := func() ast.ExprNode { return funcCall(ast.Concat, paren(e), ast.NewValueExpr(" ", "", "")) }
	cond := &ast.BinaryOperationExpr{Op: opcode.EQ, L: paren(e), R: withSpace()}
	return funcCall(ast.Concat,
		funcCall(ast.If, cond, ast.NewValueExpr("P", "", ""), ast.NewValueExpr("N", "", "")),
		weightExpr(funcCall(ast.Right, withSpace(), ast.NewValueExpr(1, "", ""))))
}

// positionExpr is e+0: an ENUM's index, a SET's bits.
func positionExpr(e ast.ExprNode) ast.ExprNode {
	return &ast.BinaryOperationExpr{Op: opcode.Plus, L: paren(e), R: ast.NewValueExpr(0, "", "")}
}

// outerName is (SELECT name WHERE RAND() IS NOT NULL): in the select
// list, a subquery resolves an unqualified name first as a column of the
// outer tables and then as an alias of the outer select list, as the
// server resolves a name in GROUP BY, or inside an ORDER BY expression,
// while a bare select field names columns only. RAND() keeps MariaDB's
// subquery cache away: keyed by the name's value compared in its
// collation, it would answer a row holding 'a' with the 'a ' of an
// earlier row.
func outerName(name ast.CIStr) ast.ExprNode {
	return &ast.SubqueryExpr{Query: &ast.SelectStmt{
		Kind:           ast.SelectStmtKindSelect,
		SelectStmtOpts: &ast.SelectStmtOpts{SQLCache: true},
		Fields:         &ast.FieldList{Fields: []*ast.SelectField{{Expr: &ast.ColumnNameExpr{Name: &ast.ColumnName{Name: name}}}}},
		Where:          &ast.IsNullExpr{Not: true, Expr: funcCall(ast.Rand)},
	}}
}

// aliasSub replaces, in an expression it visits, the unqualified column
// names that are also aliases of the select list by outerName, and notes
// an alias of an aggregate, which a subquery may not name.
type aliasSub struct {
	aliases map[string]*ast.SelectField
	found   bool
	aggOf   string
}

func (v *aliasSub) Enter(n ast.Node) (ast.Node, bool) {
	_, sub := n.(*ast.SubqueryExpr)
	return n, sub // a subquery's names are its own
}

func (v *aliasSub) Leave(n ast.Node) (ast.Node, bool) {
	c, ok := n.(*ast.ColumnNameExpr)
	if !ok || c.Name.Table.L != "" || c.Name.Schema.L != "" {
		return n, true
	}
	f := v.aliases[c.Name.Name.L]
	if f == nil {
		return n, true
	}
	v.found = true
	if aggregateIn(f.Expr) != nil {
		v.aggOf = c.Name.Name.O
	}
	return outerName(c.Name.Name), true
}

// aliasesOf maps the lower-case aliases of fields to their fields.
func aliasesOf(fields []*ast.SelectField) map[string]*ast.SelectField {
	m := make(map[string]*ast.SelectField)
	for _, f := range fields {
		if f.AsName.L != "" {
			if _, dup := m[f.AsName.L]; !dup {
				m[f.AsName.L] = f
			}
		}
	}
	return m
}

// withAliases returns a copy of e, a GROUP BY or ORDER BY expression, in
// which names that are also aliases are resolved as the server resolves
// them there (column first, then alias), fit for the select list; e itself
// when it names no alias; nil when no faithful copy can be made. A copy is
// made by parsing e's text again, so the statement's own clause is left as
// the client wrote it, and is used only when it restores to the same text.
func withAliases(e ast.ExprNode, aliases map[string]*ast.SelectField) (ast.ExprNode, string, error) {
	probe := &aliasSub{aliases: aliases}
	names := false
	walk(e, func(n ast.Node) bool {
		if c, ok := n.(*ast.ColumnNameExpr); ok && c.Name.Table.L == "" && aliases[c.Name.Name.L] != nil {
			names = true
		}
		_, sub := n.(*ast.SubqueryExpr)
		return names || sub
	})
	if !names {
		return e, "", nil
	}
	text := restoreExpr(e)
	// restoreExpr writes for the default sql_mode: read it back so.
	stmts, err := parse("SELECT "+text, 0)
	if err != nil || len(stmts) != 1 {
		return nil, "", err
	}
	sel, ok := stmts[0].(*ast.SelectStmt)
	if !ok || sel.Fields == nil || len(sel.Fields.Fields) != 1 {
		return nil, "", nil
	}
	cp := sel.Fields.Fields[0].Expr
	if restoreExpr(cp) != text {
		// The copy does not read as the original: no copy.
		return nil, "", nil
	}
	out, _ := cp.Accept(probe)
	return out.(ast.ExprNode), probe.aggOf, nil
}
