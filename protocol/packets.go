package protocol

import (
	"encoding/binary"
	"fmt"
)

// OK is the decoded head of an OK packet (0x00, or 0xfe when it ends a result
// set under CLIENT_DEPRECATE_EOF).
type OK struct {
	AffectedRows uint64
	LastInsertID uint64
	Status       uint16
	Warnings     uint16
}

// AppendOK appends an OK packet payload (CLIENT_PROTOCOL_41 layout).
func AppendOK(b []byte, ok OK) []byte {
	b = append(b, headerOK)
	b = AppendLenEncInt(b, ok.AffectedRows)
	b = AppendLenEncInt(b, ok.LastInsertID)
	b = binary.LittleEndian.AppendUint16(b, ok.Status)
	return binary.LittleEndian.AppendUint16(b, ok.Warnings)
}

// ParseOK decodes the fixed part of an OK packet; session-state information
// after it is ignored.
func ParseOK(p []byte) (OK, error) {
	var ok OK
	if len(p) < 1 || (p[0] != headerOK && p[0] != headerEOF) {
		return ok, fmt.Errorf("%w: not an OK packet", ErrMalformed)
	}
	v, _, n, err := ReadLenEncInt(p[1:])
	if err != nil {
		return ok, err
	}
	ok.AffectedRows = v
	p = p[1+n:]
	v, _, n, err = ReadLenEncInt(p)
	if err != nil {
		return ok, err
	}
	ok.LastInsertID = v
	p = p[n:]
	if len(p) >= 2 {
		ok.Status = binary.LittleEndian.Uint16(p)
	}
	if len(p) >= 4 {
		ok.Warnings = binary.LittleEndian.Uint16(p[2:])
	}
	return ok, nil
}

// AppendErr appends an ERR packet payload for e.
func AppendErr(b []byte, e *SQLError) []byte {
	b = append(b, headerErr)
	b = binary.LittleEndian.AppendUint16(b, e.Code)
	st := e.State
	if len(st) != 5 {
		st = "HY000"
	}
	b = append(b, '#')
	b = append(b, st...)
	return append(b, e.Message...)
}

// ParseErr decodes an ERR packet payload. A MariaDB progress report (code
// 0xffff) is not an error and is reported as ErrMalformed here.
func ParseErr(p []byte) (*SQLError, error) {
	if len(p) < 3 || p[0] != headerErr {
		return nil, fmt.Errorf("%w: not an ERR packet", ErrMalformed)
	}
	e := &SQLError{Code: binary.LittleEndian.Uint16(p[1:]), State: "HY000"}
	rest := p[3:]
	if len(rest) >= 6 && rest[0] == '#' {
		e.State = string(rest[1:6])
		rest = rest[6:]
	}
	e.Message = string(rest)
	return e, nil
}

// AppendEOF appends an EOF packet payload.
func AppendEOF(b []byte, warnings, status uint16) []byte {
	b = append(b, headerEOF)
	b = binary.LittleEndian.AppendUint16(b, warnings)
	return binary.LittleEndian.AppendUint16(b, status)
}

// IsOK reports whether p is an OK packet.
func IsOK(p []byte) bool { return len(p) > 0 && p[0] == headerOK }

// IsErr reports whether p is an ERR packet.
func IsErr(p []byte) bool { return len(p) > 0 && p[0] == headerErr }

// IsEOF reports whether p is an EOF packet (not a row that starts with 0xfe).
func IsEOF(p []byte) bool { return len(p) > 0 && len(p) < 9 && p[0] == headerEOF }

// EOFStatus returns the status flags of an EOF packet payload.
func EOFStatus(p []byte) uint16 { return eofStatus(p) }

// eofStatus returns the status flags of an EOF packet payload.
func eofStatus(p []byte) uint16 {
	if len(p) >= 5 {
		return binary.LittleEndian.Uint16(p[3:])
	}
	return 0
}

// eofWarnings returns the warning count of an EOF packet payload.
func eofWarnings(p []byte) uint16 {
	if len(p) >= 3 {
		return binary.LittleEndian.Uint16(p[1:])
	}
	return 0
}
