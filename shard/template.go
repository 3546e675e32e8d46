package shard

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/mysql"
)

// parserPool holds TiDB parsers, which are not safe for concurrent use.
var parserPool = sync.Pool{New: func() any {
	p := parser.New()
	p.SetMariaDB(true)
	p.SetSQLMode(defaultSQLMode)
	return p
}}

var defaultSQLMode = func() mysql.SQLMode {
	m, err := mysql.GetSQLMode(mysql.DefaultSQLMode)
	if err != nil {
		panic(err)
	}
	return m
}()

// LocalKind tells whether sluice answers a statement itself.
type LocalKind uint8

const (
	// LocalNone: the statement runs on the backends of its Route.
	LocalNone LocalKind = iota
	// LocalNextID: SELECT NEXT_ID('[schema.]table'[, key]) is answered by
	// Template.NextID in a one-row, one-column result named
	// Template.LocalColumn.
	LocalNextID
)

// templateKind is how a Template computes its Routes.
type templateKind uint8

const (
	// kindFixed: every execution has the same Route (unsharded,
	// broadcast, DDL and SHOW of sharded tables).
	kindFixed templateKind = iota
	// kindSharded: SELECT, UPDATE or DELETE routed by the key.
	kindSharded
	// kindInsert: INSERT or REPLACE routed row by row.
	kindInsert
	// kindLocal: answered by sluice (NEXT_ID).
	kindLocal
)

// Template is the analysis of one statement text under one current
// database: where it runs as a function of its parameter values. Templates
// are immutable apart from their lazily filled Route caches, which are
// safe for concurrent use; any number of sessions may share one.
type Template struct {
	rules  *Rules
	kind   templateKind
	params int
	fixed  *Route
	mode   SQLMode

	// Sharded statements.
	ru    *rule
	write bool
	// tables are the logical names of the statement's sharded tables as
	// the client spelled them, indexed by the holes of the texts.
	tables []string
	// single is the statement for one shard; scatter the statement for
	// each shard of a multi-shard execution (with hidden columns and the
	// LIMIT hole of a scatter read).
	single, scatter *text
	// scatterErr is why the statement cannot run on several shards.
	scatterErr error
	scopes     []*cond
	merge      *Merge
	limit      limitPlan
	// partParams lists the parameters the scatter text takes when it lost
	// the LIMIT markers; nil means all.
	partParams []int
	perShard   []atomic.Pointer[Route]
	all        atomic.Pointer[Route]
	ins        *insertPlan

	// userVar is a user variable the statement reads or assigns ("@q"):
	// it may run on the default cluster only (see UserVar).
	userVar string

	// Local statements.
	local     LocalKind
	localCol  string
	nextRule  *rule
	nextKey   valSrc
	nextHasKy bool
}

// limitPlan is a scatter read's LIMIT: each Part is asked for offset+count
// rows (or all rows when the merge groups) and the merge skips and cuts.
type limitPlan struct {
	present   bool
	count     valSrc
	offset    valSrc // param -1 and KindNull when absent
	onParts   bool
	fromParam bool
}

// UserVar returns a user variable the statement reads or assigns, "" when
// none. User variables exist on the session's connection to the default
// cluster only: the proxy must refuse a Route of such a statement that
// reaches any other cluster, or several Parts.
func (t *Template) UserVar() string { return t.userVar }

// Mode returns the sql_mode flags the template was built under: its
// rewritten texts read as the statement only under them.
func (t *Template) Mode() SQLMode { return t.mode }

// Params returns the number of parameter markers of the statement.
func (t *Template) Params() int { return t.params }

// Local reports whether sluice answers the statement itself.
func (t *Template) Local() LocalKind { return t.local }

// LocalColumn is the column name of a local statement's result.
func (t *Template) LocalColumn() string { return t.localCol }

// NextID answers a LocalNextID statement: a new global id for the named
// table, embedding the shard of the key argument when one is given (else
// an id of version IDVersionPlain, which routes nowhere). cs is
// RouteFor's.
func (t *Template) NextID(args []Value, cs ClientCharset) (int64, error) {
	if t.local != LocalNextID {
		return 0, fmt.Errorf("%w: not a NEXT_ID statement", ErrUnsupported)
	}
	if !t.nextHasKy {
		return t.rules.ids.NextPlain(), nil
	}
	v := t.nextKey.value(args)
	if v.Kind == KindNull {
		return 0, fmt.Errorf("%w: NEXT_ID: %s.%s column %s", ErrNullKey, t.nextRule.schema, t.nextRule.table, t.nextRule.key)
	}
	p, err := t.nextRule.place(v, true, cs)
	if err != nil {
		return 0, err
	}
	return t.rules.ids.Next(p), nil
}

