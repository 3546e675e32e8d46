package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Replication account created on the master (and replicated everywhere, so a promoted replica
// can serve replicas too).
const (
	replUser     = "repl"
	replPassword = "repl"
	// TestDatabase is created on the master and replicated to every replica.
	TestDatabase = "sluice_test"
)

// AuthServiceGrants are what the sandbox grants sluice's account on the auth server
// (Options.AuthServiceUser): the minimum sluice needs there, as docs/operations.md lists it.
// SELECT on mysql.* lets it read any account's grants (SHOW GRANTS FOR); the rest is what
// [auth] mirror_schema needs to create, replace and drop the mirrored schemas, tables,
// sequences, stub views and stub routines, and REFERENCES lets it see every table's columns in
// information_schema.COLUMNS (it reads no row). The auth server also runs with
// log_bin_trust_function_creators=ON, without which only an account with SUPER may create a
// function while the binary log is on.
var AuthServiceGrants = []string{
	"SELECT ON mysql.*",
	"CREATE, DROP, CREATE VIEW, CREATE ROUTINE, ALTER ROUTINE, REFERENCES ON *.*",
}

// portAttempts bounds how often an instance is retried on a new port when another process
// grabbed the port between picking and binding it.
const portAttempts = 5

// Options configure Start. The zero value gives the defaults documented per field.
type Options struct {
	// Replicas is the number of replicas; 0 means 2, a negative value means none.
	Replicas int
	// BaseDir holds every instance's data dir, socket, pid file and error log. Empty means a
	// new os.MkdirTemp("", "sluice-sandbox-*") directory, which Stop removes. A BaseDir given
	// by the caller is left in place.
	BaseDir string
	// ServiceUser/ServicePassword (default "sluice"/"sluice") is sluice's data-connection
	// account: created on the master with ALL PRIVILEGES ON *.* for '%' and replicated.
	ServiceUser, ServicePassword string
	// AppUser/AppPassword (default "app"/"app") is the application's login: created only on
	// the auth server, with ALL PRIVILEGES ON *.* there.
	AppUser, AppPassword string
	// AuthServiceUser/AuthServicePassword (default "sluice_auth"/"sluice_auth") is sluice's own account
	// on the auth server ([auth] service_user): created only there, with AuthServiceGrants.
	// Configurations the sandbox writes name it in [auth].
	AuthServiceUser, AuthServicePassword string
	// NoAuth starts the topology without its own auth server: Topology.Auth stays nil and
	// AppUser is created nowhere. A sharded setup is several NoAuth topologies (one per
	// cluster) that share the auth server of one more topology; see StartAll and
	// ShardedSluiceConfig.
	NoAuth bool
	// SemiSync turns on semi-synchronous replication (MariaDB only): every server starts with
	// rpl_semi_sync_slave_enabled=ON, rpl_semi_sync_master_wait_point=AFTER_SYNC and
	// rpl_semi_sync_master_timeout=SemiSyncTimeout, and once the replicas have caught up Start
	// sets rpl_semi_sync_master_enabled=ON on the master and waits until every replica is
	// connected as a semi-sync replica. From then on a commit on the master returns only after
	// one replica has the transaction in its relay log. Master-side semi-sync is switched on
	// at run time, not on the command line, because the accounts Start creates first would
	// otherwise wait out the timeout with no replica connected yet; a master restarted with
	// Server.Start therefore comes back with semi-sync off (the replica side stays on for
	// every server, so a promoted replica only needs rpl_semi_sync_master_enabled=ON).
	SemiSync bool
	// AuthProxyProtocolNetworks, when set, starts the auth server with MariaDB's
	// proxy_protocol_networks set to it (for example "127.0.0.0/8"): connections from those
	// networks may open with a PROXY protocol header naming the client's address, which the
	// server then uses for accounts' host parts. A connection from such a network without a
	// header keeps its own address, so root and the tests still connect directly. MariaDB
	// only; empty leaves the option unset.
	AuthProxyProtocolNetworks string
	// Logf receives progress messages (for example t.Logf); nil means silent. It is only
	// called from inside Start, Topology.Stop and Server.Start.
	Logf func(format string, args ...any)
}

// SemiSyncTimeout is rpl_semi_sync_master_timeout under Options.SemiSync: how long a commit on
// the master waits for a replica's acknowledgement before the master gives up and falls back
// to asynchronous replication. One acknowledgement from either replica ends the wait, which on
// loopback takes milliseconds even on a loaded machine; the timeout only matters when no replica
// acknowledges at all. 30 s is far longer than any failover test's write window (a kill -9 of
// the master happens within seconds of the load starting, and the fallback would let an
// acknowledged write exist on the dead master alone), and still short enough that a test whose
// replicas are broken fails on its own deadlines instead of hanging until go test's timeout.
const SemiSyncTimeout = 30 * time.Second

func (o Options) withDefaults() Options {
	switch {
	case o.Replicas == 0:
		o.Replicas = 2
	case o.Replicas < 0:
		o.Replicas = 0
	}
	if o.ServiceUser == "" {
		o.ServiceUser = "sluice"
	}
	if o.ServicePassword == "" {
		o.ServicePassword = "sluice"
	}
	if o.AppUser == "" {
		o.AppUser = "app"
	}
	if o.AppPassword == "" {
		o.AppPassword = "app"
	}
	if o.AuthServiceUser == "" {
		o.AuthServiceUser = "sluice_auth"
	}
	if o.AuthServicePassword == "" {
		o.AuthServicePassword = "sluice_auth"
	}
	return o
}

func (o Options) validate() error {
	if o.SemiSync && o.Replicas == 0 { // after withDefaults: none asked for
		return errors.New("sandbox: SemiSync needs at least one replica")
	}
	if o.AuthServiceUser == o.AppUser {
		return fmt.Errorf("sandbox: AuthServiceUser and AppUser are both %q (both live on the auth server)", o.AppUser)
	}
	for _, u := range []string{o.ServiceUser, o.AppUser, o.AuthServiceUser} {
		switch u {
		case "root", replUser, "mariadb.sys", "mysql.sys", "mysql.session", "mysql.infoschema":
			return fmt.Errorf("sandbox: user name %q is reserved by the sandbox", u)
		}
	}
	return nil
}

// Topology is a running sandbox: a master, its GTID replicas and a separate auth server (none
// under Options.NoAuth, when Auth is nil). The
// caller that got it from Start owns it and must call Stop. Master, Replicas, Auth and Opts are
// set by Start and not changed by the package afterwards. Stop, WaitReplicated and Servers may be
// called from any goroutine; each server's own methods follow the Server contract.
type Topology struct {
	Master   *Server
	Replicas []*Server
	Auth     *Server
	Opts     Options
	// TLS are the CA and the server certificate every instance serves TLS
	// with (MariaDB's ssl-ca, ssl-cert, ssl-key).
	TLS TLSFiles

	bin        *serverBinary
	createdDir bool   // BaseDir was created by Start and is removed by Stop
	socketDir  string // extra short dir for sockets when BaseDir is too long; removed by Stop
}

// Start creates and starts a topology: it copies a template datadir per instance, starts all
// instances in parallel on free 127.0.0.1 ports, creates the repl and service accounts and the
// sluice_test database on the master, points every replica at the master with
// MASTER_USE_GTID=slave_pos, creates the app user on the auth server and waits until the
// replicas have caught up. ctx bounds the whole start-up (60s per server when it has no
// deadline); the servers keep running after ctx ends. On error everything already started is
// stopped and a BaseDir created by Start is removed.
func Start(ctx context.Context, opts Options) (_ *Topology, err error) {
	begin := time.Now()
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	bin, err := findBinary(ctx)
	if err != nil {
		return nil, err
	}
	if opts.SemiSync && bin.flavor != flavorMariaDB {
		return nil, fmt.Errorf("sandbox: SemiSync is implemented for MariaDB only (server is %s)", bin.version)
	}
	if opts.AuthProxyProtocolNetworks != "" && bin.flavor != flavorMariaDB {
		return nil, fmt.Errorf("sandbox: AuthProxyProtocolNetworks needs MariaDB (server is %s)", bin.version)
	}
	t := &Topology{Opts: opts, bin: bin}
	if t.Opts.BaseDir == "" {
		d, err := os.MkdirTemp("", "sluice-sandbox-*")
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		t.Opts.BaseDir, t.createdDir = d, true
	} else if err := os.MkdirAll(t.Opts.BaseDir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if abs, err := filepath.Abs(t.Opts.BaseDir); err == nil {
		t.Opts.BaseDir = abs
	}
	defer func() {
		if err != nil {
			if serr := t.Stop(); serr != nil {
				err = errors.Join(err, serr)
			}
		}
	}()

	tpl, err := templateDir(ctx, bin, t.Opts.BaseDir, logf)
	if err != nil {
		return nil, err
	}

	// Unix socket paths are limited to 107 bytes; fall back to a short dir for long BaseDirs.
	socketDir := t.Opts.BaseDir
	if len(filepath.Join(socketDir, fmt.Sprintf("replica%d.sock", opts.Replicas))) > 100 {
		d, err := os.MkdirTemp("", "sluice-sock-*")
		if err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		socketDir, t.socketDir = d, d
	}
	if t.TLS, err = writeTLSFiles(t.Opts.BaseDir); err != nil {
		return nil, err
	}
	mk := func(name string, id uint32, readOnly bool) *Server {
		s := newServer(bin, filepath.Join(t.Opts.BaseDir, name), socketDir, name, id, readOnly, logf)
		s.tls = t.TLS
		s.semiSync = opts.SemiSync && name != "auth"
		s.authServer = name == "auth"
		return s
	}
	t.Master = mk("master", 1, false)
	for i := 1; i <= opts.Replicas; i++ {
		t.Replicas = append(t.Replicas, mk("replica"+strconv.Itoa(i), uint32(1+i), true))
	}
	if !opts.NoAuth {
		t.Auth = mk("auth", uint32(opts.Replicas+2), false)
		t.Auth.proxyNetworks = opts.AuthProxyProtocolNetworks
	}

	all := t.Servers()
	ports, err := freePorts(len(all))
	if err != nil {
		return nil, err
	}
	if err := parallel(all, func(i int, s *Server) error {
		return s.create(ctx, tpl, ports[i])
	}); err != nil {
		return nil, err
	}
	logf("sandbox: %d servers accepting connections after %v", len(all), time.Since(begin).Round(time.Millisecond))

	if err := t.configure(ctx); err != nil {
		return nil, err
	}
	if err := t.WaitReplicated(ctx); err != nil {
		return nil, err
	}
	if opts.SemiSync {
		if err := t.enableSemiSync(ctx); err != nil {
			return nil, err
		}
	}
	authAddr := "none"
	if t.Auth != nil {
		authAddr = t.Auth.Addr()
	}
	logf("sandbox: topology up in %v (master %s, %d replicas, auth %s, dir %s)",
		time.Since(begin).Round(time.Millisecond), t.Master.Addr(), len(t.Replicas), authAddr, t.Opts.BaseDir)
	return t, nil
}

// create lays out the instance directory from the template and starts the server for the first
// time, moving to a new port when the picked one was taken meanwhile.
func (s *Server) create(ctx context.Context, tpl string, port int) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("sandbox: %s: %w", s.Name, err)
	}
	if err := copyDir(tpl, s.DataDir); err != nil {
		return fmt.Errorf("sandbox: %s: copying template datadir: %w", s.Name, err)
	}
	s.life.Lock()
	defer s.life.Unlock()
	s.Port = port
	for attempt := 1; ; attempt++ {
		err := s.start(ctx)
		if err == nil || !errors.Is(err, errPortInUse) || attempt == portAttempts || ctx.Err() != nil {
			return err
		}
		p, perr := freePorts(1)
		if perr != nil {
			return errors.Join(err, perr)
		}
		s.logf("sandbox: %s: port %d taken, retrying on %d", s.Name, s.Port, p[0])
		s.Port = p[0]
	}
}

