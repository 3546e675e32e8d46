package shard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// restoreFlags are the router's: single-quoted strings with backslashes
// escaped (the server's default lexing), upper-case keywords, backquoted
// names, no "_utf8mb4" introducer on plain literals.
const restoreFlags = format.RestoreStringSingleQuotes | format.RestoreStringEscapeBackslash |
	format.RestoreKeyWordUppercase | format.RestoreNameBackQuotes | format.RestoreStringWithoutDefaultCharset

// Holes in a restored statement are names the parser's restore writes in
// backquotes: "\x01sl" + what + "\x01". No statement a client sends holds
// such a name, and the number of holes found is checked anyway.
const (
	holeOpen  = "`\x01sl"
	holeClose = "\x01`"
)

func holeName(what string) ast.CIStr { return ast.NewCIStr("\x01sl" + what + "\x01") }

type holeKind uint8

const (
	holeTable holeKind = iota // the physical name of table k
	holeLimit                 // a scatter read's per-Part row count
	holeRows                  // an INSERT's rows for one shard
)

type hole struct {
	kind holeKind
	k    int
}

// text is a restored statement cut at its holes: segs[i] comes before
// holes[i], and the last seg after the last hole.
type text struct {
	segs  []string
	holes []hole
	size  int
}

func splitHoles(s string, tables int) (*text, error) {
	x := &text{size: len(s)}
	for {
		i := strings.Index(s, holeOpen)
		if i < 0 {
			break
		}
		j := strings.Index(s[i+len(holeOpen):], holeClose)
		if j < 0 {
			return nil, fmt.Errorf("%w: statement text holds sluice's placeholder bytes", ErrUnsupported)
		}
		name := s[i+len(holeOpen) : i+len(holeOpen)+j]
		var h hole
		switch name {
		case "limit":
			h.kind = holeLimit
		case "rows":
			h.kind = holeRows
		default:
			k, err := strconv.Atoi(name)
			if err != nil || k < 0 || k >= tables {
				return nil, fmt.Errorf("%w: statement text holds sluice's placeholder bytes", ErrUnsupported)
			}
			h = hole{holeTable, k}
		}
		x.segs = append(x.segs, s[:i])
		x.holes = append(x.holes, h)
		s = s[i+len(holeOpen)+j+len(holeClose):]
	}
	x.segs = append(x.segs, s)
	return x, nil
}

// build fills the holes for shard s.
func (x *text) build(t *Template, s int, limit, rows string) string {
	if len(x.holes) == 0 {
		return x.segs[0]
	}
	var sb strings.Builder
	sb.Grow(x.size + len(rows) + 8*len(x.holes))
	for i, h := range x.holes {
		sb.WriteString(x.segs[i])
		switch h.kind {
		case holeTable:
			sb.WriteByte('`')
			sb.WriteString(strings.ReplaceAll(t.tables[h.k], "`", "``"))
			if t.ru.tables > 1 {
				sb.WriteByte('_')
				sb.WriteString(strconv.Itoa(s % t.ru.tables))
			}
			sb.WriteByte('`')
		case holeLimit:
			sb.WriteString(limit)
		case holeRows:
			sb.WriteString(rows)
		}
	}
	sb.WriteString(x.segs[len(x.segs)-1])
	return sb.String()
}

// leadingComment returns the comments before the statement's first
// keyword (such as /* sluice:master */), which the parser drops, followed
// by a space or newline, or "" when there are none. Executable comments
// (/*! ... */, /*M! ... */) and optimizer hints are statement text, not
// comments, and end the search.
func leadingComment(sql string) string {
	end, i := 0, 0
	for i < len(sql) {
		switch c := sql[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(sql[i:], "/*") && !strings.HasPrefix(sql[i:], "/*!") &&
			!strings.HasPrefix(sql[i:], "/*M!") && !strings.HasPrefix(sql[i:], "/*+"):
			j := strings.Index(sql[i+2:], "*/")
			if j < 0 {
				return ""
			}
			i += j + 4
			end = i
		case strings.HasPrefix(sql[i:], "-- ") || c == '#':
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				return "" // the whole text is a comment
			}
			i += j + 1
			end = i
		default:
			i = len(sql)
		}
	}
	if end == 0 {
		return ""
	}
	c := sql[:end]
	if c[len(c)-1] != '\n' {
		c += " "
	}
	return c
}

// builder analyses one parsed statement into a Template.
type builder struct {
	r       *Rules
	sql     string
	schema  string
	comment string
	c       collected
	markers map[*test_driver.ParamMarkerExpr]int
	// mode is the session's sql_mode the text was parsed under, and flags
	// the restore flags that write text the server reads alike under it.
	mode  SQLMode
	flags format.RestoreFlags
	// spell holds how the client spelled the statement's literals; filled
	// on first use.
	spell *spellings
}

