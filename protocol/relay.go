package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ResponseKind says how the response to a command is framed, which is all the
// relay needs to know to find its end.
type ResponseKind uint8

const (
	// ResponseResult is the answer to COM_QUERY: OK, ERR, or one or more
	// result sets, chained by SERVER_MORE_RESULTS_EXISTS.
	ResponseResult ResponseKind = iota
	// ResponseFieldList is the answer to COM_FIELD_LIST: column
	// definitions ended by EOF, or ERR.
	ResponseFieldList
	// ResponseSingle is a one-packet answer: COM_INIT_DB, COM_PING,
	// COM_SET_OPTION, COM_STATISTICS, COM_RESET_CONNECTION.
	ResponseSingle
	// ResponseExecute is the answer to COM_STMT_EXECUTE: like
	// ResponseResult with binary rows, except that a result set for which
	// the server opened a cursor ends after its column definitions.
	ResponseExecute
	// ResponseRows is the answer to COM_STMT_FETCH: rows ended by EOF, or
	// ERR.
	ResponseRows
	// ResponseResultLocalInfile is ResponseResult for a client allowed to
	// answer LOAD DATA LOCAL INFILE: when the server asks for the file, the
	// client's packets are streamed to the server up to the empty packet
	// that ends the file, and the server's verdict is relayed back.
	ResponseResultLocalInfile
)

// Sentinels that say which leg failed during a relay.
var (
	// ErrBackendIO: reading from the backend failed or it broke protocol;
	// the backend connection must be discarded.
	ErrBackendIO = errors.New("backend connection failed")
	// ErrClientIO: writing to the client failed; the session is over.
	ErrClientIO = errors.New("client connection failed")
	// ErrIntercepted: the response began with an ERR whose code is the
	// backend connection's InterceptErr; nothing reached the client,
	// RelayResult.Err holds the error and the backend connection is ready
	// for the next command.
	ErrIntercepted = errors.New("backend error intercepted")
)

// RelayResult describes the response that was relayed.
type RelayResult struct {
	// Status is the server status of the final OK or EOF packet.
	Status uint16
	// HasStatus reports that Status holds the flags of an OK or EOF packet
	// of this response: the final one, or the last before a closing ERR
	// (for "BEGIN; bad" the open transaction is still known). It is false
	// for a lone ERR and for bare answers such as COM_STATISTICS's.
	HasStatus bool
	// OK holds the final OK packet, when the response ended with one.
	OK OK
	// Err is the ERR packet the response ended with, if any.
	Err *SQLError
	// Warnings is the warning count of the last OK or EOF packet.
	Warnings uint16
	// Columns reports that the response held a result set; Rows counts
	// the rows of its last result set (what FOUND_ROWS() reports next).
	Columns bool
	Rows    int64
	// LocalInfileFiles counts the files the client streamed to the server
	// for LOAD DATA LOCAL INFILE requests in this response.
	LocalInfileFiles int
	// Packets counts the physical packets written (or begun) to the
	// client: when it is 0 nothing reached the client and the command may
	// be retried elsewhere.
	Packets int
	// Torn reports that the backend failed in the middle of a packet whose
	// header was already written: the client's stream cannot be repaired
	// with an ERR and the client connection must be closed.
	Torn bool
	// Bytes counts the payload bytes written to the client.
	Bytes int64
}

// headSize is how much of each packet the relay looks at: enough for OK and
// EOF packets; ERR packets are read whole when short.
const headSize = 32

