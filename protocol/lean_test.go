package protocol

import (
	"bytes"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair returns a lean Conn on the accepting side of a loopback TCP
// connection and the raw dialing side.
func tcpPair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); srv.Close() })
	return NewLeanConn(srv), client
}

// rawPacket frames payload as one packet with sequence id 0.
func rawPacket(p []byte) []byte {
	return append([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), 0}, p...)
}

// TestLeanConnIdleHoldsNoBuffers: after a command is read and answered, an
// idle lean connection holds neither buffer, and the next commands, small
// and big, sent later, are read whole.
func TestLeanConnIdleHoldsNoBuffers(t *testing.T) {
	c, client := tcpPair(t)
	for i, q := range [][]byte{[]byte("SELECT 1"), bytes.Repeat([]byte{'b'}, 5000), []byte("SELECT 22")} {
		if _, err := client.Write(rawPacket(q)); err != nil {
			t.Fatal(err)
		}
		c.ResetSeq()
		if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		p, err := c.ReadPacket()
		if err != nil || !bytes.Equal(p, q) {
			t.Fatalf("command %d: %d bytes, %v", i, len(p), err)
		}
		if err := c.WritePacketFlush([]byte{0}); err != nil {
			t.Fatal(err)
		}
		c.Idle()
		if c.br != nil || c.bw != nil {
			t.Fatalf("command %d: idle connection holds buffers (read %v, write %v)", i, c.br != nil, c.bw != nil)
		}
		answer := make([]byte, 5)
		if _, err := client.Read(answer); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLeanConnPipelinedCommands: commands that arrive together are all
// read although the connection idles between them, whatever their sizes
// against the first read and the read buffer.
func TestLeanConnPipelinedCommands(t *testing.T) {
	c, client := tcpPair(t)
	cmds := [][]byte{
		bytes.Repeat([]byte{'a'}, leanFirstRead-4), []byte("second"),
		bytes.Repeat([]byte{'c'}, leanReadBufferSize-4), bytes.Repeat([]byte{'d'}, 3000), []byte("fifth"),
	}
	var all []byte
	for _, q := range cmds {
		all = append(all, rawPacket(q)...)
	}
	if _, err := client.Write(all); err != nil {
		t.Fatal(err)
	}
	for i, want := range cmds {
		c.ResetSeq()
		if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		if !bytes.Equal(p, want) {
			t.Fatalf("command %d: got %d bytes, want %d", i, len(p), len(want))
		}
		c.Idle()
	}
}

// TestLeanConnIdleWaitEnds: waiting for a command ends with the read
// deadline, with a close from another goroutine, and with the peer's close.
func TestLeanConnIdleWaitEnds(t *testing.T) {
	c, client := tcpPair(t)
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadPacket(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.ReadPacket()
		done <- err
	}()
	client.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read after the peer closed returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting for a command did not end when the peer closed")
	}

	c2, _ := tcpPair(t)
	go func() {
		_, err := c2.ReadPacket()
		done <- err
	}()
	c2.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read after close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting for a command did not end when the connection closed")
	}
}
