package dataplane

import (
	"errors"
	"net"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/policy"
	"github.com/sluice-proxy/sluice/protocol"
)

// backoffPolicy reads the login backoff settings of the live configuration.
func (e *Env) backoffPolicy() policy.Backoff {
	p := &e.config().Proxy
	return policy.Backoff{Threshold: p.LoginFailuresBeforeBackoff, First: p.LoginBackoff.Duration, Max: p.LoginBackoffMax.Duration}
}

// errLoginBackoff marks a login refused because the client's address is in
// login backoff.
var errLoginBackoff = errors.New("client address in login backoff")

// loginRefusal returns the ERR 1129 (ER_HOST_IS_BLOCKED) for a login from
// remote while its address is in login backoff, nil otherwise. The caller
// sends it in place of the greeting, before any auth-server round trip:
// MySQL does the same for a host max_connect_errors blocked, and clients
// report it as a blocked host, not as a wrong password (which 1045 would
// claim even when the password is right).
func (e *Env) loginRefusal(remote net.Addr) *protocol.SQLError {
	key, ok := policy.BackoffKey(remote)
	if !ok {
		return nil
	}
	wait, failures := e.logins.Blocked(key, time.Now(), e.backoffPolicy())
	if wait <= 0 {
		return nil
	}
	host := remote.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	secs := int((wait + time.Second - 1) / time.Second)
	return protocol.ERHostIsBlocked.New(
		"Host '%s' is blocked: too many failed logins from %s (%d in a row); retry in %ds (sluice login backoff)",
		host, host, failures, secs)
}

// loginRefused returns the auth.Server.Refused hook for a login from
// remote on port (named in the log): it counts the failure on the login
// backoff before the client sees the ERR, so a client that tries again at
// once already meets the refusal; a warn line says when a backoff starts.
func (e *Env) loginRefused(remote net.Addr, port string) func(user string) {
	return func(user string) {
		key, ok := policy.BackoffKey(remote)
		if !ok {
			return
		}
		failures, wait := e.logins.Failed(key, time.Now(), e.backoffPolicy())
		if wait > 0 {
			e.log.Warn("login backoff: refusing logins from the client address", zap.String("port", port),
				zap.String("address", key.String()), zap.String("user", user), zap.Int("failures", failures),
				zap.Duration("backoff", wait))
		}
	}
}

// loginSucceeded forgets remote's failed logins: a successful login ends
// its backoff.
func (e *Env) loginSucceeded(remote net.Addr) {
	if key, ok := policy.BackoffKey(remote); ok {
		e.logins.Succeeded(key)
	}
}

// LoginRefusal is loginRefusal, for the admin port.
func (e *Env) LoginRefusal(remote net.Addr) *protocol.SQLError { return e.loginRefusal(remote) }

// LoginRefused is loginRefused, for the admin port.
func (e *Env) LoginRefused(remote net.Addr, port string) func(user string) {
	return e.loginRefused(remote, port)
}

// LoginSucceeded is loginSucceeded, for the admin port.
func (e *Env) LoginSucceeded(remote net.Addr) { e.loginSucceeded(remote) }
