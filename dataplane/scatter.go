package dataplane

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/shard"
)

// partStream reads one Part's result rows for a merge.
type partStream struct {
	bc     *BackendConn
	extra  bool // bc was borrowed for this statement only
	cols   int
	done   bool
	vals   shard.Row
	err    *protocol.SQLError
	status uint16
	// headDone: the column count and definitions (defs, or headErr) have
	// been read.
	headDone bool
	defs     [][]byte
	headErr  error
	// buffered: the rows were read ahead into rows (next is the next one
	// to hand out; bufErr ends them), so bc could run another Part.
	buffered bool
	rows     []shard.Row
	next     int
	bufErr   error
}

// readHead reads the Part's column count and definitions once.
func (ps *partStream) readHead() error {
	if !ps.headDone {
		ps.headDone = true
		ps.cols, ps.defs, ps.headErr = readResultHead(ps.bc)
		if ps.headErr != nil {
			ps.done = true
		}
	}
	return ps.headErr
}

// readAll reads the rest of the Part's result into memory, at most limit
// rows (0: no bound), so its connection can run the next Part. A failing
// head is left for the caller's readHead to report.
func (ps *partStream) readAll(limit int) error {
	if ps.readHead() != nil {
		return nil
	}
	for {
		r, err := ps.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			ps.bufErr = err
			break
		}
		if limit > 0 && len(ps.rows) >= limit {
			ps.drain()
			return fmt.Errorf("%w: a transaction's read of several tables on one cluster holds more than max_merge_rows (%d) rows of one table", shard.ErrTooManyRows, limit)
		}
		n := 0
		for _, v := range r {
			n += len(v)
		}
		mem := make([]byte, 0, n)
		row := make(shard.Row, len(r))
		for j, v := range r {
			if v != nil {
				mem = append(mem, v...)
				row[j] = mem[len(mem)-len(v) : len(mem) : len(mem)]
			}
		}
		ps.rows = append(ps.rows, row)
	}
	ps.buffered = true
	return nil
}

