package protocol

// Fuzz targets for the smaller decoders: the COM_STMT_PREPARE response,
// statement ids, mysql_native_password hashes, decimal digits, decoded
// execute parameters and their text form, column-definition patching and
// tracked session variables. Their seeds (and FuzzParseOKTail's) are in
// fzDecoderCorpora, written to testdata/fuzz by
//
//	SLUICE_GEN_FUZZ_CORPUS=1 go test -run '^TestGenerateDecodersFuzzCorpus$' ./protocol

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzParsePrepareOK: ParsePrepareOK accepts exactly the packets of at least
// 12 bytes starting with 0x00, reads its fields where the protocol puts
// them, and a re-encoded response parses the same; the metadata count is
// what the counts say. StmtID and SetStmtID agree on any command packet.
func FuzzParsePrepareOK(f *testing.F) {
	fzAddSeeds(f, fzPrepareOKSeeds())
	f.Fuzz(func(t *testing.T, p []byte, deprecateEOF bool) {
		ok, err := ParsePrepareOK(p)
		if (err == nil) != (len(p) >= 12 && p[0] == 0) {
			t.Fatalf("ParsePrepareOK(% x): %v", fzHead(p), err)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
		} else {
			le := binary.LittleEndian
			if ok.StatementID != le.Uint32(p[1:]) || ok.Columns != le.Uint16(p[5:]) ||
				ok.Params != le.Uint16(p[7:]) || ok.Warnings != le.Uint16(p[10:]) {
				t.Fatalf("fields misread from % x: %+v", p[:12], ok)
			}
			enc := []byte{0}
			enc = le.AppendUint32(enc, ok.StatementID)
			enc = le.AppendUint16(enc, ok.Columns)
			enc = le.AppendUint16(enc, ok.Params)
			enc = append(enc, 0)
			enc = le.AppendUint16(enc, ok.Warnings)
			if ok2, err := ParsePrepareOK(enc); err != nil || ok2 != ok {
				t.Fatalf("round trip: %+v -> %+v, %v", ok, ok2, err)
			}
			want := int(ok.Columns) + int(ok.Params)
			for _, c := range []uint16{ok.Columns, ok.Params} {
				if c > 0 && !deprecateEOF {
					want++
				}
			}
			if n := ok.PrepareMetadataPackets(deprecateEOF); n != want {
				t.Fatalf("%+v: %d metadata packets, want %d", ok, n, want)
			}
		}
		id, err := StmtID(p)
		if (err == nil) != (len(p) >= 5) {
			t.Fatalf("StmtID on %d bytes: %v", len(p), err)
		}
		if err != nil {
			return
		}
		cp := append([]byte(nil), p...)
		SetStmtID(cp, ^id)
		if got, _ := StmtID(cp); got != ^id || cp[0] != p[0] || !bytes.Equal(cp[5:], p[5:]) {
			t.Fatalf("SetStmtID(%d) gave % x from % x", ^id, fzHead(cp), fzHead(p))
		}
	})
}

