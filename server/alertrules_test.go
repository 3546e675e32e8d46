package server

import (
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

var (
	// ruleExprRe finds each rule's expression; the file keeps every one on
	// its line, which the test checks, so none is missed.
	ruleExprRe = regexp.MustCompile(`(?m)^\s+expr:\s*(.*)$`)
	// ruleSelectorRe is a metric name and its matchers: sluice_x{a="1",b=~"2"}.
	ruleSelectorRe = regexp.MustCompile(`(sluice_[a-z0-9_]+)(\{[^}]*\})?`)
	// ruleMatcherRe is one matcher's label name.
	ruleMatcherRe = regexp.MustCompile(`([a-z_]+)\s*(?:=~|!~|!=|=)`)
	// ruleGroupingRe is a by, without, on or ignoring clause's label list.
	ruleGroupingRe = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
)

// TestAlertRulesUseExportedMetrics: every sluice_ metric the alert rules in
// deploy/prometheus-rules.yml query is one sluice exports at start, every
// label they match or group by is one of its labels (or a label Prometheus
// adds at scrape), and every alert the operations guide documents is a
// rule and the other way round. promtool checks the syntax and fires the
// rules (make test-rules); only this test knows what sluice exports.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../deploy/prometheus-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv := offlineServer(t, "", 1)
	fams, err := srv.metrics.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]bool{}
	for _, f := range fams {
		ls := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = true
			}
		}
		labels[f.GetName()] = ls
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				labels[f.GetName()+suffix] = ls
			}
		}
	}
	scrapeLabels := map[string]bool{"job": true, "instance": true}

	exprs := ruleExprRe.FindAllStringSubmatch(string(raw), -1)
	if n := strings.Count(string(raw), "- alert:"); n == 0 || len(exprs) != n {
		t.Fatalf("%d alerts, %d one-line expressions: keep each expr on its line", n, len(exprs))
	}
	for _, e := range exprs {
		expr := e[1]
		if strings.HasPrefix(expr, "|") || strings.HasPrefix(expr, ">") {
			t.Errorf("expression %q is not on one line", expr)
			continue
		}
		used := map[string]bool{}
		for _, sel := range ruleSelectorRe.FindAllStringSubmatch(expr, -1) {
			name := sel[1]
			ls, ok := labels[name]
			if !ok {
				t.Errorf("%q queries %s, which sluice does not export", expr, name)
				continue
			}
			for l := range ls {
				used[l] = true
			}
			for _, m := range ruleMatcherRe.FindAllStringSubmatch(sel[2], -1) {
				if !ls[m[1]] && !scrapeLabels[m[1]] {
					t.Errorf("%q matches label %q, which %s does not have", expr, m[1], name)
				}
			}
		}
		for _, g := range ruleGroupingRe.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !used[l] && !scrapeLabels[l] {
					t.Errorf("%q groups by %q, which none of its sluice metrics has", expr, l)
				}
			}
		}
	}

	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	ruleNames := map[string]bool{}
	for _, m := range regexp.MustCompile(`- alert: (\w+)`).FindAllStringSubmatch(string(raw), -1) {
		ruleNames[m[1]] = true
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(Sluice\\w+)`").FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	for n := range ruleNames {
		if !documented[n] {
			t.Errorf("alert %s is not in the alert table of docs/operations.md", n)
		}
	}
	for n := range documented {
		if !ruleNames[n] {
			t.Errorf("docs/operations.md documents alert %s, which deploy/prometheus-rules.yml lacks", n)
		}
	}

	// The dashboard's panels name the alerts about what they show: each
	// name is a rule, and each rule has its panel.
	dash, err := os.ReadFile("../deploy/grafana-sluice.json")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bSluice[A-Z]\w+`).FindAllString(string(dash), -1) {
		linked[m] = true
		if !ruleNames[m] {
			t.Errorf("the dashboard names alert %s, which deploy/prometheus-rules.yml lacks", m)
		}
	}
	for n := range ruleNames {
		if !linked[n] {
			t.Errorf("no dashboard panel names alert %s", n)
		}
	}
}
