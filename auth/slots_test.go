package auth

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/protocol"
)

// greetAndAnswer plays a client of a deferred login up to the auth switch:
// it answers sluice's greeting and returns the auth switch's scramble,
// leaving the answer to it (and the login's slot held) to the caller.
func greetAndAnswer(t *testing.T, c *protocol.Conn) []byte {
	t.Helper()
	g := clientGreeting(t, c)
	if err := c.WritePacketFlush(nativeResponse(protocol.BackendCapabilities, g.Scramble, "secret")); err != nil {
		t.Fatal(err)
	}
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	_, data, err := protocol.ParseAuthSwitch(p)
	if err != nil {
		t.Fatalf("got %q (%v), want an auth switch", p, err)
	}
	return data
}

// finishSwitch answers the auth switch's scramble and checks the login
// succeeded.
func finishSwitch(t *testing.T, c *protocol.Conn, scramble []byte, done <-chan loginResult) {
	t.Helper()
	if err := c.WritePacketFlush(protocol.NativePasswordResponse(scramble, "secret")); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil {
		t.Fatalf("login: %v", res.err)
	}
}

// TestRelayBoundsConcurrentLogins: with max_concurrent_logins 4, logins
// waiting for their silent clients hold at most half the slots (the third
// silent client is deferred); logins beyond the bound wait for a slot
// without touching the auth server and go on, in order, as slots free up;
// a login that finds none within its handshake deadline gets ERR 1040
// naming the key; every slot comes back.
func TestRelayBoundsConcurrentLogins(t *testing.T) {
	srv := startNativeAuthServer(t)
	r := &Relay{Address: srv.addr, DialTimeout: 2 * time.Second, MaxPendingHandshakes: 64, MaxConcurrentLogins: 4}

	// Two silent clients hold two slots and two auth-server connections.
	var silent []*protocol.Conn
	for range 2 {
		c, _ := relayLogin(t, r)
		if g := clientGreeting(t, c); !bytes.Equal(g.Scramble, srv.scramble) {
			t.Fatalf("greeting scramble %q, want the auth server's", g.Scramble)
		}
		silent = append(silent, c)
	}
	// The third is deferred although max_pending_handshakes is 64: half
	// of the slots are already held by logins waiting for their client.
	// It and a fourth take the two other slots at their auth switch.
	var paused [][]byte
	var pausedConns []*protocol.Conn
	var pausedDone []<-chan loginResult
	for range 2 {
		c, done := relayLogin(t, r)
		paused = append(paused, greetAndAnswer(t, c))
		pausedConns, pausedDone = append(pausedConns, c), append(pausedDone, done)
	}
	if n := srv.open.Load(); n != 4 {
		t.Fatalf("auth-server connections %d with 4 logins under way, want 4", n)
	}

	// The fifth waits for a slot, with no auth-server connection.
	before := srv.accepted.Load()
	c5, done5 := relayLogin(t, r)
	g := clientGreeting(t, c5)
	if err := c5.WritePacketFlush(nativeResponse(protocol.BackendCapabilities, g.Scramble, "secret")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fifth login to wait for a slot", func() bool { return r.WaitingLogins() == 1 })
	if n := srv.accepted.Load(); n != before {
		t.Fatalf("a login waiting for a slot opened %d auth-server connections", n-before)
	}

	// A sixth with a short deadline gives up with 1040.
	c6, done6 := relayLoginWithin(t, r, 300*time.Millisecond)
	g6 := clientGreeting(t, c6)
	if err := c6.WritePacketFlush(nativeResponse(protocol.BackendCapabilities, g6.Scramble, "secret")); err != nil {
		t.Fatal(err)
	}
	p, err := c6.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	if e, perr := protocol.ParseErr(p); perr != nil || e.Code != protocol.ERConCount.Code || !strings.Contains(e.Message, "auth.max_concurrent_logins") {
		t.Fatalf("login without a slot in time: %q (%v), want 1040 naming auth.max_concurrent_logins", p, perr)
	}
	if res := <-done6; !errors.Is(res.err, ErrHandshake) {
		t.Fatalf("login without a slot: err %v, want ErrHandshake", res.err)
	}

	// A paused login finishing frees its slot for the fifth.
	finishSwitch(t, pausedConns[0], paused[0], pausedDone[0])
	p, err = c5.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	_, data, err := protocol.ParseAuthSwitch(p)
	if err != nil {
		t.Fatalf("fifth login after a slot freed: %q (%v), want its auth switch", p, err)
	}
	finishSwitch(t, c5, data, done5)
	finishSwitch(t, pausedConns[1], paused[1], pausedDone[1])

	// The silent clients hang up; every slot is free again.
	for _, c := range silent {
		c.Close()
	}
	waitFor(t, "the silent logins to end", func() bool { return r.PendingHandshakes() == 0 })
	waitFor(t, "every login slot to be free", func() bool { return len(r.loginSlots()) == 0 })
}
