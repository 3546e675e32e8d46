package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoEtcd is what FindEtcdBinary's error matches with errors.Is when no etcd binary is
// installed, so a test can tell a missing binary from a cluster that failed to start.
var ErrNoEtcd = errors.New("sandbox: no etcd binary found")

// FindEtcdBinary returns the path of the etcd server binary (Debian's etcd-server package
// installs /usr/bin/etcd): etcd in PATH, else /usr/bin/etcd or /usr/local/bin/etcd. Its error
// matches ErrNoEtcd and names the places searched.
func FindEtcdBinary() (string, error) {
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	tried := []string{"etcd in PATH"}
	for _, p := range []string{"/usr/bin/etcd", "/usr/local/bin/etcd"} {
		if isExecutable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", fmt.Errorf("%w (looked for %s); install etcd-server (scripts/deps.sh test)", ErrNoEtcd, strings.Join(tried, ", "))
}

// EtcdOptions shape an etcd cluster started by StartEtcd.
type EtcdOptions struct {
	// Members is the cluster's size; 3 when 0.
	Members int
	// BaseDir holds one directory per member (data dir and log); a temp dir that Stop
	// removes when empty.
	BaseDir string
	// Logf receives progress lines; nil discards them.
	Logf func(string, ...any)
	// TLS serves the client port over TLS with a throwaway CA and asks
	// clients for a certificate of that CA (--client-cert-auth); the
	// files are EtcdCluster.TLS. Peers still talk plain HTTP.
	TLS bool
}

// EtcdCluster is a local etcd cluster of loopback members started by StartEtcd and owned by
// its caller, who must call Stop. Members is fixed once StartEtcd returns; Endpoints and Stop
// may be called from any goroutine.
type EtcdCluster struct {
	Members []*EtcdMember
	// TLS are the CA and the certificate (for 127.0.0.1, server and
	// client use) of a cluster started with EtcdOptions.TLS; empty without.
	TLS    TLSFiles
	dir    string
	ownDir bool
}

// EtcdMember is one etcd process of an EtcdCluster. Its exported fields are fixed once
// StartEtcd returns. Start, Stop and Kill are serialised (concurrent calls run one after
// another); Running, Endpoint and Healthy are safe to call at any time.
type EtcdMember struct {
	Name       string
	ClientPort int
	PeerPort   int
	DataDir    string
	// Log is the member's combined stdout and stderr, appended across restarts.
	Log string

	bin            string
	tls            TLSFiles
	initialCluster string
	token          string
	logf           func(string, ...any)

	life sync.Mutex // serialises Start, Stop, Kill

	mu      sync.Mutex // guards the fields below
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// StartEtcd starts an etcd cluster of opts.Members members on free 127.0.0.1 ports, each with
// its own data dir, and waits until every member reports healthy (it has a leader). ctx
// bounds the start-up (60s without a deadline); the members keep running after ctx ends. On
// error the members already started are stopped and the error carries the tail of the failing
// member's log. Each process gets Pdeathsig=SIGKILL, so it dies with the test binary.
func StartEtcd(ctx context.Context, opts EtcdOptions) (_ *EtcdCluster, err error) {
	bin, err := FindEtcdBinary()
	if err != nil {
		return nil, err
	}
	if opts.Members <= 0 {
		opts.Members = 3
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}
	c := &EtcdCluster{dir: opts.BaseDir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "sluice-etcd-*"); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		c.ownDir = true
	}
	if opts.TLS {
		if c.TLS, err = writeTLSFiles(c.dir); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	for attempt := 1; ; attempt++ {
		err = c.start(ctx, bin, opts, attempt)
		if err == nil || !errors.Is(err, errPortInUse) || attempt == portAttempts || ctx.Err() != nil {
			return c, err
		}
		// A port picked free was taken before etcd bound it: start afresh on new ones.
		opts.Logf("sandbox: etcd: a port was taken, retrying (%v)", err)
		if serr := c.stopMembers(); serr != nil {
			return c, errors.Join(err, serr)
		}
	}
}

// start lays out and starts every member of a brand-new cluster, then waits for all of them.
func (c *EtcdCluster) start(ctx context.Context, bin string, opts EtcdOptions, attempt int) error {
	ports, err := freePorts(2 * opts.Members)
	if err != nil {
		return err
	}
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	c.Members = make([]*EtcdMember, opts.Members)
	var peers []string
	for i := range c.Members {
		name := fmt.Sprintf("etcd%d", i+1)
		dir := filepath.Join(c.dir, fmt.Sprintf("%s-try%d", name, attempt))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
		c.Members[i] = &EtcdMember{Name: name, ClientPort: ports[2*i], PeerPort: ports[2*i+1],
			DataDir: filepath.Join(dir, "data"), Log: filepath.Join(dir, "etcd.log"), bin: bin, tls: c.TLS,
			token: "sluice-" + hex.EncodeToString(token), logf: opts.Logf}
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", name, ports[2*i+1]))
	}
	for _, m := range c.Members {
		m.initialCluster = strings.Join(peers, ",")
	}
	// Every member must run before any can elect a leader, so all are launched first.
	for _, m := range c.Members {
		m.life.Lock()
		err := m.launch()
		m.life.Unlock()
		if err != nil {
			return err
		}
	}
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { errs[i] = m.waitHealthy(ctx, 0) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	opts.Logf("sandbox: etcd cluster of %d up: %s", len(c.Members), strings.Join(c.Endpoints(), ","))
	return nil
}

// Endpoints are the members' client addresses, "127.0.0.1:<port>", in member order.
func (c *EtcdCluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.Endpoint()
	}
	return out
}

// Stop stops every member (SIGTERM, SIGKILL after a bound) and removes the directory StartEtcd
// created. It may be called more than once.
func (c *EtcdCluster) Stop() error {
	err := c.stopMembers()
	if c.ownDir {
		if rerr := os.RemoveAll(c.dir); rerr != nil {
			err = errors.Join(err, fmt.Errorf("sandbox: removing %s: %w", c.dir, rerr))
		}
	}
	return err
}

func (c *EtcdCluster) stopMembers() error {
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { errs[i] = m.Stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Endpoint is the member's client address, "127.0.0.1:<port>".
func (m *EtcdMember) Endpoint() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.ClientPort))
}

func (m *EtcdMember) args() []string {
	client := m.scheme() + "://" + m.Endpoint()
	peer := fmt.Sprintf("http://127.0.0.1:%d", m.PeerPort)
	a := []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		// Read only on the first start: a restarted member finds its data dir.
		"--initial-cluster=" + m.initialCluster,
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + m.token,
		"--logger=zap",
		"--log-outputs=stderr",
	}
	if m.tls.Cert != "" {
		a = append(a, "--cert-file="+m.tls.Cert, "--key-file="+m.tls.Key, "--trusted-ca-file="+m.tls.CA, "--client-cert-auth")
	}
	return a
}

