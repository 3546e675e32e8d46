package shard

import (
	"errors"

	"github.com/sluice-proxy/sluice/protocol"
)

// Sentinel errors of the shard planner. Every error the package returns wraps
// one of them with %w and a message naming the table, column or value at
// fault, so a caller can tell the kind with errors.Is and still show the
// client what went wrong. Those a client may see carry the MySQL error it
// gets (protocol.ErrorKind.Sentinel): protocol.ToSQLError answers them with
// that code and "sluice: " and the error's text; the rest become
// ER_UNKNOWN_ERROR.
var (
	// ErrCrossShardJoin: a statement joins sharded tables of different
	// rules, sharded tables not joined on their key, or a sharded table
	// with an unsharded one.
	ErrCrossShardJoin = protocol.ERNotSupportedYet.Sentinel("cross-shard join")
	// ErrCrossShardWrite is reserved for the proxy: a transaction that
	// would write to a second shard.
	ErrCrossShardWrite = protocol.ERNotSupportedYet.Sentinel("cross-shard write")
	// ErrMissingKey: an INSERT gives no value for the shard key column.
	ErrMissingKey = protocol.ERNoDefaultForField.Sentinel("missing shard key")
	// ErrNullKey: an INSERT gives NULL for the shard key column.
	ErrNullKey = protocol.ERBadNull.Sentinel("NULL shard key")
	// ErrBadKeyValue: a shard key value of a type or form the rule's
	// algorithm cannot place (a non-integer for mod, a bad date, ...).
	ErrBadKeyValue = protocol.ERWrongValueForField.Sentinel("bad shard key value")
	// ErrKeyOutOfRange: a range rule's key below the first boundary or at
	// or above the last.
	ErrKeyOutOfRange = protocol.ERNoPartitionForValue.Sentinel("shard key out of range")
	// ErrShardKeyUpdate: an UPDATE (or ON DUPLICATE KEY UPDATE) assigns
	// the shard key column, which would move the row to another shard.
	ErrShardKeyUpdate = protocol.ERNotSupportedYet.Sentinel("shard key update")
	// ErrUnsupported: a statement shape the planner cannot run correctly
	// over several shards (HAVING, COUNT(DISTINCT), an aggregate inside an
	// expression, a subquery over several shards, ...).
	ErrUnsupported = protocol.ERNotSupportedYet.Sentinel("unsupported on sharded tables")
	// ErrNotSharded: NEXT_ID names a table without a [[shard]] rule.
	ErrNotSharded = errors.New("table is not sharded")
)
