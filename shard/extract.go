package shard

import (
	"errors"
	"math/bits"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// condOp is the kind of a key condition node.
type condOp uint8

const (
	// condAll: the condition does not restrict the shards.
	condAll condOp = iota
	// condKey: the key equals one of vals.
	condKey
	// condID: the rule's id column equals one of vals; ids of version
	// IDVersionSharded name their shard.
	condID
	condAnd
	condOr
)

// cond is what a WHERE clause says about the shard key, built once per
// Template and evaluated per execution with the parameter values.
type cond struct {
	op   condOp
	vals []valSrc
	kids []*cond
}

// valSrc is a literal value or a parameter marker's index.
type valSrc struct {
	param int // -1: v holds the literal
	v     Value
}

func (s valSrc) value(args []Value) Value {
	if s.param < 0 {
		return s.v
	}
	if s.param < len(args) {
		return args[s.param]
	}
	return Value{}
}

var condAllNode = &cond{op: condAll}

// colRole tells what a column reference means for the key.
type colRole uint8

const (
	roleNone colRole = iota
	roleKey
	roleID
)

// resolver tells whether a column reference names a key or id column of a
// sharded table of one query block.
type resolver interface {
	role(c *ast.ColumnName) colRole
}

// buildCond turns a WHERE expression into a key condition; markers maps a
// parameter marker to its index.
func buildCond(e ast.ExprNode, res resolver, markers map[*test_driver.ParamMarkerExpr]int) *cond {
	switch x := e.(type) {
	case nil:
		return condAllNode
	case *ast.ParenthesesExpr:
		return buildCond(x.Expr, res, markers)
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.LogicAnd, opcode.LogicOr:
			l, r := buildCond(x.L, res, markers), buildCond(x.R, res, markers)
			if x.Op == opcode.LogicAnd {
				switch {
				case l.op == condAll:
					return r
				case r.op == condAll:
					return l
				}
				return &cond{op: condAnd, kids: []*cond{l, r}}
			}
			if l.op == condAll || r.op == condAll {
				return condAllNode
			}
			return &cond{op: condOr, kids: []*cond{l, r}}
		case opcode.EQ:
			if role, ok := columnRole(x.L, res); ok {
				if v, ok := constant(x.R, markers); ok {
					return &cond{op: op(role), vals: []valSrc{v}}
				}
			}
			if role, ok := columnRole(x.R, res); ok {
				if v, ok := constant(x.L, markers); ok {
					return &cond{op: op(role), vals: []valSrc{v}}
				}
			}
		}
	case *ast.PatternInExpr:
		if x.Not || x.Sel != nil {
			return condAllNode
		}
		role, ok := columnRole(x.Expr, res)
		if !ok {
			return condAllNode
		}
		vals := make([]valSrc, 0, len(x.List))
		for _, it := range x.List {
			v, ok := constant(it, markers)
			if !ok {
				return condAllNode
			}
			vals = append(vals, v)
		}
		return &cond{op: op(role), vals: vals}
	}
	return condAllNode
}

func op(r colRole) condOp {
	if r == roleID {
		return condID
	}
	return condKey
}

func columnRole(e ast.ExprNode, res resolver) (colRole, bool) {
	for {
		p, ok := e.(*ast.ParenthesesExpr)
		if !ok {
			break
		}
		e = p.Expr
	}
	c, ok := e.(*ast.ColumnNameExpr)
	if !ok {
		return roleNone, false
	}
	r := res.role(c.Name)
	return r, r != roleNone
}

