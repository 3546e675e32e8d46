package sandbox

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// These tests run real server processes. A missing server binary is a failure, not a skip.

func TestFindServerBinary(t *testing.T) {
	p, err := FindServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(p) {
		t.Fatalf("FindServerBinary = %q, want an absolute path", p)
	}
}

func TestQuoteAndDSN(t *testing.T) {
	for in, want := range map[string]string{
		"plain":    "'plain'",
		`a'b\c`:    `'a\'b\\c'`,
		"x\ny\x00": `'x\ny\0'`,
	} {
		if got := quote(in); got != want {
			t.Errorf("quote(%q) = %s, want %s", in, got, want)
		}
	}
	s := &Server{Port: 3999}
	cfg, err := mysql.ParseDSN(s.DSN("u", "p@ss:/", "db"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Net != "tcp" || cfg.Addr != "127.0.0.1:3999" || cfg.User != "u" || cfg.Passwd != "p@ss:/" ||
		cfg.DBName != "db" || cfg.Timeout == 0 || cfg.ReadTimeout == 0 || cfg.WriteTimeout == 0 {
		t.Errorf("DSN round trip gave %+v", cfg)
	}
	if got := redact("CREATE USER 'a'@'%' IDENTIFIED BY 'secret'"); strings.Contains(got, "secret") {
		t.Errorf("redact left the password in: %s", got)
	}
}

// TestPortTaken starts one server on a port someone else holds; it must move to a free port.
func TestPortTaken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin, err := findBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tpl, err := templateDir(ctx, bin, dir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	s := newServer(bin, filepath.Join(dir, "solo"), dir, "solo", 77, false, t.Logf)
	defer s.closeDB()
	if err := s.create(ctx, tpl, busy); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if s.Port == busy || !s.Running() {
		t.Fatalf("port %d (busy %d), running %v", s.Port, busy, s.Running())
	}
	if err := s.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err == nil {
		t.Fatal("second Start of a running server succeeded")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.Running() || s.PID() != 0 {
		t.Fatal("still running after Stop")
	}
}

// TestStartFailure: a server that cannot start is named and its error log tail is reported.
func TestStartFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin, err := findBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := newServer(bin, filepath.Join(dir, "broken"), dir, "broken", 78, false, t.Logf)
	defer s.closeDB()
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.Port = 1 // never reached: there is no data dir
	err = s.Start(ctx)
	if err == nil {
		s.Stop()
		t.Fatal("Start without a data dir succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, "broken") || !strings.Contains(msg, "tail of") || !strings.Contains(msg, "[ERROR]") {
		t.Fatalf("error lacks server name or log tail: %v", err)
	}
	if s.Running() {
		t.Fatal("Running after failed start")
	}
}

func TestTopology(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	begin := time.Now()
	topo, err := Start(ctx, Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("topology start took %v", time.Since(begin).Round(time.Millisecond))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			topo.Stop()
		}
	})
	if n := len(topo.Servers()); n != 4 {
		t.Fatalf("%d servers, want 4", n)
	}
	o := topo.Opts

	t.Run("Replication", func(t *testing.T) {
		if err := topo.Master.Exec(ctx,
			"CREATE TABLE sluice_test.t (id INT PRIMARY KEY, v VARCHAR(64), b LONGBLOB)",
			"INSERT INTO sluice_test.t (id, v) VALUES (1, 'héllo ✓ 😀')",
		); err != nil {
			t.Fatal(err)
		}
		// A 20 MB BLOB through the service account (needs max_allowed_packet=64M).
		svc, err := sql.Open("mysql", topo.Master.DSN(o.ServiceUser, o.ServicePassword, TestDatabase))
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		blob := bytes.Repeat([]byte{0xab}, 20<<20)
		tb := time.Now()
		if _, err := svc.ExecContext(ctx, "INSERT INTO t (id, b) VALUES (2, ?)", blob); err != nil {
			t.Fatal(err)
		}
		t.Logf("20 MB BLOB insert took %v", time.Since(tb).Round(time.Millisecond))
		// Root pools are shared and safe for concurrent use.
		var wg sync.WaitGroup
		for range 4 {
			for _, s := range topo.Servers() {
				wg.Go(func() {
					if err := s.Exec(ctx, "SELECT 1", "DO SLEEP(0.01)"); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()

		tb = time.Now()
		if err := topo.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("WaitReplicated took %v", time.Since(tb).Round(time.Millisecond))
		masterPos := gtidBinlogPos(ctx, t, topo.Master)
		for _, r := range topo.Replicas {
			db, err := r.RootDB()
			if err != nil {
				t.Fatal(err)
			}
			var v string
			if err := db.QueryRowContext(ctx, "SELECT v FROM sluice_test.t WHERE id = 1").Scan(&v); err != nil {
				t.Fatalf("%s: %v", r.Name, err)
			}
			if v != "héllo ✓ 😀" {
				t.Errorf("%s: v = %q", r.Name, v)
			}
			var n int
			if err := db.QueryRowContext(ctx, "SELECT LENGTH(b) FROM sluice_test.t WHERE id = 2").Scan(&n); err != nil || n != len(blob) {
				t.Errorf("%s: blob length %d, %v", r.Name, n, err)
			}
			// log-slave-updates + gtid-strict-mode: replicas carry the same GTID history.
			if p := gtidBinlogPos(ctx, t, r); p != masterPos {
				t.Errorf("%s: gtid_binlog_pos %q, master %q", r.Name, p, masterPos)
			}
		}
	})

	t.Run("ReplicaState", func(t *testing.T) {
		for _, s := range topo.Servers() {
			db, err := s.RootDB()
			if err != nil {
				t.Fatal(err)
			}
			var ro, packet int
			if err := db.QueryRowContext(ctx, "SELECT @@read_only, @@max_allowed_packet").Scan(&ro, &packet); err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			wantRO := 0
			if strings.HasPrefix(s.Name, "replica") {
				wantRO = 1
			}
			if ro != wantRO || packet != 64<<20 {
				t.Errorf("%s: read_only=%d max_allowed_packet=%d", s.Name, ro, packet)
			}
			st, err := s.ReplicaStatus(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if wantRO == 0 {
				if st != nil {
					t.Errorf("%s replicates: %v", s.Name, st)
				}
				continue
			}
			if st["Slave_IO_Running"] != "Yes" || st["Slave_SQL_Running"] != "Yes" || st["Master_Port"] != strconv.Itoa(topo.Master.Port) {
				t.Errorf("%s: IO=%s SQL=%s master port %s, last IO error %q", s.Name,
					st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Master_Port"], st["Last_IO_Error"])
			}
		}
	})

	t.Run("Logins", func(t *testing.T) {
		for _, s := range append([]*Server{topo.Master}, topo.Replicas...) {
			if err := login(ctx, s, o.ServiceUser, o.ServicePassword); err != nil {
				t.Errorf("service user on %s: %v", s.Name, err)
			}
			if err := login(ctx, s, o.AppUser, o.AppPassword); !isAccessDenied(err) {
				t.Errorf("app user on %s: got %v, want access denied", s.Name, err)
			}
		}
		if err := login(ctx, topo.Auth, o.AppUser, o.AppPassword); err != nil {
			t.Errorf("app user on auth: %v", err)
		}
		if err := login(ctx, topo.Auth, o.AppUser, "wrong"); !isAccessDenied(err) {
			t.Errorf("app user with wrong password on auth: got %v, want access denied", err)
		}
		if err := login(ctx, topo.Auth, o.ServiceUser, o.ServicePassword); !isAccessDenied(err) {
			t.Errorf("service user on auth: got %v, want access denied", err)
		}
		if err := login(ctx, topo.Auth, o.AuthServiceUser, o.AuthServicePassword); err != nil {
			t.Errorf("auth service user on auth: %v", err)
		}
		if err := login(ctx, topo.Master, o.AuthServiceUser, o.AuthServicePassword); !isAccessDenied(err) {
			t.Errorf("auth service user on the master: got %v, want access denied", err)
		}
		if topo.Auth.ServiceUser != o.AuthServiceUser || topo.Auth.ServicePassword != o.AuthServicePassword || topo.Master.ServiceUser != "" {
			t.Errorf("Server.ServiceUser: auth %q, master %q; want %q on the auth server only", topo.Auth.ServiceUser, topo.Master.ServiceUser, o.AuthServiceUser)
		}
	})

	t.Run("KillStartReplica", func(t *testing.T) {
		r := topo.Replicas[0]
		pid := r.PID()
		if err := r.Kill(); err != nil {
			t.Fatal(err)
		}
		if r.Running() || r.PID() != 0 || processAlive(pid) {
			t.Fatalf("%s still running after Kill", r.Name)
		}
		if err := topo.Master.Exec(ctx, "INSERT INTO sluice_test.t (id, v) VALUES (3, 'while down')"); err != nil {
			t.Fatal(err)
		}
		if err := topo.WaitReplicated(ctx); err != nil { // skips the dead replica
			t.Fatal(err)
		}
		begin := time.Now()
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s restarted in %v", r.Name, time.Since(begin).Round(time.Millisecond))
		if err := topo.Master.Exec(ctx, "INSERT INTO sluice_test.t (id, v) VALUES (4, 'after restart')"); err != nil {
			t.Fatal(err)
		}
		if err := topo.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
		db, _ := r.RootDB()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sluice_test.t WHERE id IN (3, 4)").Scan(&n); err != nil || n != 2 {
			t.Fatalf("%s after restart: %d rows, %v", r.Name, n, err)
		}
		if err := login(ctx, r, o.ServiceUser, o.ServicePassword); err != nil {
			t.Errorf("service user after restart: %v", err)
		}
	})

	t.Run("RestartMaster", func(t *testing.T) {
		// Graceful Stop/Start of the master: replicas reconnect on their own (connect retry 1s).
		m := topo.Master
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
		if m.Running() {
			t.Fatal("master running after Stop")
		}
		if err := topo.WaitReplicated(ctx); err == nil {
			t.Fatal("WaitReplicated succeeded without a master")
		}
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		if err := m.Exec(ctx, "INSERT INTO sluice_test.t (id, v) VALUES (5, 'new master process')"); err != nil {
			t.Fatal(err)
		}
		if err := topo.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("replicas caught up %v after the master came back", time.Since(begin).Round(time.Millisecond))
	})

	t.Run("RestartMasterReadOnly", func(t *testing.T) {
		// A killed master brought back as a DBA's my.cnf would after a crash: read-only
		// from its first moment; and writable again once that is lifted.
		m := topo.Master
		readOnly := func() string {
			t.Helper()
			v, err := m.Variable(ctx, "read_only")
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		m.SetReadOnlyAtStart(true)
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if v := readOnly(); v != "ON" {
			t.Errorf("read_only %s after a start with SetReadOnlyAtStart(true), want ON", v)
		}
		if err := m.Stop(); err != nil {
			t.Fatal(err)
		}
		m.SetReadOnlyAtStart(false)
		if err := m.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if v := readOnly(); v != "OFF" {
			t.Errorf("read_only %s after a start with SetReadOnlyAtStart(false), want OFF", v)
		}
		if err := topo.WaitReplicated(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Stop", func(t *testing.T) {
		var pids []int
		for _, s := range topo.Servers() {
			if pid := s.PID(); pid != 0 {
				pids = append(pids, pid)
			}
		}
		if len(pids) != 4 {
			t.Fatalf("pids %v, want 4", pids)
		}
		begin := time.Now()
		stopped = true
		if err := topo.Stop(); err != nil {
			t.Fatal(err)
		}
		t.Logf("stop took %v", time.Since(begin).Round(time.Millisecond))
		for _, pid := range pids {
			if processAlive(pid) {
				t.Errorf("pid %d still alive", pid)
			}
		}
		if procs := processesMentioning(o.BaseDir); len(procs) > 0 {
			t.Errorf("processes still using %s: %v", o.BaseDir, procs)
		}
		if _, err := os.Stat(o.BaseDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("BaseDir %s still there (%v)", o.BaseDir, err)
		}
		if err := topo.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
}

func login(ctx context.Context, s *Server, user, password string) error {
	db, err := sql.Open("mysql", s.DSN(user, password, ""))
	if err != nil {
		return err
	}
	defer db.Close()
	var cur string
	if err := db.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&cur); err != nil {
		return err
	}
	if want := user + "@%"; cur != want {
		return errors.New("logged in as " + cur + ", want " + want)
	}
	return nil
}

func gtidBinlogPos(ctx context.Context, t *testing.T, s *Server) string {
	t.Helper()
	db, err := s.RootDB()
	if err != nil {
		t.Fatal(err)
	}
	var pos string
	if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatalf("%s: %v", s.Name, err)
	}
	return pos
}

func isAccessDenied(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1045
}

func processAlive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// processesMentioning lists pids whose command line contains s.
func processesMentioning(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
