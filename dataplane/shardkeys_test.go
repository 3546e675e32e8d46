package dataplane

import (
	"testing"

	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/shard"
)

// The client character set the shard rules see: the handshake's collation,
// then SET NAMES, SET CHARACTER SET, character_set_client and
// character_set_connection in order; the weaker of client and connection.
func TestClientCharset(t *testing.T) {
	set := func(name, cs string) trackedVar {
		return trackedVar{router.SessionVar{Name: name, Charset: cs}}
	}
	for _, tc := range []struct {
		collation uint8
		vars      []trackedVar
		want      shard.ClientCharset
	}{
		{45, nil, shard.ClientUTF8MB4},  // utf8mb4_general_ci
		{224, nil, shard.ClientUTF8MB4}, // utf8mb4_unicode_ci
		{33, nil, shard.ClientUTF8MB3},  // utf8mb3_general_ci
		{8, nil, shard.ClientOther},     // latin1_swedish_ci
		{11, nil, shard.ClientOther},    // ascii_general_ci
		{63, nil, shard.ClientOther},    // binary
		{45, []trackedVar{set("names", "latin1")}, shard.ClientOther},
		{8, []trackedVar{set("names", "UTF8MB4")}, shard.ClientUTF8MB4},
		{45, []trackedVar{set("character set", "utf8mb4")}, shard.ClientOther}, // connection: the database's
		{45, []trackedVar{set("character set", "utf8"), set("names", "utf8")}, shard.ClientUTF8MB3},
		{45, []trackedVar{set("character_set_connection", "")}, shard.ClientOther},
		{45, []trackedVar{set("character_set_connection", ""), set("names", "utf8mb4")}, shard.ClientUTF8MB4},
		{45, []trackedVar{set("character_set_client", "utf8mb3")}, shard.ClientUTF8MB3},
		{45, []trackedVar{set("names", "latin1"), set("sql_mode", ""), set("character_set_client", "utf8mb4")}, shard.ClientOther}, // the connection stays latin1
		{45, []trackedVar{set("names", "")}, shard.ClientOther},                                                                    // SET NAMES DEFAULT: not known
		{8, []trackedVar{set("character_set_results", "utf8mb4")}, shard.ClientOther},
	} {
		s := &Session{vars: tc.vars}
		s.key.collation = tc.collation
		if got := s.clientCharset(); got != tc.want {
			t.Errorf("collation %d, vars %v: %d, want %d", tc.collation, tc.vars, got, tc.want)
		}
	}
}
