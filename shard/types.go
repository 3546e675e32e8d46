package shard

// Value is one shard key value: a literal of the statement text or a
// parameter of a prepared statement execution.
type Value struct {
	Kind ValueKind
	// I holds KindInt, U KindUint, F KindFloat; S holds the bytes of
	// KindString (also dates and times in their text form, and decimals).
	I int64
	U uint64
	F float64
	S []byte
	// Decimal marks S as a DECIMAL number (a literal such as 42.0 or a
	// prepared statement's decimal parameter), which the server compares
	// with a string column as a number, not as a string.
	Decimal bool
	// Binary marks S as a _binary literal holding non-ASCII bytes, which
	// the server compares byte for byte with the column's value in the
	// column's character set, not as UTF-8 characters.
	Binary bool
}

// ValueKind tells which field of a Value is set.
type ValueKind uint8

const (
	KindNull ValueKind = iota
	KindInt
	KindUint
	KindFloat
	KindString
)

// Route is where one execution of a statement runs. Routes are immutable;
// a Template may return the same Route to any number of callers.
type Route struct {
	// Parts are the statements to run, one per physical table touched
	// (several for one cluster when tables_per_cluster > 1; one per
	// cluster for broadcast tables). A Route of
	// a statement that names no sharded or broadcast table has one Part on
	// the default cluster whose SQL is the original text.
	Parts []Part
	// Write reports that the statement changes data or schema (INSERT,
	// REPLACE, UPDATE, DELETE, DDL): its Parts run on masters.
	Write bool
	// AnyOne marks a read of broadcast tables only: one Part per cluster,
	// and running any single one of them answers the statement.
	AnyOne bool
	// Rename, when set, is a physical table name the result of the one
	// Part shows where the client must see the logical one (SHOW CREATE
	// TABLE of a sharded table): the table name column and the name in
	// the CREATE TABLE text.
	Rename *Rename
	// FirstRow indexes the Part that holds an INSERT's first row, whose
	// generated id is the statement's LAST_INSERT_ID().
	FirstRow int
	// PerExecution marks a Route built for one execution's values alone
	// (rows split over shards, ids filled in): its Parts' SQL will not
	// repeat, so the proxy runs them as text instead of preparing them on
	// a backend.
	PerExecution bool
	// Merge is non-nil when a read has more than one Part: the results are
	// merged by it into one result set. Writes with several Parts return
	// one OK whose affected rows are the sum of the Parts'.
	Merge *Merge
}

// Rename maps a physical table name in a result back to the logical one.
type Rename struct{ Physical, Logical string }

// Part is one statement for one cluster.
type Part struct {
	// Cluster indexes Rules.Clusters().
	Cluster int
	// SQL is the physical statement: logical table names replaced by
	// physical ones, anything else as the client wrote it.
	SQL string
	// Params lists, for a prepared statement, the indexes of the
	// execution's parameters that SQL's markers take, in marker order
	// (a multi-row INSERT split over shards takes only its rows'); nil
	// means all of them, in order.
	Params []int
	// Shards are the shard numbers (0 .. physical tables - 1) the Part
	// touches, for logs and SHOW SHARDS; nil for unsharded tables.
	Shards []int
}

