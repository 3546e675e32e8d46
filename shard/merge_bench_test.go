package shard

import (
	"fmt"
	"io"
	"testing"
)

// benchSource replays prepared rows without copying; reset rewinds it.
type benchSource struct {
	rows []Row
	pos  int
}

func (s *benchSource) Next() (Row, error) {
	if s.pos >= len(s.rows) {
		return nil, io.EOF
	}
	s.pos++
	return s.rows[s.pos-1], nil
}

func benchParts(nParts, nRows int, row func(part, i int) Row) ([]RowSource, []*benchSource) {
	var rs []RowSource
	var bs []*benchSource
	for p := range nParts {
		s := &benchSource{}
		for i := range nRows {
			s.rows = append(s.rows, row(p, i))
		}
		rs = append(rs, s)
		bs = append(bs, s)
	}
	return rs, bs
}

// BenchmarkMergeOrderByLimit: ORDER BY id LIMIT 100 over 4 parts of 1,000
// sorted rows each.
func BenchmarkMergeOrderByLimit(b *testing.B) {
	rs, bs := benchParts(4, 1000, func(p, i int) Row {
		return Row{[]byte(fmt.Sprint(i*4 + p)), []byte(fmt.Sprintf("name-%d", i)), []byte("12.50")}
	})
	m := &Merge{Visible: 3, OrderBy: []SortKey{{Column: 0}}, Limit: 100}
	cols := []Column{colInt, colText, colDec2}
	n := 0
	emit := func(Row) error { n++; return nil }
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range bs {
			s.pos = 0
		}
		n = 0
		if err := m.Run(cols, rs, 100000, emit); err != nil {
			b.Fatal(err)
		}
		if n != 100 {
			b.Fatalf("%d rows", n)
		}
	}
}

// BenchmarkMergeConcat: 4 parts of 1,000 rows streamed through.
func BenchmarkMergeConcat(b *testing.B) {
	rs, bs := benchParts(4, 1000, func(p, i int) Row {
		return Row{[]byte(fmt.Sprint(i)), []byte("x")}
	})
	m := &Merge{Visible: 2, Limit: -1}
	cols := []Column{colInt, colText}
	emit := func(Row) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range bs {
			s.pos = 0
		}
		if err := m.Run(cols, rs, 100000, emit); err != nil {
			b.Fatal(err)
		}
	}
}

// generalCI is a stand-in for WEIGHT_STRING under utf8mb4_general_ci of
// ASCII text: two bytes per character, letters upper-cased.
func generalCI(v string) []byte {
	w := make([]byte, 0, 2*len(v))
	for _, c := range []byte(v) {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		w = append(w, 0, c)
	}
	return w
}

// BenchmarkMergeGroupBy: GROUP BY a text column (100 groups) by its sort
// key, with COUNT and AVG (from a hidden SUM and COUNT) over 4 parts of
// 1,000 rows.
func BenchmarkMergeGroupBy(b *testing.B) {
	pad := append([]byte("P"), generalCI(" ")...)
	rs, bs := benchParts(4, 1000, func(p, i int) Row {
		name := fmt.Sprintf("user-%d", (i*7+p)%100)
		sum := fmt.Sprintf("%d.%02d", i, p)
		return Row{[]byte(name), []byte("3"), []byte(sum), []byte(sum), []byte("3"), generalCI(name), pad}
	})
	m := &Merge{Visible: 3, GroupBy: []int{0}, Limit: -1,
		Aggregates: []Aggregate{{Column: 1, Func: AggCount}, {Column: 2, Func: AggAvg, SumColumn: 3, CountColumn: 4}},
		Weights:    []Weight{{Column: 0, Weight: 5, Pad: 6}}}
	cols := []Column{colText, colCount, colAvg6, colDec2, colCount, colBinary, colBinary}
	n := 0
	emit := func(Row) error { n++; return nil }
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range bs {
			s.pos = 0
		}
		n = 0
		if err := m.Run(cols, rs, 100000, emit); err != nil {
			b.Fatal(err)
		}
		if n != 100 {
			b.Fatalf("%d groups", n)
		}
	}
}

// BenchmarkMergeOrderByText: ORDER BY a text column LIMIT 100 over 4 parts
// of 1,000 sorted rows each, compared by sort key and pad.
func BenchmarkMergeOrderByText(b *testing.B) {
	pad := append([]byte("P"), generalCI(" ")...)
	rs, bs := benchParts(4, 1000, func(p, i int) Row {
		name := fmt.Sprintf("name-%06d", i*4+p)
		return Row{[]byte(name), []byte(fmt.Sprint(i)), generalCI(name), pad}
	})
	m := &Merge{Visible: 2, OrderBy: []SortKey{{Column: 0}}, Limit: 100, Weights: []Weight{{Column: 0, Weight: 2, Pad: 3}}}
	cols := []Column{colText, colInt, colBinary, colBinary}
	n := 0
	emit := func(Row) error { n++; return nil }
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range bs {
			s.pos = 0
		}
		n = 0
		if err := m.Run(cols, rs, 100000, emit); err != nil {
			b.Fatal(err)
		}
		if n != 100 {
			b.Fatalf("%d rows", n)
		}
	}
}
