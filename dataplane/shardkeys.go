package dataplane

import (
	"strings"

	"github.com/sluice-proxy/sluice/shard"
)

// The shard rules place a key by the value its column stores and compares,
// which needs the column's type and collation (and, for the *_general_ci
// collations, the collation's weight of every character). The proxy reads
// them from information_schema.COLUMNS of each cluster's master when rules
// are built (start-up, reload) and hands them to the rules as data; rules
// whose masters could not all be asked, or whose tables exist nowhere yet,
// are asked again in the background until they are known or replaced.

// clientCharset is the session's client character set as the shard
// rules need it (what a string key's bytes are), from the handshake's
// collation and the tracked SET NAMES, SET CHARACTER SET,
// character_set_client and character_set_connection. The server converts
// a literal from the client's set to the connection's before comparing
// it, so the weaker of the two counts: a connection set sluice does not
// know (SET CHARACTER SET leaves it at the database's; an assignment to
// character_set_connection or collation_connection) makes it
// ClientOther.
func (s *Session) clientCharset() shard.ClientCharset {
	client := handshakeCharsets[s.key.collation]
	conn := client
	named := func(cs string) shard.ClientCharset {
		switch strings.ToLower(cs) {
		case "utf8mb4":
			return shard.ClientUTF8MB4
		case "utf8", "utf8mb3":
			return shard.ClientUTF8MB3
		}
		return shard.ClientOther
	}
	for i := range s.vars {
		switch s.vars[i].Name {
		case "names":
			client = named(s.vars[i].Charset)
			conn = client
		case "character set":
			client, conn = named(s.vars[i].Charset), shard.ClientOther
		case "character_set_client":
			client = named(s.vars[i].Charset)
		case "character_set_connection", "collation_connection":
			conn = shard.ClientOther
		}
	}
	return min(client, conn)
}

// handshakeCharsets are the client character sets of the handshake
// collation ids (one byte) of utf8mb3 and utf8mb4; others are ClientOther.
var handshakeCharsets = func() (t [256]shard.ClientCharset) {
	for _, id := range []int{33, 76, 83, 223} {
		t[id] = shard.ClientUTF8MB3
	}
	for id := 192; id <= 215; id++ {
		t[id] = shard.ClientUTF8MB3
	}
	for _, id := range []int{45, 46, 255} {
		t[id] = shard.ClientUTF8MB4
	}
	for id := 224; id <= 247; id++ {
		t[id] = shard.ClientUTF8MB4
	}
	return t
}()
