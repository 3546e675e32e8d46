package protocol

import "fmt"

// Tee collects a copy of what Relay writes to a client connection, headers
// included, up to Max bytes: the answer the result cache stores. It
// belongs to the goroutine that owns the connection.
type Tee struct {
	// Buf holds the packets written since the tee was set, as sent.
	Buf []byte
	// Max bounds Buf; Over reports that the answer outgrew it (Buf is
	// then emptied and stays so).
	Max  int
	Over bool
}

// SetTee makes Relay copy what it writes to c into t, until SetTee(nil).
// A nil tee costs Relay one pointer test per write.
func (c *Conn) SetTee(t *Tee) { c.teeTo = t }

// tee copies p into the connection's tee, if any.
func (c *Conn) tee(p []byte) {
	t := c.teeTo
	if t == nil || t.Over {
		return
	}
	if len(t.Buf)+len(p) > t.Max {
		t.Over, t.Buf = true, t.Buf[:0]
		return
	}
	t.Buf = append(t.Buf, p...)
}

// WriteStored writes an answer a Tee collected, packet by packet, with
// the connection's sequence ids in place of the stored ones, and flushes.
// stored is only read: many sessions may write the same answer at once.
func (c *Conn) WriteStored(stored []byte) error {
	bw := c.writer()
	for off := 0; off < len(stored); {
		if len(stored)-off < 4 {
			return fmt.Errorf("stored answer cut in a packet header at byte %d", off)
		}
		n := int(stored[off]) | int(stored[off+1])<<8 | int(stored[off+2])<<16
		if len(stored)-off-4 < n {
			return fmt.Errorf("stored answer cut in a packet at byte %d", off)
		}
		c.hdr = [4]byte{stored[off], stored[off+1], stored[off+2], c.seq}
		c.seq++
		if _, err := bw.Write(c.hdr[:]); err != nil {
			return fmt.Errorf("%w: %w", ErrClientIO, err)
		}
		if _, err := bw.Write(stored[off+4 : off+4+n]); err != nil {
			return fmt.Errorf("%w: %w", ErrClientIO, err)
		}
		off += 4 + n
	}
	return flushClient(c)
}
