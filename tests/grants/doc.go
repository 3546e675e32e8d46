// Package grants holds sluice's differential test of privilege enforcement
// (TestGrantsParity). Nothing here is needed by the binary.
//
// # Setup
//
// TestMain starts a sandbox cluster (a master, one replica and the auth
// server) and a standalone reference MariaDB. The test schemas (gp_a, gp_b,
// and gp_x1, gp_x_1, gp_xy1, gpax_1 to tell the wildcards apart), each with
// three tables, a definer and an invoker view, and a definer and an invoker
// procedure and function, are created with their rows on the cluster's
// master and on the reference, and without rows on the auth server, whose
// table-, column- and routine-level GRANTs need the objects to exist. The
// accounts are created by the same statements on the auth server and on the
// reference: global (SELECT, FILE ON *.*), database level through `gp\_x%`
// and through an unescaped `gp_x_1`, table level, column level, routine
// level, a default role, a role granted but not default (the corpus has SET
// ROLE statements), WITH GRANT OPTION, administrative (PROCESS, CONNECTION
// ADMIN, BINLOG ADMIN, BINLOG MONITOR; SUPER through the non-default role)
// and reporter with no grants at all; all are '%' accounts. sluice runs in
// process in front of the cluster with [auth] enforce_grants = true.
//
// # Run
//
// A seeded generator makes at least 2,000 statements (reads, writes, DDL on
// scratch names of each account's own, views, routines, temporary tables,
// LOCK TABLES, INTO OUTFILE, LOAD DATA INFILE, SET GLOBAL to the current
// value, KILL and KILL QUERY of a victim session kept open on each side,
// GRANT and REVOKE, SHOWs, USE, on databases that exist and on some that do
// not). Every account runs every statement (or a seeded share of the
// groups), in the same order, on one session to the reference and one to
// sluice, reference first; the accounts run concurrently.
//
// # Classification
//
// A statement is denied on a side when the answer is one of the error codes
// MariaDB 10.11 gives for a missing privilege (denialCodes: 1044, 1045,
// 1095, 1131, 1132, 1142, 1143, 1211, 1227, 1345, 1356, 1370, 1410, 1419,
// 1448, 1698, 1873, 1959, 1979), and allowed otherwise: success or any other
// error. Every run (a statement run by an account) is one of: both allow;
// both deny (c); sluice allows and the reference denies (a); the reference
// allows and sluice denies (b); a transport error on either side. The test
// fails on any (a), on (b) over 1% of the runs, on any (c) whose codes
// differ, on (c) texts equal in under 99% of the (c) runs, and on any
// transport error. Texts are compared as each server sent them, after the
// values that differ between the sides by construction (the victim's
// connection id, the OUTFILE name) are put back as placeholders. The
// reference names a client on 127.0.0.1 as 'user'@'127.0.0.1' in 1142 and
// 1143 (the client's address: the sandbox runs with skip-name-resolve) and
// as 'user'@'%' (the account's host) in 1044, 1045 and 1370. As a check of
// the harness itself, each account must have statements the reference
// allows and statements it denies.
//
// # Running it
//
//	go test ./tests/grants -count=1 -v
//
// SLUICE_GRANTS_SEED=N (or -grants.seed=N) replays a run's corpus (the seed
// is logged); SLUICE_GRANTS_STATEMENTS sets the corpus size,
// SLUICE_GRANTS_SHARE the share each account runs, SLUICE_GRANTS_VERBOSE=1
// lists every difference (by default the first 60 of each kind), and
// SLUICE_GRANTS_DUMP=FILE writes every run with both answers.
// SLUICE_GRANTS_PARITY_TARGET=direct-master compares the reference with the
// cluster's master itself, the accounts created there too, instead of
// sluice: a check of the harness, which must then find no difference.
package grants
