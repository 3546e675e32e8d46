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
	if s.buf == nil {
		s.buf = make([]byte, 0, 64) // an empty value is not NULL
	}
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

// ci appends to each "v|..." line the sort key and pad of v as a PAD SPACE
// case-insensitive collation would give them (the test's stand-in for
// the server's WEIGHT_STRING columns): v upper-cased, trailing spaces
// kept, and a space as the pad of a PAD SPACE collation.
func ci(lines ...string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		v, _, _ := strings.Cut(l, "|")
		if v == "NULL" {
			out[i] = l + "|NULL|NULL"
			continue
		}
		out[i] = l + "|" + strings.ToUpper(v) + "|P "
	}
	return out
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
	// colAvg4 and colAvg6 are AVG columns of scale 4 and 6 (the default
	// div_precision_increment over scales 0 and 2).
	colAvg4   = Column{Type: typeNewDecimal, Decimals: 4, Charset: binaryCollation}
	colAvg6   = Column{Type: typeNewDecimal, Decimals: 6, Charset: binaryCollation}
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
		{"text ci", colText, false, [][]string{ci("a", "c"), ci("B", "d")}, []string{"a", "B", "c", "d"}},
		{"text binary", colBinary, false, [][]string{{"a", "c"}, {"B", "d"}}, []string{"B", "a", "c", "d"}},
		{"text pad space", colText, false, [][]string{ci("ab  ", "abc"), ci("AB")}, []string{"ab  ", "AB", "abc"}},
		{"text pad below space", colText, false, [][]string{ci("ab", "abc"), ci("ab\t")}, []string{"ab\t", "ab", "abc"}},
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
		cols := []Column{tc.col}
		if tc.col == colText {
			cols = append(cols, colBinary, colBinary)
			m.Weights = []Weight{{Column: 0, Weight: 1, Pad: 2}}
		}
		got, err := collect(t, m, cols, rs, unbounded)
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
		{"max text ci", []Column{colText, colBinary, colBinary}, []Aggregate{{Column: 0, Func: AggMax}},
			[][]string{ci("b"), ci("C"), ci("a")}, "C"},
		{"min text ci keeps the first of equals", []Column{colText, colBinary, colBinary}, []Aggregate{{Column: 0, Func: AggMin}},
			[][]string{ci("b"), ci("B "), ci("c")}, "b"},
		{"min empty string is not NULL", []Column{colText, colBinary, colBinary}, []Aggregate{{Column: 0, Func: AggMin}},
			[][]string{ci("b"), ci(""), ci("NULL")}, ""},
		{"max empty string is not NULL", []Column{colBinary}, []Aggregate{{Column: 0, Func: AggMax}},
			[][]string{{""}, {"NULL"}}, ""},
		{"max binary", []Column{colBinary}, []Aggregate{{Column: 0, Func: AggMax}},
			[][]string{{"b"}, {"C"}, {"a"}}, "b"},
		{"min all null", []Column{colInt}, []Aggregate{{Column: 0, Func: AggMin}},
			[][]string{{"NULL"}, {}}, "NULL"},
		{"max decimal", []Column{colDec2}, []Aggregate{{Column: 0, Func: AggMax}},
			[][]string{{"9.99"}, {"10.00"}, {"-20.00"}}, "10.00"},
		{"avg integer scale", []Column{colAvg4, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"1|1"}, {"1|2"}}, "0.6667"},
		{"avg rounds half away", []Column{colAvg4, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"1|16"}, {"0|16"}}, "0.0313"},
		{"avg negative rounds half away", []Column{colAvg4, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"-1|16"}, {"0|16"}}, "-0.0313"},
		{"avg decimal scale", []Column{colAvg6, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"10.00|3"}, {"0.01|1"}}, "2.502500"},
		{"avg past int64", []Column{colAvg4, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"9223372036854775807|1"}, {"9223372036854775807|2"}}, "6148914691236517204.6667"},
		{"avg past int64 negative", []Column{colAvg4, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"-9223372036854775807|1"}, {"-9223372036854775807|2"}}, "-6148914691236517204.6667"},
		{"avg null sums", []Column{colAvg6, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"NULL|0"}, {"NULL|0"}}, "NULL"},
		{"avg empty", []Column{colAvg6, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{}, {}}, "NULL"},
		{"avg truncates at scale 0", []Column{{Type: typeNewDecimal, Charset: binaryCollation}, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"3|1"}, {"4|1"}}, "3"},
		{"avg truncates negative at scale 0", []Column{{Type: typeNewDecimal, Charset: binaryCollation}, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"-3|1"}, {"-4|1"}}, "-3"},
		{"avg truncates at scale 9", []Column{{Type: typeNewDecimal, Decimals: 9, Charset: binaryCollation}, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"1|2"}, {"1|1"}}, "0.666666666"},
		{"avg rounds at scale 10", []Column{{Type: typeNewDecimal, Decimals: 10, Charset: binaryCollation}, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"1|2"}, {"1|1"}}, "0.6666666667"},
		{"avg double", []Column{colDouble, colCount}, []Aggregate{{Column: 0, Func: AggAvg, SumColumn: 0, CountColumn: 1}},
			[][]string{{"1|1"}, {"2|3"}}, "0.75"},
	} {
		var parts [][][]*string
		for _, p := range tc.parts {
			parts = append(parts, rowsOf(p...))
		}
		rs, _ := sources(parts...)
		m := &Merge{Visible: 1, Aggregates: tc.aggs, Limit: noLimit}
		if tc.cols[0] == colText {
			m.Weights = []Weight{{Column: 0, Weight: 1, Pad: 2}}
		}
		got, err := collect(t, m, tc.cols, rs, unbounded)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: got %q, want [%q]", tc.name, got, tc.want)
		}
	}
}

