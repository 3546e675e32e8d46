package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
)

// backendScript writes the packets of a scripted server response.
func backendScript(t *testing.T, w *Conn, packets ...[]byte) {
	t.Helper()
	w.SetSeq(1)
	for _, p := range packets {
		if err := w.WritePacket(p); err != nil {
			t.Error(err)
			return
		}
	}
	if err := w.Flush(); err != nil {
		t.Error(err)
	}
}

func colDef(name string) []byte {
	b := AppendLenEncString(nil, []byte("def"))
	for _, s := range []string{"", "", "", name, name} {
		b = AppendLenEncString(b, []byte(s))
	}
	return append(b, 0x0c, 45, 0, 10, 0, 0, 0, 253, 0, 0, 0, 0, 0)
}

func row(vals ...string) []byte {
	var b []byte
	for _, v := range vals {
		b = AppendLenEncString(b, []byte(v))
	}
	return b
}

// TestRelayMultiResult relays two result sets and an OK chained by
// SERVER_MORE_RESULTS_EXISTS, including a row of exactly 16 MiB - 1 bytes
// that must continue in a second physical packet.
func TestRelayMultiResult(t *testing.T) {
	srvSide, relayBackend := pipeConns(t)
	relayClient, clientSide := pipeConns(t)
	big := bytes.Repeat([]byte{'z'}, MaxPayloadLen-4)
	packets := [][]byte{
		{1}, colDef("a"), AppendEOF(nil, 0, StatusAutocommit),
		row("1"), row("2"), AppendEOF(nil, 0, StatusAutocommit|StatusMoreResultsExists),
		{1}, colDef("b"), AppendEOF(nil, 0, StatusAutocommit),
		row(string(big)), AppendEOF(nil, 0, StatusAutocommit|StatusMoreResultsExists),
		AppendOK(nil, OK{AffectedRows: 3, Status: StatusAutocommit | StatusInTrans}),
	}
	go backendScript(t, srvSide, packets...)
	relayBackend.LenientSeq = true
	relayClient.SetSeq(1)
	type out struct {
		res RelayResult
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := Relay(relayClient, relayBackend, ResponseResult, false)
		done <- out{res, err}
	}()
	clientSide.SetSeq(1)
	for i, want := range packets {
		got, err := clientSide.ReadPacket()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("packet %d differs: got %d bytes, want %d", i, len(got), len(want))
		}
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.res.Status != StatusAutocommit|StatusInTrans || o.res.OK.AffectedRows != 3 {
		t.Fatalf("result %+v", o.res)
	}
}

func TestRelayErr(t *testing.T) {
	srvSide, relayBackend := pipeConns(t)
	relayClient, clientSide := pipeConns(t)
	e := NewError(1146, "Table 'x.y' doesn't exist")
	go backendScript(t, srvSide, AppendErr(nil, e))
	relayBackend.LenientSeq = true
	relayClient.SetSeq(1)
	done := make(chan RelayResult, 1)
	go func() {
		res, err := Relay(relayClient, relayBackend, ResponseResult, false)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	clientSide.SetSeq(1)
	if _, err := clientSide.ReadPacket(); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Err == nil || res.Err.Code != 1146 || res.Err.Message != e.Message {
		t.Fatalf("Err = %+v", res.Err)
	}
	if relayClient.SentErr != 1146 {
		t.Fatalf("client SentErr = %d after relaying ERR 1146", relayClient.SentErr)
	}
}

// TestWriteErrSetsSentErr: the code of an ERR sluice writes itself is kept
// for the per-command error count, like a relayed one.
func TestWriteErrSetsSentErr(t *testing.T) {
	c, peer := pipeConns(t)
	go func() { _, _ = peer.ReadPacket() }()
	if c.SentErr != 0 {
		t.Fatalf("SentErr = %d on a new connection", c.SentErr)
	}
	if err := c.WriteErr(ERConCount.New("Too many connections")); err != nil {
		t.Fatal(err)
	}
	if c.SentErr != ERConCount.Code {
		t.Fatalf("SentErr = %d, want %d", c.SentErr, ERConCount.Code)
	}
}

// TestRelayTornPacket: a backend that dies inside a packet bigger than the
// relay's read buffer leaves the client with part of it; the relay must say
// so (Torn) so the session closes the client instead of writing an ERR into
// the middle of a packet.
func TestRelayTornPacket(t *testing.T) {
	a, b := net.Pipe()
	relayBackend := NewConn(b)
	relayBackend.LenientSeq = true
	relayClient, clientSide := pipeConns(t)
	n := readBufferSize + 4000
	go func() {
		a.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), 1})
		a.Write(make([]byte, readBufferSize+100))
		a.Close()
	}()
	go drainConn(clientSide)
	res, err := Relay(relayClient, relayBackend, ResponseResult, false)
	if !errors.Is(err, ErrBackendIO) || !res.Torn || res.Packets != 1 {
		t.Fatalf("res %+v err %v, want a torn packet", res, err)
	}
}

// drainConn reads what a client side gets until it closes.
func drainConn(c *Conn) {
	buf := make([]byte, 1024)
	for {
		if _, err := c.NetConn().Read(buf); err != nil {
			return
		}
	}
}

