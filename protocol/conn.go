package protocol

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Buffer sizes of a Conn. Reads peek whole small packets from the read
// buffer, so it is big enough for typical rows.
const (
	readBufferSize  = 16 << 10
	writeBufferSize = 16 << 10
	// retainLimit is the largest read buffer a Conn keeps between packets;
	// a bigger one (a 20 MB BLOB) is released after use.
	retainLimit = 1 << 20
)

// Conn is one end of a MySQL protocol connection with buffered reads and
// writes and sequence-id bookkeeping. It is owned by one goroutine at a time;
// Close may be called from another goroutine to abort it.
type Conn struct {
	nc  net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer
	seq uint8
	hdr [4]byte
	buf []byte
	// idle is the socket peek of CheckIdle, made on its first call.
	idle *idlePeek

	// MaxPacket bounds the logical payload ReadPacket accepts; 0 means
	// 1 GiB, the protocol's own limit.
	MaxPacket int
	// LenientSeq makes ReadPacket accept any sequence id (used on the
	// backend leg, where the server is trusted).
	LenientSeq bool
	// lean: buffers are pooled and released by Idle (NewLeanConn).
	lean bool

	// SessionTrack reports that the peer and this end negotiated
	// CLIENT_SESSION_TRACK: OK packets carry their info and session state
	// as length-encoded strings.
	SessionTrack bool
	// LastGTID is the GTID that the last tracked OK packet read from this
	// connection reported (see TrackedGTID); Relay keeps it up to date on a
	// backend connection with SessionTrack. The buffer is reused.
	LastGTID []byte
	// okBuf holds an OK packet rewritten for this (client) connection.
	okBuf []byte
	// SentErr is the error code of the last ERR packet WriteErr wrote or
	// Relay relayed to this connection; its owner sets it back to 0 (the
	// proxy does so per client command, to count errors by code).
	SentErr uint16
	// ReplaceErr, when set on a client connection, is asked about every
	// ERR packet Relay is about to pass to it, with the packet's code; a
	// non-nil answer is sent in its place (the proxy turns the 1317 of a
	// statement it killed for its query_timeout into 3024). It runs on the
	// goroutine that relays and is called for ERR packets only.
	ReplaceErr func(code uint16) *SQLError
	// InterceptErr, when set on a backend connection, is an error code
	// Relay does not pass on when it is the first packet of a response:
	// it consumes the ERR and returns ErrIntercepted with nothing written
	// to the client, so the command can run elsewhere (the proxy sets 1792
	// on read-only replica connections and re-runs the refused statement
	// on the master).
	InterceptErr uint16
	// teeTo, when set, gets a copy of what Relay writes (SetTee).
	teeTo *Tee

	// A lean connection waits for a command by reading into first;
	// src hands those bytes to the read buffer, then reads nc.
	first            [leanFirstRead]byte
	firstN, firstOff int
	src              leanSource
}

// NewConn wraps nc.
func NewConn(nc net.Conn) *Conn {
	return &Conn{
		nc: nc,
		br: bufio.NewReaderSize(nc, readBufferSize),
		bw: bufio.NewWriterSize(nc, writeBufferSize),
	}
}

// NewLeanConn wraps nc for a peer that idles most of the time (a client).
// Its read and write buffers come from shared pools while a command is read
// and answered, and Idle gives them back. Waiting for the next command it
// reads into a small array of its own, so an idle lean connection holds no
// buffer; a command that fits the array (leanFirstRead bytes with its
// header) costs one read, a bigger one a second.
func NewLeanConn(nc net.Conn) *Conn {
	c := &Conn{nc: nc, lean: true}
	c.src.c = c
	return c
}

// leanReadBufferSize is a lean connection's read buffer (while it has one).
const leanReadBufferSize = 1024

// leanFirstRead is how much a lean connection reads while it waits for a
// command: typical OLTP statements fit.
const leanFirstRead = 256

