package protocol

// Native Go fuzz targets for everything in this package that decodes bytes
// a peer sends: handshake packets, COM_STMT_EXECUTE, OK/ERR, length-encoded
// values, packet framing and the response relay.
//
// `go test ./protocol` replays the committed corpora in
// testdata/fuzz/<FuzzName>/ (and the f.Add seeds) as regression tests;
// `make fuzz` fuzzes each target briefly. The seed files are written by
// TestGenerateFuzzCorpus, which runs only when asked:
//
//	SLUICE_GEN_FUZZ_CORPUS=1 go test -run '^TestGenerateFuzzCorpus$' ./protocol
//
// Crashers the fuzzer finds land in the same directories under hashed names
// and are kept there.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// Targets

// FuzzParseHandshakeResponse: no input panics ParseHandshakeResponse, and a
// response it accepts survives Encode and a second parse unchanged.
func FuzzParseHandshakeResponse(f *testing.F) {
	fzAddSeeds(f, fzHandshakeSeeds())
	f.Fuzz(func(t *testing.T, p []byte) {
		_ = IsSSLRequest(p)
		h, err := ParseHandshakeResponse(p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if h.Capabilities&ClientProtocol41 == 0 {
			t.Fatalf("accepted a response without CLIENT_PROTOCOL_41: caps %#x", h.Capabilities)
		}
		enc := h.Encode()
		h2, err := ParseHandshakeResponse(enc)
		if err != nil {
			t.Fatalf("re-encoded response does not parse: %v\nfirst parse %+v\nencoded % x", err, h, enc)
		}
		if d := fzDiffHandshake(h, h2); d != "" {
			t.Fatalf("round trip changed %s\nfirst  %+v\nsecond %+v", d, h, h2)
		}
		if enc2 := h2.Encode(); !bytes.Equal(enc, enc2) {
			t.Fatalf("Encode is not stable:\n% x\n% x", enc, enc2)
		}
	})
}

func fzDiffHandshake(a, b *HandshakeResponse) string {
	var d []string
	if a.Capabilities != b.Capabilities {
		d = append(d, fmt.Sprintf("Capabilities %#x -> %#x", a.Capabilities, b.Capabilities))
	}
	if a.MaxPacketSize != b.MaxPacketSize {
		d = append(d, fmt.Sprintf("MaxPacketSize %d -> %d", a.MaxPacketSize, b.MaxPacketSize))
	}
	if a.Collation != b.Collation {
		d = append(d, fmt.Sprintf("Collation %d -> %d", a.Collation, b.Collation))
	}
	if a.MariaDBCapabilities != b.MariaDBCapabilities {
		d = append(d, fmt.Sprintf("MariaDBCapabilities %#x -> %#x", a.MariaDBCapabilities, b.MariaDBCapabilities))
	}
	if a.User != b.User {
		d = append(d, fmt.Sprintf("User %q -> %q", a.User, b.User))
	}
	if !bytes.Equal(a.AuthResponse, b.AuthResponse) {
		d = append(d, fmt.Sprintf("AuthResponse %x -> %x", a.AuthResponse, b.AuthResponse))
	}
	if a.Database != b.Database {
		d = append(d, fmt.Sprintf("Database %q -> %q", a.Database, b.Database))
	}
	if a.AuthPlugin != b.AuthPlugin {
		d = append(d, fmt.Sprintf("AuthPlugin %q -> %q", a.AuthPlugin, b.AuthPlugin))
	}
	if !bytes.Equal(a.Attributes, b.Attributes) {
		d = append(d, fmt.Sprintf("Attributes %x -> %x", a.Attributes, b.Attributes))
	}
	return strings.Join(d, "; ")
}

// FuzzParseExecute: ParseExecute never panics and never points past the
// packet; an execute that relies on earlier types, rebuilt with them by
// AppendExecuteWithTypes, parses as binding those types with the same values.
func FuzzParseExecute(f *testing.F) {
	fzAddSeeds(f, fzExecuteSeeds())
	f.Fuzz(func(t *testing.T, p []byte, numParams uint8, types []byte) {
		if id, err := StmtID(p); (err == nil) != (len(p) >= 5) {
			t.Fatalf("StmtID on %d bytes: %d, %v", len(p), id, err)
		}
		if _, err := ParsePrepareOK(p); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParsePrepareOK error does not wrap ErrMalformed: %v", err)
		}
		n := int(numParams)
		// Once without long data, once with every third parameter sent
		// by COM_STMT_SEND_LONG_DATA (and so absent from the packet).
		for _, longData := range []func(int) bool{nil, func(i int) bool { return i%3 == 1 }} {
			e, err := ParseExecute(p, n, types, longData)
			if e.ValuesOffset < 0 || e.ValuesOffset > len(p) || e.NullBitmapOffset < 0 || e.NullBitmapOffset > len(p) {
				t.Fatalf("offsets outside the %d-byte packet: %+v (err %v)", len(p), e, err)
			}
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("error does not wrap ErrMalformed: %v", err)
				}
				continue
			}
			if e.StatementID != binary.LittleEndian.Uint32(p[1:]) || e.Flags != p[5] {
				t.Fatalf("header misread: %+v", e)
			}
			// What ParseExecute accepts, ExecuteParams decodes.
			var ld func(int) ([]byte, bool)
			if longData != nil {
				ld = func(i int) ([]byte, bool) { return []byte("long"), longData(i) }
			}
			seen := 0
			if err := ExecuteParams(p, e, n, types, ld, func(i int, v Param) error {
				if i != seen {
					t.Fatalf("parameter %d after %d", i, seen)
				}
				seen++
				_ = v.AppendText(nil)
				return nil
			}); err != nil || seen != n {
				t.Fatalf("ExecuteParams on an accepted packet: %v after %d of %d", err, seen, n)
			}
			if n == 0 {
				continue
			}
			nb := (n + 7) / 8
			if e.NullBitmapOffset != 10 {
				t.Fatalf("NullBitmapOffset %d, want 10", e.NullBitmapOffset)
			}
			if e.NewParamsBound {
				if e.ValuesOffset != 10+nb+1+2*n || !bytes.Equal(e.Types, p[e.ValuesOffset-2*n:e.ValuesOffset]) {
					t.Fatalf("bound types misplaced: %+v", e)
				}
				continue
			}
			if e.ValuesOffset != 10+nb+1 || e.Types != nil {
				t.Fatalf("unbound execute: %+v", e)
			}
			orig := append([]byte(nil), p...)
			dst := AppendExecuteWithTypes([]byte("scratch left from before"), p, e, n, types)
			if !bytes.Equal(p, orig) {
				t.Fatalf("AppendExecuteWithTypes modified its input")
			}
			e2, err := ParseExecute(dst, n, nil, longData)
			if err != nil {
				t.Fatalf("rebuilt execute rejected: %v\norig  % x\nbuilt % x", err, p, dst)
			}
			switch {
			case !e2.NewParamsBound:
				t.Fatalf("rebuilt execute does not bind types: % x", dst)
			case !bytes.Equal(e2.Types, types):
				t.Fatalf("rebuilt types % x, want % x", e2.Types, types)
			case e2.StatementID != e.StatementID || e2.Flags != e.Flags:
				t.Fatalf("rebuilt header %+v, want %+v", e2, e)
			case !bytes.Equal(dst[e2.NullBitmapOffset:e2.NullBitmapOffset+nb], p[e.NullBitmapOffset:e.NullBitmapOffset+nb]):
				t.Fatalf("rebuilt null bitmap differs")
			case !bytes.Equal(dst[e2.ValuesOffset:], p[e.ValuesOffset:]):
				t.Fatalf("rebuilt values differ:\n% x\n% x", dst[e2.ValuesOffset:], p[e.ValuesOffset:])
			}
		}
	})
}

// FuzzParseGreeting: ParseGreeting never panics; a greeting with a standard
// (at most 20-byte) scramble survives Encode and a second parse.
func FuzzParseGreeting(f *testing.F) {
	fzAddSeeds(f, fzGreetingSeeds())
	f.Fuzz(func(t *testing.T, p []byte) {
		g, err := ParseGreeting(p)
		if err != nil {
			var se *SQLError
			if errors.As(err, &se) {
				if se == nil || len(p) == 0 || p[0] != headerErr {
					t.Fatalf("SQLError %v from a greeting that is no ERR packet", se)
				}
			} else if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error is neither SQLError nor ErrMalformed: %v", err)
			}
			return
		}
		if g.AuthPlugin == "" || len(g.Scramble) < 8 {
			t.Fatalf("greeting accepted with plugin %q, scramble %x", g.AuthPlugin, g.Scramble)
		}
		// Encode writes the auth-data length in one byte and pads part 2
		// to 12 bytes: it is meant for sluice's own 20-byte scrambles.
		if len(g.Scramble) > 20 {
			return
		}
		enc := g.Encode()
		g2, err := ParseGreeting(enc)
		if err != nil {
			t.Fatalf("re-encoded greeting does not parse: %v\n% x", err, enc)
		}
		if g.ServerVersion != g2.ServerVersion || g.ConnectionID != g2.ConnectionID ||
			!bytes.Equal(g.Scramble, g2.Scramble) || g.Capabilities != g2.Capabilities ||
			g.Collation != g2.Collation || g.Status != g2.Status ||
			g.MariaDBCapabilities != g2.MariaDBCapabilities || g.AuthPlugin != g2.AuthPlugin {
			t.Fatalf("round trip changed the greeting:\nfirst  %+v\nsecond %+v", g, g2)
		}
	})
}