// Relay streams the response to one command from backend to client packet by
// packet, rewriting only sequence ids, and flushes the client once at the
// end (the write buffer flushes earlier by itself when a result is large).
// Rows are never decoded. The error, if any, wraps ErrBackendIO or
// ErrClientIO; RelayResult.Packets tells whether anything reached the client.
//
// The states of a result set stay in this one loop: a point select's
// response (five packets) passes through most of them, and a call per
// state costs it measurably. The rarer answers (one-packet, COM_FIELD_LIST,
// COM_STMT_FETCH, LOCAL INFILE) have functions of their own.
func Relay(client, backend *Conn, kind ResponseKind, deprecateEOF bool) (RelayResult, error) {
	var res RelayResult
	var head [headSize]byte
	const (
		stFirst = iota
		stColumns
		stColumnsEOF
		stRows
	)
	state := stFirst
	var columns uint64
	for {
		if state == stRows {
			if err := relayBufferedRows(client, backend, &res); err != nil {
				return res, err
			}
		}
		// A tracked OK is decoded (its GTID kept) and, for a client that
		// did not ask for session tracking, rewritten without it.
		okHere := backend.SessionTrack && (kind == ResponseSingle ||
			(state == stFirst && kind != ResponseFieldList && kind != ResponseRows))
		n, h, err := relayPacket(client, backend, head[:], &res, okHere)
		if err != nil {
			return res, err
		}
		first := byte(0)
		if len(h) > 0 {
			first = h[0]
		}
		switch kind {
		case ResponseSingle:
			res.single(first, n, h)
			return res, flushClient(client)
		case ResponseFieldList, ResponseRows:
			if res.listEnd(first, n, h) {
				return res, flushClient(client)
			}
			state = stColumns
			continue
		}
		switch state {
		case stFirst:
			switch first {
			case headerOK:
				res.takeOK(h)
				if res.Status&StatusMoreResultsExists != 0 {
					continue
				}
				return res, flushClient(client)
			case headerErr:
				return res, flushClient(client)
			case headerLocalInfile:
				if err := res.localInfile(client, backend, kind); err != nil {
					return res, err
				}
				continue
			}
			v, _, _, err := ReadLenEncInt(h)
			if err != nil || v == 0 {
				return res, fmt.Errorf("%w: bad column count: %v", ErrBackendIO, err)
			}
			columns = v
			res.Columns, res.Rows = true, 0
			state = stColumns
		case stColumns:
			columns--
			if columns == 0 {
				if deprecateEOF {
					state = stRows
				} else {
					state = stColumnsEOF
				}
			}
		case stColumnsEOF:
			if !(first == headerEOF && n < 9) {
				return res, fmt.Errorf("%w: expected EOF after column definitions", ErrBackendIO)
			}
			if st := eofStatus(h); kind == ResponseExecute && st&StatusCursorExists != 0 {
				res.Status, res.HasStatus = st, true
				return res, flushClient(client)
			}
			state = stRows
		case stRows:
			switch {
			case first == headerEOF && !deprecateEOF && n < 9:
				res.takeEOF(h)
			case first == headerEOF && deprecateEOF && n < MaxPayloadLen:
				res.takeOK(h)
			case first == headerErr:
				return res, flushClient(client)
			default:
				res.Rows++
				continue
			}
			if res.Status&StatusMoreResultsExists != 0 {
				state = stFirst
				continue
			}
			return res, flushClient(client)
		}
	}
}

// takeOK records the OK packet h as the response's status.
func (res *RelayResult) takeOK(h []byte) {
	res.OK, _ = ParseOK(h)
	res.Status, res.HasStatus, res.Warnings = res.OK.Status, true, res.OK.Warnings
}

// takeEOF records the EOF packet h as the response's status.
func (res *RelayResult) takeEOF(h []byte) {
	res.Status, res.HasStatus, res.Warnings = eofStatus(h), true, eofWarnings(h)
}

// single takes note of a one-packet answer's status, when it has one; the
// packet starts with first and is n bytes long.
func (res *RelayResult) single(first byte, n int, h []byte) {
	if first == headerOK {
		res.takeOK(h)
	} else if first == headerEOF && n < 9 {
		res.takeEOF(h)
	}
}

// listEnd reports whether the packet ends a list of column definitions
// (COM_FIELD_LIST) or of rows (COM_STMT_FETCH): an EOF or an ERR.
func (res *RelayResult) listEnd(first byte, n int, h []byte) bool {
	if first == headerEOF && n < 9 {
		res.takeEOF(h)
		return true
	}
	// Column definitions start with 0x03 and binary rows with 0x00: an
	// ERR is never one of them.
	return first == headerErr
}

// localInfile answers the server's LOAD DATA LOCAL INFILE request, which
// the client has just been sent, with the client's file.
func (res *RelayResult) localInfile(client, backend *Conn, kind ResponseKind) error {
	if kind != ResponseResultLocalInfile {
		// The request already went to the client, which cannot be told
		// it was never meant for it.
		res.Torn = true
		return fmt.Errorf("%w: unexpected LOCAL INFILE request", ErrBackendIO)
	}
	if err := relayLocalInfile(client, backend); err != nil {
		res.Torn = true
		return err
	}
	res.LocalInfileFiles++
	return nil
}

