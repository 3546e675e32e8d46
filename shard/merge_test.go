package shard

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reuseSource serves rows from a slice the way a protocol reader does: the
// Row and the bytes behind it are overwritten by the next call, so a merge
// that keeps a row it does not own sees it change.
type reuseSource struct {
	rows  [][]*string
	pos   int
	reads int
	row   Row
	buf   []byte
	err   error // returned after the rows instead of io.EOF
}

func (s *reuseSource) Next() (Row, error) {
	if s.pos >= len(s.rows) {
		if s.err != nil {
			return nil, s.err
		}
		return nil, io.EOF
	}
	s.reads++
	// Scribble over the previous row's bytes first.
	for i := range s.buf {
		s.buf[i] = '#'
	}
	src := s.rows[s.pos]
	s.pos++
	s.buf = s.buf[:0]
	for _, v := range src {
		if v != nil {
			s.buf = append(s.buf, *v...)
		}
	}
	s.row = s.row[:0]
	off := 0
	for _, v := range src {
		if v == nil {
			s.row = append(s.row, nil)
			continue
		}
		s.row = append(s.row, s.buf[off:off+len(*v):off+len(*v)])
		off += len(*v)
	}
	return s.row, nil
}

// rowsOf turns "a|b|c" lines into rows; the cell "NULL" is SQL NULL.
func rowsOf(lines ...string) [][]*string {
	var out [][]*string
	for _, l := range lines {
		var r []*string
		for _, c := range strings.Split(l, "|") {
			if c == "NULL" {
				r = append(r, nil)
				continue
			}
			c := c
			r = append(r, &c)
		}
		out = append(out, r)
	}
	return out
}

func sources(parts ...[][]*string) ([]RowSource, []*reuseSource) {
	var rs []RowSource
	var ss []*reuseSource
	for _, p := range parts {
		s := &reuseSource{rows: p}
		rs = append(rs, s)
		ss = append(ss, s)
	}
	return rs, ss
}

// collect runs m and returns the emitted rows as "a|b" lines.
func collect(t *testing.T, m *Merge, cols []Column, parts []RowSource, maxRows int) ([]string, error) {
	t.Helper()
	var out []string
	err := m.Run(cols, parts, maxRows, func(r Row) error {
		if len(r) != m.Visible {
			t.Fatalf("emitted %d columns, want %d", len(r), m.Visible)
		}
		cells := make([]string, len(r))
		for i, v := range r {
			if v == nil {
				cells[i] = "NULL"
			} else {
				cells[i] = string(v)
			}
		}
		out = append(out, strings.Join(cells, "|"))
		return nil
	})
	return out, err
}

var (
	colInt    = Column{Type: typeLongLong, Charset: binaryCollation}
	colUint   = Column{Type: typeLongLong, Flags: flagUnsigned, Charset: binaryCollation}
	colDec2   = Column{Type: typeNewDecimal, Decimals: 2, Charset: binaryCollation}
	colDec0   = Column{Type: typeNewDecimal, Charset: binaryCollation}
	colDouble = Column{Type: typeDouble, Decimals: 31, Charset: binaryCollation}
	colText   = Column{Type: 0xfd, Charset: 45}
	colBinary = Column{Type: 0xfd, Charset: binaryCollation}
	colTime   = Column{Type: typeTime, Charset: binaryCollation}
	colDate   = Column{Type: typeDatetime, Charset: binaryCollation}
	colCount  = Column{Type: typeLongLong, Charset: binaryCollation}
	noLimit   = int64(-1)
	unbounded = 0
)