// FuzzParseAuthSwitch: ParseAuthSwitch never panics and agrees with
// AuthSwitchRequest.
func FuzzParseAuthSwitch(f *testing.F) {
	fzAddSeeds(f, fzAuthSwitchSeeds())
	f.Fuzz(func(t *testing.T, p []byte) {
		_ = IsAuthMoreData(p)
		plugin, data, err := ParseAuthSwitch(p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if !IsAuthSwitch(p) {
			t.Fatalf("parsed an auth switch IsAuthSwitch rejects")
		}
		// A scramble travels with its trailing NUL, which the parse drops.
		enc := AuthSwitchRequest(plugin, append(append([]byte(nil), data...), 0))
		plugin2, data2, err := ParseAuthSwitch(enc)
		if err != nil || plugin2 != plugin || !bytes.Equal(data2, data) {
			t.Fatalf("round trip: %q %x -> %q %x (%v)", plugin, data, plugin2, data2, err)
		}
	})
}

// FuzzParseOKErr: ParseOK and ParseErr accept any bytes without panic and
// agree with AppendOK and AppendErr.
func FuzzParseOKErr(f *testing.F) {
	fzAddSeeds(f, fzOKErrSeeds())
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _, _ = IsOK(p), IsErr(p), IsEOF(p)
		_ = eofStatus(p)
		ok, err := ParseOK(p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseOK error does not wrap ErrMalformed: %v", err)
			}
		} else {
			if p[0] != headerOK && p[0] != headerEOF {
				t.Fatalf("ParseOK accepted header %#x", p[0])
			}
			ok2, err := ParseOK(AppendOK(nil, ok))
			if err != nil || ok2 != ok {
				t.Fatalf("OK round trip: %+v -> %+v (%v)", ok, ok2, err)
			}
		}
		e, err := ParseErr(p)
		if err != nil {
			if !errors.Is(err, ErrMalformed) || e != nil {
				t.Fatalf("ParseErr: %v, %v", e, err)
			}
		} else {
			if e == nil || p[0] != headerErr || len(e.State) != 5 {
				t.Fatalf("ParseErr accepted % x as %+v", p, e)
			}
			e2, err := ParseErr(AppendErr(nil, e))
			if err != nil || *e2 != *e {
				t.Fatalf("ERR round trip: %+v -> %+v (%v)", e, e2, err)
			}
		}
		if IsErr(p) {
			// A backend's ERR is a *SQLError or a backend failure, never
			// a nil *SQLError.
			err := backendErr(p)
			var se *SQLError
			if err == nil || (errors.As(err, &se) && se == nil) || (!errors.As(err, &se) && !errors.Is(err, ErrBackendIO)) {
				t.Fatalf("backendErr(% x) = %#v", p, err)
			}
		}
	})
}

// FuzzReadLenEnc: the length-encoded readers never panic or claim more
// bytes than they were given, and agree with the appenders.
func FuzzReadLenEnc(f *testing.F) {
	fzAddSeeds(f, fzLenEncSeeds())
	f.Fuzz(func(t *testing.T, b []byte, v uint64) {
		x, isNull, n, err := ReadLenEncInt(b)
		if n < 0 || n > len(b) {
			t.Fatalf("ReadLenEncInt(% x) used %d bytes", b, n)
		}
		switch {
		case err != nil:
			if !errors.Is(err, ErrMalformed) || n != 0 {
				t.Fatalf("ReadLenEncInt(% x): n=%d err=%v", b, n, err)
			}
		case isNull:
			if b[0] != 0xfb || n != 1 {
				t.Fatalf("NULL from % x (n=%d)", b, n)
			}
		default:
			enc := AppendLenEncInt(nil, x)
			if len(enc) > n {
				t.Fatalf("%d read from %d bytes re-encodes to %d", x, n, len(enc))
			}
			if len(enc) == n && !bytes.Equal(enc, b[:n]) {
				t.Fatalf("%d: canonical % x differs from input % x", x, enc, b[:n])
			}
		}
		s, n, err := ReadLenEncString(b)
		if n < 0 || n > len(b) {
			t.Fatalf("ReadLenEncString(% x) used %d bytes", b, n)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) || n != 0 || s != nil {
				t.Fatalf("ReadLenEncString(% x): %q n=%d err=%v", b, s, n, err)
			}
		} else {
			if !bytes.Equal(s, b[n-len(s):n]) {
				t.Fatalf("string is not the end of the consumed bytes")
			}
			enc := AppendLenEncString(nil, s)
			s2, m, err := ReadLenEncString(enc)
			if err != nil || m != len(enc) || !bytes.Equal(s2, s) {
				t.Fatalf("string round trip: %q -> %q (%d/%d, %v)", s, s2, m, len(enc), err)
			}
		}
		// Any value round-trips, after whatever b already holds.
		enc := AppendLenEncInt(append([]byte(nil), b...), v)
		got, isNull, m, err := ReadLenEncInt(enc[len(b):])
		want := 1
		switch {
		case v >= 1<<24:
			want = 9
		case v >= 1<<16:
			want = 4
		case v >= 251:
			want = 3
		}
		if err != nil || isNull || got != v || m != want || len(enc)-len(b) != want {
			t.Fatalf("AppendLenEncInt(%d): % x -> %d null=%v n=%d err=%v", v, enc[len(b):], got, isNull, m, err)
		}
		if !bytes.Equal(enc[:len(b)], b) {
			t.Fatalf("AppendLenEncInt changed the bytes before it")
		}
		if str, k, err := readNulString(b); err == nil {
			if k != len(str)+1 || k > len(b) || b[k-1] != 0 || bytes.IndexByte(str, 0) >= 0 {
				t.Fatalf("readNulString(% x) = %q, %d", b, str, k)
			}
		} else if bytes.IndexByte(b, 0) >= 0 {
			t.Fatalf("readNulString missed a NUL in % x", b)
		}
	})
}

// fzMaxPacket is the MaxPacket of the Conn FuzzReadPacket reads from.
const fzMaxPacket = 1 << 20

// fzAllocSlack is what FuzzReadPacket allows reads to allocate beyond
// twice the bytes that arrived: the first read chunk (64 KiB), error values
// and the noise of measuring process-wide.
const fzAllocSlack = 128 << 10

// FuzzReadPacket feeds a byte stream to a Conn with MaxPacket 1 MiB and
// reads packets until an error. Each packet must be what an independent
// framing model says (payload, sequence check, limit, truncation), and the
// reads must allocate in proportion to the bytes that actually arrived,
// whatever length a header announces.
func FuzzReadPacket(f *testing.F) {
	fzAddSeeds(f, fzReadPacketSeeds())
	f.Fuzz(func(t *testing.T, data []byte, lenient bool, chunk uint8) {
		var first string
		// Allocation is measured process-wide: a measurement that fails
		// is repeated, and only one that fails three times counts.
		for attempt := 0; attempt < 3; attempt++ {
			msg := fzReadPackets(t, data, lenient, int(chunk))
			if msg == "" {
				return
			}
			if first == "" {
				first = msg
			}
		}
		t.Fatal(first)
	})
}

// fzReadPackets runs one FuzzReadPacket pass; protocol violations fail t
// at once, an allocation over the bound is returned.
func fzReadPackets(t *testing.T, data []byte, lenient bool, chunk int) string {
	nc := &fzConn{in: data, chunk: chunk}
	c := NewConn(nc)
	c.MaxPacket = fzMaxPacket
	c.LenientSeq = lenient
	rest := data
	var seq uint8
	var maxCap int
	before := fzHeapAllocated()
	for {
		p, err := c.ReadPacket()
		// The model's view of the next packet.
		var wantErr error
		var want []byte
		switch {
		case len(rest) == 0:
			wantErr = io.EOF
		case len(rest) < 4:
			wantErr = io.ErrUnexpectedEOF
		default:
			n := int(rest[0]) | int(rest[1])<<8 | int(rest[2])<<16
			switch {
			case !lenient && rest[3] != seq:
				wantErr = ErrPacketOutOfOrder
			case n > fzMaxPacket:
				wantErr = ErrPacketTooLarge
			case len(rest)-4 < n:
				wantErr = io.ErrUnexpectedEOF
			default:
				want = rest[4 : 4+n]
				seq = rest[3] + 1
				rest = rest[4+n:]
			}
		}
		if wantErr != nil {
			if !errors.Is(err, wantErr) || p != nil {
				t.Fatalf("ReadPacket = %d bytes, %v; want error %v (%d bytes left: % x)",
					len(p), err, wantErr, len(rest), rest[:min(len(rest), 16)])
			}
			break
		}
		if err != nil || !bytes.Equal(p, want) {
			t.Fatalf("ReadPacket = %d bytes, %v; want the %d-byte payload", len(p), err, len(want))
		}
		if len(p) > fzMaxPacket {
			t.Fatalf("packet of %d bytes exceeds MaxPacket", len(p))
		}
		if c.Seq() != seq {
			t.Fatalf("Seq() = %d after a packet, want %d", c.Seq(), seq)
		}
		maxCap = max(maxCap, cap(p))
	}
	allocated := fzHeapAllocated() - before
	bound := uint64(2*nc.delivered + fzAllocSlack)
	if allocated > bound || uint64(maxCap) > bound {
		return fmt.Sprintf("ReadPacket allocated %d bytes (largest buffer %d) for %d bytes received; bound 2x+%d = %d; input starts % x",
			allocated, maxCap, nc.delivered, fzAllocSlack, bound, data[:min(len(data), 16)])
	}
	return ""
}

// fzHeapAllocated returns the bytes the process has allocated so far. Large
// allocations are counted as they happen.
func fzHeapAllocated() uint64 {
	s := [1]metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s[:])
	return s[0].Value.Uint64()
}

// fzRelayTimeout bounds one FuzzRelay input; the backend stream ends in
// EOF, so a relay that does not return by then loops.
const fzRelayTimeout = 20 * time.Second

