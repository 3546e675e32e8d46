package router

import (
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// withScope runs f with one more query block, of sources, innermost.
func (x *extractor) withScope(sources []source, f func()) {
	x.scopes = append(x.scopes, sources)
	f()
	x.scopes = x.scopes[:len(x.scopes)-1]
}

// withCTEs runs f with the names w defines in scope, after adding what
// their queries need.
func (x *extractor) withCTEs(w *ast.WithClause, f func()) {
	n := len(x.ctes)
	if w != nil {
		for _, c := range w.CTEs {
			if w.IsRecursive {
				x.ctes = append(x.ctes, c.Name.L)
			}
			if c.Query != nil {
				x.query(c.Query.Query)
			}
			if !w.IsRecursive {
				x.ctes = append(x.ctes, c.Name.L)
			}
		}
	}
	f()
	x.ctes = x.ctes[:n]
}

// isCTE reports whether t names a common table expression in scope.
func (x *extractor) isCTE(t *ast.TableName) bool {
	if t.Schema.L != "" {
		return false
	}
	for _, c := range x.ctes {
		if c == t.Name.L {
			return true
		}
	}
	return false
}

// query adds what a query (SELECT, set operation, TABLE, VALUES) needs.
func (x *extractor) query(n ast.ResultSetNode) {
	switch q := n.(type) {
	case *ast.SelectStmt:
		x.withCTEs(q.With, func() { x.selectBlock(q) })
	case *ast.SetOprStmt:
		x.withCTEs(q.With, func() {
			if q.SelectList != nil {
				x.selectList(q.SelectList)
			}
			// ORDER BY and LIMIT of the whole: names there are the
			// result's columns, but their subqueries read.
			x.withScope(nil, func() {
				if q.OrderBy != nil {
					for _, it := range q.OrderBy.Items {
						x.expr(it.Expr, PrivSelect)
					}
				}
				if q.Limit != nil {
					x.expr(q.Limit, PrivSelect)
				}
			})
		})
	case *ast.SubqueryExpr:
		x.query(q.Query)
	case *ast.TableSource:
		x.query(q.Source)
	case *ast.TableName:
		if !x.isCTE(q) {
			x.table(q, 0, PrivSelect)
		}
	}
}

// selectList adds what the blocks of a set operation need.
func (x *extractor) selectList(l *ast.SetOprSelectList) {
	x.withCTEs(l.With, func() {
		for _, s := range l.Selects {
			switch q := s.(type) {
			case *ast.SetOprSelectList:
				x.selectList(q)
			case ast.ResultSetNode:
				x.query(q)
			}
		}
	})
}

// sources adds the Needs of the tables of a FROM clause (SELECT on each,
// what derived tables need) and returns them as a scope; the ON
// conditions are left to onConds.
func (x *extractor) sources(j ast.ResultSetNode, p Priv, out []source) []source {
	switch t := j.(type) {
	case *ast.Join:
		out = x.sources(t.Left, p, out)
		if t.Right != nil {
			out = x.sources(t.Right, p, out)
		}
	case *ast.TableSource:
		switch src := t.Source.(type) {
		case *ast.TableName:
			ref := t.AsName.L
			if ref == "" {
				ref = src.Name.L
			}
			if x.isCTE(src) {
				return append(out, source{ref: ref, derived: true})
			}
			x.table(src, 0, p)
			return append(out, source{ref: ref, db: src.Schema.O, table: src.Name.O})
		default:
			x.query(src)
			return append(out, source{ref: t.AsName.L, derived: true})
		}
	case *ast.TableName:
		if x.isCTE(t) {
			return append(out, source{ref: t.Name.L, derived: true})
		}
		x.table(t, 0, p)
		return append(out, source{ref: t.Name.L, db: t.Schema.O, table: t.Name.O})
	}
	return out
}

// onConds adds what the ON conditions of a join tree read.
func (x *extractor) onConds(j ast.ResultSetNode) {
	switch t := j.(type) {
	case *ast.Join:
		x.onConds(t.Left)
		if t.Right != nil {
			x.onConds(t.Right)
		}
		if t.On != nil {
			x.expr(t.On.Expr, PrivSelect)
		}
		for _, c := range t.Using {
			x.column(c, PrivSelect)
		}
	}
}

// selectBlock adds what one SELECT block needs.
func (x *extractor) selectBlock(q *ast.SelectStmt) {
	if q.SelectIntoOpt != nil && q.SelectIntoOpt.Tp != ast.SelectIntoVars {
		// Asked before any table.
		x.global(PrivFile)
	}
	var scope []source
	if q.From != nil && q.From.TableRefs != nil {
		scope = x.sources(q.From.TableRefs, PrivSelect, nil)
	}
	x.withScope(scope, func() {
		if q.From != nil && q.From.TableRefs != nil {
			x.onConds(q.From.TableRefs)
		}
		var aliases []string
		if q.Fields != nil {
			for _, f := range q.Fields.Fields {
				if f.WildCard != nil {
					x.wildcard(f.WildCard, scope)
					continue
				}
				x.expr(f.Expr, PrivSelect)
				if f.AsName.L != "" {
					aliases = append(aliases, f.AsName.L)
				}
			}
		}
		x.expr(q.Where, PrivSelect)
		if q.GroupBy != nil {
			for _, it := range q.GroupBy.Items {
				x.expr(it.Expr, PrivSelect)
			}
		}
		if q.Having != nil {
			x.exprSkipping(q.Having.Expr, aliases)
		}
		if q.OrderBy != nil {
			for _, it := range q.OrderBy.Items {
				x.exprSkipping(it.Expr, aliases)
			}
		}
		for i := range q.WindowSpecs {
			x.expr(&q.WindowSpecs[i], PrivSelect)
		}
		if q.Limit != nil {
			x.expr(q.Limit, PrivSelect)
		}
	})
}

// wildcard adds SELECT on the whole of every real table * or t.* covers.
func (x *extractor) wildcard(w *ast.WildCardField, scope []source) {
	for _, s := range scope {
		if s.derived || w.Table.L != "" && (s.ref != w.Table.L || w.Schema.L != "" && s.db != "" && !strings.EqualFold(w.Schema.O, s.db)) {
			continue
		}
		x.add(Need{Level: NeedTable, DB: strings.Clone(s.db), Table: strings.Clone(s.table), Priv: PrivSelect})
	}
}

// expr adds what expression e needs: p on the columns it names, EXECUTE on
// the stored functions it calls, and what its subqueries need.
func (x *extractor) expr(e ast.Node, p Priv) { x.exprSkipping2(e, p, nil) }

// exprSkipping is expr for ORDER BY and HAVING, where a bare name that is
// a select-list alias means the alias.
func (x *extractor) exprSkipping(e ast.Node, aliases []string) {
	x.exprSkipping2(e, PrivSelect, aliases)
}

func (x *extractor) exprSkipping2(e ast.Node, p Priv, aliases []string) {
	if e == nil {
		return
	}
	if c, ok := e.(*ast.ColumnNameExpr); ok && c.Name.Table.L == "" && c.Name.Schema.L == "" {
		// Only a name that is the whole item means the alias; inside an
		// expression MariaDB takes the table's column.
		for _, a := range aliases {
			if a == c.Name.Name.L {
				return
			}
		}
	}
	e.Accept(&exprVisitor{x: x, p: p})
}

// exprVisitor walks one expression for extractor.expr.
type exprVisitor struct {
	x *extractor
	p Priv
}

func (v *exprVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch e := n.(type) {
	case *ast.SubqueryExpr:
		v.x.query(e.Query)
		return n, true
	case *ast.ColumnNameExpr:
		v.x.column(e.Name, v.p)
		return n, true
	case *ast.ValuesExpr:
		// VALUES(col) of ON DUPLICATE KEY UPDATE is the value being
		// inserted.
		return n, true
	case *ast.DefaultExpr:
		if e.Name != nil {
			v.x.column(e.Name, v.p)
		}
		return n, true
	case *ast.MatchAgainst:
		for _, c := range e.ColumnNames {
			v.x.column(c, v.p)
		}
	case *ast.FuncCallExpr:
		if e.Schema.L == "" && len(e.Args) > 0 {
			// Sequences: NEXTVAL/SETVAL write one, LASTVAL reads it.
			if tn, ok := e.Args[0].(*ast.TableNameExpr); ok && tn.Name != nil {
				switch e.FnName.L {
				case "nextval", "setval":
					v.x.table(tn.Name, PrivInsert, 0)
				case "lastval":
					v.x.table(tn.Name, PrivSelect, 0)
				}
			}
		}
		if e.Schema.L != "" || !isBuiltinFunc(e.FnName.L) || !geometryArity(e.FnName.L, len(e.Args)) {
			v.x.routine(e.Schema.O, e.FnName.O, PrivExecute, true)
		}
	}
	return n, false
}

func (*exprVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// column adds p on column c, resolved against the scopes: a qualified name
// to the source it names (every source of that name, when blocks reuse
// one), a bare name to the one table of the innermost block when it is the
// only scope, else to every real table in scope (sluice does not know
// which holds the column; asking it of each can only refuse more).
func (x *extractor) column(c *ast.ColumnName, p Priv) {
	for i := len(x.scopes) - 1; i >= 0; i-- {
		for _, s := range x.scopes[i] {
			if s.derived || c.Table.L == "" {
				continue
			}
			// A source named without a database is in the current one,
			// which db.t.col may name.
			if s.ref == c.Table.L && (c.Schema.L == "" || s.db == "" || strings.EqualFold(c.Schema.O, s.db)) {
				x.colNeed(s, c, p)
			}
		}
	}
	if c.Table.L != "" {
		return
	}
	if len(x.scopes) == 1 && len(x.scopes[0]) == 1 {
		if s := x.scopes[0][0]; !s.derived {
			x.colNeed(s, c, p)
		}
		return
	}
	for i := len(x.scopes) - 1; i >= 0; i-- {
		for _, s := range x.scopes[i] {
			if !s.derived {
				x.colNeed(s, c, p)
			}
		}
	}
}

func (x *extractor) colNeed(s source, c *ast.ColumnName, p Priv) {
	x.add(Need{Level: NeedColumn, DB: strings.Clone(s.db), Table: strings.Clone(s.table), Column: strings.Clone(c.Name.O), Priv: p})
}
