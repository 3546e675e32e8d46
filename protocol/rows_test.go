package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

func TestParseColumnDef(t *testing.T) {
	want := ColumnDef{Schema: []byte("pay"), Table: []byte("orders_7"), Name: []byte("amount"),
		Charset: 63, Length: 12, Type: TypeNewDecimal, Flags: FlagNotNull, Decimals: 2}
	p := want.Append(nil)
	got, err := ParseColumnDef(p)
	if err != nil {
		t.Fatal(err)
	}
	if !columnDefEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// A COM_FIELD_LIST definition carries a default value after the
	// fixed fields; it is ignored.
	withDefault := append(append([]byte(nil), p...), 1, '0')
	if got, err := ParseColumnDef(withDefault); err != nil || !columnDefEqual(got, want) {
		t.Fatalf("with default: %+v, %v", got, err)
	}
	computed := AppendColumnDef(nil, "COUNT(*)", TypeLongLong, FlagUnsigned, 21)
	got, err = ParseColumnDef(computed)
	if err != nil || string(got.Name) != "COUNT(*)" || got.Type != TypeLongLong || got.Flags != FlagUnsigned || got.Length != 21 || got.Charset != 63 {
		t.Fatalf("AppendColumnDef output parsed as %+v, %v", got, err)
	}

	for _, tc := range []struct {
		name string
		p    []byte
	}{
		{"empty", nil},
		{"names only", p[:len(p)-13]},
		{"fixed fields cut", p[:len(p)-3]},
		{"fixed length too small", append(append([]byte(nil), p[:len(p)-13]...), 0x05, 1, 2, 3, 4, 5)},
		{"null fixed length", append(append([]byte(nil), p[:len(p)-13]...), 0xfb)},
		{"string truncated", []byte{3, 'd', 'e'}},
	} {
		if _, err := ParseColumnDef(tc.p); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", tc.name, err)
		}
		if err := PatchColumnDecimals(tc.p, TypeNewDecimal, 4); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: patch err %v, want ErrMalformed", tc.name, err)
		}
	}
}

func columnDefEqual(a, b ColumnDef) bool {
	return bytes.Equal(a.Schema, b.Schema) && bytes.Equal(a.Table, b.Table) && bytes.Equal(a.Name, b.Name) &&
		a.Charset == b.Charset && a.Length == b.Length && a.Type == b.Type && a.Flags == b.Flags && a.Decimals == b.Decimals
}

func TestPatchColumnDecimals(t *testing.T) {
	c := ColumnDef{Schema: []byte("pay"), Table: []byte("orders_1"), Name: []byte("AVG(amount)"),
		Charset: 63, Length: 14, Type: TypeNewDecimal, Flags: 0, Decimals: 2}
	p := c.Append(nil)
	if err := PatchColumnDecimals(p, TypeNewDecimal, 6); err != nil {
		t.Fatal(err)
	}
	got, err := ParseColumnDef(p)
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.Decimals = 6
	if !columnDefEqual(got, want) {
		t.Fatalf("patched %+v, want %+v", got, want)
	}
	if err := PatchColumnDecimals(p, TypeDouble, 31); err != nil {
		t.Fatal(err)
	}
	if got, _ := ParseColumnDef(p); got.Type != TypeDouble || got.Decimals != 31 || got.Length != 14 {
		t.Fatalf("second patch: %+v", got)
	}
}

func TestTextRow(t *testing.T) {
	long := bytes.Repeat([]byte{'x'}, 300)
	for _, tc := range []struct {
		name string
		row  [][]byte
	}{
		{"values", [][]byte{[]byte("1"), []byte("abc")}},
		{"null and empty", [][]byte{nil, {}, []byte("z")}},
		{"all null", [][]byte{nil, nil}},
		{"long", [][]byte{long, []byte("1")}},
		{"none", [][]byte{}},
	} {
		p := AppendTextRow(nil, tc.row)
		got, err := ParseTextRow(p, len(tc.row), make([][]byte, 0, 1))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(got) != len(tc.row) {
			t.Fatalf("%s: %d values, want %d", tc.name, len(got), len(tc.row))
		}
		for i := range got {
			if (got[i] == nil) != (tc.row[i] == nil) || !bytes.Equal(got[i], tc.row[i]) {
				t.Errorf("%s: value %d = %q (nil %v), want %q (nil %v)", tc.name, i, got[i], got[i] == nil, tc.row[i], tc.row[i] == nil)
			}
		}
	}
	for _, tc := range []struct {
		name string
		p    []byte
		n    int
	}{
		{"too few", AppendTextRow(nil, [][]byte{[]byte("a")}), 2},
		{"too many", AppendTextRow(nil, [][]byte{[]byte("a"), []byte("b")}), 1},
		{"truncated", []byte{5, 'a', 'b'}, 1},
		{"ff prefix", []byte{0xff}, 1},
	} {
		if _, err := ParseTextRow(tc.p, tc.n, nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", tc.name, err)
		}
	}
}

