package protocol

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// pipeConns returns two Conns joined by an in-memory full-duplex pipe.
func pipeConns(t *testing.T) (*Conn, *Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return NewConn(a), NewConn(b)
}

func TestPacketRoundTripSizes(t *testing.T) {
	for _, n := range []int{0, 1, 250, 1 << 16, MaxPayloadLen - 1, MaxPayloadLen, MaxPayloadLen + 1, 2*MaxPayloadLen + 7} {
		w, r := pipeConns(t)
		payload := bytes.Repeat([]byte{0xab}, n)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		errc := make(chan error, 1)
		go func() { errc <- w.WritePacketFlush(payload) }()
		got, err := r.ReadPacket()
		if err != nil {
			t.Fatalf("size %d: read: %v", n, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("size %d: write: %v", n, err)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("size %d: payload differs (got %d bytes)", n, len(got))
		}
		wantPackets := n/MaxPayloadLen + 1
		if int(r.Seq()) != wantPackets || int(w.Seq()) != wantPackets {
			t.Fatalf("size %d: seq after = %d/%d, want %d", n, r.Seq(), w.Seq(), wantPackets)
		}
	}
}

func TestReadPacketLimit(t *testing.T) {
	w, r := pipeConns(t)
	r.MaxPacket = 1000
	go func() { _ = w.WritePacketFlush(make([]byte, 1001)) }()
	if _, err := r.ReadPacket(); !errors.Is(err, ErrPacketTooLarge) {
		t.Fatalf("err = %v, want ErrPacketTooLarge", err)
	}
}

func TestReadPacketSequence(t *testing.T) {
	w, r := pipeConns(t)
	w.SetSeq(5)
	go func() { _ = w.WritePacketFlush([]byte("x")) }()
	if _, err := r.ReadPacket(); !errors.Is(err, ErrPacketOutOfOrder) {
		t.Fatalf("err = %v, want ErrPacketOutOfOrder", err)
	}
}

func TestReadPacketTruncated(t *testing.T) {
	a, b := net.Pipe()
	r := NewConn(b)
	go func() {
		a.Write([]byte{10, 0, 0, 0, 'a', 'b'})
		a.Close()
	}()
	if _, err := r.ReadPacket(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want unexpected EOF", err)
	}
}

func TestLenEnc(t *testing.T) {
	for _, v := range []uint64{0, 250, 251, 1<<16 - 1, 1 << 16, 1<<24 - 1, 1 << 24, 1<<64 - 1} {
		b := AppendLenEncInt(nil, v)
		got, null, n, err := ReadLenEncInt(b)
		if err != nil || null || n != len(b) || got != v {
			t.Fatalf("%d: got %d null=%v n=%d err=%v", v, got, null, n, err)
		}
	}
	for _, bad := range [][]byte{{}, {0xff}, {0xfc, 1}, {0xfd, 1, 2}, {0xfe, 1, 2, 3}} {
		if _, _, _, err := ReadLenEncInt(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("% x: err = %v, want ErrMalformed", bad, err)
		}
	}
	if _, _, err := ReadLenEncString([]byte{5, 'a'}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short string: err = %v", err)
	}
}

func TestGreetingRoundTrip(t *testing.T) {
	g := &Greeting{
		ServerVersion: "5.5.5-10.11.19-MariaDB",
		ConnectionID:  42,
		Scramble:      []byte("abcdefghijklmnopqrst"),
		Capabilities:  ClientProtocol41 | ClientSecureConnection | ClientPluginAuth | ClientLongPassword,
		Collation:     45,
		Status:        StatusAutocommit,
		AuthPlugin:    AuthNativePassword,
	}
	got, err := ParseGreeting(g.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if got.ServerVersion != g.ServerVersion || got.ConnectionID != 42 || !bytes.Equal(got.Scramble, g.Scramble) ||
		got.Capabilities != g.Capabilities || got.AuthPlugin != g.AuthPlugin || got.Collation != 45 {
		t.Fatalf("round trip: %+v", got)
	}
}

func TestHandshakeResponseRoundTrip(t *testing.T) {
	for _, caps := range []uint32{
		ClientProtocol41 | ClientSecureConnection | ClientPluginAuth | ClientConnectWithDB | ClientConnectAttrs | ClientPluginAuthLenencClientData,
		ClientProtocol41 | ClientSecureConnection,
		ClientProtocol41,
	} {
		h := &HandshakeResponse{Capabilities: caps, MaxPacketSize: 1 << 24, Collation: 45, User: "app",
			AuthResponse: []byte("01234567890123456789"), Database: "db", AuthPlugin: AuthNativePassword,
			Attributes: []byte{3, 'k', 'e', 'y', 1, 'v'}}
		got, err := ParseHandshakeResponse(h.Encode())
		if err != nil {
			t.Fatalf("caps %x: %v", caps, err)
		}
		if got.User != "app" || !bytes.Equal(got.AuthResponse, h.AuthResponse) {
			t.Fatalf("caps %x: %+v", caps, got)
		}
		if caps&ClientConnectWithDB != 0 && got.Database != "db" {
			t.Fatalf("caps %x: database %q", caps, got.Database)
		}
		if caps&ClientConnectAttrs != 0 && !bytes.Equal(got.Attributes, h.Attributes) {
			t.Fatalf("caps %x: attrs % x", caps, got.Attributes)
		}
	}
}

func TestHandshakeResponseMalformed(t *testing.T) {
	good := (&HandshakeResponse{Capabilities: ClientProtocol41 | ClientSecureConnection | ClientPluginAuthLenencClientData | ClientConnectWithDB,
		User: "u", AuthResponse: []byte("x"), Database: "d"}).Encode()
	cases := map[string][]byte{
		"short":            good[:20],
		"no NUL user":      append(append([]byte{}, good[:32]...), 'u', 'u'),
		"lenenc ff":        append(append([]byte{}, good[:32]...), 'u', 0, 0xff),
		"lenenc overflows": append(append([]byte{}, good[:32]...), 'u', 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
		"no protocol 41":   append([]byte{0, 0, 0, 0}, good[4:]...),
	}
	for name, p := range cases {
		if _, err := ParseHandshakeResponse(p); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestNativePassword(t *testing.T) {
	scramble := []byte("abcdefghijklmnopqrst")
	// SELECT PASSWORD('app') on MariaDB.
	stored, err := ParseNativeHash("*5BCB3E6AC345B435C7C2E6B7949A04CE6F6563D3")
	if err != nil {
		t.Fatal(err)
	}
	if !VerifyNativePassword(scramble, NativePasswordResponse(scramble, "app"), stored) {
		t.Fatal("right password rejected")
	}
	if VerifyNativePassword(scramble, NativePasswordResponse(scramble, "App"), stored) {
		t.Fatal("wrong password accepted")
	}
	if VerifyNativePassword(scramble, nil, stored) {
		t.Fatal("empty password accepted")
	}
}

func TestErrPacket(t *testing.T) {
	e := ERAccessDenied.New("Access denied for user '%s'", "x")
	got, err := ParseErr(AppendErr(nil, e))
	if err != nil || *got != *e || got.State != "28000" {
		t.Fatalf("got %+v, %v", got, err)
	}
	ok, err := ParseOK(AppendOK(nil, OK{AffectedRows: 300, LastInsertID: 1 << 20, Status: StatusInTrans, Warnings: 2}))
	if err != nil || ok.AffectedRows != 300 || ok.LastInsertID != 1<<20 || ok.Status != StatusInTrans || ok.Warnings != 2 {
		t.Fatalf("ok %+v %v", ok, err)
	}
}

func TestCheckIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); accepted <- c }()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := NewConn(nc)
	peer := <-accepted
	if err := c.CheckIdle(); err != nil {
		t.Fatalf("quiet peer: %v", err)
	}
	// Still usable after the check.
	go func() { NewConn(peer).WritePacketFlush([]byte("hi")) }()
	if p, err := c.ReadPacket(); err != nil || string(p) != "hi" {
		t.Fatalf("read after CheckIdle: %q %v", p, err)
	}
	peer.Write([]byte{1, 0, 0, 1, 'x'})
	deadline := time.Now().Add(5 * time.Second)
	for c.CheckIdle() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := c.CheckIdle(); !errors.Is(err, ErrIdleData) {
		t.Fatalf("peer sent data: %v", err)
	}
	// A peer that closed is detected.
	go func() { c, _ := ln.Accept(); accepted <- c }()
	nc2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c2 := NewConn(nc2)
	(<-accepted).Close()
	for c2.CheckIdle() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := c2.CheckIdle(); err == nil || errors.Is(err, ErrIdleData) {
		t.Fatalf("closed peer: %v", err)
	}
}
