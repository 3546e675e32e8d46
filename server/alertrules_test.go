package server

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
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
	// ruleMatcherRe is the first matcher of a selector's matchers, with the
	// comma after it: its label name, operator and double-quoted value.
	ruleMatcherRe = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)`)
	// ruleGroupingRe is a by, without, on or ignoring clause's label list.
	ruleGroupingRe = regexp.MustCompile(`\b(?:by|without|on|ignoring)\s*\(([^)]*)\)`)
	// scrapeLabels are the labels Prometheus adds at scrape; their values
	// are the scrape's, not sluice's.
	scrapeLabels = map[string]bool{"job": true, "instance": true}
)

// exportedSeries maps each metric sluice exports (a histogram with its
// _bucket, _sum and _count) to its label names, and each of those to the
// values its series carry.
type exportedSeries map[string]map[string]map[string]bool

// exportedAtStart gathers what srv exports. Since every series exists at 0
// from the start (TestMetricsAtStart), these are all the label values a
// rule can match; the values the configuration names (cluster, backend,
// user) are those of the test's configuration, so a rule that pins one
// fails the check too, as a rule shipped for every deployment should.
func exportedAtStart(t *testing.T, srv *Server) exportedSeries {
	t.Helper()
	fams, err := srv.metrics.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedSeries{}
	for _, f := range fams {
		ls := map[string]map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if ls[l.GetName()] == nil {
					ls[l.GetName()] = map[string]bool{}
				}
				ls[l.GetName()][l.GetValue()] = true
			}
		}
		exported[f.GetName()] = ls
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				exported[f.GetName()+suffix] = ls
			}
		}
	}
	return exported
}

// literalAlternatives splits a matcher's regular expression into its
// alternatives when it is only literals joined by |, as in
// "promoted|followed"; for anything else (a character class, a group, a
// repetition) it reports false, and the values are not checked.
func literalAlternatives(re string) ([]string, bool) {
	alts := strings.Split(re, "|")
	for _, a := range alts {
		if a == "" || regexp.QuoteMeta(a) != a {
			return nil, false
		}
	}
	return alts, true
}

// checkRuleExprs returns what is wrong with the expressions of the rules
// file raw against what sluice exports: an expression not on its line, a
// sluice_ metric it does not export, a label the metric lacks (matched or
// grouped by), or a value an =, != or literal =~, !~ matcher names that
// none of the metric's series carries.
func checkRuleExprs(raw string, exported exportedSeries) []string {
	var problems []string
	exprs := ruleExprRe.FindAllStringSubmatch(raw, -1)
	if n := strings.Count(raw, "- alert:"); n == 0 || len(exprs) != n {
		return []string{fmt.Sprintf("%d alerts, %d one-line expressions: keep each expr on its line", n, len(exprs))}
	}
	for _, e := range exprs {
		expr := e[1]
		if strings.HasPrefix(expr, "|") || strings.HasPrefix(expr, ">") {
			problems = append(problems, fmt.Sprintf("expression %q is not on one line", expr))
			continue
		}
		used := map[string]bool{}
		for _, sel := range ruleSelectorRe.FindAllStringSubmatch(expr, -1) {
			name := sel[1]
			ls, ok := exported[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("%q queries %s, which sluice does not export", expr, name))
				continue
			}
			for l := range ls {
				used[l] = true
			}
			rest := strings.TrimSuffix(strings.TrimPrefix(sel[2], "{"), "}")
			for strings.TrimSpace(rest) != "" {
				m := ruleMatcherRe.FindStringSubmatch(rest)
				if m == nil {
					problems = append(problems, fmt.Sprintf("%q: cannot read the matchers %q of %s", expr, rest, name))
					break
				}
				rest = rest[len(m[0]):]
				label, op := m[1], m[2]
				if scrapeLabels[label] {
					continue
				}
				values, ok := ls[label]
				if !ok {
					problems = append(problems, fmt.Sprintf("%q matches label %q, which %s does not have", expr, label, name))
					continue
				}
				value, err := strconv.Unquote(`"` + m[3] + `"`)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%q: cannot read the value %q of %s: %v", expr, m[3], label, err))
					continue
				}
				want := []string{value}
				if op == "=~" || op == "!~" {
					if want, ok = literalAlternatives(value); !ok {
						continue
					}
				} else if value == "" {
					continue // matches the series without the label
				}
				for _, v := range want {
					if !values[v] {
						problems = append(problems, fmt.Sprintf("%q matches %s %q, which no series of %s carries (it has %v)",
							expr, label, v, name, sortedKeys(values)))
					}
				}
			}
		}
		for _, g := range ruleGroupingRe.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !used[l] && !scrapeLabels[l] {
					problems = append(problems, fmt.Sprintf("%q groups by %q, which none of its sluice metrics has", expr, l))
				}
			}
		}
	}
	return problems
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestRuleCheckerCatchesWrongValues: checkRuleExprs, given a rule that
// names a label value sluice does not export (a misspelt state, one wrong
// alternative of an outcome list), reports that value and no other; it
// passes the values sluice does export, and leaves a regular expression
// that is not a list of literals alone.
func TestRuleCheckerCatchesWrongValues(t *testing.T) {
	exported := exportedAtStart(t, offlineServer(t, "", 1))
	for _, tc := range []struct {
		expr string
		bad  []string // the values the checker must name, in order
	}{
		{`sluice_backend_state{role="replica",state="down"} == 1`, nil},
		{`sluice_backend_state{role="replica",state="dwon"} == 1`, []string{`state "dwon"`}},
		{`sluice_backend_state{role="slave", state="down"} == 1`, []string{`role "slave"`}},
		{`sluice_backend_state{role!="primary"} == 1`, []string{`role "primary"`}},
		{`increase(sluice_failovers_total{outcome=~"promoted|followed|switchover"}[10m]) > 0`, nil},
		{`increase(sluice_failovers_total{outcome=~"promoted|folowed|switchover"}[10m]) > 0`, []string{`outcome "folowed"`}},
		{`increase(sluice_failovers_total{outcome!~"failed|refused"}[10m]) > 0`, []string{`outcome "refused"`}},
		{`increase(sluice_failovers_total{outcome=~"promot.*"}[10m]) > 0`, nil},
		{`sum by (instance, user) (increase(sluice_rate_limited_statements_total{result="refused"}[5m])) > 0`, nil},
		{`sum by (instance, user) (increase(sluice_rate_limited_statements_total{result="rejected"}[5m])) > 0`, []string{`result "rejected"`}},
		{`sluice_cluster_writable{job="sluice",instance="db1:6070"} == 0`, nil},
	} {
		rules := "groups:\n  - name: t\n    rules:\n      - alert: T\n        expr: " + tc.expr + "\n"
		problems := checkRuleExprs(rules, exported)
		if len(problems) != len(tc.bad) {
			t.Errorf("%s: problems %q, want %d naming %q", tc.expr, problems, len(tc.bad), tc.bad)
			continue
		}
		for i, want := range tc.bad {
			if !strings.Contains(problems[i], want) {
				t.Errorf("%s: problem %q does not name %s", tc.expr, problems[i], want)
			}
		}
	}
}

// TestAlertRulesUseExportedMetrics: every sluice_ metric the alert rules in
// deploy/prometheus-rules.yml query is one sluice exports at start, every
// label they match or group by is one of its labels (or a label Prometheus
// adds at scrape), every value they match (role="replica", each of
// outcome=~"promoted|followed|switchover") is one its series carry at
// start, and every alert the operations guide documents is a rule and the
// other way round. promtool checks the syntax and fires the rules (make
// test-rules); only this test knows what sluice exports.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../deploy/prometheus-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkRuleExprs(string(raw), exportedAtStart(t, offlineServer(t, "", 1))) {
		t.Error(p)
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
