package shard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
)

// scopes builds a key condition for each query block that names sharded
// tables, and checks that sharded tables of one block join on their key.
func (b *builder) scopes(t *Template, stmt ast.StmtNode) error {
	single := ""
	if _, ok := stmt.(*ast.SetOprStmt); ok {
		single = "UNION"
	}
	if sel, ok := stmt.(*ast.SelectStmt); ok && sel.SelectIntoOpt != nil {
		// Each shard would write its own file on its own server.
		single = "SELECT ... INTO"
	}
	// outer is the first outer join that keeps the rows of tables that
	// are not sharded (a broadcast table, a derived table) on its
	// preserved side while a sharded table is on the other: every shard
	// returns those rows, matched or not, so only one shard may run it.
	var outer string
	var err error
	walk(stmt, func(n ast.Node) bool {
		if err != nil {
			return true
		}
		var refs *ast.TableRefsClause
		var where ast.ExprNode
		switch x := n.(type) {
		case *ast.SelectStmt:
			refs, where = x.From, x.Where
		case *ast.UpdateStmt:
			refs, where = x.TableRefs, x.Where
		case *ast.DeleteStmt:
			refs, where = x.TableRefs, x.Where
		default:
			return false
		}
		if refs == nil || refs.TableRefs == nil {
			return false
		}
		blk := &blockTables{refs: make(map[string]*rule)}
		var sharded []string
		b.blockRefs(refs.TableRefs, blk, &sharded)
		if len(blk.rules) == 0 {
			if n == stmt && !isRead(stmt) {
				// It changes tables that are not sharded by what a
				// subquery finds in a sharded one: one cluster's copy
				// of a broadcast table would change, by its shards' rows.
				err = fmt.Errorf("%w: %s of %s, which is not sharded, with a subquery on sharded table %s: the copies of a broadcast table would differ", ErrUnsupported, stmtName(stmt), blk.list(), t.ru.lower)
				return true
			}
			return false
		}
		if len(sharded) > 1 {
			if err = b.joinedOnKey(refs.TableRefs, where, blk, sharded); err != nil {
				return true
			}
		}
		if outer == "" {
			outer = b.outerJoinKeeps(refs.TableRefs)
		}
		switch x := n.(type) {
		case *ast.UpdateStmt:
			for _, a := range x.List {
				if blk.role(a.Column) == roleKey {
					err = fmt.Errorf("%w: UPDATE sets %s of %s: the row would move to another shard", ErrShardKeyUpdate, a.Column.Name.O, t.ru.lower)
					return true
				}
				if err = b.sharedTarget(t, blk, a.Column.Table.L, a.Column.Name.O); err != nil {
					return true
				}
			}
		case *ast.DeleteStmt:
			if x.IsMultiTable && x.Tables != nil {
				for _, tn := range x.Tables.Tables {
					if err = b.sharedTarget(t, blk, tn.Name.L, ""); err != nil {
						return true
					}
				}
			}
		}
		if n != stmt && single == "" {
			single = "subquery or derived table"
		}
		t.scopes = append(t.scopes, buildCond(where, blk, b.markers))
		return false
	})
	if err != nil {
		return err
	}
	if len(t.scopes) > 1 && single == "" {
		single = "subquery or derived table"
	}
	switch {
	case single != "":
		t.scatterErr = fmt.Errorf("%w: %s on sharded table %s that does not reach exactly one shard", ErrUnsupported, single, t.ru.lower)
	case outer != "":
		t.scatterErr = fmt.Errorf("%w: %s: every shard of %s would return the unmatched rows of the outer side, so the statement must reach exactly one shard (give the key of %s in WHERE, or put the sharded table on the outer side)",
			ErrUnsupported, outer, t.ru.lower, t.ru.lower)
	}
	if len(t.scopes) == 0 {
		t.scopes = []*cond{condAllNode}
	}
	return nil
}

