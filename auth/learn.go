package auth

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/sluice-proxy/sluice/auth/grants"
	"github.com/sluice-proxy/sluice/protocol"
)

// errNoAccount reports a CURRENT_USER() answer that names no account.
var errNoAccount = errors.New("CURRENT_USER() named no account")

// learnGrants asks the auth server, on the connection c that has just
// logged the client in (negotiated with caps), which account matched and
// what it may do: SELECT CURRENT_USER() and SHOW GRANTS go together, in one
// round trip, and every user may run both. When the account holds roles
// other than its default one, one more round trip reads what each grants
// (SET ROLE r, SHOW GRANTS), so that SET ROLE through sluice knows it; the
// connection is left with the last of them enabled, which only matters to
// a COM_CHANGE_USER on it, and that resets the session. known, when set,
// returns the set already held for exactly this first SHOW GRANTS answer,
// which spares parsing it again at every login of an account (and the
// garbage) and, for an account with other roles, the second round trip.
// The set returned keeps that answer as its First. Lines are sanitized
// (no IDENTIFIED clause) as soon as they are read.
func learnGrants(c *protocol.Conn, caps uint32, known func(user, host string, lines []string) *grants.Set) (*grants.Set, error) {
	rs, err := queries(c, caps, "SELECT CURRENT_USER()", "SHOW GRANTS")
	if err != nil {
		return nil, err
	}
	if len(rs[0]) != 1 {
		return nil, errNoAccount
	}
	at := strings.LastIndexByte(rs[0][0], '@')
	if at < 0 {
		return nil, fmt.Errorf("%w: %q", errNoAccount, rs[0][0])
	}
	user, host := rs[0][0][:at], rs[0][0][at+1:]
	if known != nil {
		if set := known(user, host, rs[1]); set != nil {
			return set, nil
		}
	}
	set, err := grants.Parse(user, host, rs[1])
	if err != nil {
		return nil, err
	}
	var more []string
	for _, r := range otherRoles(set) {
		more = append(more, "SET ROLE "+quoteName(r), "SHOW GRANTS")
	}
	if len(more) == 0 {
		set.First = rs[1]
		return set, nil
	}
	extra, err := queries(c, caps, more...)
	if err != nil {
		return nil, err
	}
	lines := append([]string(nil), set.Lines...)
	for _, r := range extra {
		lines = append(lines, r...)
	}
	if set, err = grants.Parse(user, host, lines); err != nil {
		return nil, err
	}
	set.First = rs[1]
	return set, nil
}

// otherRoles are the roles granted to set's account other than its default
// one: what the login's first SHOW GRANTS does not describe.
func otherRoles(set *grants.Set) []string {
	var out []string
	for _, r := range set.Granted {
		if r != set.DefaultRole {
			out = append(out, r)
		}
	}
	return out
}

// quoteName quotes an identifier with backticks.
func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// queries sends each text as a COM_QUERY without waiting for answers, then
// reads the answers: for each, the first column of every row, each value
// sanitized at once (grants.Sanitize). An ERR answer fails the whole.
func queries(c *protocol.Conn, caps uint32, texts ...string) ([][]string, error) {
	for _, t := range texts {
		c.ResetSeq()
		if err := c.WritePacket(append([]byte{protocol.ComQuery}, t...)); err != nil {
			return nil, err
		}
	}
	if err := c.Flush(); err != nil {
		return nil, err
	}
	out := make([][]string, len(texts))
	var firstErr error
	for i, t := range texts {
		rows, err := readRows(c, caps)
		if err != nil {
			var se *protocol.SQLError
			if !errors.As(err, &se) {
				return nil, fmt.Errorf("%s: %w", t, err)
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", t, err)
			}
		}
		out[i] = rows
	}
	return out, firstErr
}

// readRows reads one text answer: an OK (no rows), an ERR (returned as a
// *protocol.SQLError) or a result set, of which it keeps the first column,
// sanitized (grants.Sanitize). A row's packet is zeroed once it is read,
// so that no IDENTIFIED clause it held lingers in the read buffer.
func readRows(c *protocol.Conn, caps uint32) ([]string, error) {
	p, err := c.ReadPacket()
	if err != nil {
		return nil, err
	}
	switch {
	case protocol.IsErr(p):
		e, perr := protocol.ParseErr(p)
		if perr != nil {
			return nil, perr
		}
		return nil, e
	case protocol.IsOK(p):
		return nil, nil
	}
	n, _, _, err := protocol.ReadLenEncInt(p)
	if err != nil || n == 0 {
		return nil, fmt.Errorf("bad column count: %v", err)
	}
	for range n {
		if _, err := c.ReadPacket(); err != nil {
			return nil, err
		}
	}
	deprecateEOF := caps&protocol.ClientDeprecateEOF != 0
	if !deprecateEOF {
		if _, err := c.ReadPacket(); err != nil {
			return nil, err
		}
	}
	var rows []string
	dst := make([][]byte, int(n))
	for {
		p, err := c.ReadPacket()
		if err != nil {
			return nil, err
		}
		if protocol.IsErr(p) {
			e, perr := protocol.ParseErr(p)
			if perr != nil {
				return nil, perr
			}
			return nil, e
		}
		if len(p) > 0 && p[0] == 0xfe && len(p) < 0xffffff {
			return rows, nil
		}
		vals, err := protocol.ParseTextRow(p, int(n), dst)
		if err != nil {
			clear(p)
			return nil, err
		}
		rows = append(rows, sanitizedCopy(vals[0]))
		clear(p)
	}
}

// sanitizedCopy returns grants.Sanitize of the value v as a string of its
// own. The unsanitized text is only ever viewed in place, never copied
// into a string: a password hash in it stays in v alone, which the caller
// clears. The result never shares v's memory.
func sanitizedCopy(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	s := grants.Sanitize(unsafe.String(&v[0], len(v)))
	if s == "" {
		return ""
	}
	lo := uintptr(unsafe.Pointer(&v[0]))
	if at := uintptr(unsafe.Pointer(unsafe.StringData(s))); at >= lo && at < lo+uintptr(len(v)) {
		return strings.Clone(s)
	}
	return s
}
