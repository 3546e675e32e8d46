package protocol

// Fuzz targets of the row codecs (rows.go). Their committed seed files in
// testdata/fuzz/<FuzzName>/seed-* are written by TestGenerateRowsFuzzCorpus
// when SLUICE_GEN_FUZZ_CORPUS=1, like the other targets' (fuzz_test.go).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseColumnDef: ParseColumnDef never panics; a definition it accepts
// survives Append and a second parse, and PatchColumnDecimals changes only
// the type and decimals.
func FuzzParseColumnDef(f *testing.F) {
	fzAddSeeds(f, fzColumnDefSeeds())
	f.Fuzz(func(t *testing.T, p []byte) {
		c, err := ParseColumnDef(p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		enc := c.Append(nil)
		c2, err := ParseColumnDef(enc)
		if err != nil || !columnDefEqual(c, c2) {
			t.Fatalf("round trip: %+v -> %+v (%v)", c, c2, err)
		}
		q := append([]byte(nil), p...)
		if err := PatchColumnDecimals(q, c.Type^0xff, c.Decimals+1); err != nil {
			t.Fatalf("patch of a parsed definition: %v", err)
		}
		c3, err := ParseColumnDef(q)
		want := c
		want.Type, want.Decimals = c.Type^0xff, c.Decimals+1
		if err != nil || !columnDefEqual(c3, want) {
			t.Fatalf("patched %+v, want %+v (%v)", c3, want, err)
		}
	})
}

// FuzzParseTextRow: ParseTextRow never panics; a row it accepts is
// re-encoded by AppendTextRow in no more bytes (length prefixes become
// canonical) and parses back to the same values.
func FuzzParseTextRow(f *testing.F) {
	fzAddSeeds(f, fzTextRowSeeds())
	f.Fuzz(func(t *testing.T, p []byte, n uint8) {
		row, err := ParseTextRow(p, int(n), nil)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if len(row) != int(n) {
			t.Fatalf("%d values for %d columns", len(row), n)
		}
		enc := AppendTextRow(nil, row)
		row2, err := ParseTextRow(enc, int(n), nil)
		if err != nil {
			t.Fatalf("re-encoded row does not parse: %v", err)
		}
		for i := range row {
			if (row[i] == nil) != (row2[i] == nil) || !bytes.Equal(row[i], row2[i]) {
				t.Fatalf("value %d: %q -> %q", i, row[i], row2[i])
			}
		}
		if len(enc) > len(p) {
			t.Fatalf("re-encoding grew the row from %d to %d bytes", len(p), len(enc))
		}
	})
}

// fzBinaryCols decodes a fuzzer's column spec: 3 bytes a column (type,
// flag bits, decimals). Flag bit 0 is UNSIGNED, bit 1 ZEROFILL (width 8).
func fzBinaryCols(spec []byte) []ColumnDef {
	var cols []ColumnDef
	for i := 0; i+3 <= len(spec) && len(cols) < 64; i += 3 {
		c := ColumnDef{Name: []byte("c"), Type: spec[i], Decimals: spec[i+2], Length: 8}
		if spec[i+1]&1 != 0 {
			c.Flags |= FlagUnsigned
		}
		if spec[i+1]&2 != 0 {
			c.Flags |= FlagZerofill
		}
		cols = append(cols, c)
	}
	return cols
}

// FuzzParseBinaryRow: ParseBinaryRow never panics; a row it accepts is
// encoded again by AppendBinaryRow and parses back to the same text.
func FuzzParseBinaryRow(f *testing.F) {
	fzAddSeeds(f, fzBinaryRowSeeds())
	f.Fuzz(func(t *testing.T, p []byte, spec []byte) {
		cols := fzBinaryCols(spec)
		row, scratch, err := ParseBinaryRow(p, cols, nil, nil)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		// Keep the text: the second parse reuses scratch.
		text := make([][]byte, len(row))
		for i, v := range row {
			if v != nil {
				text[i] = append([]byte{}, v...)
			}
		}
		enc, err := AppendBinaryRow(nil, row, cols)
		if err != nil {
			t.Fatalf("text of a parsed row does not encode: %v\nrow %q", err, row)
		}
		row2, _, err := ParseBinaryRow(enc, cols, nil, scratch)
		if err != nil {
			t.Fatalf("re-encoded row does not parse: %v\nrow %q\nenc % x", err, text, enc)
		}
		for i := range text {
			if (text[i] == nil) != (row2[i] == nil) || !bytes.Equal(text[i], row2[i]) {
				t.Fatalf("column %d (type 0x%02x): %q -> %q", i, cols[i].Type, text[i], row2[i])
			}
		}
	})
}

func fzColumnDefSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, p []byte) {
		seeds = append(seeds, fzSeed{name: name, args: []any{p}, add: important})
	}
	c := ColumnDef{Schema: []byte("pay"), Table: []byte("orders_7"), Name: []byte("amount"),
		Charset: 63, Length: 12, Type: TypeNewDecimal, Decimals: 2}
	add("decimal", true, c.Append(nil))
	add("computed", true, AppendColumnDef(nil, "COUNT(*)", TypeLongLong, 0, 21))
	add("field-list-default", false, append(c.Append(nil), 1, '0'))
	add("fixed-short", true, c.Append(nil)[:len(c.Append(nil))-4])
	add("fixed-len-fb", false, append(fzCat(fzLenEnc([]byte("def")), []byte{0, 0, 0, 1, 'a', 0}), 0xfb))
	add("empty", false, nil)
	return seeds
}

func fzTextRowSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, p []byte, n uint8) {
		seeds = append(seeds, fzSeed{name: name, args: []any{p, n}, add: important})
	}
	add("two", true, AppendTextRow(nil, [][]byte{[]byte("9527"), []byte("paid")}), 2)
	add("null-empty", true, AppendTextRow(nil, [][]byte{nil, {}}), 2)
	add("fc-string", false, AppendTextRow(nil, [][]byte{bytes.Repeat([]byte{'x'}, 300)}), 1)
	add("noncanonical-length", true, []byte{0xfc, 1, 0, 'a'}, 1)
	add("left-over", false, []byte{1, 'a', 1, 'b'}, 1)
	add("truncated", false, []byte{9, 'a'}, 1)
	add("zero-columns", false, nil, 0)
	return seeds
}

func fzBinaryRowSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, p, spec []byte) {
		seeds = append(seeds, fzSeed{name: name, args: []any{p, spec}, add: important})
	}
	le16 := func(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	le64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	add("ints", true, binRow([]byte{0x80}, le16(0xffff), le32(7), le64(1<<63), nil),
		[]byte{TypeTiny, 0, 0, TypeShort, 1, 0, TypeLong, 2, 0, TypeLongLong, 0, 0, TypeLong, 0, 0})
	add("floats", true, binRow(le32(math.Float32bits(0.1)), le64(math.Float64bits(1e20)), le64(math.Float64bits(2.675))),
		[]byte{TypeFloat, 0, 31, TypeDouble, 0, 39, TypeDouble, 0, 2})
	add("temporal", true, binRow(
		fzCat([]byte{11}, le16(2024), []byte{2, 29, 23, 59, 59}, le32(999999)),
		fzCat([]byte{12, 1}, le32(34), []byte{22, 59, 59}, le32(5)),
		[]byte{0}, fzCat([]byte{4}, le16(1999), []byte{12, 31})),
		[]byte{TypeDatetime, 0, 6, TypeTime, 0, 3, TypeTimestamp, 0, 0, TypeDate, 0, 0})
	add("strings", false, binRow([]byte{4, '1', '.', '5', '0'}, []byte{0}, []byte{2, 0xc3, 0xa9}),
		[]byte{TypeNewDecimal, 0, 2, TypeVarString, 0, 0, TypeBlob, 0, 0})
	add("year-null-type", false, binRow(le16(2024), nil), []byte{TypeYear, 1, 0, TypeNull, 0, 0})
	add("bad-time-length", true, binRow([]byte{5, 0, 0, 0, 0, 0}), []byte{TypeTime, 0, 0})
	add("truncated", false, []byte{0, 0, 1}, []byte{TypeLongLong, 0, 0})
	add("wrong-header", false, []byte{0xfe, 0}, []byte{TypeTiny, 0, 0})
	return seeds
}

// TestGenerateRowsFuzzCorpus (re)writes the seed files of the row codecs'
// targets; it runs only with SLUICE_GEN_FUZZ_CORPUS=1.
func TestGenerateRowsFuzzCorpus(t *testing.T) {
	if os.Getenv("SLUICE_GEN_FUZZ_CORPUS") != "1" {
		t.Skip("set SLUICE_GEN_FUZZ_CORPUS=1 to rewrite testdata/fuzz seed files")
	}
	for target, seeds := range map[string][]fzSeed{
		"FuzzParseColumnDef": fzColumnDefSeeds(),
		"FuzzParseTextRow":   fzTextRowSeeds(),
		"FuzzParseBinaryRow": fzBinaryRowSeeds(),
	} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range seeds {
			if err := os.WriteFile(filepath.Join(dir, "seed-"+s.name), fzMarshal(s.args...), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
