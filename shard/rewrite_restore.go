package shard

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// rename replaces the names of sharded tables by holes. Table sources
// without an alias get their logical name as alias, so columns qualified
// by it still resolve; INSERT and single-table DELETE take no alias, so
// there the qualifiers themselves become holes.
func (b *builder) rename(t *Template, stmt ast.StmtNode) error {
	// The restored text spells expressions its own way (COUNT(*) becomes
	// COUNT(1)), and the server names a result column after the text: an
	// unaliased expression keeps the client's spelling as its alias.
	// Column references and literals are named the same either way.
	if sel, ok := stmt.(*ast.SelectStmt); ok && sel.Fields != nil {
		for _, f := range sel.Fields.Fields {
			if f.WildCard != nil || f.AsName.L != "" {
				continue
			}
			inner := f.Expr
			for p, ok := inner.(*ast.ParenthesesExpr); ok; p, ok = inner.(*ast.ParenthesesExpr) {
				inner = p.Expr
			}
			switch x := inner.(type) {
			case *ast.ColumnNameExpr:
				// MariaDB names (qty) qty and (2.5e-1) 2.5e-1 (but
				// (0x41) (0x41)): without the parentheses, which change
				// nothing else, the rewrite is named alike.
				f.Expr = inner
			case *test_driver.ValueExpr:
				if x.Kind() != test_driver.KindBinaryLiteral {
					f.Expr = inner
				}
			}
			if fn, ok := f.Expr.(*ast.FuncCallExpr); ok && fn.FnName.L == "name_const" {
				continue // the server names it after its first argument
			}
			switch f.Expr.(type) {
			case *test_driver.ParamMarkerExpr:
				// The server names a parameter "?"; written in as a
				// literal (Interpolate) it would take the literal's name.
				f.AsName = ast.NewCIStr("?")
				continue
			case *ast.ColumnNameExpr, ast.ValueExpr:
				continue
			}
			f.AsName = ast.NewCIStr(fieldText(f, b.sql))
		}
	}
	noAlias := make(map[*ast.TableSource]bool)
	switch s := stmt.(type) {
	case *ast.InsertStmt:
		if s.Table != nil && s.Table.TableRefs != nil {
			if ts, ok := s.Table.TableRefs.Left.(*ast.TableSource); ok {
				noAlias[ts] = true
			}
		}
	case *ast.DeleteStmt:
		if !s.IsMultiTable && s.TableRefs != nil && s.TableRefs.TableRefs != nil {
			if ts, ok := s.TableRefs.TableRefs.Left.(*ast.TableSource); ok {
				noAlias[ts] = true
			}
		}
	}
	qualifiers := make(map[string]ast.CIStr)
	walk(stmt, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.TableSource:
			tn, ok := x.Source.(*ast.TableName)
			if !ok || b.c.sharded[tn] == nil || t.ru.tables == 1 || x.AsName.L != "" {
				return false
			}
			if noAlias[x] {
				qualifiers[tn.Name.L] = holeName(strconv.Itoa(len(t.tables)))
			} else {
				x.AsName = tn.Name
			}
		case *ast.TableName:
			if b.c.sharded[x] != nil {
				k := len(t.tables)
				t.tables = append(t.tables, x.Name.O)
				x.Name = holeName(strconv.Itoa(k))
			}
		}
		return false
	})
	if len(qualifiers) > 0 {
		walk(stmt, func(n ast.Node) bool {
			if c, ok := n.(*ast.ColumnName); ok {
				if h, ok := qualifiers[c.Table.L]; ok {
					c.Table = h
				}
			}
			return false
		})
	}
	return nil
}

