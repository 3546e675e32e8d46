// Package promtest reads samples off a Prometheus registry in unit tests.
package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Gathered returns the samples of the metric family name on reg, nil when
// it has none.
func Gathered(t testing.TB, reg prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

// Sample returns the metric of family name on reg whose labels include
// want, nil when there is none.
func Sample(t testing.TB, reg prometheus.Gatherer, name string, want map[string]string) *dto.Metric {
	t.Helper()
next:
	for _, m := range Gathered(t, reg, name) {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}
