package protocol

import (
	"errors"
	"fmt"
)

// ErrorKind is one MySQL error sluice sends itself: its code, the SQLSTATE
// that goes with the code and the symbol MariaDB (or, for a CR_ code, the
// client library) gives it. The kinds declared below are the one table of
// them; a code relayed from a backend or the auth server passes through
// unchanged and needs no kind.
type ErrorKind struct {
	Code   uint16
	State  string
	Symbol string
}

// New returns a SQLError of kind k whose message is format with args.
func (k ErrorKind) New(format string, args ...any) *SQLError {
	return &SQLError{Code: k.Code, State: k.State, Message: fmt.Sprintf(format, args...)}
}

// Sentinel returns a new error with text that reports kind k to KindOf and
// ToSQLError. A package whose errors a client may see declares its
// sentinels with it, so the code a client gets is chosen where the error is
// defined and not in a mapping at the wire layer.
func (k ErrorKind) Sentinel(text string) error { return &kindedError{text: text, kind: k} }

// KindedError is an error that knows the MySQL error a client should see
// for it (see ErrorKind.Sentinel).
type KindedError interface {
	error
	ErrorKind() ErrorKind
}

type kindedError struct {
	text string
	kind ErrorKind
}

func (e *kindedError) Error() string        { return e.text }
func (e *kindedError) ErrorKind() ErrorKind { return e.kind }

// KindOf returns the kind of the first KindedError in err's chain, or
// fallback when there is none.
func KindOf(err error, fallback ErrorKind) ErrorKind {
	var ke KindedError
	if errors.As(err, &ke) {
		return ke.ErrorKind()
	}
	return fallback
}

// errorTable is every kind below, in declaration order, as kind registers
// them (a test checks that no two share a code).
var errorTable []ErrorKind

func kind(code uint16, state, symbol string) ErrorKind {
	k := ErrorKind{Code: code, State: state, Symbol: symbol}
	errorTable = append(errorTable, k)
	return k
}

