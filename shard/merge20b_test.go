package shard

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// colFloat is a FLOAT result column as MariaDB describes it.
var colFloat = Column{Type: typeFloat, Decimals: 39, Charset: binaryCollation}

// TestMergeFloatExact is finding 1.7 of the hostile review of issue 20:
// the server prints a FLOAT with 6 significant digits, so 1.0000001,
// 1.0000002 and 1 all arrive as "1"; the merge must compare them by their
// exact value, the hidden (x)+0 beside the column.
func TestMergeFloatExact(t *testing.T) {
	// Columns: id, x (FLOAT), then x's hidden WEIGHT_STRING, pad and x+0.
	cols := []Column{colInt, colFloat, colBinary, colBinary, colDouble}
	w := []Weight{{Column: 1, Weight: 2, Pad: 3, Position: 4}}
	part1 := rowsOf("1|1|NULL|NULL|1.000000238418579", "4|2|NULL|NULL|2")

	t.Run("ORDER BY x LIMIT 1", func(t *testing.T) {
		// Each part sorted by its server: part1 1.0000002, 2; part2 1, 1.0000001.
		m := &Merge{Visible: 2, Hidden: 3, OrderBy: []SortKey{{Column: 1}}, Limit: 2, Weights: w}
		ps, _ := sources(rowsOf("5|NULL|NULL|NULL|NULL"), part1, rowsOf("3|1|NULL|NULL|1", "2|1|NULL|NULL|1.0000001192092896"))
		got, err := collect(t, m, cols, ps, 0)
		if want := []string{"5|NULL", "3|1"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("got %v, %v; want %v", got, err, want)
		}
	})
	t.Run("ORDER BY x DESC, id", func(t *testing.T) {
		m := &Merge{Visible: 2, Hidden: 3, OrderBy: []SortKey{{Column: 1, Desc: true}, {Column: 0}}, Limit: -1, Weights: w}
		ps, _ := sources(rowsOf("4|2|NULL|NULL|2", "1|1|NULL|NULL|1.000000238418579"),
			rowsOf("2|1|NULL|NULL|1.0000001192092896", "3|1|NULL|NULL|1", "5|NULL|NULL|NULL|NULL"))
		got, err := collect(t, m, cols, ps, 0)
		if want := []string{"4|2", "1|1", "2|1", "3|1", "5|NULL"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("got %v, %v; want %v", got, err, want)
		}
	})
	t.Run("GROUP BY x", func(t *testing.T) {
		// SELECT x, COUNT(*) ... GROUP BY x: column 0 is x here.
		gcols := []Column{colFloat, colCount, colBinary, colBinary, colDouble}
		gw := []Weight{{Column: 0, Weight: 2, Pad: 3, Position: 4}}
		m := &Merge{Visible: 2, Hidden: 3, GroupBy: []int{0}, GroupDesc: []bool{false}, Aggregates: []Aggregate{{Column: 1, Func: AggCount}}, Limit: -1, Weights: gw}
		ps, _ := sources(rowsOf("1|1|NULL|NULL|1.000000238418579", "2|1|NULL|NULL|2"),
			rowsOf("1|1|NULL|NULL|1", "1|2|NULL|NULL|1.0000001192092896", "2|1|NULL|NULL|2"))
		got, err := collect(t, m, gcols, ps, 0)
		if want := []string{"1|1", "1|2", "1|1", "2|2"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("got %v, %v; want %v", got, err, want)
		}
	})
	t.Run("DISTINCT x", func(t *testing.T) {
		dcols := []Column{colFloat, colBinary, colBinary, colDouble}
		dw := []Weight{{Column: 0, Weight: 1, Pad: 2, Position: 3}}
		m := &Merge{Visible: 1, Hidden: 3, Distinct: true, Limit: -1, Weights: dw}
		ps, _ := sources(rowsOf("1|NULL|NULL|1.000000238418579", "1|NULL|NULL|1"),
			rowsOf("1|NULL|NULL|1", "1|NULL|NULL|1.0000001192092896", "2|NULL|NULL|2"))
		got, err := collect(t, m, dcols, ps, 0)
		if err != nil || len(got) != 4 {
			t.Fatalf("got %v, %v; want 4 distinct values", got, err)
		}
	})
	t.Run("a FLOAT without its exact value is refused", func(t *testing.T) {
		// ORDER BY COALESCE(x): an expression, compared by rounded text.
		m := &Merge{Visible: 2, Hidden: 2, OrderBy: []SortKey{{Column: 1}}, Limit: -1, Weights: []Weight{{Column: 1, Weight: 2, Pad: 3}}}
		ps, _ := sources(rowsOf("1|1|NULL|NULL"), rowsOf("2|1|NULL|NULL"))
		_, err := collect(t, m, cols[:4], ps, 0)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "FLOAT") {
			t.Fatalf("got %v, want ErrUnsupported naming FLOAT", err)
		}
	})
	t.Run("MIN and MAX of a FLOAT compare its text", func(t *testing.T) {
		acols := []Column{colFloat, colFloat, colBinary, colBinary, colBinary, colBinary}
		m := &Merge{Visible: 2, Hidden: 4, Aggregates: []Aggregate{{Column: 0, Func: AggMin}, {Column: 1, Func: AggMax}}, Limit: -1,
			Weights: []Weight{{Column: 0, Weight: 2, Pad: 3}, {Column: 1, Weight: 4, Pad: 5}}}
		ps, _ := sources(rowsOf("1|2|NULL|NULL|NULL|NULL"), rowsOf("0.5|1|NULL|NULL|NULL|NULL"))
		got, err := collect(t, m, acols, ps, 0)
		if want := []string{"0.5|2"}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("got %v, %v; want %v", got, err, want)
		}
	})
}

