package protocol

import (
	"encoding/binary"
	"fmt"
)

// Column and parameter types of the binary protocol (MYSQL_TYPE_*).
const (
	TypeDecimal    byte = 0x00
	TypeTiny       byte = 0x01
	TypeShort      byte = 0x02
	TypeLong       byte = 0x03
	TypeFloat      byte = 0x04
	TypeDouble     byte = 0x05
	TypeNull       byte = 0x06
	TypeTimestamp  byte = 0x07
	TypeLongLong   byte = 0x08
	TypeInt24      byte = 0x09
	TypeDate       byte = 0x0a
	TypeTime       byte = 0x0b
	TypeDatetime   byte = 0x0c
	TypeYear       byte = 0x0d
	TypeNewDate    byte = 0x0e
	TypeVarchar    byte = 0x0f
	TypeBit        byte = 0x10
	TypeTimestamp2 byte = 0x11
	TypeDatetime2  byte = 0x12
	TypeTime2      byte = 0x13
	TypeJSON       byte = 0xf5
	TypeNewDecimal byte = 0xf6
	TypeEnum       byte = 0xf7
	TypeSet        byte = 0xf8
	TypeTinyBlob   byte = 0xf9
	TypeMediumBlob byte = 0xfa
	TypeLongBlob   byte = 0xfb
	TypeBlob       byte = 0xfc
	TypeVarString  byte = 0xfd
	TypeString     byte = 0xfe
	TypeGeometry   byte = 0xff
)

// Cursor types in COM_STMT_EXECUTE's flags byte.
const (
	CursorTypeNoCursor   byte = 0x00
	CursorTypeReadOnly   byte = 0x01
	CursorTypeForUpdate  byte = 0x02
	CursorTypeScrollable byte = 0x04
)

// PrepareOK is the first packet of a successful COM_STMT_PREPARE response.
type PrepareOK struct {
	StatementID uint32
	Columns     uint16
	Params      uint16
	Warnings    uint16
}

// ParsePrepareOK decodes the first packet of a COM_STMT_PREPARE response.
func ParsePrepareOK(p []byte) (PrepareOK, error) {
	if len(p) < 12 || p[0] != headerOK {
		return PrepareOK{}, fmt.Errorf("%w: COM_STMT_PREPARE response of %d bytes", ErrMalformed, len(p))
	}
	return PrepareOK{
		StatementID: binary.LittleEndian.Uint32(p[1:]),
		Columns:     binary.LittleEndian.Uint16(p[5:]),
		Params:      binary.LittleEndian.Uint16(p[7:]),
		Warnings:    binary.LittleEndian.Uint16(p[10:]),
	}, nil
}

// PrepareMetadataPackets is how many packets follow the PrepareOK packet:
// parameter and column definitions, each group ended by EOF unless
// CLIENT_DEPRECATE_EOF is in force.
func (ok PrepareOK) PrepareMetadataPackets(deprecateEOF bool) int {
	n := 0
	for _, c := range []uint16{ok.Params, ok.Columns} {
		if c > 0 {
			n += int(c)
			if !deprecateEOF {
				n++
			}
		}
	}
	return n
}

// StmtID reads the statement id of a COM_STMT_EXECUTE, _FETCH, _CLOSE,
// _RESET or _SEND_LONG_DATA packet.
func StmtID(p []byte) (uint32, error) {
	if len(p) < 5 {
		return 0, fmt.Errorf("%w: command of %d bytes without a statement id", ErrMalformed, len(p))
	}
	return binary.LittleEndian.Uint32(p[1:]), nil
}

// SetStmtID overwrites the statement id of such a packet in place.
func SetStmtID(p []byte, id uint32) { binary.LittleEndian.PutUint32(p[1:], id) }

// Execute describes a validated COM_STMT_EXECUTE packet.
type Execute struct {
	StatementID uint32
	Flags       byte
	// NewParamsBound reports that the packet carries parameter types.
	NewParamsBound bool
	// Types are the parameter types (2 bytes each: type, flags) the packet
	// carries; nil when NewParamsBound is false. It aliases the packet.
	Types []byte
	// NullBitmapOffset and ValuesOffset locate the null bitmap and the
	// first value in the packet.
	NullBitmapOffset int
	ValuesOffset     int
}

