package auth

import (
	"sync"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// Reauth is what a login leaves behind for re-authenticating the same
// client connection with COM_CHANGE_USER. The session that logged in owns
// it, must Close it when it ends, and hands it to ChangeUser.
//
// A MySQL-protocol server keeps the scramble of its greeting for the
// connection's lifetime, and clients answer COM_CHANGE_USER from it.
// MariaDB Connector/C (libmariadb: MySQLdb, the mariadb CLI, DBD::MariaDB)
// and libmysqlclient answer from it even when the server then switches
// them to mysql_native_password with a new scramble: they send their first
// answer again. Only the auth-server connection that issued that scramble
// can check such an answer, so for those clients the relay may keep the
// login's auth-server connection open (Relay.MaxKeptConnections) and send
// their COM_CHANGE_USER there.
type Reauth struct {
	// Scramble is the last scramble the client was given during its login
	// (the greeting's or an auth switch's). It is a public nonce, not a
	// secret.
	Scramble []byte

	mu sync.Mutex
	// leg is the auth-server connection the login ran on, logged in and
	// idle; nil when none was kept or it has been closed.
	leg *protocol.Conn
	// legCaps are the capabilities negotiated on leg.
	legCaps uint32
	// legAddr is the auth server leg is connected to: after a reload that
	// moved the auth server, leg is not used.
	legAddr string
	// release gives the relay's slot for leg back.
	release func()
}

// Close closes the kept auth-server connection, if any. It is safe on a nil
// Reauth and may be called more than once.
func (r *Reauth) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	leg, release := r.leg, r.release
	r.leg, r.release = nil, nil
	r.mu.Unlock()
	if leg != nil {
		closeUpstream(leg)
	}
	if release != nil {
		release()
	}
}

// Kept reports whether r holds the login's auth-server connection.
func (r *Reauth) Kept() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leg != nil
}

// takeLeg hands the kept connection to one COM_CHANGE_USER; putLeg gives
// it back when that exchange left it usable.
func (r *Reauth) takeLeg() (leg *protocol.Conn, caps uint32, addr string) {
	if r == nil {
		return nil, 0, ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	leg = r.leg
	r.leg = nil
	return leg, r.legCaps, r.legAddr
}

func (r *Reauth) putLeg(leg *protocol.Conn) {
	leg.Idle()
	_ = leg.NetConn().SetDeadline(time.Time{})
	r.mu.Lock()
	r.leg = leg
	r.mu.Unlock()
}

// dropLeg closes a leg taken by takeLeg and gives its slot back.
func (r *Reauth) dropLeg(leg *protocol.Conn) {
	closeUpstream(leg)
	r.mu.Lock()
	release := r.release
	r.release = nil
	r.mu.Unlock()
	if release != nil {
		release()
	}
}

// scrambleOf copies s, the scramble a client was given, for a Reauth.
func scrambleOf(s []byte) []byte { return append([]byte(nil), s...) }

// answersFromLoginScramble reports whether the connection attributes attrs
// name a client library that answers every COM_CHANGE_USER from its login's
// scramble, auth switch or not: libmariadb (MariaDB Connector/C) and
// libmysql (MySQL's libmysqlclient).
func answersFromLoginScramble(attrs []byte) bool {
	name, ok := attribute(attrs, "_client_name")
	return ok && (name == "libmariadb" || name == "libmysql")
}

// attribute returns the value of key in the connection attributes attrs
// (length-encoded key/value pairs); malformed attributes hold no key.
func attribute(attrs []byte, key string) (string, bool) {
	for len(attrs) > 0 {
		k, n, err := protocol.ReadLenEncString(attrs)
		if err != nil {
			return "", false
		}
		attrs = attrs[n:]
		v, n, err := protocol.ReadLenEncString(attrs)
		if err != nil {
			return "", false
		}
		attrs = attrs[n:]
		if string(k) == key {
			return string(v), true
		}
	}
	return "", false
}
