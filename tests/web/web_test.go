package web

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/sandbox"
	"github.com/sluice-proxy/sluice/server"
)

const adminPassword = "web-adm-s3cret"

// TestStatusPage loads the status page in headless Chromium, sees the
// master and both replicas up, kills a replica and sees the page show it
// down within 3 s without a reload; it saves a screenshot of each moment.
// The JSON API is compared with the admin port's SHOW output of the same
// moment.
func TestStatusPage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	browser := startBrowser(t)
	topo, err := sandbox.Start(ctx, sandbox.Options{Replicas: 2})
	if err != nil {
		t.Fatalf("cannot start the sandbox topology: %v", err)
	}
	t.Cleanup(func() { _ = topo.Stop() })
	srv := startSluice(t, topo)
	base := "http://" + srv.MetricsAddr().String()

	// A client session, with a few statements for the digests.
	app, err := sql.Open("mysql", dsn(srv.Addr().String(), topo.Opts.AppUser, topo.Opts.AppPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	sess, err := app.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for i := range 3 {
		if _, err := sess.ExecContext(ctx, "SELECT ?", i); err != nil {
			t.Fatal(err)
		}
	}

	if err := chromedp.Do(browser, chromedp.Navigate(base+"/")); err != nil {
		t.Fatalf("loading %s/: %v", base, err)
	}
	// A mark on the window: a reload would lose it.
	if _, err := chromedp.Run(browser, chromedp.Evaluate[bool](`window.sluiceLoadedOnce = true`)); err != nil {
		t.Fatalf("loading %s/: %v", base, err)
	}
	master, r0, r1 := topo.Master.Addr(), topo.Replicas[0].Addr(), topo.Replicas[1].Addr()
	waitStates(t, browser, 20*time.Second, map[string]string{master: "up", r0: "up", r1: "up"})
	screenshot(t, browser, "status-page-up.png")

	admin := adminDB(t, srv)
	t.Run("API matches SHOW", func(t *testing.T) { apiMatchesShow(t, base, admin, false) })
	// The tables below the picture: the session, its digest.
	pageShows(t, browser, `document.getElementById("session-count").textContent === "(1)" &&
		document.querySelector("#digests tbody").textContent.includes("select ?")`, "one session and the digest select ?")

	start := time.Now()
	if err := topo.Replicas[1].Kill(); err != nil {
		t.Fatal(err)
	}
	waitStates(t, browser, 3*time.Second, map[string]string{master: "up", r0: "up", r1: "down"})
	t.Logf("the page showed %s down %v after the kill", r1, time.Since(start).Round(time.Millisecond))
	if same, err := chromedp.Run(browser, chromedp.Evaluate[bool](`window.sluiceLoadedOnce === true`)); err != nil || !same {
		t.Errorf("the page was reloaded (marker gone: %v, %v)", same, err)
	}
	pageShows(t, browser, `[...document.querySelectorAll("#events .kind")].some(e => e.textContent === "backend_down") &&
		document.getElementById("error").hidden`, "the backend_down event and no error")
	screenshot(t, browser, "status-page-replica-down.png")
	t.Run("API matches SHOW after the kill", func(t *testing.T) { apiMatchesShow(t, base, admin, true) })
}

// pageShows polls the page until the JavaScript condition cond is true,
// and fails after 5 s naming what, described, was missing.
func pageShows(t *testing.T, browser context.Context, cond, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, err := chromedp.Run(browser, chromedp.Evaluate[bool](cond))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page does not show %s", what)
		}
		time.Sleep(50 * time.Millisecond) // the poll interval of a deadline loop
	}
}

// startBrowser starts headless Chromium for the test and returns a tab's
// context; the browser is killed when the test ends.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("no chromium on PATH: run scripts/deps.sh test (Debian: apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.NoSandbox, // needed as root, as CI runs
		chromedp.DisableGPU, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1100))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return bctx
}

// startSluice starts an in-process sluice in front of topo on free ports,
// its probes fast so a killed server is seen down quickly.
func startSluice(t *testing.T, topo *sandbox.Topology) *server.Server {
	t.Helper()
	o := sandbox.SluiceOptions{Listen: "127.0.0.1:0",
		ProxyKeys:  []string{`metrics_listen = "127.0.0.1:0"`, `admin_listen = "127.0.0.1:0"`},
		HealthKeys: []string{`interval = "100ms"`, `timeout = "500ms"`, `failures_before_down = 2`, `auto_failover = false`}}
	text := topo.SluiceConfigWith(o) + "\n[admin]\nuser = \"admin\"\npassword = \"" + adminPassword + "\"\n"
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func dsn(addr, user, password string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = user, password, "tcp", addr
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	return c.FormatDSN()
}

func adminDB(t *testing.T, srv *server.Server) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", dsn(srv.AdminAddr().String(), "admin", adminPassword))
	if err != nil {
		t.Fatal(err)
	}
	d.SetMaxOpenConns(1)
	t.Cleanup(func() { d.Close() })
	return d
}

