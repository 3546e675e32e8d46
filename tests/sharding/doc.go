// Package sharding holds sluice's end-to-end sharding tests: two sandbox
// clusters (a master and a replica each) behind one in-process sluice with
// mod, hash, range and date rules, a broadcast table and an unsharded table,
// checked statement by statement against one reference MariaDB that holds
// the same data unsharded, plus a checker that reads every physical table and
// verifies each row sits where its rule says. Nothing here is needed by the
// binary.
package sharding
