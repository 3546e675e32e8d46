package tests

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/sluice-proxy/sluice/proxy"
)

// scrape returns the value of one sample line of the shared sluice's /metrics.
func scrape(t *testing.T, sample string) float64 {
	t.Helper()
	return scrapeFrom(t, env.srv, sample)
}

// scrapeFrom returns the value of one sample line of srv's /metrics, 0 when it has none.
func scrapeFrom(t *testing.T, srv *proxy.Server, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + srv.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

func TestMetricsCountRoutes(t *testing.T) {
	replica0 := scrape(t, `sluice_statements_total{route="replica"}`)
	master0 := scrape(t, `sluice_statements_total{route="master"}`)
	c := conn(t, appDB(t, "", nil))
	ctx := ctxT(t)
	serverID(t, ctx, c, "")
	serverID(t, ctx, c, "/* sluice:master */ ")
	if d := scrape(t, `sluice_statements_total{route="replica"}`) - replica0; d < 1 {
		t.Fatalf("replica statements grew by %v, want >= 1", d)
	}
	if d := scrape(t, `sluice_statements_total{route="master"}`) - master0; d < 1 {
		t.Fatalf("master statements grew by %v, want >= 1", d)
	}
	if scrape(t, "sluice_client_connections") < 1 {
		t.Fatal("sluice_client_connections < 1 with a session open")
	}
	resp, err := http.Get("http://" + env.srv.MetricsAddr().String() + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestMetricsCountPins(t *testing.T) {
	before := scrape(t, `sluice_session_pins_total{reason="user_variables"}`)
	c := conn(t, appDB(t, "", nil))
	mustExecC(t, c, "SET @pinned = 1")
	mustExecC(t, c, "SET @pinned = 2") // the same reason counts once per session
	if d := scrape(t, `sluice_session_pins_total{reason="user_variables"}`) - before; d != 1 {
		t.Fatalf("user_variables pins grew by %v, want 1", d)
	}
}
