package sandbox

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Bounds for process lifecycle waits. Readiness uses the caller's context deadline, or
// defaultStartTimeout when it has none.
const (
	defaultStartTimeout = 60 * time.Second
	stopTimeout         = 60 * time.Second
	killTimeout         = 30 * time.Second
	rootIdleConns       = 4
)

// Server is one database server process of a sandbox, owned by its Topology. The exported
// fields are fixed once Start (the package function) returns; read them from any goroutine.
//
// Start, Stop and Kill are serialised by the Server (calling them from several goroutines is
// safe, they run one after another). Running, PID, Addr, DSN, RootDB, Exec, ReplicaStatus, Status
// and Variable are safe to call concurrently with each other and with the lifecycle methods.
type Server struct {
	Name     string // "master", "replica1", ..., "auth"
	Port     int
	ServerID uint32
	DataDir  string
	Socket   string
	ErrorLog string
	// ServiceUser and ServicePassword are sluice's account on an auth server
	// (Options.AuthServiceUser), set once it is created; empty on every other server.
	ServiceUser, ServicePassword string

	dir      string // instance directory holding the data dir, pid file and error log
	pidFile  string
	readOnly bool
	semiSync bool // Options.SemiSync: semi-sync options on the command line
	tls      TLSFiles
	bin      *serverBinary
	logf     func(string, ...any)
	// proxyNetworks is Options.AuthProxyProtocolNetworks on the auth server.
	proxyNetworks string
	// authServer: the topology's auth server, which lets accounts without SUPER create
	// functions while its binary log is on (the mirror's stubs; see AuthServiceGrants).
	authServer bool

	life sync.Mutex // serialises Start, Stop, Kill

	mu      sync.Mutex // guards the fields below
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has exited and been reaped
	waitErr error         // cmd.Wait result, valid once done is closed
	db      *sql.DB
}

func newServer(bin *serverBinary, dir, socketDir, name string, id uint32, readOnly bool, logf func(string, ...any)) *Server {
	return &Server{
		Name:     name,
		ServerID: id,
		DataDir:  filepath.Join(dir, "data"),
		Socket:   filepath.Join(socketDir, name+".sock"),
		ErrorLog: filepath.Join(dir, "error.log"),
		dir:      dir,
		pidFile:  filepath.Join(dir, "mysqld.pid"),
		readOnly: readOnly,
		bin:      bin,
		logf:     logf,
	}
}

// Addr returns the server's TCP address, "127.0.0.1:<port>".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
}

// DSN returns a go-sql-driver/mysql DSN for user over TCP to this server, with a 5s dial
// timeout and 30s read and write timeouts. db may be empty.
func (s *Server) DSN(user, password, db string) string {
	cfg := mysql.NewConfig()
	cfg.User = user
	cfg.Passwd = password
	cfg.Net = "tcp"
	cfg.Addr = s.Addr()
	cfg.DBName = db
	cfg.Timeout = 5 * time.Second
	cfg.ReadTimeout = 30 * time.Second
	cfg.WriteTimeout = 30 * time.Second
	return cfg.FormatDSN()
}

// rootDSN is root over the unix socket (root@localhost, empty password).
func (s *Server) rootDSN() string {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "unix"
	cfg.Addr = s.Socket
	cfg.Timeout = 5 * time.Second
	return cfg.FormatDSN()
}

// RootDB returns a connection pool for root over the server's unix socket. The pool is created
// on first use and shared by all callers; it survives Stop/Kill/Start (stale connections are
// dropped when the server goes away) and is closed by Topology.Stop. Do not Close it yourself.
func (s *Server) RootDB() (*sql.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db != nil {
		return s.db, nil
	}
	db, err := sql.Open("mysql", s.rootDSN())
	if err != nil {
		return nil, fmt.Errorf("sandbox: %s: %w", s.Name, err)
	}
	db.SetMaxIdleConns(rootIdleConns)
	db.SetConnMaxIdleTime(time.Minute)
	s.db = db
	return db, nil
}

// Exec runs stmts in order as root on one connection (so session settings such as
// sql_log_bin carry over), stopping at the first error, which names the server and statement.
func (s *Server) Exec(ctx context.Context, stmts ...string) error {
	db, err := s.RootDB()
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sandbox: %s: connect as root: %w", s.Name, err)
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sandbox: %s: %s: %w", s.Name, redact(q), err)
		}
	}
	return nil
}