// binRow builds a binary row from already encoded values; nil is NULL.
func binRow(vals ...[]byte) []byte {
	p := []byte{0}
	bm := make([]byte, binaryNullBitmapLen(len(vals)))
	for i, v := range vals {
		if v == nil {
			bm[(i+2)/8] |= 1 << ((i + 2) % 8)
		}
	}
	p = append(p, bm...)
	for _, v := range vals {
		p = append(p, v...)
	}
	return p
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func TestBinaryRowValues(t *testing.T) {
	col := func(typ byte, flags uint16, decimals byte) ColumnDef {
		return ColumnDef{Name: []byte("c"), Type: typ, Flags: flags, Decimals: decimals, Charset: 63}
	}
	u := FlagUnsigned
	for _, tc := range []struct {
		name string
		col  ColumnDef
		bin  []byte
		text string
	}{
		{"tiny signed", col(TypeTiny, 0, 0), []byte{0xff}, "-1"},
		{"tiny unsigned", col(TypeTiny, u, 0), []byte{0xff}, "255"},
		{"short signed", col(TypeShort, 0, 0), le16(0x8000), "-32768"},
		{"short unsigned", col(TypeShort, u, 0), le16(0xffff), "65535"},
		{"int24", col(TypeInt24, 0, 0), le32(uint32(0xffffffff - 41)), "-42"},
		{"long signed", col(TypeLong, 0, 0), le32(0x80000000), "-2147483648"},
		{"long unsigned", col(TypeLong, u, 0), le32(0xffffffff), "4294967295"},
		{"longlong signed", col(TypeLongLong, 0, 0), le64(1 << 63), "-9223372036854775808"},
		{"longlong unsigned", col(TypeLongLong, u, 0), le64(math.MaxUint64), "18446744073709551615"},
		{"zerofill", ColumnDef{Type: TypeLong, Flags: u | FlagZerofill, Length: 5}, le32(42), "00042"},
		{"year", col(TypeYear, u, 0), le16(2024), "2024"},
		{"year zero", col(TypeYear, u, 0), le16(0), "0000"},
		{"double", col(TypeDouble, 0, 31), le64(math.Float64bits(0.1)), "0.1"},
		{"double big", col(TypeDouble, 0, 31), le64(math.Float64bits(1e15)), "1e15"},
		{"double 1e14", col(TypeDouble, 0, 31), le64(math.Float64bits(1e14)), "100000000000000"},
		{"double small", col(TypeDouble, 0, 39), le64(math.Float64bits(-1.5e-7)), "-1.5e-7"},
		{"double fixed", col(TypeDouble, 0, 2), le64(math.Float64bits(3.14159)), "3.14"},
		{"float", col(TypeFloat, 0, 31), le32(math.Float32bits(0.1)), "0.1"},
		{"float fixed", col(TypeFloat, 0, 3), le32(math.Float32bits(2.5)), "2.500"},
		{"decimal", col(TypeNewDecimal, 0, 2), []byte{5, '-', '1', '.', '5', '0'}, "-1.50"},
		{"varchar", col(TypeVarString, 0, 0), []byte{3, 'a', 'b', 'c'}, "abc"},
		{"empty string", col(TypeString, 0, 0), []byte{0}, ""},
		{"date", col(TypeDate, 0, 0), append([]byte{4}, append(le16(2024), 2, 29)...), "2024-02-29"},
		{"date zero", col(TypeDate, 0, 0), []byte{0}, "0000-00-00"},
		{"datetime", col(TypeDatetime, 0, 0), append([]byte{7}, append(le16(2024), 1, 2, 3, 4, 5)...), "2024-01-02 03:04:05"},
		{"datetime date only", col(TypeDatetime, 0, 0), append([]byte{4}, append(le16(2024), 1, 2)...), "2024-01-02 00:00:00"},
		{"datetime micro 3", col(TypeDatetime, 0, 3), append([]byte{11}, append(le16(2024), append([]byte{1, 2, 3, 4, 5}, le32(123456)...)...)...), "2024-01-02 03:04:05.123"},
		{"timestamp zero 6", col(TypeTimestamp, 0, 6), []byte{0}, "0000-00-00 00:00:00.000000"},
		{"time", col(TypeTime, 0, 0), append([]byte{8, 0}, append(le32(1), 2, 3, 4)...), "26:03:04"},
		{"time negative micro", col(TypeTime, 0, 6), append([]byte{12, 1}, append(le32(0), append([]byte{0, 0, 1}, le32(500000)...)...)...), "-00:00:01.500000"},
		{"time zero", col(TypeTime, 0, 0), []byte{0}, "00:00:00"},
		{"time 838", col(TypeTime, 0, 0), append([]byte{8, 0}, append(le32(34), 22, 59, 59)...), "838:59:59"},
	} {
		cols := []ColumnDef{tc.col, col(TypeLong, 0, 0)}
		p := binRow(tc.bin, nil)
		row, scratch, err := ParseBinaryRow(p, cols, nil, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(row) != 2 || string(row[0]) != tc.text || row[1] != nil {
			t.Errorf("%s: got %q, want [%q nil]", tc.name, row, tc.text)
			continue
		}
		// Back to binary and once more to text: the text is stable.
		enc, err := AppendBinaryRow(nil, row, cols)
		if err != nil {
			t.Errorf("%s: AppendBinaryRow: %v", tc.name, err)
			continue
		}
		row2, _, err := ParseBinaryRow(enc, cols, nil, scratch)
		if err != nil || string(row2[0]) != tc.text || row2[1] != nil {
			t.Errorf("%s: round trip %q, %v", tc.name, row2, err)
		}
	}
}

// TestBinaryRowScratchGrowth: values converted before scratch had to grow
// keep their text.
func TestBinaryRowScratchGrowth(t *testing.T) {
	var cols []ColumnDef
	var vals [][]byte
	var want []string
	for i := range 40 {
		cols = append(cols, ColumnDef{Type: TypeLongLong})
		vals = append(vals, le64(uint64(-int64(i)*1_000_000_007)))
		want = append(want, "-"+itoa(i*1_000_000_007))
	}
	want[0] = "0"
	row, _, err := ParseBinaryRow(binRow(vals...), cols, nil, make([]byte, 0, 4))
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if string(row[i]) != want[i] {
			t.Fatalf("column %d = %q, want %q", i, row[i], want[i])
		}
	}
}

func TestParseBinaryRowErrors(t *testing.T) {
	cols := []ColumnDef{{Type: TypeLong}, {Type: TypeVarString}}
	for _, tc := range []struct {
		name string
		p    []byte
		cols []ColumnDef
	}{
		{"empty", nil, cols},
		{"not a row", []byte{0xfe, 0, 0, 0, 0}, cols},
		{"bitmap cut", []byte{0}, cols},
		{"value cut", binRow([]byte{1, 2}, []byte{1, 'a'}), cols},
		{"string cut", binRow(le32(1), []byte{5, 'a'}), cols},
		{"left over", append(binRow(le32(1), []byte{1, 'a'}), 9), cols},
		{"unknown type", binRow([]byte{1}), []ColumnDef{{Type: 0x42}}},
		{"bad temporal length", binRow([]byte{5, 1, 2, 3, 4, 5}), []ColumnDef{{Type: TypeDate}}},
		{"month 13", binRow(append([]byte{4}, append(le16(2024), 13, 1)...)), []ColumnDef{{Type: TypeDate}}},
		{"hour 24", binRow(append([]byte{8, 0}, append(le32(0), 24, 0, 0)...)), []ColumnDef{{Type: TypeTime}}},
		{"nan", binRow(le64(math.Float64bits(math.NaN()))), []ColumnDef{{Type: TypeDouble, Decimals: 31}}},
	} {
		if _, _, err := ParseBinaryRow(tc.p, tc.cols, nil, nil); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", tc.name, err)
		}
	}
}

func TestAppendBinaryRowErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		col  ColumnDef
		v    string
	}{
		{"tiny overflow", ColumnDef{Type: TypeTiny}, "128"},
		{"tiny underflow", ColumnDef{Type: TypeTiny}, "-129"},
		{"unsigned negative", ColumnDef{Type: TypeLong, Flags: FlagUnsigned}, "-1"},
		{"long overflow", ColumnDef{Type: TypeLong}, "2147483648"},
		{"longlong overflow", ColumnDef{Type: TypeLongLong, Flags: FlagUnsigned}, "18446744073709551616"},
		{"not a number", ColumnDef{Type: TypeLongLong}, "12a"},
		{"empty int", ColumnDef{Type: TypeShort}, ""},
		{"bare minus", ColumnDef{Type: TypeShort}, "-"},
		{"double word", ColumnDef{Type: TypeDouble}, "pi"},
		{"double nan", ColumnDef{Type: TypeDouble}, "NaN"},
		{"date words", ColumnDef{Type: TypeDate}, "yesterday"},
		{"date month 13", ColumnDef{Type: TypeDate}, "2024-13-01"},
		{"date two fields", ColumnDef{Type: TypeDate}, "2024-01"},
		{"date fraction", ColumnDef{Type: TypeDate}, "2024-01-01.5"},
		{"datetime 7 digits", ColumnDef{Type: TypeDatetime}, "2024-01-01 00:00:00.1234567"},
		{"datetime trailing dot", ColumnDef{Type: TypeDatetime}, "2024-01-01 00:00:00."},
		{"time minutes 60", ColumnDef{Type: TypeTime}, "10:60:00"},
		{"time two fields", ColumnDef{Type: TypeTime}, "10:00"},
	} {
		_, err := AppendBinaryRow(nil, [][]byte{[]byte(tc.v)}, []ColumnDef{tc.col})
		if !errors.Is(err, ErrBadValue) {
			t.Errorf("%s: err %v, want ErrBadValue", tc.name, err)
		}
	}
	if _, err := AppendBinaryRow(nil, [][]byte{nil}, nil); !errors.Is(err, ErrBadValue) {
		t.Errorf("value count mismatch: err %v", err)
	}
}