// freePorts reserves n distinct free loopback ports by listening on them all at once, then
// releases them for the servers to bind.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("sandbox: picking a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// parallel runs f for every server concurrently and joins the errors.
func parallel(servers []*Server, f func(i int, s *Server) error) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { errs[i] = f(i, s) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// configure creates accounts and wires replication.
func (t *Topology) configure(ctx context.Context) error {
	o := t.Opts
	f := t.bin.flavor
	master := []string{}
	master = append(master, createUser(f, replUser, replPassword, false)...)
	master = append(master, "GRANT REPLICATION SLAVE ON *.* TO "+account(replUser))
	if err := t.Master.execUsers(ctx, master); err != nil {
		return err
	}
	// Replicas start from an empty GTID position, so they replay the master's whole binlog,
	// including the statements above; replica-side statements below are not binlogged.
	others := append([]*Server{}, t.Replicas...)
	if t.Auth != nil {
		others = append(others, t.Auth)
	}
	err := parallel(others, func(_ int, s *Server) error {
		if s == t.Auth {
			stmts := append(createUser(f, o.AppUser, o.AppPassword, true),
				"GRANT ALL PRIVILEGES ON *.* TO "+account(o.AppUser))
			stmts = append(stmts, createUser(f, o.AuthServiceUser, o.AuthServicePassword, true)...)
			for _, g := range AuthServiceGrants {
				stmts = append(stmts, "GRANT "+g+" TO "+account(o.AuthServiceUser))
			}
			if err := s.execUsers(ctx, stmts); err != nil {
				return err
			}
			s.ServiceUser, s.ServicePassword = o.AuthServiceUser, o.AuthServicePassword
			return nil
		}
		return s.Exec(ctx, changeMaster(f, t.Master.Port)...)
	})
	if err != nil {
		return err
	}
	// Created after replication runs, so it reaches the replicas through the binlog and every
	// server agrees on the GTID history.
	svc := append(createUser(f, o.ServiceUser, o.ServicePassword, true),
		"GRANT ALL PRIVILEGES ON *.* TO "+account(o.ServiceUser),
		"CREATE DATABASE IF NOT EXISTS "+TestDatabase)
	return t.Master.execUsers(ctx, svc)
}

// execUsers runs account statements; on MySQL, where mysql_native_password may be unavailable
// (8.4 without --mysql-native-password, 9.x), it retries with the default plugin.
func (s *Server) execUsers(ctx context.Context, stmts []string) error {
	err := s.Exec(ctx, stmts...)
	if err == nil || s.bin.flavor != flavorMySQL {
		return err
	}
	fallback := make([]string, len(stmts))
	for i, q := range stmts {
		fallback[i] = strings.Replace(q, " IDENTIFIED WITH mysql_native_password BY ", " IDENTIFIED BY ", 1)
	}
	if ferr := s.Exec(ctx, fallback...); ferr != nil {
		return errors.Join(err, ferr)
	}
	return nil
}

func account(user string) string { return quote(user) + "@'%'" }

// createUser returns statements creating user@'%' (replacing any existing one). native asks
// for mysql_native_password, which clients and the auth relay handle everywhere.
func createUser(f flavor, user, password string, native bool) []string {
	if f == flavorMariaDB {
		return []string{"CREATE OR REPLACE USER " + account(user) +
			" IDENTIFIED VIA mysql_native_password USING PASSWORD(" + quote(password) + ")"}
	}
	drop := "DROP USER IF EXISTS " + account(user)
	if native {
		return []string{drop, "CREATE USER " + account(user) +
			" IDENTIFIED WITH mysql_native_password BY " + quote(password)}
	}
	return []string{drop, "CREATE USER " + account(user) + " IDENTIFIED BY " + quote(password)}
}

func changeMaster(f flavor, masterPort int) []string {
	if f == flavorMariaDB {
		return []string{
			"STOP SLAVE",
			fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER=%s, "+
				"MASTER_PASSWORD=%s, MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
				masterPort, quote(replUser), quote(replPassword)),
			"START SLAVE",
		}
	}
	return []string{
		"STOP REPLICA",
		fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT=%d, SOURCE_USER=%s, "+
			"SOURCE_PASSWORD=%s, SOURCE_AUTO_POSITION=1, SOURCE_CONNECT_RETRY=1, GET_SOURCE_PUBLIC_KEY=1",
			masterPort, quote(replUser), quote(replPassword)),
		"START REPLICA",
	}
}