// relayBufferedRows forwards, as one write into the client's buffer, the run
// of whole row packets already in the backend's read buffer. It stops before
// anything the packet-by-packet relay must look at: a packet that is not all
// there yet, one of 16 MiB or more, an empty one, one whose first byte may
// end the result (0xFE) or is an ERR (0xFF), and one whose sequence id is
// not the next the backend should send or the next the client expects (so
// it needs rewriting, or is an error to report). A wide result costs a scan
// of its headers instead of a copy per packet.
func relayBufferedRows(client, backend *Conn, res *RelayResult) error {
	br := backend.br
	if br == nil {
		return nil
	}
	buf, _ := br.Peek(br.Buffered())
	off, packets, payload := 0, 0, 0
	seq, cseq := backend.seq, client.seq
	for len(buf)-off >= 4 {
		n := int(buf[off]) | int(buf[off+1])<<8 | int(buf[off+2])<<16
		if n == 0 || n >= MaxPayloadLen || len(buf)-off-4 < n ||
			buf[off+3] != seq || seq != cseq || buf[off+4] >= headerEOF {
			break
		}
		off += 4 + n
		seq++
		cseq++
		packets++
		payload += n
	}
	if packets == 0 {
		return nil
	}
	if _, err := client.writer().Write(buf[:off]); err != nil {
		return fmt.Errorf("%w: %w", ErrClientIO, err)
	}
	client.tee(buf[:off])
	_, _ = br.Discard(off)
	backend.seq, client.seq = seq, cseq
	res.Packets += packets
	res.Rows += int64(packets)
	res.Bytes += int64(payload)
	return nil
}

func flushClient(client *Conn) error {
	if err := client.Flush(); err != nil {
		return fmt.Errorf("%w: %w", ErrClientIO, err)
	}
	return nil
}

// relayPacket copies one logical packet (and its 16 MiB continuations) from
// src to dst. It returns the logical length and the packet's first bytes
// (in head); an ERR packet is decoded into res.Err on the way.
func relayPacket(dst, src *Conn, head []byte, res *RelayResult, okHere bool) (int, []byte, error) {
	total := 0
	var h []byte
	for physical := 0; ; physical++ {
		n, err := src.readHeader()
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %w", ErrBackendIO, err)
		}
		br, bw := src.reader(), dst.writer()
		total += n
		if okHere && physical == 0 && n > 0 && n <= br.Size() && n < MaxPayloadLen {
			if m, h, done, err := relayTrackedOK(dst, src, n, head, res); done {
				return m, h, err
			}
		}
		if physical == 0 && n > 0 {
			p, err := br.Peek(min(n, len(head), br.Size()))
			if err != nil {
				return 0, nil, fmt.Errorf("%w: %w", ErrBackendIO, err)
			}
			h = head[:copy(head, p)]
			if p[0] == headerErr && n < MaxPayloadLen {
				if len(p) >= 3 {
					code := binary.LittleEndian.Uint16(p[1:3])
					if src.InterceptErr != 0 && code == src.InterceptErr && res.Packets == 0 && n <= br.Size() {
						return interceptErr(src, n, head, res)
					}
					dst.SentErr = code
					if dst.ReplaceErr != nil && n <= br.Size() {
						if e := dst.ReplaceErr(dst.SentErr); e != nil {
							return relayReplacedErr(dst, src, n, head, res, e)
						}
					}
				}
				if full, err := br.Peek(min(n, br.Size())); err == nil {
					res.Err, _ = ParseErr(full)
				}
			}
		}
		if physical == 0 && n > 0 && n <= br.Size() {
			// A packet that fits the read buffer is read whole before
			// its header goes to the client: a backend that dies or is
			// cut off in the middle of it leaves the client's stream
			// between packets, where an ERR can still follow.
			if _, err := br.Peek(n); err != nil {
				return 0, nil, fmt.Errorf("%w: %w", ErrBackendIO, err)
			}
		}
		dst.hdr = [4]byte{byte(n), byte(n >> 8), byte(n >> 16), dst.seq}
		dst.seq++
		if _, err := bw.Write(dst.hdr[:]); err != nil {
			return 0, nil, fmt.Errorf("%w: %w", ErrClientIO, err)
		}
		dst.tee(dst.hdr[:])
		// From here on the client has (part of) a packet: a failure
		// leaves its stream cut mid-packet (only a packet bigger than
		// the read buffer, or a continuation of one, can be torn).
		res.Packets++
		for rest := n; rest > 0; {
			k := min(rest, br.Size())
			p, err := br.Peek(k)
			if err != nil {
				res.Torn = true
				return 0, nil, fmt.Errorf("%w: %w", ErrBackendIO, err)
			}
			if _, err := bw.Write(p); err != nil {
				return 0, nil, fmt.Errorf("%w: %w", ErrClientIO, err)
			}
			dst.tee(p)
			_, _ = br.Discard(k)
			rest -= k
		}
		res.Bytes += int64(n)
		if n < MaxPayloadLen {
			return total, h, nil
		}
	}
}

