package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Param is one decoded COM_STMT_EXECUTE parameter value.
type Param struct {
	// Type is the parameter's type byte and Unsigned its unsigned flag.
	Type     byte
	Unsigned bool
	// Null marks an SQL NULL.
	Null bool
	// Raw is the value as the packet encodes it, without a length prefix:
	// 1, 2, 4 or 8 little-endian bytes for numbers, the temporal fields for
	// dates and times, the bytes of strings, decimals and blobs. It
	// aliases the packet (or the long data buffer).
	Raw []byte
}

// IsInteger reports whether the value is one of the integer types.
func (v Param) IsInteger() bool {
	switch v.Type {
	case TypeTiny, TypeShort, TypeYear, TypeLong, TypeInt24, TypeLongLong:
		return true
	}
	return false
}

// IsFloat reports whether the value is a FLOAT or DOUBLE.
func (v Param) IsFloat() bool { return v.Type == TypeFloat || v.Type == TypeDouble }

// Int returns an integer value sign-extended (or, when Unsigned, as its
// unsigned bits reinterpreted: use Uint for those).
func (v Param) Int() int64 {
	switch len(v.Raw) {
	case 1:
		if v.Unsigned {
			return int64(v.Raw[0])
		}
		return int64(int8(v.Raw[0]))
	case 2:
		u := binary.LittleEndian.Uint16(v.Raw)
		if v.Unsigned {
			return int64(u)
		}
		return int64(int16(u))
	case 4:
		u := binary.LittleEndian.Uint32(v.Raw)
		if v.Unsigned {
			return int64(u)
		}
		return int64(int32(u))
	case 8:
		return int64(binary.LittleEndian.Uint64(v.Raw))
	}
	return 0
}

// Uint returns an unsigned integer value.
func (v Param) Uint() uint64 {
	if len(v.Raw) == 8 {
		return binary.LittleEndian.Uint64(v.Raw)
	}
	return uint64(v.Int())
}

// Float returns a FLOAT or DOUBLE value.
func (v Param) Float() float64 {
	switch len(v.Raw) {
	case 4:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(v.Raw)))
	case 8:
		return math.Float64frombits(binary.LittleEndian.Uint64(v.Raw))
	}
	return 0
}

// AppendText appends the value in the text form the server would print
// for it: numbers in decimal, dates as 'YYYY-MM-DD', datetimes as
// 'YYYY-MM-DD hh:mm:ss[.ffffff]', times as '[-][h]hh:mm:ss[.ffffff]',
// strings as their bytes. NULL appends nothing.
func (v Param) AppendText(dst []byte) []byte {
	switch {
	case v.Null:
		return dst
	case v.IsInteger():
		if v.Unsigned {
			return strconv.AppendUint(dst, v.Uint(), 10)
		}
		return strconv.AppendInt(dst, v.Int(), 10)
	case v.IsFloat():
		// The width is the value's, not the type's: a FLOAT sent as long
		// data may carry 8 bytes, which Float reads as a DOUBLE.
		bits := 64
		if len(v.Raw) == 4 {
			bits = 32
		}
		return strconv.AppendFloat(dst, v.Float(), 'g', -1, bits)
	}
	switch v.Type {
	case TypeDate, TypeDatetime, TypeTimestamp, TypeNewDate, TypeTimestamp2, TypeDatetime2:
		return appendDateTime(dst, v.Raw, v.Type == TypeDate || v.Type == TypeNewDate)
	case TypeTime, TypeTime2:
		return appendTime(dst, v.Raw)
	}
	return append(dst, v.Raw...)
}

func appendDateTime(dst, b []byte, dateOnly bool) []byte {
	var year, month, day, hour, minute, second, micro int
	if len(b) >= 4 {
		year, month, day = int(binary.LittleEndian.Uint16(b)), int(b[2]), int(b[3])
	}
	if len(b) >= 7 {
		hour, minute, second = int(b[4]), int(b[5]), int(b[6])
	}
	if len(b) >= 11 {
		micro = int(binary.LittleEndian.Uint32(b[7:]))
	}
	dst = fmt.Appendf(dst, "%04d-%02d-%02d", year, month, day)
	if dateOnly {
		return dst
	}
	dst = fmt.Appendf(dst, " %02d:%02d:%02d", hour, minute, second)
	if micro != 0 {
		dst = fmt.Appendf(dst, ".%06d", micro)
	}
	return dst
}

func appendTime(dst, b []byte) []byte {
	var neg bool
	var days, hour, minute, second, micro int
	if len(b) >= 8 {
		neg = b[0] == 1
		days = int(binary.LittleEndian.Uint32(b[1:]))
		hour, minute, second = int(b[5]), int(b[6]), int(b[7])
	}
	if len(b) >= 12 {
		micro = int(binary.LittleEndian.Uint32(b[8:]))
	}
	if neg {
		dst = append(dst, '-')
	}
	dst = fmt.Appendf(dst, "%02d:%02d:%02d", days*24+hour, minute, second)
	if micro != 0 {
		dst = fmt.Appendf(dst, ".%06d", micro)
	}
	return dst
}

// ExecuteParams decodes the parameters of a COM_STMT_EXECUTE packet p that
// ParseExecute accepted as e, calling f for each in order. types are the
// types in force (e.Types when the packet binds new ones); longData returns
// the value of a parameter sent with COM_STMT_SEND_LONG_DATA.
func ExecuteParams(p []byte, e Execute, numParams int, types []byte, longData func(int) ([]byte, bool), f func(i int, v Param) error) error {
	if numParams == 0 {
		return nil
	}
	if e.NewParamsBound {
		types = e.Types
	}
	if len(types) != 2*numParams || e.NullBitmapOffset+(numParams+7)/8 > len(p) {
		return fmt.Errorf("%w: COM_STMT_EXECUTE parameters do not match the statement", ErrMalformed)
	}
	nulls := p[e.NullBitmapOffset : e.NullBitmapOffset+(numParams+7)/8]
	off := e.ValuesOffset
	for i := range numParams {
		v := Param{Type: types[2*i], Unsigned: types[2*i+1]&0x80 != 0}
		switch {
		case nulls[i/8]&(1<<(i%8)) != 0 || v.Type == TypeNull:
			v.Null = true
		default:
			if longData != nil {
				if data, ok := longData(i); ok {
					v.Raw = data
					break
				}
			}
			if off > len(p) {
				return fmt.Errorf("%w: COM_STMT_EXECUTE parameter %d truncated", ErrMalformed, i)
			}
			n, err := paramValueLen(v.Type, p[off:])
			if err != nil {
				return fmt.Errorf("parameter %d: %w", i, err)
			}
			raw := p[off : off+n]
			off += n
			switch v.Type {
			case TypeDate, TypeDatetime, TypeTimestamp, TypeTime, TypeNewDate,
				TypeTimestamp2, TypeDatetime2, TypeTime2:
				raw = raw[1:]
			case TypeTiny, TypeShort, TypeYear, TypeLong, TypeInt24, TypeFloat, TypeLongLong, TypeDouble:
			default:
				s, _, err := ReadLenEncString(raw)
				if err != nil {
					return fmt.Errorf("parameter %d: %w", i, err)
				}
				raw = s
			}
			v.Raw = raw
		}
		if err := f(i, v); err != nil {
			return err
		}
	}
	return nil
}