func TestMergeConcat(t *testing.T) {
	p := func() []RowSource {
		rs, _ := sources(rowsOf("1|a|h", "2|b|h"), nil, rowsOf("3|c|h"), rowsOf("4|d|h", "5|e|h"))
		return rs
	}
	cols := []Column{colInt, colText, colText}
	for _, tc := range []struct {
		name          string
		offset, limit int64
		want          []string
	}{
		{"all", 0, noLimit, []string{"1|a", "2|b", "3|c", "4|d", "5|e"}},
		{"limit across parts", 0, 3, []string{"1|a", "2|b", "3|c"}},
		{"offset and limit", 1, 3, []string{"2|b", "3|c", "4|d"}},
		{"offset past the end", 9, noLimit, nil},
		{"offset to the last", 4, 10, []string{"5|e"}},
		{"limit 0", 0, 0, nil},
		{"limit past the end", 2, 100, []string{"3|c", "4|d", "5|e"}},
	} {
		m := &Merge{Visible: 2, Offset: tc.offset, Limit: tc.limit}
		got, err := collect(t, m, cols, p(), unbounded)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestMergeStopsReading: once Limit rows are out nothing more is read, and
// LIMIT 0 reads nothing.
func TestMergeStopsReading(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m     Merge
		reads []int
	}{
		{"concat", Merge{Visible: 1, Limit: 2}, []int{2, 0}},
		{"concat limit 0", Merge{Visible: 1, Limit: 0}, []int{0, 0}},
		// The k-way merge reads one row of each part ahead.
		{"k-way", Merge{Visible: 1, Limit: 2, OrderBy: []SortKey{{Column: 0}}}, []int{3, 1}},
		{"k-way limit 0", Merge{Visible: 1, Limit: 0, OrderBy: []SortKey{{Column: 0}}}, []int{0, 0}},
	} {
		rs, ss := sources(rowsOf("1", "2", "3", "4"), rowsOf("5", "6"))
		if _, err := collect(t, &tc.m, []Column{colInt}, rs, unbounded); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i, s := range ss {
			if s.reads != tc.reads[i] {
				t.Errorf("%s: part %d read %d rows, want %d", tc.name, i, s.reads, tc.reads[i])
			}
		}
	}
}

func TestMergeOrderBy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		col   Column
		desc  bool
		parts [][]string
		want  []string
	}{
		{"int asc", colInt, false, [][]string{{"-5", "3", "20"}, {"-10", "4"}, {}}, []string{"-10", "-5", "3", "4", "20"}},
		{"int desc", colInt, true, [][]string{{"20", "3", "-5"}, {"4", "-10"}}, []string{"20", "4", "3", "-5", "-10"}},
		{"null first asc", colInt, false, [][]string{{"NULL", "1"}, {"NULL", "0"}}, []string{"NULL", "NULL", "0", "1"}},
		{"null last desc", colInt, true, [][]string{{"1", "NULL"}, {"2", "NULL"}}, []string{"2", "1", "NULL", "NULL"}},
		{"unsigned", colUint, false, [][]string{{"1", "18446744073709551615"}, {"9223372036854775808"}},
			[]string{"1", "9223372036854775808", "18446744073709551615"}},
		{"signed extremes", colInt, false, [][]string{{"-9223372036854775808", "9223372036854775807"}, {"-1"}},
			[]string{"-9223372036854775808", "-1", "9223372036854775807"}},
		{"decimal", colDec2, false, [][]string{{"-1.50", "9.99", "10.10"}, {"-1.25", "0.00", "99999999999999999999.01"}},
			[]string{"-1.50", "-1.25", "0.00", "9.99", "10.10", "99999999999999999999.01"}},
		{"decimal exact beyond float", colDec2, true, [][]string{{"12345678901234567.02"}, {"12345678901234567.01"}},
			[]string{"12345678901234567.02", "12345678901234567.01"}},
		{"double", colDouble, false, [][]string{{"1e-7", "100"}, {"-2.5", "1e15"}}, []string{"-2.5", "1e-7", "100", "1e15"}},
		{"text ci", colText, false, [][]string{{"a", "c"}, {"B", "d"}}, []string{"a", "B", "c", "d"}},
		{"text binary", colBinary, false, [][]string{{"a", "c"}, {"B", "d"}}, []string{"B", "a", "c", "d"}},
		{"text pad space", colText, false, [][]string{{"ab  ", "abc"}, {"AB"}}, []string{"ab  ", "AB", "abc"}},
		{"time sign", colTime, false, [][]string{{"-100:00:00", "-01:00:00", "05:00:00"}, {"-02:00:00", "100:00:00"}},
			[]string{"-100:00:00", "-02:00:00", "-01:00:00", "05:00:00", "100:00:00"}},
		{"datetime", colDate, false, [][]string{{"2023-12-31 23:59:59", "2024-01-01 00:00:00"}, {"2024-01-01 00:00:01"}},
			[]string{"2023-12-31 23:59:59", "2024-01-01 00:00:00", "2024-01-01 00:00:01"}},
	} {
		var parts [][][]*string
		for _, p := range tc.parts {
			parts = append(parts, rowsOf(p...))
		}
		rs, _ := sources(parts...)
		m := &Merge{Visible: 1, OrderBy: []SortKey{{Column: 0, Desc: tc.desc}}, Limit: noLimit}
		got, err := collect(t, m, []Column{tc.col}, rs, unbounded)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestMergeOrderByHiddenAndLimit: a hidden sort column, two keys, offset
// and limit over the merged stream.
func TestMergeOrderByHiddenAndLimit(t *testing.T) {
	rs, _ := sources(
		rowsOf("x|1|30", "y|1|10", "z|2|50"),
		rowsOf("p|1|20", "q|3|0"),
		rowsOf("r|2|40"))
	m := &Merge{Visible: 1, OrderBy: []SortKey{{Column: 1}, {Column: 2, Desc: true}}, Offset: 1, Limit: 3}
	got, err := collect(t, m, []Column{colText, colInt, colInt}, rs, unbounded)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"p", "y", "z"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestMergeAggregates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cols  []Column
		aggs  []Aggregate
		parts [][]string
		want  string
	}{
		{"count", []Column{colCount}, []Aggregate{{Column: 0, Func: AggCount}},
			[][]string{{"3"}, {"0"}, {"4"}}, "7"},
		{"count of no parts' rows", []Column{colCount}, []Aggregate{{Column: 0, Func: AggCount}},
			[][]string{{}, {}}, "0"},
		{"sum decimal exact", []Column{colDec2}, []Aggregate{{Column: 0, Func: AggSum}},
			[][]string{{"0.10"}, {"0.20"}}, "0.30"},
		{"sum decimal mixed scales", []Column{colDec2}, []Aggregate{{Column: 0, Func: AggSum}},
			[][]string{{"0.1"}, {"0.2"}, {"-1.05"}}, "-0.75"},
		{"sum of integers", []Column{colDec0}, []Aggregate{{Column: 0, Func: AggSum}},
			[][]string{{"9223372036854775807"}, {"9223372036854775807"}, {"2"}}, "18446744073709551616"},
		{"sum big decimals", []Column{colDec2}, []Aggregate{{Column: 0, Func: AggSum}},
			[][]string{{"99999999999999999999.99"}, {"0.01"}, {"-0.5"}}, "99999999999999999999.50"},
		{"sum null partials", []Column{colDec2}, []Aggregate{{Column: 0, Func: AggSum}},
			[][]string{{"NULL"}, {"1.50"}, {"NULL"}}, "1.50"},
		{"sum all null", []Column{colDec2}, []Aggregate{{Column: 0, Func: AggSum}},
			[][]string{{"NULL"}, {"NULL"}}, "NULL"},
		{"sum empty", []Column{colDec2}, []Aggregate{{Column: 0, Func: AggSum}},
			[][]string{{}, {}}, "NULL"},
		{"sum double", []Column{colDouble}, []Aggregate{{Column: 0, Func: AggSum}},
			[][]string{{"1.5"}, {"2.25"}}, "3.75"},
		{"min int numeric", []Column{colInt}, []Aggregate{{Column: 0, Func: AggMin}},
			[][]string{{"10"}, {"9"}, {"NULL"}, {"-3"}}, "-3"},
		{"max int numeric", []Column{colInt}, []Aggregate{{Column: 0, Func: AggMax}},
			[][]string{{"9"}, {"10"}, {"NULL"}}, "10"},
		{"max text ci", []Column{colText}, []Aggregate{{Column: 0, Func: AggMax}},
			[][]string{{"b"}, {"C"}, {"a"}}, "C"},
		{"max binary", []Column{colBinary}, []Aggregate{{Column: 0, Func: AggMax}},
			[][]string{{"b"}, {"C"}, {"a"}}, "b"},
		{"min all null", []Column{colInt}, []Aggregate{{Column: 0, Func: AggMin}},
			[][]string{{"NULL"}, {}}, "NULL"},
		{"max decimal", []Column{colDec2}, []Aggregate{{Column: 0, Func: AggMax}},
			[][]string{{"9.99"}, {"10.00"}, {"-20.00"}}, "10.00"},
		{"avg integer scale", []Column{colDec0, colCount}, []Aggregate{{Column: 0, Func: AggAvg, CountColumn: 1}},
			[][]string{{"1|1"}, {"1|2"}}, "0.6667"},
		{"avg rounds half away", []Column{colDec0, colCount}, []Aggregate{{Column: 0, Func: AggAvg, CountColumn: 1}},
			[][]string{{"1|16"}, {"0|16"}}, "0.0313"},
		{"avg negative rounds half away", []Column{colDec0, colCount}, []Aggregate{{Column: 0, Func: AggAvg, CountColumn: 1}},
			[][]string{{"-1|16"}, {"0|16"}}, "-0.0313"},
		{"avg decimal scale", []Column{colDec2, colCount}, []Aggregate{{Column: 0, Func: AggAvg, CountColumn: 1}},
			[][]string{{"10.00|3"}, {"0.01|1"}}, "2.502500"},
		{"avg past int64", []Column{colDec0, colCount}, []Aggregate{{Column: 0, Func: AggAvg, CountColumn: 1}},
			[][]string{{"9223372036854775807|1"}, {"9223372036854775807|2"}}, "6148914691236517204.6667"},
		{"avg past int64 negative", []Column{colDec0, colCount}, []Aggregate{{Column: 0, Func: AggAvg, CountColumn: 1}},
			[][]string{{"-9223372036854775807|1"}, {"-9223372036854775807|2"}}, "-6148914691236517204.6667"},
		{"avg null sums", []Column{colDec2, colCount}, []Aggregate{{Column: 0, Func: AggAvg, CountColumn: 1}},
			[][]string{{"NULL|0"}, {"NULL|0"}}, "NULL"},
		{"avg empty", []Column{colDec2, colCount}, []Aggregate{{Column: 0, Func: AggAvg, CountColumn: 1}},
			[][]string{{}, {}}, "NULL"},
		{"avg double", []Column{colDouble, colCount}, []Aggregate{{Column: 0, Func: AggAvg, CountColumn: 1}},
			[][]string{{"1|1"}, {"2|3"}}, "0.75"},
	} {
		var parts [][][]*string
		for _, p := range tc.parts {
			parts = append(parts, rowsOf(p...))
		}
		rs, _ := sources(parts...)
		m := &Merge{Visible: 1, Aggregates: tc.aggs, Limit: noLimit}
		got, err := collect(t, m, tc.cols, rs, unbounded)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: got %q, want [%q]", tc.name, got, tc.want)
		}
	}
}

