package web

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-proxy/sluice/admin"
	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/observe"
	"github.com/sluice-proxy/sluice/rules"
)

// fakeControl is the part of admin.Control the page and the API read; the
// embedded nil interface makes any other call panic, so a handler that
// tried to change something would fail the test.
type fakeControl struct {
	admin.Control
	cfg      *conf.Config
	topo     *health.Topology
	digests  *observe.Digests
	events   *observe.Events
	sessions []admin.SessionRow
}

func (f *fakeControl) Config() *conf.Config         { return f.cfg }
func (f *fakeControl) Topology() *health.Topology   { return f.topo }
func (f *fakeControl) Digests() *observe.Digests    { return f.digests }
func (f *fakeControl) Rules() *rules.Set            { return nil }
func (f *fakeControl) Firewall() *rules.Allowlist   { return rules.NewAllowlist() }
func (f *fakeControl) SaveFirewall() error          { return nil }
func (f *fakeControl) Events() *observe.Events      { return f.events }
func (f *fakeControl) Sessions() []admin.SessionRow { return f.sessions }
func (f *fakeControl) Pool(addr string) (admin.PoolInfo, bool) {
	return admin.PoolInfo{Size: 8, Open: 3, Idle: 2, Queries: 42, WaitTimeout: time.Second}, addr != "127.0.0.1:4"
}