// constant returns the value of a literal (a negative number included) or
// a parameter marker.
func constant(e ast.ExprNode, markers map[*test_driver.ParamMarkerExpr]int) (valSrc, bool) {
	neg := false
	for {
		switch x := e.(type) {
		case *ast.ParenthesesExpr:
			e = x.Expr
			continue
		case *ast.UnaryOperationExpr:
			if x.Op == opcode.Minus && !neg {
				neg = true
				e = x.V
				continue
			}
			return valSrc{}, false
		}
		break
	}
	switch x := e.(type) {
	case *test_driver.ParamMarkerExpr:
		if neg {
			return valSrc{}, false
		}
		i, ok := markers[x]
		return valSrc{param: i}, ok
	case *test_driver.ValueExpr:
		v, ok := datumValue(&x.Datum)
		if !ok || v.Kind == KindString && !v.Decimal && !utf8Introducer(x.Type.GetCharset()) && !isASCII(v.S) {
			// _latin1'\xe9' holds bytes of another character set than
			// the session's: not a value sluice can place.
			return valSrc{}, false
		}
		if v.Kind == KindString && !v.Decimal && strings.EqualFold(x.Type.GetCharset(), "binary") && !isASCII(v.S) {
			// _binary'\xc3\xa9' compares its bytes with the column's in
			// the column's character set: place reads them as UTF-8
			// only for a utf8 or binary column.
			v.Binary = true
		}
		if neg {
			switch v.Kind {
			case KindInt:
				if v.I == -1<<63 {
					return valSrc{}, false
				}
				v.I = -v.I
			case KindUint:
				if v.U > 1<<63 {
					return valSrc{}, false
				}
				v = Value{Kind: KindInt, I: -int64(v.U)}
			case KindFloat:
				v.F = -v.F
			case KindString:
				// The server negates a string as a double ('abc' is 0,
				// '' too): a number sluice does not compute, so no
				// value it places. A decimal's text negates exactly.
				if !v.Decimal || len(v.S) == 0 || v.S[0] == '-' {
					return valSrc{}, false
				}
				v.S = append([]byte{'-'}, v.S...)
			default:
				return valSrc{}, false
			}
		}
		return valSrc{param: -1, v: v}, true
	}
	return valSrc{}, false
}

func datumValue(d *test_driver.Datum) (Value, bool) {
	switch d.Kind() {
	case test_driver.KindNull:
		return Value{Kind: KindNull}, true
	case test_driver.KindInt64:
		return Value{Kind: KindInt, I: d.GetInt64()}, true
	case test_driver.KindUint64:
		return Value{Kind: KindUint, U: d.GetUint64()}, true
	case test_driver.KindFloat64, test_driver.KindFloat32:
		return Value{Kind: KindFloat, F: d.GetFloat64()}, true
	case test_driver.KindString, test_driver.KindBytes:
		return Value{Kind: KindString, S: []byte(d.GetString())}, true
	case test_driver.KindMysqlDecimal:
		s := d.GetMysqlDecimal().String()
		if s == "" {
			return Value{}, false
		}
		return Value{Kind: KindString, S: []byte(s), Decimal: true}, true
	}
	return Value{}, false
}

// shardSet is a set of shard numbers: all of them, or those whose bits are
// set. The single-shard case needs no bitmap, so that a point statement's
// route costs no allocation.
type shardSet struct {
	all  bool
	one  int // with bits nil: -1 for the empty set, else the only shard
	bits []uint64
}

func (s *shardSet) toBits(n int) {
	if s.bits != nil || s.all {
		return
	}
	s.bits = make([]uint64, (n+63)/64)
	if s.one >= 0 {
		s.bits[s.one/64] |= 1 << (s.one % 64)
	}
}

func (s *shardSet) add(sh, n int) {
	if s.all {
		return
	}
	if s.bits == nil {
		if s.one < 0 || s.one == sh {
			s.one = sh
			return
		}
		s.toBits(n)
	}
	s.bits[sh/64] |= 1 << (sh % 64)
}

// count returns the number of shards in s, and the shard when it is one.
func (s *shardSet) count(n int) (int, int) {
	switch {
	case s.all:
		return n, -1
	case s.bits == nil:
		if s.one < 0 {
			return 0, -1
		}
		return 1, s.one
	}
	c, last := 0, -1
	for i, w := range s.bits {
		c += bits.OnesCount64(w)
		if w != 0 {
			last = i*64 + 63 - bits.LeadingZeros64(w)
		}
	}
	return c, last
}

func (s *shardSet) has(sh int) bool {
	switch {
	case s.all:
		return true
	case s.bits == nil:
		return s.one == sh
	}
	return s.bits[sh/64]&(1<<(sh%64)) != 0
}

