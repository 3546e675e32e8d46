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
	if err := refuseScatter(t, sel); err != nil {
		return err
	}
	var sm selectMerge
	if err := sm.init(t, sel); err != nil {
		return err
	}
	if err := sm.fieldAggregates(); err != nil {
		return err
	}
	if err := sm.groupBy(sel.GroupBy); err != nil {
		return err
	}
	if err := sm.orderBy(sel.OrderBy); err != nil {
		return err
	}
	sm.distinctKeys()
	if err := b.scatterLimit(t, sel, sm.m, sm.hasAgg); err != nil {
		return err
	}
	sm.numberHidden()
	sel.Fields.Fields = append(sm.fields, sm.hidden...)
	t.merge = sm.m
	return nil
}

// scatterUnsupported is the error for what of t's SELECT, which no merge
// of several shards' results can answer.
func scatterUnsupported(t *Template, what string) error {
	return fmt.Errorf("%w: %s over several shards of %s", ErrUnsupported, what, t.ru.lower)
}

// refuseScatter returns an error for the clauses of sel the merge does not
// compute, before anything of sel is rewritten.
func refuseScatter(t *Template, sel *ast.SelectStmt) error {
	switch {
	case sel.Kind != ast.SelectStmtKindSelect:
		return scatterUnsupported(t, "TABLE or VALUES")
	case sel.Having != nil:
		return scatterUnsupported(t, "HAVING")
	case len(sel.WindowSpecs) > 0:
		return scatterUnsupported(t, "WINDOW")
	case sel.SelectStmtOpts != nil && sel.SelectStmtOpts.CalcFoundRows:
		return scatterUnsupported(t, "SQL_CALC_FOUND_ROWS")
	case sel.GroupBy != nil && sel.GroupBy.Rollup:
		return scatterUnsupported(t, "WITH ROLLUP")
	case sel.Fields == nil:
		return scatterUnsupported(t, "a SELECT without fields")
	}
	if sel.Distinct {
		for _, f := range sel.Fields.Fields {
			if f.WildCard != nil {
				// Each text column needs its sort key beside it.
				return scatterUnsupported(t, "DISTINCT with *")
			}
		}
	}
	return nil
}

// selectMerge is a scatter SELECT's Merge while it is built, with the
// hidden columns it adds to the select list. Until numberHidden, a hidden
// column is numbered hiddenBase plus its index in hidden.
type selectMerge struct {
	t      *Template
	m      *Merge
	fields []*ast.SelectField
	// orig is each field's text as restoreExpr writes it ("" for a *).
	orig []string
	// wild is the first * of the select list, -1 when there is none.
	wild int
	// known is how many fields a column number can name: those before
	// the first *.
	known  int
	hasAgg bool
	hidden []*ast.SelectField
	// hiddenText is each hidden column's text as restoreExpr writes it.
	hiddenText []string
	aliases    map[string]*ast.SelectField
}

// init reads sel's select list: the text of each field, where the first *
// is, and whether the query aggregates. An aggregate or window function
// inside an expression, and a * beside aggregates, are refused.
func (sm *selectMerge) init(t *Template, sel *ast.SelectStmt) error {
	fields := sel.Fields.Fields
	*sm = selectMerge{
		t:      t,
		m:      &Merge{Limit: -1, Distinct: sel.Distinct},
		fields: fields,
		orig:   make([]string, len(fields)),
		wild:   -1,
		hasAgg: sel.GroupBy != nil,
	}
	for i, f := range fields {
		if f.WildCard != nil {
			if sm.wild < 0 {
				sm.wild = i
			}
			continue
		}
		sm.orig[i] = restoreExpr(f.Expr)
		if _, ok := f.Expr.(*ast.AggregateFuncExpr); ok {
			sm.hasAgg = true
		} else if a := aggregateIn(f.Expr); a != nil {
			if _, win := a.(*ast.WindowFuncExpr); win {
				return sm.unsupported("window function " + restoreExpr(a))
			}
			return sm.unsupported("aggregate inside an expression (" + sm.orig[i] + ")")
		}
	}
	if sm.wild >= 0 && sm.hasAgg {
		return sm.unsupported("* with aggregates or GROUP BY")
	}
	sm.known = len(fields)
	if sm.wild >= 0 {
		sm.known = sm.wild
	}
	sm.aliases = aliasesOf(fields)
	return nil
}

