package shard

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/sluice-proxy/sluice/protocol"
)

// MySQL column type bytes and flags the merge reads (the same values as
// protocol's Type* and Flag* constants; shard does not import protocol).
const (
	typeDecimal    byte = 0x00
	typeTiny       byte = 0x01
	typeShort      byte = 0x02
	typeLong       byte = 0x03
	typeFloat      byte = 0x04
	typeDouble     byte = 0x05
	typeTimestamp  byte = 0x07
	typeLongLong   byte = 0x08
	typeInt24      byte = 0x09
	typeDate       byte = 0x0a
	typeTime       byte = 0x0b
	typeDatetime   byte = 0x0c
	typeYear       byte = 0x0d
	typeNewDate    byte = 0x0e
	typeBit        byte = 0x10
	typeTimestamp2 byte = 0x11
	typeDatetime2  byte = 0x12
	typeTime2      byte = 0x13
	typeNewDecimal byte = 0xf6

	typeJSON       byte = 0xf5
	typeEnum       byte = 0xf7
	typeSet        byte = 0xf8
	typeTinyBlob   byte = 0xf9
	typeMediumBlob byte = 0xfa
	typeLongBlob   byte = 0xfb
	typeBlob       byte = 0xfc
	typeVarString  byte = 0xfd
	typeString     byte = 0xfe
	typeVarchar    byte = 0x0f

	flagUnsigned uint16 = 0x0020
	flagEnum     uint16 = 0x0100
	flagSet      uint16 = 0x0800

	binaryCollation = 63
	// notFixedDecimals and above mean a FLOAT or DOUBLE has no fixed
	// scale (MySQL sends 31, MariaDB 39).
	notFixedDecimals = 31
)

// cmpKind is how the values of one column compare.
type cmpKind uint8

const (
	kindBytes    cmpKind = iota // binary strings, BIT: byte-wise
	kindWeight                  // text: by the server's sort key in a hidden column
	kindPosition                // ENUM, SET in ORDER BY and GROUP BY: by index or bits
	kindInt                     // signed integer
	kindUint                    // unsigned integer
	kindDecimal                 // exact decimal
	kindFloat                   // float64
	kindTemporal                // DATE, DATETIME, TIMESTAMP: fixed-width text
	kindTime                    // TIME: signed, hours of varying width
)

// columnKind maps a result column to its comparison rules; position
// tells that the merge has the column's ENUM index or SET bits.
func columnKind(c Column, position bool) cmpKind {
	switch c.Type {
	case typeTiny, typeShort, typeInt24, typeLong, typeLongLong:
		if c.Flags&flagUnsigned != 0 {
			return kindUint
		}
		return kindInt
	case typeYear:
		return kindUint
	case typeDecimal, typeNewDecimal:
		return kindDecimal
	case typeFloat, typeDouble:
		return kindFloat
	case typeDate, typeNewDate, typeDatetime, typeDatetime2, typeTimestamp, typeTimestamp2:
		return kindTemporal
	case typeTime, typeTime2:
		return kindTime
	case typeVarchar, typeVarString, typeString, typeEnum, typeSet, typeJSON,
		typeTinyBlob, typeMediumBlob, typeLongBlob, typeBlob:
		if c.Charset == binaryCollation {
			return kindBytes
		}
		if position && (c.Flags&(flagEnum|flagSet) != 0 || c.Type == typeEnum || c.Type == typeSet) {
			return kindPosition
		}
		return kindWeight
	}
	return kindBytes
}

// keyVal is one value parsed for comparison. Its slices alias the row it
// was parsed from.
type keyVal struct {
	null bool
	neg  bool   // kindDecimal, kindTime
	i    int64  // kindInt; kindTime: length of the hours
	u    uint64 // kindUint
	f    float64
	b    []byte // bytes; kindWeight: sort key; kindDecimal: integer digits without leading zeros; kindTime: magnitude
	frac []byte // kindDecimal: fraction digits without trailing zeros; kindWeight: the pad sort key
}