func (m *EtcdMember) scheme() string {
	if m.tls.Cert != "" {
		return "https"
	}
	return "http"
}

// httpClient asks /health, over TLS with the sandbox's certificate when the
// cluster has TLS.
func (m *EtcdMember) httpClient() (*http.Client, error) {
	if m.tls.Cert == "" {
		return http.DefaultClient, nil
	}
	ca, err := os.ReadFile(m.tls.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(m.tls.Cert, m.tls.Key)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}, nil
}

// launch starts the process without waiting for it; the caller holds m.life.
func (m *EtcdMember) launch() error {
	if m.Running() {
		return fmt.Errorf("sandbox: %s: already running", m.Name)
	}
	logFile, err := os.OpenFile(m.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("sandbox: %s: %w", m.Name, err)
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(m.bin, m.args()...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sandbox: %s: starting %s: %w", m.Name, m.bin, err)
	}
	done := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.done, m.waitErr = cmd, done, nil
	m.mu.Unlock()
	go func() {
		err := cmd.Wait()
		m.mu.Lock()
		m.waitErr = err
		m.mu.Unlock()
		close(done)
	}()
	return nil
}

// waitHealthy polls the member's /health until it says true (the member has a leader), the
// process exits or ctx ends; the error then carries the log written after offset.
func (m *EtcdMember) waitHealthy(ctx context.Context, offset int64) error {
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	delay := 10 * time.Millisecond
	var last error
	for {
		select {
		case <-done:
			m.mu.Lock()
			werr := m.waitErr
			m.mu.Unlock()
			return m.startError(fmt.Errorf("process exited: %v", werr), offset)
		default:
		}
		if last = m.Healthy(ctx); last == nil {
			m.logf("sandbox: %s up on %s", m.Name, m.Endpoint())
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return m.startError(fmt.Errorf("not healthy: %w (last: %v)", ctx.Err(), last), offset)
		case <-done:
			t.Stop()
		case <-t.C:
		}
		if delay < 100*time.Millisecond {
			delay *= 2
		}
	}
}

func (m *EtcdMember) startError(err error, offset int64) error {
	tail := tailFile(m.Log, offset, 25)
	if strings.Contains(tail, "address already in use") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return fmt.Errorf("sandbox: %s (client port %d, peer port %d) did not start: %w\n--- tail of %s ---\n%s",
		m.Name, m.ClientPort, m.PeerPort, err, m.Log, tail)
}

// Healthy asks the member's /health endpoint; nil means it answers and has a leader.
func (m *EtcdMember) Healthy(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodGet, m.scheme()+"://"+m.Endpoint()+"/health", nil)
	if err != nil {
		return err
	}
	client, err := m.httpClient()
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("%s /health: %s %s", m.Name, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// Running reports whether the member's process is alive.
func (m *EtcdMember) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Start starts a stopped or killed member again on its ports and data dir and waits until it
// is healthy, which needs a quorum of the cluster running: restart the members of a cluster
// that lost its quorum concurrently, or wait with WaitHealthy after starting them with
// StartNoWait. ctx bounds the wait (60s without a deadline).
func (m *EtcdMember) Start(ctx context.Context) error {
	offset, err := m.StartNoWait()
	if err != nil {
		return err
	}
	return m.WaitHealthy(ctx, offset)
}

// StartNoWait starts a stopped or killed member again without waiting for it, and returns the
// size of its log before the start, for WaitHealthy.
func (m *EtcdMember) StartNoWait() (int64, error) {
	m.life.Lock()
	defer m.life.Unlock()
	var offset int64
	if fi, err := os.Stat(m.Log); err == nil {
		offset = fi.Size()
	}
	return offset, m.launch()
}

// WaitHealthy waits until the member reports healthy; offset is where its log's tail for an
// error starts (StartNoWait's result). ctx bounds the wait (60s without a deadline).
func (m *EtcdMember) WaitHealthy(ctx context.Context, offset int64) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultStartTimeout)
		defer cancel()
	}
	return m.waitHealthy(ctx, offset)
}

// Stop ends the member gracefully (SIGTERM) and waits for it; after 60s it kills it and says so.
// Stopping a member that is not running is a no-op.
func (m *EtcdMember) Stop() error {
	m.life.Lock()
	defer m.life.Unlock()
	return m.signalAndWait(syscall.SIGTERM, stopTimeout)
}

// Kill ends the member at once (SIGKILL) and waits until the process is gone; its data dir is
// kept, so Start brings it back. Killing a member that is not running is a no-op.
func (m *EtcdMember) Kill() error {
	m.life.Lock()
	defer m.life.Unlock()
	return m.signalAndWait(syscall.SIGKILL, killTimeout)
}

func (m *EtcdMember) signalAndWait(sig syscall.Signal, bound time.Duration) error {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return nil
	case <-time.After(bound):
	}
	if sig == syscall.SIGKILL {
		return fmt.Errorf("sandbox: %s (pid %d) still alive %v after SIGKILL", m.Name, cmd.Process.Pid, bound)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(killTimeout):
		return fmt.Errorf("sandbox: %s (pid %d) still alive %v after SIGKILL", m.Name, cmd.Process.Pid, killTimeout)
	}
	return fmt.Errorf("sandbox: %s did not stop within %v; killed", m.Name, bound)
}