func (sm *selectMerge) unsupported(what string) error { return scatterUnsupported(sm.t, what) }

// addHidden appends e to the hidden columns and returns its column.
func (sm *selectMerge) addHidden(e ast.ExprNode) int {
	sm.hidden = append(sm.hidden, &ast.SelectField{Expr: e})
	sm.hiddenText = append(sm.hiddenText, restoreExpr(e))
	return hiddenBase + len(sm.hidden) - 1
}

// findHidden returns the hidden column whose text is s, -1 when there is
// none.
func (sm *selectMerge) findHidden(s string) int {
	for i, h := range sm.hiddenText {
		if h == s {
			return hiddenBase + i
		}
	}
	return -1
}

// weigh adds the hidden sort key columns of column col, whose expression is
// e, once per column; position adds e+0 for an ENUM or SET sorted by its
// position.
func (sm *selectMerge) weigh(col int, e ast.ExprNode, position bool) {
	m := sm.m
	i := 0
	for i < len(m.Weights) && m.Weights[i].Column != col {
		i++
	}
	if i == len(m.Weights) {
		m.Weights = append(m.Weights, Weight{Column: col, Weight: sm.addHidden(weightExpr(e)), Pad: sm.addHidden(padExpr(e))})
	}
	if position && m.Weights[i].Position == 0 {
		m.Weights[i].Position = sm.addHidden(positionExpr(e))
	}
}

// aggregate records column col (a field or a hidden column) as the
// aggregate e, with the hidden columns AVG, MIN and MAX need.
func (sm *selectMerge) aggregate(col int, e *ast.AggregateFuncExpr) error {
	if containsMarker(e) {
		return sm.unsupported("a parameter inside " + restoreExpr(e))
	}
	m := sm.m
	switch strings.ToLower(e.F) {
	case ast.AggFuncCount:
		if e.Distinct {
			return sm.unsupported("COUNT(DISTINCT)")
		}
		m.Aggregates = append(m.Aggregates, Aggregate{Column: col, Func: AggCount})
	case ast.AggFuncSum:
		if e.Distinct {
			return sm.unsupported("SUM(DISTINCT)")
		}
		m.Aggregates = append(m.Aggregates, Aggregate{Column: col, Func: AggSum})
	case ast.AggFuncMin, ast.AggFuncMax:
		f := AggMin
		if strings.ToLower(e.F) == ast.AggFuncMax {
			f = AggMax
		}
		m.Aggregates = append(m.Aggregates, Aggregate{Column: col, Func: f})
		// MIN and MAX compare ENUM and SET as text.
		sm.weigh(col, e, false)
	case ast.AggFuncAvg:
		if e.Distinct {
			return sm.unsupported("AVG(DISTINCT)")
		}
		// The Parts still compute AVG, whose column definition the
		// client gets as the server sends it; the merge computes its
		// value from the hidden SUM and COUNT.
		sum := sm.addHidden(&ast.AggregateFuncExpr{F: ast.AggFuncSum, Args: e.Args})
		cnt := sm.addHidden(&ast.AggregateFuncExpr{F: ast.AggFuncCount, Args: e.Args})
		m.Aggregates = append(m.Aggregates, Aggregate{Column: col, Func: AggAvg, SumColumn: sum, CountColumn: cnt})
	default:
		return sm.unsupported(strings.ToUpper(e.F))
	}
	return nil
}