// Route returns where one execution runs, given its parameter values
// (args[i] is marker i; nil for a text without markers). Single-shard
// Routes of SELECT, UPDATE, DELETE and single-row INSERT are cached in the
// Template, so routing a point statement does not allocate. The returned
// Route is shared and must not be modified.
//
// Parts are one per physical table touched, so a Route may have several
// Parts for one cluster when tables_per_cluster > 1.
//
// Route is RouteFor for a client whose character set is utf8mb4.
func (t *Template) Route(args []Value) (*Route, error) { return t.RouteFor(args, ClientUTF8MB4) }

// RouteFor is Route for a session whose client character set is cs: in a
// set other than utf8mb4 a string key with bytes that are not that set's
// UTF-8 cannot be placed (a WHERE scatters, an INSERT is refused), because
// they are not the characters the key column would hold.
func (t *Template) RouteFor(args []Value, cs ClientCharset) (*Route, error) {
	switch t.kind {
	case kindFixed:
		return t.fixed, nil
	case kindInsert:
		return t.routeInsert(args, cs)
	case kindLocal:
		return nil, fmt.Errorf("%w: NEXT_ID is answered by sluice, not routed", ErrUnsupported)
	}
	ru := t.ru
	var set shardSet
	if len(t.scopes) == 1 {
		c := t.scopes[0]
		if c.op == condKey && len(c.vals) == 1 {
			// The point statement: no shard set needed.
			v := c.vals[0].value(args)
			if v.Kind != KindNull {
				p, err := ru.place(v, false, cs)
				if err == nil {
					return t.shardRoute(p % ru.shards), nil
				}
				if err != errNotExact && !errors.Is(err, ErrKeyOutOfRange) {
					return nil, err
				}
			}
		}
		var err error
		if set, err = c.eval(ru, args, cs); err != nil {
			return nil, err
		}
	} else {
		one := -1
		for _, c := range t.scopes {
			s, err := c.eval(ru, args, cs)
			if err != nil {
				return nil, err
			}
			n, sh := s.count(ru.shards)
			if n == 0 {
				continue
			}
			if n > 1 || one >= 0 && sh != one {
				return nil, t.scatterErr
			}
			one = sh
		}
		set = shardSet{one: one}
	}
	n, one := set.count(ru.shards)
	switch n {
	case 0:
		// No row can match (uid = 1 AND uid = 2, uid = NULL): any one
		// shard gives the right, empty answer.
		return t.shardRoute(0), nil
	case 1:
		return t.shardRoute(one), nil
	}
	if t.scatterErr != nil {
		return nil, t.scatterErr
	}
	if set.all && !t.limit.fromParam {
		if r := t.all.Load(); r != nil {
			return r, nil
		}
		r, err := t.multiRoute(set, args)
		if err != nil {
			return nil, err
		}
		t.all.Store(r)
		return r, nil
	}
	return t.multiRoute(set, args)
}

// Sample returns a physical statement of the template: its text on the
// first shard, or the statement itself when it names no sharded table.
// Every shard's text has the same parameters and result columns, so the
// proxy prepares this one to answer a client's COM_STMT_PREPARE. A local
// statement (NEXT_ID) has no physical text: SQL is "".
func (t *Template) Sample() Part {
	switch t.kind {
	case kindFixed:
		return t.fixed.Parts[0]
	case kindLocal:
		return Part{Cluster: t.rules.def}
	}
	return t.shardRoute(0).Parts[0]
}

// shardRoute returns the cached Route of the single-shard text on shard s.
func (t *Template) shardRoute(s int) *Route {
	if r := t.perShard[s].Load(); r != nil {
		return r
	}
	rows := ""
	if t.ins != nil {
		rows = t.ins.allRows
	}
	r := &Route{
		Write: t.write,
		Parts: []Part{{Cluster: t.ru.cluster(s), SQL: t.single.build(t, s, "", rows), Shards: []int{s}}},
	}
	t.perShard[s].Store(r)
	return r
}

// multiRoute builds the Route of the scatter text on the shards of set.
func (t *Template) multiRoute(set shardSet, args []Value) (*Route, error) {
	ru := t.ru
	limitText := ""
	m := t.merge
	if t.limit.present {
		count, offset, err := t.limit.values(args)
		if err != nil {
			return nil, err
		}
		if t.limit.onParts {
			limitText = strconv.FormatInt(min(count, maxLimit-offset)+offset, 10)
		}
		if t.limit.fromParam {
			mm := *m
			mm.Limit, mm.Offset = count, offset
			m = &mm
		}
	}
	r := &Route{Write: t.write, Merge: m}
	if t.write {
		r.Merge = nil
	}
	for s := 0; s < ru.shards; s++ {
		if !set.has(s) {
			continue
		}
		r.Parts = append(r.Parts, Part{
			Cluster: ru.cluster(s),
			SQL:     t.scatter.build(t, s, limitText, ""),
			Params:  t.partParams,
			Shards:  []int{s},
		})
	}
	return r, nil
}

