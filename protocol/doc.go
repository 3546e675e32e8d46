// Package protocol owns the MySQL client/server wire protocol as sluice speaks
// it on both legs: packet framing (including payloads split at 16 MiB),
// length-encoded values, the server greeting and the client's handshake
// response, OK/ERR/EOF packets, capability flags, the client side of a
// handshake towards a backend, and the raw relay that streams a backend's
// response to the client packet by packet without decoding rows.
//
// The package knows nothing about routing, sessions or pools. A Conn is owned
// by exactly one goroutine at a time; nothing here is safe for concurrent use
// unless its doc comment says so.
package protocol