// TestRelayLostMidRowKeepsPacketsWhole: a backend that dies in the middle of
// a row that fits the read buffer (a server stopped or killed while
// streaming) is not a torn packet: the client has whole packets only, so an
// ERR can follow them.
func TestRelayLostMidRowKeepsPacketsWhole(t *testing.T) {
	a, b := net.Pipe()
	srvSide := NewConn(a)
	relayBackend := NewConn(b)
	relayBackend.LenientSeq = true
	relayClient, clientSide := pipeConns(t)
	whole := [][]byte{{1}, colDef("a"), AppendEOF(nil, 0, StatusAutocommit), row("1"), row("2")}
	go func() {
		srvSide.SetSeq(1)
		for _, p := range whole {
			_ = srvSide.WritePacket(p)
		}
		_ = srvSide.Flush()
		// Half of a 100-byte row, then the server is gone.
		a.Write([]byte{100, 0, 0, srvSide.Seq()})
		a.Write(make([]byte, 40))
		a.Close()
	}()
	got := make(chan [][]byte, 1)
	go func() {
		var ps [][]byte
		clientSide.SetSeq(1)
		for {
			p, err := clientSide.ReadPacket()
			if err != nil {
				got <- ps
				return
			}
			ps = append(ps, bytes.Clone(p))
		}
	}()
	relayClient.SetSeq(1)
	res, err := Relay(relayClient, relayBackend, ResponseResult, false)
	if !errors.Is(err, ErrBackendIO) || res.Torn || res.Packets != len(whole) {
		t.Fatalf("res %+v err %v, want %d whole packets relayed and none torn", res, err, len(whole))
	}
	// The session answers such a loss with an ERR after the rows.
	if err := relayClient.WriteErr(CRServerLost.New("Lost connection to replica during query")); err != nil {
		t.Fatal(err)
	}
	relayClient.Close()
	ps := <-got
	if len(ps) != len(whole)+1 || !IsErr(ps[len(ps)-1]) {
		t.Fatalf("client got %d packets %x, want the %d whole ones and an ERR", len(ps), ps, len(whole))
	}
	for i, p := range whole {
		if !bytes.Equal(ps[i], p) {
			t.Fatalf("packet %d: %x, want %x", i, ps[i], p)
		}
	}
}