// redact hides passwords in statements that appear in errors.
func redact(q string) string {
	for _, kw := range []string{"IDENTIFIED", "PASSWORD"} {
		if i := strings.Index(strings.ToUpper(q), kw); i >= 0 {
			return q[:i+len(kw)] + "..."
		}
	}
	return q
}

// Running reports whether the server process started by this Server is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// PID returns the process id of the running server, or 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	select {
	case <-s.done:
		return 0
	default:
		return s.cmd.Process.Pid
	}
}

func (s *Server) args() []string {
	a := []string{
		"--no-defaults",
		"--user=root",
		"--datadir=" + s.DataDir,
		"--port=" + strconv.Itoa(s.Port),
		"--bind-address=127.0.0.1",
		"--socket=" + s.Socket,
		"--pid-file=" + s.pidFile,
		"--log-error=" + s.ErrorLog,
		"--server-id=" + strconv.FormatUint(uint64(s.ServerID), 10),
		"--log-bin=mysql-bin",
		"--relay-log=relay-bin",
		"--binlog-format=ROW",
		"--skip-name-resolve",
		"--max-connections=1000",
		"--max-allowed-packet=64M",
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_general_ci",
		"--innodb-buffer-pool-size=64M",
		"--innodb-flush-log-at-trx-commit=2",
		"--innodb-buffer-pool-load-at-startup=0",
		"--innodb-buffer-pool-dump-at-shutdown=0",
		"--sync-binlog=0",
		"--tmpdir=" + s.dir,
	}
	switch s.bin.flavor {
	case flavorMariaDB:
		a = append(a,
			"--log-slave-updates=1",
			"--slave-net-timeout=10",
			"--gtid-strict-mode=1",
			"--innodb-log-file-size="+innodbLogFileSize,
			"--innodb-temp-data-file-path=ibtmp1:1M:autoextend",
		)
	default:
		a = append(a,
			"--loose-log-replica-updates=ON",
			"--loose-replica-net-timeout=10",
			"--gtid-mode=ON",
			"--enforce-gtid-consistency=ON",
			"--loose-mysqlx=OFF",
			"--loose-innodb-redo-log-capacity=67108864",
			"--loose-mysql-native-password=ON",
		)
	}
	if s.readOnly {
		a = append(a, "--read-only=1")
	}
	if s.authServer {
		a = append(a, "--log-bin-trust-function-creators=1")
	}
	if s.semiSync {
		// Every server gets both sides' settings, so any of them can be promoted or repointed;
		// only rpl_semi_sync_master_enabled is switched on at run time (see Options.SemiSync).
		a = append(a,
			"--rpl-semi-sync-slave-enabled=ON",
			"--rpl-semi-sync-master-wait-point=AFTER_SYNC",
			"--rpl-semi-sync-master-timeout="+strconv.FormatInt(SemiSyncTimeout.Milliseconds(), 10),
		)
	}
	if s.proxyNetworks != "" {
		a = append(a, "--proxy-protocol-networks="+s.proxyNetworks)
	}
	if s.tls.Cert != "" {
		a = append(a, "--ssl-ca="+s.tls.CA, "--ssl-cert="+s.tls.Cert, "--ssl-key="+s.tls.Key)
	}
	return a
}

// SetReadOnlyAtStart sets whether the server's later starts pass --read-only=1, as a DBA's
// my.cnf does for a server that must take no writes until someone decides otherwise: a crashed
// master that a failover may have replaced comes back read-only instead of as a second
// writable server. Start (the package function) starts replicas read-only and the master and
// the auth server writable; this changes only the starts that follow, not a running server.
func (s *Server) SetReadOnlyAtStart(on bool) {
	s.life.Lock()
	defer s.life.Unlock()
	s.readOnly = on
}

// Start starts the server on its port and data dir and waits until root can connect over the
// unix socket. It works for the first start and after Stop or Kill. The server keeps running
// when ctx ends; ctx only bounds the wait (default 60s without a deadline). If the server dies
// during startup the error names it and carries the tail of its error log.
func (s *Server) Start(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	return s.start(ctx)
}