// interceptErr consumes the backend's ERR packet of n bytes, which is the
// first packet of the response, into res.Err without writing to the client.
func interceptErr(src *Conn, n int, head []byte, res *RelayResult) (int, []byte, error) {
	full, err := src.reader().Peek(n)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrBackendIO, err)
	}
	res.Err, _ = ParseErr(full)
	h := head[:copy(head, full)]
	_, _ = src.reader().Discard(n)
	return n, h, ErrIntercepted
}

// relayReplacedErr consumes the backend's ERR packet of n bytes and writes
// e to dst in its place, with the sequence id the relayed packet would
// have had.
func relayReplacedErr(dst, src *Conn, n int, head []byte, res *RelayResult, e *SQLError) (int, []byte, error) {
	if _, err := src.reader().Discard(n); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrBackendIO, err)
	}
	dst.okBuf = AppendErr(dst.okBuf[:0], e)
	out := dst.okBuf
	m := len(out)
	dst.hdr = [4]byte{byte(m), byte(m >> 8), byte(m >> 16), dst.seq}
	dst.seq++
	bw := dst.writer()
	if _, err := bw.Write(dst.hdr[:]); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrClientIO, err)
	}
	res.Packets++
	if _, err := bw.Write(out); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrClientIO, err)
	}
	dst.tee(dst.hdr[:])
	dst.tee(out)
	dst.SentErr, res.Err = e.Code, e
	res.Bytes += int64(m)
	return m, head[:copy(head, out)], nil
}

// relayTrackedOK relays an OK packet of n bytes from a backend connection
// with session tracking: it keeps the reported GTID in src.LastGTID and, for
// a client without CLIENT_SESSION_TRACK, writes the packet without the
// session state. done is false when the packet is not an OK (or not a
// well-formed one): the caller relays it unchanged.
func relayTrackedOK(dst, src *Conn, n int, head []byte, res *RelayResult) (int, []byte, bool, error) {
	br := src.reader()
	full, err := br.Peek(n)
	if err != nil {
		return 0, nil, true, fmt.Errorf("%w: %w", ErrBackendIO, err)
	}
	if full[0] != headerOK {
		return 0, nil, false, nil
	}
	t, err := ParseOKTail(full)
	if err != nil {
		return 0, nil, false, nil
	}
	if g, ok := TrackedGTID(t.State); ok {
		src.LastGTID = append(src.LastGTID[:0], g...)
	}
	out := full
	if !dst.SessionTrack {
		dst.okBuf = AppendOKWithoutState(dst.okBuf[:0], t)
		out = dst.okBuf
	}
	m := len(out)
	dst.hdr = [4]byte{byte(m), byte(m >> 8), byte(m >> 16), dst.seq}
	dst.seq++
	bw := dst.writer()
	if _, err := bw.Write(dst.hdr[:]); err != nil {
		return 0, nil, true, fmt.Errorf("%w: %w", ErrClientIO, err)
	}
	res.Packets++
	if _, err := bw.Write(out); err != nil {
		return 0, nil, true, fmt.Errorf("%w: %w", ErrClientIO, err)
	}
	dst.tee(dst.hdr[:])
	dst.tee(out)
	h := head[:copy(head, out)]
	_, _ = br.Discard(n)
	res.Bytes += int64(m)
	return m, h, true, nil
}