func TestMergeGroupBy(t *testing.T) {
	// Columns: name, COUNT(*), AVG(amount) as its SUM, a non-aggregated
	// column, AVG's hidden COUNT.
	// The sort key and pad of the name follow.
	cols := []Column{colText, colCount, colAvg6, colText, colCount, colBinary, colBinary}
	aggs := []Aggregate{{Column: 1, Func: AggCount}, {Column: 2, Func: AggAvg, SumColumn: 2, CountColumn: 4}}
	wt := []Weight{{Column: 0, Weight: 5, Pad: 6}}
	parts := func() []RowSource {
		rs, _ := sources(
			rowsOf(ci("alice|2|3.00|first|2", "Bob|1|1.00|b1|1", "NULL|1|NULL|n1|0")...),
			rowsOf(ci("ALICE|1|4.00|second|1", "carol|5|10.00|c1|5")...),
			rowsOf(),
			rowsOf(ci("bob |2|5.00|b2|2", "NULL|2|2.00|n2|2")...))
		return rs
	}
	for _, tc := range []struct {
		name string
		m    Merge
		cols []Column
		want []string
	}{
		{"ci groups, sorted by key", Merge{Visible: 4, GroupBy: []int{0}, Aggregates: aggs, Limit: noLimit, Weights: wt}, cols,
			[]string{"NULL|3|1.000000|n1", "alice|3|2.333333|first", "Bob|3|2.000000|b1", "carol|5|2.000000|c1"}},
		{"GROUP BY DESC sorts the groups down", Merge{Visible: 2, GroupBy: []int{0}, GroupDesc: []bool{true}, Aggregates: aggs, Limit: 2, Weights: wt}, cols,
			[]string{"carol|5", "Bob|3"}},
		{"order by count desc, limit", Merge{Visible: 2, GroupBy: []int{0}, Aggregates: aggs,
			OrderBy: []SortKey{{Column: 1, Desc: true}, {Column: 0}}, Limit: 2, Weights: wt}, cols,
			[]string{"carol|5", "NULL|3"}},
		{"offset past the groups", Merge{Visible: 2, GroupBy: []int{0}, Aggregates: aggs, Offset: 4, Limit: noLimit, Weights: wt}, cols, nil},
		{"limit 0", Merge{Visible: 2, GroupBy: []int{0}, Aggregates: aggs, Limit: 0, Weights: wt}, cols, nil},
		{"binary collation groups", Merge{Visible: 2, GroupBy: []int{0}, Aggregates: aggs, Limit: noLimit},
			[]Column{colBinary, colCount, colAvg6, colText, colCount, colBinary, colBinary},
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
	got, err := collect(t, &Merge{Visible: 1, GroupBy: []int{0}, Limit: noLimit}, []Column{colBinary}, rs, unbounded)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty GROUP BY: %q, %v", got, err)
	}
}

func TestMergeDistinct(t *testing.T) {
	unordered := func() []RowSource {
		rs, _ := sources(rowsOf(ci("b|1", "c|4")...), rowsOf(ci("a|2", "a|1", "A|2", "B|3")...))
		return rs
	}
	// Each part sorted by column 0 case-insensitively.
	ordered := func() []RowSource {
		rs, _ := sources(rowsOf(ci("a|2", "b|1", "c|4")...), rowsOf(ci("A|3", "a|1", "B|3")...))
		return rs
	}
	wt := []Weight{{Column: 0, Weight: 2, Pad: 3}}
	text := []Column{colText, colInt, colBinary, colBinary}
	for _, tc := range []struct {
		name  string
		m     Merge
		cols  []Column
		parts func() []RowSource
		want  []string
	}{
		{"first appearance", Merge{Visible: 1, Distinct: true, Limit: noLimit, Weights: wt}, text, unordered,
			[]string{"b", "c", "a"}},
		{"binary collation", Merge{Visible: 1, Distinct: true, Limit: noLimit}, []Column{colBinary, colInt, colBinary, colBinary}, unordered,
			[]string{"b", "c", "a", "A", "B"}},
		{"two visible columns", Merge{Visible: 2, Distinct: true, Limit: noLimit, Weights: wt}, text, unordered,
			[]string{"b|1", "c|4", "a|2", "a|1", "B|3"}},
		{"ordered", Merge{Visible: 1, Distinct: true, OrderBy: []SortKey{{Column: 0}}, Limit: noLimit, Weights: wt}, text, ordered,
			[]string{"a", "b", "c"}},
		{"ordered, offset and limit after distinct", Merge{Visible: 1, Distinct: true, OrderBy: []SortKey{{Column: 0}}, Offset: 1, Limit: 1, Weights: wt},
			text, ordered, []string{"b"}},
		{"ordered by a hidden column", Merge{Visible: 1, Distinct: true, OrderBy: []SortKey{{Column: 1}}, Limit: noLimit, Weights: wt},
			text, func() []RowSource {
				rs, _ := sources(rowsOf(ci("x|1", "y|2", "x|3")...), rowsOf(ci("y|1", "z|5")...))
				return rs
			}, []string{"x", "y", "z"}},
		{"text without its sort key is refused", Merge{Visible: 1, Distinct: true, Limit: noLimit}, text, unordered, nil},
	} {
		got, err := collect(t, &tc.m, tc.cols, tc.parts(), unbounded)
		if tc.want == nil {
			if !errors.Is(err, ErrUnsupported) {
				t.Errorf("%s: err %v, want ErrUnsupported", tc.name, err)
			}
			continue
		}
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
	cols := []Column{colInt, colBinary, colDec2, colInt}
	words := []string{"a", "A", "b", "B ", "ab", "é", "É", "z", ""}
	kinds := []cmpKind{kindInt, kindBytes, kindDecimal, kindInt}
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

// TestPadCompare: sort keys compare as the server's filesort compares
// them, the shorter extended with the pad when the collation pads, and
// equal keys have equal trimmed forms.
func TestPadCompare(t *testing.T) {
	for _, tc := range []struct {
		a, b, pad string
		want      int
	}{
		{"A", "A ", " ", 0},
		{"A", "A  ", " ", 0},
		{"A", "A\t", " ", 1}, // a tab weighs less than the padding
		{"A", "A!", " ", -1}, // '!' weighs more
		{"A", "A ", "", -1},  // NO PAD: the longer is greater
		{"\x0e\x33", "\x0e\x33\x02\x09", "\x02\x09", 0},
		{"\x0e\x33", "\x0e\x33\x02\x08", "\x02\x09", 1},
		{"\x0e\x33", "\x0e\x33\x02\x0a", "\x02\x09", -1},
		{"", "  ", " ", 0},
		{"B", "A ", " ", 1},
	} {
		a, b, pad := []byte(tc.a), []byte(tc.b), []byte(tc.pad)
		if got := padCompare(a, b, pad); got != tc.want {
			t.Errorf("padCompare(%q, %q, pad %q) = %d, want %d", tc.a, tc.b, tc.pad, got, tc.want)
		}
		if got := padCompare(b, a, pad); got != -tc.want {
			t.Errorf("padCompare(%q, %q, pad %q) = %d, want %d", tc.b, tc.a, tc.pad, got, -tc.want)
		}
		ka := appendKey(nil, kindWeight, &keyVal{b: a, frac: pad})
		kb := appendKey(nil, kindWeight, &keyVal{b: b, frac: pad})
		if (string(ka) == string(kb)) != (tc.want == 0) {
			t.Errorf("keys of %q and %q (pad %q): equal %v, want %v", tc.a, tc.b, tc.pad, string(ka) == string(kb), tc.want == 0)
		}
	}
}

// TestPadOf: the Pad column's flag picks the padding; a space that weighs
// more than one unit is a collation of several levels, refused.
func TestPadOf(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		err  error
	}{
		{"P ", " ", nil},
		{"P\x02\x09", "\x02\x09", nil},
		{"N\x00\x20", "", nil},
		{"P\x00\x00\x20", "\x00\x00\x20", nil},
		{"P\x02\x09\x00\x20\x00\x02", "", ErrUnsupported},
		{"N\x02\x09\x00\x20", "", ErrUnsupported},
		{"", "", ErrMergeInput},
		{"X ", "", ErrMergeInput},
	} {
		got, err := padOf([]byte(tc.in))
		if !errors.Is(err, tc.err) || (err == nil && string(got) != tc.want) {
			t.Errorf("padOf(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestMergeWeightsRandom: random words split over parts, grouped and made
// distinct by a stand-in PAD SPACE case-insensitive collation's sort keys
// (upper case, trailing spaces kept, a space as the pad), against a model
// that trims and upper-cases.
func TestMergeWeightsRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x20))
	words := []string{"a", "A", "a ", "A  ", "b", "B ", "ab", "AB ", "", " ", "a\t", "A\t ", "-x", "_x"}
	canon := func(w string) string { return strings.TrimRight(strings.ToUpper(w), " ") }
	cols := []Column{colText, colCount, colBinary, colBinary}
	wt := []Weight{{Column: 0, Weight: 2, Pad: 3}}
	for iter := range 200 {
		k := 1 + rng.IntN(5)
		parts := make([][]string, k)
		for range rng.IntN(50) {
			w := words[rng.IntN(len(words))]
			i := rng.IntN(k)
			parts[i] = append(parts[i], w)
		}
		lines := func(sorted bool) [][][]*string {
			var out [][][]*string
			for _, p := range parts {
				p := slices.Clone(p)
				if sorted {
					slices.SortStableFunc(p, func(a, b string) int {
						return padCompare([]byte(strings.ToUpper(a)), []byte(strings.ToUpper(b)), []byte(" "))
					})
				}
				var ls []string
				for _, w := range p {
					ls = append(ls, w+"|1")
				}
				out = append(out, rowsOf(ci(ls...)...))
			}
			return out
		}
		// The model: classes in first-met order with their counts, and the
		// classes sorted.
		var firstMet []string
		counts := map[string]int{}
		first := map[string]string{}
		for _, p := range parts {
			for _, w := range p {
				c := canon(w)
				if _, ok := counts[c]; !ok {
					firstMet = append(firstMet, c)
					first[c] = w
				}
				counts[c]++
			}
		}
		sorted := slices.Clone(firstMet)
		slices.SortFunc(sorted, func(a, b string) int { return padCompare([]byte(a), []byte(b), []byte(" ")) })

		rs, _ := sources(lines(false)...)
		got, err := collect(t, &Merge{Visible: 2, GroupBy: []int{0}, Aggregates: []Aggregate{{Column: 1, Func: AggCount}}, Limit: noLimit, Weights: wt}, cols, rs, unbounded)
		if err != nil {
			t.Fatalf("iteration %d (seed %d): %v", iter, seed, err)
		}
		var want []string
		for _, c := range sorted {
			want = append(want, first[c]+"|"+strconv.Itoa(counts[c]))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d (seed %d) GROUP BY:\ngot  %q\nwant %q", iter, seed, got, want)
		}

		rs, _ = sources(lines(true)...)
		got, err = collect(t, &Merge{Visible: 1, Distinct: true, OrderBy: []SortKey{{Column: 0}}, Limit: noLimit, Weights: wt}, cols, rs, unbounded)
		if err != nil {
			t.Fatalf("iteration %d (seed %d): %v", iter, seed, err)
		}
		var gotCanon []string
		for _, g := range got {
			gotCanon = append(gotCanon, canon(g))
		}
		if !slices.Equal(gotCanon, sorted) {
			t.Fatalf("iteration %d (seed %d) DISTINCT ORDER BY:\ngot  %q\nwant %q", iter, seed, got, sorted)
		}
	}
}