// enableSemiSync switches master-side semi-sync on and waits until every replica's IO thread is
// counted as a semi-sync replica (Rpl_semi_sync_master_clients), so the first write after Start
// already waits for an acknowledgement. The replicas asked for semi-sync when they connected
// (rpl_semi_sync_slave_enabled is on from the start), and MariaDB counts them even though the
// master side was still off then.
func (t *Topology) enableSemiSync(ctx context.Context) error {
	if err := t.Master.Exec(ctx, "SET GLOBAL rpl_semi_sync_master_enabled = ON"); err != nil {
		return err
	}
	for {
		n, err := t.Master.semiSyncClients(ctx)
		if err != nil {
			return err
		}
		if n >= len(t.Replicas) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox: %s: %d of %d replicas connected as semi-sync replicas: %w", t.Master.Name, n, len(t.Replicas), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// semiSyncClients reads Rpl_semi_sync_master_clients.
func (s *Server) semiSyncClients(ctx context.Context) (int, error) {
	v, err := s.Status(ctx, "Rpl_semi_sync_master_clients")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("sandbox: %s: Rpl_semi_sync_master_clients = %q: %w", s.Name, v, err)
	}
	return n, nil
}

// Servers returns the master, the replicas in order, and the auth server when there is one.
func (t *Topology) Servers() []*Server {
	var s []*Server
	if t.Master != nil {
		s = append(s, t.Master)
	}
	s = append(s, t.Replicas...)
	if t.Auth != nil {
		s = append(s, t.Auth)
	}
	return s
}

// Stop shuts every server down (in parallel, gracefully, SIGKILL after a bound), closes the
// root pools and removes BaseDir if Start created it. It may be called more than once.
func (t *Topology) Stop() error {
	servers := t.Servers()
	err := parallel(servers, func(_ int, s *Server) error {
		return errors.Join(s.Stop(), s.closeDB())
	})
	if t.createdDir {
		if rerr := os.RemoveAll(t.Opts.BaseDir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("sandbox: removing %s: %w", t.Opts.BaseDir, rerr))
		}
	}
	if t.socketDir != "" {
		if rerr := os.RemoveAll(t.socketDir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("sandbox: removing %s: %w", t.socketDir, rerr))
		}
	}
	if t.Opts.Logf != nil && len(servers) > 0 {
		t.Opts.Logf("sandbox: stopped %d servers", len(servers))
	}
	return err
}

