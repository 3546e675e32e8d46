package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Result rows decoded and encoded for the few places where sluice must look
// inside a result set (the scatter-gather merge): column definitions, text
// rows and binary (COM_STMT_EXECUTE) rows. Everything else relays packets
// without decoding them. The functions here are pure and safe for
// concurrent use; the slices they return alias their inputs as documented.

// More column definition flags the row codecs read.
const (
	FlagZerofill uint16 = 0x0040
)

// notFixedDecimals is the smallest Decimals value that means "no fixed
// number of decimals" for FLOAT and DOUBLE columns: MySQL sends 31,
// MariaDB 39.
const notFixedDecimals = 31

// maxTemporalDecimals is the most fractional digits a temporal value has.
const maxTemporalDecimals = 6

// ErrBadValue reports a text value that cannot be encoded as its column's
// binary-protocol type (an integer column holding "abc", say).
var ErrBadValue = errors.New("value does not fit its column type")

// ColumnDef is a decoded ColumnDefinition41 payload. Schema, Table and Name
// alias the payload they were parsed from; the original table and column
// names are not kept.
type ColumnDef struct {
	Schema, Table, Name []byte
	Charset             uint16
	Length              uint32
	Type                byte
	Flags               uint16
	Decimals            byte
}

// columnDefFixedLen is the length of the fixed-size fields (charset
// through decimals) a ColumnDefinition41 must announce at least.
const columnDefFixedLen = 10

// ParseColumnDef decodes a ColumnDefinition41 payload. A trailing default
// value (COM_FIELD_LIST) is ignored.
func ParseColumnDef(p []byte) (ColumnDef, error) {
	var c ColumnDef
	off, err := columnDefFixedOffset(p, &c)
	if err != nil {
		return ColumnDef{}, err
	}
	f := p[off:]
	c.Charset = binary.LittleEndian.Uint16(f)
	c.Length = binary.LittleEndian.Uint32(f[2:])
	c.Type = f[6]
	c.Flags = binary.LittleEndian.Uint16(f[7:])
	c.Decimals = f[9]
	return c, nil
}

// columnDefFixedOffset walks the six length-encoded strings of a column
// definition, filling c's names when c is not nil, and returns the offset of
// the fixed-size fields.
func columnDefFixedOffset(p []byte, c *ColumnDef) (int, error) {
	off := 0
	for i := range 6 {
		s, n, err := ReadLenEncString(p[off:])
		if err != nil {
			return 0, fmt.Errorf("column definition field %d: %w", i, err)
		}
		if c != nil {
			switch i {
			case 1:
				c.Schema = s
			case 2:
				c.Table = s
			case 4:
				c.Name = s
			}
		}
		off += n
	}
	l, isNull, n, err := ReadLenEncInt(p[off:])
	if err != nil {
		return 0, fmt.Errorf("column definition fixed-field length: %w", err)
	}
	if isNull || l < columnDefFixedLen || uint64(len(p)-off-n) < columnDefFixedLen {
		return 0, fmt.Errorf("%w: column definition fixed fields truncated", ErrMalformed)
	}
	return off + n, nil
}

// Append appends c as a ColumnDefinition41 payload (catalog "def", the
// original table and column names equal to Table and Name).
func (c *ColumnDef) Append(b []byte) []byte {
	b = AppendLenEncString(b, []byte("def"))
	b = AppendLenEncString(b, c.Schema)
	b = AppendLenEncString(b, c.Table)
	b = AppendLenEncString(b, c.Table)
	b = AppendLenEncString(b, c.Name)
	b = AppendLenEncString(b, c.Name)
	b = append(b, 0x0c)
	b = binary.LittleEndian.AppendUint16(b, c.Charset)
	b = binary.LittleEndian.AppendUint32(b, c.Length)
	b = append(b, c.Type)
	b = binary.LittleEndian.AppendUint16(b, c.Flags)
	return append(b, c.Decimals, 0, 0)
}

