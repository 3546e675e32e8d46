package auth

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// TestStaticRefusedBeforeERR: Server.Refused runs, with the user name,
// before the client can read the ERR of a refused login, so a caller that
// counts failed logins (the login backoff) has counted it by the time the
// client can try again. A right password does not call it.
func TestStaticRefusedBeforeERR(t *testing.T) {
	// SHA1(SHA1("secret")), as PASSWORD('secret') prints it.
	st, err := NewStatic(map[string]string{"app": "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		password string
		refused  bool
	}{{"wrong", true}, {"secret", false}} {
		a, b := net.Pipe()
		_ = a.SetDeadline(time.Now().Add(10 * time.Second))
		_ = b.SetDeadline(time.Now().Add(10 * time.Second))
		var calledFor atomic.Pointer[string]
		srv := Server{ConnectionID: 1, ServerVersion: "test", Capabilities: protocol.BackendCapabilities, Collation: 45,
			ClientHost: "127.0.0.1", Refused: func(user string) { calledFor.Store(&user) }}
		done := make(chan error, 1)
		go func() {
			_, err := st.Authenticate(context.Background(), protocol.NewConn(b), srv)
			if err == nil {
				err = protocol.NewConn(b).WritePacketFlush(protocol.AppendOK(nil, protocol.OK{}))
			}
			done <- err
		}()
		c := protocol.NewConn(a)
		c.LenientSeq = true
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		g, err := protocol.ParseGreeting(p)
		if err != nil {
			t.Fatal(err)
		}
		hr := &protocol.HandshakeResponse{Capabilities: protocol.BackendCapabilities, MaxPacketSize: 1 << 24, Collation: 45,
			User: "app", AuthResponse: protocol.NativePasswordResponse(g.Scramble, tc.password), AuthPlugin: protocol.AuthNativePassword}
		if err := c.WritePacketFlush(hr.Encode()); err != nil {
			t.Fatal(err)
		}
		p, err = c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		// Read right after the answer arrived: the hook must have run.
		got := calledFor.Load()
		if tc.refused {
			if e, perr := protocol.ParseErr(p); perr != nil || e.Code != protocol.ERAccessDenied.Code {
				t.Fatalf("password %q: got % x, want ERR 1045", tc.password, p)
			}
			if got == nil || *got != "app" {
				t.Fatalf("password %q: Refused not called with the user before the ERR reached the client (got %v)", tc.password, got)
			}
			if err := <-done; !errors.Is(err, ErrAccessDenied) {
				t.Fatalf("password %q: Authenticate returned %v, want ErrAccessDenied", tc.password, err)
			}
		} else {
			if !protocol.IsOK(p) {
				t.Fatalf("password %q: got % x, want OK", tc.password, p)
			}
			if got != nil {
				t.Fatalf("password %q: Refused called for a login that succeeded", tc.password)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		a.Close()
		b.Close()
	}
}