// WaitReplicated waits until every running replica has applied the master's current GTID
// position (gtid_binlog_pos on MariaDB, gtid_executed on MySQL). It polls with short
// server-side waits until ctx ends (60s when ctx has no deadline) and fails early when a
// replica's SQL thread stopped with an error. Replicas that are not running are skipped.
func (t *Topology) WaitReplicated(ctx context.Context) error {
	if t.Master == nil || !t.Master.Running() {
		return errors.New("sandbox: WaitReplicated: master is not running")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}
	posQuery := "SELECT @@GLOBAL.gtid_binlog_pos"
	if t.bin.flavor == flavorMySQL {
		posQuery = "SELECT @@GLOBAL.gtid_executed"
	}
	db, err := t.Master.RootDB()
	if err != nil {
		return err
	}
	var pos string
	if err := db.QueryRowContext(ctx, posQuery).Scan(&pos); err != nil {
		return fmt.Errorf("sandbox: %s: reading GTID position: %w", t.Master.Name, err)
	}
	pos = strings.ReplaceAll(pos, "\n", "")
	if pos == "" {
		return nil
	}
	var running []*Server
	for _, r := range t.Replicas {
		if r.Running() {
			running = append(running, r)
		}
	}
	return parallel(running, func(_ int, r *Server) error { return r.waitGTID(ctx, pos) })
}