// eval computes the shards a condition allows for one execution; cs is
// place's. A key value place cannot map exactly allows every shard.
func (c *cond) eval(ru *rule, args []Value, cs ClientCharset) (shardSet, error) {
	switch c.op {
	case condAll:
		return shardSet{all: true}, nil
	case condKey, condID:
		set := shardSet{one: -1}
		for _, src := range c.vals {
			v := src.value(args)
			if v.Kind == KindNull {
				continue // = NULL matches no row
			}
			if c.op == condID {
				mag, neg, ok := integerOf(v)
				ok = ok && (v.Kind != KindFloat || mag <= exactFloat)
				if !ok || neg || mag > 1<<63-1 {
					return shardSet{all: true}, nil
				}
				vs, ok := ShardOfID(int64(mag))
				if !ok {
					return shardSet{all: true}, nil
				}
				set.add(vs%ru.shards, ru.shards)
				continue
			}
			p, err := ru.place(v, false, cs)
			if err == errNotExact {
				return shardSet{all: true}, nil
			}
			if errors.Is(err, ErrKeyOutOfRange) {
				// No INSERT through sluice can put a row outside every
				// range, so such a key matches none, as = NULL does.
				continue
			}
			if err != nil {
				return set, err
			}
			set.add(p%ru.shards, ru.shards)
		}
		return set, nil
	case condAnd:
		var out shardSet
		for i, k := range c.kids {
			s, err := k.eval(ru, args, cs)
			if err != nil {
				return s, err
			}
			if i == 0 {
				out = s
				continue
			}
			out = intersect(out, s, ru.shards)
		}
		return out, nil
	default: // condOr
		out := shardSet{one: -1}
		for _, k := range c.kids {
			s, err := k.eval(ru, args, cs)
			if err != nil {
				return s, err
			}
			if s.all {
				return s, nil
			}
			n, one := s.count(ru.shards)
			switch {
			case n == 1:
				out.add(one, ru.shards)
			case n > 1:
				out.toBits(ru.shards)
				for i := range s.bits {
					out.bits[i] |= s.bits[i]
				}
			}
		}
		return out, nil
	}
}

func intersect(a, b shardSet, n int) shardSet {
	switch {
	case a.all:
		return b
	case b.all:
		return a
	case a.bits == nil:
		if a.one >= 0 && b.has(a.one) {
			return a
		}
		return shardSet{one: -1}
	case b.bits == nil:
		return intersect(b, a, n)
	}
	out := shardSet{one: -1, bits: make([]uint64, len(a.bits))}
	for i := range a.bits {
		out.bits[i] = a.bits[i] & b.bits[i]
	}
	return out
}

// blockTables are the tables of one query block, by the name columns use
// to qualify them (the alias, else the table name), for column resolution.
type blockTables struct {
	// refs maps a lower-case qualifier to the table's rule (nil when the
	// table is not sharded).
	refs map[string]*rule
	// rules are the sharded tables' rules in the block.
	rules []*rule
	// derived: the block reads a derived table too.
	derived bool
	// names maps a qualifier to the table's name as written, for messages.
	names map[string]string
}

func (b *blockTables) role(c *ast.ColumnName) colRole {
	name := c.Name.L
	if c.Table.L != "" {
		ru := b.refs[c.Table.L]
		if ru == nil {
			return roleNone
		}
		return ru.roleOf(name)
	}
	for _, ru := range b.rules {
		if r := ru.roleOf(name); r != roleNone {
			return r
		}
	}
	return roleNone
}

func (r *rule) roleOf(col string) colRole {
	switch {
	case strings.EqualFold(col, r.key):
		return roleKey
	case r.idColumn != "" && strings.EqualFold(col, r.idColumn):
		return roleID
	}
	return roleNone
}

// utf8Introducer reports whether a string literal's character set (its
// introducer, or the parser's default utf8mb4) keeps UTF-8 bytes as they
// are: the utf8 sets, and binary, which compares the bytes themselves.
func utf8Introducer(cs string) bool {
	switch strings.ToLower(cs) {
	case "", "utf8mb4", "utf8", "utf8mb3", "binary":
		return true
	}
	return false
}

func isASCII(s []byte) bool {
	for _, c := range s {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
