package shard

import (
	"fmt"
	"io"
	"math"
	"math/big"
	"math/bits"
	"slices"
	"strconv"
)

// aggState is one aggregate's running value in one group.
type aggState struct {
	seen bool  // a non-NULL partial arrived
	cnt  int64 // COUNT; AVG's count
	f    float64
	dec  decAcc
	best []byte // MIN, MAX
	// bestW and bestPad are best's sort key and Pad column when it is
	// text.
	bestW, bestPad []byte
}

// keep copies v into dst's array; the result is nil only when v is, so an
// empty string stays an empty string and not NULL.
func keep(dst, v []byte) []byte {
	if v == nil {
		return nil
	}
	if dst == nil {
		dst = make([]byte, 0, len(v))
	}
	return append(dst[:0], v...)
}

// aggSlab hands out aggregate states from shared chunks.
type aggSlab []aggState

func (s *aggSlab) take(n int) []aggState {
	if cap(*s)-len(*s) < n {
		*s = make([]aggState, 0, max(n*64, 256))
	}
	l := len(*s)
	*s = (*s)[:l+n]
	return (*s)[l : l+n : l+n]
}

// group is one output row being built.
type group struct {
	row  Row
	aggs []aggState
}

// group runs the merge of grouped or aggregated rows: hash-group every
// row, combine the partial aggregates, then sort and emit.
func (r *runner) group() error {
	m := r.m
	index := make(map[string]int32)
	var groups []group
	var arena byteArena
	var aggSlab aggSlab
	var tmp keyVal
	for i := range r.parts {
		for {
			row, err := r.next(i)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if r.keyBuf, err = r.appendRowKey(r.keyBuf[:0], row, m.GroupBy); err != nil {
				return fmt.Errorf("part %d GROUP BY %w", i, err)
			}
			gi, ok := index[string(r.keyBuf)]
			if !ok {
				if r.maxRows > 0 && len(groups) >= r.maxRows {
					return r.tooMany("groups")
				}
				gi = int32(len(groups))
				groups = append(groups, group{row: arena.copyRow(row), aggs: aggSlab.take(len(m.Aggregates))})
				index[string(r.keyBuf)] = gi
			}
			g := &groups[gi]
			for j, a := range m.Aggregates {
				if err := r.fold(&g.aggs[j], a, row, &tmp); err != nil {
					return fmt.Errorf("part %d: %w", i, err)
				}
			}
		}
	}
	if len(groups) == 0 && len(m.GroupBy) == 0 {
		// An aggregate of no rows is one row: COUNT 0, the rest NULL.
		groups = append(groups, group{row: make(Row, len(r.cols)), aggs: make([]aggState, len(m.Aggregates))})
	}
	for gi := range groups {
		g := &groups[gi]
		for j, a := range m.Aggregates {
			v, err := r.final(&g.aggs[j], a, &arena)
			if err != nil {
				return err
			}
			g.row[a.Column] = v
			if st := &g.aggs[j]; (a.Func == AggMin || a.Func == AggMax) && r.col[a.Column].kind == kindWeight && st.seen {
				w := &m.Weights[r.col[a.Column].wt]
				g.row[w.Weight], g.row[w.Pad] = st.bestW, st.bestPad
			}
		}
	}
	order := r.groupOrder()
	if len(order) > 0 && len(groups) > 1 {
		if err := r.sortGroups(groups, order); err != nil {
			return err
		}
	}
	for gi := range groups {
		if r.out.full() {
			break
		}
		if err := r.out.put(groups[gi].row); err != nil {
			return err
		}
	}
	return nil
}

// groupOrder is the order of the grouped rows: ORDER BY, else the GROUP
// BY columns as MariaDB sorts a GROUP BY without ORDER BY: ascending, or
// descending for an item written GROUP BY x DESC.
func (r *runner) groupOrder() []SortKey {
	if len(r.m.OrderBy) > 0 {
		return r.m.OrderBy
	}
	keys := make([]SortKey, len(r.m.GroupBy))
	for i, c := range r.m.GroupBy {
		keys[i] = SortKey{Column: c, Desc: i < len(r.m.GroupDesc) && r.m.GroupDesc[i]}
	}
	return keys
}

