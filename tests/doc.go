// Package tests holds sluice's end-to-end tests: real MariaDB servers started
// by sandbox (a master, GTID replicas and an auth server), sluice in front of
// them in-process, and real clients (go-sql-driver/mysql, the mariadb CLI,
// PHP PDO). Nothing here is needed by the binary.
package tests