func (s *Server) start(ctx context.Context) error {
	if s.Running() {
		return fmt.Errorf("sandbox: %s: already running (pid %d)", s.Name, s.PID())
	}
	if _, hasDeadline := ctx.Deadline(); !hasDeadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}
	// Leftovers of a killed process would only confuse the new one.
	_ = os.Remove(s.Socket)
	_ = os.Remove(s.pidFile)

	logFile, err := os.OpenFile(s.ErrorLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", s.Name, err)
	}
	defer logFile.Close() // the child has its own copy
	var offset int64
	if fi, err := logFile.Stat(); err == nil {
		offset = fi.Size()
	}

	cmd := exec.Command(s.bin.path, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // a terminal's Ctrl-C goes to us, not straight to the servers
		Pdeathsig: syscall.SIGKILL, // never outlive the process that started us
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sandbox: %s: starting %s: %w", s.Name, s.bin.path, err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done, s.waitErr = cmd, done, nil
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.waitErr = err
		s.mu.Unlock()
		close(done)
	}()

	if err := s.waitReady(ctx, done); err != nil {
		_ = s.kill()
		tail := tailFile(s.ErrorLog, offset, 25)
		if strings.Contains(tail, "Address already in use") || strings.Contains(tail, "Can't start server: Bind on TCP/IP port") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return fmt.Errorf("sandbox: %s (port %d) did not start: %w\n--- tail of %s ---\n%s", s.Name, s.Port, err, s.ErrorLog, tail)
	}
	s.logf("sandbox: %s up on %s (pid %d)", s.Name, s.Addr(), cmd.Process.Pid)
	return nil
}

// waitReady polls connect+ping as root until it succeeds, the process exits or ctx ends.
func (s *Server) waitReady(ctx context.Context, done <-chan struct{}) error {
	db, err := s.RootDB()
	if err != nil {
		return err
	}
	delay := 5 * time.Millisecond
	var lastErr error
	for {
		select {
		case <-done:
			s.mu.Lock()
			werr := s.waitErr
			s.mu.Unlock()
			return fmt.Errorf("process exited: %v", werr)
		default:
		}
		if _, statErr := os.Stat(s.Socket); statErr == nil {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			lastErr = db.PingContext(pctx)
			cancel()
			if lastErr == nil {
				return nil
			}
		} else {
			lastErr = fmt.Errorf("socket %s not there yet", s.Socket)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("not accepting connections: %w (last error: %v)", ctx.Err(), lastErr)
		case <-done:
			t.Stop()
		case <-t.C:
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

// Stop shuts the server down gracefully (SIGTERM) and waits for it to exit; after 60s it
// falls back to SIGKILL and reports that. Stopping a server that is not running is a no-op.
func (s *Server) Stop() error {
	s.life.Lock()
	defer s.life.Unlock()
	return s.stop()
}

func (s *Server) stop() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a frozen server could not shut down
	s.dropIdle()                            // say goodbye while the server still listens
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := s.kill(); err != nil {
		return err
	}
	return fmt.Errorf("sandbox: %s did not shut down within %v; killed", s.Name, stopTimeout)
}

// Freeze stops the server's process (SIGSTOP) without closing anything: its sockets stay
// open and the kernel still accepts connections, but nothing answers, as with a hung host.
// Thaw resumes it; Stop thaws it first, Kill kills it as it is.
//
// Freeze returns once every thread of the process has stopped. kill(2) only starts a
// multi-threaded process's group stop: the thread that takes the signal must be scheduled to
// stop the others, and until then a connection thread woken by a query runs it. A caller that
// sent a statement right after a bare SIGSTOP could see it answered.
func (s *Server) Freeze() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	pid := s.PID()
	deadline := time.Now().Add(5 * time.Second)
	for {
		stopped, err := allThreadsStopped(pid)
		if err != nil {
			return fmt.Errorf("sandbox: %s: freeze: %w", s.Name, err)
		}
		if stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: %s: threads still running 5s after SIGSTOP", s.Name)
		}
		time.Sleep(time.Millisecond)
	}
}

// allThreadsStopped reports whether every thread of process pid is in the stopped state (T).
func allThreadsStopped(pid int) (bool, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			if os.IsNotExist(err) {
				continue // the thread ended
			}
			return false, err
		}
		// The state follows the command name, which is in parentheses and may hold
		// spaces: "pid (comm) S ...".
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			return false, fmt.Errorf("unexpected %s/%s/stat: %q", dir, t.Name(), stat)
		}
		if stat[i+2] != 'T' {
			return false, nil
		}
	}
	return true, nil
}

