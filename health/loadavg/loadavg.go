// Package loadavg owns the small JSON protocol between sluice-agent and
// sluice: the Report a database host publishes (its 1, 5 and 15 minute load
// averages and CPU count), the HTTP handler the agent serves it with, and
// Fetch, with which sluice's health prober polls it.
//
// It imports nothing of sluice's, so the agent binary stays small. Handler
// and Fetch are safe for concurrent use.
package loadavg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// Path is where the agent serves the report.
const Path = "/loadavg"

// Report is one reading of a host's load, as GET /loadavg returns it.
type Report struct {
	Load1  float64 `json:"load1"`
	Load5  float64 `json:"load5"`
	Load15 float64 `json:"load15"`
	CPUs   int     `json:"cpus"`
}

// PerCPU is the 1-minute load average divided by the CPU count: the load
// signal the least-load balancer compares.
func (r Report) PerCPU() float64 {
	return r.Load1 / float64(max(r.CPUs, 1))
}

// check reports whether r holds usable numbers.
func (r Report) check() error {
	for _, v := range []float64{r.Load1, r.Load5, r.Load15} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("load average %v is not a number >= 0", v)
		}
	}
	if r.CPUs < 1 {
		return fmt.Errorf("cpus must be >= 1 (got %d)", r.CPUs)
	}
	return nil
}

// Parse reads the first three fields of a /proc/loadavg text ("0.52 0.58
// 0.59 1/389 12345"): the 1, 5 and 15 minute load averages.
func Parse(text string) (load1, load5, load15 float64, err error) {
	f := strings.Fields(text)
	if len(f) < 3 {
		return 0, 0, 0, fmt.Errorf("want 3 load averages, got %d fields", len(f))
	}
	var v [3]float64
	for i := range v {
		v[i], err = strconv.ParseFloat(f[i], 64)
		if err != nil || v[i] < 0 || math.IsNaN(v[i]) || math.IsInf(v[i], 0) {
			return 0, 0, 0, fmt.Errorf("field %d (%q) is not a load average", i+1, f[i])
		}
	}
	return v[0], v[1], v[2], nil
}

// ReadFile reads and parses a /proc/loadavg-format file.
func ReadFile(path string) (load1, load5, load15 float64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, 0, err
	}
	load1, load5, load15, err = Parse(string(b))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	return load1, load5, load15, nil
}

// Handler serves GET /loadavg: the load averages read from path (a
// /proc/loadavg-format file) at each request, and cpus, as a Report in
// JSON. A file that cannot be read or parsed gives status 500 with a
// message naming it. Other paths get 404, other methods 405.
func Handler(path string, cpus int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(Path, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "sluice-agent: only GET is supported", http.StatusMethodNotAllowed)
			return
		}
		l1, l5, l15, err := ReadFile(path)
		if err != nil {
			http.Error(w, "sluice-agent: cannot read the load average: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(Report{Load1: l1, Load5: l5, Load15: l15, CPUs: cpus})
	})
	return mux
}

// URL returns where to poll an agent configured as agent: the URL itself
// when it has a path, else its /loadavg.
func URL(agent string) string {
	trimmed := strings.TrimSuffix(agent, "/")
	if i := strings.Index(trimmed, "://"); i >= 0 && !strings.Contains(trimmed[i+3:], "/") {
		return trimmed + Path
	}
	return agent
}

// maxBody bounds what Fetch reads of an answer.
const maxBody = 4096

// Fetch gets one Report from url with client; ctx bounds the request. An
// answer that is not status 200 with a valid Report is an error naming
// what was wrong.
func Fetch(ctx context.Context, client *http.Client, url string) (Report, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Report{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Report{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return Report{}, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Report{}, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var r Report
	if err := json.Unmarshal(body, &r); err != nil {
		return Report{}, fmt.Errorf("not a load report: %w", err)
	}
	if err := r.check(); err != nil {
		return Report{}, errors.New("bad load report: " + err.Error())
	}
	return r, nil
}
