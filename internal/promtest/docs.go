package promtest

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// docMetricRe finds a metric name written in code style as a table row's
// first cell starts it: `sluice_x` or `sluice_x{labels}`.
var docMetricRe = regexp.MustCompile("`(sluice_[a-z0-9_]+)(?:\\{[^`]*\\})?`")

// DocumentedMetrics returns the metrics the "## Metrics" section of the
// Markdown file at path lists in the first cell of its tables' rows, the
// one place the documentation names every metric. A row may name several
// (`a`, `b` `{labels}`). It is an error when the section or its tables are
// missing, so a renamed heading cannot make the check pass on nothing.
func DocumentedMetrics(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("documented metrics: %w", err)
	}
	defer f.Close()
	names := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Metrics"
			continue
		}
		if !in || !strings.HasPrefix(line, "| ") {
			continue
		}
		cells := strings.Split(line, " | ")
		for _, m := range docMetricRe.FindAllStringSubmatch(cells[0], -1) {
			names[m[1]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("documented metrics: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("documented metrics: no metric table under \"## Metrics\" in %s", path)
	}
	return names, nil
}