func TestAvgColumn(t *testing.T) {
	for _, tc := range []struct {
		sum  Column
		want byte
	}{
		{colDec0, 4},
		{colDec2, 6},
		{Column{Type: typeNewDecimal, Decimals: 28}, 30},
		{colDouble, 31},
		{Column{Type: typeDouble, Decimals: 2}, 6},
	} {
		got := AvgColumn(tc.sum)
		if got.Decimals != tc.want || got.Type != tc.sum.Type {
			t.Errorf("AvgColumn(%+v) = %+v, want decimals %d", tc.sum, got, tc.want)
		}
	}
}

func TestMergeGroupBy(t *testing.T) {
	// Columns: name, COUNT(*), AVG(amount) as its SUM, a non-aggregated
	// column, AVG's hidden COUNT.
	cols := []Column{colText, colCount, colDec2, colText, colCount}
	aggs := []Aggregate{{Column: 1, Func: AggCount}, {Column: 2, Func: AggAvg, CountColumn: 4}}
	parts := func() []RowSource {
		rs, _ := sources(
			rowsOf("alice|2|3.00|first|2", "Bob|1|1.00|b1|1", "NULL|1|NULL|n1|0"),
			rowsOf("ALICE|1|4.00|second|1", "carol|5|10.00|c1|5"),
			rowsOf(),
			rowsOf("bob |2|5.00|b2|2", "NULL|2|2.00|n2|2"))
		return rs
	}
	for _, tc := range []struct {
		name string
		m    Merge
		cols []Column
		want []string
	}{
		{"ci groups, sorted by key", Merge{Visible: 4, GroupBy: []int{0}, Aggregates: aggs, Limit: noLimit}, cols,
			[]string{"NULL|3|1.000000|n1", "alice|3|2.333333|first", "Bob|3|2.000000|b1", "carol|5|2.000000|c1"}},
		{"order by count desc, limit", Merge{Visible: 2, GroupBy: []int{0}, Aggregates: aggs,
			OrderBy: []SortKey{{Column: 1, Desc: true}, {Column: 0}}, Limit: 2}, cols,
			[]string{"carol|5", "NULL|3"}},
		{"offset past the groups", Merge{Visible: 2, GroupBy: []int{0}, Aggregates: aggs, Offset: 4, Limit: noLimit}, cols, nil},
		{"limit 0", Merge{Visible: 2, GroupBy: []int{0}, Aggregates: aggs, Limit: 0}, cols, nil},
		{"binary collation groups", Merge{Visible: 2, GroupBy: []int{0}, Aggregates: aggs, Limit: noLimit},
			[]Column{colBinary, colCount, colDec2, colText, colCount},
			[]string{"NULL|3", "ALICE|1", "Bob|1", "alice|2", "bob |2", "carol|5"}},
	} {
		got, err := collect(t, &tc.m, tc.cols, parts(), unbounded)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.name, got, tc.want)
		}
	}
	// GROUP BY without aggregates over no rows: no row at all.
	rs, _ := sources(nil, nil)
	got, err := collect(t, &Merge{Visible: 1, GroupBy: []int{0}, Limit: noLimit}, []Column{colText}, rs, unbounded)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty GROUP BY: %q, %v", got, err)
	}
}

