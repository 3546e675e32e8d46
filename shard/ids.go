package shard

import (
	"fmt"
	"sync"
	"time"
)

// Layout of a global id, from the most significant bit of a positive int64:
// 41 bits of milliseconds since IDEpoch, 2 bits of version, 5 bits of node,
// 7 bits of sequence and 8 bits of shard number.
const (
	idShardBits   = 8
	idSeqBits     = 7
	idNodeBits    = 5
	idVersionBits = 2
	idTimeBits    = 41

	idSeqShift     = idShardBits
	idNodeShift    = idSeqShift + idSeqBits
	idVersionShift = idNodeShift + idNodeBits
	idTimeShift    = idVersionShift + idVersionBits

	idMaxSeq = 1<<idSeqBits - 1

	// IDVersionSharded marks an id whose low 8 bits are the shard (the
	// virtual shard when the rule has virtual shards) of the row it was
	// made for; statements that give only such an id route by it.
	IDVersionSharded = 1
	// IDVersionPlain marks an id made without a shard key (NEXT_ID with
	// only a table name); its shard bits are zero and mean nothing.
	IDVersionPlain = 0
)

// IDEpoch is the zero of a global id's timestamp.
var IDEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// IDGenerator makes 63-bit positive, unique, time-ordered ids (Snowflake
// style) that embed a node number and a shard number. It is safe for
// concurrent use; ids from one generator increase strictly over time. Two
// generators must have different node numbers to make distinct ids.
type IDGenerator struct {
	node int64
	// now returns milliseconds since IDEpoch; tests replace it.
	now func() int64
	// sleep waits for about d; tests replace it.
	sleep func(d time.Duration)

	mu   sync.Mutex
	last int64 // timestamp of the last id
	seq  int64 // sequence of the last id within last
}

// NewIDGenerator returns a generator for node (0 .. 31; other values are
// reduced to their low 5 bits).
func NewIDGenerator(node int) *IDGenerator {
	return &IDGenerator{
		node:  int64(node) & (1<<idNodeBits - 1),
		now:   func() int64 { return time.Since(IDEpoch).Milliseconds() },
		sleep: time.Sleep,
		last:  -1,
	}
}

// Next returns a new id embedding shard (0 .. 255, reduced to its low 8
// bits) and version IDVersionSharded.
func (g *IDGenerator) Next(shard int) int64 {
	return g.next(IDVersionSharded, int64(shard)&(1<<idShardBits-1))
}

// NextPlain returns a new id of version IDVersionPlain, which routes
// nowhere in particular.
func (g *IDGenerator) NextPlain() int64 {
	return g.next(IDVersionPlain, 0)
}

func (g *IDGenerator) next(version, shard int64) int64 {
	g.mu.Lock()
	ts := g.now()
	for {
		if ts > g.last {
			g.last, g.seq = ts, 0
			break
		}
		// Same millisecond, or the clock went back: continue the last
		// timestamp's sequence so ids stay unique and increasing.
		if g.seq < idMaxSeq {
			g.seq++
			break
		}
		if ts < g.last {
			// The clock is behind and the sequence is spent: borrow the
			// next millisecond rather than wait for the clock to catch up.
			g.last, g.seq = g.last+1, 0
			break
		}
		// The sequence of this millisecond is spent: wait for the next.
		g.sleep(time.Until(IDEpoch.Add(time.Duration(g.last+1) * time.Millisecond)))
		ts = g.now()
	}
	id := g.last<<idTimeShift | version<<idVersionShift | g.node<<idNodeShift | g.seq<<idSeqShift | shard
	g.mu.Unlock()
	return id & (1<<63 - 1)
}

// The generated range: ids whose time part is at least IDMinAge after
// IDEpoch. Only ids in it are decoded for routing, so that an
// application's own small ids (an AUTO_INCREMENT value, 1048836) that
// happen to carry the version bit are not taken for generated ones; an
// INSERT that gives an id in the range must carry the row's shard
// (Template.Route refuses it otherwise). The range has no upper end, so
// that the ids checked at INSERT and those decoded for routing are the
// same set at every moment: an id whose time lies ahead of the clock is
// checked today, not decoded unchecked tomorrow. UUID_SHORT() values and
// other large integers may fall in it.
const (
	// IDMinAge is the least time part of a generated id: sluice made no
	// id in the first day after IDEpoch, and an id below it (about
	// 3.6e14) is an application's.
	IDMinAge = 24 * time.Hour
)

// InIDRange reports whether id lies in the generated range.
func InIDRange(id int64) bool {
	return id > 0 && id>>idTimeShift >= IDMinAge.Milliseconds()
}

// ShardOfID returns the shard number embedded in id and whether id carries
// one: it is in the generated range (InIDRange) and its version is
// IDVersionSharded.
func ShardOfID(id int64) (shard int, ok bool) {
	if !InIDRange(id) || id>>idVersionShift&(1<<idVersionBits-1) != IDVersionSharded {
		return 0, false
	}
	return int(id & (1<<idShardBits - 1)), true
}

// IDTime returns the time an id was made (to the millisecond).
func IDTime(id int64) time.Time {
	return IDEpoch.Add(time.Duration(id>>idTimeShift) * time.Millisecond)
}

// IDNode returns the node number of the generator that made id.
func IDNode(id int64) int {
	return int(id >> idNodeShift & (1<<idNodeBits - 1))
}

// checkID refuses an INSERT's explicit id_column value that lies in the
// generated range (ShardOfID decodes it) but names another shard than its
// row's placement p: a lookup by that id alone would go to the wrong
// shard. Values outside the range, or not integers, are the application's
// and go through unchecked.
func (r *rule) checkID(v Value, p, row int) error {
	mag, neg, ok := integerOf(v)
	if !ok || neg || mag > 1<<63-1 {
		return nil
	}
	vs, ok := ShardOfID(int64(mag))
	if !ok || vs%r.shards == p%r.shards {
		return nil
	}
	return fmt.Errorf("%w: %s.%s column %s (row %d): %s is in the range of sluice's generated ids and names shard %d, but the row's %s puts it on shard %d; give an id from NEXT_ID('%s', key), leave the column out, or use ids below %d",
		ErrBadKeyValue, r.schema, r.table, r.idColumn, row+1, formatValue(v), vs%r.shards, r.key, p%r.shards, r.table, IDMinAge.Milliseconds()<<idTimeShift)
}
