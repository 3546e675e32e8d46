package shard

import "errors"

// Sentinel errors of the shard planner. Every error the package returns wraps
// one of them with %w and a message naming the table, column or value at
// fault, so the proxy can map the kind to a MySQL error code with errors.Is
// and still show the client what went wrong.
var (
	// ErrCrossShardJoin: a statement joins sharded tables of different
	// rules, sharded tables not joined on their key, or a sharded table
	// with an unsharded one.
	ErrCrossShardJoin = errors.New("cross-shard join")
	// ErrCrossShardWrite is reserved for the proxy: a transaction that
	// would write to a second shard.
	ErrCrossShardWrite = errors.New("cross-shard write")
	// ErrMissingKey: an INSERT gives no value for the shard key column.
	ErrMissingKey = errors.New("missing shard key")
	// ErrNullKey: an INSERT gives NULL for the shard key column.
	ErrNullKey = errors.New("NULL shard key")
	// ErrBadKeyValue: a shard key value of a type or form the rule's
	// algorithm cannot place (a non-integer for mod, a bad date, ...).
	ErrBadKeyValue = errors.New("bad shard key value")
	// ErrKeyOutOfRange: a range rule's key below the first boundary or at
	// or above the last.
	ErrKeyOutOfRange = errors.New("shard key out of range")
	// ErrShardKeyUpdate: an UPDATE (or ON DUPLICATE KEY UPDATE) assigns
	// the shard key column, which would move the row to another shard.
	ErrShardKeyUpdate = errors.New("shard key update")
	// ErrUnsupported: a statement shape the planner cannot run correctly
	// over several shards (HAVING, COUNT(DISTINCT), an aggregate inside an
	// expression, a subquery over several shards, ...).
	ErrUnsupported = errors.New("unsupported on sharded tables")
	// ErrNotSharded: NEXT_ID names a table without a [[shard]] rule.
	ErrNotSharded = errors.New("table is not sharded")
)