// Next returns the Part's next row, io.EOF after the last.
func (ps *partStream) Next() (shard.Row, error) {
	if ps.buffered {
		if ps.next < len(ps.rows) {
			ps.next++
			return ps.rows[ps.next-1], nil
		}
		if err := ps.bufErr; err != nil {
			ps.bufErr = nil
			return nil, err
		}
		return nil, io.EOF
	}
	if ps.done {
		return nil, io.EOF
	}
	p, err := ps.bc.ReadPacket()
	if err != nil {
		ps.done = true
		ps.bc.broken = true
		return nil, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	switch {
	case protocol.IsEOF(p):
		ps.done = true
		if len(p) >= 5 {
			ps.status = binary.LittleEndian.Uint16(p[3:])
		}
		return nil, io.EOF
	case protocol.IsErr(p):
		ps.done = true
		se, _ := protocol.ParseErr(p)
		if se == nil {
			se = protocol.ERUnknownError.New("sluice: malformed ERR packet from %s", describe(ps.bc))
		}
		ps.err = se
		return nil, se
	}
	row, err := protocol.ParseTextRow(p, ps.cols, ps.vals[:0])
	if err != nil {
		ps.done = true
		ps.bc.broken = true
		return nil, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	ps.vals = row
	return row, nil
}

// drain reads what is left of the Part's result so its connection can take
// the next command.
func (ps *partStream) drain() {
	for !ps.done {
		if _, err := ps.Next(); err != nil && err != io.EOF {
			var se *protocol.SQLError
			if !errors.As(err, &se) {
				return
			}
		}
	}
}

// scatter runs a read on every Part at once and merges the results into
// one result set as route.Merge says. With binary set the client asked
// through a prepared statement and gets binary-protocol rows.
func (s *Session) scatter(plan *router.Plan, route *shard.Route, binaryRows bool) error {
	parts := make([]*partStream, len(route.Parts))
	defer s.endParts(parts)
	fail := func(e *protocol.SQLError) error {
		s.noteResult(protocol.RelayResult{Err: e})
		return s.client.WriteErr(e)
	}
	if e, err := s.sendParts(plan, route, parts); err != nil {
		return err
	} else if e != nil {
		return fail(e)
	}
	defs, cols, colDefs, failed := s.readHeads(route, parts)
	if failed != nil {
		return fail(failed)
	}
	merge := route.Merge
	if merge == nil {
		merge = passThrough
	}
	m, err := merge.Resolve(len(defs))
	if err != nil {
		return fail(shardError(err))
	}
	visible := m.Visible
	if visible > len(defs) || visible <= 0 {
		return fail(protocol.ERUnknownError.New("sluice: the merge expects %d visible columns of %d", m.Visible, len(defs)))
	}
	if err := s.writeMergedHead(defs[:visible]); err != nil {
		return err
	}
	return s.mergeRows(m, route, parts, cols, colDefs[:visible], binaryRows)
}

// endParts drains what the Parts left unread and gives their connections
// back: one taken for a Part alone is returned reset (or discarded when
// broken), the session's own kept.
func (s *Session) endParts(parts []*partStream) {
	for _, ps := range parts {
		if ps == nil {
			continue
		}
		ps.drain()
		switch {
		case ps.extra && ps.bc.broken:
			ps.bc.discard()
		case ps.extra:
			s.putBack(ps.bc, true)
		default:
			s.dropIfBroken(ps.bc)
		}
	}
}

// sendParts takes a connection per Part and sends every Part before any
// answer is read, so the shards work in parallel. A Part that cannot be
// sent is the client's ERR (e); err ends the session.
func (s *Session) sendParts(plan *router.Plan, route *shard.Route, parts []*partStream) (e *protocol.SQLError, err error) {
	for i := range route.Parts {
		pt := &route.Parts[i]
		s.useCluster(pt.Cluster)
		if err := s.followTopology(); err != nil {
			return nil, err
		}
		bc, extra, err := s.partConn(plan, parts[:i])
		if err == nil {
			err = s.sync(bc)
		}
		if err == nil {
			err = s.beginIfPending(bc)
		}
		if err != nil {
			if bc != nil {
				if extra {
					bc.broken = true
					bc.discard()
				} else {
					s.dropIfBroken(bc)
				}
			}
			return partError(err, s.cluster.Name), nil
		}
		parts[i] = &partStream{bc: bc, extra: extra}
		bc.ResetSeq()
		if err := bc.WritePacketFlush(bc.command(protocol.ComQuery, pt.SQL)); err != nil {
			bc.broken = true
			parts[i].done = true
			return partError(fmt.Errorf("%w: %w", protocol.ErrBackendIO, err), s.cluster.Name), nil
		}
	}
	return nil, nil
}

// partConn is the connection the next Part runs on, after the Parts
// before it (earlier). A Part on a cluster an earlier one already uses
// runs after it on the same connection inside a transaction (the earlier
// one's rows read ahead), on a connection of its own (extra) outside one.
func (s *Session) partConn(plan *router.Plan, earlier []*partStream) (bc *BackendConn, extra bool, err error) {
	bc, err = s.backendFor(s.route(plan), nil)
	if err != nil {
		return bc, false, err
	}
	shared := -1
	for j := len(earlier) - 1; j >= 0; j-- {
		if earlier[j].bc == bc {
			shared = j
			break
		}
	}
	switch {
	case shared < 0:
	case s.inTransaction():
		// Two physical tables on one cluster inside a transaction: both
		// must see its writes and take its locks, so they run one after
		// the other on its connection.
		if e := earlier[shared].readAll(s.env.shards().MaxMergeRows()); e != nil {
			// The connection stays with the earlier Part, which ends it.
			return nil, false, shardError(e)
		}
	default:
		// Outside a transaction the second gets a connection of its own,
		// and the two run at once.
		bc, err = s.conn(bc.backend.Address)
		extra = true
	}
	return bc, extra, err
}

// readHeads reads each Part's column definitions; the first Part's
// describe the merged result. failed is the ERR for the client when a
// Part failed or the Parts disagree.
func (s *Session) readHeads(route *shard.Route, parts []*partStream) (defs [][]byte, cols []shard.Column, colDefs []protocol.ColumnDef, failed *protocol.SQLError) {
	for _, ps := range parts {
		if err := ps.readHead(); err != nil {
			if failed == nil {
				failed = partError(err, ps.bc.backend.Cluster)
			}
			continue
		}
		n, head := ps.cols, ps.defs
		if defs == nil {
			defs = head
			for _, d := range head {
				cd, err := protocol.ParseColumnDef(d)
				if err != nil {
					ps.bc.broken = true
					return nil, nil, nil, partError(fmt.Errorf("%w: %w", protocol.ErrBackendIO, err), ps.bc.backend.Cluster)
				}
				colDefs = append(colDefs, cd)
				cols = append(cols, shard.Column{Type: cd.Type, Flags: cd.Flags, Charset: cd.Charset, Decimals: cd.Decimals})
			}
		} else if n != len(defs) && failed == nil {
			failed = protocol.ERUnknownError.New("sluice: the shards of this statement answer with different columns (%d and %d); are the physical tables alike?", len(defs), n)
		}
	}
	if failed != nil {
		if m := route.Merge; m != nil && m.HasPositions() && failed.Code == protocol.ERIllegalParamTypes.Code && strings.Contains(failed.Message, " and int for operation '+'") {
			// The hidden position column (expr+0) of a sort key whose
			// type has no number (UUID, INET6, geometry): sluice cannot
			// tell its order.
			failed = protocol.ERNotSupportedYet.New("sluice: ORDER BY, GROUP BY or DISTINCT over several shards of a column whose type sluice cannot order (%s)", failed.Message)
		}
	}
	return defs, cols, colDefs, failed
}

// writeMergedHead writes the merged result's header: the visible columns
// as the first Part describes them. Every aggregate, AVG included, is
// computed by the Parts under the session's settings, so its definition
// (type, length, scale) is the server's own.
func (s *Session) writeMergedHead(visible [][]byte) error {
	s.scratch = protocol.AppendLenEncInt(s.scratch[:0], uint64(len(visible)))
	if err := s.client.WritePacket(s.scratch); err != nil {
		return fmt.Errorf("%w: %w", protocol.ErrClientIO, err)
	}
	for _, d := range visible {
		if err := s.client.WritePacket(d); err != nil {
			return fmt.Errorf("%w: %w", protocol.ErrClientIO, err)
		}
	}
	s.scratch = protocol.AppendEOF(s.scratch[:0], 0, s.status())
	if err := s.client.WritePacket(s.scratch); err != nil {
		return fmt.Errorf("%w: %w", protocol.ErrClientIO, err)
	}
	return nil
}

// mergeRows merges the Parts' rows to the client as m says, in the text
// or (binaryRows) binary protocol, and ends the result: with EOF, or with
// an ERR once the header is out.
func (s *Session) mergeRows(m *shard.Merge, route *shard.Route, parts []*partStream, cols []shard.Column, visibleDefs []protocol.ColumnDef, binaryRows bool) error {
	sources := make([]shard.RowSource, len(parts))
	for i, ps := range parts {
		sources[i] = ps
	}
	var clientErr error
	var sent int64
	err := m.Run(cols, sources, s.env.shards().MaxMergeRows(), func(r shard.Row) error {
		sent++
		var err error
		if rn := route.Rename; rn != nil {
			r = s.renameRow(r, rn)
		}
		if binaryRows {
			s.scratch, err = protocol.AppendBinaryRow(s.scratch[:0], r, visibleDefs)
			if err != nil {
				return err
			}
		} else {
			s.scratch = protocol.AppendTextRow(s.scratch[:0], r)
		}
		if err := s.client.WritePacket(s.scratch); err != nil {
			clientErr = err
			return fmt.Errorf("%w: %w", protocol.ErrClientIO, err)
		}
		return nil
	})
	if clientErr != nil {
		return fmt.Errorf("%w: %w", protocol.ErrClientIO, clientErr)
	}
	if err != nil {
		// The header is out: an ERR may still end the result.
		var e *protocol.SQLError
		if !errors.As(err, &e) {
			e = shardError(err)
		}
		s.noteResult(protocol.RelayResult{Err: e})
		return s.client.WriteErr(e)
	}
	s.noteResult(protocol.RelayResult{Columns: true})
	// FOUND_ROWS() is now the rows the client got (SQL_CALC_FOUND_ROWS
	// is refused over shards), which no connection holds.
	s.scoped.foundRows, s.scoped.prevFound, s.scoped.prevStale = sent, true, false
	s.scratch = protocol.AppendEOF(s.scratch[:0], 0, s.status())
	return s.client.WritePacketFlush(s.scratch)
}

// passThrough is the Merge of a single Part's result relayed row by row.
var passThrough = &shard.Merge{Visible: -1, Limit: -1}

// renameRow shows a physical table's name as the logical one in a SHOW
// CREATE TABLE row: the name column and the name after CREATE TABLE.
func (s *Session) renameRow(r shard.Row, rn *shard.Rename) shard.Row {
	if len(r) < 2 {
		return r
	}
	out := append(s.renamed[:0], r...)
	if string(r[0]) == rn.Physical {
		out[0] = []byte(rn.Logical)
	}
	quoted := "`" + rn.Physical + "`"
	if i := bytes.Index(r[1], []byte(quoted)); i >= 0 {
		v := append([]byte(nil), r[1][:i]...)
		v = append(v, "`"+strings.ReplaceAll(rn.Logical, "`", "``")+"`"...)
		out[1] = append(v, r[1][i+len(quoted):]...)
	}
	s.renamed = out
	return out
}

// readResultHead reads the column count and column definitions (and their
// EOF) of a result set on bc; the definitions are copied.
func readResultHead(bc *BackendConn) (int, [][]byte, error) {
	p, err := bc.ReadPacket()
	if err != nil {
		bc.broken = true
		return 0, nil, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	if protocol.IsErr(p) {
		se, perr := protocol.ParseErr(p)
		if perr != nil {
			bc.broken = true
			return 0, nil, fmt.Errorf("%w: %w", protocol.ErrBackendIO, perr)
		}
		return 0, nil, se
	}
	if protocol.IsOK(p) {
		ok, _ := protocol.ParseOK(p)
		bc.status = ok.Status
		return 0, nil, protocol.ERNotSupportedYet.New("sluice: a read over several shards returned no result set")
	}
	n, _, _, err := protocol.ReadLenEncInt(p)
	if err != nil || n == 0 || n > 4096 {
		bc.broken = true
		return 0, nil, fmt.Errorf("%w: bad column count", protocol.ErrBackendIO)
	}
	defs := make([][]byte, n)
	for i := range defs {
		d, err := bc.ReadPacket()
		if err != nil {
			bc.broken = true
			return 0, nil, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
		}
		defs[i] = append([]byte(nil), d...)
	}
	if p, err = bc.ReadPacket(); err != nil || !protocol.IsEOF(p) {
		bc.broken = true
		return 0, nil, fmt.Errorf("%w: no EOF after the column definitions", protocol.ErrBackendIO)
	}
	return int(n), defs, nil
}
