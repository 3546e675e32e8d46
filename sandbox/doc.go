// Package sandbox starts real local MariaDB (or, when only mysqld exists, MySQL) server
// processes for tests and for `sluice sandbox`: a master, replicas that follow it with GTID
// replication, and a separate auth server that only holds application users.
//
// # Ownership
//
// Start returns a *Topology owned by its caller, who must call Topology.Stop (typically with
// defer or t.Cleanup). The topology owns its server processes, their directories under
// Options.BaseDir and the cached root connection pools; Stop ends the processes, closes the
// pools and removes BaseDir when Start created it. Each server process is also started with
// Pdeathsig=SIGKILL, so it dies with the process that started it if Stop is never reached.
//
// Every instance gets its own data dir (copied from a template), unix socket, pid file, error
// log and free 127.0.0.1 port. The template data dir is initialised once per server binary with
// mariadb-install-db and kept in the user cache dir (~/.cache/sluice-sandbox); concurrent
// builders in different processes each build privately and rename into place.
//
// Accounts: root@localhost has an empty password and is used over the unix socket (RootDB,
// Exec). Options.ServiceUser is created on the master with ALL PRIVILEGES and replicates to
// every replica; Options.AppUser exists only on the auth server, and so does
// Options.AuthServiceUser, sluice's own account there with AuthServiceGrants (the
// configurations the package writes name it as [auth] service_user). All use
// mysql_native_password and are reachable over TCP. Replicas run with read_only=1; note that
// ALL PRIVILEGES includes READ ONLY ADMIN (SUPER on MySQL), so the service user can still write
// to a replica.
//
// Options.NoAuth leaves the auth server out. A sharded setup is several such topologies, one
// per cluster, started at once with StartAll next to one topology that has the auth server;
// ShardedSluiceConfig writes the multi-cluster sluice configuration for them.
//
// Options.SemiSync adds semi-synchronous replication (AFTER_SYNC) for failover tests. A server
// that was killed comes back on the same port and data dir with Server.Start; after a failover
// test promoted a replica, Topology.Master still names the original master and
// WaitReplicated still waits for it.
//
// Options.AuthProxyProtocolNetworks starts the auth server with MariaDB's proxy_protocol_networks,
// for tests of sluice's PROXY protocol header; connections without a header keep working.
//
// StartEtcd starts a local etcd cluster (Debian's etcd-server binary) for the fleet's tests:
// N members on free loopback client and peer ports, each with its own data dir and log, ready
// once every member's /health says it has a leader. A member can be stopped, killed and started
// again on the same data dir (EtcdMember.Stop, Kill, Start) to take the cluster's quorum away
// and give it back. FindEtcdBinary's error matches ErrNoEtcd when etcd is not installed.
//
// # Concurrency
//
// Topology.Stop, Topology.WaitReplicated and Topology.Servers may be called from any goroutine.
// For a Server, Start, Stop and Kill are serialised internally (concurrent calls run one after
// another); Running, PID, Addr, DSN, RootDB, Exec, ReplicaStatus, Status and Variable are safe to call
// concurrently with each other and with the lifecycle methods, though queries naturally fail
// while the server is down. The *sql.DB from RootDB is shared: do not Close it.
//
// The package never imports the proxy; it depends only on the standard library and
// github.com/go-sql-driver/mysql (etcd is driven over its HTTP /health endpoint, not its client).
package sandbox