// PatchColumnDecimals rewrites the type and decimals of the column
// definition payload p in place: the merge relays the Parts' definitions and
// only changes what it computes differently (AVG's decimals).
func PatchColumnDecimals(p []byte, typ byte, decimals byte) error {
	off, err := columnDefFixedOffset(p, nil)
	if err != nil {
		return err
	}
	p[off+6] = typ
	p[off+9] = decimals
	return nil
}

// ParseTextRow decodes a text-protocol row of n columns into dst (reused)
// and returns it. Values alias p; NULL (0xfb) is a nil element, an empty
// string a non-nil empty one.
func ParseTextRow(p []byte, n int, dst [][]byte) ([][]byte, error) {
	dst = dst[:0]
	off := 0
	for i := range n {
		if off < len(p) && p[off] == 0xfb {
			dst = append(dst, nil)
			off++
			continue
		}
		s, m, err := ReadLenEncString(p[off:])
		if err != nil {
			return dst, fmt.Errorf("text row column %d of %d: %w", i, n, err)
		}
		dst = append(dst, s[:len(s):len(s)])
		off += m
	}
	if off != len(p) {
		return dst, fmt.Errorf("%w: text row of %d columns has %d bytes left over", ErrMalformed, n, len(p)-off)
	}
	return dst, nil
}

// AppendTextRow appends row as a text-protocol row payload (nil is NULL).
func AppendTextRow(dst []byte, row [][]byte) []byte {
	for _, v := range row {
		if v == nil {
			dst = append(dst, 0xfb)
			continue
		}
		dst = AppendLenEncString(dst, v)
	}
	return dst
}

// binaryNullBitmapLen is the length of a binary row's NULL bitmap, whose
// first two bits are unused.
func binaryNullBitmapLen(n int) int { return (n + 7 + 2) / 8 }

