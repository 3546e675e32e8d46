package protocol

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestExecuteParams(t *testing.T) {
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	le64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	params := []fzParam{
		{typ: TypeLongLong, val: le64(uint64(1<<63 + 5))},              // signed: negative
		{typ: TypeLongLong, flags: 0x80, val: le64(math.MaxUint64)},    // unsigned
		{typ: TypeLong, val: le32(9527)},                               // int
		{typ: TypeDouble, val: le64(math.Float64bits(2.5))},            // double
		{typ: TypeVarString, val: fzLenEnc([]byte("it's"))},            // string
		{typ: TypeLong, null: true},                                    // NULL
		{typ: TypeDatetime, val: []byte{7, 0xea, 0x07, 1, 2, 3, 4, 5}}, // 2026-01-02 03:04:05
		{typ: TypeDate, val: []byte{4, 0xea, 0x07, 12, 31}},            // 2026-12-31
		{typ: TypeVarString},                                           // long data
	}
	want := []string{"-9223372036854775803", "18446744073709551615", "9527", "2.5", "it's", "", "2026-01-02 03:04:05", "2026-12-31", "chunk"}
	p, types := fzExecute(1, true, params)
	e, err := ParseExecute(p, len(params), nil, func(i int) bool { return i == 8 })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = ExecuteParams(p, e, len(params), types, func(i int) ([]byte, bool) {
		return []byte("chunk"), i == 8
	}, func(i int, v Param) error {
		if (i == 5) != v.Null {
			t.Errorf("parameter %d: Null %v", i, v.Null)
		}
		got = append(got, string(v.AppendText(nil)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("parameter %d: %q, want %q", i, got[i], want[i])
		}
	}
}