// sharedTarget returns an error when a multi-table UPDATE or DELETE changes
// a table of blk that is not sharded (a broadcast table): each cluster's
// copy would change by the rows of its own shards only, and the copies
// would differ. q is the assigned column's qualifier or the deleted
// table's name ("" for an unqualified column, which may belong to any of
// the block's tables); col names the column.
func (b *builder) sharedTarget(t *Template, blk *blockTables, q, col string) error {
	if q != "" {
		if ru, ok := blk.refs[q]; !ok || ru != nil {
			return nil
		}
		if col != "" {
			return fmt.Errorf("%w: UPDATE sets %s.%s, a column of %s, which is not sharded, joined with sharded table %s: its copies on the clusters would differ", ErrUnsupported, q, col, blk.names[q], t.ru.lower)
		}
		return fmt.Errorf("%w: DELETE from %s, which is not sharded, joined with sharded table %s: its copies on the clusters would differ", ErrUnsupported, blk.names[q], t.ru.lower)
	}
	names := make([]string, 0, len(blk.refs))
	for name := range blk.refs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if blk.refs[name] == nil {
			return fmt.Errorf("%w: UPDATE of sharded table %s joined with %s sets column %s without a table name: sluice cannot tell that it is not a column of %s, which is not sharded; qualify the column", ErrUnsupported, t.ru.lower, blk.names[name], col, blk.names[name])
		}
	}
	if blk.derived {
		return fmt.Errorf("%w: UPDATE of sharded table %s joined with a derived table sets column %s without a table name; qualify the column", ErrUnsupported, t.ru.lower, col)
	}
	return nil
}

// list names the block's tables for a message.
func (blk *blockTables) list() string {
	var out []string
	for _, n := range blk.names {
		out = append(out, n)
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ", ")
}

// outerJoinKeeps describes the first LEFT or RIGHT JOIN of a FROM clause
// whose preserved side holds no sharded table while the other side holds
// one, "" when there is none.
func (b *builder) outerJoinKeeps(n ast.ResultSetNode) string {
	j, ok := n.(*ast.Join)
	if !ok {
		return ""
	}
	if j.Left != nil {
		if d := b.outerJoinKeeps(j.Left); d != "" {
			return d
		}
	}
	if j.Right == nil {
		return ""
	}
	if d := b.outerJoinKeeps(j.Right); d != "" {
		return d
	}
	keep, null, how := j.Left, j.Right, "LEFT JOIN"
	switch j.Tp {
	case ast.LeftJoin:
	case ast.RightJoin:
		keep, null, how = j.Right, j.Left, "RIGHT JOIN"
	default:
		return ""
	}
	if b.sideSharded(keep) || !b.sideSharded(null) {
		return ""
	}
	var names []string
	b.sideNames(keep, &names)
	return fmt.Sprintf("%s keeping every row of %s", how, strings.Join(names, ", "))
}

// sideSharded reports whether one side of a join holds a sharded table
// itself (not in a derived table: a sharded table there makes the
// statement single-shard anyway).
func (b *builder) sideSharded(n ast.ResultSetNode) bool {
	switch x := n.(type) {
	case *ast.Join:
		return x.Left != nil && b.sideSharded(x.Left) || x.Right != nil && b.sideSharded(x.Right)
	case *ast.TableSource:
		tn, ok := x.Source.(*ast.TableName)
		return ok && b.c.sharded[tn] != nil
	}
	return false
}

// sideNames lists the tables of one side of a join for a message.
func (b *builder) sideNames(n ast.ResultSetNode, out *[]string) {
	switch x := n.(type) {
	case *ast.Join:
		if x.Left != nil {
			b.sideNames(x.Left, out)
		}
		if x.Right != nil {
			b.sideNames(x.Right, out)
		}
	case *ast.TableSource:
		if tn, ok := x.Source.(*ast.TableName); ok {
			*out = append(*out, tn.Name.O)
		} else if x.AsName.O != "" {
			*out = append(*out, "derived table "+x.AsName.O)
		} else {
			*out = append(*out, "a derived table")
		}
	}
}