// FuzzRelay relays an arbitrary backend byte stream (then EOF) with every
// ResponseKind to a client that keeps what it gets, and reads it with
// ReadResponse. Nothing may panic or hang; a relay that succeeds must have
// sent exactly the whole packets it consumed, renumbered from the client's
// sequence id; one that fails must blame the backend and have sent whole
// packets of that stream, or a prefix of it cut inside a packet, which it
// must then report as Torn.
func FuzzRelay(f *testing.F) {
	fzAddSeeds(f, fzRelaySeeds())
	f.Fuzz(func(t *testing.T, data []byte, deprecateEOF bool, chunk uint8) {
		type outcome struct {
			res     RelayResult
			err     error
			out     []byte
			left    int // bytes of data the relay did not consume
			status  uint16
			readErr error
		}
		kinds := []ResponseKind{ResponseResult, ResponseFieldList, ResponseSingle, ResponseExecute, ResponseRows}
		results := make(chan []outcome, 1)
		go func() {
			outs := make([]outcome, len(kinds))
			for i, kind := range kinds {
				bnc := &fzConn{in: data, chunk: int(chunk)}
				backend := NewConn(bnc)
				backend.LenientSeq = true
				cnc := &fzConn{keep: true}
				client := NewConn(cnc)
				client.SetSeq(1)
				o := &outs[i]
				o.res, o.err = Relay(client, backend, kind, deprecateEOF)
				_ = client.Flush() // what an error left in the buffer
				o.out = cnc.out
				o.left = len(bnc.in) + backend.Buffered()

				rc := NewConn(&fzConn{in: data, chunk: int(chunk)})
				rc.LenientSeq = true
				o.status, o.readErr = ReadResponse(rc, kind)
			}
			results <- outs
		}()
		var outs []outcome
		timer := time.NewTimer(fzRelayTimeout)
		select {
		case outs = <-results:
			timer.Stop()
		case <-timer.C:
			t.Fatalf("Relay/ReadResponse did not return within %v on a stream that ends in EOF", fzRelayTimeout)
		}

		pkts := fzSplit(data)
		for i, kind := range kinds {
			o := outs[i]
			name := fmt.Sprintf("kind %d deprecateEOF=%v", kind, deprecateEOF)
			if se := (*SQLError)(nil); o.readErr != nil &&
				!(errors.As(o.readErr, &se) && se != nil) && !errors.Is(o.readErr, ErrBackendIO) {
				t.Fatalf("%s: ReadResponse error is neither SQLError nor ErrBackendIO: %v", name, o.readErr)
			}
			res := o.res
			if res.Packets < 0 || res.Packets > len(pkts) {
				t.Fatalf("%s: %d packets relayed from a stream of %d", name, res.Packets, len(pkts))
			}
			sent := pkts[:res.Packets]
			if o.err == nil {
				wire, payload := 0, int64(0)
				for _, p := range sent {
					if !p.whole() {
						t.Fatalf("%s: relay succeeded over a truncated packet", name)
					}
					wire += 4 + len(p.payload)
					payload += int64(len(p.payload))
				}
				if want := fzRenumber(sent, 1); !bytes.Equal(o.out, want) {
					t.Fatalf("%s: client got %d bytes, want the %d bytes of %d whole packets renumbered:\ngot  % x\nwant % x",
						name, len(o.out), len(want), len(sent), fzHead(o.out), fzHead(want))
				}
				if consumed := len(data) - o.left; consumed != wire {
					t.Fatalf("%s: relay consumed %d backend bytes, relayed %d", name, consumed, wire)
				}
				if res.Bytes != payload || res.Torn {
					t.Fatalf("%s: result %+v, want Bytes=%d and not torn", name, res, payload)
				}
				if res.Packets == 0 {
					t.Fatalf("%s: relay succeeded without a packet", name)
				}
				// HasStatus comes from an OK or EOF packet (or an empty
				// one, read as OK), though not necessarily the last one: an
				// ERR after an OK with SERVER_MORE_RESULTS_EXISTS keeps it.
				if res.HasStatus && !slices.ContainsFunc(sent, func(p fzPacket) bool {
					return len(p.payload) == 0 || p.payload[0] == headerOK || p.payload[0] == headerEOF
				}) {
					t.Fatalf("%s: HasStatus without an OK or EOF packet", name)
				}
				last := sent[len(sent)-1].payload
				if len(last) >= 3 && last[0] == headerErr && len(last) <= readBufferSize {
					want, _ := ParseErr(last)
					if res.Err == nil || *res.Err != *want {
						t.Fatalf("%s: response ended in ERR %+v, result has %+v", name, want, res.Err)
					}
				}
				continue
			}
			if !errors.Is(o.err, ErrBackendIO) || errors.Is(o.err, ErrClientIO) {
				t.Fatalf("%s: error with a client that never fails: %v", name, o.err)
			}
			full := fzRenumber(sent, 1)
			cut := len(sent) > 0 && !sent[len(sent)-1].whole()
			if !cut {
				// Torn may still be set: a whole packet (a LOCAL INFILE
				// request) can leave the client unrepairable too.
				if !bytes.Equal(o.out, full) {
					t.Fatalf("%s: failed relay sent %d bytes, want its %d whole packets (%d bytes)",
						name, len(o.out), len(sent), len(full))
				}
				continue
			}
			if !res.Torn {
				t.Fatalf("%s: the client got part of a packet, and the result is not Torn", name)
			}
			if whole := len(fzRenumber(sent[:len(sent)-1], 1)) + 4; len(o.out) < whole || !bytes.HasPrefix(full, o.out) {
				t.Fatalf("%s: torn relay sent %d bytes, not a prefix of the stream cut in its last packet", name, len(o.out))
			}
		}
	})
}

// FuzzRelayLocalInfile relays arbitrary backend bytes with
// ResponseResultLocalInfile, the client answering LOAD DATA LOCAL INFILE
// requests with clientData. Nothing may panic or hang; a relay that
// succeeds has sent the client exactly the whole backend packets it
// consumed, and the backend exactly the client's packets up to an empty
// one for each request, both renumbered.
func FuzzRelayLocalInfile(f *testing.F) {
	fzAddSeeds(f, fzLocalInfileSeeds())
	f.Fuzz(func(t *testing.T, data, clientData []byte, deprecateEOF bool, chunk uint8) {
		type outcome struct {
			res              RelayResult
			err              error
			toClient, toBack []byte
		}
		done := make(chan outcome, 1)
		go func() {
			bnc := &fzConn{in: data, chunk: int(chunk), keep: true}
			backend := NewConn(bnc)
			backend.LenientSeq = true
			cnc := &fzConn{in: clientData, chunk: int(chunk), keep: true}
			client := NewConn(cnc)
			client.SetSeq(1)
			var o outcome
			o.res, o.err = Relay(client, backend, ResponseResultLocalInfile, deprecateEOF)
			_, _ = client.Flush(), backend.Flush()
			o.toClient, o.toBack = cnc.out, bnc.out
			done <- o
		}()
		var o outcome
		timer := time.NewTimer(fzRelayTimeout)
		select {
		case o = <-done:
			timer.Stop()
		case <-timer.C:
			t.Fatalf("Relay did not return within %v on streams that end in EOF", fzRelayTimeout)
		}
		if o.err != nil {
			if !errors.Is(o.err, ErrBackendIO) && !errors.Is(o.err, ErrClientIO) {
				t.Fatalf("error blames neither leg: %v", o.err)
			}
			return
		}
		pkts := fzSplit(data)
		if o.res.Packets < 1 || o.res.Packets > len(pkts) {
			t.Fatalf("%d packets relayed from a stream of %d", o.res.Packets, len(pkts))
		}
		fzSamePayloads(t, "client", o.toClient, pkts[:o.res.Packets])
		// Each request the client answered ends its file with an empty
		// packet; the backend gets those packets and nothing else.
		var file []fzPacket
		for _, p := range fzSplit(clientData) {
			if len(file) == len(fzSplit(o.toBack)) {
				break
			}
			file = append(file, p)
		}
		fzSamePayloads(t, "backend", o.toBack, file)
		// Which relayed 0xfb packets were requests depends on where they
		// stood in the response (a column definition or a row may start
		// with 0xfb too), so the relay's own count is checked against the
		// files the backend received.
		requests := o.res.LocalInfileFiles
		ends := 0
		for _, p := range file {
			if p.n == 0 {
				ends++
			}
		}
		if ends != requests || (len(file) > 0 && file[len(file)-1].n != 0) {
			t.Fatalf("%d LOCAL INFILE requests relayed, %d files (of %d packets) sent to the backend", requests, ends, len(file))
		}
	})
}

// fzSamePayloads checks that out holds exactly the payloads of the whole
// packets want, in order. Sequence ids are not compared: on the client leg
// the client's own LOCAL INFILE packets take some of them.
func fzSamePayloads(t *testing.T, leg string, out []byte, want []fzPacket) {
	t.Helper()
	got := fzSplit(out)
	if len(got) != len(want) || len(fzRenumber(got, 0)) != len(out) {
		t.Fatalf("%s got %d packets (%d bytes), want %d", leg, len(got), len(out), len(want))
	}
	for i := range got {
		if !got[i].whole() || !want[i].whole() || !bytes.Equal(got[i].payload, want[i].payload) {
			t.Fatalf("%s packet %d: got %d of %d bytes % x, want % x", leg, i, len(got[i].payload), got[i].n,
				fzHead(got[i].payload), fzHead(want[i].payload))
		}
	}
}

// FuzzParseChangeUser: ParseChangeUser never panics, and what it accepts
// survives Encode and a second parse.
func FuzzParseChangeUser(f *testing.F) {
	fzAddSeeds(f, fzChangeUserSeeds())
	f.Fuzz(func(t *testing.T, p []byte, caps uint32) {
		cu, err := ParseChangeUser(p, caps)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		enc := cu.Encode(caps)
		cu2, err := ParseChangeUser(enc, caps)
		if err != nil {
			t.Fatalf("re-encoded COM_CHANGE_USER does not parse: %v\n%+v\n% x", err, cu, enc)
		}
		if cu.User != cu2.User || !bytes.Equal(cu.AuthResponse, cu2.AuthResponse) || cu.Database != cu2.Database ||
			cu.Collation != cu2.Collation || cu.AuthPlugin != cu2.AuthPlugin || !bytes.Equal(cu.Attributes, cu2.Attributes) {
			t.Fatalf("round trip changed COM_CHANGE_USER:\nfirst  %+v\nsecond %+v", cu, cu2)
		}
	})
}