// maxLimit is the count or offset of a LIMIT that stands for any larger
// one: more rows than a table can hold.
const maxLimit = 1 << 62

func (l *limitPlan) values(args []Value) (count, offset int64, err error) {
	get := func(src valSrc) (int64, error) {
		v := src.value(args)
		if v.Kind == KindNull {
			// An absent OFFSET; a NULL parameter, which the server
			// takes as 0.
			return 0, nil
		}
		mag, neg, ok := integerOf(v)
		if ok && neg && src.param >= 0 {
			// The server reads a parameter's integer as unsigned: -1
			// is 2^64-1, and every negative one is 2^63 or more.
			return maxLimit, nil
		}
		if !ok || neg {
			return 0, fmt.Errorf("%w: LIMIT value %s", ErrUnsupported, formatValue(v))
		}
		// The server takes any count up to 2^64-1 (the "to the end"
		// idiom); no table holds 2^62 rows, so a larger count or offset
		// means as much as 2^62 and the sums below cannot overflow.
		return int64(min(mag, maxLimit)), nil
	}
	if count, err = get(l.count); err != nil {
		return 0, 0, err
	}
	if offset, err = get(l.offset); err != nil {
		return 0, 0, err
	}
	return count, offset, nil
}

// insertPlan is a sharded INSERT or REPLACE: its rows, their keys and the
// text around them.
type insertPlan struct {
	text *text
	// keys are the rows' key values; rows the rows' restored values
	// (without parentheses) and rowParams their markers' indexes.
	keys      []valSrc
	rows      []string
	rowParams [][]int
	// tailParams are the markers after the rows (ON DUPLICATE KEY UPDATE).
	tailParams []int
	// allRows is rows joined for the single-shard text.
	allRows string
	fillID  bool
	// ids are the rows' id_column values when the INSERT gives them.
	ids []valSrc
}