// ReadResponse reads and discards one command's complete response on c,
// for commands sluice issues on its own behalf (replaying session state). It
// returns the server's ERR as *SQLError.
func ReadResponse(c *Conn, kind ResponseKind) (uint16, error) {
	p, err := c.ReadPacket()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBackendIO, err)
	}
	switch {
	case IsOK(p):
		ok, err := ParseOK(p)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrBackendIO, err)
		}
		c.noteTrackedGTID(p)
		if ok.Status&StatusMoreResultsExists != 0 {
			return ok.Status, fmt.Errorf("%w: unexpected further results", ErrBackendIO)
		}
		return ok.Status, nil
	case IsErr(p):
		return 0, backendErr(p)
	case IsEOF(p):
		return eofStatus(p), nil
	}
	if kind == ResponseSingle {
		return 0, nil
	}
	// A result set: skip to its end.
	for {
		p, err := c.ReadPacket()
		if err != nil {
			return 0, fmt.Errorf("%w: %w", ErrBackendIO, err)
		}
		if IsErr(p) {
			return 0, backendErr(p)
		}
		if IsEOF(p) {
			// The first EOF ends the columns; rows follow until the second.
			for {
				p, err := c.ReadPacket()
				if err != nil {
					return 0, fmt.Errorf("%w: %w", ErrBackendIO, err)
				}
				if IsErr(p) {
					return 0, backendErr(p)
				}
				if IsEOF(p) {
					return eofStatus(p), nil
				}
			}
		}
	}
}

// noteTrackedGTID keeps the GTID an OK packet p of a connection with
// session tracking reports in LastGTID (a COMMIT the proxy sent itself).
func (c *Conn) noteTrackedGTID(p []byte) {
	if !c.SessionTrack {
		return
	}
	if t, err := ParseOKTail(p); err == nil {
		if g, ok := TrackedGTID(t.State); ok {
			c.LastGTID = append(c.LastGTID[:0], g...)
		}
	}
}

// NoteTrackedGTID is noteTrackedGTID for an OK packet read by the caller.
func (c *Conn) NoteTrackedGTID(p []byte) { c.noteTrackedGTID(p) }

// RelayPackets streams exactly n packets from backend to client and flushes
// (the metadata after a COM_STMT_PREPARE answer).
func RelayPackets(client, backend *Conn, n int) error {
	var head [headSize]byte
	var res RelayResult
	for range n {
		if _, _, err := relayPacket(client, backend, head[:], &res, false); err != nil {
			return err
		}
	}
	return flushClient(client)
}

// DiscardPackets reads and drops n packets from c.
func DiscardPackets(c *Conn, n int) error {
	for range n {
		if _, err := c.ReadPacket(); err != nil {
			return fmt.Errorf("%w: %w", ErrBackendIO, err)
		}
	}
	return nil
}

// backendErr decodes a backend's ERR packet; one too short to decode is a
// protocol failure of the backend, never a nil *SQLError.
func backendErr(p []byte) error {
	e, err := ParseErr(p)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBackendIO, err)
	}
	return e
}

// relayLocalInfile streams the file a client sends for LOAD DATA LOCAL
// INFILE to the backend, packet by packet, up to and including the empty
// packet that ends it. sluice never opens a file itself.
func relayLocalInfile(client, backend *Conn) error {
	if err := flushClient(client); err != nil {
		return err
	}
	var head [headSize]byte
	var res RelayResult
	for {
		n, _, err := relayPacket(backend, client, head[:], &res, false)
		if err != nil {
			// relayPacket names the legs from the backend's side; here
			// they are swapped.
			switch {
			case errors.Is(err, ErrBackendIO):
				return fmt.Errorf("%w: reading the LOCAL INFILE data: %v", ErrClientIO, err)
			default:
				return fmt.Errorf("%w: sending the LOCAL INFILE data: %v", ErrBackendIO, err)
			}
		}
		if n == 0 {
			if err := backend.Flush(); err != nil {
				return fmt.Errorf("%w: %w", ErrBackendIO, err)
			}
			return nil
		}
	}
}