// fzPacket is one physical packet of a byte stream as framed by its header;
// payload is what of it is present.
type fzPacket struct {
	n       int
	seq     uint8
	payload []byte
}

func (p fzPacket) whole() bool { return len(p.payload) == p.n }

// fzSplit frames b into physical packets; the last may be cut short, and a
// trailing partial header is dropped.
func fzSplit(b []byte) []fzPacket {
	var ps []fzPacket
	for len(b) >= 4 {
		n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		p := b[4:]
		if len(p) > n {
			p = p[:n]
		}
		ps = append(ps, fzPacket{n: n, seq: b[3], payload: p})
		b = b[4+len(p):]
	}
	return ps
}

// fzRenumber writes ps again with sequence ids from seq on.
func fzRenumber(ps []fzPacket, seq uint8) []byte {
	var b []byte
	for _, p := range ps {
		b = append(b, byte(p.n), byte(p.n>>8), byte(p.n>>16), seq)
		b = append(b, p.payload...)
		seq++
	}
	return b
}

func fzHead(b []byte) []byte { return b[:min(len(b), 48)] }

// fzConn is a net.Conn whose reads return in (at most chunk bytes at a time
// when chunk > 0) and then io.EOF, and whose writes are kept (keep) or
// dropped.
type fzConn struct {
	in        []byte
	chunk     int
	delivered int
	keep      bool
	out       []byte
}

func (c *fzConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	if c.chunk > 0 && len(p) > c.chunk {
		p = p[:c.chunk]
	}
	n := copy(p, c.in)
	c.in = c.in[n:]
	c.delivered += n
	return n, nil
}

func (c *fzConn) Write(p []byte) (int, error) {
	if c.keep {
		c.out = append(c.out, p...)
	}
	return len(p), nil
}

func (c *fzConn) Close() error                     { return nil }
func (c *fzConn) LocalAddr() net.Addr              { return fzAddr{} }
func (c *fzConn) RemoteAddr() net.Addr             { return fzAddr{} }
func (c *fzConn) SetDeadline(time.Time) error      { return nil }
func (c *fzConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fzConn) SetWriteDeadline(time.Time) error { return nil }

type fzAddr struct{}

func (fzAddr) Network() string { return "fuzz" }
func (fzAddr) String() string  { return "fuzz" }

// ---------------------------------------------------------------------------
// Seeds

// fzSeed is one seed input of a fuzz target. Every seed is written to the
// committed corpus by TestGenerateFuzzCorpus except big ones, which are
// only added with f.Add (as are the seeds marked add).
type fzSeed struct {
	name string
	args []any
	add  bool
	big  bool
}

func fzAddSeeds(f *testing.F, seeds []fzSeed) {
	for _, s := range seeds {
		if s.add || s.big {
			f.Add(s.args...)
		}
	}
}

// fzCorpora lists the seeds of every target.
func fzCorpora() map[string][]fzSeed {
	return map[string][]fzSeed{
		"FuzzParseHandshakeResponse": fzHandshakeSeeds(),
		"FuzzParseExecute":           fzExecuteSeeds(),
		"FuzzParseGreeting":          fzGreetingSeeds(),
		"FuzzParseAuthSwitch":        fzAuthSwitchSeeds(),
		"FuzzParseOKErr":             fzOKErrSeeds(),
		"FuzzReadLenEnc":             fzLenEncSeeds(),
		"FuzzReadPacket":             fzReadPacketSeeds(),
		"FuzzRelay":                  fzRelaySeeds(),
		"FuzzRelayLocalInfile":       fzLocalInfileSeeds(),
		"FuzzParseChangeUser":        fzChangeUserSeeds(),
	}
}

// TestGenerateFuzzCorpus (re)writes the seed files, named seed-*, of
// testdata/fuzz/; crashers and other files there are left alone. It runs
// only with SLUICE_GEN_FUZZ_CORPUS=1.
func TestGenerateFuzzCorpus(t *testing.T) {
	if os.Getenv("SLUICE_GEN_FUZZ_CORPUS") != "1" {
		t.Skip("set SLUICE_GEN_FUZZ_CORPUS=1 to rewrite testdata/fuzz seed files")
	}
	for target, seeds := range fzCorpora() {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		written := map[string]bool{}
		for _, s := range seeds {
			if s.big {
				continue
			}
			if written[s.name] {
				t.Fatalf("%s: seed name %q used twice", target, s.name)
			}
			written[s.name] = true
			if err := os.WriteFile(filepath.Join(dir, "seed-"+s.name), fzMarshal(s.args...), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: %d seed files", target, len(written))
	}
}

// fzMarshal encodes values in the `go test fuzz v1` corpus file format.
func fzMarshal(vals ...any) []byte {
	b := []byte("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			b = fmt.Appendf(b, "[]byte(%+q)\n", v)
		case byte:
			b = fmt.Appendf(b, "byte(%+q)\n", v)
		case bool, uint32, uint64:
			b = fmt.Appendf(b, "%T(%v)\n", v, v)
		default:
			panic(fmt.Sprintf("fzMarshal: unsupported %T", v))
		}
	}
	return b
}

func fzCat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func fzLenEnc(s []byte) []byte { return AppendLenEncString(nil, s) }

// fzAttrs encodes connection attributes (key/value pairs), without the
// block's own length.
func fzAttrs(kv ...string) []byte {
	var b []byte
	for _, s := range kv {
		b = AppendLenEncString(b, []byte(s))
	}
	return b
}

// fzHSHead is the fixed 32-byte start of a HandshakeResponse41.
func fzHSHead(caps, maxPacket uint32, collation byte, mariadb uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, caps)
	b = binary.LittleEndian.AppendUint32(b, maxPacket)
	b = append(b, collation)
	b = append(b, make([]byte, 19)...)
	return binary.LittleEndian.AppendUint32(b, mariadb)
}

// Scrambled auth responses as captured clients send them.
var (
	fzNativeResp = []byte("\x9a\x1f\x8c\x02\x5e\x77\xd0\x31\x00\xe4\x6b\x12\xfe\xa9\x3c\x58\x0d\xb2\x41\xcf")
	fzSHA2Resp   = []byte("\x4e\x0b\x96\xd3\x21\x7a\xf0\x08\x5c\x99\x13\xee\x60\x2b\xc4\x77\x01\x8d\x3f\xa2\x55\xb9\x00\x6e\xd1\x24\x87\xfa\x30\x4c\x9e\x12")
	fzScramble   = []byte("abcdefghijklmnopqrst")
)

func fzHandshakeSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, p []byte) {
		seeds = append(seeds, fzSeed{name: name, args: []any{p}, add: important})
	}
	attrs := fzAttrs("_client_name", "libmysql", "_os", "Linux", "_pid", "4242", "program_name", "mysql")

	// Encode with several capability combinations.
	combos := []struct {
		name    string
		caps    uint32
		mariadb uint32
	}{
		{"p41-only", ClientProtocol41, 0},
		{"secure", ClientProtocol41 | ClientSecureConnection | ClientLongPassword, 0},
		{"secure-plugin", ClientProtocol41 | ClientSecureConnection | ClientPluginAuth | ClientLongPassword, 0},
		{"secure-plugin-db", ClientProtocol41 | ClientSecureConnection | ClientPluginAuth | ClientConnectWithDB | ClientLongPassword, 0},
		{"all", ClientProtocol41 | ClientSecureConnection | ClientPluginAuth | ClientConnectWithDB |
			ClientConnectAttrs | ClientPluginAuthLenencClientData | ClientLongPassword | ClientDeprecateEOF | ClientSessionTrack, 0},
		{"lenenc-attrs-nodb", ClientProtocol41 | ClientPluginAuthLenencClientData | ClientPluginAuth | ClientConnectAttrs, 0},
		{"db-no-secure", ClientProtocol41 | ClientConnectWithDB, 0},
		{"attrs-no-plugin", ClientProtocol41 | ClientSecureConnection | ClientConnectAttrs, 0},
		{"mariadb-ext", ClientProtocol41 | ClientSecureConnection | ClientPluginAuth | ClientConnectWithDB |
			ClientConnectAttrs | ClientPluginAuthLenencClientData, 0x1d},
		{"ssl-flag", ClientProtocol41 | ClientSecureConnection | ClientPluginAuth | ClientSSL | ClientLongPassword, 0},
	}
	for _, c := range combos {
		h := &HandshakeResponse{Capabilities: c.caps, MaxPacketSize: 1 << 24, Collation: 45,
			MariaDBCapabilities: c.mariadb, User: "app", AuthResponse: fzNativeResp, Database: "shop",
			AuthPlugin: AuthNativePassword, Attributes: attrs}
		if c.caps&(ClientSecureConnection|ClientPluginAuthLenencClientData) == 0 {
			h.AuthResponse = []byte("4f2a1b9c") // pre-4.1 style, NUL-terminated
		}
		add("encode-"+c.name, true, h.Encode())
	}

	// Captured-style responses, written field by field.
	mysql8 := fzCat(fzHSHead(0x19ffa685, 1<<24, 255, 0),
		[]byte("root\x00"),
		[]byte{0x20}, fzSHA2Resp,
		[]byte("caching_sha2_password\x00"),
		fzLenEnc(fzAttrs("_pid", "28472", "_platform", "x86_64", "_os", "Linux", "_client_name", "libmysql",
			"os_user", "dev", "_client_version", "8.0.36", "program_name", "mysql")))
	add("mysql8-cli", true, mysql8)
	add("mysql8-cli-db", true, fzCat(fzHSHead(0x19ffa68d, 1<<24, 255, 0),
		[]byte("app\x00"), []byte{0x20}, fzSHA2Resp, []byte("shop\x00"),
		[]byte("caching_sha2_password\x00"),
		fzLenEnc(fzAttrs("_client_name", "libmysql", "_client_version", "8.4.0"))))
	add("mysql57-native", false, fzCat(fzHSHead(0x01bea68d, 1<<30, 33, 0),
		[]byte("app\x00"), []byte{0x14}, fzNativeResp, []byte("shop\x00"),
		[]byte("mysql_native_password\x00"),
		fzLenEnc(fzAttrs("_client_name", "libmysql", "_client_version", "5.7.44", "_os", "linux-glibc2.12"))))
	add("mariadb-connc", true, fzCat(
		fzHSHead(ClientLongFlag|ClientConnectWithDB|ClientLocalFiles|ClientProtocol41|ClientInteractive|
			ClientTransactions|ClientSecureConnection|ClientMultiStatements|ClientMultiResults|
			ClientPSMultiResults|ClientPluginAuth|ClientConnectAttrs|ClientPluginAuthLenencClientData|
			ClientSessionTrack, 1<<24, 45, 0x1d),
		[]byte("app\x00"), []byte{0x14}, fzNativeResp, []byte("shop\x00"),
		[]byte("mysql_native_password\x00"),
		fzLenEnc(fzAttrs("_client_name", "libmariadb", "_client_version", "3.3.8", "_os", "Linux",
			"_pid", "1234", "_thread", "140230", "_platform", "x86_64", "_server_host", "127.0.0.1"))))
	add("mariadb-ed25519", false, fzCat(
		fzHSHead(ClientLongFlag|ClientProtocol41|ClientTransactions|ClientSecureConnection|ClientMultiResults|
			ClientPluginAuth|ClientPluginAuthLenencClientData, 1<<24, 45, 0x05),
		[]byte("edu\x00"), []byte{0x40}, bytes.Repeat([]byte{0x5a, 0xa5}, 32),
		[]byte("client_ed25519\x00")))
	goCaps := ClientProtocol41 | ClientSecureConnection | ClientLongPassword | ClientTransactions |
		ClientLocalFiles | ClientPluginAuth | ClientMultiResults | ClientConnectAttrs | ClientLongFlag
	add("go-sql-driver", true, fzCat(fzHSHead(goCaps|ClientConnectWithDB|ClientFoundRows, 0, 45, 0),
		[]byte("app\x00"), []byte{0x14}, fzNativeResp, []byte("shop\x00"),
		[]byte("mysql_native_password\x00"),
		fzLenEnc(fzAttrs("_client_name", "Go-MySQL-Driver", "_os", "linux", "_platform", "amd64",
			"_pid", "77", "_server_host", "10.0.0.5"))))
	add("go-sql-driver-sha256-lenenc", false, fzCat(
		fzHSHead(goCaps|ClientPluginAuthLenencClientData, 0, 255, 0),
		[]byte("app\x00"), AppendLenEncInt(nil, 256), bytes.Repeat([]byte{0xc3}, 256),
		[]byte("sha256_password\x00"), fzLenEnc(nil)))
	add("go-sql-driver-empty-password", false, fzCat(fzHSHead(goCaps, 0, 45, 0),
		[]byte("app\x00"), []byte{0}, []byte("mysql_native_password\x00"), fzLenEnc(nil)))
	// libmysqlclient before 5.6.6: no NUL after the plugin name.
	add("libmysql55-plugin-no-nul", true, fzCat(fzHSHead(0x000fa68d, 1<<24, 8, 0),
		[]byte("app\x00"), []byte{0x14}, fzNativeResp, []byte("shop\x00"), []byte("mysql_native_password")))
	// 4.1 client without CLIENT_SECURE_CONNECTION: NUL-terminated old scramble.
	add("old-password", false, fzCat(fzHSHead(ClientProtocol41|ClientLongPassword|ClientConnectWithDB, 1<<24, 8, 0),
		[]byte("app\x00"), []byte("KLMNOPQR\x00"), []byte("shop\x00")))
	add("clear-password", false, fzCat(fzHSHead(goCaps, 1<<24, 45, 0),
		[]byte("app\x00"), []byte{7}, []byte("secret\x00"), []byte("mysql_clear_password\x00"), fzLenEnc(nil)))

	// SSLRequest and near misses.
	add("ssl-request", true, fzHSHead(0x19ffae85, 1<<24, 255, 0))
	add("only-head-p41", false, fzHSHead(ClientProtocol41, 0, 0, 0))
	add("only-head-no-p41", false, fzHSHead(ClientSecureConnection, 0, 0, 0))

	// Truncations of the MySQL 8 response.
	userEnd := 32 + len("root\x00")
	authEnd := userEnd + 1 + len(fzSHA2Resp)
	pluginEnd := authEnd + len("caching_sha2_password\x00")
	for _, n := range []int{0, 1, 4, 31, 32, 33, userEnd - 1, userEnd, userEnd + 1, authEnd - 1, authEnd,
		pluginEnd - 1, pluginEnd, pluginEnd + 1, len(mysql8) - 1} {
		add(fmt.Sprintf("mysql8-cut-%03d", n), n == userEnd+1 || n == pluginEnd+1, mysql8[:n])
	}

	// 0xfb-0xff length prefixes where a length-encoded string is due.
	lenencHead := fzHSHead(ClientProtocol41|ClientSecureConnection|ClientPluginAuthLenencClientData|
		ClientPluginAuth|ClientConnectAttrs|ClientConnectWithDB, 1<<24, 45, 0)
	prefixes := map[string][]byte{
		"fb":             {0xfb},
		"fc-short":       {0xfc, 0x02},
		"fc":             {0xfc, 0x03, 0x00, 'a', 'b', 'c'},
		"fc-lies":        {0xfc, 0xff, 0xff, 'a'},
		"fd-short":       {0xfd, 0x01, 0x00},
		"fd":             {0xfd, 0x01, 0x00, 0x00, 'x'},
		"fd-lies":        {0xfd, 0xff, 0xff, 0xff, 'x'},
		"fe-short":       {0xfe, 1, 0, 0, 0, 0, 0, 0},
		"fe":             {0xfe, 2, 0, 0, 0, 0, 0, 0, 0, 'h', 'i'},
		"fe-huge":        {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 'x'},
		"fe-top-bit-set": {0xfe, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 'x'},
		"ff":             {0xff, 0x01},
	}
	for name, pre := range prefixes {
		important := name == "fe-huge" || name == "fb" || name == "ff"
		add("auth-lenenc-"+name, important, fzCat(lenencHead, []byte("u\x00"), pre))
		add("attrs-lenenc-"+name, important, fzCat(lenencHead, []byte("u\x00"), []byte{1, 'p'},
			[]byte("db\x00"), []byte("mysql_native_password\x00"), pre))
	}
	// A 1-byte auth length that runs past the end (CLIENT_SECURE_CONNECTION).
	add("secure-auth-len-lies", true, fzCat(fzHSHead(ClientProtocol41|ClientSecureConnection, 0, 45, 0),
		[]byte("u\x00"), []byte{0xff, 'a', 'b'}))

	// Big user names and auth data.
	bigUser := fzCat(fzHSHead(ClientProtocol41|ClientSecureConnection|ClientPluginAuth, 1<<24, 45, 0),
		bytes.Repeat([]byte{'u'}, 10<<10), []byte{0}, []byte{0x14}, fzNativeResp, []byte("mysql_native_password\x00"))
	add("user-10k", false, bigUser)
	add("user-10k-no-nul", false, fzCat(fzHSHead(ClientProtocol41, 0, 45, 0), bytes.Repeat([]byte{'u'}, 10<<10)))
	add("auth-empty-secure", true, fzCat(fzHSHead(ClientProtocol41|ClientSecureConnection|ClientPluginAuth, 0, 45, 0),
		[]byte("u\x00"), []byte{0}, []byte("mysql_native_password\x00")))
	add("auth-empty-lenenc", false, fzCat(lenencHead, []byte("u\x00"), []byte{0}, []byte("\x00\x00\x00")))
	add("auth-255-secure", false, fzCat(fzHSHead(ClientProtocol41|ClientSecureConnection, 0, 45, 0),
		[]byte("u\x00"), []byte{0xff}, bytes.Repeat([]byte{0xab}, 255)))
	seeds = append(seeds, fzSeed{name: "auth-1m-lenenc", big: true, args: []any{fzCat(lenencHead,
		[]byte("u\x00"), AppendLenEncInt(nil, 1<<20), bytes.Repeat([]byte{0x61}, 1<<20),
		[]byte("db\x00"), []byte("caching_sha2_password\x00"), fzLenEnc(attrs))}})
	return seeds
}

// fzParam is one parameter of a COM_STMT_EXECUTE seed.
type fzParam struct {
	typ, flags byte
	val        []byte // the encoded value; ignored when null
	null       bool
}

// fzExecute builds a COM_STMT_EXECUTE for params, binding their types when
// bound is set. It also returns the types block.
func fzExecute(id uint32, bound bool, params []fzParam) (p, types []byte) {
	p = []byte{ComStmtExecute}
	p = binary.LittleEndian.AppendUint32(p, id)
	p = append(p, CursorTypeNoCursor, 1, 0, 0, 0)
	for _, pr := range params {
		types = append(types, pr.typ, pr.flags)
	}
	if len(params) == 0 {
		return p, types
	}
	nulls := make([]byte, (len(params)+7)/8)
	for i, pr := range params {
		if pr.null {
			nulls[i/8] |= 1 << (i % 8)
		}
	}
	p = append(p, nulls...)
	if bound {
		p = append(p, 1)
		p = append(p, types...)
	} else {
		p = append(p, 0)
	}
	for _, pr := range params {
		if !pr.null {
			p = append(p, pr.val...)
		}
	}
	return p, types
}

func fzExecuteSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, p []byte, n int, types []byte) {
		seeds = append(seeds, fzSeed{name: name, args: []any{p, uint8(n), types}, add: important})
	}
	le16 := func(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	le64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	date4 := []byte{4, 0xe8, 0x07, 5, 17}                                     // 2024-05-17
	dt7 := []byte{7, 0xe8, 0x07, 5, 17, 13, 45, 30}                           // 13:45:30
	dt11 := []byte{11, 0xe8, 0x07, 5, 17, 13, 45, 30, 0x40, 0xe2, 0x01, 0x00} // .123456
	tm8 := []byte{8, 1, 2, 0, 0, 0, 10, 20, 30}                               // -2 days 10:20:30
	tm12 := []byte{12, 0, 0, 0, 0, 0, 23, 59, 59, 0x3f, 0x42, 0x0f, 0x00}     // 23:59:59.999999
	all := []struct {
		name string
		p    fzParam
	}{
		{"tiny", fzParam{typ: TypeTiny, val: []byte{0x7f}}},
		{"tiny-unsigned", fzParam{typ: TypeTiny, flags: 0x80, val: []byte{0xff}}},
		{"short", fzParam{typ: TypeShort, val: le16(0x8001)}},
		{"year", fzParam{typ: TypeYear, val: le16(2024)}},
		{"long", fzParam{typ: TypeLong, val: le32(0xdeadbeef)}},
		{"int24", fzParam{typ: TypeInt24, val: le32(0x00123456)}},
		{"longlong", fzParam{typ: TypeLongLong, flags: 0x80, val: le64(math.MaxUint64)}},
		{"float", fzParam{typ: TypeFloat, val: le32(math.Float32bits(3.25))}},
		{"double", fzParam{typ: TypeDouble, val: le64(math.Float64bits(-1e300))}},
		{"null-type", fzParam{typ: TypeNull}},
		{"date-0", fzParam{typ: TypeDate, val: []byte{0}}},
		{"date-4", fzParam{typ: TypeDate, val: date4}},
		{"datetime-0", fzParam{typ: TypeDatetime, val: []byte{0}}},
		{"datetime-4", fzParam{typ: TypeDatetime, val: date4}},
		{"datetime-7", fzParam{typ: TypeDatetime, val: dt7}},
		{"datetime-11", fzParam{typ: TypeDatetime, val: dt11}},
		{"timestamp-11", fzParam{typ: TypeTimestamp, val: dt11}},
		{"time-0", fzParam{typ: TypeTime, val: []byte{0}}},
		{"time-8", fzParam{typ: TypeTime, val: tm8}},
		{"time-12", fzParam{typ: TypeTime, val: tm12}},
		{"varchar", fzParam{typ: TypeVarchar, val: fzLenEnc([]byte("hello"))}},
		{"varstring-empty", fzParam{typ: TypeVarString, val: []byte{0}}},
		{"string-250", fzParam{typ: TypeString, val: fzLenEnc(bytes.Repeat([]byte{'s'}, 250))}},
		{"blob-fc", fzParam{typ: TypeBlob, val: fzLenEnc(bytes.Repeat([]byte{'b'}, 300))}},
		{"blob-fd", fzParam{typ: TypeMediumBlob, val: fzLenEnc(bytes.Repeat([]byte{'m'}, 1<<16))}},
		{"blob-fd-noncanonical", fzParam{typ: TypeBlob, val: []byte{0xfd, 3, 0, 0, 'a', 'b', 'c'}}},
		{"blob-fe-noncanonical", fzParam{typ: TypeLongBlob, val: []byte{0xfe, 2, 0, 0, 0, 0, 0, 0, 0, 'h', 'i'}}},
		{"newdecimal", fzParam{typ: TypeNewDecimal, val: fzLenEnc([]byte("-123.4500"))}},
		{"json", fzParam{typ: TypeJSON, val: fzLenEnc([]byte(`{"a":[1,2]}`))}},
		{"geometry", fzParam{typ: TypeGeometry, val: fzLenEnc(make([]byte, 25))}},
	}
	var every []fzParam
	for i, a := range all {
		important := i%3 == 0
		p, types := fzExecute(uint32(i+1), true, []fzParam{a.p})
		add("bound-"+a.name, important, p, 1, nil)
		p, _ = fzExecute(uint32(i+1), false, []fzParam{a.p})
		add("unbound-"+a.name, important, p, 1, types)
		if a.name != "blob-fd" {
			every = append(every, a.p)
		}
	}
	p, types := fzExecute(7, true, every)
	add("bound-every-type", true, p, len(every), nil)
	up, _ := fzExecute(7, false, every)
	add("unbound-every-type", true, up, len(every), types)

	// NULL bitmap set, over more than one byte.
	withNulls := make([]fzParam, 11)
	for i := range withNulls {
		withNulls[i] = fzParam{typ: TypeLong, val: le32(uint32(i)), null: i%2 == 0 || i == 9}
	}
	p, types = fzExecute(3, true, withNulls)
	add("bound-nulls-11", true, p, 11, nil)
	up, _ = fzExecute(3, false, withNulls)
	add("unbound-nulls-11", true, up, 11, types)
	allNull := make([]fzParam, 16)
	for i := range allNull {
		allNull[i] = fzParam{typ: TypeVarchar, null: true}
	}
	p, _ = fzExecute(3, true, allNull)
	add("bound-all-null-16", false, p, 16, nil)

	// Truncated parameter blocks: cut the every-type packets anywhere
	// interesting.
	for _, n := range []int{0, 9, 10, 13, 14, 20, 40, len(p) - 1} {
		if n < len(p) {
			add(fmt.Sprintf("bound-nulls-cut-%03d", n), n == 14, p[:n], 16, nil)
		}
	}
	bp, _ := fzExecute(7, true, every)
	for _, n := range []int{14, 15, 30, 10 + 4 + 1 + 2*len(every), 10 + 4 + 1 + 2*len(every) + 3, len(bp) - 1} {
		add(fmt.Sprintf("bound-every-cut-%04d", n), false, bp[:n], len(every), nil)
	}
	for _, n := range []int{14, 15, 16, len(up) - 1} {
		add(fmt.Sprintf("unbound-every-cut-%04d", n), false, up[:n], len(every), types)
	}
	// Short null bitmaps: more parameters than the packet has room for.
	add("short-bitmap-16", true, []byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0}, 16, nil)
	add("short-bitmap-255", false, []byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, 255, nil)
	add("no-bitmap", false, []byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0}, 1, nil)
	// Types that are not types, and bad temporal lengths.
	for _, bad := range []struct {
		name string
		t    byte
		val  []byte
	}{
		{"unknown-20", 0x20, []byte{1, 2, 3, 4}},
		{"unknown-f4", 0xf4, []byte{1}},
		{"unknown-14", 0x14, nil},
		{"date-len-5", TypeDate, []byte{5, 1, 2, 3, 4, 5}},
		{"datetime-len-255", TypeDatetime, []byte{0xff}},
		{"time-truncated", TypeTime, []byte{12, 0, 0}},
		{"blob-fb-null", TypeBlob, []byte{0xfb}},
		{"blob-ff", TypeBlob, []byte{0xff, 0}},
		{"blob-fe-lies", TypeBlob, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 'x'}},
		{"blob-fc-short", TypeBlob, []byte{0xfc, 0x10}},
		{"long-short", TypeLong, []byte{1, 2}},
	} {
		p, types := fzExecute(9, true, []fzParam{{typ: bad.t, val: bad.val}})
		add("bad-"+bad.name, bad.name == "unknown-20" || bad.name == "blob-fe-lies", p, 1, nil)
		up, _ := fzExecute(9, false, []fzParam{{typ: bad.t, val: bad.val}})
		add("unbound-bad-"+bad.name, false, up, 1, types)
	}
	// Zero parameters, with and without junk after the header; trailing
	// bytes after the last value; types of the wrong length.
	add("no-params", true, []byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0}, 0, nil)
	add("no-params-trailing", false, []byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0xfe}, 0, nil)
	p, _ = fzExecute(5, true, []fzParam{{typ: TypeTiny, val: []byte{1}}})
	add("trailing-byte", false, append(p, 0), 1, nil)
	up, _ = fzExecute(5, false, []fzParam{{typ: TypeTiny, val: []byte{1}}})
	add("unbound-no-types", true, up, 1, nil)
	add("unbound-types-too-long", false, up, 1, []byte{TypeTiny, 0, TypeTiny, 0})
	add("bound-flag-2", false, func() []byte { q := append([]byte(nil), up...); q[11] = 2; return q }(), 1, []byte{TypeTiny, 0})
	add("cursor-flags", false, func() []byte { q := append([]byte(nil), up...); q[5] = CursorTypeReadOnly; return q }(), 1, []byte{TypeTiny, 0})
	add("not-execute", false, []byte{ComStmtPrepare, 1, 0, 0, 0, 0, 1, 0, 0, 0}, 0, nil)
	add("prepare-ok", false, []byte{0, 1, 0, 0, 0, 2, 0, 3, 0, 0, 0, 0}, 0, nil)
	return seeds
}

func fzGreetingSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, p []byte) {
		seeds = append(seeds, fzSeed{name: name, args: []any{p}, add: important})
	}
	sluice := &Greeting{ServerVersion: "8.0.36-sluice", ConnectionID: 7, Scramble: fzScramble,
		Capabilities: 0xdfffffff, Collation: 45, Status: StatusAutocommit, AuthPlugin: AuthNativePassword}
	add("encode-sluice", true, sluice.Encode())
	maria := &Greeting{ServerVersion: "5.5.5-10.11.6-MariaDB", ConnectionID: 12, Scramble: fzScramble,
		Capabilities: 0xa0fff7fe, Collation: 45, Status: StatusAutocommit, MariaDBCapabilities: 0x1d,
		AuthPlugin: AuthNativePassword}
	add("encode-mariadb", true, maria.Encode())
	noPlugin := &Greeting{ServerVersion: "5.1.73", ConnectionID: 1, Scramble: fzScramble,
		Capabilities: ClientProtocol41 | ClientSecureConnection | ClientLongPassword, Collation: 8}
	add("encode-no-plugin", false, noPlugin.Encode())

	head := func(version string, capsLo uint16) []byte {
		b := append([]byte{10}, version...)
		b = append(b, 0)
		b = binary.LittleEndian.AppendUint32(b, 0x1c)
		b = append(b, fzScramble[:8]...)
		b = append(b, 0)
		return binary.LittleEndian.AppendUint16(b, capsLo)
	}
	mysql8 := fzCat(head("8.0.36", 0xffff), []byte{255, 2, 0, 0xff, 0xdf, 21}, make([]byte, 10),
		fzScramble[8:], []byte{0}, []byte("caching_sha2_password\x00"))
	add("mysql8", true, mysql8)
	add("mariadb-10.11", true, fzCat(head("5.5.5-10.11.6-MariaDB-1:10.11.6+maria~ubu2204", 0xf7fe),
		[]byte{45, 2, 0, 0xff, 0x81, 21}, make([]byte, 6), []byte{0x1d, 0, 0, 0},
		fzScramble[8:], []byte{0}, []byte("mysql_native_password\x00")))
	add("mysql57-plugin-no-nul", false, fzCat(head("5.7.44-log", 0xffff), []byte{8, 2, 0, 0xff, 0xc1, 21},
		make([]byte, 10), fzScramble[8:], []byte{0}, []byte("mysql_native_password")))
	add("mysql51-no-plugin", false, fzCat(head("5.1.73", 0xf7ff), []byte{8, 2, 0, 0, 0, 0},
		make([]byte, 10), fzScramble[8:], []byte{0}))
	add("mysql40-short", false, head("4.0.27", 0x222c))
	add("scramble-with-nul", false, fzCat(head("8.0.36", 0xffff), []byte{255, 2, 0, 0xff, 0xdf, 21},
		make([]byte, 10), []byte("abc\x00efghijkl\x00"), []byte("caching_sha2_password\x00")))
	add("auth-len-255", true, fzCat(head("8.0.36", 0xffff), []byte{255, 2, 0, 0xff, 0xdf, 255},
		make([]byte, 10), bytes.Repeat([]byte{'s'}, 247), []byte("caching_sha2_password\x00")))
	add("auth-len-255-truncated", false, fzCat(head("8.0.36", 0xffff), []byte{255, 2, 0, 0xff, 0xdf, 255},
		make([]byte, 10), bytes.Repeat([]byte{'s'}, 40)))
	add("auth-len-0-secure", false, fzCat(head("8.0.36", 0xffff), []byte{255, 2, 0, 0xff, 0xdf, 0},
		make([]byte, 10), fzScramble[8:], []byte{0}, []byte("mysql_native_password\x00")))
	add("err-host-not-allowed", true, fzCat([]byte{0xff, 0x6a, 0x04},
		[]byte("Host '10.0.0.5' is not allowed to connect to this MySQL server")))
	add("err-too-many", false, fzCat([]byte{0xff, 0x10, 0x04}, []byte("#08004Too many connections")))
	add("err-short", false, []byte{0xff, 0x10})
	add("protocol-9", false, fzCat([]byte{9}, []byte("3.23.58\x00"), make([]byte, 20)))
	add("no-version-nul", false, []byte{10, '8', '.', '0'})
	add("empty", false, nil)
	for _, n := range []int{1, 7, 12, 20, 27, 30, 43, 44, 56, len(mysql8) - 1} {
		add(fmt.Sprintf("mysql8-cut-%02d", n), n == 44, mysql8[:n])
	}
	return seeds
}

func fzAuthSwitchSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, p []byte) {
		seeds = append(seeds, fzSeed{name: name, args: []any{p}, add: important})
	}
	add("native", true, AuthSwitchRequest(AuthNativePassword, append(append([]byte(nil), fzScramble...), 0)))
	add("sha2", false, AuthSwitchRequest(AuthCachingSHA2, append(append([]byte(nil), fzScramble...), 0)))
	add("clear-no-data", false, AuthSwitchRequest(AuthClearPassword, nil))
	add("old-password-eof", true, []byte{0xfe})
	add("no-nul", true, []byte("\xfemysql_native_password"))
	add("data-double-nul", false, []byte("\xfeed25519\x00abc\x00\x00"))
	add("more-data", false, []byte{0x01, 0x03})
	add("empty", false, nil)
	return seeds
}

func fzOKErrSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, p []byte) {
		seeds = append(seeds, fzSeed{name: name, args: []any{p}, add: important})
	}
	add("ok", true, AppendOK(nil, OK{AffectedRows: 1, LastInsertID: 42, Status: StatusAutocommit, Warnings: 1}))
	add("ok-fc", false, AppendOK(nil, OK{AffectedRows: 300, LastInsertID: 1 << 15}))
	add("ok-fd", false, AppendOK(nil, OK{AffectedRows: 1 << 20, LastInsertID: 1<<24 - 1}))
	add("ok-fe", true, AppendOK(nil, OK{AffectedRows: 1 << 40, LastInsertID: math.MaxUint64, Status: 0xffff, Warnings: 0xffff}))
	add("ok-session-track", false, fzCat(AppendOK(nil, OK{Status: StatusAutocommit | StatusSessionStateChg}),
		[]byte{0, 0x0f, 0x00, 0x0d, 0x0a, 't', 'i', 'm', 'e', '_', 'z', 'o', 'n', 'e', 1, '+'}))
	add("ok-eof-header", true, []byte{0xfe, 0, 0, 0x22, 0, 0, 0})
	add("ok-no-status", false, []byte{0, 0, 0})
	add("ok-half-status", false, []byte{0, 0, 0, 2})
	add("ok-lenenc-truncated", true, []byte{0, 0xfe, 1, 2})
	add("ok-ff-lenenc", false, []byte{0, 0xff})
	add("ok-header-only", false, []byte{0})
	add("eof", false, AppendEOF(nil, 0, StatusAutocommit|StatusMoreResultsExists))
	add("err", true, AppendErr(nil, ERAccessDenied.New("Access denied for user 'x'@'y'")))
	add("err-no-state", true, []byte("\xff\x15\x04Access denied"))
	add("err-hash-short", false, []byte("\xff\x15\x04#42S0"))
	add("err-progress", true, []byte{0xff, 0xff, 0xff, 1, 1, 2, 0x10, 0x27, 0, 5, 's', 't', 'a', 'g', 'e'})
	add("err-code-only", false, []byte{0xff, 0x15, 0x04})
	add("err-short", false, []byte{0xff, 0x15})
	add("empty", false, nil)
	return seeds
}

func fzLenEncSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, b []byte, v uint64) {
		seeds = append(seeds, fzSeed{name: name, args: []any{b, v}, add: important})
	}
	add("empty", true, nil, 0)
	add("zero", false, []byte{0}, 250)
	add("fa", false, []byte{0xfa, 'x'}, 251)
	add("fb-null", true, []byte{0xfb}, 1<<16-1)
	add("fc", true, []byte{0xfc, 0xfb, 0x00}, 1<<16)
	add("fc-noncanonical", false, []byte{0xfc, 0x05, 0x00, 1, 2, 3, 4, 5}, 1<<24-1)
	add("fc-short", false, []byte{0xfc, 0x01}, 1<<24)
	add("fd", true, []byte{0xfd, 0x00, 0x00, 0x01}, math.MaxUint64)
	add("fd-short", false, []byte{0xfd, 1, 2}, 1<<63)
	add("fe", true, []byte{0xfe, 0, 0, 0, 1, 0, 0, 0, 0}, 1<<32)
	add("fe-short", false, []byte{0xfe, 1, 2, 3, 4, 5, 6, 7}, 7)
	add("fe-max", true, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, math.MaxUint64)
	add("fe-int-overflow", true, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 'a'}, 0)
	add("ff", true, []byte{0xff, 0x01, 0x02}, 0xff)
	add("string", false, []byte{3, 'a', 'b', 'c', 'd'}, 3)
	add("string-short", false, []byte{3, 'a'}, 3)
	add("string-fc", false, fzCat([]byte{0xfc, 0x2c, 0x01}, bytes.Repeat([]byte{'x'}, 300)), 300)
	add("nul-string", false, []byte("abc\x00def"), 0)
	return seeds
}

func fzReadPacketSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, data []byte, lenient bool, chunk uint8) {
		seeds = append(seeds, fzSeed{name: name, args: []any{data, lenient, chunk}, add: important})
	}
	pkt := func(seq uint8, payload []byte) []byte {
		n := len(payload)
		return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
	}
	query := append([]byte{ComQuery}, "SELECT 1"...)
	add("one", true, pkt(0, query), false, 0)
	add("three-in-order", true, fzCat(pkt(0, query), pkt(1, []byte{ComPing}), pkt(2, nil)), false, 0)
	add("three-byte-at-a-time", false, fzCat(pkt(0, query), pkt(1, []byte{ComPing}), pkt(2, nil)), false, 1)
	add("out-of-order", true, fzCat(pkt(0, query), pkt(5, query)), false, 0)
	add("out-of-order-lenient", false, fzCat(pkt(0, query), pkt(5, query)), true, 3)
	add("empty-packet", false, pkt(0, nil), false, 0)
	add("no-input", false, nil, false, 0)
	add("partial-header", true, []byte{5, 0}, false, 0)
	add("truncated-payload", true, []byte{10, 0, 0, 0, 'a', 'b'}, false, 0)
	add("over-limit", true, []byte{0x01, 0x00, 0x10, 0, 'x'}, false, 0)
	add("max-payload-header", false, []byte{0xff, 0xff, 0xff, 0, 'x'}, false, 0)
	var wrap []byte
	for i := range 258 {
		wrap = append(wrap, pkt(uint8(i), []byte{byte(i)})...)
	}
	add("seq-wraps", false, wrap, false, 0)
	big := pkt(0, bytes.Repeat([]byte{'r'}, 20000))
	add("20k", false, big, false, 0)
	add("20k-cut", false, big[:17000], false, 0)
	add("20k-then-small", false, fzCat(big, pkt(1, query)), false, 7)
	return seeds
}