// FuzzParseNativeHash: only '*' and 40 hex digits (either case) decode, to
// the 20 bytes they spell; the hash PASSWORD() would print for any password
// decodes and verifies that password's scramble response, and never
// another's.
func FuzzParseNativeHash(f *testing.F) {
	fzAddSeeds(f, fzNativeHashSeeds())
	f.Fuzz(func(t *testing.T, s []byte, scramble []byte) {
		b, err := ParseNativeHash(string(s))
		valid := len(s) == 41 && s[0] == '*'
		if valid {
			_, herr := hex.DecodeString(string(s[1:]))
			valid = herr == nil
		}
		if (err == nil) != valid {
			t.Fatalf("ParseNativeHash(%q): %x, %v", s, b, err)
		}
		if err == nil && !strings.EqualFold("*"+hex.EncodeToString(b), string(s)) {
			t.Fatalf("ParseNativeHash(%q) = %x", s, b)
		}
		// The fuzzed bytes as a password. An empty one has an empty hash
		// (PASSWORD('') is '') and an empty response.
		if len(s) == 0 {
			if !VerifyNativePassword(scramble, NativePasswordResponse(scramble, ""), nil) ||
				VerifyNativePassword(scramble, NativePasswordResponse(scramble, "x"), nil) {
				t.Fatal("the empty password's empty hash")
			}
			return
		}
		h1 := sha1.Sum(s)
		h2 := sha1.Sum(h1[:])
		stored, err := ParseNativeHash("*" + strings.ToUpper(hex.EncodeToString(h2[:])))
		if err != nil || !bytes.Equal(stored, h2[:]) {
			t.Fatalf("PASSWORD() form of %q: %x, %v", s, stored, err)
		}
		resp := NativePasswordResponse(scramble, string(s))
		if !VerifyNativePassword(scramble, resp, stored) {
			t.Fatalf("password %q does not verify against its own hash", s)
		}
		if VerifyNativePassword(scramble, NativePasswordResponse(scramble, string(s)+"x"), stored) {
			t.Fatalf("password %q+x verifies against the hash of %q", s, s)
		}
		// Any response of any length is just refused.
		_ = VerifyNativePassword(scramble, s, stored)
		_ = VerifyNativePassword(scramble, s, nil)
	})
}

// FuzzParseUintDigits agrees with strconv.ParseUint on digit-only input and
// refuses everything else.
func FuzzParseUintDigits(f *testing.F) {
	fzAddSeeds(f, fzUintDigitsSeeds())
	f.Fuzz(func(t *testing.T, v []byte) {
		got, ok := ParseUintDigits(v)
		digits := len(v) > 0
		for _, c := range v {
			digits = digits && c >= '0' && c <= '9'
		}
		want, err := strconv.ParseUint(string(v), 10, 64)
		wantOK := digits && err == nil
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("ParseUintDigits(%q) = %d, %v; want %d, %v", v, got, ok, want, wantOK)
		}
		if !ok && got != 0 {
			t.Fatalf("ParseUintDigits(%q) refused but returned %d", v, got)
		}
	})
}

// FuzzExecuteParams decodes the parameters of any execute ParseExecute
// accepts, with any parameters claimed by long data: no panic, errors wrap
// ErrMalformed, every parameter is visited once in order with a value of
// its type's size, and an error from the callback stops the walk and comes
// back unchanged.
func FuzzExecuteParams(f *testing.F) {
	fzAddSeeds(f, fzExecuteParamsSeeds())
	f.Fuzz(func(t *testing.T, p []byte, numParams uint8, types []byte, longMask uint64) {
		n := int(numParams)
		e, err := ParseExecute(p, n, types, nil)
		if err != nil {
			return
		}
		long := func(i int) ([]byte, bool) { return []byte("long data"), longMask&(1<<(i%64)) != 0 }
		seen := 0
		err = ExecuteParams(p, e, n, types, long, func(i int, v Param) error {
			if i != seen {
				t.Fatalf("parameter %d after %d", i, seen)
			}
			seen++
			if v.Null && v.Raw != nil {
				t.Fatalf("parameter %d: NULL with a value % x", i, v.Raw)
			}
			if !v.Null {
				if _, isLong := long(i); !isLong {
					if size := fzFixedSize(v.Type); size > 0 && len(v.Raw) != size {
						t.Fatalf("parameter %d of type %#x: %d bytes, want %d", i, v.Type, len(v.Raw), size)
					}
				}
			}
			fzCheckParam(t, v)
			return nil
		})
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ExecuteParams error does not wrap ErrMalformed: %v", err)
		}
		if err == nil && seen != n {
			t.Fatalf("ExecuteParams visited %d of %d parameters", seen, n)
		}
		if n == 0 {
			return
		}
		stop := errors.New("stop")
		calls := 0
		err = ExecuteParams(p, e, n, types, long, func(int, Param) error { calls++; return stop })
		if calls > 1 || (calls == 1 && err != stop) {
			t.Fatalf("callback error: %d calls, %v", calls, err)
		}
	})
}

// fzFixedSize is the byte size of the fixed-size parameter types (0 for
// the others).
func fzFixedSize(typ byte) int {
	switch typ {
	case TypeTiny:
		return 1
	case TypeShort, TypeYear:
		return 2
	case TypeLong, TypeInt24, TypeFloat:
		return 4
	case TypeLongLong, TypeDouble:
		return 8
	}
	return 0
}