// parseKey parses v (nil is NULL) by the rules of kind k.
func parseKey(k cmpKind, v []byte, kv *keyVal) error {
	*kv = keyVal{}
	if v == nil {
		kv.null = true
		return nil
	}
	switch k {
	case kindInt:
		x, ok := parseInt(v)
		if !ok {
			return fmt.Errorf("%w: %q is not an integer", ErrMergeInput, v)
		}
		kv.i = x
	case kindUint, kindPosition:
		x, ok := parseUint(v)
		if !ok {
			return fmt.Errorf("%w: %q is not an unsigned integer", ErrMergeInput, v)
		}
		kv.u = x
	case kindFloat:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return fmt.Errorf("%w: %q is not a floating-point number", ErrMergeInput, v)
		}
		if f == 0 {
			f = 0 // -0 equals 0
		}
		kv.f = f
	case kindDecimal:
		neg, ip, fp, ok := splitDecimal(v)
		if !ok {
			return fmt.Errorf("%w: %q is not a decimal", ErrMergeInput, v)
		}
		for len(ip) > 0 && ip[0] == '0' {
			ip = ip[1:]
		}
		for len(fp) > 0 && fp[len(fp)-1] == '0' {
			fp = fp[:len(fp)-1]
		}
		kv.neg = neg && (len(ip) > 0 || len(fp) > 0)
		kv.b, kv.frac = ip, fp
	case kindTime:
		if len(v) > 0 && v[0] == '-' {
			kv.neg = true
			v = v[1:]
		}
		h := bytes.IndexByte(v, ':')
		if h < 0 {
			h = len(v)
		}
		kv.b, kv.i = v, int64(h)
	default:
		kv.b = v
	}
	return nil
}

// compareKeys orders two parsed values of kind k; NULL is the smallest.
func compareKeys(k cmpKind, a, b *keyVal) int {
	if a.null || b.null {
		switch {
		case a.null && b.null:
			return 0
		case a.null:
			return -1
		}
		return 1
	}
	switch k {
	case kindInt:
		return cmpOrdered(a.i, b.i)
	case kindUint, kindPosition:
		return cmpOrdered(a.u, b.u)
	case kindFloat:
		return cmpOrdered(a.f, b.f)
	case kindDecimal:
		if a.neg != b.neg {
			if a.neg {
				return -1
			}
			return 1
		}
		c := cmpOrdered(len(a.b), len(b.b))
		if c == 0 {
			c = bytes.Compare(a.b, b.b)
		}
		if c == 0 {
			c = bytes.Compare(a.frac, b.frac)
		}
		if a.neg {
			return -c
		}
		return c
	case kindTime:
		if a.neg != b.neg {
			if a.neg {
				return -1
			}
			return 1
		}
		c := cmpOrdered(a.i, b.i)
		if c == 0 {
			c = bytes.Compare(a.b, b.b)
		}
		if a.neg {
			return -c
		}
		return c
	case kindWeight:
		return padCompare(a.b, b.b, a.frac)
	}
	return bytes.Compare(a.b, b.b)
}

// padCompare orders two sort keys of one collation as the server's
// filesort does: byte-wise, the shorter extended with pad, the sort key of
// a space, when the collation is PAD SPACE (pad is empty for NO PAD).
func padCompare(a, b, pad []byte) int {
	n := min(len(a), len(b))
	if c := bytes.Compare(a[:n], b[:n]); c != 0 {
		return c
	}
	if len(a) == len(b) {
		return 0
	}
	if len(pad) == 0 {
		return cmpOrdered(len(a), len(b))
	}
	sign, rest := 1, a[n:]
	if len(b) > len(a) {
		sign, rest = -1, b[n:]
	}
	for len(rest) > 0 {
		k := min(len(rest), len(pad))
		if c := bytes.Compare(rest[:k], pad[:k]); c != 0 {
			return sign * c
		}
		if k < len(pad) {
			// A sort key that ends inside a pad unit is longer than
			// nothing: the padding goes on.
			return sign * cmpOrdered(0, 1)
		}
		rest = rest[k:]
	}
	return 0
}

