package badinput

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-proxy/sluice/protocol"
)

// lenencResponse builds a handshake response for the app user by hand, with
// the auth response and the connection attributes behind the given raw
// length prefixes (each followed by its data).
func lenencResponse(g *protocol.Greeting, authField, attrsField []byte) []byte {
	caps := clientCaps
	b := le32(caps)
	b = append(b, le32(1<<24)...)
	b = append(b, 45)
	b = append(b, make([]byte, 23)...)
	b = append(b, env.topo.Opts.AppUser...)
	b = append(b, 0)
	b = append(b, authField...)
	b = append(b, "mysql_native_password\x00"...)
	return append(b, attrsField...)
}

// attrs is a valid connection-attribute block (without its length).
var attrs = protocol.AppendLenEncString(protocol.AppendLenEncString(nil, []byte("_client_name")), []byte("badinput"))

// Length-encoded integers with the 0xFB..0xFF prefixes in every lenenc field
// of the handshake response: the auth response (CLIENT_PLUGIN_AUTH_LENENC_
// CLIENT_DATA), the connection-attribute block and the attributes in it.
// Truncated or impossible lengths get ERR 1043 naming the field; a valid
// but non-minimal encoding logs in.
func TestLenEncPrefixesInHandshakeResponse(t *testing.T) {
	checkLeaks(t)
	okAttrs := protocol.AppendLenEncString(nil, attrs)
	huge8 := []byte{0xfe, 0, 0, 0, 0, 0, 0, 0, 0x80}
	type tc struct {
		name       string
		auth       func(scramble []byte) []byte
		attrs      []byte
		wantOK     bool
		wantFields []string // ERR 1043 naming these; empty with !wantOK: any refusal
	}
	goodAuth := func(s []byte) []byte {
		return protocol.AppendLenEncString(nil, protocol.NativePasswordResponse(s, env.topo.Opts.AppPassword))
	}
	fixed := func(b ...byte) func([]byte) []byte { return func([]byte) []byte { return b } }
	cases := []tc{
		{name: "baseline", auth: goodAuth, attrs: okAttrs, wantOK: true},
		// The auth response's length.
		{name: "auth/0xfb-null", auth: fixed(0xfb), attrs: okAttrs, wantFields: []string{"auth response", "NULL"}},
		{name: "auth/0xfc-non-minimal", auth: func(s []byte) []byte {
			return append([]byte{0xfc, 20, 0}, protocol.NativePasswordResponse(s, env.topo.Opts.AppPassword)...)
		}, attrs: okAttrs, wantOK: true},
		{name: "auth/0xfc-truncated-data", auth: fixed(0xfc, 0xff, 0xff, 1, 2, 3), attrs: okAttrs, wantFields: []string{"auth response", "truncated"}},
		{name: "auth/0xfc-truncated-prefix", auth: fixed(0xfc), wantFields: []string{"auth response"}},
		{name: "auth/0xfd-truncated-data", auth: fixed(0xfd, 0xff, 0xff, 0xff, 1), attrs: okAttrs, wantFields: []string{"auth response", "truncated"}},
		{name: "auth/0xfe-2^63", auth: fixed(huge8...), attrs: okAttrs, wantFields: []string{"auth response", "truncated"}},
		{name: "auth/0xfe-truncated-prefix", auth: fixed(0xfe, 1, 2), wantFields: []string{"auth response"}},
		{name: "auth/0xff", auth: fixed(0xff, 1, 2, 3), attrs: okAttrs, wantFields: []string{"auth response", "0xff"}},
		// The attribute block's length.
		{name: "attrs/0xfb-null", auth: goodAuth, attrs: []byte{0xfb}, wantFields: []string{"connection attributes", "NULL"}},
		{name: "attrs/0xfc-non-minimal", auth: goodAuth, attrs: append([]byte{0xfc, byte(len(attrs)), 0}, attrs...), wantOK: true},
		{name: "attrs/0xfc-truncated-data", auth: goodAuth, attrs: append([]byte{0xfc, 0xff, 0xff}, attrs...), wantFields: []string{"connection attributes", "truncated"}},
		{name: "attrs/0xfd-truncated-data", auth: goodAuth, attrs: append([]byte{0xfd, 0xff, 0xff, 0xff}, attrs...), wantFields: []string{"connection attributes", "truncated"}},
		{name: "attrs/0xfe-2^63", auth: goodAuth, attrs: append(huge8, attrs...), wantFields: []string{"connection attributes", "truncated"}},
		{name: "attrs/0xfe-truncated-prefix", auth: goodAuth, attrs: []byte{0xfe, 1}, wantFields: []string{"connection attributes"}},
		{name: "attrs/0xff", auth: goodAuth, attrs: []byte{0xff, 1, 2}, wantFields: []string{"connection attributes", "0xff"}},
	}
	// Inside the block sluice passes the attributes on unchanged: the auth
	// server accepts or refuses them, and nothing hangs.
	for _, p := range []byte{0xfb, 0xfc, 0xfd, 0xfe, 0xff} {
		for _, where := range []string{"key", "value"} {
			inner := append([]byte{p, 0xff, 0xff}, "xyz"...)
			if where == "value" {
				inner = append(protocol.AppendLenEncString(nil, []byte("_client_name")), inner...)
			}
			cases = append(cases, tc{name: fmt.Sprintf("attr-%s/0x%02x", where, p), auth: goodAuth, attrs: protocol.AppendLenEncString(nil, inner)})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, env.addr)
			g := readGreeting(t, c)
			writeRaw(t, c, packet(1, lenencResponse(g, tc.auth(g.Scramble), tc.attrs)))
			p := readPacket(t, c)
			switch {
			case tc.wantOK:
				if !protocol.IsOK(p) {
					t.Fatalf("want OK, got % x", p[:min(len(p), 64)])
				}
				requireSelect1(t, c)
				return
			case len(tc.wantFields) > 0:
				requireErr(t, p, protocol.ERHandshake.Code, append([]string{"Bad handshake"}, tc.wantFields...)...)
			case protocol.IsOK(p):
				requireSelect1(t, c)
				return
			default:
				e, err := protocol.ParseErr(p)
				if err != nil {
					t.Fatalf("want OK or ERR, got % x", p[:min(len(p), 64)])
				}
				t.Logf("refused: ERR %d %s", e.Code, e.Message)
			}
			requireClosed(t, c)
		})
	}
	requireServes(t, env.addr)
}

