// Package router classifies the SQL text of COM_QUERY statements for sluice: it decides
// whether a statement may run on a replica or must run on the master, recognizes USE,
// session SET and transaction control, reads routing hints from leading comments, and
// caches the resulting Plans.
//
// Ownership: the router owns statement classification and its plan cache, nothing else.
// It is pure: it sees SQL text, never packets, connections or the topology, does no I/O,
// and must not import proxy, health or protocol. Transactions, session state and the choice
// of a backend are the proxy's business; the router only says where a statement wants to go
// on its own (Plan.Target) and what session state it changes (Plan.Kind, Plan.Vars,
// Plan.Schema).
//
// Concurrency: a Router is safe for concurrent use by any number of sessions; New builds
// one for the whole process. Classify returns *Plan values that are shared by every caller
// that classifies the same text and are immutable: callers must not modify a Plan or the
// slices it holds.
//
// Cost: a text seen before costs one map lookup and no allocation. A new text costs a
// normalization, and a full parse by the TiDB parser unless a text with the same digest
// was parsed before; see Router.
//
// Classification follows the server's default lexing. Statements the TiDB parser does not
// know (some MariaDB-only syntax, SELECT ... INTO @var) are KindWrite with Plan.ParseErr
// set, which is always safe: they run on the master, which reports any real syntax error.
package router