// trimPadWeight drops the whole pad units at the end of sort key w: what
// is left is equal for two keys exactly when padCompare says they are.
func trimPadWeight(w, pad []byte) []byte {
	if len(pad) == 0 {
		return w
	}
	for len(w) >= len(pad) && bytes.Equal(w[len(w)-len(pad):], pad) {
		w = w[:len(w)-len(pad)]
	}
	return w
}

func cmpOrdered[T int | int64 | uint64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// appendKey appends to dst an encoding of v that is equal for two values
// exactly when compareKeys says they are equal, and that can be
// concatenated with others without ambiguity.
func appendKey(dst []byte, k cmpKind, kv *keyVal) []byte {
	if kv.null {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	switch k {
	case kindInt:
		return binary.BigEndian.AppendUint64(dst, uint64(kv.i))
	case kindUint, kindPosition:
		return binary.BigEndian.AppendUint64(dst, kv.u)
	case kindFloat:
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(kv.f))
	case kindDecimal:
		dst = append(dst, signByte(kv.neg))
		dst = binary.AppendUvarint(dst, uint64(len(kv.b)))
		dst = append(dst, kv.b...)
		dst = binary.AppendUvarint(dst, uint64(len(kv.frac)))
		return append(dst, kv.frac...)
	case kindTime:
		dst = append(dst, signByte(kv.neg))
	case kindWeight:
		return appendEscaped(dst, trimPadWeight(kv.b, kv.frac))
	}
	return appendEscaped(dst, kv.b)
}

func signByte(neg bool) byte {
	if neg {
		return 1
	}
	return 0
}

// appendEscaped appends b with its zero bytes doubled as 0x00 0x01 and a
// 0x00 0x00 terminator, so encodings concatenate unambiguously.
func appendEscaped(dst, b []byte) []byte {
	for _, c := range b {
		if c == 0 {
			dst = append(dst, 0, 1)
			continue
		}
		dst = append(dst, c)
	}
	return append(dst, 0, 0)
}

// parseUint parses decimal digits (an optional '+' first) into a uint64.
func parseUint(v []byte) (uint64, bool) {
	if len(v) > 0 && v[0] == '+' {
		v = v[1:]
	}
	return protocol.ParseUintDigits(v)
}

// parseInt parses an optionally signed decimal integer into an int64.
func parseInt(v []byte) (int64, bool) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	u, ok := parseUint(v)
	if !ok || (neg && u > 1<<63) || (!neg && u >= 1<<63) {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// splitDecimal splits [-+]ddd[.ddd] into sign, integer and fraction
// digits; at least one digit is required.
func splitDecimal(v []byte) (neg bool, ip, fp []byte, ok bool) {
	if len(v) > 0 && (v[0] == '-' || v[0] == '+') {
		neg = v[0] == '-'
		v = v[1:]
	}
	ip = v
	if dot := bytes.IndexByte(v, '.'); dot >= 0 {
		ip, fp = v[:dot], v[dot+1:]
	}
	if len(ip)+len(fp) == 0 {
		return false, nil, nil, false
	}
	for _, c := range ip {
		if c < '0' || c > '9' {
			return false, nil, nil, false
		}
	}
	for _, c := range fp {
		if c < '0' || c > '9' {
			return false, nil, nil, false
		}
	}
	return neg, ip, fp, true
}

// appendFloat writes f as the server writes a DOUBLE: with decimals
// digits when the column has a fixed scale, else the shortest digits that
// read back as f, positional for decimal exponents -4 .. 14 and as 1e15
// or 1.5e-7 outside them.
func appendFloat(b []byte, f float64, decimals int) []byte {
	if decimals < notFixedDecimals {
		return strconv.AppendFloat(b, f, 'f', decimals, 64)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'e', -1, 64)
	e := bytes.LastIndexByte(b[start:], 'e') + start
	exp, _ := strconv.Atoi(string(b[e+1:]))
	if exp >= -4 && exp < 15 {
		return strconv.AppendFloat(b[:start], f, 'f', -1, 64)
	}
	b = b[:e+1]
	if exp < 0 {
		b = append(b, '-')
		exp = -exp
	}
	return strconv.AppendInt(b, int64(exp), 10)
}