// loginErr logs in through sluice with go-sql-driver as user/password and
// returns the error of a SELECT 1 (nil when served).
func loginErr(user, password string) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, password, "tcp", env.addr
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 10*time.Second, 20*time.Second, 20*time.Second
	cfg.AllowCleartextPasswords = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxIdleConns(0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var one int
	return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// requireDenied requires err to be ERR 1045 or a clean close (the driver's
// invalid-connection error), never a timeout.
func requireDenied(t testing.TB, err error) {
	t.Helper()
	var me *mysql.MySQLError
	switch {
	case err == nil:
		t.Fatal("login succeeded")
	case errors.As(err, &me):
		if me.Number != protocol.ERAccessDenied.Code {
			t.Fatalf("got ERR %d %q, want 1045", me.Number, me.Message)
		}
	case errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn):
		t.Logf("closed: %v", err)
	default:
		t.Fatalf("want ERR 1045 or a clean close, got %v", err)
	}
}

func TestUsername10KB(t *testing.T) {
	checkLeaks(t)
	requireDenied(t, loginErr(strings.Repeat("u", 10<<10), env.topo.Opts.AppPassword))
	// The same through a raw handshake response.
	c := rawDial(t, env.addr)
	h := appResponse(readGreeting(t, c))
	h.User = strings.Repeat("\xffu", 5<<10)
	if err := c.WritePacketFlush(h.Encode()); err != nil {
		t.Fatal(err)
	}
	p := readPacket(t, c)
	if !protocol.IsErr(p) {
		t.Fatalf("want ERR, got % x", p[:min(len(p), 32)])
	}
	requireClosed(t, c)
	requireServes(t, env.addr)
}

func TestEmptyPassword(t *testing.T) {
	checkLeaks(t)
	requireDenied(t, loginErr(env.topo.Opts.AppUser, ""))
	requireServes(t, env.addr)
}

func TestMegabytePassword(t *testing.T) {
	checkLeaks(t)
	big := strings.Repeat("p", 1<<20)
	// go-sql-driver hashes it (mysql_native_password): 20 bytes cross.
	requireDenied(t, loginErr(env.topo.Opts.AppUser, big))
	// Sent as it is: a 1 MiB auth response in the handshake response, and
	// a 1 MiB answer to an auth switch.
	t.Run("auth-response", func(t *testing.T) {
		c := rawDial(t, env.addr)
		h := appResponse(readGreeting(t, c))
		h.AuthResponse = []byte(big)
		if err := c.WritePacketFlush(h.Encode()); err != nil {
			t.Fatal(err)
		}
		requireLoginRefused(t, c)
	})
	t.Run("auth-switch-answer", func(t *testing.T) {
		c := forceAuthSwitch(t, "mysql_clear_password")
		writeRaw(t, c, packet(3, []byte(big)))
		requireLoginRefused(t, c)
	})
	requireServes(t, env.addr)
}

// requireLoginRefused requires ERR 1045 (or 1043, the auth server's
// answer to an answer it cannot use) or a clean close on c.
func requireLoginRefused(t testing.TB, c *protocol.Conn) {
	t.Helper()
	c.LenientSeq = true
	p, err := c.ReadPacket()
	if err != nil {
		if !isClosed(err) {
			t.Fatalf("want ERR 1045 or a close, got %v", err)
		}
		return
	}
	e, perr := protocol.ParseErr(p)
	if perr != nil || (e.Code != protocol.ERAccessDenied.Code && e.Code != protocol.ERHandshake.Code) {
		t.Fatalf("want ERR 1045, got % x (%v)", p[:min(len(p), 64)], e)
	}
	t.Logf("refused: ERR %d %s", e.Code, e.Message)
	requireClosed(t, c)
}