var (
	writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufferSize) }}
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, leanReadBufferSize) }}
)

// leanSource feeds a lean connection's read buffer: first the bytes the
// wait for a command read, then the network connection.
type leanSource struct{ c *Conn }

func (s leanSource) Read(p []byte) (int, error) {
	c := s.c
	if c.firstOff < c.firstN {
		n := copy(p, c.first[c.firstOff:c.firstN])
		c.firstOff += n
		return n, nil
	}
	return c.nc.Read(p)
}

// reader returns the read buffer; for a lean connection that has none,
// await must run first.
func (c *Conn) reader() *bufio.Reader { return c.br }

// await makes sure a lean connection has a read buffer, waiting for the
// peer's next bytes without one.
func (c *Conn) await() error {
	if c.br != nil {
		return nil
	}
	n, err := c.nc.Read(c.first[:])
	if n == 0 {
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	c.firstN, c.firstOff = n, 0
	c.br = readerPool.Get().(*bufio.Reader)
	c.br.Reset(c.src)
	return nil
}

// writer returns the write buffer, taking one from the pool if needed.
func (c *Conn) writer() *bufio.Writer {
	if c.bw == nil {
		c.bw = writerPool.Get().(*bufio.Writer)
		c.bw.Reset(c.nc)
	}
	return c.bw
}

// Idle gives a lean connection's empty write and read buffers back to
// their pools and drops a large packet buffer; the next write or read
// takes a buffer again. It does nothing for other connections, or for a
// buffer that holds data.
func (c *Conn) Idle() {
	if !c.lean {
		return
	}
	c.ReleaseWriter()
	if c.br != nil && c.br.Buffered() == 0 && c.firstOff == c.firstN {
		c.br.Reset(nil)
		readerPool.Put(c.br)
		c.br = nil
	}
	if cap(c.buf) > 4096 {
		c.buf = nil
	}
}

// ReleaseWriter gives a lean connection's empty write buffer back to its
// pool, as Idle does, and keeps the read buffer: a packet just read (which
// may live in it) stays valid. A login calls it before it waits on its
// client or for its turn at the auth server, so a storm of logins does not
// hold a 16 KiB buffer each while it waits.
func (c *Conn) ReleaseWriter() {
	if c.lean && c.bw != nil && c.bw.Buffered() == 0 {
		c.bw.Reset(nil)
		writerPool.Put(c.bw)
		c.bw = nil
	}
}

// AwaitingCommand reports whether a lean connection holds no byte of the
// peer's next packet: a read that failed while it is true consumed nothing,
// and may be retried (after a read deadline that came too early).
func (c *Conn) AwaitingCommand() bool { return c.lean && c.br == nil && c.firstOff == c.firstN }

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// Close closes the underlying connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Seq returns the sequence id the next packet will carry.
func (c *Conn) Seq() uint8 { return c.seq }

// SetSeq sets the sequence id of the next packet.
func (c *Conn) SetSeq(s uint8) { c.seq = s }

// Await waits for the peer's next bytes. A lean connection waiting for a
// command holds no buffer, and a caller that awaits from a shallow frame
// keeps its goroutine's stack small while it idles (ReadPacket awaits too,
// deeper). It does nothing when bytes are already buffered or the
// connection is not lean.
func (c *Conn) Await() error { return c.await() }

// ResetSeq starts a new command: the next packet has sequence id 0.
func (c *Conn) ResetSeq() { c.seq = 0 }

// SetReadDeadline sets the deadline of the underlying connection's reads.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.nc.SetReadDeadline(t) }

// SetDeadline sets read and write deadlines of the underlying connection.
func (c *Conn) SetDeadline(t time.Time) error { return c.nc.SetDeadline(t) }

// Buffered reports how many bytes are read ahead and not yet consumed.
func (c *Conn) Buffered() int {
	n := c.firstN - c.firstOff
	if c.br != nil {
		n += c.br.Buffered()
	}
	return n
}

func (c *Conn) readHeader() (int, error) {
	if err := c.await(); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(c.br, c.hdr[:]); err != nil {
		return 0, err
	}
	n := int(c.hdr[0]) | int(c.hdr[1])<<8 | int(c.hdr[2])<<16
	if !c.LenientSeq && c.hdr[3] != c.seq {
		return 0, fmt.Errorf("%w: got %d, want %d", ErrPacketOutOfOrder, c.hdr[3], c.seq)
	}
	c.seq = c.hdr[3] + 1
	return n, nil
}

// ReadPacket reads one logical packet, joining payloads split at 16 MiB.
// The returned slice is owned by the Conn and valid until the next read.
// Memory grows with the bytes that actually arrive, not with the length a
// header declares, so a lying header costs nothing.
func (c *Conn) ReadPacket() ([]byte, error) {
	if cap(c.buf) > retainLimit {
		c.buf = nil
	}
	buf := c.buf[:0]
	limit := c.MaxPacket
	if limit <= 0 {
		limit = 1 << 30
	}
	for {
		n, err := c.readHeader()
		if err != nil {
			return nil, err
		}
		if len(buf)+n > limit {
			return nil, fmt.Errorf("%w: %d bytes announced, limit %d", ErrPacketTooLarge, len(buf)+n, limit)
		}
		for rest := n; rest > 0; {
			// Grow with what has arrived (doubling from 64 KiB), so a
			// header that lies about its length costs at most twice the
			// bytes actually received.
			chunk := min(rest, max(64<<10, len(buf)))
			buf = slices.Grow(buf, chunk)
			m, err := io.ReadFull(c.reader(), buf[len(buf):len(buf)+chunk])
			buf = buf[:len(buf)+m]
			if err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
			rest -= chunk
		}
		if n < MaxPayloadLen {
			break
		}
	}
	c.buf = buf
	return buf, nil
}

// WritePacket writes payload as one logical packet (split at 16 MiB) into
// the write buffer. Nothing reaches the network before Flush unless the
// buffer fills.
func (c *Conn) WritePacket(payload []byte) error {
	for {
		n := min(len(payload), MaxPayloadLen)
		c.hdr = [4]byte{byte(n), byte(n >> 8), byte(n >> 16), c.seq}
		c.seq++
		if _, err := c.writer().Write(c.hdr[:]); err != nil {
			return err
		}
		if _, err := c.writer().Write(payload[:n]); err != nil {
			return err
		}
		payload = payload[n:]
		if n < MaxPayloadLen {
			return nil
		}
	}
}

// WritePacketFlush writes payload and flushes.
func (c *Conn) WritePacketFlush(payload []byte) error {
	if err := c.WritePacket(payload); err != nil {
		return err
	}
	return c.writer().Flush()
}

// Flush sends everything buffered.
func (c *Conn) Flush() error {
	if c.bw == nil {
		return nil
	}
	return c.bw.Flush()
}

// WriteErr writes an ERR packet for e and flushes.
func (c *Conn) WriteErr(e *SQLError) error {
	c.SentErr = e.Code
	return c.WritePacketFlush(AppendErr(nil, e))
}

// ErrIdleData reports bytes a peer sent on a connection that should have
// been quiet (a server's goodbye ERR before it closes, for instance).
var ErrIdleData = errors.New("unexpected data on an idle connection")

// CheckIdle tells whether an idle connection is still usable before it is
// reused: nil if the peer is silent, an error if it closed the connection or
// sent something. It costs one non-blocking peek at the socket.
func (c *Conn) CheckIdle() error {
	if c.Buffered() > 0 {
		return ErrIdleData
	}
	if c.idle != nil {
		return peekIdle(c.idle)
	}
	var raw any = c.nc
	if tc, ok := raw.(interface{ NetConn() net.Conn }); ok {
		raw = tc.NetConn()
	}
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	c.idle = newIdlePeek(rc)
	return peekIdle(c.idle)
}
