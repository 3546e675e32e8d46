// Package shard owns sharding: the rules of the [[shard]] and [[broadcast]]
// configuration, the shard key's extraction from a parsed statement, the
// rewrite of logical table names into physical ones, the merge of the rows
// several shards return for one statement, and the global id generator.
//
// Everything here is pure: no connections, no I/O. The proxy asks Rules for a
// Template of a statement text, asks the Template for a Route given the
// statement's parameter values, runs the Route's Parts on their clusters and,
// when the Route has a Merge, feeds the rows it reads to the Merge.
//
// Rules, Templates, Routes and Merge specs are immutable once built and safe
// for concurrent use; a Merger (one statement's merge state) is owned by the
// goroutine that runs that statement.
package shard
