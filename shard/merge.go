package shard

import (
	"errors"
	"fmt"
	"io"

	"github.com/sluice-proxy/sluice/protocol"
)

// Sentinel errors of the merge; callers test them with errors.Is. Only
// ErrTooManyRows is the client's doing and has a code of its own (see the
// planner's sentinels).
var (
	// ErrTooManyRows: a merge had to hold more rows (groups, distinct
	// rows) than max_merge_rows allows.
	ErrTooManyRows = protocol.ERTooBigSelect.Sentinel("scatter-gather merge holds too many rows")
	// ErrMergeInput: a Part returned a row the merge cannot use (wrong
	// column count, a number that does not parse).
	ErrMergeInput = errors.New("scatter-gather merge got a malformed row")
	// ErrMergeSpec: a Merge names a column the result does not have.
	ErrMergeSpec = errors.New("scatter-gather merge spec does not fit the result")
)

// RowSource yields the rows of one Part's result. Next returns io.EOF after
// the last row; the Row it returns may be reused by its next call. A
// RowSource is used by one goroutine, the one running the merge.
type RowSource interface {
	Next() (Row, error)
}

// Run merges the rows of parts, whose columns are cols, into one result
// and hands each output row, cut to the m.Visible leading columns, to emit.
// The emitted Row may be reused once emit returns. An error from a part
// or from emit ends the merge and is returned as is.
//
// Without OrderBy, GroupBy, Aggregates or Distinct the parts are
// concatenated as they stream; with OrderBy alone they are k-way merged,
// each part assumed sorted by the same keys, holding one row per part;
// with GroupBy or Aggregates rows are grouped in memory, then sorted.
// Rows held beyond that (groups, distinct rows) are counted against
// maxRows (<= 0: no bound); past it Run returns an error wrapping
// ErrTooManyRows.
//
// Run returns as soon as Limit rows are out, without reading the parts to
// their end: the caller drains or closes what is left. Run is safe for
// concurrent use: it keeps its state on its own, m is only read.
func (m *Merge) Run(cols []Column, parts []RowSource, maxRows int, emit func(Row) error) error {
	if err := m.check(cols); err != nil {
		return err
	}
	r := &runner{m: m, cols: cols, parts: parts, maxRows: maxRows}
	r.col = make([]colRule, len(cols))
	for i := range r.col {
		r.col[i].wt = -1
	}
	for i, w := range m.Weights {
		r.col[w.Column].wt = int32(i)
	}
	for i, c := range cols {
		pos := r.col[i].wt >= 0 && m.Weights[r.col[i].wt].Position > 0
		r.col[i].kind = columnKind(c, pos)
		// The server prints a FLOAT with 6 significant digits, so that
		// values it tells apart can print alike; its e+0 is the DOUBLE of
		// the same value, whose text reads back exactly.
		r.col[i].exact = pos && c.Type == typeFloat
	}
	if err := r.checkWeights(); err != nil {
		return err
	}
	r.out = sink{emit: emit, visible: m.Visible, offset: max(m.Offset, 0), limit: m.Limit, r: r}
	if m.Distinct {
		r.out.distinct = make(map[string]struct{})
		r.out.resetDistinct = len(m.OrderBy) > 0 && len(m.GroupBy) == 0 && len(m.Aggregates) == 0
		for _, k := range m.OrderBy {
			if k.Column >= m.Visible {
				r.out.resetDistinct = false
			}
		}
	}
	switch {
	case len(m.GroupBy) > 0 || len(m.Aggregates) > 0:
		return r.group()
	case len(m.OrderBy) > 0:
		return r.kway()
	}
	return r.concat()
}