// ParseBinaryRow decodes a binary-protocol row of the columns cols into dst
// (reused), converting every value to the text the server would send for
// it in a text result set. Strings, blobs and decimals alias p; converted
// values are written to scratch, which is returned for reuse: both stay
// valid until scratch is passed again.
func ParseBinaryRow(p []byte, cols []ColumnDef, dst [][]byte, scratch []byte) ([][]byte, []byte, error) {
	dst = dst[:0]
	scratch = scratch[:0]
	n := len(cols)
	nb := binaryNullBitmapLen(n)
	if len(p) < 1+nb || p[0] != headerOK {
		return dst, scratch, fmt.Errorf("%w: binary row header or NULL bitmap truncated", ErrMalformed)
	}
	bitmap := p[1 : 1+nb]
	off := 1 + nb
	for i := range cols {
		c := &cols[i]
		if bitmap[(i+2)/8]&(1<<((i+2)%8)) != 0 || c.Type == TypeNull {
			dst = append(dst, nil)
			continue
		}
		vlen, err := paramValueLen(c.Type, p[off:])
		if err != nil {
			return dst, scratch, fmt.Errorf("binary row column %d %q: %w", i, c.Name, err)
		}
		v := p[off : off+vlen]
		off += vlen
		start := len(scratch)
		switch c.Type {
		case TypeDecimal, TypeNewDecimal, TypeVarchar, TypeBit, TypeJSON, TypeEnum, TypeSet,
			TypeTinyBlob, TypeMediumBlob, TypeLongBlob, TypeBlob, TypeVarString, TypeString, TypeGeometry:
			s, _, _ := ReadLenEncString(v)
			dst = append(dst, s[:len(s):len(s)])
			continue
		case TypeTiny:
			if c.Flags&FlagUnsigned != 0 {
				scratch = strconv.AppendUint(scratch, uint64(v[0]), 10)
			} else {
				scratch = strconv.AppendInt(scratch, int64(int8(v[0])), 10)
			}
		case TypeShort:
			u := binary.LittleEndian.Uint16(v)
			if c.Flags&FlagUnsigned != 0 {
				scratch = strconv.AppendUint(scratch, uint64(u), 10)
			} else {
				scratch = strconv.AppendInt(scratch, int64(int16(u)), 10)
			}
		case TypeYear:
			scratch = appendPadded(scratch, uint64(binary.LittleEndian.Uint16(v)), 4)
		case TypeLong, TypeInt24:
			u := binary.LittleEndian.Uint32(v)
			if c.Flags&FlagUnsigned != 0 {
				scratch = strconv.AppendUint(scratch, uint64(u), 10)
			} else {
				scratch = strconv.AppendInt(scratch, int64(int32(u)), 10)
			}
		case TypeLongLong:
			u := binary.LittleEndian.Uint64(v)
			if c.Flags&FlagUnsigned != 0 {
				scratch = strconv.AppendUint(scratch, u, 10)
			} else {
				scratch = strconv.AppendInt(scratch, int64(u), 10)
			}
		case TypeFloat:
			f := math.Float32frombits(binary.LittleEndian.Uint32(v))
			if scratch, err = appendFloatText(scratch, float64(f), 32, c.Decimals); err != nil {
				return dst, scratch, fmt.Errorf("binary row column %d %q: %w", i, c.Name, err)
			}
		case TypeDouble:
			f := math.Float64frombits(binary.LittleEndian.Uint64(v))
			if scratch, err = appendFloatText(scratch, f, 64, c.Decimals); err != nil {
				return dst, scratch, fmt.Errorf("binary row column %d %q: %w", i, c.Name, err)
			}
		case TypeTime, TypeTime2:
			if scratch, err = appendTimeText(scratch, v[1:], c.Decimals); err != nil {
				return dst, scratch, fmt.Errorf("binary row column %d %q: %w", i, c.Name, err)
			}
		default: // DATE, DATETIME, TIMESTAMP and their variants
			if scratch, err = appendDatetimeText(scratch, v[1:], c.Type, c.Decimals); err != nil {
				return dst, scratch, fmt.Errorf("binary row column %d %q: %w", i, c.Name, err)
			}
		}
		if c.Flags&FlagZerofill != 0 {
			switch c.Type {
			case TypeTiny, TypeShort, TypeLong, TypeInt24, TypeLongLong, TypeFloat, TypeDouble:
				scratch = zerofill(scratch, start, c.Length)
			}
		}
		// An earlier value may point into scratch's old array when this
		// append moved it; the old array is never written again, so such
		// a value stays right.
		dst = append(dst, scratch[start:len(scratch):len(scratch)])
	}
	if off != len(p) {
		return dst, scratch, fmt.Errorf("%w: binary row of %d columns has %d bytes left over", ErrMalformed, n, len(p)-off)
	}
	return dst, scratch, nil
}

// zerofill left-pads the number at b[start:] with zeros to width, as the
// server shows ZEROFILL columns. Negative numbers (not stored by ZEROFILL
// columns) and absurd widths are left alone.
func zerofill(b []byte, start int, width uint32) []byte {
	n := len(b) - start
	if width > 255 || n >= int(width) || (n > 0 && b[start] == '-') {
		return b
	}
	pad := int(width) - n
	for range pad {
		b = append(b, 0)
	}
	copy(b[start+pad:], b[start:start+n])
	for i := start; i < start+pad; i++ {
		b[i] = '0'
	}
	return b
}