// collected is what one walk over a statement finds.
type collected struct {
	markers []*test_driver.ParamMarkerExpr
	// sharded maps each TableName of a sharded table to its rule, in the
	// order found in order.
	sharded   map[*ast.TableName]*rule
	order     []*ast.TableName
	broadcast int
	// broadcastName is the first broadcast table found, as written.
	broadcastName string
	unsharded     []string
	// cteShadow is a common table expression's name that is also the name
	// of a sharded or broadcast table of the current database.
	cteShadow string
	// userVar is the first user variable the statement reads or assigns
	// ("@name"), "" when none: user variables live on the session's
	// connection to the default cluster only.
	userVar string
}

type visitor struct {
	enter func(n ast.Node) bool // true: skip the children
}

func (v *visitor) Enter(n ast.Node) (ast.Node, bool) { return n, v.enter(n) }
func (v *visitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func walk(n ast.Node, f func(n ast.Node) bool) { n.Accept(&visitor{enter: f}) }

func (r *Rules) collect(stmt ast.StmtNode, schema string) collected {
	c := collected{sharded: make(map[*ast.TableName]*rule)}
	skip := make(map[*ast.TableName]bool)
	ctes := make(map[string]bool)
	if d, ok := stmt.(*ast.DeleteStmt); ok && d.IsMultiTable && d.Tables != nil {
		// DELETE t1 FROM ...: the targets name tables of the FROM clause.
		for _, tn := range d.Tables.Tables {
			skip[tn] = true
		}
	}
	var names []*ast.TableName
	walk(stmt, func(n ast.Node) bool {
		switch x := n.(type) {
		case *test_driver.ParamMarkerExpr:
			c.markers = append(c.markers, x)
		case *ast.WithClause:
			for _, cte := range x.CTEs {
				ctes[cte.Name.L] = true
			}
		case *ast.TableName:
			if !skip[x] {
				names = append(names, x)
			}
		case *ast.VariableExpr:
			if !x.IsSystem && c.userVar == "" {
				c.userVar = "@" + x.Name
			}
		case *ast.VariableAssignment:
			if !x.IsSystem && c.userVar == "" {
				c.userVar = "@" + x.Name
			}
		}
		return false
	})
	for _, tn := range names {
		s := tn.Schema.L
		if s == "" {
			if ctes[tn.Name.L] {
				// A common table expression of that name may be in scope
				// here, or not (the WITH of another query block): when a
				// rule's table has the name too, which one the server
				// reads is not told by this walk.
				if ru, bc := r.lookup(schema, tn.Name.L); (ru != nil || bc) && c.cteShadow == "" {
					c.cteShadow = tn.Name.O
				}
				continue
			}
			s = schema
		}
		ru, bc := r.lookup(s, tn.Name.L)
		switch {
		case ru != nil:
			c.sharded[tn] = ru
			c.order = append(c.order, tn)
		case bc:
			if c.broadcast == 0 {
				c.broadcastName = tn.Name.O
			}
			c.broadcast++
		default:
			c.unsharded = append(c.unsharded, tn.Name.O)
		}
	}
	slices.SortFunc(c.markers, func(a, b *test_driver.ParamMarkerExpr) int { return a.Offset - b.Offset })
	return c
}

// hiddenSQL returns an error wrapping ErrUnsupported when stmt carries SQL
// the server parses later, which collect cannot see into: PREPARE from a
// string that may name a sharded or broadcast table, or from a variable,
// whose text sluice cannot know.
func (r *Rules) hiddenSQL(stmt ast.StmtNode) error {
	p, ok := stmt.(*ast.PrepareStmt)
	if !ok {
		return nil
	}
	if p.SQLVar != nil {
		return fmt.Errorf("%w: PREPARE %s FROM @%s: sluice cannot see which tables the variable's statement names, and some tables are sharded", ErrUnsupported, p.Name, p.SQLVar.Name)
	}
	if n := r.mayName(p.SQLText); n != "" {
		return fmt.Errorf("%w: PREPARE %s: its statement may name table %s, which is sharded or broadcast, and would run on the default cluster only; prepare it through the protocol (COM_STMT_PREPARE) instead", ErrUnsupported, p.Name, n)
	}
	return nil
}

// stmtName is a short name of a statement's kind for messages.
func stmtName(stmt ast.StmtNode) string {
	n := strings.TrimPrefix(fmt.Sprintf("%T", stmt), "*ast.")
	return strings.ToUpper(strings.TrimSuffix(n, "Stmt"))
}

// isRead reports a statement that changes nothing: a SELECT (without INTO
// OUTFILE, which writes a file on the server), UNION, SHOW or EXPLAIN.
func isRead(stmt ast.StmtNode) bool {
	switch s := stmt.(type) {
	case *ast.SelectStmt:
		return s.SelectIntoOpt == nil
	case *ast.SetOprStmt, *ast.ShowStmt:
		return true
	case *ast.ExplainStmt:
		return !s.Analyze
	}
	return false
}

func (b *builder) build(stmt ast.StmtNode) (*Template, error) {
	r := b.r
	b.c = r.collect(stmt, b.schema)
	b.markers = make(map[*test_driver.ParamMarkerExpr]int, len(b.c.markers))
	for i, m := range b.c.markers {
		b.markers[m] = i
	}
	params := len(b.c.markers)
	read := isRead(stmt)
	if len(b.c.sharded) == 0 {
		if t, err := b.nextID(stmt); t != nil || err != nil {
			return t, err
		}
		if b.c.broadcast == 0 || read && len(b.c.unsharded) > 0 {
			// The default cluster has every unsharded table and a copy of
			// every broadcast table.
			t := r.passTemplate(b.sql, params)
			t.fixed.Write = !read
			return t, nil
		}
		if len(b.c.unsharded) > 0 {
			return nil, fmt.Errorf("%w: a write naming broadcast and unsharded tables (%s)", ErrUnsupported, b.c.unsharded[0])
		}
		rt := &Route{Write: !read, AnyOne: read}
		for i := range r.clusters {
			rt.Parts = append(rt.Parts, Part{Cluster: i, SQL: b.sql})
		}
		return &Template{rules: r, kind: kindFixed, params: params, fixed: rt}, nil
	}
	first := b.c.order[0]
	ru := b.c.sharded[first]
	for _, tn := range b.c.order[1:] {
		if o := b.c.sharded[tn]; !ru.sameLayout(o) {
			return nil, fmt.Errorf("%w: %s and %s are sharded by different rules", ErrCrossShardJoin, ru.lower, o.lower)
		}
	}
	if len(b.c.unsharded) > 0 {
		return nil, fmt.Errorf("%w: sharded table %s with unsharded table %s (it lives on cluster %s only)",
			ErrCrossShardJoin, ru.lower, b.c.unsharded[0], r.clusters[r.def])
	}
	b.comment = leadingComment(b.sql)
	t := &Template{rules: r, kind: kindSharded, params: params, ru: ru, write: !read,
		perShard: make([]atomic.Pointer[Route], ru.shards)}
	switch s := stmt.(type) {
	case *ast.SelectStmt, *ast.SetOprStmt, *ast.UpdateStmt, *ast.DeleteStmt:
		if err := b.scopes(t, stmt); err != nil {
			return nil, err
		}
	case *ast.InsertStmt:
		return b.insert(t, s)
	case ast.DDLNode:
		// Schema changes run on every physical table.
		return b.fixed(t, stmt, true)
	case *ast.ShowStmt, *ast.ExplainStmt:
		// SHOW CREATE TABLE, DESCRIBE: every physical table looks alike.
		t, err := b.fixed(t, stmt, false)
		if sh, ok := stmt.(*ast.ShowStmt); err == nil && ok && sh.Tp == ast.ShowCreateTable && ru.tables > 1 {
			// It names the physical table; the client asked about the
			// logical one.
			rt := *t.fixed
			rt.Rename = &Rename{Physical: ru.table + "_0", Logical: t.tables[0]}
			t.fixed = &rt
		}
		return t, err
	default:
		return nil, fmt.Errorf("%w: %T on sharded table %s", ErrUnsupported, stmt, ru.lower)
	}
	if err := b.rename(t, stmt); err != nil {
		return nil, err
	}
	single, err := b.restore(t, stmt)
	if err != nil {
		return nil, err
	}
	t.single, t.scatter = single, single
	if t.ru.tables == 1 {
		// Physical names are the logical ones: one shard runs the text
		// exactly as the client wrote it.
		t.single = &text{segs: []string{b.sql}}
	}
	if t.scatterErr != nil {
		return t, nil
	}
	switch s := stmt.(type) {
	case *ast.SelectStmt:
		if err := b.scatterSelect(t, s); err != nil {
			t.scatterErr = err
			return t, nil
		}
		if t.scatter, err = b.restore(t, s); err != nil {
			t.scatterErr = err
		}
	case *ast.UpdateStmt:
		if s.Limit != nil || s.Order != nil {
			t.scatterErr = fmt.Errorf("%w: UPDATE with ORDER BY or LIMIT over several shards of %s", ErrUnsupported, ru.lower)
		}
	case *ast.DeleteStmt:
		if s.Limit != nil || s.Order != nil {
			t.scatterErr = fmt.Errorf("%w: DELETE with ORDER BY or LIMIT over several shards of %s", ErrUnsupported, ru.lower)
		}
	}
	return t, nil
}

// fixed makes the Template of a statement that runs on every shard
// (all) or on shard 0 only.
func (b *builder) fixed(t *Template, stmt ast.StmtNode, all bool) (*Template, error) {
	if err := b.rename(t, stmt); err != nil {
		return nil, err
	}
	x, err := b.restore(t, stmt)
	if err != nil {
		return nil, err
	}
	t.single = x
	rt := &Route{Write: all}
	n := 1
	if all {
		n = t.ru.shards
	}
	for s := range n {
		rt.Parts = append(rt.Parts, Part{Cluster: t.ru.cluster(s), SQL: x.build(t, s, "", ""), Shards: []int{s}})
	}
	t.kind, t.fixed = kindFixed, rt
	return t, nil
}

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