func (t *Template) routeInsert(args []Value, cs ClientCharset) (*Route, error) {
	ru, in := t.ru, t.ins
	places := make([]int, len(in.keys))
	first := -1
	same := true
	for i, k := range in.keys {
		v := k.value(args)
		if v.Kind == KindNull {
			return nil, fmt.Errorf("%w: %s.%s column %s (row %d)", ErrNullKey, ru.schema, ru.table, ru.key, i+1)
		}
		p, err := ru.place(v, true, cs)
		if err != nil {
			return nil, err
		}
		if in.ids != nil {
			if err := ru.checkID(in.ids[i].value(args), p, i); err != nil {
				return nil, err
			}
		}
		places[i] = p
		if first < 0 {
			first = p % ru.shards
		} else if p%ru.shards != first {
			same = false
		}
	}
	if same && !in.fillID {
		return t.shardRoute(first), nil
	}
	var shards []int
	for _, p := range places {
		if s := p % ru.shards; !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	r := &Route{Write: true, PerExecution: true, Parts: make([]Part, 0, len(shards))}
	var sb strings.Builder
	for _, s := range shards {
		sb.Reset()
		var params []int
		n := 0
		for i, p := range places {
			if p%ru.shards != s {
				continue
			}
			if n > 0 {
				sb.WriteString("),(")
			}
			n++
			sb.WriteString(in.rows[i])
			if in.fillID {
				sb.WriteByte(',')
				sb.WriteString(strconv.FormatInt(t.rules.ids.Next(p), 10))
			}
			params = append(params, in.rowParams[i]...)
		}
		params = append(params, in.tailParams...)
		switch {
		case len(params) == t.params:
			params = nil // all of them, in order
		case params == nil:
			params = []int{} // none
		}
		if s == places[0]%ru.shards {
			r.FirstRow = len(r.Parts)
		}
		r.Parts = append(r.Parts, Part{
			Cluster: ru.cluster(s),
			SQL:     in.text.build(t, s, "", sb.String()),
			Params:  params,
			Shards:  []int{s},
		})
	}
	return r, nil
}

// Resolve returns the Merge for a result of columns columns: m itself when
// its column numbers are known, else (a SELECT * scatter read, Visible < 0)
// a copy with Visible set and the hidden columns, numbered from the end
// (-1 the last), numbered from the start.
func (m *Merge) Resolve(columns int) (*Merge, error) {
	if m.Visible >= 0 {
		return m, nil
	}
	if columns < m.Hidden {
		return nil, fmt.Errorf("%w: result has %d columns, fewer than its %d hidden ones", ErrUnsupported, columns, m.Hidden)
	}
	mm := *m
	mm.Visible = columns - m.Hidden
	fix := func(c int) int {
		if c < 0 {
			return columns + c
		}
		return c
	}
	mm.OrderBy = slices.Clone(m.OrderBy)
	for i := range mm.OrderBy {
		mm.OrderBy[i].Column = fix(mm.OrderBy[i].Column)
	}
	mm.GroupBy = slices.Clone(m.GroupBy)
	for i := range mm.GroupBy {
		mm.GroupBy[i] = fix(mm.GroupBy[i])
	}
	mm.Aggregates = slices.Clone(m.Aggregates)
	for i := range mm.Aggregates {
		mm.Aggregates[i].Column = fix(mm.Aggregates[i].Column)
		mm.Aggregates[i].SumColumn = fix(mm.Aggregates[i].SumColumn)
		mm.Aggregates[i].CountColumn = fix(mm.Aggregates[i].CountColumn)
	}
	mm.Weights = slices.Clone(m.Weights)
	for i := range mm.Weights {
		w := &mm.Weights[i]
		w.Column, w.Weight, w.Pad = fix(w.Column), fix(w.Weight), fix(w.Pad)
		if w.Position != 0 {
			w.Position = fix(w.Position)
		}
	}
	return &mm, nil
}

// passRoute is the Route of a statement that names no sharded or
// broadcast table.
func (r *Rules) passTemplate(sql string, params int) *Template {
	return &Template{rules: r, kind: kindFixed, params: params,
		fixed: &Route{Parts: []Part{{Cluster: r.def, SQL: sql}}, Write: true}}
}

// prepare parses and analyses sql under the default sql_mode; see Prepare.
func (r *Rules) prepare(schema, sql string) (*Template, error) {
	return r.prepareMode(schema, sql, 0)
}

// prepareMode parses and analyses sql as the server reads it under mode;
// see PrepareMode.
func (r *Rules) prepareMode(schema, sql string, mode SQLMode) (*Template, error) {
	if mode&ModeUnsure != 0 {
		if n := r.mayName(sql); n != "" {
			return nil, fmt.Errorf("%w: a statement whose text may name table %s, which is sharded or broadcast, under an sql_mode sluice cannot read statements in (ORACLE, not known yet, or not the same on every cluster)", ErrUnsupported, n)
		}
		return r.passTemplate(sql, 0), nil
	}
	stmts, err := parse(sql, mode)
	if err != nil {
		if n := r.mayName(sql); n != "" {
			// Keep the message only: the parser's error carries a stack.
			return nil, fmt.Errorf("%w: sluice cannot parse this statement, and its text may name table %s, which is sharded or broadcast: %s", ErrUnsupported, n, err.Error())
		}
		return r.passTemplate(sql, 0), nil
	}
	for _, st := range stmts {
		if err := r.hiddenSQL(st); err != nil {
			return nil, err
		}
	}
	if len(stmts) != 1 {
		for _, st := range stmts {
			c := r.collect(st, strings.ToLower(schema))
			if c.cteShadow != "" {
				return nil, cteShadowError(c.cteShadow)
			}
			name := c.broadcastName
			if len(c.order) > 0 {
				name = c.order[0].Name.O
			}
			if name != "" {
				return nil, fmt.Errorf("%w: several statements in one text, one naming table %s, which is sharded or broadcast; send them one by one", ErrUnsupported, name)
			}
		}
		return r.passTemplate(sql, 0), nil
	}
	b := &builder{r: r, sql: sql, schema: strings.ToLower(schema), mode: mode, flags: mode.restoreFlags()}
	t, err := b.build(stmts[0])
	if n := b.c.cteShadow; n != "" {
		return nil, cteShadowError(n)
	}
	if t != nil {
		t.userVar = b.c.userVar
		t.mode = mode
	}
	return t, err
}

func cteShadowError(name string) error {
	return fmt.Errorf("%w: a common table expression is named %s like a sharded or broadcast table; rename it", ErrUnsupported, name)
}

// parse parses sql with a pooled parser as the server reads it under mode.
// The parser's literal driver panics on some inputs (very long decimal
// literals): that is a parse error, and the parser that panicked is not
// reused.
func parse(sql string, mode SQLMode) (stmts []ast.StmtNode, err error) {
	p := parserPool.Get().(*parser.Parser)
	p.SetSQLMode(mode.tidbMode())
	defer func() {
		if v := recover(); v != nil {
			stmts, err = nil, fmt.Errorf("parser failed: %v", v)
		}
	}()
	stmts, _, err = p.Parse(sql, "", "")
	parserPool.Put(p)
	return stmts, err
}