// FuzzParamText: any Param, whatever its raw bytes, converts without
// panicking; the text form only appends, integers print what Int/Uint
// return, floats what Float returns, NULL prints nothing.
func FuzzParamText(f *testing.F) {
	fzAddSeeds(f, fzParamTextSeeds())
	f.Fuzz(func(t *testing.T, typ byte, unsigned, null bool, raw []byte) {
		fzCheckParam(t, Param{Type: typ, Unsigned: unsigned, Null: null, Raw: raw})
	})
}

// fzCheckParam checks the conversions of one parameter value.
func fzCheckParam(t *testing.T, v Param) {
	t.Helper()
	prefix := []byte("prefix:")
	out := v.AppendText(append([]byte(nil), prefix...))
	if !bytes.HasPrefix(out, prefix) {
		t.Fatalf("AppendText changed what was before it: %q", out)
	}
	text := string(out[len(prefix):])
	i, u, fl := v.Int(), v.Uint(), v.Float()
	switch {
	case v.Null:
		if text != "" {
			t.Fatalf("NULL printed %q", text)
		}
	case v.IsInteger() && v.Unsigned:
		if text != strconv.FormatUint(u, 10) {
			t.Fatalf("unsigned %#x % x printed %q, Uint %d", v.Type, v.Raw, text, u)
		}
	case v.IsInteger():
		if text != strconv.FormatInt(i, 10) {
			t.Fatalf("signed %#x % x printed %q, Int %d", v.Type, v.Raw, text, i)
		}
	case v.IsFloat():
		bits := 64
		if len(v.Raw) == 4 {
			bits = 32
		}
		back, err := strconv.ParseFloat(text, bits)
		if err != nil || (back != fl && !(math.IsNaN(back) && math.IsNaN(fl))) {
			t.Fatalf("float % x printed %q, Float %v (%v)", v.Raw, text, fl, err)
		}
	}
}

// FuzzPatchColumnDecimals: a payload ParseColumnDef rejects is left alone;
// one it accepts gets exactly the new type and decimals and nothing else
// changes.
func FuzzPatchColumnDecimals(f *testing.F) {
	fzAddSeeds(f, fzPatchColumnSeeds())
	f.Fuzz(func(t *testing.T, p []byte, typ, decimals byte) {
		before, perr := ParseColumnDef(append([]byte(nil), p...))
		cp := append([]byte(nil), p...)
		err := PatchColumnDecimals(cp, typ, decimals)
		if (err == nil) != (perr == nil) {
			t.Fatalf("PatchColumnDecimals %v, ParseColumnDef %v", err, perr)
		}
		if err != nil {
			if !bytes.Equal(cp, p) {
				t.Fatal("a rejected payload was modified")
			}
			return
		}
		after, err := ParseColumnDef(cp)
		if err != nil {
			t.Fatalf("patched payload does not parse: %v", err)
		}
		want := before
		want.Type, want.Decimals = typ, decimals
		if !bytes.Equal(after.Schema, want.Schema) || !bytes.Equal(after.Table, want.Table) || !bytes.Equal(after.Name, want.Name) ||
			after.Charset != want.Charset || after.Length != want.Length || after.Flags != want.Flags ||
			after.Type != typ || after.Decimals != decimals {
			t.Fatalf("patched %+v, want %+v", after, want)
		}
		if diff := fzDiffCount(cp, p); diff > 2 {
			t.Fatalf("patching changed %d bytes", diff)
		}
	})
}

func fzDiffCount(a, b []byte) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// FuzzTrackedVariable: reading a variable or the GTID from any session
// state block never panics, and what is found lies inside the block.
func FuzzTrackedVariable(f *testing.F) {
	fzAddSeeds(f, fzTrackedSeeds())
	f.Fuzz(func(t *testing.T, state []byte, name []byte) {
		inside := func(v []byte) bool {
			if len(v) == 0 {
				return true
			}
			for i := 0; i+len(v) <= len(state); i++ {
				if &state[i] == &v[0] {
					return true
				}
			}
			return false
		}
		if v, ok := TrackedVariable(state, string(name)); ok && !inside(v) {
			t.Fatalf("TrackedVariable(%q) = %q outside the block", name, v)
		}
		if v, ok := TrackedGTID(state); ok && (len(v) == 0 || !inside(v)) {
			t.Fatalf("TrackedGTID = %q", v)
		}
	})
}