// waitGTID blocks until this replica has applied pos.
func (s *Server) waitGTID(ctx context.Context, pos string) error {
	q := "SELECT MASTER_GTID_WAIT(" + quote(pos) + ", 0.5)" // 0 = reached, -1 = timeout
	if s.bin.flavor == flavorMySQL {
		q = "SELECT WAIT_FOR_EXECUTED_GTID_SET(" + quote(pos) + ", 0.5)" // 0 = reached, 1 = timeout
	}
	var lastErr error
	for {
		db, err := s.RootDB()
		if err != nil {
			return err
		}
		var res int
		err = db.QueryRowContext(ctx, q).Scan(&res)
		if err == nil && res == 0 {
			return nil
		}
		lastErr = err
		st, serr := s.ReplicaStatus(ctx)
		if serr == nil && st != nil && st["Last_SQL_Errno"] != "" && st["Last_SQL_Errno"] != "0" {
			return fmt.Errorf("sandbox: %s: replication SQL thread error %s: %s", s.Name, st["Last_SQL_Errno"], st["Last_SQL_Error"])
		}
		if ctx.Err() != nil {
			detail := ""
			if st != nil {
				detail = fmt.Sprintf(" (Slave_IO_Running=%s Slave_SQL_Running=%s Gtid_IO_Pos=%s Last_IO_Error=%q)",
					st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Gtid_IO_Pos"], st["Last_IO_Error"])
			}
			if lastErr != nil {
				detail += fmt.Sprintf(" (last error: %v)", lastErr)
			}
			return fmt.Errorf("sandbox: %s has not applied master GTID position %s: %w%s", s.Name, pos, ctx.Err(), detail)
		}
		if err != nil {
			// Not reachable right now (restarting?): do not spin.
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// StartAll starts one topology per element of opts, all at once, and returns them in the same
// order; it is how a sharded setup comes up (one NoAuth topology per cluster plus one with the
// auth server) in the time of the slowest. On any error the topologies that did start are
// stopped and the errors of all the others are joined. Each returned topology is owned by the
// caller as after Start.
func StartAll(ctx context.Context, opts []Options) ([]*Topology, error) {
	topos := make([]*Topology, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i, o := range opts {
		wg.Go(func() { topos[i], errs[i] = Start(ctx, o) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, t := range topos {
			if t != nil {
				err = errors.Join(err, t.Stop())
			}
		}
		return nil, err
	}
	return topos, nil
}
