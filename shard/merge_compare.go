package shard

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

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

	flagBinary   uint16 = 0x0080
	flagUnsigned uint16 = 0x0020

	binaryCollation = 63
	// notFixedDecimals and above mean a FLOAT or DOUBLE has no fixed
	// scale (MySQL sends 31, MariaDB 39).
	notFixedDecimals = 31
	// maxDecimalScale caps the scale of the AVG the merge computes, as
	// MySQL caps DECIMAL scales at 30.
	maxDecimalScale = 30
)

// cmpKind is how the values of one column compare.
type cmpKind uint8

const (
	kindText      cmpKind = iota // case-insensitive, trailing spaces ignored
	kindBytes                    // binary collation: byte-wise
	kindBin                      // a _bin collation: byte-wise, trailing spaces ignored
	kindTextNoPad                // a _nopad_ci collation: case-insensitive, trailing spaces count
	kindInt                      // signed integer
	kindUint                     // unsigned integer
	kindDecimal                  // exact decimal
	kindFloat                    // float64
	kindTemporal                 // DATE, DATETIME, TIMESTAMP: fixed-width text
	kindTime                     // TIME: signed, hours of varying width
)

// columnKind maps a result column to its comparison rules.
func columnKind(c Column) cmpKind {
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
	case typeBit:
		return kindBytes
	}
	if k := collationKind(c.Charset); k != kindText || c.Flags&flagBinary == 0 {
		return k
	}
	// The server reports a text column in the connection's collation and
	// marks one of a _bin collation with the BINARY flag.
	return kindBin
}

// padBinCollations are the MariaDB and MySQL collation ids named *_bin
// that pad with spaces: they order by code point (the bytes of the UTF-8
// text a result carries), case-sensitively. MariaDB numbers the NO PAD
// variant of collation id as id + 1024.
var padBinCollations = [128]bool{
	43: true, 46: true, 47: true, 50: true, 53: true, 55: true, 58: true, 61: true, 62: true,
	64: true, 65: true, 66: true, 67: true, 68: true, 69: true, 70: true, 71: true, 72: true,
	73: true, 74: true, 75: true, 77: true, 78: true, 79: true, 80: true, 81: true, 82: true,
	83: true, 84: true, 85: true, 86: true, 87: true, 88: true, 89: true, 90: true, 91: true,
	93: true, 96: true, 98: true,
}

// mysql0900Bin is MySQL 8's utf8mb4_0900_bin, a NO PAD binary order.
const mysql0900Bin = 309

// collationKind maps a text column's collation id to its comparison rules:
// a case-sensitive _bin collation must not fold case (GROUP BY and
// DISTINCT would merge 'a' and 'A', ORDER BY would interleave them), and a
// NO PAD collation must not ignore trailing spaces. Other collations fold
// case as the common _ci ones do.
func collationKind(id uint16) cmpKind {
	switch {
	case id == binaryCollation || id == mysql0900Bin:
		return kindBytes
	case id < 128 && padBinCollations[id]:
		return kindBin
	case id >= 1024 && id < 1024+128 && padBinCollations[id-1024]:
		return kindBytes
	case id >= 1024 && id < 2048:
		return kindTextNoPad
	}
	return kindText
}