func TestMergeDistinct(t *testing.T) {
	unordered := func() []RowSource {
		rs, _ := sources(rowsOf("b|1", "c|4"), rowsOf("a|2", "a|1", "A|2", "B|3"))
		return rs
	}
	// Each part sorted by column 0 case-insensitively.
	ordered := func() []RowSource {
		rs, _ := sources(rowsOf("a|2", "b|1", "c|4"), rowsOf("A|3", "a|1", "B|3"))
		return rs
	}
	for _, tc := range []struct {
		name  string
		m     Merge
		cols  []Column
		parts func() []RowSource
		want  []string
	}{
		{"first appearance", Merge{Visible: 1, Distinct: true, Limit: noLimit}, []Column{colText, colInt}, unordered,
			[]string{"b", "c", "a"}},
		{"binary collation", Merge{Visible: 1, Distinct: true, Limit: noLimit}, []Column{colBinary, colInt}, unordered,
			[]string{"b", "c", "a", "A", "B"}},
		{"two visible columns", Merge{Visible: 2, Distinct: true, Limit: noLimit}, []Column{colText, colInt}, unordered,
			[]string{"b|1", "c|4", "a|2", "a|1", "B|3"}},
		{"ordered", Merge{Visible: 1, Distinct: true, OrderBy: []SortKey{{Column: 0}}, Limit: noLimit}, []Column{colText, colInt}, ordered,
			[]string{"a", "b", "c"}},
		{"ordered, offset and limit after distinct", Merge{Visible: 1, Distinct: true, OrderBy: []SortKey{{Column: 0}}, Offset: 1, Limit: 1},
			[]Column{colText, colInt}, ordered, []string{"b"}},
		{"ordered by a hidden column", Merge{Visible: 1, Distinct: true, OrderBy: []SortKey{{Column: 1}}, Limit: noLimit},
			[]Column{colText, colInt}, func() []RowSource {
				rs, _ := sources(rowsOf("x|1", "y|2", "x|3"), rowsOf("y|1", "z|5"))
				return rs
			}, []string{"x", "y", "z"}},
	} {
		got, err := collect(t, &tc.m, tc.cols, tc.parts(), unbounded)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestMergeTooManyRows(t *testing.T) {
	for _, tc := range []struct {
		name    string
		m       Merge
		maxRows int
		fails   bool
	}{
		{"groups within", Merge{Visible: 1, GroupBy: []int{0}, Limit: noLimit}, 4, false},
		{"groups past", Merge{Visible: 1, GroupBy: []int{0}, Limit: noLimit}, 3, true},
		{"distinct within", Merge{Visible: 1, Distinct: true, Limit: noLimit}, 4, false},
		{"distinct past", Merge{Visible: 1, Distinct: true, Limit: noLimit}, 3, true},
		{"k-way holds nothing", Merge{Visible: 1, OrderBy: []SortKey{{Column: 0}}, Limit: noLimit}, 1, false},
		{"concat holds nothing", Merge{Visible: 1, Limit: noLimit}, 1, false},
	} {
		rs, _ := sources(rowsOf("1", "2", "2"), rowsOf("3", "4", "4"))
		_, err := collect(t, &tc.m, []Column{colInt}, rs, tc.maxRows)
		if tc.fails {
			if !errors.Is(err, ErrTooManyRows) || !strings.Contains(err.Error(), strconv.Itoa(tc.maxRows)) {
				t.Errorf("%s: err %v, want ErrTooManyRows naming %d", tc.name, err, tc.maxRows)
			}
		} else if err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestMergeErrors(t *testing.T) {
	boom := errors.New("backend went away")
	for _, tc := range []struct {
		name  string
		m     Merge
		cols  []Column
		parts [][][]*string
		perr  error
		want  error
	}{
		{"visible 0", Merge{Visible: 0}, []Column{colInt}, nil, nil, ErrMergeSpec},
		{"visible past cols", Merge{Visible: 2}, []Column{colInt}, nil, nil, ErrMergeSpec},
		{"order column", Merge{Visible: 1, OrderBy: []SortKey{{Column: 1}}}, []Column{colInt}, nil, nil, ErrMergeSpec},
		{"group column", Merge{Visible: 1, GroupBy: []int{-1}}, []Column{colInt}, nil, nil, ErrMergeSpec},
		{"avg count column", Merge{Visible: 1, Aggregates: []Aggregate{{Column: 0, Func: AggAvg, CountColumn: 3}}}, []Column{colInt}, nil, nil, ErrMergeSpec},
		{"row width", Merge{Visible: 1, Limit: noLimit}, []Column{colInt}, [][][]*string{rowsOf("1|2")}, nil, ErrMergeInput},
		{"sort value", Merge{Visible: 1, OrderBy: []SortKey{{Column: 0}}, Limit: noLimit}, []Column{colInt}, [][][]*string{rowsOf("x")}, nil, ErrMergeInput},
		{"count value", Merge{Visible: 1, Aggregates: []Aggregate{{Column: 0, Func: AggCount}}, Limit: noLimit}, []Column{colCount}, [][][]*string{rowsOf("-1")}, nil, ErrMergeInput},
		{"sum value", Merge{Visible: 1, Aggregates: []Aggregate{{Column: 0, Func: AggSum}}, Limit: noLimit}, []Column{colDec2}, [][][]*string{rowsOf("1e5")}, nil, ErrMergeInput},
		{"group value", Merge{Visible: 1, GroupBy: []int{0}, Limit: noLimit}, []Column{colDouble}, [][][]*string{rowsOf("abc")}, nil, ErrMergeInput},
		{"part error", Merge{Visible: 1, OrderBy: []SortKey{{Column: 0}}, Limit: noLimit}, []Column{colInt}, [][][]*string{rowsOf("1")}, boom, boom},
	} {
		rs, ss := sources(tc.parts...)
		for _, s := range ss {
			s.err = tc.perr
		}
		_, err := collect(t, &tc.m, tc.cols, rs, unbounded)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestMergeOrderByRandom: random rows split over k parts, each part
// sorted, merged with ORDER BY + OFFSET/LIMIT equal sorting the union.
func TestMergeOrderByRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	cols := []Column{colInt, colText, colDec2, colInt}
	words := []string{"a", "A", "b", "B ", "ab", "é", "É", "z"}
	kinds := []cmpKind{kindInt, kindText, kindDecimal, kindInt}
	for iter := range 200 {
		k := 1 + rng.IntN(6)
		n := rng.IntN(60)
		var all [][]*string
		for i := range n {
			cell := func(s string) *string {
				if rng.IntN(10) == 0 {
					return nil
				}
				return &s
			}
			id := strconv.Itoa(i)
			all = append(all, []*string{
				cell(strconv.Itoa(rng.IntN(7) - 3)),
				cell(words[rng.IntN(len(words))]),
				cell(fmt.Sprintf("%d.%02d", rng.IntN(5)-2, rng.IntN(3)*50)),
				&id, // unique: makes the expected order total
			})
		}
		keys := []SortKey{{Column: rng.IntN(3), Desc: rng.IntN(2) == 0}, {Column: rng.IntN(3), Desc: rng.IntN(2) == 0}, {Column: 3}}
		less := func(a, b []*string) int {
			for _, sk := range keys {
				var x, y keyVal
				if err := parseKey(kinds[sk.Column], bytesOf(a[sk.Column]), &x); err != nil {
					t.Fatal(err)
				}
				if err := parseKey(kinds[sk.Column], bytesOf(b[sk.Column]), &y); err != nil {
					t.Fatal(err)
				}
				if c := compareKeys(kinds[sk.Column], &x, &y); c != 0 {
					if sk.Desc {
						return -c
					}
					return c
				}
			}
			return 0
		}
		parts := make([][][]*string, k)
		for _, r := range all {
			i := rng.IntN(k)
			parts[i] = append(parts[i], r)
		}
		for _, p := range parts {
			slices.SortFunc(p, less)
		}
		want := slices.Clone(all)
		slices.SortFunc(want, less)
		offset, limit := int64(rng.IntN(10)), int64(rng.IntN(40)-5)
		var wantLines []string
		for i, r := range want {
			if int64(i) < offset || (limit >= 0 && int64(i) >= offset+limit) {
				continue
			}
			wantLines = append(wantLines, lineOf(r))
		}
		rs, _ := sources(parts...)
		m := &Merge{Visible: 4, OrderBy: keys, Offset: offset, Limit: limit}
		got, err := collect(t, m, cols, rs, 1)
		if err != nil {
			t.Fatalf("iteration %d (seed %d): %v", iter, seed, err)
		}
		if !slices.Equal(got, wantLines) {
			t.Fatalf("iteration %d (seed %d), keys %+v offset %d limit %d:\ngot  %q\nwant %q", iter, seed, keys, offset, limit, got, wantLines)
		}
	}
}

func bytesOf(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

func lineOf(r []*string) string {
	cells := make([]string, len(r))
	for i, v := range r {
		if v == nil {
			cells[i] = "NULL"
		} else {
			cells[i] = *v
		}
	}
	return strings.Join(cells, "|")
}

func TestFoldCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"abc", "ABC", 0},
		{"abc", "abc   ", 0},
		{"abc", "abd", -1},
		{"a", "_", -1},            // upper-case weights: 'A' < '_'
		{"straße", "STRASSE", -1}, // ß weighs as one s, as in utf8mb4_general_ci
		{"straße", "strase", 0},
		{"σ", "Σ", 0},
		{"ς", "Σ", 0},
		{"k", "\u212a", 0}, // Kelvin sign
		{"é", "É", 0},
		{"é", "e", 0}, // accents do not matter, as in utf8mb4_general_ci
		{"Ñandú", "nandu", 0},
		{"café", "cafe", 0},
		{"café", "cafF", -1},
		{"\xff", "\xfe", 1},
		{"\xff", "\xff", 0},
		{"a\x00", "a", 1},
	} {
		if got := foldCompare([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("foldCompare(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		ka, _ := appendKey(nil, kindText, []byte(tc.a))
		kb, _ := appendKey(nil, kindText, []byte(tc.b))
		if (string(ka) == string(kb)) != (tc.want == 0) {
			t.Errorf("keys of %q and %q: equal %v, want %v", tc.a, tc.b, string(ka) == string(kb), tc.want == 0)
		}
	}
}

// TestCollationKind: _bin collations compare bytes (case-sensitive) and
// ignore trailing spaces unless NO PAD; NO PAD _ci collations fold case
// and count trailing spaces; the common _ci ones fold case and pad.
func TestCollationKind(t *testing.T) {
	for _, tc := range []struct {
		name       string
		collation  uint16
		flags      uint16
		a, b       string
		wantCmp    int
		wantEqKeys bool
	}{
		{"utf8mb4_general_ci folds case", 45, 0, "abc", "ABC", 0, true},
		{"utf8mb4_general_ci pads", 45, 0, "abc", "abc  ", 0, true},
		{"utf8mb4_bin keeps case", 46, 0, "abc", "ABC", 1, false},
		{"utf8mb4_bin orders by code point", 46, 0, "B", "a", -1, false},
		{"utf8mb4_bin pads", 46, 0, "abc", "abc  ", 0, true},
		{"utf8mb3_bin keeps case", 83, 0, "a", "A", 1, false},
		{"latin1_bin keeps case", 47, 0, "a", "A", 1, false},
		{"utf8mb4_nopad_bin counts spaces", 1070, 0, "abc", "abc ", -1, false},
		{"utf8mb4_general_nopad_ci folds case", 1069, 0, "abc", "ABC", 0, true},
		{"utf8mb4_general_nopad_ci counts spaces", 1069, 0, "abc", "abc ", -1, false},
		{"binary counts spaces", 63, 0, "abc", "abc ", -1, false},
		{"utf8mb4_0900_bin keeps case", 309, 0, "a", "A", 1, false},
		{"utf8mb4_unicode_ci folds case", 224, 0, "a", "A", 0, true},
		// MariaDB reports a utf8mb4_bin column in the connection's
		// collation with the BINARY flag.
		{"BINARY flag in utf8mb4_general_ci keeps case", 45, flagBinary, "a", "A", 1, false},
		{"BINARY flag in utf8mb4_general_ci pads", 45, flagBinary, "a", "a ", 0, true},
	} {
		k := columnKind(Column{Type: 0xfd, Charset: tc.collation, Flags: tc.flags})
		var ka, kb keyVal
		if err := parseKey(k, []byte(tc.a), &ka); err != nil {
			t.Fatal(err)
		}
		if err := parseKey(k, []byte(tc.b), &kb); err != nil {
			t.Fatal(err)
		}
		if got := compareKeys(k, &ka, &kb); got != tc.wantCmp {
			t.Errorf("%s: compare(%q, %q) = %d, want %d", tc.name, tc.a, tc.b, got, tc.wantCmp)
		}
		ea, _ := appendKey(nil, k, []byte(tc.a))
		eb, _ := appendKey(nil, k, []byte(tc.b))
		if (string(ea) == string(eb)) != tc.wantEqKeys {
			t.Errorf("%s: keys of %q and %q equal %v, want %v", tc.name, tc.a, tc.b, string(ea) == string(eb), tc.wantEqKeys)
		}
	}
}
