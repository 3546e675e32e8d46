package fakebackend

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// Result is the answer to one command: a result set when it has Columns,
// else ERR when Err is set, else OK.
type Result struct {
	// Columns and Rows make a text result set. A row's values are sent
	// as their text: nil is NULL, []byte and string go as they are, bool
	// as 1 or 0 and anything else as fmt prints it.
	Columns []Column
	Rows    [][]any
	// AffectedRows and LastInsertID go in the OK; Warnings in the OK or
	// the EOF that ends the result set.
	AffectedRows, LastInsertID uint64
	Warnings                   uint16
	// Status, when not 0, becomes the connection's status flags from this
	// answer on (a session's state outlives a statement, as on a server);
	// 0 keeps them. COM_RESET_CONNECTION puts them back to Config.Status.
	Status uint16
	Err    *protocol.SQLError
	// Delay holds the answer back this long.
	Delay time.Duration
	// Close drops the connection instead of finishing the answer, as a
	// backend that dies does: after the first CloseAfter packets of the
	// answer (none when 0; a result set cut short otherwise).
	Close      bool
	CloseAfter int
}

// OK returns an OK with affected rows and last insert id.
func OK(affected, lastInsertID uint64) Result {
	return Result{AffectedRows: affected, LastInsertID: lastInsertID}
}

// Err returns the answer ERR e.
func Err(e *protocol.SQLError) Result { return Result{Err: e} }

// Rows returns a result set of VAR_STRING columns named names with rows.
func Rows(names []string, rows ...[]any) Result {
	return Result{Columns: Cols(names...), Rows: rows}
}

// Column is the definition of a result set's column.
type Column struct {
	Name, Table, Schema string
	// Type is a protocol.Type* byte; 0 (MYSQL_TYPE_DECIMAL, which servers
	// no longer send) means VAR_STRING.
	Type byte
	// Charset is the collation id; 0 means utf8mb4_general_ci (45).
	Charset  uint16
	Length   uint32
	Flags    uint16
	Decimals byte
}

// Cols returns VAR_STRING columns named names.
func Cols(names ...string) []Column {
	cols := make([]Column, len(names))
	for i, n := range names {
		cols[i] = Column{Name: n}
	}
	return cols
}

// def returns c as a protocol column definition payload.
func (c Column) def() []byte {
	d := protocol.ColumnDef{Schema: []byte(c.Schema), Table: []byte(c.Table), Name: []byte(c.Name),
		Charset: c.Charset, Length: c.Length, Type: c.Type, Flags: c.Flags, Decimals: c.Decimals}
	if d.Type == 0 {
		d.Type = protocol.TypeVarString
	}
	if d.Charset == 0 {
		d.Charset = 45
	}
	if d.Length == 0 {
		d.Length = 1024
	}
	return d.Append(nil)
}

// packets returns the answer r as payloads, with status as the status
// flags of its OK or EOFs.
func (r *Result) packets(status uint16) [][]byte {
	switch {
	case len(r.Columns) > 0:
		out := make([][]byte, 0, len(r.Columns)+len(r.Rows)+3)
		out = append(out, protocol.AppendLenEncInt(nil, uint64(len(r.Columns))))
		for _, c := range r.Columns {
			out = append(out, c.def())
		}
		out = append(out, protocol.AppendEOF(nil, 0, status))
		for _, row := range r.Rows {
			vals := make([][]byte, len(row))
			for i, v := range row {
				vals[i] = text(v)
			}
			out = append(out, protocol.AppendTextRow(nil, vals))
		}
		return append(out, protocol.AppendEOF(nil, r.Warnings, status))
	case r.Err != nil:
		return [][]byte{protocol.AppendErr(nil, r.Err)}
	}
	return [][]byte{protocol.AppendOK(nil, protocol.OK{AffectedRows: r.AffectedRows,
		LastInsertID: r.LastInsertID, Status: status, Warnings: r.Warnings})}
}

// text returns v as a text-protocol value; nil is NULL.
func text(v any) []byte {
	switch v := v.(type) {
	case nil:
		return nil
	case []byte:
		if v == nil {
			return nil
		}
		return v
	case string:
		return append([]byte{}, v...)
	case bool:
		if v {
			return []byte{'1'}
		}
		return []byte{'0'}
	case float64:
		return strconv.AppendFloat([]byte{}, v, 'g', -1, 64)
	}
	return fmt.Append([]byte{}, v)
}