// The errors sluice sends itself. The SQLSTATEs are MariaDB's
// (sql/share/errmsg-utf8.txt, HY000 where it gives none); a test compares
// them with that file where a MariaDB installation has it.
var (
	// CRCouldNotConnect: a backend cannot be reached.
	CRCouldNotConnect = kind(2003, "HY000", "CR_CONN_HOST_ERROR")
	// CRServerLost: a backend went away mid-command.
	CRServerLost = kind(2013, "HY000", "CR_SERVER_LOST")
	// CRSSLConnection: TLS towards a backend or the auth server failed.
	CRSSLConnection = kind(2026, "HY000", "CR_SSL_CONNECTION_ERROR")

	ERConCount     = kind(1040, "08004", "ER_CON_COUNT_ERROR")
	ERHandshake    = kind(1043, "08S01", "ER_HANDSHAKE_ERROR")
	ERAccessDenied = kind(1045, "28000", "ER_ACCESS_DENIED_ERROR")
	ERNoDB         = kind(1046, "3D000", "ER_NO_DB_ERROR")
	// The privilege errors of the grants check: database, table, column,
	// "you need the X privilege", routine.
	ERDBAccessDenied       = kind(1044, "42000", "ER_DBACCESS_DENIED_ERROR")
	ERTableAccessDenied    = kind(1142, "42000", "ER_TABLEACCESS_DENIED_ERROR")
	ERColumnAccessDenied   = kind(1143, "42000", "ER_COLUMNACCESS_DENIED_ERROR")
	ERSpecificAccessDenied = kind(1227, "42000", "ER_SPECIFIC_ACCESS_DENIED_ERROR")
	ERProcAccessDenied     = kind(1370, "42000", "ER_PROCACCESS_DENIED_ERROR")
	// ERSPDoesNotExist: SHOW CREATE PROCEDURE of a routine the account
	// may not see, as MariaDB hides it.
	ERSPDoesNotExist = kind(1305, "42000", "ER_SP_DOES_NOT_EXIST")
	// ERViewNoExplain: EXPLAIN of a view without SHOW VIEW or the rights
	// on its tables; ERViewInvalid: an INVOKER view the session lacks the
	// rights to read through.
	ERViewNoExplain = kind(1345, "HY000", "ER_VIEW_NO_EXPLAIN")
	ERViewInvalid   = kind(1356, "HY000", "ER_VIEW_INVALID")
	// ERBinlogCreateRoutineNeedSuper: CREATE FUNCTION without SUPER while
	// the server logs binary.
	ERBinlogCreateRoutineNeedSuper = kind(1419, "HY000", "ER_BINLOG_CREATE_ROUTINE_NEED_SUPER")
	// ERInvalidRole: SET ROLE of a role not granted.
	ERInvalidRole    = kind(1959, "OP000", "ER_INVALID_ROLE")
	ERUnknownCommand = kind(1047, "08S01", "ER_UNKNOWN_COM_ERROR")
	// ERBadNull: a NULL shard key.
	ERBadNull      = kind(1048, "23000", "ER_BAD_NULL_ERROR")
	ERBadDB        = kind(1049, "42000", "ER_BAD_DB_ERROR")
	ERParseError   = kind(1064, "42000", "ER_PARSE_ERROR")
	ERNoSuchThread = kind(1094, "HY000", "ER_NO_SUCH_THREAD")
	ERKillDenied   = kind(1095, "HY000", "ER_KILL_DENIED_ERROR")
	// ERTooBigSelect: a scatter-gather merge past max_merge_rows.
	ERTooBigSelect = kind(1104, "42000", "ER_TOO_BIG_SELECT")
	// ERUnknownError goes only with a message naming what failed.
	ERUnknownError = kind(1105, "HY000", "ER_UNKNOWN_ERROR")
	// ERHostIsBlocked: a client address in login backoff.
	ERHostIsBlocked = kind(1129, "HY000", "ER_HOST_IS_BLOCKED")
	// ERNotAllowedCommand: LOAD DATA LOCAL refused.
	ERNotAllowedCommand    = kind(1148, "42000", "ER_NOT_ALLOWED_COMMAND")
	ERNetPacketTooLarge    = kind(1153, "08S01", "ER_NET_PACKET_TOO_LARGE")
	ERNetPacketsOutOfOrder = kind(1156, "08S01", "ER_NET_PACKETS_OUT_OF_ORDER")
	ERNetReadError         = kind(1158, "08S01", "ER_NET_READ_ERROR")
	// ERNetReadInterrupted: a read timeout.
	ERNetReadInterrupted = kind(1159, "08S01", "ER_NET_READ_INTERRUPTED")
	// ERTooManyUserConnection: a user's max_connections.
	ERTooManyUserConnection = kind(1203, "42000", "ER_TOO_MANY_USER_CONNECTIONS")
	ERLockWaitTimeout       = kind(1205, "HY000", "ER_LOCK_WAIT_TIMEOUT")
	ERWrongArguments        = kind(1210, "HY000", "ER_WRONG_ARGUMENTS")
	// ERUserLimitReached: a user's statement rate.
	ERUserLimitReached     = kind(1226, "42000", "ER_USER_LIMIT_REACHED")
	ERNotSupportedYet      = kind(1235, "42000", "ER_NOT_SUPPORTED_YET")
	ERUnknownStmtHandler   = kind(1243, "HY000", "ER_UNKNOWN_STMT_HANDLER")
	ERNotSupportedAuthMode = kind(1251, "08004", "ER_NOT_SUPPORTED_AUTH_MODE")
	EROptionPreventsStmt   = kind(1290, "HY000", "ER_OPTION_PREVENTS_STATEMENT")
	ERUnsupportedPS        = kind(1295, "HY000", "ER_UNSUPPORTED_PS")
	ERQueryInterrupted     = kind(1317, "70100", "ER_QUERY_INTERRUPTED")
	// ERNoDefaultForField: an INSERT without the shard key.
	ERNoDefaultForField = kind(1364, "HY000", "ER_NO_DEFAULT_FOR_FIELD")
	// ERWrongValueForField: a shard key value the rule cannot place.
	ERWrongValueForField   = kind(1366, "22007", "ER_TRUNCATED_WRONG_VALUE_FOR_FIELD")
	ERStmtHasNoOpenCursor  = kind(1421, "HY000", "ER_STMT_HAS_NO_OPEN_CURSOR")
	ERMaxPreparedStmtCount = kind(1461, "42000", "ER_MAX_PREPARED_STMT_COUNT_REACHED")
	// ERNoPartitionForValue: a shard key outside every range.
	ERNoPartitionForValue = kind(1526, "HY000", "ER_NO_PARTITION_FOR_GIVEN_VALUE")
	ERNeedReprepare       = kind(1615, "HY000", "ER_NEED_REPREPARE")
	// ERReadOnlyTransaction: a replica refused a write.
	ERReadOnlyTransaction = kind(1792, "25006", "ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION")
	ERMalformedPacket     = kind(1835, "HY000", "ER_MALFORMED_PACKET")
	ERConnectionKilled    = kind(1927, "70100", "ER_CONNECTION_KILLED")
	// ERQueryTimeout is MySQL's code for a statement past its time limit
	// (MariaDB's own is 1969); sluice sends it for query_timeout.
	ERQueryTimeout = kind(3024, "HY000", "ER_QUERY_TIMEOUT")
	// ERSecureTransport is MySQL's code for a client refused without TLS.
	ERSecureTransport = kind(3159, "HY000", "ER_SECURE_TRANSPORT_REQUIRED")
	// ERIllegalParamTypes: an operator applied to types that have no such
	// operation.
	ERIllegalParamTypes = kind(4078, "HY000", "ER_ILLEGAL_PARAMETER_DATA_TYPES2_FOR_OPERATION")
)