// Thaw resumes a server that Freeze stopped (SIGCONT).
func (s *Server) Thaw() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("sandbox: %s is not running", s.Name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("sandbox: %s: %v: %w", s.Name, sig, err)
	}
	return nil
}

// Kill sends SIGKILL to the server and waits until the process is gone. The data dir is kept,
// so Start brings the same server back (after InnoDB crash recovery). Killing a server that is
// not running is a no-op.
func (s *Server) Kill() error {
	s.life.Lock()
	defer s.life.Unlock()
	return s.kill()
}

func (s *Server) kill() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
	default:
		s.dropIdle() // close idle root connections cleanly before the process vanishes
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(killTimeout):
		return fmt.Errorf("sandbox: %s (pid %d) still alive %v after SIGKILL", s.Name, cmd.Process.Pid, killTimeout)
	}
	return nil
}

// dropIdle closes the root pool's idle connections; called just before the process goes away
// so they quit cleanly instead of lingering as dead connections.
func (s *Server) dropIdle() {
	s.mu.Lock()
	db := s.db
	s.mu.Unlock()
	if db != nil {
		db.SetMaxIdleConns(0)
		db.SetMaxIdleConns(rootIdleConns)
	}
}

// closeDB closes the cached root pool; a later RootDB opens a new one.
func (s *Server) closeDB() error {
	s.mu.Lock()
	db := s.db
	s.db = nil
	s.mu.Unlock()
	if db == nil {
		return nil
	}
	return db.Close()
}

// queryRow runs a single-row query as root and returns the named columns as strings
// (NULL becomes ""). It serves SHOW SLAVE STATUS and friends, whose column sets differ by version.
func (s *Server) queryRow(ctx context.Context, q string) (map[string]string, error) {
	db, err := s.RootDB()
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %s: %s: %w", s.Name, q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("sandbox: %s: %s: %w", s.Name, q, err)
		}
		return nil, nil
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, fmt.Errorf("sandbox: %s: %s: %w", s.Name, q, err)
	}
	m := make(map[string]string, len(cols))
	for i, c := range cols {
		m[c] = string(vals[i])
	}
	return m, rows.Err()
}

// ReplicaStatus returns the first row of SHOW SLAVE STATUS (SHOW REPLICA STATUS on MySQL)
// keyed by column name, or nil when the server is not a replica.
func (s *Server) ReplicaStatus(ctx context.Context) (map[string]string, error) {
	q := "SHOW SLAVE STATUS"
	if s.bin.flavor == flavorMySQL {
		q = "SHOW REPLICA STATUS"
	}
	m, err := s.queryRow(ctx, q)
	if err != nil || m == nil {
		return m, err
	}
	// Present MySQL 8's Replica_/Source_ names under the classic names as well.
	r := strings.NewReplacer("Replica", "Slave", "Source", "Master")
	for k, v := range m {
		if nk := r.Replace(k); nk != k {
			if _, ok := m[nk]; !ok {
				m[nk] = v
			}
		}
	}
	return m, nil
}

// quote returns s as a single-quoted SQL string literal.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\x00", `\0`, "\n", `\n`, "\r", `\r`, "\x1a", `\Z`)
	return "'" + r.Replace(s) + "'"
}

// Status returns the value of one global status variable (SHOW GLOBAL STATUS), read as root.
// A variable the server does not have is an error naming it.
func (s *Server) Status(ctx context.Context, name string) (string, error) {
	m, err := s.queryRow(ctx, "SHOW GLOBAL STATUS LIKE "+quote(likeExact(name)))
	if err != nil {
		return "", err
	}
	if m == nil {
		return "", fmt.Errorf("sandbox: %s: no status variable %s", s.Name, name)
	}
	return m["Value"], nil
}

// Variable returns the value of one global system variable (SHOW GLOBAL VARIABLES), read as
// root. A variable the server does not have is an error naming it.
func (s *Server) Variable(ctx context.Context, name string) (string, error) {
	m, err := s.queryRow(ctx, "SHOW GLOBAL VARIABLES LIKE "+quote(likeExact(name)))
	if err != nil {
		return "", err
	}
	if m == nil {
		return "", fmt.Errorf("sandbox: %s: no system variable %s", s.Name, name)
	}
	return m["Value"], nil
}

// likeExact escapes LIKE wildcards, so a variable name matches only itself.
func likeExact(name string) string {
	return strings.NewReplacer(`\`, `\\`, "_", `\_`, "%", `\%`).Replace(name)
}
