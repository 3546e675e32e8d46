package protocol

import (
	"encoding/binary"
	"fmt"
)

// AppendLenEncInt appends v as a length-encoded integer.
func AppendLenEncInt(b []byte, v uint64) []byte {
	switch {
	case v < 251:
		return append(b, byte(v))
	case v < 1<<16:
		return append(b, 0xfc, byte(v), byte(v>>8))
	case v < 1<<24:
		return append(b, 0xfd, byte(v), byte(v>>8), byte(v>>16))
	default:
		b = append(b, 0xfe)
		return binary.LittleEndian.AppendUint64(b, v)
	}
}

// AppendLenEncString appends s as a length-encoded string.
func AppendLenEncString(b []byte, s []byte) []byte {
	b = AppendLenEncInt(b, uint64(len(s)))
	return append(b, s...)
}

// ReadLenEncInt decodes a length-encoded integer at the start of b and returns
// it with the number of bytes it used. A 0xfb prefix is SQL NULL (isNull).
// A 0xff prefix, or a b too short for its prefix, is ErrMalformed.
func ReadLenEncInt(b []byte) (v uint64, isNull bool, n int, err error) {
	if len(b) == 0 {
		return 0, false, 0, fmt.Errorf("%w: length-encoded integer missing", ErrMalformed)
	}
	switch b[0] {
	case 0xfb:
		return 0, true, 1, nil
	case 0xfc:
		if len(b) < 3 {
			break
		}
		return uint64(binary.LittleEndian.Uint16(b[1:])), false, 3, nil
	case 0xfd:
		if len(b) < 4 {
			break
		}
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, false, 4, nil
	case 0xfe:
		if len(b) < 9 {
			break
		}
		return binary.LittleEndian.Uint64(b[1:]), false, 9, nil
	case 0xff:
		return 0, false, 0, fmt.Errorf("%w: 0xff is not a length-encoded integer prefix", ErrMalformed)
	default:
		return uint64(b[0]), false, 1, nil
	}
	return 0, false, 0, fmt.Errorf("%w: length-encoded integer truncated", ErrMalformed)
}

// ReadLenEncString decodes a length-encoded string at the start of b. The
// returned slice aliases b. NULL (0xfb) is an error here: callers that accept
// NULL use ReadLenEncInt themselves.
func ReadLenEncString(b []byte) (s []byte, n int, err error) {
	l, isNull, m, err := ReadLenEncInt(b)
	if err != nil {
		return nil, 0, err
	}
	if isNull {
		return nil, 0, fmt.Errorf("%w: NULL where a string is due", ErrMalformed)
	}
	if uint64(len(b)-m) < l {
		return nil, 0, fmt.Errorf("%w: string of %d bytes truncated at %d", ErrMalformed, l, len(b)-m)
	}
	return b[m : m+int(l)], m + int(l), nil
}

// readNulString returns the bytes of b up to the first NUL and the count
// consumed including the NUL.
func readNulString(b []byte) ([]byte, int, error) {
	for i, c := range b {
		if c == 0 {
			return b[:i], i + 1, nil
		}
	}
	return nil, 0, fmt.Errorf("%w: NUL-terminated string not terminated", ErrMalformed)
}