// TestScatterDistinctExact checks that SELECT DISTINCT gives each column
// its e+0, the exact value a FLOAT needs (finding 1.7).
func TestScatterDistinctExact(t *testing.T) {
	r := testRules(t)
	rt := route(t, r, "SELECT DISTINCT amount, CHAR_LENGTH(note) FROM orders")
	if !strings.Contains(rt.Parts[0].SQL, ",(`amount`)+0") || strings.Contains(rt.Parts[0].SQL, "(CHAR_LENGTH(`note`))+0") {
		t.Fatalf("Part: %q", rt.Parts[0].SQL)
	}
	if w := rt.Merge.Weights; len(w) != 2 || w[0].Column != 0 || w[0].Position == 0 || w[1].Position != 0 {
		t.Fatalf("Weights: %+v", w)
	}
}

// TestLimitToTheEnd is finding 3.2: LIMIT 18446744073709551615, the
// documented way to read to the end, and any count or offset up to 2^64-1
// are the server's to take, as text and as parameters.
func TestLimitToTheEnd(t *testing.T) {
	const noLimit = 1 << 62 // a count or offset beyond any table
	r := testRules(t)
	const max64 = "18446744073709551615"
	for _, tc := range []struct {
		sql           string
		args          []Value
		limit, offset int64
		partLimit     string
	}{
		{"SELECT id FROM orders ORDER BY id LIMIT " + max64, nil, noLimit, 0, "LIMIT 4611686018427387904"},
		{"SELECT id FROM orders ORDER BY id LIMIT 3, " + max64, nil, noLimit, 3, "LIMIT 4611686018427387904"},
		{"SELECT id FROM orders ORDER BY id LIMIT 1 OFFSET " + max64, nil, 1, noLimit, "LIMIT 4611686018427387904"},
		{"SELECT id FROM orders ORDER BY id LIMIT " + max64 + " OFFSET " + max64, nil, noLimit, noLimit, "LIMIT 4611686018427387904"},
		{"SELECT id FROM orders ORDER BY id LIMIT 4611686018427387905", nil, noLimit, 0, "LIMIT 4611686018427387904"},
		{"SELECT id FROM orders ORDER BY id LIMIT ?, ?", []Value{{Kind: KindUint, U: 1<<64 - 1}, {Kind: KindUint, U: 1<<64 - 1}}, noLimit, noLimit, "LIMIT 4611686018427387904"},
		{"SELECT id FROM orders ORDER BY id LIMIT ?, ?", []Value{intv(2), {Kind: KindString, S: []byte(max64)}}, noLimit, 2, "LIMIT 4611686018427387904"},
		{"SELECT COUNT(*) FROM orders LIMIT 1 OFFSET " + max64, nil, 1, noLimit, ""},
		// A negative parameter is read as unsigned, a NULL one as 0.
		{"SELECT id FROM orders ORDER BY id LIMIT ?, ?", []Value{intv(-1), intv(2)}, 2, noLimit, "LIMIT 4611686018427387904"},
		{"SELECT id FROM orders ORDER BY id LIMIT ?, ?", []Value{intv(1), {Kind: KindString, S: []byte("-1")}}, noLimit, 1, "LIMIT 4611686018427387904"},
		{"SELECT id FROM orders ORDER BY id LIMIT ?, ?", []Value{intv(1), {Kind: KindFloat, F: -1}}, noLimit, 1, "LIMIT 4611686018427387904"},
		{"SELECT id FROM orders ORDER BY id LIMIT ?, ?", []Value{{Kind: KindNull}, intv(2)}, 2, 0, "LIMIT 2"},
		{"SELECT id FROM orders ORDER BY id LIMIT ?, ?", []Value{intv(1), {Kind: KindNull}}, 0, 1, "LIMIT 1"},
	} {
		tm, err := r.Prepare("pay", tc.sql)
		if err != nil {
			t.Fatalf("Prepare(%q): %v", tc.sql, err)
		}
		rt, err := tm.Route(tc.args)
		if err != nil {
			t.Fatalf("Route(%q, %v): %v", tc.sql, tc.args, err)
		}
		if rt.Merge.Limit != tc.limit || rt.Merge.Offset != tc.offset {
			t.Errorf("%s: merge limit %d offset %d, want %d %d", tc.sql, rt.Merge.Limit, rt.Merge.Offset, tc.limit, tc.offset)
		}
		if sql := rt.Parts[0].SQL; tc.partLimit != "" && !strings.HasSuffix(sql, tc.partLimit) || tc.partLimit == "" && strings.Contains(sql, "LIMIT") {
			t.Errorf("%s: part %q, want it to end in %q", tc.sql, sql, tc.partLimit)
		}
	}
}
