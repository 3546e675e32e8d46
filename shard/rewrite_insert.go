package shard

import (
	"fmt"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// insert analyses a sharded INSERT or REPLACE ... VALUES.
func (b *builder) insert(t *Template, s *ast.InsertStmt) (*Template, error) {
	ru := t.ru
	t.kind, t.write = kindInsert, true
	if s.Select != nil {
		return nil, fmt.Errorf("%w: INSERT ... SELECT into sharded table %s", ErrUnsupported, ru.lower)
	}
	if len(b.c.order) > 1 {
		return nil, fmt.Errorf("%w: INSERT into %s naming other sharded tables", ErrUnsupported, ru.lower)
	}
	keyCol, idCol := -1, -1
	for i, c := range s.Columns {
		switch ru.roleOf(c.Name.L) {
		case roleKey:
			keyCol = i
		case roleID:
			idCol = i
		}
	}
	hasID := idCol >= 0
	if keyCol < 0 {
		why := "the column list does not name it"
		if len(s.Columns) == 0 {
			why = "INSERT into a sharded table needs a column list"
		}
		return nil, fmt.Errorf("%w: %s column %s: %s", ErrMissingKey, ru.lower, ru.key, why)
	}
	for _, a := range s.OnDuplicate {
		if ru.roleOf(a.Column.Name.L) == roleKey {
			return nil, fmt.Errorf("%w: ON DUPLICATE KEY UPDATE sets %s of %s", ErrShardKeyUpdate, a.Column.Name.O, ru.lower)
		}
	}
	in := &insertPlan{fillID: ru.idColumn != "" && !hasID}
	for i, row := range s.Lists {
		if len(row) != len(s.Columns) {
			return nil, fmt.Errorf("%w: %s row %d has %d values for %d columns", ErrMissingKey, ru.lower, i+1, len(row), len(s.Columns))
		}
		k, ok := constant(row[keyCol], b.markers)
		if !ok {
			return nil, fmt.Errorf("%w: %s column %s in row %d: %s is not a literal or a parameter",
				ErrBadKeyValue, ru.lower, ru.key, i+1, restoreExpr(row[keyCol]))
		}
		if k.param < 0 && k.v.Kind == KindNull {
			return nil, fmt.Errorf("%w: %s column %s (row %d)", ErrNullKey, ru.lower, ru.key, i+1)
		}
		in.keys = append(in.keys, k)
		if hasID {
			// An id in the generated range must name the row's shard
			// (checkID); one sluice cannot read is not allowed.
			id, ok := constant(row[idCol], b.markers)
			if !ok {
				return nil, fmt.Errorf("%w: %s column %s in row %d: %s is not a literal or a parameter, so sluice cannot check that it names the row's shard",
					ErrBadKeyValue, ru.lower, ru.idColumn, i+1, restoreExpr(row[idCol]))
			}
			in.ids = append(in.ids, id)
		}
		var sb strings.Builder
		var params []int
		for j, e := range row {
			if j > 0 {
				sb.WriteByte(',')
			}
			v, err := b.restoreText(e)
			if err != nil {
				return nil, fmt.Errorf("%w: cannot rewrite the INSERT on %s: %s", ErrUnsupported, ru.lower, err.Error())
			}
			sb.WriteString(v)
			walk(e, func(n ast.Node) bool {
				if m, ok := n.(*test_driver.ParamMarkerExpr); ok {
					params = append(params, b.markers[m])
				}
				return false
			})
		}
		in.rows = append(in.rows, sb.String())
		in.rowParams = append(in.rowParams, params)
	}
	for _, a := range s.OnDuplicate {
		walk(a, func(n ast.Node) bool {
			if m, ok := n.(*test_driver.ParamMarkerExpr); ok {
				in.tailParams = append(in.tailParams, b.markers[m])
			}
			return false
		})
	}
	if len(in.keys) == 0 {
		return nil, fmt.Errorf("%w: %s: INSERT without rows", ErrMissingKey, ru.lower)
	}
	in.allRows = strings.Join(in.rows, "),(")
	if err := b.rename(t, s); err != nil {
		return nil, err
	}
	if in.fillID {
		s.Columns = append(s.Columns, &ast.ColumnName{Name: ast.NewCIStr(ru.idColumn)})
	}
	s.Setlist = false
	s.Lists = [][]ast.ExprNode{{&ast.ColumnNameExpr{Name: &ast.ColumnName{Name: holeName("rows")}}}}
	x, err := b.restore(t, s)
	if err != nil {
		return nil, err
	}
	in.text, t.single, t.ins = x, x, in
	if ru.tables == 1 && !in.fillID {
		t.single = &text{segs: []string{b.sql}}
	}
	return t, nil
}

// nextID recognises SELECT NEXT_ID('[schema.]table'[, key]).
func (b *builder) nextID(stmt ast.StmtNode) (*Template, error) {
	sel, ok := stmt.(*ast.SelectStmt)
	if !ok || sel.From != nil || sel.Where != nil || sel.Fields == nil || len(sel.Fields.Fields) != 1 {
		return nil, nil
	}
	f := sel.Fields.Fields[0]
	call, ok := f.Expr.(*ast.FuncCallExpr)
	if !ok || call.FnName.L != "next_id" || call.Schema.L != "" {
		return nil, nil
	}
	if len(call.Args) < 1 || len(call.Args) > 2 {
		return nil, fmt.Errorf("%w: NEXT_ID takes a table name and an optional shard key value", ErrUnsupported)
	}
	name, ok := constant(call.Args[0], b.markers)
	if !ok || name.param >= 0 || name.v.Kind != KindString {
		return nil, fmt.Errorf("%w: NEXT_ID's first argument must be a table name in quotes", ErrUnsupported)
	}
	schema, table := b.schema, strings.ToLower(string(name.v.S))
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, table = table[:i], table[i+1:]
	}
	ru, _ := b.r.lookup(schema, table)
	if ru == nil {
		return nil, fmt.Errorf("%w: NEXT_ID(%q): no [[shard]] rule for %s.%s", ErrNotSharded, name.v.S, schema, table)
	}
	t := &Template{rules: b.r, kind: kindLocal, params: len(b.c.markers), local: LocalNextID, nextRule: ru}
	if len(call.Args) == 2 {
		if t.nextKey, ok = constant(call.Args[1], b.markers); !ok {
			return nil, fmt.Errorf("%w: NEXT_ID's key must be a literal or a parameter", ErrBadKeyValue)
		}
		t.nextHasKy = true
	}
	t.localCol = f.AsName.O
	if t.localCol == "" {
		t.localCol = fieldText(f, b.sql)
	}
	return t, nil
}
