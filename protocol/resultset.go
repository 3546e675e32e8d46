package protocol

import "encoding/binary"

// Column definition flags sluice sets on results it builds itself.
const (
	FlagNotNull  uint16 = 0x0001
	FlagUnsigned uint16 = 0x0020
	FlagBinary   uint16 = 0x0080
)

// binaryCharset is the "binary" collation id numbers are sent with.
const binaryCharset = 63

// AppendColumnDef appends a ColumnDefinition41 payload for a computed column
// (no schema or table) named name.
func AppendColumnDef(b []byte, name string, typ byte, flags uint16, length uint32) []byte {
	return appendColumnDef(b, name, typ, flags, length, binaryCharset)
}

func appendColumnDef(b []byte, name string, typ byte, flags uint16, length uint32, charset uint16) []byte {
	b = AppendLenEncString(b, []byte("def"))
	b = AppendLenEncString(b, nil) // schema
	b = AppendLenEncString(b, nil) // table
	b = AppendLenEncString(b, nil) // original table
	b = AppendLenEncString(b, []byte(name))
	b = AppendLenEncString(b, nil) // original name
	b = append(b, 0x0c)
	b = binary.LittleEndian.AppendUint16(b, charset)
	b = binary.LittleEndian.AppendUint32(b, length)
	b = append(b, typ)
	b = binary.LittleEndian.AppendUint16(b, flags)
	return append(b, 0, 0, 0) // decimals, filler
}

// WriteSingleValue answers a command with a text result set of one column
// and one row (value nil is NULL), ended with status, and flushes. scratch
// is reused for the packets.
func WriteSingleValue(c *Conn, scratch []byte, name string, typ byte, flags uint16, length uint32, value []byte, status uint16) ([]byte, error) {
	b := append(scratch[:0], 1)
	if err := c.WritePacket(b); err != nil {
		return b, err
	}
	b = AppendColumnDef(b[:0], name, typ, flags, length)
	if err := c.WritePacket(b); err != nil {
		return b, err
	}
	b = AppendEOF(b[:0], 0, status)
	if err := c.WritePacket(b); err != nil {
		return b, err
	}
	if value == nil {
		b = append(b[:0], 0xfb)
	} else {
		b = AppendLenEncString(b[:0], value)
	}
	if err := c.WritePacket(b); err != nil {
		return b, err
	}
	b = AppendEOF(b[:0], 0, status)
	return b, c.WritePacketFlush(b)
}

// utf8mb3Charset is utf8mb3_general_ci, the collation of the text columns
// MariaDB's SHOW statements return.
const utf8mb3Charset = 33

// WriteTextColumn answers a command with a text result set of one
// VARCHAR column (utf8mb3, as SHOW statements' columns are) named name,
// one row per value, ended with status, and flushes.
func WriteTextColumn(c *Conn, scratch []byte, name string, length uint32, values []string, status uint16) ([]byte, error) {
	b := append(scratch[:0], 1)
	if err := c.WritePacket(b); err != nil {
		return b, err
	}
	b = appendColumnDef(b[:0], name, TypeVarString, 0, length, utf8mb3Charset)
	if err := c.WritePacket(b); err != nil {
		return b, err
	}
	b = AppendEOF(b[:0], 0, status)
	if err := c.WritePacket(b); err != nil {
		return b, err
	}
	for _, v := range values {
		b = AppendLenEncString(b[:0], []byte(v))
		if err := c.WritePacket(b); err != nil {
			return b, err
		}
	}
	b = AppendEOF(b[:0], 0, status)
	return b, c.WritePacketFlush(b)
}