func newFake(t *testing.T) *fakeControl {
	t.Helper()
	cfg, err := conf.Parse([]byte("[auth]\naddress = \"127.0.0.1:1\"\n[[cluster]]\nname = \"main\"\nuser = \"sluice\"\n" +
		"master = \"127.0.0.1:2\"\n  [[cluster.replica]]\n  address = \"127.0.0.1:3\"\n  [[cluster.replica]]\n  address = \"127.0.0.1:4\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeControl{cfg: cfg, topo: health.NewTopology(cfg), digests: observe.NewDigests(), events: &observe.Events{}}
	f.topo.Current().Clusters[0].Replicas[1].Hold(health.StateOffline)
	f.digests.Record("select ? from t", 3*time.Millisecond, 1, false, 0)
	f.digests.Record("select ? from t", 5*time.Millisecond, 1, false, 0)
	f.digests.Record("update t set a = ?", time.Millisecond, 0, true, 0)
	f.events.Add(observe.Event{At: time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC), Kind: "failover", Cluster: "main",
		Backend: "127.0.0.1:3", Detail: "promoted", Epoch: 2})
	f.sessions = []admin.SessionRow{{ID: 7, User: "app", Client: "127.0.0.1:5555", Schema: "shop", State: "Sleep", Time: 1500 * time.Millisecond}}
	return f
}

func serve(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func getJSON(t *testing.T, h http.Handler, path string) map[string][]Row {
	t.Helper()
	rec := serve(t, h, http.MethodGet, path)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s = %d %s: %s", path, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	var out map[string][]Row
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return out
}

// TestAPIMatchesShow: every endpoint's rows are the admin port's SHOW rows,
// column for column, and carry the values the fake topology, digests,
// events and sessions hold.
func TestAPIMatchesShow(t *testing.T) {
	f := newFake(t)
	mux := http.NewServeMux()
	Register(mux, f)
	for _, tc := range []struct {
		path, key string
		show      *admin.Table
	}{
		{"/api/v1/clusters", "clusters", admin.ShowClusters(f)},
		{"/api/v1/clusters", "backends", admin.ShowBackends(f)},
		{"/api/v1/clusters", "pools", admin.ShowPools(f)},
		{"/api/v1/sessions", "sessions", admin.ShowSessions(f)},
		{"/api/v1/digests", "digests", admin.ShowDigests(f, -1)},
		{"/api/v1/digests?limit=1", "digests", admin.ShowDigests(f, 1)},
		{"/api/v1/events", "events", admin.ShowEvents(f)},
	} {
		got := getJSON(t, mux, tc.path)[tc.key]
		if len(got) != len(tc.show.Rows) || len(got) == 0 {
			t.Errorf("%s %s: %d rows, SHOW has %d", tc.path, tc.key, len(got), len(tc.show.Rows))
			continue
		}
		for i, r := range tc.show.Rows {
			for j, col := range tc.show.Columns {
				if v, ok := got[i][col]; !ok || v != r[j] {
					t.Errorf("%s %s row %d %s = %q (present %v), SHOW says %q", tc.path, tc.key, i, col, v, ok, r[j])
				}
			}
			if len(got[i]) != len(tc.show.Columns) {
				t.Errorf("%s %s row %d has %d keys, SHOW has %d columns", tc.path, tc.key, i, len(got[i]), len(tc.show.Columns))
			}
		}
	}
	// The values themselves, so the comparison above is not of two empty
	// or wrong things.
	c := getJSON(t, mux, "/api/v1/clusters")
	if b := c["backends"]; len(b) != 3 || b[0]["role"] != "master" || b[0]["state"] != "up" ||
		b[2]["address"] != "127.0.0.1:4" || b[2]["state"] != "offline" || b[1]["conn_open"] != "3" {
		t.Errorf("backends = %v", b)
	}
	if p := c["pools"]; len(p) != 2 || p[0]["size"] != "8" {
		t.Errorf("pools = %v, want the two backends with a pool", p)
	}
	if d := getJSON(t, mux, "/api/v1/digests?limit=1")["digests"]; d[0]["digest"] != "select ? from t" || d[0]["count"] != "2" || d[0]["max_ms"] != "5.000" {
		t.Errorf("digests?limit=1 = %v", d)
	}
	if e := getJSON(t, mux, "/api/v1/events")["events"]; e[0]["kind"] != "failover" || e[0]["time"] != "2026-12-03 06:00:00.000" || e[0]["epoch"] != "2" {
		t.Errorf("events = %v", e)
	}
	if s := getJSON(t, mux, "/api/v1/sessions")["sessions"]; s[0]["id"] != "7" || s[0]["time"] != "1.500" {
		t.Errorf("sessions = %v", s)
	}
}

// TestAPIEmptyAndBad: no rows is [] (not null), a bad limit is 400, a
// write method is 405 and an unknown path 404.
func TestAPIEmptyAndBad(t *testing.T) {
	f := newFake(t)
	f.sessions = nil
	mux := http.NewServeMux()
	Register(mux, f)
	if rec := serve(t, mux, http.MethodGet, "/api/v1/sessions"); strings.TrimSpace(rec.Body.String()) != `{"sessions":[]}` {
		t.Errorf("no sessions = %s", rec.Body)
	}
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/api/v1/digests?limit=x", http.StatusBadRequest},
		{http.MethodGet, "/api/v1/digests?limit=-2", http.StatusBadRequest},
		{http.MethodPost, "/api/v1/events", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/", http.StatusMethodNotAllowed},
		{http.MethodGet, "/api/v1/nothing", http.StatusNotFound},
		{http.MethodGet, "/nothing", http.StatusNotFound},
	} {
		if rec := serve(t, mux, tc.method, tc.path); rec.Code != tc.code {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, rec.Code, tc.code)
		}
	}
}

// TestPageSelfContained: / serves the page, its script and style sheet
// come from the binary, and none of them loads anything from another host.
func TestPageSelfContained(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, newFake(t))
	page := serve(t, mux, http.MethodGet, "/")
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), `<script src="assets/app.js">`) {
		t.Fatalf("GET / = %d: %s", page.Code, page.Body)
	}
	for _, p := range []string{"/assets/app.js", "/assets/style.css"} {
		if rec := serve(t, mux, http.MethodGet, p); rec.Code != http.StatusOK || rec.Body.Len() < 500 {
			t.Errorf("GET %s = %d, %d bytes", p, rec.Code, rec.Body.Len())
		}
	}
	remote := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(path)
		if err != nil {
			return err
		}
		if m := remote.Find(b); m != nil {
			t.Errorf("%s loads %q from another host", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBasicAuth: without or with wrong credentials every path but the
// open ones gets 401 and a challenge; the right ones pass.
func TestBasicAuth(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, newFake(t))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	h := BasicAuth("ops", "s3cret", mux, "/healthz")
	for _, tc := range []struct {
		name, path, user, password string
		code                       int
	}{
		{"no credentials", "/api/v1/clusters", "", "", http.StatusUnauthorized},
		{"no credentials, page", "/", "", "", http.StatusUnauthorized},
		{"wrong password", "/api/v1/clusters", "ops", "guess", http.StatusUnauthorized},
		{"wrong user", "/api/v1/clusters", "root", "s3cret", http.StatusUnauthorized},
		{"right", "/api/v1/clusters", "ops", "s3cret", http.StatusOK},
		{"healthz stays open", "/healthz", "", "", http.StatusOK},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.path, nil)
		if tc.user != "" {
			req.SetBasicAuth(tc.user, tc.password)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("%s: %d, want %d", tc.name, rec.Code, tc.code)
		}
		if tc.code == http.StatusUnauthorized && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("%s: no basic challenge: %q", tc.name, rec.Header().Get("WWW-Authenticate"))
		}
	}
}