// fzStream frames packets with sequence ids from 1 on, as a backend
// answers a command.
func fzStream(packets ...[]byte) []byte {
	var b []byte
	for i, p := range packets {
		n := len(p)
		b = append(b, byte(n), byte(n>>8), byte(n>>16), byte(i+1))
		b = append(b, p...)
	}
	return b
}

func fzColDef(name string) []byte {
	b := fzLenEnc([]byte("def"))
	for _, s := range []string{"shop", "t", "t", name, name} {
		b = AppendLenEncString(b, []byte(s))
	}
	return append(b, 0x0c, 45, 0, 10, 0, 0, 0, TypeVarString, 0, 0, 0, 0, 0)
}

func fzRow(vals ...string) []byte {
	var b []byte
	for _, v := range vals {
		b = AppendLenEncString(b, []byte(v))
	}
	return b
}

func fzRelaySeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, data []byte, deprecateEOF bool, chunk uint8) {
		seeds = append(seeds, fzSeed{name: name, args: []any{data, deprecateEOF, chunk}, add: important})
	}
	eof := func(status uint16) []byte { return AppendEOF(nil, 0, status) }
	okEOF := func(status uint16) []byte { // the 0xfe OK of CLIENT_DEPRECATE_EOF
		b := AppendOK(nil, OK{Status: status})
		b[0] = headerEOF
		return b
	}
	ok := AppendOK(nil, OK{AffectedRows: 2, Status: StatusAutocommit})
	errPkt := AppendErr(nil, NewError(1146, "Table 'shop.x' doesn't exist"))
	add("ok", true, fzStream(ok), false, 0)
	add("err", true, fzStream(errPkt), false, 0)
	add("err-short", false, fzStream([]byte{0xff, 1}), false, 0)
	add("resultset", true, fzStream([]byte{2}, fzColDef("a"), fzColDef("b"), eof(StatusAutocommit),
		fzRow("1", "x"), fzRow("2", "y"), eof(StatusAutocommit)), false, 0)
	add("resultset-deprecate-eof", true, fzStream([]byte{1}, fzColDef("a"),
		fzRow("1"), fzRow("2"), okEOF(StatusAutocommit)), true, 0)
	add("resultset-byte-at-a-time", false, fzStream([]byte{1}, fzColDef("a"), eof(0),
		fzRow("1"), eof(StatusAutocommit)), false, 1)
	add("multi-results", true, fzStream(
		[]byte{1}, fzColDef("a"), eof(0), fzRow("1"), eof(StatusMoreResultsExists),
		AppendOK(nil, OK{AffectedRows: 1, Status: StatusMoreResultsExists}),
		[]byte{1}, fzColDef("b"), eof(0), fzRow("2"), eof(StatusAutocommit)), false, 0)
	add("execute-cursor", true, fzStream([]byte{1}, fzColDef("a"), eof(StatusCursorExists)), false, 0)
	add("execute-binary-rows", false, fzStream([]byte{1}, fzColDef("a"), eof(0),
		[]byte{0, 0, 3, 'a', 'b', 'c'}, eof(StatusAutocommit)), false, 0)
	add("field-list", true, fzStream(fzColDef("a"), fzColDef("b"), eof(0)), false, 0)
	add("fetch-rows", true, fzStream([]byte{0, 0, 1, 'x'}, []byte{0, 0, 1, 'y'}, eof(StatusLastRowSent)), false, 0)
	add("fetch-rows-err", false, fzStream([]byte{0, 0, 1, 'x'}, errPkt), false, 0)
	add("rows-err", false, fzStream([]byte{1}, fzColDef("a"), eof(0), fzRow("1"), errPkt), false, 0)
	add("local-infile", true, fzStream(append([]byte{0xfb}, "/tmp/x.csv"...)), false, 0)
	add("column-count-zero", false, fzStream([]byte{0}, eof(0)), false, 0)
	add("column-count-ff", false, fzStream([]byte{0xff}), true, 0)
	add("column-count-huge", true, fzStream([]byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		fzColDef("a"), fzColDef("b")), true, 0)
	add("missing-columns-eof", false, fzStream([]byte{1}, fzColDef("a"), fzRow("1")), false, 0)
	add("empty-packet", true, fzStream(nil), false, 0)
	add("empty-then-ok", false, fzStream(nil, ok), false, 0)
	add("statistics", false, fzStream([]byte("Uptime: 10  Threads: 1  Questions: 5")), false, 0)
	add("torn", true, []byte{100, 0, 0, 1, 'a', 'b', 'c'}, false, 0)
	add("partial-header", false, []byte{5, 0}, false, 0)
	add("no-input", false, nil, false, 0)
	add("trailing-after-ok", false, append(fzStream(ok), 1, 0, 0, 2, 0), false, 0)
	big := fzRow(strings.Repeat("z", 20000))
	add("row-20k", false, fzStream([]byte{1}, fzColDef("a"), eof(0), big, eof(0)), false, 5)
	add("err-20k", false, fzStream(append(append([]byte(nil), errPkt...), bytes.Repeat([]byte{'e'}, 20000)...)), false, 0)
	add("row-20k-torn", false, fzStream([]byte{1}, fzColDef("a"), eof(0), big)[:18000], false, 0)
	return seeds
}

func fzLocalInfileSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, data, clientData []byte, deprecateEOF bool, chunk uint8) {
		seeds = append(seeds, fzSeed{name: name, args: []any{data, clientData, deprecateEOF, chunk}, add: important})
	}
	// clientFile frames a file as the client sends it after a request
	// that carried sequence id seq-1.
	clientFile := func(seq uint8, chunks ...string) []byte {
		var b []byte
		for _, c := range append(chunks, "") {
			n := len(c)
			b = append(b, byte(n), byte(n>>8), byte(n>>16), seq)
			b = append(b, c...)
			seq++
		}
		return b
	}
	request := append([]byte{headerLocalInfile}, "/tmp/t.csv"...)
	ok := AppendOK(nil, OK{AffectedRows: 2, Status: StatusAutocommit})
	// The server's OK follows the file with the next sequence id.
	withOK := func(afterSeq uint8, p []byte) []byte {
		n := len(p)
		return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), afterSeq}, p...)
	}
	add("file-ok", true, fzCat(fzStream(request), withOK(5, ok)), clientFile(2, "1,a\n", "2,b\n"), false, 0)
	add("empty-file", true, fzCat(fzStream(request), withOK(3, ok)), clientFile(2), false, 0)
	add("file-err", false, fzCat(fzStream(request), withOK(4, AppendErr(nil, NewError(1062, "Duplicate entry")))),
		clientFile(2, "1,a\n"), false, 0)
	add("client-wrong-seq", true, fzCat(fzStream(request), withOK(4, ok)), clientFile(7, "x"), false, 0)
	add("client-silent", false, fzCat(fzStream(request), withOK(4, ok)), nil, false, 0)
	add("client-torn", false, fzCat(fzStream(request), withOK(4, ok)), []byte{50, 0, 0, 2, 'x'}, false, 0)
	two := fzCat(fzStream(request), withOK(4, AppendOK(nil, OK{Status: StatusMoreResultsExists})),
		withOK(5, request), withOK(8, ok))
	add("two-requests", true, two, fzCat(clientFile(2, "a"), clientFile(6, "b")), false, 3)
	add("no-request", false, fzStream(ok), clientFile(2, "unused"), false, 0)
	add("resultset", false, fzStream([]byte{1}, fzColDef("a"), AppendEOF(nil, 0, 0), fzRow("1"), AppendEOF(nil, 0, 0)),
		nil, false, 0)
	return seeds
}

func fzChangeUserSeeds() []fzSeed {
	var seeds []fzSeed
	add := func(name string, important bool, p []byte, caps uint32) {
		seeds = append(seeds, fzSeed{name: name, args: []any{p, caps}, add: important})
	}
	modern := ClientProtocol41 | ClientSecureConnection | ClientPluginAuth | ClientConnectAttrs
	cu := &ChangeUser{User: "app", AuthResponse: fzNativeResp, Database: "shop", Collation: 45,
		AuthPlugin: AuthNativePassword, Attributes: fzAttrs("_client_name", "libmysql")}
	add("encode-modern", true, cu.Encode(modern), modern)
	add("encode-secure", false, cu.Encode(ClientProtocol41|ClientSecureConnection), ClientProtocol41|ClientSecureConnection)
	old := &ChangeUser{User: "app", AuthResponse: []byte("KLMNOPQR"), Database: "shop"}
	add("encode-old", false, old.Encode(ClientProtocol41), ClientProtocol41)
	add("no-collation", true, fzCat([]byte{ComChangeUser}, []byte("app\x00"), []byte{0x14}, fzNativeResp, []byte("shop\x00")), modern)
	add("one-byte-after-db", false, fzCat([]byte{ComChangeUser}, []byte("app\x00"), []byte{0}, []byte("\x00"), []byte{45}), modern)
	add("plugin-no-nul", false, fzCat([]byte{ComChangeUser}, []byte("app\x00"), []byte{0}, []byte("\x00"), []byte{45, 0},
		[]byte("mysql_native_password")), modern)
	add("auth-len-lies", true, fzCat([]byte{ComChangeUser}, []byte("app\x00"), []byte{0xff, 'a'}), modern)
	add("attrs-fe-huge", true, fzCat([]byte{ComChangeUser}, []byte("app\x00"), []byte{0}, []byte("\x00"), []byte{45, 0},
		[]byte("mysql_native_password\x00"), []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}), modern)
	add("attrs-fb", false, fzCat([]byte{ComChangeUser}, []byte("app\x00"), []byte{0}, []byte("\x00"), []byte{45, 0},
		[]byte("mysql_native_password\x00"), []byte{0xfb}), modern)
	add("user-no-nul", false, []byte("\x11app"), modern)
	add("not-change-user", false, []byte{ComQuery, 'x'}, modern)
	add("empty", false, nil, 0)
	return seeds
}