// sortGroups sorts groups stably by order, parsing each sort value once.
func (r *runner) sortGroups(groups []group, order []SortKey) error {
	n := len(order)
	keys := make([]keyVal, len(groups)*n)
	perm := make([]int32, len(groups))
	for gi := range groups {
		perm[gi] = int32(gi)
		for j, k := range order {
			if err := r.parseCol(groups[gi].row, k.Column, &keys[gi*n+j]); err != nil {
				return fmt.Errorf("column %d: %w", k.Column, err)
			}
		}
	}
	slices.SortStableFunc(perm, func(a, b int32) int {
		for j, k := range order {
			c := compareKeys(r.col[k.Column].kind, &keys[int(a)*n+j], &keys[int(b)*n+j])
			if c != 0 {
				if k.Desc {
					return -c
				}
				return c
			}
		}
		return 0
	})
	sorted := make([]group, len(groups))
	for i, gi := range perm {
		sorted[i] = groups[gi]
	}
	copy(groups, sorted)
	return nil
}

// fold combines one row's partial value of aggregate a into st.
func (r *runner) fold(st *aggState, a Aggregate, row Row, tmp *keyVal) error {
	v := row[a.Column]
	switch a.Func {
	case AggCount:
		if v == nil {
			return nil
		}
		n, ok := parseInt(v)
		if !ok || n < 0 {
			return fmt.Errorf("%w: COUNT column %d value %q is not a count", ErrMergeInput, a.Column, v)
		}
		if st.cnt, ok = addInt64(st.cnt, n); !ok {
			return fmt.Errorf("%w: COUNT column %d overflows", ErrMergeInput, a.Column)
		}
		st.seen = true
	case AggSum, AggAvg:
		sumCol := a.Column
		if a.Func == AggAvg {
			sumCol = a.SumColumn
			v = row[sumCol]
			c := row[a.CountColumn]
			if c != nil {
				n, ok := parseInt(c)
				if !ok || n < 0 {
					return fmt.Errorf("%w: AVG count column %d value %q is not a count", ErrMergeInput, a.CountColumn, c)
				}
				if st.cnt, ok = addInt64(st.cnt, n); !ok {
					return fmt.Errorf("%w: AVG count column %d overflows", ErrMergeInput, a.CountColumn)
				}
			}
		}
		if v == nil {
			return nil
		}
		st.seen = true
		if r.col[sumCol].kind == kindFloat {
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return fmt.Errorf("%w: SUM column %d value %q is not a number", ErrMergeInput, sumCol, v)
			}
			st.f += f
			return nil
		}
		if err := st.dec.add(v); err != nil {
			return fmt.Errorf("SUM column %d: %w", sumCol, err)
		}
	case AggMin, AggMax:
		if v == nil {
			return nil
		}
		k := r.col[a.Column].kind
		if err := r.parseCol(row, a.Column, tmp); err != nil {
			return fmt.Errorf("column %d: %w", a.Column, err)
		}
		if st.seen {
			var cur keyVal
			if k == kindWeight {
				pad, _ := padOf(st.bestPad) // read when it was stored
				cur = keyVal{b: st.bestW, frac: pad}
			} else {
				_ = parseKey(k, st.best, &cur) // parsed when it was stored
			}
			c := compareKeys(k, tmp, &cur)
			if (a.Func == AggMin && c >= 0) || (a.Func == AggMax && c <= 0) {
				// The first value met stays among equals, as the
				// server keeps it.
				return nil
			}
		}
		st.best = keep(st.best, v)
		if k == kindWeight {
			st.bestW, st.bestPad = keep(st.bestW, tmp.b), keep(st.bestPad, row[r.m.Weights[r.col[a.Column].wt].Pad])
		}
		st.seen = true
	}
	return nil
}

// final writes the value of aggregate a; nil is NULL.
func (r *runner) final(st *aggState, a Aggregate, arena *byteArena) ([]byte, error) {
	col := r.cols[a.Column]
	var b []byte
	switch a.Func {
	case AggCount:
		b = strconv.AppendInt(arena.tail(), st.cnt, 10)
	case AggMin, AggMax:
		if !st.seen {
			return nil, nil
		}
		return st.best, nil
	case AggSum:
		if !st.seen {
			return nil, nil
		}
		if r.col[a.Column].kind == kindFloat {
			b = appendFloat(arena.tail(), st.f, int(col.Decimals))
		} else {
			scale := st.dec.scale
			if r.col[a.Column].kind == kindDecimal {
				scale = int32(col.Decimals)
			}
			b = st.dec.appendText(arena.tail(), scale)
		}
	case AggAvg:
		// The Parts' own AVG column is the server's: its type and scale
		// (div_precision_increment included) are the ones to write.
		if !st.seen || st.cnt == 0 {
			return nil, nil
		}
		sumFloat := r.col[a.SumColumn].kind == kindFloat
		switch {
		case r.col[a.Column].kind == kindFloat:
			f := st.f
			if !sumFloat {
				var err error
				if f, err = strconv.ParseFloat(string(st.dec.appendText(nil, st.dec.scale)), 64); err != nil {
					return nil, fmt.Errorf("%w: AVG column %d: %w", ErrMergeInput, a.Column, err)
				}
			}
			b = appendFloat(arena.tail(), f/float64(st.cnt), int(col.Decimals))
		case r.col[a.Column].kind == kindDecimal && !sumFloat:
			b = st.dec.appendQuo(arena.tail(), st.cnt, int32(col.Decimals), avgTruncates(col.Decimals))
		default:
			return nil, fmt.Errorf("%w: AVG column %d of type %#x over a SUM of type %#x", ErrMergeInput, a.Column, col.Type, r.cols[a.SumColumn].Type)
		}
	}
	return arena.commit(b), nil
}

