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

// BenchmarkMergeGroupBy: GROUP BY a text column (100 groups) with COUNT,
// SUM and AVG over 4 parts of 1,000 rows.
func BenchmarkMergeGroupBy(b *testing.B) {
	rs, bs := benchParts(4, 1000, func(p, i int) Row {
		return Row{[]byte(fmt.Sprintf("user-%d", (i*7+p)%100)), []byte("3"), []byte(fmt.Sprintf("%d.%02d", i, p)), []byte("3")}
	})
	m := &Merge{Visible: 3, GroupBy: []int{0}, Limit: -1,
		Aggregates: []Aggregate{{Column: 1, Func: AggCount}, {Column: 2, Func: AggAvg, CountColumn: 3}}}
	cols := []Column{colText, colCount, colDec2, colCount}
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
