package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// mariadbCLI runs the mariadb command-line client against sluice and returns
// its stdout, stderr and exit error.
func mariadbCLI(t *testing.T, password string, args ...string) (string, string, error) {
	t.Helper()
	bin, err := exec.LookPath("mariadb")
	if err != nil {
		t.Fatalf("the mariadb client is required (make deps): %v", err)
	}
	_ = bin
	host, port, _ := net.SplitHostPort(env.addr)
	base := []string{"--no-defaults", "-h" + host, "-P" + port, "-u" + env.topo.Opts.AppUser, "-p" + password, "-N", "-B"}
	return runCLI(t, append(base, args...)...)
}

// runCLI runs the mariadb client with args and returns stdout, stderr and
// its exit error.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	bin, err := exec.LookPath("mariadb")
	if err != nil {
		t.Fatalf("the mariadb client is required (make deps): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return strings.TrimSpace(out.String()), strings.TrimSpace(errb.String()), err
}

func TestMariadbCLI(t *testing.T) {
	pw := env.topo.Opts.AppPassword
	t.Run("read on a replica", func(t *testing.T) {
		out, errOut, err := mariadbCLI(t, pw, "-e", "SELECT @@server_id")
		if err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		id, _ := strconv.Atoi(out)
		if !env.replicaIDs[uint32(id)] {
			t.Fatalf("SELECT @@server_id = %q, want a replica", out)
		}
	})
	t.Run("wrong password gets 1045", func(t *testing.T) {
		_, errOut, err := mariadbCLI(t, "wrong", "-e", "SELECT 1")
		if err == nil || !strings.Contains(errOut, "ERROR 1045") {
			t.Fatalf("err=%v stderr=%q, want ERROR 1045", err, errOut)
		}
	})
	t.Run("hint needs --comments", func(t *testing.T) {
		out, errOut, err := mariadbCLI(t, pw, "--comments", "-e", "/* sluice:master */ SELECT @@server_id")
		if err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		if out != strconv.Itoa(int(env.masterID)) {
			t.Fatalf("hinted SELECT ran on %q, want master %d", out, env.masterID)
		}
	})
	t.Run("schema, write and read back", func(t *testing.T) {
		script := "USE sluice_test; CREATE TABLE cli_t (id INT PRIMARY KEY, sid INT); " +
			"INSERT INTO cli_t VALUES (1, @@server_id); SELECT DATABASE(); " +
			"BEGIN; SELECT sid FROM cli_t WHERE id = 1; COMMIT; DROP TABLE cli_t;"
		out, errOut, err := mariadbCLI(t, pw, "-e", script)
		if err != nil {
			t.Fatalf("%v: %s", err, errOut)
		}
		want := "sluice_test\n" + strconv.Itoa(int(env.masterID))
		if out != want {
			t.Fatalf("output %q, want %q", out, want)
		}
	})
}

type pdoResult struct {
	OK            bool   `json:"ok"`
	ErrorCode     int    `json:"error_code"`
	Error         string `json:"error"`
	ReadServerID  uint32 `json:"read_server_id"`
	WriteServerID uint32 `json:"write_server_id"`
	TxServerID    uint32 `json:"tx_server_id"`
	Text          string `json:"text"`
}

func runPDO(t *testing.T, password string) pdoResult {
	t.Helper()
	php, err := exec.LookPath("php")
	if err != nil {
		t.Fatalf("php with pdo_mysql is required (make deps-test): %v", err)
	}
	host, port, _ := net.SplitHostPort(env.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, php, "testdata/pdo.php")
	cmd.Env = append(os.Environ(), "SLUICE_HOST="+host, "SLUICE_PORT="+port,
		"SLUICE_USER="+env.topo.Opts.AppUser, "SLUICE_PASSWORD="+password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("php: %v\n%s", err, out)
	}
	var r pdoResult
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		t.Fatalf("php output %q: %v", out, err)
	}
	return r
}

func TestPHPPDO(t *testing.T) {
	t.Run("routes reads, writes and transactions", func(t *testing.T) {
		r := runPDO(t, env.topo.Opts.AppPassword)
		if !r.OK {
			t.Fatalf("PDO failed: %d %s", r.ErrorCode, r.Error)
		}
		if !env.replicaIDs[r.ReadServerID] {
			t.Fatalf("read on %d, want a replica", r.ReadServerID)
		}
		if r.WriteServerID != env.masterID || r.TxServerID != env.masterID {
			t.Fatalf("write on %d, transaction read on %d, want master %d", r.WriteServerID, r.TxServerID, env.masterID)
		}
		if r.Text != "h\u00e9llo" {
			t.Fatalf("utf8mb4 text came back as %q", r.Text)
		}
	})
	t.Run("wrong password gets 1045", func(t *testing.T) {
		r := runPDO(t, "wrong")
		if r.OK || r.ErrorCode != 1045 {
			t.Fatalf("got ok=%v code=%d %s, want 1045", r.OK, r.ErrorCode, r.Error)
		}
	})
}