func addInt64(a, b int64) (int64, bool) {
	s := a + b
	if (s > a) != (b > 0) {
		return 0, false
	}
	return s, true
}

// decAcc sums decimal text exactly: an int64 of the digits while the sum
// fits, a big.Int after, both scaled by 10^scale.
type decAcc struct {
	n     int64
	b     *big.Int // non-nil once n overflowed
	scale int32
}

// pow10 holds the powers of ten an int64 can hold.
var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// mulInt64 multiplies without overflow, or reports false.
func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	hi, lo := bits.Mul64(uint64(absInt64(a)), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	if a < 0 {
		return -int64(lo), true
	}
	return int64(lo), true
}

func absInt64(a int64) int64 {
	if a < 0 {
		return -a
	}
	return a
}

// add adds the decimal text v.
func (d *decAcc) add(v []byte) error {
	neg, ip, fp, ok := splitDecimal(v)
	if !ok {
		return fmt.Errorf("%w: %q is not a decimal", ErrMergeInput, v)
	}
	s := int32(len(fp))
	if d.b == nil && len(ip)+len(fp) <= 18 {
		var x int64
		for _, c := range ip {
			x = x*10 + int64(c-'0')
		}
		for _, c := range fp {
			x = x*10 + int64(c-'0')
		}
		if neg {
			x = -x
		}
		if d.addSmall(x, s) {
			return nil
		}
	}
	if d.b == nil {
		d.b = big.NewInt(d.n)
	}
	var x big.Int
	digits := make([]byte, 0, len(ip)+len(fp)+1)
	if neg {
		digits = append(digits, '-')
	}
	digits = append(append(digits, ip...), fp...)
	if _, ok := x.SetString(string(digits), 10); !ok {
		return fmt.Errorf("%w: %q is not a decimal", ErrMergeInput, v)
	}
	if s > d.scale {
		d.b.Mul(d.b, bigPow10(s-d.scale))
		d.scale = s
	} else if s < d.scale {
		x.Mul(&x, bigPow10(d.scale-s))
	}
	d.b.Add(d.b, &x)
	return nil
}

// addSmall adds x scaled by 10^s while everything fits an int64.
func (d *decAcc) addSmall(x int64, s int32) bool {
	n := d.n
	ok := true
	if s > d.scale {
		if s-d.scale >= int32(len(pow10)) {
			return false
		}
		n, ok = mulInt64(n, pow10[s-d.scale])
	} else if s < d.scale {
		if d.scale-s >= int32(len(pow10)) {
			return false
		}
		x, ok = mulInt64(x, pow10[d.scale-s])
	}
	if !ok {
		return false
	}
	sum, ok := addInt64(n, x)
	if !ok {
		return false
	}
	d.n, d.scale = sum, max(s, d.scale)
	return true
}

func bigPow10(n int32) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}

// big returns the sum as a big.Int (a new one).
func (d *decAcc) bigValue() *big.Int {
	if d.b != nil {
		return new(big.Int).Set(d.b)
	}
	return big.NewInt(d.n)
}

// appendText appends the sum with scale digits after the point, rounded
// half away from zero when the partials had more.
func (d *decAcc) appendText(dst []byte, scale int32) []byte {
	if d.b == nil && scale == d.scale {
		var tmp [20]byte
		return appendScaled(dst, d.n < 0, strconv.AppendUint(tmp[:0], uint64(absInt64(d.n)), 10), scale)
	}
	v := d.bigValue()
	switch {
	case scale > d.scale:
		v.Mul(v, bigPow10(scale-d.scale))
	case scale < d.scale:
		v = quoRound(v, bigPow10(d.scale-scale))
	}
	return appendBig(dst, v, scale)
}