// waitStates polls the page's DOM until every address in want shows its
// state, both in the node's data and in its visible badge, and fails after
// within.
func waitStates(t *testing.T, browser context.Context, within time.Duration, want map[string]string) {
	t.Helper()
	const read = `Object.fromEntries([...document.querySelectorAll(".node")].map(n =>
		[n.dataset.address, n.dataset.state === n.querySelector(".state").textContent ? n.dataset.state : "badge differs"]))`
	deadline := time.Now().Add(within)
	for {
		got, err := chromedp.Run(browser, chromedp.Evaluate[map[string]string](read))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		ok := true
		for addr, state := range want {
			ok = ok && got[addr] == state
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			screenshot(t, browser, "status-page-failed.png")
			t.Fatalf("after %v the page shows %v, want %v", within, got, want)
		}
		time.Sleep(50 * time.Millisecond) // the poll interval of a deadline loop
	}
}

// artifactDir is where screenshots go: $SLUICE_TEST_ARTIFACTS, or else
// artifacts/ beside this test (ignored by git).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SLUICE_TEST_ARTIFACTS")
	if dir == "" {
		dir = "artifacts"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves a PNG of the whole page as a test artifact and logs
// its path.
func screenshot(t *testing.T, browser context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("screenshot %s is not a PNG", name)
		return
	}
	path := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

// show runs a SHOW command on the admin port and returns its rows as
// column → value maps, as the API shows them.
func show(t *testing.T, admin *sql.DB, cmd string) []map[string]string {
	t.Helper()
	rows, err := admin.Query(cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	out := []map[string]string{}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// api fetches one API path and returns its tables.
func api(t *testing.T, base, path string) map[string][]map[string]string {
	t.Helper()
	resp, err := http.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string][]map[string]string
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return out
}

// apiMatchesShow compares each API table with its SHOW command. Probes
// change load and lag while the test reads, so "the same moment" is a SHOW
// before and after the API read that agree with each other: the API must
// then agree with them too. A session's time grows while it runs, so it is
// checked to lie between the two SHOWs instead. Every table must have rows,
// but the events before anything happened.
func apiMatchesShow(t *testing.T, base string, admin *sql.DB, withEvents bool) {
	for _, tc := range []struct{ path, key, cmd, growing string }{
		{"/api/v1/clusters", "clusters", "SHOW CLUSTERS", ""},
		{"/api/v1/clusters", "backends", "SHOW BACKENDS", ""},
		{"/api/v1/clusters", "pools", "SHOW POOLS", ""},
		{"/api/v1/sessions", "sessions", "SHOW SESSIONS", "time"},
		{"/api/v1/digests", "digests", "SHOW QUERY DIGESTS", ""},
		{"/api/v1/digests?limit=1", "digests", "SHOW QUERY DIGESTS LIMIT 1", ""},
		{"/api/v1/events", "events", "SHOW EVENTS", ""},
	} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			before := show(t, admin, tc.cmd)
			got := api(t, base, tc.path)[tc.key]
			after := show(t, admin, tc.cmd)
			if len(after) == 0 && (tc.key != "events" || withEvents) {
				t.Fatalf("%s is empty: nothing to compare", tc.cmd)
			}
			if err := between(before, got, after, tc.growing); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("%s: %v\nSHOW before: %v\nAPI:         %v\nSHOW after:  %v", tc.path, err, before, got, after)
			}
		}
	}
}

// between reports whether got equals before and after (which must equal
// each other) but for the growing column, whose number must lie between
// theirs.
func between(before, got, after []map[string]string, growing string) error {
	strip := func(rows []map[string]string) []map[string]string {
		out := make([]map[string]string, len(rows))
		for i, r := range rows {
			out[i] = map[string]string{}
			for k, v := range r {
				if k != growing {
					out[i][k] = v
				}
			}
		}
		return out
	}
	if !reflect.DeepEqual(strip(before), strip(after)) {
		return fmt.Errorf("the rows changed between the two SHOWs")
	}
	if !reflect.DeepEqual(strip(got), strip(before)) {
		return fmt.Errorf("the API differs from SHOW")
	}
	if growing == "" {
		return nil
	}
	for i := range got {
		b, err1 := strconv.ParseFloat(before[i][growing], 64)
		g, err2 := strconv.ParseFloat(got[i][growing], 64)
		a, err3 := strconv.ParseFloat(after[i][growing], 64)
		if err1 != nil || err2 != nil || err3 != nil || g < b || g > a {
			return fmt.Errorf("row %d %s: API %q is not between SHOW's %q and %q", i, growing, got[i][growing], before[i][growing], after[i][growing])
		}
	}
	return nil
}
