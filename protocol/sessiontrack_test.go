package protocol

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// trackedOK builds an OK packet as a server with CLIENT_SESSION_TRACK sends
// it: info and session state as length-encoded strings.
func trackedOK(affected uint64, status uint16, info string, state []byte) []byte {
	p := AppendOK(nil, OK{AffectedRows: affected, Status: status})
	p = AppendLenEncString(p, []byte(info))
	if status&StatusSessionStateChg != 0 {
		p = AppendLenEncString(p, state)
	}
	return p
}

// sysVarEntry is a SESSION_TRACK_SYSTEM_VARIABLES entry.
func sysVarEntry(name, value string) []byte {
	data := AppendLenEncString(AppendLenEncString(nil, []byte(name)), []byte(value))
	return AppendLenEncString([]byte{SessionTrackSystemVariables}, data)
}

// gtidsEntry is a MySQL SESSION_TRACK_GTIDS entry.
func gtidsEntry(set string) []byte {
	data := AppendLenEncString([]byte{0}, []byte(set))
	return AppendLenEncString([]byte{SessionTrackGTIDs}, data)
}

func TestParseOKTailAndTrackedGTID(t *testing.T) {
	mariadb := append(sysVarEntry("autocommit", "ON"), sysVarEntry("last_gtid", "0-1-42")...)
	mysql := append(AppendLenEncString([]byte{SessionTrackSchema}, AppendLenEncString(nil, []byte("app"))),
		gtidsEntry("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5")...)
	tests := []struct {
		name     string
		p        []byte
		info     string
		wantGTID string
	}{
		{"mariadb last_gtid", trackedOK(1, StatusAutocommit|StatusSessionStateChg, "", mariadb), "", "0-1-42"},
		{"mysql gtids", trackedOK(1, StatusAutocommit|StatusSessionStateChg, "Rows matched: 1", mysql),
			"Rows matched: 1", "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"},
		{"no state", trackedOK(0, StatusAutocommit, "", nil), "", ""},
		{"fixed part only", AppendOK(nil, OK{Status: StatusAutocommit}), "", ""},
		{"empty last_gtid (no transaction)", trackedOK(0, StatusSessionStateChg, "", sysVarEntry("last_gtid", "")), "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tail, err := ParseOKTail(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if string(tail.Info) != tc.info {
				t.Fatalf("info %q, want %q", tail.Info, tc.info)
			}
			g, ok := TrackedGTID(tail.State)
			if string(g) != tc.wantGTID || ok != (tc.wantGTID != "") {
				t.Fatalf("TrackedGTID = %q, %v; want %q", g, ok, tc.wantGTID)
			}
		})
	}
}

