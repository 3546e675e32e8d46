package protocol

import (
	"errors"
	"fmt"
)

// MySQL error codes sluice sends itself. Codes relayed from a backend or the
// auth server pass through unchanged.
const (
	ErCouldNotConnect       uint16 = 2003 // CR_CONN_HOST_ERROR: a backend cannot be reached
	ErServerLost            uint16 = 2013 // CR_SERVER_LOST: a backend went away mid-command
	ErConCount              uint16 = 1040 // ER_CON_COUNT_ERROR: too many connections
	ErHandshake             uint16 = 1043 // ER_HANDSHAKE_ERROR: bad handshake
	ErAccessDenied          uint16 = 1045 // ER_ACCESS_DENIED_ERROR
	ErUnknownCommand        uint16 = 1047 // ER_UNKNOWN_COM_ERROR
	ErNoDB                  uint16 = 1046 // ER_NO_DB_ERROR
	ErBadDB                 uint16 = 1049 // ER_BAD_DB_ERROR
	ErNetPacketTooLarge     uint16 = 1153 // ER_NET_PACKET_TOO_LARGE
	ErNetPacketsOutOfOrder  uint16 = 1156 // ER_NET_PACKETS_OUT_OF_ORDER
	ErNetReadError          uint16 = 1158 // ER_NET_READ_ERROR
	ErNetReadInterrupted    uint16 = 1159 // ER_NET_READ_INTERRUPTED: read timeout
	ErNotSupportedAuthMode  uint16 = 1251 // ER_NOT_SUPPORTED_AUTH_MODE
	ErMalformedPacket       uint16 = 1835 // ER_MALFORMED_PACKET
	ErOptionPreventsStmt    uint16 = 1290 // ER_OPTION_PREVENTS_STATEMENT
	ErNotSupportedYet       uint16 = 1235 // ER_NOT_SUPPORTED_YET
	ErUnknownError          uint16 = 1105 // ER_UNKNOWN_ERROR: only with a message naming what failed
	ErLockWaitTimeout       uint16 = 1205
	ErQueryInterrupted      uint16 = 1317
	ErTooManyUserConnection uint16 = 1203 // ER_TOO_MANY_USER_CONNECTIONS: a user's max_connections
	ErUserLimitReached      uint16 = 1226 // ER_USER_LIMIT_REACHED: a user's statement rate
	ErQueryTimeout          uint16 = 3024 // ER_QUERY_TIMEOUT: a statement past query_timeout
	ErSSLConnection         uint16 = 2026 // CR_SSL_CONNECTION_ERROR
	ErNotAllowedCommand     uint16 = 1148 // ER_NOT_ALLOWED_COMMAND: LOAD DATA LOCAL refused
	ErWrongArguments        uint16 = 1210 // ER_WRONG_ARGUMENTS
	ErUnknownStmtHandler    uint16 = 1243 // ER_UNKNOWN_STMT_HANDLER
	ErStmtHasNoOpenCursor   uint16 = 1421 // ER_STMT_HAS_NO_OPEN_CURSOR
	ErMaxPreparedStmtCount  uint16 = 1461 // ER_MAX_PREPARED_STMT_COUNT_REACHED
	ErNeedReprepare         uint16 = 1615 // ER_NEED_REPREPARE
	ErSecureTransport       uint16 = 3159 // ER_SECURE_TRANSPORT_REQUIRED
	ErTooBigSelect          uint16 = 1104 // ER_TOO_BIG_SELECT: a merge past max_merge_rows
	ErBadNull               uint16 = 1048 // ER_BAD_NULL_ERROR: NULL shard key
	ErNoDefaultForField     uint16 = 1364 // ER_NO_DEFAULT_FOR_FIELD: INSERT without the shard key
	ErWrongValueForField    uint16 = 1366 // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: bad shard key value
	ErNoPartitionForValue   uint16 = 1526 // ER_NO_PARTITION_FOR_GIVEN_VALUE: key outside every range
	ErReadOnlyTransaction   uint16 = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION: a replica refused a write
)

// sqlStates gives the SQLSTATE of the codes above; anything else is HY000.
var sqlStates = map[uint16]string{
	ErConCount:              "08004",
	ErHandshake:             "08S01",
	ErAccessDenied:          "28000",
	ErUnknownCommand:        "08S01",
	ErNoDB:                  "3D000",
	ErBadDB:                 "42000",
	ErNetPacketTooLarge:     "08S01",
	ErNetPacketsOutOfOrder:  "08S01",
	ErNetReadError:          "08S01",
	ErNetReadInterrupted:    "08S01",
	ErNotSupportedAuthMode:  "08004",
	ErNotSupportedYet:       "42000",
	ErQueryInterrupted:      "70100",
	ErTooManyUserConnection: "42000",
	ErUserLimitReached:      "42000",
	ErQueryTimeout:          "HY000",
	ErServerLost:            "HY000",
	ErSecureTransport:       "HY000",
	ErNotAllowedCommand:     "42000",
	ErMaxPreparedStmtCount:  "42000",
	ErCouldNotConnect:       "HY000",
	ErTooBigSelect:          "42000",
	ErBadNull:               "23000",
	ErNoDefaultForField:     "HY000",
	ErWrongValueForField:    "22007",
	ErNoPartitionForValue:   "HY000",
	ErReadOnlyTransaction:   "25006",
}

// SQLError is a MySQL error as it travels in an ERR packet: code, SQLSTATE
// and message. Errors from a backend or the auth server are parsed into it and
// relayed unchanged; sluice's own errors are created with NewError at the
// point that knows what failed.
type SQLError struct {
	Code    uint16
	State   string
	Message string
}

// NewError returns a SQLError with the SQLSTATE that belongs to code.
func NewError(code uint16, format string, args ...any) *SQLError {
	st, ok := sqlStates[code]
	if !ok {
		st = "HY000"
	}
	return &SQLError{Code: code, State: st, Message: fmt.Sprintf(format, args...)}
}

func (e *SQLError) Error() string {
	return fmt.Sprintf("ERROR %d (%s): %s", e.Code, e.State, e.Message)
}

// Sentinel errors of the framing layer; callers test them with errors.Is.
var (
	// ErrPacketTooLarge: a logical packet exceeded the connection's limit.
	ErrPacketTooLarge = errors.New("packet larger than max_allowed_packet")
	// ErrPacketOutOfOrder: a packet's sequence id was not the expected one.
	ErrPacketOutOfOrder = errors.New("packet sequence id out of order")
	// ErrMalformed: a packet's content could not be decoded.
	ErrMalformed = errors.New("malformed packet")
)

// ToSQLError maps any error to the ERR packet a client should see. It is the
// one place where internal errors become MySQL codes; a SQLError anywhere in
// the chain wins, framing sentinels get their MySQL codes, and anything else
// keeps its text so the client learns what failed.
func ToSQLError(err error) *SQLError {
	var se *SQLError
	if errors.As(err, &se) {
		return se
	}
	switch {
	case errors.Is(err, ErrPacketTooLarge):
		return NewError(ErNetPacketTooLarge, "Got a packet bigger than 'max_allowed_packet' bytes")
	case errors.Is(err, ErrPacketOutOfOrder):
		return NewError(ErNetPacketsOutOfOrder, "Got packets out of order")
	case errors.Is(err, ErrMalformed):
		return NewError(ErMalformedPacket, "Malformed communication packet: %v", err)
	}
	return NewError(ErUnknownError, "sluice: %v", err)
}
