package protocol

import "strconv"

// Capability flags (the low 32 bits of the MySQL capability word).
const (
	ClientLongPassword               uint32 = 1 << 0 // on MariaDB servers also "CLIENT_MYSQL": no extended capabilities
	ClientFoundRows                  uint32 = 1 << 1
	ClientLongFlag                   uint32 = 1 << 2
	ClientConnectWithDB              uint32 = 1 << 3
	ClientNoSchema                   uint32 = 1 << 4
	ClientCompress                   uint32 = 1 << 5
	ClientODBC                       uint32 = 1 << 6
	ClientLocalFiles                 uint32 = 1 << 7
	ClientIgnoreSpace                uint32 = 1 << 8
	ClientProtocol41                 uint32 = 1 << 9
	ClientInteractive                uint32 = 1 << 10
	ClientSSL                        uint32 = 1 << 11
	ClientIgnoreSigpipe              uint32 = 1 << 12
	ClientTransactions               uint32 = 1 << 13
	ClientReserved                   uint32 = 1 << 14
	ClientSecureConnection           uint32 = 1 << 15
	ClientMultiStatements            uint32 = 1 << 16
	ClientMultiResults               uint32 = 1 << 17
	ClientPSMultiResults             uint32 = 1 << 18
	ClientPluginAuth                 uint32 = 1 << 19
	ClientConnectAttrs               uint32 = 1 << 20
	ClientPluginAuthLenencClientData uint32 = 1 << 21
	ClientCanHandleExpiredPasswords  uint32 = 1 << 22
	ClientSessionTrack               uint32 = 1 << 23
	ClientDeprecateEOF               uint32 = 1 << 24
	ClientQueryAttributes            uint32 = 1 << 27
)

// Server status flags carried by OK and EOF packets.
const (
	StatusInTrans           uint16 = 0x0001
	StatusAutocommit        uint16 = 0x0002
	StatusMoreResultsExists uint16 = 0x0008
	StatusCursorExists      uint16 = 0x0040
	StatusLastRowSent       uint16 = 0x0080
	StatusNoBackslashEscape uint16 = 0x0200
	StatusPSOutParams       uint16 = 0x1000
	StatusInTransReadonly   uint16 = 0x2000
	StatusSessionStateChg   uint16 = 0x4000
)

// Command bytes: the first byte of every client command packet.
const (
	ComSleep            byte = 0x00
	ComQuit             byte = 0x01
	ComInitDB           byte = 0x02
	ComQuery            byte = 0x03
	ComFieldList        byte = 0x04
	ComCreateDB         byte = 0x05
	ComDropDB           byte = 0x06
	ComRefresh          byte = 0x07
	ComShutdown         byte = 0x08
	ComStatistics       byte = 0x09
	ComProcessInfo      byte = 0x0a
	ComConnect          byte = 0x0b
	ComProcessKill      byte = 0x0c
	ComDebug            byte = 0x0d
	ComPing             byte = 0x0e
	ComTime             byte = 0x0f
	ComDelayedInsert    byte = 0x10
	ComChangeUser       byte = 0x11
	ComBinlogDump       byte = 0x12
	ComTableDump        byte = 0x13
	ComConnectOut       byte = 0x14
	ComRegisterSlave    byte = 0x15
	ComStmtPrepare      byte = 0x16
	ComStmtExecute      byte = 0x17
	ComStmtSendLongData byte = 0x18
	ComStmtClose        byte = 0x19
	ComStmtReset        byte = 0x1a
	ComSetOption        byte = 0x1b
	ComStmtFetch        byte = 0x1c
	ComDaemon           byte = 0x1d
	ComBinlogDumpGTID   byte = 0x1e
	ComResetConnection  byte = 0x1f
)

var commandNames = [...]string{
	"COM_SLEEP", "COM_QUIT", "COM_INIT_DB", "COM_QUERY", "COM_FIELD_LIST", "COM_CREATE_DB",
	"COM_DROP_DB", "COM_REFRESH", "COM_SHUTDOWN", "COM_STATISTICS", "COM_PROCESS_INFO",
	"COM_CONNECT", "COM_PROCESS_KILL", "COM_DEBUG", "COM_PING", "COM_TIME", "COM_DELAYED_INSERT",
	"COM_CHANGE_USER", "COM_BINLOG_DUMP", "COM_TABLE_DUMP", "COM_CONNECT_OUT",
	"COM_REGISTER_SLAVE", "COM_STMT_PREPARE", "COM_STMT_EXECUTE", "COM_STMT_SEND_LONG_DATA",
	"COM_STMT_CLOSE", "COM_STMT_RESET", "COM_SET_OPTION", "COM_STMT_FETCH", "COM_DAEMON",
	"COM_BINLOG_DUMP_GTID", "COM_RESET_CONNECTION",
}

// CommandName returns the protocol name of a command byte, e.g. "COM_QUERY",
// or "command 0x%02x" for bytes no MySQL version defines.
func CommandName(cmd byte) string {
	if int(cmd) < len(commandNames) {
		return commandNames[cmd]
	}
	return "command 0x" + strconv.FormatUint(uint64(cmd), 16)
}

// Packet header bytes.
const (
	headerOK          byte = 0x00
	headerLocalInfile byte = 0xfb
	headerEOF         byte = 0xfe
	headerErr         byte = 0xff
	headerAuthMore    byte = 0x01
)

// MaxPayloadLen is the largest payload of one physical packet; a logical
// payload of this length or longer continues in the next packet.
const MaxPayloadLen = 1<<24 - 1

// Auth plugin names.
const (
	AuthNativePassword     = "mysql_native_password"
	AuthCachingSHA2        = "caching_sha2_password"
	AuthSHA256             = "sha256_password"
	AuthClearPassword      = "mysql_clear_password"
	AuthMariaDBED25519     = "client_ed25519"
	AuthMariaDBGSSAPI      = "auth_gssapi_client"
	defaultServerCollation = 45 // utf8mb4_general_ci
)

// COM_SET_OPTION values.
const (
	OptionMultiStatementsOn  uint16 = 0
	OptionMultiStatementsOff uint16 = 1
)