// ParseExecute validates a COM_STMT_EXECUTE packet for a statement with
// numParams parameters. types are the parameter types in force when the
// packet does not bind new ones (nil if none were ever bound); longData
// reports the parameters whose value came by COM_STMT_SEND_LONG_DATA and so
// is absent from the packet. Every value is checked against the packet's
// length, so a truncated or lying packet is ErrMalformed, never a panic.
func ParseExecute(p []byte, numParams int, types []byte, longData func(int) bool) (Execute, error) {
	var e Execute
	if len(p) < 10 || p[0] != ComStmtExecute {
		return e, fmt.Errorf("%w: COM_STMT_EXECUTE of %d bytes is too short", ErrMalformed, len(p))
	}
	e.StatementID = binary.LittleEndian.Uint32(p[1:])
	e.Flags = p[5]
	// p[6:10] is the iteration count, always 1.
	if numParams == 0 {
		return e, nil
	}
	off := 10
	e.NullBitmapOffset = off
	nb := (numParams + 7) / 8
	if len(p) < off+nb+1 {
		return e, fmt.Errorf("%w: COM_STMT_EXECUTE null bitmap truncated (%d parameters)", ErrMalformed, numParams)
	}
	nulls := p[off : off+nb]
	off += nb
	e.NewParamsBound = p[off] == 1
	off++
	if e.NewParamsBound {
		if len(p) < off+2*numParams {
			return e, fmt.Errorf("%w: COM_STMT_EXECUTE parameter types truncated", ErrMalformed)
		}
		e.Types = p[off : off+2*numParams]
		types = e.Types
		off += 2 * numParams
	} else if len(types) != 2*numParams {
		return e, fmt.Errorf("%w: COM_STMT_EXECUTE without parameter types, and none were bound before", ErrMalformed)
	}
	e.ValuesOffset = off
	for i := range numParams {
		if nulls[i/8]&(1<<(i%8)) != 0 || (longData != nil && longData(i)) {
			continue
		}
		n, err := paramValueLen(types[2*i], p[off:])
		if err != nil {
			return e, fmt.Errorf("parameter %d: %w", i, err)
		}
		off += n
	}
	if off != len(p) {
		return e, fmt.Errorf("%w: COM_STMT_EXECUTE has %d bytes after its last parameter", ErrMalformed, len(p)-off)
	}
	return e, nil
}

// paramValueLen returns the encoded length of one binary-protocol value of
// type t at the start of b.
func paramValueLen(t byte, b []byte) (int, error) {
	fixed := 0
	switch t {
	case TypeNull:
		return 0, nil
	case TypeTiny:
		fixed = 1
	case TypeShort, TypeYear:
		fixed = 2
	case TypeLong, TypeInt24, TypeFloat:
		fixed = 4
	case TypeLongLong, TypeDouble:
		fixed = 8
	case TypeDate, TypeDatetime, TypeTimestamp, TypeTime, TypeNewDate,
		TypeTimestamp2, TypeDatetime2, TypeTime2:
		if len(b) < 1 {
			return 0, fmt.Errorf("%w: temporal value truncated", ErrMalformed)
		}
		n := int(b[0])
		switch n {
		case 0, 4, 7, 8, 11, 12:
		default:
			return 0, fmt.Errorf("%w: temporal value of length %d", ErrMalformed, n)
		}
		if len(b) < 1+n {
			return 0, fmt.Errorf("%w: temporal value truncated", ErrMalformed)
		}
		return 1 + n, nil
	case TypeDecimal, TypeNewDecimal, TypeVarchar, TypeBit, TypeJSON, TypeEnum, TypeSet,
		TypeTinyBlob, TypeMediumBlob, TypeLongBlob, TypeBlob, TypeVarString, TypeString, TypeGeometry:
		_, n, err := ReadLenEncString(b)
		return n, err
	default:
		return 0, fmt.Errorf("%w: unknown parameter type 0x%02x", ErrMalformed, t)
	}
	if len(b) < fixed {
		return 0, fmt.Errorf("%w: value of type 0x%02x truncated", ErrMalformed, t)
	}
	return fixed, nil
}

// AppendExecuteWithTypes rebuilds a COM_STMT_EXECUTE that did not bind
// parameter types (flag 0) into one that binds types (flag 1), for a backend
// that has not seen this statement's types yet. dst is reused.
func AppendExecuteWithTypes(dst, p []byte, e Execute, numParams int, types []byte) []byte {
	dst = append(dst[:0], p[:e.ValuesOffset-1]...)
	dst = append(dst, 1)
	dst = append(dst, types...)
	return append(dst, p[e.ValuesOffset:]...)
}