func TestAppendBinaryRowEncoding(t *testing.T) {
	cols := []ColumnDef{{Type: TypeDatetime}, {Type: TypeTime}, {Type: TypeLong}, {Type: TypeVarString}, {Type: TypeDate}}
	row := [][]byte{[]byte("2024-01-02 00:00:00"), []byte("-01:00:00"), nil, []byte("é"), []byte("0000-00-00")}
	got, err := AppendBinaryRow([]byte("keep"), row, cols)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("keep")
	want = append(want, 0, 1<<4) // header, bitmap: column 2 (bit 4) NULL
	want = append(want, 4, 0xe8, 0x07, 1, 2)
	want = append(want, 8, 1, 0, 0, 0, 0, 1, 0, 0)
	want = append(want, 2, 0xc3, 0xa9)
	want = append(want, 0)
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
}

func BenchmarkParseBinaryRow(b *testing.B) {
	cols := []ColumnDef{{Type: TypeLongLong}, {Type: TypeVarString}, {Type: TypeNewDecimal, Decimals: 2},
		{Type: TypeDatetime}, {Type: TypeDouble, Decimals: 31}}
	p := binRow(le64(9527), []byte{5, 'h', 'e', 'l', 'l', 'o'}, []byte{4, '1', '.', '5', '0'},
		append([]byte{7}, append(le16(2024), 1, 2, 3, 4, 5)...), le64(math.Float64bits(2.5)))
	var dst [][]byte
	var scratch, enc []byte
	var err error
	b.ReportAllocs()
	for b.Loop() {
		dst, scratch, err = ParseBinaryRow(p, cols, dst, scratch)
		if err != nil {
			b.Fatal(err)
		}
		enc, err = AppendBinaryRow(enc[:0], dst, cols)
		if err != nil {
			b.Fatal(err)
		}
	}
}
