package observe

import (
	"runtime"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo exports sluice_build_info{version,commit,go_version} 1, the
// usual Prometheus way to put what is running beside its other series (a
// join on it shows which version a change in behaviour came with). The
// version and commit are read at scrape time, so SetBuild may come after
// the registry is served. It is safe for concurrent use.
type buildInfo struct {
	desc *prometheus.Desc
	cur  atomic.Pointer[[2]string] // version, commit
}

func newBuildInfo() *buildInfo {
	b := &buildInfo{desc: prometheus.NewDesc("sluice_build_info",
		"Always 1; its labels are the version and commit the binary was built from and the Go version that built it.",
		[]string{"version", "commit", "go_version"}, nil)}
	// A Server built without SetBuild (tests, a library user) reports
	// what `go build` without the Makefile's stamps would.
	b.set("dev", "unknown")
	return b
}

func (b *buildInfo) set(version, commit string) {
	if version == "" {
		version = "dev"
	}
	if commit == "" {
		commit = "unknown"
	}
	b.cur.Store(&[2]string{version, commit})
}

func (b *buildInfo) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b *buildInfo) Collect(ch chan<- prometheus.Metric) {
	v := b.cur.Load()
	ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, 1, v[0], v[1], runtime.Version())
}