// check reports a Merge whose columns do not exist in cols.
func (m *Merge) check(cols []Column) error {
	n := len(cols)
	if m.Visible < 1 || m.Visible > n {
		return fmt.Errorf("%w: %d visible columns of %d", ErrMergeSpec, m.Visible, n)
	}
	for _, k := range m.OrderBy {
		if k.Column < 0 || k.Column >= n {
			return fmt.Errorf("%w: ORDER BY column %d of %d", ErrMergeSpec, k.Column, n)
		}
	}
	for _, c := range m.GroupBy {
		if c < 0 || c >= n {
			return fmt.Errorf("%w: GROUP BY column %d of %d", ErrMergeSpec, c, n)
		}
	}
	for _, a := range m.Aggregates {
		if a.Column < 0 || a.Column >= n || a.Func > AggAvg {
			return fmt.Errorf("%w: aggregate %d on column %d of %d", ErrMergeSpec, a.Func, a.Column, n)
		}
		if a.Func == AggAvg && (a.CountColumn < 0 || a.CountColumn >= n || a.SumColumn < 0 || a.SumColumn >= n) {
			return fmt.Errorf("%w: AVG sum and count columns %d, %d of %d", ErrMergeSpec, a.SumColumn, a.CountColumn, n)
		}
	}
	for _, w := range m.Weights {
		if w.Column < 0 || w.Column >= n || w.Weight < 0 || w.Weight >= n || w.Pad < 0 || w.Pad >= n || w.Position < 0 || w.Position >= n {
			return fmt.Errorf("%w: sort key columns %+v of %d", ErrMergeSpec, w, n)
		}
	}
	return nil
}