// appendPadded appends v in decimal with at least width digits.
func appendPadded(b []byte, v uint64, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendUint(tmp[:0], v, 10)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// appendFrac appends the fraction ".ffffff" of micro (0..999999) cut to
// decimals digits; decimals beyond 6 (no fixed scale) show all six digits
// when micro is not zero.
func appendFrac(b []byte, micro uint32, decimals byte) []byte {
	d := int(decimals)
	if d > maxTemporalDecimals {
		if micro == 0 {
			return b
		}
		d = maxTemporalDecimals
	}
	if d == 0 {
		return b
	}
	var tmp [6]byte
	for i := 5; i >= 0; i-- {
		tmp[i] = byte('0' + micro%10)
		micro /= 10
	}
	b = append(b, '.')
	return append(b, tmp[:d]...)
}

// appendDatetimeText converts the binary DATE/DATETIME/TIMESTAMP value v
// (after its length byte) to text.
func appendDatetimeText(b []byte, v []byte, typ byte, decimals byte) ([]byte, error) {
	var year uint16
	var month, day, hour, minute, second byte
	var micro uint32
	if len(v) >= 4 {
		year = binary.LittleEndian.Uint16(v)
		month, day = v[2], v[3]
	}
	if len(v) >= 7 {
		hour, minute, second = v[4], v[5], v[6]
	}
	if len(v) >= 11 {
		micro = binary.LittleEndian.Uint32(v[7:])
	}
	if month > 12 || day > 31 || hour > 23 || minute > 59 || second > 59 || micro > 999999 {
		return b, fmt.Errorf("%w: date or time field out of range", ErrMalformed)
	}
	b = appendPadded(b, uint64(year), 4)
	b = append(b, '-')
	b = appendPadded(b, uint64(month), 2)
	b = append(b, '-')
	b = appendPadded(b, uint64(day), 2)
	if typ == TypeDate || typ == TypeNewDate {
		return b, nil
	}
	b = append(b, ' ')
	b = appendPadded(b, uint64(hour), 2)
	b = append(b, ':')
	b = appendPadded(b, uint64(minute), 2)
	b = append(b, ':')
	b = appendPadded(b, uint64(second), 2)
	return appendFrac(b, micro, decimals), nil
}

// appendTimeText converts the binary TIME value v (after its length byte)
// to text: [-]HH:MM:SS[.ffffff], days folded into the hours.
func appendTimeText(b []byte, v []byte, decimals byte) ([]byte, error) {
	var neg bool
	var days uint32
	var hour, minute, second byte
	var micro uint32
	if len(v) >= 8 {
		neg = v[0] != 0
		days = binary.LittleEndian.Uint32(v[1:])
		hour, minute, second = v[5], v[6], v[7]
	}
	if len(v) >= 12 {
		micro = binary.LittleEndian.Uint32(v[8:])
	}
	if hour > 23 || minute > 59 || second > 59 || micro > 999999 {
		return b, fmt.Errorf("%w: time field out of range", ErrMalformed)
	}
	if neg {
		b = append(b, '-')
	}
	b = appendPadded(b, uint64(days)*24+uint64(hour), 2)
	b = append(b, ':')
	b = appendPadded(b, uint64(minute), 2)
	b = append(b, ':')
	b = appendPadded(b, uint64(second), 2)
	return appendFrac(b, micro, decimals), nil
}

// appendFloatText appends f as the server writes a FLOAT or DOUBLE in a
// text result: with exactly decimals digits when the column has a fixed
// scale, otherwise the shortest digits that read back as the same value,
// in positional notation for decimal exponents -4 .. 14 and as 1.5e-7 or
// 1e15 outside them. That matches the server for the values seen in
// practice; the server's own cut-over rule is not reproduced digit for
// digit at the edges.
func appendFloatText(b []byte, f float64, bitSize int, decimals byte) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, fmt.Errorf("%w: floating-point value is not a number", ErrMalformed)
	}
	if decimals < notFixedDecimals {
		return strconv.AppendFloat(b, f, 'f', int(decimals), bitSize), nil
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'e', -1, bitSize)
	// b[start:] is [-]d[.ddd]e±XX; read the exponent back.
	e := len(b) - 1
	for b[e] != 'e' {
		e--
	}
	exp, _ := strconv.Atoi(string(b[e+1:]))
	if exp >= -4 && exp < 15 {
		return strconv.AppendFloat(b[:start], f, 'f', -1, bitSize), nil
	}
	// Rewrite the exponent the server's way: no '+', no leading zeros.
	b = b[:e+1]
	if exp < 0 {
		b = append(b, '-')
		exp = -exp
	}
	return strconv.AppendInt(b, int64(exp), 10), nil
}