// appendQuo appends sum / n with scale digits after the point, rounded
// half away from zero, or truncated toward zero when trunc is set.
func (d *decAcc) appendQuo(dst []byte, n int64, scale int32, trunc bool) []byte {
	if d.b == nil && scale >= d.scale && scale-d.scale < int32(len(pow10)) {
		if num, ok := mulInt64(d.n, pow10[scale-d.scale]); ok {
			q, rem := num/n, absInt64(num%n)
			if !trunc && rem >= n-rem { // half or more: away from zero
				if num < 0 {
					q--
				} else {
					q++
				}
			}
			var tmp [20]byte
			return appendScaled(dst, num < 0, strconv.AppendUint(tmp[:0], uint64(absInt64(q)), 10), scale)
		}
	}
	num := d.bigValue()
	den := big.NewInt(n)
	if scale >= d.scale {
		num.Mul(num, bigPow10(scale-d.scale))
	} else {
		den.Mul(den, bigPow10(d.scale-scale))
	}
	if trunc {
		neg := num.Sign() < 0
		return appendScaled(dst, neg, new(big.Int).Abs(new(big.Int).Quo(num, den)).Append(nil, 10), scale)
	}
	return appendBig(dst, quoRound(num, den), scale)
}

// avgTruncates reports whether MariaDB truncates, rather than rounds, an
// AVG of DECIMAL scale decimals: it divides to whole groups of nine
// fraction digits (the sum's scale plus div_precision_increment, rounded
// up to a multiple of nine) and rounds that to the column's scale, so when
// the scale is itself a multiple of nine below the cap of 38 nothing is
// left to round by and the quotient is cut (AVG of 3 and 4 is 3 under
// div_precision_increment = 0).
func avgTruncates(decimals byte) bool { return decimals%9 == 0 && decimals < 38 }

// quoRound returns num / den (den > 0) rounded half away from zero.
func quoRound(num, den *big.Int) *big.Int {
	q, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	rem.Abs(rem)
	rem.Lsh(rem, 1)
	if rem.Cmp(den) >= 0 {
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

func appendBig(dst []byte, v *big.Int, scale int32) []byte {
	neg := v.Sign() < 0
	digits := new(big.Int).Abs(v).Append(nil, 10)
	return appendScaled(dst, neg, digits, scale)
}

// appendScaled writes the digits of an unscaled value with scale digits
// after the point.
func appendScaled(dst []byte, neg bool, digits []byte, scale int32) []byte {
	if neg && !allZero(digits) {
		dst = append(dst, '-')
	}
	s := int(scale)
	if len(digits) <= s {
		dst = append(dst, '0')
		if s > 0 {
			dst = append(dst, '.')
			for range s - len(digits) {
				dst = append(dst, '0')
			}
			dst = append(dst, digits...)
		}
		return dst
	}
	dst = append(dst, digits[:len(digits)-s]...)
	if s > 0 {
		dst = append(dst, '.')
		dst = append(dst, digits[len(digits)-s:]...)
	}
	return dst
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != '0' {
			return false
		}
	}
	return true
}

// byteArena hands out copies of rows from large shared chunks, so the
// rows a merge retains cost a few allocations, not one per value.
type byteArena struct {
	buf  []byte
	slab []([]byte)
}

const arenaChunk = 32 << 10

// copyRow returns a copy of row whose values live in the arena.
func (a *byteArena) copyRow(row Row) Row {
	n := len(row)
	if cap(a.slab)-len(a.slab) < n {
		a.slab = make([][]byte, 0, max(n*128, 1024))
	}
	out := Row(a.slab[len(a.slab) : len(a.slab)+n : len(a.slab)+n])
	a.slab = a.slab[:len(a.slab)+n]
	for i, v := range row {
		if v != nil {
			out[i] = a.commit(append(a.tail(), v...))
		}
	}
	return out
}

// tail returns the free end of the current chunk to append a value to.
func (a *byteArena) tail() []byte {
	if cap(a.buf)-len(a.buf) < 64 {
		a.buf = make([]byte, 0, arenaChunk)
	}
	return a.buf[len(a.buf):]
}

// commit keeps b, which was appended to tail(): when it outgrew the
// chunk it lives in its own array and the chunk is left as it was.
func (a *byteArena) commit(b []byte) []byte {
	free := a.buf[len(a.buf):cap(a.buf)]
	if len(b) > 0 && cap(free) > 0 && &b[0] == &free[:1][0] {
		a.buf = a.buf[:len(a.buf)+len(b)]
	}
	return b[:len(b):len(b)]
}
