package shard

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// fieldText is the column name the server gives an unaliased select field:
// its text as written.
func fieldText(f *ast.SelectField, sql string) string {
	if s := f.Text(); s != "" {
		return strings.TrimSpace(s)
	}
	return restoreExpr(f.Expr)
}

// hiddenBase numbers hidden columns while the select list is still being
// built; scatterSelect turns them into positions at the end.
const hiddenBase = 1 << 24

// scatterSelect rewrites a top-level SELECT for a multi-shard execution and
// builds its Merge: AVG gets a hidden SUM and COUNT, ORDER BY and GROUP BY
// expressions missing from the select list become hidden columns, every
// value the merge compares gets hidden sort-key columns (scatter.go), and
// LIMIT becomes a per-Part row count hole.
func (b *builder) scatterSelect(t *Template, sel *ast.SelectStmt) error {
	unsupported := func(what string) error {
		return fmt.Errorf("%w: %s over several shards of %s", ErrUnsupported, what, t.ru.lower)
	}
	switch {
	case sel.Kind != ast.SelectStmtKindSelect:
		return unsupported("TABLE or VALUES")
	case sel.Having != nil:
		return unsupported("HAVING")
	case len(sel.WindowSpecs) > 0:
		return unsupported("WINDOW")
	case sel.SelectStmtOpts != nil && sel.SelectStmtOpts.CalcFoundRows:
		return unsupported("SQL_CALC_FOUND_ROWS")
	case sel.GroupBy != nil && sel.GroupBy.Rollup:
		return unsupported("WITH ROLLUP")
	case sel.Fields == nil:
		return unsupported("a SELECT without fields")
	}
	if sel.Distinct {
		for _, f := range sel.Fields.Fields {
			if f.WildCard != nil {
				// Each text column needs its sort key beside it.
				return unsupported("DISTINCT with *")
			}
		}
	}
	fields := sel.Fields.Fields
	m := &Merge{Limit: -1, Distinct: sel.Distinct}
	wild := -1
	orig := make([]string, len(fields))
	hasAgg := sel.GroupBy != nil
	for i, f := range fields {
		if f.WildCard != nil {
			if wild < 0 {
				wild = i
			}
			continue
		}
		orig[i] = restoreExpr(f.Expr)
		if _, ok := f.Expr.(*ast.AggregateFuncExpr); ok {
			hasAgg = true
		} else if a := aggregateIn(f.Expr); a != nil {
			if _, win := a.(*ast.WindowFuncExpr); win {
				return unsupported("window function " + restoreExpr(a))
			}
			return unsupported("aggregate inside an expression (" + orig[i] + ")")
		}
	}
	if wild >= 0 && hasAgg {
		return unsupported("* with aggregates or GROUP BY")
	}
	known := len(fields) // fields a column number can name
	if wild >= 0 {
		known = wild
	}
	var hidden []*ast.SelectField
	var hiddenText []string
	addHidden := func(e ast.ExprNode) int {
		hidden = append(hidden, &ast.SelectField{Expr: e})
		hiddenText = append(hiddenText, restoreExpr(e))
		return hiddenBase + len(hidden) - 1
	}
	// weigh adds the hidden sort key columns of column col, whose
	// expression is e, once per column; position adds e+0 for an ENUM or
	// SET sorted by its position.
	weights := make(map[int]int)
	weigh := func(col int, e ast.ExprNode, position bool) {
		i, ok := weights[col]
		if !ok {
			i = len(m.Weights)
			weights[col] = i
			m.Weights = append(m.Weights, Weight{Column: col, Weight: addHidden(weightExpr(e)), Pad: addHidden(padExpr(e))})
		}
		if position && m.Weights[i].Position == 0 {
			m.Weights[i].Position = addHidden(positionExpr(e))
		}
	}
	aliases := aliasesOf(fields)
	// aggregate records column col (a field or a hidden column) as the
	// aggregate e, with the hidden columns AVG, MIN and MAX need.
	aggregate := func(col int, e *ast.AggregateFuncExpr) error {
		if containsMarker(e) {
			return unsupported("a parameter inside " + restoreExpr(e))
		}
		switch strings.ToLower(e.F) {
		case ast.AggFuncCount:
			if e.Distinct {
				return unsupported("COUNT(DISTINCT)")
			}
			m.Aggregates = append(m.Aggregates, Aggregate{Column: col, Func: AggCount})
		case ast.AggFuncSum:
			if e.Distinct {
				return unsupported("SUM(DISTINCT)")
			}
			m.Aggregates = append(m.Aggregates, Aggregate{Column: col, Func: AggSum})
		case ast.AggFuncMin, ast.AggFuncMax:
			f := AggMin
			if strings.ToLower(e.F) == ast.AggFuncMax {
				f = AggMax
			}
			m.Aggregates = append(m.Aggregates, Aggregate{Column: col, Func: f})
			// MIN and MAX compare ENUM and SET as text.
			weigh(col, e, false)
		case ast.AggFuncAvg:
			if e.Distinct {
				return unsupported("AVG(DISTINCT)")
			}
			// The Parts still compute AVG, whose column definition the
			// client gets as the server sends it; the merge computes its
			// value from the hidden SUM and COUNT.
			sum := addHidden(&ast.AggregateFuncExpr{F: ast.AggFuncSum, Args: e.Args})
			cnt := addHidden(&ast.AggregateFuncExpr{F: ast.AggFuncCount, Args: e.Args})
			m.Aggregates = append(m.Aggregates, Aggregate{Column: col, Func: AggAvg, SumColumn: sum, CountColumn: cnt})
		default:
			return unsupported(strings.ToUpper(e.F))
		}
		return nil
	}
	for i, f := range fields {
		if a, ok := f.Expr.(*ast.AggregateFuncExpr); ok {
			if err := aggregate(i, a); err != nil {
				return err
			}
		}
	}
	// resolve finds or adds the column of a GROUP BY (group) or ORDER BY
	// item. A bare name is an alias first in ORDER BY but a column first
	// in GROUP BY; names inside an expression are columns first in both.
	resolve := func(e ast.ExprNode, group bool) (int, error) {
		switch x := e.(type) {
		case *ast.PositionExpr:
			if x.P != nil || x.N < 1 || x.N > known {
				return 0, unsupported("a column position beyond the known columns")
			}
			return x.N - 1, nil
		case *ast.ColumnNameExpr:
			if x.Name.Table.L == "" {
				for i := range known {
					if fields[i].AsName.L != x.Name.Name.L {
						continue
					}
					c, same := fields[i].Expr.(*ast.ColumnNameExpr)
					if !group || same && c.Name.Name.L == x.Name.Name.L {
						return i, nil
					}
					// GROUP BY an alias that may also be a column of
					// the tables: the server takes the column.
					if aggregateIn(fields[i].Expr) != nil {
						return 0, unsupported("GROUP BY the alias of an aggregate")
					}
					s := restoreExpr(outerName(x.Name.Name))
					for h, txt := range hiddenText {
						if txt == s {
							return hiddenBase + h, nil
						}
					}
					return addHidden(outerName(x.Name.Name)), nil
				}
			}
			for i := range known {
				c, ok := fields[i].Expr.(*ast.ColumnNameExpr)
				if ok && c.Name.Name.L == x.Name.Name.L && fields[i].AsName.L == "" &&
					(x.Name.Table.L == "" || c.Name.Table.L == "" || x.Name.Table.L == c.Name.Table.L) {
					return i, nil
				}
			}
		}
		s := restoreExpr(e)
		for i := range known {
			if orig[i] == s {
				return i, nil
			}
		}
		for i, h := range hiddenText {
			if h == s {
				return hiddenBase + i, nil
			}
		}
		if containsMarker(e) {
			return 0, unsupported("a parameter in ORDER BY or GROUP BY")
		}
		if a, ok := e.(*ast.AggregateFuncExpr); ok {
			if !hasAgg {
				return 0, unsupported("ORDER BY an aggregate of a query without aggregates")
			}
			col := addHidden(a)
			if err := aggregate(col, a); err != nil {
				return 0, err
			}
			return col, nil
		}
		if aggregateIn(e) != nil {
			return 0, unsupported("an aggregate inside an ORDER BY expression")
		}
		e2, aggAlias, err := withAliases(e, aliases)
		switch {
		case err != nil || e2 == nil:
			return 0, unsupported("an expression naming an alias (" + s + ")")
		case aggAlias != "":
			return 0, unsupported("an expression naming the alias of an aggregate (" + aggAlias + ")")
		}
		if e2 != e {
			s2 := restoreExpr(e2)
			for i, h := range hiddenText {
				if h == s2 {
					return hiddenBase + i, nil
				}
			}
		}
		return addHidden(e2), nil
	}
	// exprOf is the expression of column col, a field or a hidden column.
	exprOf := func(col int) ast.ExprNode {
		if col >= hiddenBase {
			return hidden[col-hiddenBase].Expr
		}
		return fields[col].Expr
	}
	// key adds the sort keys of a GROUP BY or ORDER BY column (COUNT, SUM
	// and AVG are numbers, MIN and MAX have theirs). Only a column can be
	// an ENUM or SET the server sorts by position (an expression of one
	// sorts as text), so only a column gets the position's column, whose
	// e+0 is an error for types such as UUID, INET6 and geometry.
	key := func(col int) {
		switch e := exprOf(col).(type) {
		case *ast.AggregateFuncExpr:
		case *ast.ColumnNameExpr:
			weigh(col, e, true)
		default:
			weigh(col, e, false)
		}
	}
	if sel.GroupBy != nil {
		for _, it := range sel.GroupBy.Items {
			c, err := resolve(it.Expr, true)
			if err != nil {
				return err
			}
			m.GroupBy = append(m.GroupBy, c)
			m.GroupDesc = append(m.GroupDesc, it.Desc)
			key(c)
		}
	}
	if sel.OrderBy != nil {
		for _, it := range sel.OrderBy.Items {
			if v, ok := it.Expr.(*test_driver.ValueExpr); ok && v.Kind() == test_driver.KindNull {
				continue // ORDER BY NULL
			}
			c, err := resolve(it.Expr, false)
			if err != nil {
				return err
			}
			m.OrderBy = append(m.OrderBy, SortKey{Column: c, Desc: it.Desc})
			key(c)
		}
	}
	if m.Distinct {
		// A column gets its e+0 too: a FLOAT's exact value (its text is
		// rounded), and an ENUM's or SET's position, as equal as its text.
		for i, f := range fields {
			if _, agg := f.Expr.(*ast.AggregateFuncExpr); !agg {
				_, col := f.Expr.(*ast.ColumnNameExpr)
				weigh(i, f.Expr, col)
			}
		}
	}
	if l := sel.Limit; l != nil {
		lp := limitPlan{present: true, onParts: !hasAgg, offset: valSrc{param: -1}}
		var ok bool
		if lp.count, ok = constant(l.Count, b.markers); !ok {
			return unsupported("a LIMIT that is not a number or a parameter")
		}
		if l.Offset != nil {
			if lp.offset, ok = constant(l.Offset, b.markers); !ok {
				return unsupported("an OFFSET that is not a number or a parameter")
			}
		}
		lp.fromParam = lp.count.param >= 0 || lp.offset.param >= 0
		if lp.fromParam {
			for i := range b.c.markers {
				if i != lp.count.param && i != lp.offset.param {
					t.partParams = append(t.partParams, i)
				}
			}
			if t.partParams == nil {
				t.partParams = []int{}
			}
		} else {
			count, offset, err := lp.values(nil)
			if err != nil {
				return err
			}
			m.Limit, m.Offset = count, offset
		}
		if lp.onParts {
			sel.Limit = &ast.Limit{Count: &ast.ColumnNameExpr{Name: &ast.ColumnName{Name: holeName("limit")}}}
		} else {
			sel.Limit = nil
		}
		t.limit = lp
	}
	// Number the hidden columns: after the fields, or from the end when
	// a * leaves the field count unknown.
	m.Hidden = len(hidden)
	m.Visible = len(fields)
	fix := func(c int) int {
		switch {
		case c < hiddenBase:
			return c
		case wild >= 0:
			return c - hiddenBase - len(hidden)
		}
		return c - hiddenBase + len(fields)
	}
	if wild >= 0 {
		m.Visible = -1
	}
	for i := range m.OrderBy {
		m.OrderBy[i].Column = fix(m.OrderBy[i].Column)
	}
	for i := range m.GroupBy {
		m.GroupBy[i] = fix(m.GroupBy[i])
	}
	for i := range m.Aggregates {
		m.Aggregates[i].Column = fix(m.Aggregates[i].Column)
		if m.Aggregates[i].Func == AggAvg {
			m.Aggregates[i].SumColumn = fix(m.Aggregates[i].SumColumn)
			m.Aggregates[i].CountColumn = fix(m.Aggregates[i].CountColumn)
		}
	}
	for i := range m.Weights {
		w := &m.Weights[i]
		w.Column, w.Weight, w.Pad = fix(w.Column), fix(w.Weight), fix(w.Pad)
		if w.Position != 0 {
			w.Position = fix(w.Position)
		}
	}
	sel.Fields.Fields = append(fields, hidden...)
	t.merge = m
	return nil
}