// restore writes the statement back to SQL, after the original's leading
// comments, and cuts it at its holes. The text is parsed again and
// restored again: a rewrite whose second restore differs, or that spells a
// hexadecimal or bit literal the client did not write, is not trusted.
func (b *builder) restore(t *Template, n ast.Node) (*text, error) {
	if _, hazard := scanText(b.sql, b.mode); hazard != "" {
		return nil, fmt.Errorf("%w: cannot rewrite the statement on %s: it holds %s, which sluice's parser reads otherwise than the server", ErrUnsupported, t.ru.lower, hazard)
	}
	s, err := b.restoreText(n)
	if err == nil {
		err = b.checkRestored(s)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: cannot rewrite the statement on %s: %s", ErrUnsupported, t.ru.lower, err.Error())
	}
	return splitHoles(b.comment+s, len(t.tables))
}

// restoreText writes n as text the server reads alike under the session's
// sql_mode: literals as the client spelled them, and the constructs the
// parser would write otherwise by their stand-ins.
func (b *builder) restoreText(n ast.Node) (string, error) {
	sw, err := b.swap(n)
	defer b.unswap(sw)
	if err != nil {
		return "", err
	}
	if err := refuseRestore(sw); err != nil {
		return "", err
	}
	var sb strings.Builder
	if err := sw.Restore(format.NewRestoreCtx(b.flags, &sb)); err != nil {
		return "", err
	}
	if _, stmt := n.(ast.StmtNode); !stmt {
		// A fragment (a value of an INSERT's row) is checked as the value
		// of an INSERT.
		if err := b.checkRestored("INSERT INTO `x` VALUES (" + sb.String() + ")"); err != nil {
			return "", err
		}
	}
	return sb.String(), nil
}

// limitStandIn replaces the LIMIT hole while a restored text is parsed
// again: the grammar takes no name there.
const limitStandIn = "18446744073709551614"

// checkRestored parses the restored text s again under the same sql_mode
// and restores it again; any difference means the restorer does not write
// what it read, and s is not trusted.
func (b *builder) checkRestored(s string) error {
	for _, tk := range scanLiterals(s, b.mode) {
		if tk.bin && !b.wrote(tk.text) {
			return fmt.Errorf("the rewrite spells the literal %s, which the statement does not", tk.text)
		}
	}
	hole := holeOpen + "limit" + holeClose
	again := strings.ReplaceAll(s, hole, limitStandIn)
	stmts, err := parse(again, b.mode)
	if err != nil || len(stmts) != 1 {
		return fmt.Errorf("the rewrite does not parse again: %v", err)
	}
	b2 := &builder{r: b.r, sql: again, mode: b.mode, flags: b.flags}
	s2, err := b2.restoreText(stmts[0])
	if err != nil {
		return err
	}
	if s2 != again {
		return fmt.Errorf("the rewrite reads back otherwise: %q, then %q", again, s2)
	}
	return nil
}

// wrote reports whether the client's text spells a hexadecimal or bit
// literal as tok.
func (b *builder) wrote(tok string) bool {
	for _, tk := range scanLiterals(b.sql, b.mode) {
		if tk.bin && tk.text == tok {
			return true
		}
	}
	return false
}

// restoreExpr writes n with the default restore flags, for comparing
// expressions and for messages; rewritten text is written by
// builder.restoreText.
func restoreExpr(n ast.Node) string {
	var sb strings.Builder
	if err := n.Restore(format.NewRestoreCtx(restoreFlags, &sb)); err != nil {
		return "\x00" + err.Error() // matches nothing
	}
	return sb.String()
}

func containsMarker(n ast.Node) bool {
	found := false
	walk(n, func(n ast.Node) bool {
		if _, ok := n.(*test_driver.ParamMarkerExpr); ok {
			found = true
		}
		return found
	})
	return found
}

// aggregateIn returns an aggregate or window function inside n.
func aggregateIn(n ast.Node) ast.Node {
	var found ast.Node
	walk(n, func(n ast.Node) bool {
		switch n.(type) {
		case *ast.AggregateFuncExpr, *ast.WindowFuncExpr:
			found = n
		case *ast.SubqueryExpr:
			return true // its aggregates are its own
		}
		return found != nil
	})
	return found
}