// AppendBinaryRow appends row, in text form (nil is NULL), as a
// binary-protocol row of the columns cols: the reverse of ParseBinaryRow.
// A value its column type cannot hold is an error wrapping ErrBadValue.
func AppendBinaryRow(dst []byte, row [][]byte, cols []ColumnDef) ([]byte, error) {
	if len(row) != len(cols) {
		return dst, fmt.Errorf("%w: row of %d values for %d columns", ErrBadValue, len(row), len(cols))
	}
	dst = append(dst, headerOK)
	bm := len(dst)
	for range binaryNullBitmapLen(len(cols)) {
		dst = append(dst, 0)
	}
	for i, v := range row {
		c := &cols[i]
		if v == nil || c.Type == TypeNull {
			dst[bm+(i+2)/8] |= 1 << ((i + 2) % 8)
			continue
		}
		var err error
		if dst, err = appendBinaryValue(dst, v, c); err != nil {
			return dst, fmt.Errorf("column %d %q (type 0x%02x) value %q: %w", i, c.Name, c.Type, v, err)
		}
	}
	return dst, nil
}

func appendBinaryValue(b []byte, v []byte, c *ColumnDef) ([]byte, error) {
	unsigned := c.Flags&FlagUnsigned != 0
	switch c.Type {
	case TypeTiny:
		x, err := parseIntText(v, unsigned, 8)
		return append(b, byte(x)), err
	case TypeShort, TypeYear:
		x, err := parseIntText(v, unsigned || c.Type == TypeYear, 16)
		return binary.LittleEndian.AppendUint16(b, uint16(x)), err
	case TypeLong, TypeInt24:
		x, err := parseIntText(v, unsigned, 32)
		return binary.LittleEndian.AppendUint32(b, uint32(x)), err
	case TypeLongLong:
		x, err := parseIntText(v, unsigned, 64)
		return binary.LittleEndian.AppendUint64(b, x), err
	case TypeFloat:
		f, err := strconv.ParseFloat(string(v), 32)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return b, fmt.Errorf("%w: not a FLOAT", ErrBadValue)
		}
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(f))), nil
	case TypeDouble:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return b, fmt.Errorf("%w: not a DOUBLE", ErrBadValue)
		}
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), nil
	case TypeTime, TypeTime2:
		return appendBinaryTime(b, v)
	case TypeDate, TypeNewDate, TypeDatetime, TypeTimestamp, TypeDatetime2, TypeTimestamp2:
		return appendBinaryDatetime(b, v)
	default:
		return AppendLenEncString(b, v), nil
	}
}

// parseIntText parses a decimal integer that must fit bits bits, signed
// or unsigned, and returns its two's-complement bits.
func parseIntText(v []byte, unsigned bool, bits int) (uint64, error) {
	if unsigned {
		x, ok := ParseUintDigits(v)
		if !ok || (bits < 64 && x >= 1<<bits) {
			return 0, fmt.Errorf("%w: not an unsigned %d-bit integer", ErrBadValue, bits)
		}
		return x, nil
	}
	neg := len(v) > 0 && v[0] == '-'
	digits := v
	if neg {
		digits = v[1:]
	}
	x, ok := ParseUintDigits(digits)
	limit := uint64(1) << (bits - 1) // magnitude of the smallest value
	if !ok || x > limit || (!neg && x == limit) {
		return 0, fmt.Errorf("%w: not a signed %d-bit integer", ErrBadValue, bits)
	}
	if neg {
		return -x, nil
	}
	return x, nil
}

// ParseUintDigits parses one or more decimal digits (nothing else) into a
// uint64, reporting false for anything else or an overflow.
func ParseUintDigits(v []byte) (uint64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var x uint64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if x > (math.MaxUint64-d)/10 {
			return 0, false
		}
		x = x*10 + d
	}
	return x, true
}