// blockRefs records the tables of a FROM clause, not descending into
// derived tables (blocks of their own).
func (b *builder) blockRefs(n ast.ResultSetNode, blk *blockTables, sharded *[]string) {
	switch x := n.(type) {
	case *ast.Join:
		if x.Left != nil {
			b.blockRefs(x.Left, blk, sharded)
		}
		if x.Right != nil {
			b.blockRefs(x.Right, blk, sharded)
		}
	case *ast.TableSource:
		tn, ok := x.Source.(*ast.TableName)
		if !ok {
			blk.derived = true
			return
		}
		q := x.AsName.L
		if q == "" {
			q = tn.Name.L
		}
		ru := b.c.sharded[tn]
		blk.refs[q] = ru
		if blk.names == nil {
			blk.names = make(map[string]string)
		}
		blk.names[q] = tn.Name.O
		if ru != nil {
			blk.rules = append(blk.rules, ru)
			*sharded = append(*sharded, q)
		}
	}
}

// joinedOnKey checks that the sharded tables of one block are joined on
// their keys (ON, USING, NATURAL or WHERE equalities), so that each shard
// holds every row a joined row needs.
func (b *builder) joinedOnKey(n ast.ResultSetNode, where ast.ExprNode, blk *blockTables, sharded []string) error {
	parent := make([]int, len(sharded))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) { parent[find(a)] = find(b) }
	keyRef := func(e ast.ExprNode) int {
		c, ok := e.(*ast.ColumnNameExpr)
		if !ok {
			return -1
		}
		found := -1
		for i, q := range sharded {
			if c.Name.Table.L != "" && c.Name.Table.L != q {
				continue
			}
			if blk.refs[q].roleOf(c.Name.Name.L) != roleKey {
				continue
			}
			if found >= 0 {
				return -1 // ambiguous
			}
			found = i
		}
		return found
	}
	var conj func(e ast.ExprNode)
	conj = func(e ast.ExprNode) {
		switch x := e.(type) {
		case *ast.ParenthesesExpr:
			conj(x.Expr)
		case *ast.BinaryOperationExpr:
			switch x.Op {
			case opcode.LogicAnd:
				conj(x.L)
				conj(x.R)
			case opcode.EQ:
				if l, r := keyRef(x.L), keyRef(x.R); l >= 0 && r >= 0 {
					union(l, r)
				}
			}
		}
	}
	var side func(n ast.ResultSetNode, out *[]int)
	side = func(n ast.ResultSetNode, out *[]int) {
		switch x := n.(type) {
		case *ast.Join:
			if x.Left != nil {
				side(x.Left, out)
			}
			if x.Right != nil {
				side(x.Right, out)
			}
		case *ast.TableSource:
			if tn, ok := x.Source.(*ast.TableName); ok && b.c.sharded[tn] != nil {
				q := x.AsName.L
				if q == "" {
					q = tn.Name.L
				}
				if i := slices.Index(sharded, q); i >= 0 {
					*out = append(*out, i)
				}
			}
		}
	}
	var joins func(n ast.ResultSetNode)
	joins = func(n ast.ResultSetNode) {
		j, ok := n.(*ast.Join)
		if !ok {
			return
		}
		if j.Left != nil {
			joins(j.Left)
		}
		if j.Right != nil {
			joins(j.Right)
		}
		if j.On != nil {
			conj(j.On.Expr)
		}
		usesKey := j.NaturalJoin
		for _, c := range j.Using {
			for _, ru := range blk.rules {
				if ru.roleOf(c.Name.L) == roleKey {
					usesKey = true
				}
			}
		}
		if usesKey && j.Right != nil {
			var l, r []int
			side(j.Left, &l)
			side(j.Right, &r)
			if len(l) > 0 && len(r) > 0 {
				union(l[0], r[0])
				for _, i := range l[1:] {
					union(i, l[0])
				}
				for _, i := range r[1:] {
					union(i, r[0])
				}
			}
		}
	}
	joins(n)
	conj(where)
	for i := 1; i < len(sharded); i++ {
		if find(i) != find(0) {
			return fmt.Errorf("%w: %s (%s) and %s (%s) are not joined on their shard key", ErrCrossShardJoin,
				blk.refs[sharded[0]].lower, sharded[0], blk.refs[sharded[i]].lower, sharded[i])
		}
	}
	return nil
}