// checkWeights refuses a merge that would have to compare a text column
// it has no sort key for: comparing the text itself would be a guess at
// its collation.
func (r *runner) checkWeights() error {
	m := r.m
	need := func(c int, what string) error {
		if r.col[c].kind == kindWeight && r.col[c].wt < 0 {
			return fmt.Errorf("%w: %s compares text column %d without the server's sort key", ErrUnsupported, what, c+1)
		}
		return nil
	}
	// A FLOAT's text is rounded to 6 significant digits: values the
	// server orders or tells apart by their exact value can print alike.
	// Only a column has its exact value (e+0) beside it. MIN and MAX
	// may compare the text: rounding keeps the order, and values that
	// round alike print alike.
	exact := func(c int, what string) error {
		if r.cols[c].Type == typeFloat && !r.col[c].exact {
			return fmt.Errorf("%w: %s compares FLOAT column %d, an expression whose text is rounded; CAST it AS DOUBLE", ErrUnsupported, what, c+1)
		}
		return nil
	}
	for _, k := range m.OrderBy {
		if err := need(k.Column, "ORDER BY"); err != nil {
			return err
		}
		if err := exact(k.Column, "ORDER BY"); err != nil {
			return err
		}
	}
	for _, c := range m.GroupBy {
		if err := need(c, "GROUP BY"); err != nil {
			return err
		}
		if err := exact(c, "GROUP BY"); err != nil {
			return err
		}
	}
	for _, a := range m.Aggregates {
		if a.Func == AggMin || a.Func == AggMax {
			if err := need(a.Column, "MIN or MAX"); err != nil {
				return err
			}
		}
	}
	if m.Distinct {
		for c := range m.Visible {
			if err := need(c, "DISTINCT"); err != nil {
				return err
			}
			if err := exact(c, "DISTINCT"); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseCol parses column c of row for comparison: text by its sort key
// and pad, ENUM and SET by their position, others by their value.
func (r *runner) parseCol(row Row, c int, kv *keyVal) error {
	k := r.col[c].kind
	if r.col[c].exact && row[c] != nil {
		w := &r.m.Weights[r.col[c].wt]
		if err := parseKey(kindFloat, row[w.Position], kv); err != nil || kv.null {
			return fmt.Errorf("%w: the exact value of FLOAT %q is %q", ErrMergeInput, row[c], row[w.Position])
		}
		return nil
	}
	if row[c] == nil || (k != kindWeight && k != kindPosition) {
		return parseKey(k, row[c], kv)
	}
	w := &r.m.Weights[r.col[c].wt]
	if k == kindPosition {
		if err := parseKey(kindUint, row[w.Position], kv); err == nil && !kv.null {
			return nil
		}
		// The bits of a SET with a 64th member come back as a negative
		// BIGINT: the same bits.
		if err := parseKey(kindInt, row[w.Position], kv); err != nil || kv.null {
			return fmt.Errorf("%w: the position of an ENUM or SET value %q is %q", ErrMergeInput, row[c], row[w.Position])
		}
		*kv = keyVal{u: uint64(kv.i)}
		return nil
	}
	if row[w.Weight] == nil {
		// WEIGHT_STRING gives NULL for a sort key longer than
		// max_allowed_packet.
		return fmt.Errorf("%w: the server gave no sort key for a value of column %d (%d bytes)", ErrUnsupported, c+1, len(row[c]))
	}
	pad, err := padOf(row[w.Pad])
	if err != nil {
		return fmt.Errorf("column %d: %w", c+1, err)
	}
	*kv = keyVal{b: row[w.Weight], frac: pad}
	return nil
}

// maxUnitWeight is the longest sort key of one space in a collation that
// compares at one level: 1 byte (8-bit character sets), 2 (the _ci and
// _unicode collations), 3 (utf8mb4_bin). A longer one holds several
// levels (MariaDB's uca1400 _as_cs collations: accents and case after the
// base letters), whose PAD SPACE comparison pads each level: a byte-wise
// comparison of the whole key would be wrong, so such text is refused.
const maxUnitWeight = 3

// padOf reads a Pad column: 'P' and the sort key of a space for a PAD
// SPACE collation, 'N' and that key for a NO PAD one. It returns the key
// the shorter value is padded with, empty for NO PAD.
func padOf(p []byte) ([]byte, error) {
	switch {
	case len(p) == 0 || (p[0] != 'P' && p[0] != 'N'):
		return nil, fmt.Errorf("%w: pad column %q", ErrMergeInput, p)
	case len(p)-1 > maxUnitWeight:
		return nil, fmt.Errorf("%w: text in a collation that compares at several levels (a space weighs %d bytes)", ErrUnsupported, len(p)-1)
	case p[0] == 'N':
		return p[1:1], nil
	}
	return p[1:], nil
}

// runner is the state of one Run.
type runner struct {
	m       *Merge
	cols    []Column
	col     []colRule // per column
	parts   []RowSource
	kv      keyVal
	maxRows int
	out     sink
	keyBuf  []byte
}

// next reads the next row of part i and checks its width; io.EOF at the
// end.
func (r *runner) next(i int) (Row, error) {
	row, err := r.parts[i].Next()
	if err != nil {
		return nil, err
	}
	if len(row) != len(r.cols) {
		return nil, fmt.Errorf("%w: part %d returned a row of %d columns, want %d", ErrMergeInput, i, len(row), len(r.cols))
	}
	return row, nil
}

// tooMany is the error for holding more than maxRows rows of what.
func (r *runner) tooMany(what string) error {
	return fmt.Errorf("%w: more than %d %s (max_merge_rows = %d)", ErrTooManyRows, r.maxRows, what, r.maxRows)
}

// appendRowKey appends the comparison key of the columns idx of row.
func (r *runner) appendRowKey(dst []byte, row Row, idx []int) ([]byte, error) {
	for _, c := range idx {
		if err := r.parseCol(row, c, &r.kv); err != nil {
			return dst, fmt.Errorf("column %d: %w", c, err)
		}
		dst = appendKey(dst, r.col[c].kind, &r.kv)
	}
	return dst, nil
}

// colRule is how the merge compares one column.
type colRule struct {
	kind  cmpKind
	wt    int32 // index into Merge.Weights, -1 for none
	exact bool  // a FLOAT compared by its Position column (e+0)
}

// sink applies Distinct, Offset and Limit to the merged rows and emits
// them.
type sink struct {
	r             *runner
	emit          func(Row) error
	visible       int
	offset, limit int64
	emitted       int64
	// distinct holds the keys of the visible columns seen; nil without
	// Distinct. With resetDistinct the rows arrive sorted by visible
	// columns only, so equal rows are adjacent to rows of the same sort
	// key and the set is cleared when the sort key changes.
	distinct      map[string]struct{}
	resetDistinct bool
	visibleIdx    []int
	sortKey       []byte
	prevSortKey   []byte
}

// full reports that Limit rows are out: nothing more is read.
func (s *sink) full() bool { return s.limit >= 0 && s.emitted >= s.limit }

// put passes one merged row on.
func (s *sink) put(row Row) error {
	if s.distinct != nil {
		dup, err := s.seen(row)
		if err != nil || dup {
			return err
		}
	}
	if s.offset > 0 {
		s.offset--
		return nil
	}
	s.emitted++
	return s.emit(row[:s.visible])
}

// seen reports whether a row equal in the visible columns was put before,
// and remembers this one.
func (s *sink) seen(row Row) (bool, error) {
	r := s.r
	if s.visibleIdx == nil {
		s.visibleIdx = make([]int, s.visible)
		for i := range s.visibleIdx {
			s.visibleIdx[i] = i
		}
	}
	var err error
	if s.resetDistinct {
		s.sortKey = s.sortKey[:0]
		for _, k := range r.m.OrderBy {
			if err := r.parseCol(row, k.Column, &r.kv); err != nil {
				return false, fmt.Errorf("column %d: %w", k.Column, err)
			}
			s.sortKey = appendKey(s.sortKey, r.col[k.Column].kind, &r.kv)
		}
		if string(s.sortKey) != string(s.prevSortKey) {
			clear(s.distinct)
			s.prevSortKey = append(s.prevSortKey[:0], s.sortKey...)
		}
	}
	if r.keyBuf, err = r.appendRowKey(r.keyBuf[:0], row, s.visibleIdx); err != nil {
		return false, err
	}
	if _, ok := s.distinct[string(r.keyBuf)]; ok {
		return true, nil
	}
	if r.maxRows > 0 && len(s.distinct) >= r.maxRows {
		return false, r.tooMany("distinct rows")
	}
	s.distinct[string(r.keyBuf)] = struct{}{}
	return false, nil
}

// concat streams the parts one after the other.
func (r *runner) concat() error {
	for i := range r.parts {
		for !r.out.full() {
			row, err := r.next(i)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if err := r.out.put(row); err != nil {
				return err
			}
		}
	}
	return nil
}

// kway merges the sorted parts: a binary min-heap of part indexes ordered
// by each part's current row. A part's row stays valid until that part's
// next Next call, which comes only after the row was emitted, so nothing
// is copied.
func (r *runner) kway() error {
	if r.out.full() {
		return nil
	}
	nk := len(r.m.OrderBy)
	h := kheap{r: r, rows: make([]Row, len(r.parts)), keys: make([]keyVal, len(r.parts)*nk)}
	h.idx = make([]int, 0, len(r.parts))
	for i := range r.parts {
		ok, err := h.pull(i)
		if err != nil {
			return err
		}
		if ok {
			h.idx = append(h.idx, i)
		}
	}
	for i := len(h.idx)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
	for len(h.idx) > 0 && !r.out.full() {
		top := h.idx[0]
		if err := r.out.put(h.rows[top]); err != nil {
			return err
		}
		ok, err := h.pull(top)
		if err != nil {
			return err
		}
		if !ok {
			last := len(h.idx) - 1
			h.idx[0] = h.idx[last]
			h.idx = h.idx[:last]
		}
		if len(h.idx) > 0 {
			h.down(0)
		}
	}
	return nil
}

// kheap is the k-way merge's heap.
type kheap struct {
	r    *runner
	idx  []int    // heap of part indexes
	rows []Row    // current row of each part
	keys []keyVal // parsed sort keys, len(OrderBy) per part
}

// pull reads the next row of part i; false at its end.
func (h *kheap) pull(i int) (bool, error) {
	row, err := h.r.next(i)
	if err == io.EOF {
		h.rows[i] = nil
		return false, nil
	}
	if err != nil {
		return false, err
	}
	h.rows[i] = row
	ob := h.r.m.OrderBy
	keys := h.keys[i*len(ob) : (i+1)*len(ob)]
	for j, k := range ob {
		if err := h.r.parseCol(row, k.Column, &keys[j]); err != nil {
			return false, fmt.Errorf("part %d column %d: %w", i, k.Column, err)
		}
	}
	return true, nil
}

// less orders parts a and b by their current rows, ties by part index so
// the merge is deterministic.
func (h *kheap) less(a, b int) bool {
	ob := h.r.m.OrderBy
	n := len(ob)
	for j, k := range ob {
		c := compareKeys(h.r.col[k.Column].kind, &h.keys[a*n+j], &h.keys[b*n+j])
		if c != 0 {
			if k.Desc {
				return c > 0
			}
			return c < 0
		}
	}
	return a < b
}

func (h *kheap) down(i int) {
	n := len(h.idx)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(h.idx[r], h.idx[l]) {
			m = r
		}
		if !h.less(h.idx[m], h.idx[i]) {
			return
		}
		h.idx[i], h.idx[m] = h.idx[m], h.idx[i]
		i = m
	}
}
