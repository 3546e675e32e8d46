package protocol

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Session-state change types in an OK packet's session state information
// (CLIENT_SESSION_TRACK).
const (
	SessionTrackSystemVariables byte = 0x00
	SessionTrackSchema          byte = 0x01
	SessionTrackStateChange     byte = 0x02
	SessionTrackGTIDs           byte = 0x03
)

// OKTail is the part of an OK packet that follows the fixed fields when the
// connection negotiated CLIENT_SESSION_TRACK. Its slices alias the packet.
type OKTail struct {
	// Fixed is the packet up to and including the warnings field.
	Fixed []byte
	// Status is the packet's server status flags.
	Status uint16
	// Info is the human-readable information text.
	Info []byte
	// State is the session state information: a sequence of (type,
	// length-encoded data) entries; empty unless Status has
	// StatusSessionStateChg.
	State []byte
}

// ParseOKTail splits an OK packet (header 0x00) from a connection that
// negotiated CLIENT_SESSION_TRACK into its fixed part, info and session
// state information.
func ParseOKTail(p []byte) (OKTail, error) {
	var t OKTail
	if len(p) < 1 || p[0] != headerOK {
		return t, fmt.Errorf("%w: not an OK packet", ErrMalformed)
	}
	i := 1
	for range 2 { // affected rows, last insert id
		_, _, n, err := ReadLenEncInt(p[i:])
		if err != nil {
			return t, fmt.Errorf("%w: OK packet: %w", ErrMalformed, err)
		}
		i += n
	}
	if len(p) < i+4 {
		return t, fmt.Errorf("%w: OK packet: no status and warnings", ErrMalformed)
	}
	t.Status = binary.LittleEndian.Uint16(p[i:])
	i += 4
	t.Fixed = p[:i]
	if i == len(p) {
		// Servers leave out an empty info and absent state.
		return t, nil
	}
	info, n, err := readLenEncBytes(p[i:])
	if err != nil {
		return t, fmt.Errorf("%w: OK packet info: %w", ErrMalformed, err)
	}
	t.Info = info
	i += n
	if t.Status&StatusSessionStateChg != 0 && i < len(p) {
		state, _, err := readLenEncBytes(p[i:])
		if err != nil {
			return t, fmt.Errorf("%w: OK packet session state: %w", ErrMalformed, err)
		}
		t.State = state
	}
	return t, nil
}

// readLenEncBytes reads a length-encoded string, returning it (aliasing b)
// and the bytes it took.
func readLenEncBytes(b []byte) ([]byte, int, error) {
	v, null, n, err := ReadLenEncInt(b)
	if err != nil {
		return nil, 0, err
	}
	if null {
		return nil, n, nil
	}
	if v > uint64(len(b)-n) {
		return nil, 0, fmt.Errorf("string of %d bytes, %d left", v, len(b)-n)
	}
	return b[n : n+int(v)], n + int(v), nil
}

// lastEntry returns the data of the last well-formed entry of type typ in
// a session state information block (a sequence of type byte, then
// length-encoded data) that value accepts, and what value made of it.
func lastEntry(state []byte, typ byte, value func(data []byte) ([]byte, bool)) ([]byte, bool) {
	var val []byte
	found := false
	for len(state) > 0 {
		t := state[0]
		data, n, err := readLenEncBytes(state[1:])
		if err != nil {
			break
		}
		state = state[1+n:]
		if t != typ {
			continue
		}
		if v, ok := value(data); ok {
			val, found = v, true
		}
	}
	return val, found
}

// TrackedVariable returns the value a session state information block
// reports for the system variable name (SESSION_TRACK_SYSTEM_VARIABLES
// entries), the last one when it appears more than once.
func TrackedVariable(state []byte, name string) ([]byte, bool) {
	return lastEntry(state, SessionTrackSystemVariables, func(data []byte) ([]byte, bool) {
		k, kn, err := readLenEncBytes(data)
		if err != nil || !bytes.EqualFold(k, []byte(name)) {
			return nil, false
		}
		v, _, err := readLenEncBytes(data[kn:])
		return v, err == nil
	})
}

// AppendOKWithoutState appends to dst the OK packet t came from as a client
// without CLIENT_SESSION_TRACK gets it from the server: the session-state
// flag cleared, no session state, and the info text length-encoded (MariaDB
// and MySQL write it so for every client, and libmariadb, mysqlnd and
// libmysqlclient read it so; an empty one is left out).
func AppendOKWithoutState(dst []byte, t OKTail) []byte {
	start := len(dst)
	dst = append(dst, t.Fixed...)
	st := t.Status &^ StatusSessionStateChg
	binary.LittleEndian.PutUint16(dst[start+len(t.Fixed)-4:], st)
	if len(t.Info) == 0 {
		return dst
	}
	return AppendLenEncString(dst, t.Info)
}

// TrackedGTID returns the GTID of the last transaction a session state
// information block reports: MariaDB's tracked system variable last_gtid,
// or MySQL's SESSION_TRACK_GTIDS entry.
func TrackedGTID(state []byte) ([]byte, bool) {
	if v, ok := TrackedVariable(state, "last_gtid"); ok && len(v) > 0 {
		return v, true
	}
	return lastEntry(state, SessionTrackGTIDs, func(data []byte) ([]byte, bool) {
		if len(data) < 1 {
			return nil, false
		}
		// One byte of encoding specification, then the GTID set.
		g, _, err := readLenEncBytes(data[1:])
		return g, err == nil && len(g) > 0
	})
}