// TestRelayErrAfterRows: COM_STMT_FETCH (and COM_FIELD_LIST) answers that
// end in an ERR after some rows end the relay there.
func TestRelayErrAfterRows(t *testing.T) {
	srvSide, relayBackend := pipeConns(t)
	relayClient, clientSide := pipeConns(t)
	packets := [][]byte{{0, 0, 1}, {0, 0, 2}, AppendErr(nil, ERQueryInterrupted.New("Query execution was interrupted"))}
	go backendScript(t, srvSide, packets...)
	relayBackend.LenientSeq = true
	relayClient.SetSeq(1)
	done := make(chan RelayResult, 1)
	go func() {
		res, err := Relay(relayClient, relayBackend, ResponseRows, false)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	clientSide.SetSeq(1)
	for range packets {
		if _, err := clientSide.ReadPacket(); err != nil {
			t.Fatal(err)
		}
	}
	if res := <-done; res.Err == nil || res.Err.Code != 1317 {
		t.Fatalf("Err = %+v", res.Err)
	}
}

func TestReadResponseShortErrIsBackendFailure(t *testing.T) {
	srvSide, c := pipeConns(t)
	go backendScript(t, srvSide, []byte{1}, []byte{0xff, 1})
	c.LenientSeq = true
	_, err := ReadResponse(c, ResponseResult)
	var se *SQLError
	if errors.As(err, &se) || !errors.Is(err, ErrBackendIO) {
		t.Fatalf("err = %#v, want ErrBackendIO and no SQLError", err)
	}
}

// TestRelayReplaceErr: a client connection's ReplaceErr swaps a relayed ERR
// for its own, in sequence, after rows already relayed; other ERRs pass.
func TestRelayReplaceErr(t *testing.T) {
	for _, tc := range []struct {
		code, want uint16
	}{{1317, 3024}, {1146, 1146}} {
		srvSide, relayBackend := pipeConns(t)
		relayClient, clientSide := pipeConns(t)
		replacement := ERQueryTimeout.New("Query execution was interrupted, maximum statement execution time exceeded")
		relayClient.ReplaceErr = func(code uint16) *SQLError {
			if code == 1317 {
				return replacement
			}
			return nil
		}
		packets := [][]byte{{0, 0, 1}, {0, 0, 2}, AppendErr(nil, NewError(tc.code, "backend error"))}
		go backendScript(t, srvSide, packets...)
		relayBackend.LenientSeq = true
		relayClient.SetSeq(1)
		done := make(chan RelayResult, 1)
		go func() {
			res, err := Relay(relayClient, relayBackend, ResponseRows, false)
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		clientSide.SetSeq(1)
		var last []byte
		for range packets {
			p, err := clientSide.ReadPacket()
			if err != nil {
				t.Fatal(err) // a wrong sequence id fails here
			}
			last = p
		}
		e, err := ParseErr(last)
		if err != nil || e.Code != tc.want {
			t.Fatalf("backend ERR %d reached the client as %+v (%v), want %d", tc.code, e, err, tc.want)
		}
		if res := <-done; res.Err == nil || res.Err.Code != tc.want || relayClient.SentErr != tc.want {
			t.Fatalf("RelayResult.Err = %+v, SentErr %d, want %d", res.Err, relayClient.SentErr, tc.want)
		}
	}
}

// TestRelayBufferedRows covers the runs of rows the relay forwards straight
// from the backend's read buffer: whatever the chunks the backend's bytes
// arrive in, the client gets every packet whole and renumbered from its own
// sequence id, a sequence-id gap inside a run is still refused after the
// rows before it, and packets starting with 0xFE or 0xFF still end the run
// where they should.
func TestRelayBufferedRows(t *testing.T) {
	head := [][]byte{{2}, colDef("id"), colDef("c")}
	var rows [][]byte
	for i := range 1500 {
		rows = append(rows, row(itoa(i), string(bytes.Repeat([]byte{'x'}, i%300))))
	}
	// A text row whose first column is 2^24 bytes or longer starts with
	// 0xFE too; without CLIENT_DEPRECATE_EOF only a short one ends the rows.
	wideRow := append([]byte{0xfe}, make([]byte, 20)...)
	end := AppendEOF(nil, 0, StatusAutocommit)
	endOK := append([]byte{headerEOF}, AppendOK(nil, OK{Status: StatusAutocommit})[1:]...)
	errPkt := AppendErr(nil, ERQueryInterrupted.New("Query execution was interrupted"))
	cat := func(parts ...[][]byte) [][]byte { return slices.Concat(parts...) }

	for _, tc := range []struct {
		name         string
		payloads     [][]byte
		deprecateEOF bool
		clientSeq    uint8 // the client's next sequence id; the backend starts at 1
		gapAt        int   // >0: the backend skips a sequence id at this packet
		wantErr      error
		wantCode     uint16
	}{
		{name: "rows then EOF", payloads: cat(head, [][]byte{end}, rows, [][]byte{end}), clientSeq: 1},
		{name: "rows then OK", payloads: cat(head, rows, [][]byte{endOK}), deprecateEOF: true, clientSeq: 1},
		{name: "client numbering differs", payloads: cat(head, [][]byte{end}, rows, [][]byte{end}), clientSeq: 7},
		{name: "wide row inside the run", payloads: cat(head, [][]byte{end}, rows[:700], [][]byte{wideRow}, rows[700:], [][]byte{end}), clientSeq: 1},
		{name: "ERR after rows", payloads: cat(head, [][]byte{end}, rows, [][]byte{errPkt}), clientSeq: 1, wantCode: 1317},
		{name: "sequence gap", payloads: cat(head, [][]byte{end}, rows, [][]byte{end}), clientSeq: 1, gapAt: 900, wantErr: ErrPacketOutOfOrder},
	} {
		for _, chunk := range []int{0, 1, 7, 4096, 9000} {
			t.Run(fmt.Sprintf("%s/chunk=%d", tc.name, chunk), func(t *testing.T) {
				var data []byte
				if tc.gapAt > 0 {
					data = append(benchStream(1, tc.payloads[:tc.gapAt]...),
						benchStream(uint8(tc.gapAt+2), tc.payloads[tc.gapAt:]...)...)
				} else {
					data = benchStream(1, tc.payloads...)
				}
				backend := NewConn(&fzConn{in: data, chunk: chunk})
				backend.SetSeq(1)
				cnc := &fzConn{keep: true}
				client := NewConn(cnc)
				client.SetSeq(tc.clientSeq)
				res, err := Relay(client, backend, ResponseResult, tc.deprecateEOF)
				_ = client.Flush()
				sent := tc.payloads
				if tc.gapAt > 0 {
					sent = tc.payloads[:tc.gapAt]
				}
				if want := benchStream(tc.clientSeq, sent...); !bytes.Equal(cnc.out, want) {
					t.Fatalf("client got %d bytes, want the %d bytes of %d packets from seq %d",
						len(cnc.out), len(want), len(sent), tc.clientSeq)
				}
				if res.Packets != len(sent) {
					t.Fatalf("Packets = %d, want %d", res.Packets, len(sent))
				}
				if tc.wantErr != nil {
					if !errors.Is(err, tc.wantErr) || !errors.Is(err, ErrBackendIO) {
						t.Fatalf("err = %v, want %v from the backend", err, tc.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var payload int64
				for _, p := range sent {
					payload += int64(len(p))
				}
				if res.Bytes != payload {
					t.Fatalf("Bytes = %d, want %d", res.Bytes, payload)
				}
				if tc.wantCode != 0 && (res.Err == nil || res.Err.Code != tc.wantCode) {
					t.Fatalf("Err = %+v, want code %d", res.Err, tc.wantCode)
				}
				if tc.wantCode == 0 && (!res.HasStatus || res.Status != StatusAutocommit) {
					t.Fatalf("status %+v, want the final packet's", res)
				}
			})
		}
	}
}
