package soak

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-proxy/sluice/tests/internal/sluicebin"
)

// sluiceProcess is a sluice started by startSluice.
type sluiceProcess struct {
	pid     int
	addr    string // client listen address
	metrics string // metrics listen address
	log     *procLog
	http    *http.Client
}

// startSluice writes cfg to a file and runs bin with it until the test
// ends; it returns once sluice has logged its listen addresses. At the end
// the process gets SIGTERM and must exit with status 0.
func startSluice(t *testing.T, bin, cfg string) *sluiceProcess {
	t.Helper()
	log := &procLog{ready: make(chan servingLine, 1), warnings: map[string]*kindCount{}}
	proc := sluicebin.Start(t, bin, cfg, log)
	proc.StopAtCleanup(t, 30*time.Second, log.tail)
	exited := proc.Exited
	p := &sluiceProcess{
		pid: proc.Cmd.Process.Pid, log: log,
		// No keep-alive: a scrape leaves no idle HTTP connection (and its
		// goroutine) behind in sluice to blur the count.
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	select {
	case l := <-log.ready:
		p.addr, p.metrics = l.Listen, l.Metrics
	case err := <-exited:
		exited <- err // for the cleanup
		t.Fatalf("sluice exited before serving (%v):\n%s", err, log.tail())
	case <-time.After(30 * time.Second):
		t.Fatalf("sluice did not report its listen address within 30s:\n%s", log.tail())
	}
	if p.metrics == "" {
		t.Fatalf("sluice did not report a metrics_listen address:\n%s", log.tail())
	}
	return p
}

// gauges are the process figures the soak compares, from one scrape of
// sluice's /metrics plus /proc.
type gauges struct {
	goroutines int
	fds        int   // process_open_fds: counts the scrape's own socket
	rss        int64 // process_resident_memory_bytes
	heapInuse  int64 // go_memstats_heap_inuse_bytes
	hwm        int64 // VmHWM of /proc/<pid>/status: peak RSS so far
	clients    int   // sluice_client_connections
	poolOpen   int   // sluice_pool_open_connections, all backends
	poolInUse  int   // sluice_pool_in_use_connections, all backends
	poolIdle   int   // sluice_pool_idle_connections, all backends
	// Counters since sluice started.
	clientErrs  int // sluice_client_errors_total: ERR packets sent to clients
	backendErrs int // sluice_backend_errors_total: backend connections that failed or broke
	loginsNotOK int // sluice_logins_total other than result="ok"
	poolClosed  int // sluice_pool_closed_connections_total
}

// scrape reads the gauges.
func (p *sluiceProcess) scrape(t *testing.T) gauges {
	t.Helper()
	resp, err := p.http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		t.Fatalf("scraping sluice's /metrics: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing sluice's /metrics: %v", err)
	}
	gauge := func(name string) float64 {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) != 1 {
			t.Fatalf("sluice's /metrics has no single %s sample", name)
		}
		return f.GetMetric()[0].GetGauge().GetValue()
	}
	// sum adds up a gauge's or counter's samples whose labels do not
	// include skip (a "name=value" pair).
	sum := func(name, skip string) int {
		v := 0.0
	next:
		for _, m := range fams[name].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName()+"="+l.GetValue() == skip {
					continue next
				}
			}
			v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
		return int(v)
	}
	return gauges{
		clients:     int(gauge("sluice_client_connections")),
		poolOpen:    sum("sluice_pool_open_connections", ""),
		poolInUse:   sum("sluice_pool_in_use_connections", ""),
		poolIdle:    sum("sluice_pool_idle_connections", ""),
		clientErrs:  sum("sluice_client_errors_total", ""),
		backendErrs: sum("sluice_backend_errors_total", ""),
		loginsNotOK: sum("sluice_logins_total", "result=ok"),
		poolClosed:  sum("sluice_pool_closed_connections_total", ""),
		goroutines:  int(gauge("go_goroutines")),
		fds:         int(gauge("process_open_fds")),
		rss:         int64(gauge("process_resident_memory_bytes")),
		heapInuse:   int64(gauge("go_memstats_heap_inuse_bytes")),
		hwm:         procStatusKB(t, p.pid, "VmHWM:") << 10,
	}
}

// procStatusKB reads a numeric field of /proc/<pid>/status (kB for the Vm
// fields).
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			v, err := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status %s: %v", pid, field, err)
			}
			return v
		}
	}
	t.Fatalf("/proc/%d/status has no %s line", pid, field)
	return 0
}

// servingLine is what the "sluice serving" log line reports.
type servingLine struct {
	Listen  string `json:"listen"`
	Metrics string `json:"metrics_listen"`
}

// procLog takes sluice's JSON log lines: it reports the addresses of the
// "sluice serving" line on ready, counts every line above info by level and
// message (in a healthy topology there should be none) except slow-query
// lines, which it only counts, and keeps the last
// lines for failure messages. Safe for concurrent use.
type procLog struct {
	mu       sync.Mutex
	partial  []byte
	last     []string
	ready    chan servingLine
	served   bool
	warnings map[string]*kindCount
	slow     int // "slow query" lines
}

// kindCount is how often one kind of error happened, with its first
// occurrence in full.
type kindCount struct {
	n     int
	first string
}

func (l *procLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		if len(l.last) == 20 {
			l.last = l.last[1:]
		}
		l.last = append(l.last, line)
		var m struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
			servingLine
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			l.count("sluice output not JSON", line)
			continue
		}
		if !l.served && m.Msg == "sluice serving" && m.Listen != "" {
			l.served = true
			l.ready <- m.servingLine
		}
		switch {
		case m.Msg == "slow query":
			// A statement over slow_query_threshold (1s) is no error: on
			// a loaded machine a lock wait or a stalled disk can do it.
			// It is reported, not failed.
			l.slow++
		case m.Level != "info" && m.Level != "debug":
			l.count("sluice log "+m.Level+": "+m.Msg, line)
		}
	}
	l.partial = append([]byte(nil), l.partial...)
	return len(b), nil
}

func (l *procLog) count(kind, example string) {
	k := l.warnings[kind]
	if k == nil {
		k = &kindCount{first: example}
		l.warnings[kind] = k
	}
	k.n++
}

func (l *procLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.last, "\n") + string(l.partial)
}

// slowQueries is how many slow-query lines sluice logged.
func (l *procLog) slowQueries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slow
}

// snapshot copies the warning counts.
func (l *procLog) snapshot() map[string]kindCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]kindCount, len(l.warnings))
	for k, v := range l.warnings {
		out[k] = *v
	}
	return out
}

// sortedKinds returns m's keys, most frequent first.
func sortedKinds(m map[string]kindCount) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]].n != m[keys[j]].n {
			return m[keys[i]].n > m[keys[j]].n
		}
		return keys[i] < keys[j]
	})
	return keys
}