// kindOfCode returns the kind with code, or one with SQLSTATE HY000 for a
// code the table does not name.
func kindOfCode(code uint16) ErrorKind {
	for _, k := range errorTable {
		if k.Code == code {
			return k
		}
	}
	return ErrorKind{Code: code, State: "HY000"}
}

// SQLError is a MySQL error as it travels in an ERR packet: code, SQLSTATE
// and message. Errors from a backend or the auth server are parsed into it and
// relayed unchanged; sluice's own errors are created with ErrorKind.New at
// the point that knows what failed.
type SQLError struct {
	Code    uint16
	State   string
	Message string
}

// NewError returns a SQLError with code and the SQLSTATE the table gives
// it (HY000 for a code it does not name). sluice's own errors are made with
// their kind's New; NewError serves codes that come from elsewhere.
func NewError(code uint16, format string, args ...any) *SQLError {
	return kindOfCode(code).New(format, args...)
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
// one place where internal errors become MySQL codes: a SQLError anywhere in
// the chain wins, framing sentinels get their MySQL codes, a KindedError its
// kind, and anything else ER_UNKNOWN_ERROR; those last two keep the error's
// text so the client learns what failed.
func ToSQLError(err error) *SQLError {
	var se *SQLError
	if errors.As(err, &se) {
		return se
	}
	switch {
	case errors.Is(err, ErrPacketTooLarge):
		return ERNetPacketTooLarge.New("Got a packet bigger than 'max_allowed_packet' bytes")
	case errors.Is(err, ErrPacketOutOfOrder):
		return ERNetPacketsOutOfOrder.New("Got packets out of order")
	case errors.Is(err, ErrMalformed):
		return ERMalformedPacket.New("Malformed communication packet: %v", err)
	}
	return KindOf(err, ERUnknownError).New("sluice: %v", err)
}