// fieldAggregates records the aggregates of the select list.
func (sm *selectMerge) fieldAggregates() error {
	for i, f := range sm.fields {
		if a, ok := f.Expr.(*ast.AggregateFuncExpr); ok {
			if err := sm.aggregate(i, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// resolve finds or adds the column of a GROUP BY (group) or ORDER BY item.
// A bare name is an alias first in ORDER BY but a column first in GROUP
// BY; names inside an expression are columns first in both.
func (sm *selectMerge) resolve(e ast.ExprNode, group bool) (int, error) {
	switch x := e.(type) {
	case *ast.PositionExpr:
		if x.P != nil || x.N < 1 || x.N > sm.known {
			return 0, sm.unsupported("a column position beyond the known columns")
		}
		return x.N - 1, nil
	case *ast.ColumnNameExpr:
		if c, ok, err := sm.resolveName(x, group); ok || err != nil {
			return c, err
		}
	}
	return sm.resolveExpr(e)
}

// resolveName finds the column a name in GROUP BY or ORDER BY stands for,
// as an alias or as a field that is that column; ok is false when it is
// neither.
func (sm *selectMerge) resolveName(x *ast.ColumnNameExpr, group bool) (col int, ok bool, err error) {
	fields := sm.fields
	if x.Name.Table.L == "" {
		for i := range sm.known {
			if fields[i].AsName.L != x.Name.Name.L {
				continue
			}
			c, same := fields[i].Expr.(*ast.ColumnNameExpr)
			if !group || same && c.Name.Name.L == x.Name.Name.L {
				return i, true, nil
			}
			// GROUP BY an alias that may also be a column of the tables:
			// the server takes the column.
			if aggregateIn(fields[i].Expr) != nil {
				return 0, true, sm.unsupported("GROUP BY the alias of an aggregate")
			}
			if h := sm.findHidden(restoreExpr(outerName(x.Name.Name))); h >= 0 {
				return h, true, nil
			}
			return sm.addHidden(outerName(x.Name.Name)), true, nil
		}
	}
	for i := range sm.known {
		c, ok := fields[i].Expr.(*ast.ColumnNameExpr)
		if ok && c.Name.Name.L == x.Name.Name.L && fields[i].AsName.L == "" &&
			(x.Name.Table.L == "" || c.Name.Table.L == "" || x.Name.Table.L == c.Name.Table.L) {
			return i, true, nil
		}
	}
	return 0, false, nil
}

// resolveExpr finds the field or hidden column written as e, or adds e as
// a hidden column (an aggregate with what the merge needs of it, an
// expression with the aliases it names resolved).
func (sm *selectMerge) resolveExpr(e ast.ExprNode) (int, error) {
	s := restoreExpr(e)
	for i := range sm.known {
		if sm.orig[i] == s {
			return i, nil
		}
	}
	if h := sm.findHidden(s); h >= 0 {
		return h, nil
	}
	if containsMarker(e) {
		return 0, sm.unsupported("a parameter in ORDER BY or GROUP BY")
	}
	if a, ok := e.(*ast.AggregateFuncExpr); ok {
		if !sm.hasAgg {
			return 0, sm.unsupported("ORDER BY an aggregate of a query without aggregates")
		}
		col := sm.addHidden(a)
		if err := sm.aggregate(col, a); err != nil {
			return 0, err
		}
		return col, nil
	}
	if aggregateIn(e) != nil {
		return 0, sm.unsupported("an aggregate inside an ORDER BY expression")
	}
	e2, aggAlias, err := withAliases(e, sm.aliases)
	switch {
	case err != nil || e2 == nil:
		return 0, sm.unsupported("an expression naming an alias (" + s + ")")
	case aggAlias != "":
		return 0, sm.unsupported("an expression naming the alias of an aggregate (" + aggAlias + ")")
	}
	if e2 != e {
		if h := sm.findHidden(restoreExpr(e2)); h >= 0 {
			return h, nil
		}
	}
	return sm.addHidden(e2), nil
}

// exprOf is the expression of column col, a field or a hidden column.
func (sm *selectMerge) exprOf(col int) ast.ExprNode {
	if col >= hiddenBase {
		return sm.hidden[col-hiddenBase].Expr
	}
	return sm.fields[col].Expr
}

// key adds the sort keys of a GROUP BY or ORDER BY column (COUNT, SUM and
// AVG are numbers, MIN and MAX have theirs). Only a column can be an ENUM
// or SET the server sorts by position (an expression of one sorts as
// text), so only a column gets the position's column, whose e+0 is an
// error for types such as UUID, INET6 and geometry.
func (sm *selectMerge) key(col int) {
	switch e := sm.exprOf(col).(type) {
	case *ast.AggregateFuncExpr:
	case *ast.ColumnNameExpr:
		sm.weigh(col, e, true)
	default:
		sm.weigh(col, e, false)
	}
}

// groupBy records the columns of GROUP BY, with their sort keys.
func (sm *selectMerge) groupBy(g *ast.GroupByClause) error {
	if g == nil {
		return nil
	}
	for _, it := range g.Items {
		c, err := sm.resolve(it.Expr, true)
		if err != nil {
			return err
		}
		sm.m.GroupBy = append(sm.m.GroupBy, c)
		sm.m.GroupDesc = append(sm.m.GroupDesc, it.Desc)
		sm.key(c)
	}
	return nil
}

// orderBy records the columns of ORDER BY, with their sort keys.
func (sm *selectMerge) orderBy(o *ast.OrderByClause) error {
	if o == nil {
		return nil
	}
	for _, it := range o.Items {
		if v, ok := it.Expr.(*test_driver.ValueExpr); ok && v.Kind() == test_driver.KindNull {
			continue // ORDER BY NULL
		}
		c, err := sm.resolve(it.Expr, false)
		if err != nil {
			return err
		}
		sm.m.OrderBy = append(sm.m.OrderBy, SortKey{Column: c, Desc: it.Desc})
		sm.key(c)
	}
	return nil
}

// distinctKeys adds, for SELECT DISTINCT, the sort keys of every field the
// merge compares. A column gets its e+0 too: a FLOAT's exact value (its
// text is rounded), and an ENUM's or SET's position, as equal as its text.
func (sm *selectMerge) distinctKeys() {
	if !sm.m.Distinct {
		return
	}
	for i, f := range sm.fields {
		if _, agg := f.Expr.(*ast.AggregateFuncExpr); !agg {
			_, col := f.Expr.(*ast.ColumnNameExpr)
			sm.weigh(i, f.Expr, col)
		}
	}
}

// scatterLimit moves sel's LIMIT into the Merge, or into the Template's
// limit plan when it comes from parameters, and leaves in sel a per-Part
// row count hole when the Parts may apply it themselves (a query without
// aggregates).
func (b *builder) scatterLimit(t *Template, sel *ast.SelectStmt, m *Merge, hasAgg bool) error {
	l := sel.Limit
	if l == nil {
		return nil
	}
	lp := limitPlan{present: true, onParts: !hasAgg, offset: valSrc{param: -1}}
	var ok bool
	if lp.count, ok = constant(l.Count, b.markers); !ok {
		return scatterUnsupported(t, "a LIMIT that is not a number or a parameter")
	}
	if l.Offset != nil {
		if lp.offset, ok = constant(l.Offset, b.markers); !ok {
			return scatterUnsupported(t, "an OFFSET that is not a number or a parameter")
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
	return nil
}

// numberHidden turns the Merge's hidden column numbers into positions:
// after the fields, or from the end when a * leaves the field count
// unknown.
func (sm *selectMerge) numberHidden() {
	m := sm.m
	m.Hidden = len(sm.hidden)
	m.Visible = len(sm.fields)
	if sm.wild >= 0 {
		m.Visible = -1
	}
	fix := sm.position
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
}

// position is the final position of column c, a field or a hidden column.
func (sm *selectMerge) position(c int) int {
	switch {
	case c < hiddenBase:
		return c
	case sm.wild >= 0:
		return c - hiddenBase - len(sm.hidden)
	}
	return c - hiddenBase + len(sm.fields)
}
