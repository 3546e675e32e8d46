package loadavg

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "loadavg")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParse(t *testing.T) {
	l1, l5, l15, err := Parse("0.52 0.58 0.59 1/389 12345\n")
	if err != nil || l1 != 0.52 || l5 != 0.58 || l15 != 0.59 {
		t.Fatalf("Parse = %v %v %v %v", l1, l5, l15, err)
	}
	for _, bad := range []string{"", "0.5 0.5", "a 0.5 0.5", "0.5 -1 0.5", "0.5 0.5 NaN", "0.5 0.5 +Inf"} {
		if _, _, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func get(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

func TestHandlerServesReport(t *testing.T) {
	h := Handler(writeFile(t, "4.00 2.50 1.25 3/200 999\n"), 8)
	code, body := get(t, h, http.MethodGet, "/loadavg")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var r Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if r != (Report{Load1: 4, Load5: 2.5, Load15: 1.25, CPUs: 8}) || r.PerCPU() != 0.5 {
		t.Fatalf("report %+v", r)
	}
	if !strings.Contains(body, `"load1":4`) || !strings.Contains(body, `"cpus":8`) {
		t.Fatalf("JSON field names: %s", body)
	}
}

func TestHandlerRereadsTheFile(t *testing.T) {
	p := writeFile(t, "1 1 1\n")
	h := Handler(p, 1)
	if err := os.WriteFile(p, []byte("9 1 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, h, http.MethodGet, "/loadavg"); !strings.Contains(body, `"load1":9`) {
		t.Fatalf("the handler did not read the file again: %s", body)
	}
}

func TestHandlerBadFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	code, body := get(t, Handler(missing, 1), http.MethodGet, "/loadavg")
	if code != http.StatusInternalServerError || !strings.Contains(body, "cannot read the load average") || !strings.Contains(body, missing) {
		t.Fatalf("missing file: %d %q", code, body)
	}
	garbage := writeFile(t, "load is high\n")
	code, body = get(t, Handler(garbage, 1), http.MethodGet, "/loadavg")
	if code != http.StatusInternalServerError || !strings.Contains(body, garbage) || !strings.Contains(body, `field 1 ("load")`) {
		t.Fatalf("garbage file: %d %q", code, body)
	}
}

func TestHandlerMethodAndPath(t *testing.T) {
	h := Handler(writeFile(t, "1 1 1\n"), 1)
	if code, _ := get(t, h, http.MethodPost, "/loadavg"); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", code)
	}
	if code, _ := get(t, h, http.MethodGet, "/"); code != http.StatusNotFound {
		t.Fatalf("GET /: %d", code)
	}
}

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:9107":          "http://127.0.0.1:9107/loadavg",
		"http://127.0.0.1:9107/":         "http://127.0.0.1:9107/loadavg",
		"https://u:p@db1:9107":           "https://u:p@db1:9107/loadavg",
		"http://lb.example/db1/loadavg":  "http://lb.example/db1/loadavg",
		"http://127.0.0.1:9107/custom/x": "http://127.0.0.1:9107/custom/x",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFetch(t *testing.T) {
	srv := httptest.NewServer(Handler(writeFile(t, "0.5 0.4 0.3\n"), 2))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := Fetch(ctx, srv.Client(), URL(srv.URL))
	if err != nil || r != (Report{Load1: 0.5, Load5: 0.4, Load15: 0.3, CPUs: 2}) {
		t.Fatalf("Fetch = %+v, %v", r, err)
	}
}

func TestFetchErrors(t *testing.T) {
	answers := map[string]string{
		"/status": "", "/json": "not json", "/cpus": `{"load1":1,"load5":1,"load15":1,"cpus":0}`,
		"/negative": `{"load1":-1,"load5":1,"load15":1,"cpus":2}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/status" {
			http.Error(w, "sluice-agent: cannot read the load average: boom", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, answers[r.URL.Path])
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for path, want := range map[string]string{
		"/status":   "status 500: sluice-agent: cannot read the load average: boom",
		"/json":     "not a load report",
		"/cpus":     "cpus must be >= 1",
		"/negative": "is not a number >= 0",
	} {
		if _, err := Fetch(ctx, srv.Client(), srv.URL+path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", path, err, want)
		}
	}
	srv.Close()
	if _, err := Fetch(ctx, http.DefaultClient, srv.URL+"/loadavg"); err == nil {
		t.Error("a closed agent gave no error")
	}
}
