package protocol

import (
	"bytes"
	"testing"
)

// TestTeeAndWriteStored relays a result set with a tee set, then writes
// the collected answer to another client whose sequence ids start
// elsewhere: it must read the same packets, renumbered.
func TestTeeAndWriteStored(t *testing.T) {
	packets := [][]byte{{1}, colDef("a"), AppendEOF(nil, 0, StatusAutocommit)}
	for i := range 50 {
		packets = append(packets, row(string(rune('a'+i%26))))
	}
	packets = append(packets, AppendEOF(nil, 0, StatusAutocommit))
	srvSide, relayBackend := pipeConns(t)
	relayClient, clientSide := pipeConns(t)
	go backendScript(t, srvSide, packets...)
	relayBackend.LenientSeq = true
	relayClient.SetSeq(1)
	tee := &Tee{Max: 1 << 20}
	relayClient.SetTee(tee)
	done := make(chan error, 1)
	go func() {
		_, err := Relay(relayClient, relayBackend, ResponseResult, false)
		done <- err
	}()
	clientSide.SetSeq(1)
	for i := range packets {
		if _, err := clientSide.ReadPacket(); err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	relayClient.SetTee(nil)
	if tee.Over || len(tee.Buf) == 0 {
		t.Fatalf("tee over=%v with %d bytes", tee.Over, len(tee.Buf))
	}

	// Replay to a client expecting sequence ids from 7.
	replayClient, reader := pipeConns(t)
	replayClient.SetSeq(7)
	go func() { done <- replayClient.WriteStored(tee.Buf) }()
	reader.SetSeq(7)
	for i, want := range packets {
		got, err := reader.ReadPacket()
		if err != nil {
			t.Fatalf("replayed packet %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("replayed packet %d differs", i)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// An answer bigger than Max is dropped from the tee.
	small := &Tee{Max: 10}
	small.Buf = append(small.Buf, 1, 2, 3)
	c := &Conn{teeTo: small}
	c.tee(make([]byte, 20))
	if !small.Over || len(small.Buf) != 0 {
		t.Fatalf("over=%v len=%d, want an emptied tee marked over", small.Over, len(small.Buf))
	}
	if err := replayClient.WriteStored([]byte{5, 0, 0, 1, 'x'}); err == nil {
		t.Fatal("a cut stored answer was written")
	}
}
