package protocol

// The codes of the error table as plain numbers, for code written before
// the table. Each is the Code of the kind of the same name with ER (or CR)
// for Er; a test keeps the two equal.
//
// Deprecated: use the kinds: ERConCount.New(...) for NewError(ErConCount,
// ...), ERConCount.Code for ErConCount.
const (
	ErCouldNotConnect       uint16 = 2003 // CRCouldNotConnect
	ErServerLost            uint16 = 2013 // CRServerLost
	ErSSLConnection         uint16 = 2026 // CRSSLConnection
	ErConCount              uint16 = 1040
	ErHandshake             uint16 = 1043
	ErAccessDenied          uint16 = 1045
	ErUnknownCommand        uint16 = 1047
	ErNoDB                  uint16 = 1046
	ErBadDB                 uint16 = 1049
	ErNetPacketTooLarge     uint16 = 1153
	ErNetPacketsOutOfOrder  uint16 = 1156
	ErNetReadError          uint16 = 1158
	ErNetReadInterrupted    uint16 = 1159
	ErNotSupportedAuthMode  uint16 = 1251
	ErMalformedPacket       uint16 = 1835
	ErOptionPreventsStmt    uint16 = 1290
	ErNotSupportedYet       uint16 = 1235
	ErUnknownError          uint16 = 1105
	ErLockWaitTimeout       uint16 = 1205
	ErQueryInterrupted      uint16 = 1317
	ErTooManyUserConnection uint16 = 1203
	ErUserLimitReached      uint16 = 1226
	ErQueryTimeout          uint16 = 3024
	ErNotAllowedCommand     uint16 = 1148
	ErWrongArguments        uint16 = 1210
	ErUnknownStmtHandler    uint16 = 1243
	ErStmtHasNoOpenCursor   uint16 = 1421
	ErMaxPreparedStmtCount  uint16 = 1461
	ErNeedReprepare         uint16 = 1615
	ErSecureTransport       uint16 = 3159
	ErTooBigSelect          uint16 = 1104
	ErBadNull               uint16 = 1048
	ErNoDefaultForField     uint16 = 1364
	ErWrongValueForField    uint16 = 1366
	ErNoPartitionForValue   uint16 = 1526
	ErReadOnlyTransaction   uint16 = 1792
)
