package shard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
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