// ---------------------------------------------------------------------------
// Seeds

// fzDecoderCorpora lists the seeds of this file's targets and of
// FuzzParseOKTail.
func fzDecoderCorpora() map[string][]fzSeed {
	return map[string][]fzSeed{
		"FuzzParsePrepareOK":      fzPrepareOKSeeds(),
		"FuzzParseNativeHash":     fzNativeHashSeeds(),
		"FuzzParseUintDigits":     fzUintDigitsSeeds(),
		"FuzzExecuteParams":       fzExecuteParamsSeeds(),
		"FuzzParamText":           fzParamTextSeeds(),
		"FuzzPatchColumnDecimals": fzPatchColumnSeeds(),
		"FuzzTrackedVariable":     fzTrackedSeeds(),
		"FuzzParseOKTail":         fzOKTailSeeds(),
	}
}

// TestGenerateDecodersFuzzCorpus (re)writes the seed files of
// fzDecoderCorpora's targets; it runs only with SLUICE_GEN_FUZZ_CORPUS=1.
func TestGenerateDecodersFuzzCorpus(t *testing.T) {
	if os.Getenv("SLUICE_GEN_FUZZ_CORPUS") != "1" {
		t.Skip("set SLUICE_GEN_FUZZ_CORPUS=1 to rewrite testdata/fuzz seed files")
	}
	for target, seeds := range fzDecoderCorpora() {
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
			if s.big {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, "seed-"+s.name), fzMarshal(s.args...), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func fzPrepareOKSeeds() []fzSeed {
	return []fzSeed{
		{name: "select", args: []any{[]byte{0, 1, 0, 0, 0, 2, 0, 1, 0, 0, 0, 0}, false}, add: true},
		{name: "deprecate-eof", args: []any{[]byte{0, 0xff, 0xff, 0xff, 0xff, 0, 0, 3, 0, 0, 1, 0}, true}, add: true},
		{name: "no-params-no-columns", args: []any{[]byte{0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, false}},
		{name: "err", args: []any{AppendErr(nil, ERUnknownError.New("x")), false}},
		{name: "short", args: []any{[]byte{0, 1, 0, 0, 0, 2}, false}},
		{name: "empty", args: []any{[]byte{}, true}},
	}
}

func fzNativeHashSeeds() []fzSeed {
	scr := []byte("abcdefghijklmnopqrst")
	return []fzSeed{
		{name: "app", args: []any{[]byte("*5BCB3E6AC345B435C7C2E6B7949A04CE6F6563D3"), scr}, add: true},
		{name: "lower", args: []any{[]byte("*5bcb3e6ac345b435c7c2e6b7949a04ce6f6563d3"), scr}, add: true},
		{name: "no-star", args: []any{[]byte("5BCB3E6AC345B435C7C2E6B7949A04CE6F6563D3"), scr}},
		{name: "not-hex", args: []any{[]byte("*ZBCB3E6AC345B435C7C2E6B7949A04CE6F6563D3"), []byte{}}},
		{name: "empty", args: []any{[]byte{}, []byte{}}},
	}
}

func fzUintDigitsSeeds() []fzSeed {
	var seeds []fzSeed
	for name, v := range map[string]string{
		"zero": "0", "max": "18446744073709551615", "overflow": "18446744073709551616",
		"leading-zeros": "000123", "sign": "+1", "space": " 1", "empty": "", "hex": "0x10",
	} {
		seeds = append(seeds, fzSeed{name: name, args: []any{[]byte(v)}, add: name == "max" || name == "overflow"})
	}
	return seeds
}

func fzExecuteParamsSeeds() []fzSeed {
	var seeds []fzSeed
	for i, s := range fzExecuteSeeds() {
		if s.big || i%2 == 1 && !s.add {
			continue
		}
		seeds = append(seeds, fzSeed{name: s.name, args: append(append([]any(nil), s.args...), uint64(i)*0x5555), add: s.add})
	}
	return seeds
}

func fzParamTextSeeds() []fzSeed {
	le := binary.LittleEndian
	return []fzSeed{
		{name: "tiny-signed", args: []any{TypeTiny, false, false, []byte{0x80}}, add: true},
		{name: "longlong-unsigned", args: []any{TypeLongLong, true, false, le.AppendUint64(nil, math.MaxUint64)}, add: true},
		{name: "double", args: []any{TypeDouble, false, false, le.AppendUint64(nil, math.Float64bits(-1.5e300))}},
		{name: "float-nan", args: []any{TypeFloat, false, false, le.AppendUint32(nil, 0x7fc00000)}},
		{name: "datetime", args: []any{TypeDatetime, false, false, []byte{0xe8, 0x07, 5, 17, 13, 45, 30, 0x40, 0xe2, 0x01, 0x00}}, add: true},
		{name: "datetime-odd", args: []any{TypeDatetime, false, false, []byte{0xe8, 0x07, 5}}},
		{name: "time-negative", args: []any{TypeTime, false, false, []byte{1, 2, 0, 0, 0, 10, 20, 30}}, add: true},
		{name: "time-odd", args: []any{TypeTime, false, false, []byte{1, 2, 0}}},
		{name: "int-wrong-size", args: []any{TypeLong, false, false, []byte{1, 2, 3}}},
		{name: "null", args: []any{TypeVarchar, false, true, []byte("x")}},
		{name: "string", args: []any{TypeString, false, false, []byte("héllo\x00")}},
	}
}

func fzPatchColumnSeeds() []fzSeed {
	c := ColumnDef{Schema: []byte("pay"), Table: []byte("orders_7"), Name: []byte("amount"),
		Charset: 63, Length: 12, Type: TypeNewDecimal, Decimals: 2}
	full := c.Append(nil)
	return []fzSeed{
		{name: "avg", args: []any{full, TypeNewDecimal, byte(4)}, add: true},
		{name: "computed", args: []any{AppendColumnDef(nil, "AVG(x)", TypeDouble, 0, 21), TypeNewDecimal, byte(31)}, add: true},
		{name: "truncated", args: []any{full[:len(full)-5], TypeDouble, byte(0)}},
		{name: "empty", args: []any{[]byte{}, byte(0), byte(0)}},
	}
}

func fzTrackedSeeds() []fzSeed {
	return []fzSeed{
		{name: "last-gtid", args: []any{sysVarEntry("last_gtid", "0-1-42"), []byte("last_gtid")}, add: true},
		{name: "two-vars", args: []any{fzCat(sysVarEntry("autocommit", "ON"), sysVarEntry("LAST_GTID", "0-1-7")), []byte("autocommit")}, add: true},
		{name: "mysql-gtids", args: []any{gtidsEntry("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"), []byte("x")}},
		{name: "truncated", args: []any{sysVarEntry("last_gtid", "0-1-42")[:6], []byte("last_gtid")}},
		{name: "empty", args: []any{[]byte{}, []byte{}}},
	}
}

func fzOKTailSeeds() []fzSeed {
	return []fzSeed{
		{name: "last-gtid", args: []any{trackedOK(1, StatusAutocommit|StatusSessionStateChg, "", sysVarEntry("last_gtid", "0-1-42"))}, add: true},
		{name: "mysql-gtids", args: []any{trackedOK(1, StatusSessionStateChg, "info", gtidsEntry("uuid:1-3"))}, add: true},
		{name: "plain", args: []any{AppendOK(nil, OK{})}, add: true},
		{name: "info-only", args: []any{trackedOK(3, StatusAutocommit, "Rows matched: 3  Changed: 3  Warnings: 0", nil)}},
		{name: "state-truncated", args: []any{trackedOK(1, StatusSessionStateChg, "", sysVarEntry("last_gtid", "0-1-42"))[:12]}},
	}
}
