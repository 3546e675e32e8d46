package binlog

import (
	"encoding/binary"

	"github.com/sluice-proxy/sluice/router"
)

// The status variables of a query event that come before sql_mode, and
// sql_mode's bits that change how a statement's text is read (MariaDB's
// MODE_* values, the same in every 10.x and 11.x release).
const (
	qFlags2Code  = 0 // 4 bytes
	qSQLModeCode = 1 // 8 bytes

	modePipesAsConcat     = 1 << 1
	modeANSIQuotes        = 1 << 2
	modeOracle            = 1 << 9
	modeNoBackslashEscape = 1 << 20
)

// sqlModeOf reads the session's sql_mode from a query event's status
// variables. The server writes Q_FLAGS2 and Q_SQL_MODE first when it
// writes them at all; ok is false when sql_mode is not there.
func sqlModeOf(vars []byte) (mode uint64, ok bool) {
	for len(vars) > 0 {
		switch vars[0] {
		case qFlags2Code:
			if len(vars) < 5 {
				return 0, false
			}
			vars = vars[5:]
		case qSQLModeCode:
			if len(vars) < 9 {
				return 0, false
			}
			return binary.LittleEndian.Uint64(vars[1:9]), true
		default:
			return 0, false
		}
	}
	return 0, false
}

// lexModes are the router's lexing flags for an sql_mode value.
func lexModes(mode uint64) router.LexModes {
	var m router.LexModes
	if mode&modePipesAsConcat != 0 {
		m |= router.LexPipesAsConcat
	}
	if mode&modeANSIQuotes != 0 {
		m |= router.LexANSIQuotes
	}
	if mode&modeOracle != 0 {
		m |= router.LexOracle
	}
	if mode&modeNoBackslashEscape != 0 {
		m |= router.LexNoBackslashEscapes
	}
	return m
}

// writtenTables reads what a statement of the log writes, under the
// sql_mode it ran with (the server's default lexing when the event does
// not say).
func writtenTables(sql, schema string, statusVars []byte) (router.Writes, error) {
	var modes router.LexModes
	if mode, ok := sqlModeOf(statusVars); ok {
		modes = lexModes(mode)
	}
	return router.WrittenTables(sql, schema, modes)
}
