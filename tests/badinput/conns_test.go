package badinput

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/protocol"
)

// slowloris sends b one byte a second on nc until a write fails or stop is
// closed.
func slowloris(nc net.Conn, b []byte, stop <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; ; i = (i + 1) % len(b) {
		if _, err := nc.Write(b[i : i+1]); err != nil {
			return
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// A client that sends its handshake one byte a second is closed at
// handshake_timeout, however steadily it trickles; nothing of its session
// is left behind.
func TestSlowlorisHandshake(t *testing.T) {
	checkLeaks(t)
	for _, readFirst := range []bool{true, false} {
		name := "after-greeting"
		if !readFirst {
			name = "greeting-unread"
		}
		t.Run(name, func(t *testing.T) {
			c := rawDial(t, env.addr)
			if readFirst {
				readGreeting(t, c)
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			// A well-formed response (over a made-up scramble) to trickle.
			resp := packet(1, appResponse(&protocol.Greeting{Scramble: make([]byte, 20)}).Encode())
			start := time.Now()
			go func() { defer close(done); slowloris(c.NetConn(), resp, stop) }()
			_ = c.SetReadDeadline(start.Add(handshakeTimeout + 15*time.Second))
			requireClosed(t, c)
			d := time.Since(start)
			close(stop)
			<-done
			if d < handshakeTimeout*9/10 {
				t.Fatalf("closed after %v, before handshake_timeout %v", d, handshakeTimeout)
			}
			t.Logf("closed after %v (handshake_timeout %v)", d.Round(10*time.Millisecond), handshakeTimeout)
		})
	}
	requireServes(t, env.addr)
}

// silentConns is how many connections TestThousandSilentHandshakes opens.
const silentConns = 1000

// 1,000 connections that never finish the handshake (half read the
// greeting, half do not; all then stay silent) are all closed by
// handshake_timeout, goroutines and file descriptors come back to where they
// were, and meanwhile a normal client logs in and queries.
func TestThousandSilentHandshakes(t *testing.T) {
	checkLeaks(t)
	requireServes(t, env.addr) // warm: pools and the driver settle first
	baseFDs := openFDs(t)

	conns := make([]net.Conn, silentConns)
	var wg sync.WaitGroup
	errs := make(chan error, silentConns)
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < silentConns; i += 20 {
				nc, err := net.DialTimeout("tcp", env.addr, 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				conns[i] = nc
				if i%2 == 0 {
					_ = nc.SetReadDeadline(time.Now().Add(rawDeadline))
					hdr := make([]byte, 4)
					if _, err := nc.Read(hdr); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	t.Cleanup(func() {
		for _, nc := range conns {
			if nc != nil {
				nc.Close()
			}
		}
	})
	for err := range errs {
		t.Fatalf("opening the silent connections: %v", err)
	}
	opened := time.Now()

	// Meanwhile the silent clients hold at most auth.max_pending_handshakes
	// auth-server connections: beyond that sluice greets them with its own
	// scramble and reaches the auth server only once a client answers. So
	// the auth server is not flooded, and a normal client logs in (its
	// login deferred as well, through an auth switch) and queries.
	authDB, err := env.topo.Auth.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var threads int
	if err := authDB.QueryRowContext(ctxT(t), "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &threads); err != nil {
		t.Fatal(err)
	}
	// The margin covers the root connection asking and logins of other
	// tests still closing.
	if limit := conf.DefaultMaxPendingHandshakes + 10; threads > limit {
		t.Fatalf("the auth server has %d connections during %d silent handshakes, want at most %d (auth.max_pending_handshakes %d)",
			threads, silentConns, limit, conf.DefaultMaxPendingHandshakes)
	}
	if err := loginErr(env.topo.Opts.AppUser, env.topo.Opts.AppPassword); err != nil {
		t.Fatalf("a normal client during the %d silent handshakes: %v", silentConns, err)
	}
	requireServes(t, env.addr)
	t.Logf("during %d silent handshakes: auth server Threads_connected %d; a normal client logged in and queried", silentConns, threads)

	// Every silent connection is closed by sluice at handshake_timeout.
	deadline := opened.Add(handshakeTimeout + 30*time.Second)
	var closed sync.WaitGroup
	stillOpen := make(chan int, silentConns)
	for w := range 20 {
		closed.Add(1)
		go func() {
			defer closed.Done()
			buf := make([]byte, 4096)
			for i := w; i < silentConns; i += 20 {
				nc := conns[i]
				_ = nc.SetReadDeadline(deadline)
				for {
					_, err := nc.Read(buf)
					if err == nil {
						continue
					}
					if !isClosed(err) {
						stillOpen <- i
					}
					break
				}
				nc.Close()
			}
		}()
	}
	closed.Wait()
	close(stillOpen)
	if n := len(stillOpen); n > 0 {
		t.Fatalf("%d of %d silent connections still open %v after handshake_timeout", n, silentConns, time.Since(opened))
	}
	t.Logf("all %d silent connections closed %v after opening (handshake_timeout %v)",
		silentConns, time.Since(opened).Round(10*time.Millisecond), handshakeTimeout)

	// File descriptors come back (goroutines: checkLeaks).
	fdDeadline := time.Now().Add(20 * time.Second)
	fds := openFDs(t)
	for fds > baseFDs+5 && time.Now().Before(fdDeadline) {
		time.Sleep(50 * time.Millisecond)
		fds = openFDs(t)
	}
	if fds > baseFDs+5 {
		t.Fatalf("open fds: %d before, %d after", baseFDs, fds)
	}
	requireServes(t, env.addr)
}