// textFields splits temporal text at its separators: numbers separated by
// one of seps in order, each a run of digits. It returns how many fields
// were read; a fraction after the last field is returned as microseconds.
func textFields(v []byte, seps string, out []uint64) (n int, micro uint32, err error) {
	i := 0
	for n < len(out) {
		j := i
		for j < len(v) && v[j] >= '0' && v[j] <= '9' {
			j++
		}
		x, ok := ParseUintDigits(v[i:j])
		if !ok {
			return n, 0, fmt.Errorf("%w: malformed date or time", ErrBadValue)
		}
		out[n] = x
		n++
		i = j
		if i == len(v) {
			return n, 0, nil
		}
		if n < len(out) && v[i] == seps[n-1] {
			i++
			continue
		}
		break
	}
	if n != len(out) || v[i] != '.' || len(v)-i-1 > maxTemporalDecimals || len(v)-i-1 == 0 {
		return n, 0, fmt.Errorf("%w: malformed date or time", ErrBadValue)
	}
	frac := v[i+1:]
	f, ok := ParseUintDigits(frac)
	if !ok {
		return n, 0, fmt.Errorf("%w: malformed fraction of a second", ErrBadValue)
	}
	for range maxTemporalDecimals - len(frac) {
		f *= 10
	}
	return n, uint32(f), nil
}

// appendBinaryDatetime encodes "YYYY-MM-DD[ HH:MM:SS[.ffffff]]" in the
// shortest binary form the server uses for the value.
func appendBinaryDatetime(b []byte, v []byte) ([]byte, error) {
	var f [6]uint64
	n, micro, err := textFields(v, "-- ::", f[:])
	if err != nil {
		return b, err
	}
	if (n != 3 && n != 6) || (micro != 0 && n != 6) ||
		f[0] > math.MaxUint16 || f[1] > 12 || f[2] > 31 || f[3] > 23 || f[4] > 59 || f[5] > 59 {
		return b, fmt.Errorf("%w: not a date or datetime", ErrBadValue)
	}
	var l byte
	switch {
	case micro != 0:
		l = 11
	case f[3] != 0 || f[4] != 0 || f[5] != 0:
		l = 7
	case f[0] != 0 || f[1] != 0 || f[2] != 0:
		l = 4
	}
	b = append(b, l)
	if l >= 4 {
		b = binary.LittleEndian.AppendUint16(b, uint16(f[0]))
		b = append(b, byte(f[1]), byte(f[2]))
	}
	if l >= 7 {
		b = append(b, byte(f[3]), byte(f[4]), byte(f[5]))
	}
	if l == 11 {
		b = binary.LittleEndian.AppendUint32(b, micro)
	}
	return b, nil
}

// appendBinaryTime encodes "[-]H+:MM:SS[.ffffff]" in the shortest binary
// form the server uses for the value.
func appendBinaryTime(b []byte, v []byte) ([]byte, error) {
	neg := len(v) > 0 && v[0] == '-'
	if neg {
		v = v[1:]
	}
	var f [3]uint64
	n, micro, err := textFields(v, "::", f[:])
	if err != nil {
		return b, err
	}
	if n != 3 || f[0]/24 > math.MaxUint32 || f[1] > 59 || f[2] > 59 {
		return b, fmt.Errorf("%w: not a time", ErrBadValue)
	}
	days, hour := f[0]/24, f[0]%24
	var l byte
	switch {
	case micro != 0:
		l = 12
	case neg || f[0] != 0 || f[1] != 0 || f[2] != 0:
		l = 8
	}
	b = append(b, l)
	if l >= 8 {
		var sign byte
		if neg {
			sign = 1
		}
		b = append(b, sign)
		b = binary.LittleEndian.AppendUint32(b, uint32(days))
		b = append(b, byte(hour), byte(f[1]), byte(f[2]))
	}
	if l == 12 {
		b = binary.LittleEndian.AppendUint32(b, micro)
	}
	return b, nil
}