// keyVal is one value parsed for comparison. Its slices alias the row it
// was parsed from.
type keyVal struct {
	null bool
	neg  bool   // kindDecimal, kindTime
	i    int64  // kindInt; kindTime: length of the hours
	u    uint64 // kindUint
	f    float64
	b    []byte // text; kindDecimal: integer digits without leading zeros; kindTime: magnitude
	frac []byte // kindDecimal: fraction digits without trailing zeros
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
	case kindUint:
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
	case kindUint:
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
	case kindText:
		return foldCompare(a.b, b.b)
	case kindTextNoPad:
		return foldCompareNoPad(a.b, b.b)
	case kindBin:
		return bytes.Compare(trimPad(a.b), trimPad(b.b))
	}
	return bytes.Compare(a.b, b.b)
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
func appendKey(dst []byte, k cmpKind, v []byte) ([]byte, error) {
	var kv keyVal
	if err := parseKey(k, v, &kv); err != nil {
		return dst, err
	}
	if kv.null {
		return append(dst, 0), nil
	}
	dst = append(dst, 1)
	switch k {
	case kindInt:
		return binary.BigEndian.AppendUint64(dst, uint64(kv.i)), nil
	case kindUint:
		return binary.BigEndian.AppendUint64(dst, kv.u), nil
	case kindFloat:
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(kv.f)), nil
	case kindDecimal:
		dst = append(dst, signByte(kv.neg))
		dst = binary.AppendUvarint(dst, uint64(len(kv.b)))
		dst = append(dst, kv.b...)
		dst = binary.AppendUvarint(dst, uint64(len(kv.frac)))
		return append(dst, kv.frac...), nil
	case kindTime:
		dst = append(dst, signByte(kv.neg))
	case kindText:
		dst = appendFolded(dst, trimPad(kv.b))
		return append(dst, 0, 0), nil
	case kindTextNoPad:
		dst = appendFolded(dst, kv.b)
		return append(dst, 0, 0), nil
	case kindBin:
		return appendEscaped(dst, trimPad(kv.b)), nil
	}
	return appendEscaped(dst, kv.b), nil
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

// trimPad drops trailing spaces: the PAD SPACE collations compare 'a' and
// 'a  ' equal.
func trimPad(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// foldRune maps r to its weight in a case- and accent-insensitive
// comparison: ASCII letters to upper case; other runes through lower then
// upper case, which unites each simple case-folding orbit common in
// practice (k, K and the Kelvin sign; s, S and the long s; the three
// sigmas), and Latin letters with diacritics to their base letter (é, É,
// è and e weigh the same; ß weighs as s), as utf8mb4_general_ci, the
// servers' default collation, compares them. It is an approximation of
// that collation's weight table, exact for ASCII and the Latin letters
// that decompose into a base letter and marks.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			return r - ('a' - 'A')
		}
		return r
	}
	r = unicode.ToUpper(unicode.ToLower(r))
	if r == 'ß' || r == 'ẞ' {
		return 'S'
	}
	if r < 0x2B0 { // Latin-1 Supplement and Latin Extended-A and -B
		var buf [utf8.UTFMax]byte
		n := utf8.EncodeRune(buf[:], r)
		if d := norm.NFD.Properties(buf[:n]).Decomposition(); len(d) > 0 && d[0] < utf8.RuneSelf {
			return foldRune(rune(d[0]))
		}
	}
	return r
}

// nextFolded decodes the rune at the start of b and folds it. A byte that
// is not valid UTF-8 maps to a value above every rune, so it equals only
// itself.
func nextFolded(b []byte) (rune, int) {
	c := b[0]
	if c < utf8.RuneSelf {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		return rune(c), 1
	}
	r, n := utf8.DecodeRune(b)
	if r == utf8.RuneError && n == 1 {
		return unicode.MaxRune + 1 + rune(c), 1
	}
	return foldRune(r), n
}

// foldCompare compares two strings case-insensitively, ignoring trailing
// spaces.
func foldCompare(a, b []byte) int {
	return foldCompareNoPad(trimPad(a), trimPad(b))
}

// foldCompareNoPad compares two strings case-insensitively, trailing
// spaces included (the NO PAD collations).
func foldCompareNoPad(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := nextFolded(a)
		rb, nb := nextFolded(b)
		if ra != rb {
			return cmpOrdered(int(ra), int(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return cmpOrdered(len(a), len(b))
}

// appendFolded appends the folded form of b (callers drop trailing spaces
// first for PAD SPACE collations), escaped as appendEscaped does but
// without the terminator.
func appendFolded(dst, b []byte) []byte {
	for len(b) > 0 {
		r, n := nextFolded(b)
		switch {
		case r > unicode.MaxRune:
			dst = append(dst, 0xff, b[0])
		case r == 0:
			dst = append(dst, 0, 1)
		default:
			dst = utf8.AppendRune(dst, r)
		}
		b = b[n:]
	}
	return dst
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