// Merge says how the result sets of a scatter-gather read become one. The
// Parts' SQL was rewritten for it: columns the merge needs but the client
// did not ask for (ORDER BY expressions not in the select list, the SUM
// and COUNT that AVG needs, the sort keys of compared values) are appended
// after the client's columns as hidden columns, and LIMIT n OFFSET m
// became LIMIT m+n on every Part.
type Merge struct {
	// Visible is the number of leading columns the client sees; -1 when
	// the select list has a * and the count is only known from the result
	// (call Resolve with the result's column count first).
	Visible int
	// Hidden is the number of trailing columns the Parts return for the
	// merge only. When Visible is -1, column numbers below zero count from
	// the end (-1 is the last column); Resolve turns them into positions.
	Hidden int
	// OrderBy sorts the merged rows (a k-way merge of the Parts' sorted
	// results when there is no grouping).
	OrderBy []SortKey
	// GroupBy are the columns whose equal values make one output row; with
	// Aggregates and no GroupBy the whole result is one group (one row,
	// even when every Part is empty, as SQL answers COUNT(*) of nothing).
	GroupBy []int
	// GroupDesc marks the GROUP BY items written with DESC, by which
	// MariaDB sorts the groups when there is no ORDER BY; nil: all
	// ascending.
	GroupDesc []bool
	// Aggregates are the columns computed from the Parts' partial values.
	Aggregates []Aggregate
	// Distinct drops rows equal in all visible columns.
	Distinct bool
	// Weights name, for the columns the merge compares (sort, group and
	// distinct keys, MIN and MAX), the hidden columns that hold the
	// server's own comparison of their values. A text column is compared
	// only through them: sluice never guesses what a collation does.
	Weights []Weight
	// Offset and Limit apply to the merged rows; Limit < 0 means none.
	Offset, Limit int64
}

// HasPositions reports whether the Parts compute the position (expr+0) of
// a sort or group key column, which is an error for types without a
// number, such as UUID, INET6 and geometry.
func (m *Merge) HasPositions() bool {
	for _, w := range m.Weights {
		if w.Position != 0 {
			return true
		}
	}
	return false
}

// SortKey is one ORDER BY item: a result column and its direction.
type SortKey struct {
	Column int
	Desc   bool
}

// Weight names the hidden columns that tell how the values of column
// Column compare on the server. Column numbers follow the rules of the
// Merge's other column numbers.
type Weight struct {
	Column int
	// Weight holds WEIGHT_STRING of the column's expression: the sort key
	// of its collation, compared byte-wise (NULL for numbers, which the
	// merge compares by value).
	Weight int
	// Pad holds WEIGHT_STRING of a space in the expression's collation
	// when the collation is PAD SPACE, and an empty string when it is NO
	// PAD: a PAD SPACE comparison extends the shorter sort key with it.
	Pad int
	// Position, when not 0, holds the expression plus 0: an ENUM's index
	// or a SET's bits, which ORDER BY and GROUP BY sort by, and a FLOAT's
	// exact value, which its text rounds to 6 digits. A column in ORDER
	// BY, GROUP BY or DISTINCT has one. MIN and MAX compare ENUM and SET
	// values as text and have none. (Column 0 is always a visible one, so
	// 0 cannot name a hidden column.)
	Position int
}

// Aggregate is one aggregated result column.
type Aggregate struct {
	Column int
	Func   AggFunc
	// SumColumn and CountColumn are, for AggAvg, the hidden columns
	// holding the Part's SUM and COUNT of the same argument; Column holds
	// the Part's own AVG, whose column definition (type, length, scale
	// under the session's div_precision_increment) is the one the server
	// gives the client, and whose value the merge replaces.
	SumColumn   int
	CountColumn int
}

// AggFunc is an aggregate function the merge can combine.
type AggFunc uint8

const (
	AggCount AggFunc = iota // partial counts are summed
	AggSum                  // partial sums are summed; NULL when all are NULL
	AggMin
	AggMax
	AggAvg // SUM of partial sums / SUM of partial counts, at the AVG's scale
)

// Column describes one result column as far as merging needs: how its
// values compare and how they are written. The proxy fills it from the
// column definition packets of the first Part's result.
type Column struct {
	// Type is the MySQL column type byte (protocol.MYSQL_TYPE_*).
	Type byte
	// Flags are the column definition flags (unsigned, binary, ...).
	Flags uint16
	// Charset is the collation id; 63 (binary) compares bytes. Any other
	// is the result's character set, not the column's collation, so text
	// is compared by its Weight columns.
	Charset uint16
	// Decimals is the number of digits after the point.
	Decimals byte
}

// Row is one result row in text form: one element per column, nil for
// NULL. Binary-protocol rows are converted to and from this form by the
// protocol package.
type Row [][]byte