func TestParseOKTailRejectsMalformed(t *testing.T) {
	for name, p := range map[string][]byte{
		"empty":           {},
		"not ok":          {0xff, 1, 2},
		"no status":       {0, 0, 0, 2},
		"info too long":   append(AppendOK(nil, OK{}), 9, 'a'),
		"state too long":  append(AppendOK(nil, OK{Status: StatusSessionStateChg}), 0, 200, 1),
		"bad lenenc rows": {0, 0xfc, 1},
	} {
		if _, err := ParseOKTail(p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestAppendOKWithoutState(t *testing.T) {
	p := trackedOK(7, StatusAutocommit|StatusSessionStateChg, "Records: 7", sysVarEntry("last_gtid", "0-1-9"))
	tail, err := ParseOKTail(p)
	if err != nil {
		t.Fatal(err)
	}
	got := AppendOKWithoutState(nil, tail)
	// As a server sends it without session tracking: the info text
	// length-encoded (checked against MariaDB 10.11).
	want := AppendLenEncString(AppendOK(nil, OK{AffectedRows: 7, Status: StatusAutocommit}), []byte("Records: 7"))
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
	ok, err := ParseOK(got)
	if err != nil || ok.AffectedRows != 7 || ok.Status&StatusSessionStateChg != 0 {
		t.Fatalf("ParseOK = %+v, %v", ok, err)
	}
}

// TestRelayTrackedOK relays a tracked OK to a client without session
// tracking (rewritten, GTID kept on the backend connection) and to one with
// it (unchanged).
func TestRelayTrackedOK(t *testing.T) {
	okp := trackedOK(1, StatusAutocommit|StatusSessionStateChg, "", sysVarEntry("last_gtid", "0-1-77"))
	for _, clientTracks := range []bool{false, true} {
		srvSide, relayBackend := pipeConns(t)
		relayClient, clientSide := pipeConns(t)
		relayBackend.LenientSeq = true
		relayBackend.SessionTrack = true
		relayClient.SessionTrack = clientTracks
		go backendScript(t, srvSide, okp)
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
		got, err := clientSide.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		o := <-done
		if o.err != nil {
			t.Fatal(o.err)
		}
		want := okp
		if !clientTracks {
			want = AppendOK(nil, OK{AffectedRows: 1, Status: StatusAutocommit})
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("client tracks %v: got % x, want % x", clientTracks, got, want)
		}
		if string(relayBackend.LastGTID) != "0-1-77" {
			t.Fatalf("LastGTID = %q", relayBackend.LastGTID)
		}
		if o.res.OK.AffectedRows != 1 || o.res.Status != binary.LittleEndian.Uint16(want[3:]) {
			t.Fatalf("result %+v", o.res)
		}
	}
}

// TestRelayTrackedRowsUntouched: a result set's rows are never taken for
// OK packets, even when a row starts with 0x00.
func TestRelayTrackedRowsUntouched(t *testing.T) {
	srvSide, relayBackend := pipeConns(t)
	relayClient, clientSide := pipeConns(t)
	relayBackend.LenientSeq = true
	relayBackend.SessionTrack = true
	zeroRow := trackedOK(1, StatusSessionStateChg, "", sysVarEntry("last_gtid", "0-1-5"))
	packets := [][]byte{{1}, colDef("a"), AppendEOF(nil, 0, StatusAutocommit), zeroRow, AppendEOF(nil, 0, StatusAutocommit)}
	go backendScript(t, srvSide, packets...)
	relayClient.SetSeq(1)
	done := make(chan error, 1)
	go func() {
		_, err := Relay(relayClient, relayBackend, ResponseResult, false)
		done <- err
	}()
	clientSide.SetSeq(1)
	for i, want := range packets {
		got, err := clientSide.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("packet %d changed", i)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(relayBackend.LastGTID) != 0 {
		t.Fatalf("a row was read as an OK: LastGTID %q", relayBackend.LastGTID)
	}
}

func FuzzParseOKTail(f *testing.F) {
	fzAddSeeds(f, fzOKTailSeeds())
	f.Fuzz(func(t *testing.T, p []byte) {
		tail, err := ParseOKTail(p)
		if err != nil {
			return
		}
		TrackedGTID(tail.State)
		out := AppendOKWithoutState(nil, tail)
		ok, err := ParseOK(out)
		if err != nil {
			t.Fatalf("rewritten OK does not parse: %v", err)
		}
		if ok.Status&StatusSessionStateChg != 0 {
			t.Fatal("rewritten OK keeps the session-state flag")
		}
		// The rewrite keeps the info text whole, length-encoded, and
		// nothing after it: a parser of that layout reads it back.
		again, err := ParseOKTail(out)
		if err != nil || !bytes.Equal(again.Info, tail.Info) || len(again.State) != 0 {
			t.Fatalf("rewritten OK % x: info %q (want %q), state % x, %v", out, again.Info, tail.Info, again.State, err)
		}
	})
}

// TestTrackedGTIDAllocates nothing: causal sessions decode every write's OK.
func TestTrackedGTIDAllocatesNothing(t *testing.T) {
	state := append(sysVarEntry("autocommit", "ON"), sysVarEntry("last_gtid", "0-1-42")...)
	if n := testing.AllocsPerRun(100, func() {
		if g, ok := TrackedGTID(state); !ok || len(g) == 0 {
			t.Fatal("no GTID")
		}
	}); n != 0 {
		t.Fatalf("TrackedGTID: %v allocs per call", n)
	}
}
