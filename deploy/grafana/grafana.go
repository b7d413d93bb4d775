// Package grafana holds the Grafana dashboards of the authorization server
// (mcpauth-authserver.json, the mcpauth_ metrics of the admin listener's
// /metrics) and of the gateway (mcpgateway.json, the mcpgateway_ metrics of
// metrics.listen), and reads the PromQL of their panels, so that the tests
// of each program can check that every series a dashboard queries is one
// the program exports.
//
// The dashboards take their Prometheus data source from the import input
// DS_PROMETHEUS (Grafana's "__inputs"), so they import into any Grafana.
package grafana

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Dashboards are the dashboard files, by name.
//
//go:embed *.json
var Dashboards embed.FS

// Names of the dashboard files.
const (
	AuthServer = "mcpauth-authserver.json"
	Gateway    = "mcpgateway.json"
)

// TargetLabels are the labels Prometheus attaches to every series it
// scrapes (the target's job and instance): a query may select on them
// although no program exports them.
var TargetLabels = []string{"job", "instance"}

// Query is one PromQL expression of a dashboard: a panel's target or a
// template variable's query.
type Query struct {
	Where string // "panel 3 \"Tokens issued\" target A", "variable instance"
	Expr  string
}

// dashboard is the part of a dashboard file the queries are read from.
type dashboard struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// Queries reads the PromQL expressions of the dashboard file name: every
// panel's targets (rows' panels included) and every query variable's
// query.
func Queries(name string) ([]Query, error) {
	b, err := Dashboards.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var qs []Query
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				qs = append(qs, Query{Where: fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, t.RefID), Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := ""
		switch x := v.Query.(type) {
		case string:
			q = x
		case map[string]any:
			q, _ = x["query"].(string)
		}
		qs = append(qs, Query{Where: "variable " + v.Name, Expr: q})
	}
	return qs, nil
}

// Selector is a metric a query selects and the labels the query names
// for it: in its matchers, and in the by, without, on, ignoring,
// group_left and group_right clauses of the query (which must hold for
// every metric of the query).
type Selector struct {
	Metric string
	Labels []string
}

// labelValues is a template variable query of Grafana's Prometheus data
// source: label_values(SELECTOR, LABEL).
var labelValues = regexp.MustCompile(`^\s*label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// Selectors returns the metrics expr selects. It reads the PromQL lexical
// grammar (https://prometheus.io/docs/prometheus/latest/querying/basics/):
// an identifier followed by "(" is a function or aggregation, one in a
// grouping clause or a matcher is a label, a keyword is an operator or
// modifier, and any other identifier is a metric name. Strings, ranges
// ([5m], [$__rate_interval]) and Grafana's variables ($name, ${name}) are
// skipped.
func Selectors(expr string) ([]Selector, error) {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		sels, err := Selectors(m[1])
		if err != nil {
			return nil, err
		}
		for i := range sels {
			sels[i].Labels = append(sels[i].Labels, m[2])
		}
		return sels, nil
	}
	var sels []Selector
	var grouping []string
	s := expr
	i := 0
	last := -1 // index in sels of the selector a "{" belongs to
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unclosed [ at %d", i)
			}
			i += j + 1
			continue // a range keeps the selector (x[5m] offset ...)
		case c == '$':
			i++
			if i < len(s) && s[i] == '{' {
				j := strings.IndexByte(s[i:], '}')
				if j < 0 {
					return nil, fmt.Errorf("unclosed ${ at %d", i-1)
				}
				i += j + 1
			} else {
				for i < len(s) && isIdent(s[i]) {
					i++
				}
			}
		case c == '{':
			labels, j, err := matchers(s, i)
			if err != nil {
				return nil, err
			}
			if last < 0 {
				return nil, fmt.Errorf("a selector without a metric name at %d", i)
			}
			sels[last].Labels = append(sels[last].Labels, labels...)
			i = j
			continue
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			word := s[i:j]
			k := j
			for k < len(s) && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n') {
				k++
			}
			switch {
			case groupingKeywords[word]:
				if k < len(s) && s[k] == '(' {
					end := strings.IndexByte(s[k:], ')')
					if end < 0 {
						return nil, fmt.Errorf("unclosed %s ( at %d", word, k)
					}
					for _, l := range strings.Split(s[k+1:k+end], ",") {
						if l = strings.TrimSpace(l); l != "" {
							if !validLabel(l) {
								return nil, fmt.Errorf("%s (%s): %q is not a label name", word, s[k+1:k+end], l)
							}
							grouping = append(grouping, l)
						}
					}
					j = k + end + 1
				}
				last = -1
			case keywords[strings.ToLower(word)]:
				last = -1
			case k < len(s) && s[k] == '(':
				last = -1 // a function or an aggregation
			default:
				sels = append(sels, Selector{Metric: word})
				last = len(sels) - 1
			}
			i = j
			continue
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (isIdent(s[i]) || s[i] == '.' || s[i] == '+' && (s[i-1] == 'e' || s[i-1] == 'E')) {
				i++
			}
		default:
			i++
		}
		last = -1
	}
	for i := range sels {
		sels[i].Labels = append(sels[i].Labels, grouping...)
	}
	return sels, nil
}

var groupingKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// keywords are PromQL's binary operators, modifiers, number words and
// aggregation operators (which may be followed by a by or without clause
// before their parenthesis).
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true, "inf": true, "nan": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func validLabel(l string) bool {
	if !isIdentStart(l[0]) || l[0] == ':' {
		return false
	}
	for i := range len(l) {
		if !isIdent(l[i]) || l[i] == ':' {
			return false
		}
	}
	return true
}

// skipString returns the index after the string literal at s[i].
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at %d", i)
}

// matchers reads the label matchers {l op "v", ...} at s[i] and returns
// their label names and the index after the "}".
func matchers(s string, i int) ([]string, int, error) {
	var labels []string
	i++
	for {
		for i < len(s) && strings.IndexByte(" \t\r\n,", s[i]) >= 0 {
			i++
		}
		if i >= len(s) {
			return nil, 0, errors.New("unclosed {")
		}
		if s[i] == '}' {
			return labels, i + 1, nil
		}
		j := i
		for j < len(s) && isIdent(s[j]) {
			j++
		}
		if j == i || !validLabel(s[i:j]) {
			return nil, 0, fmt.Errorf("a matcher without a label name at %d", i)
		}
		labels = append(labels, s[i:j])
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		switch {
		case strings.HasPrefix(s[j:], "=~"), strings.HasPrefix(s[j:], "!="), strings.HasPrefix(s[j:], "!~"):
			j += 2
		case strings.HasPrefix(s[j:], "="):
			j++
		default:
			return nil, 0, fmt.Errorf("label %s: no matcher operator at %d", s[i:j], j)
		}
		for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			j++
		}
		if j >= len(s) || (s[j] != '"' && s[j] != '\'' && s[j] != '`') {
			return nil, 0, fmt.Errorf("label %s: no string value at %d", s[i:j], j)
		}
		k, err := skipString(s, j)
		if err != nil {
			return nil, 0, err
		}
		i = k
	}
}

// Check reads a scrape (the Prometheus text format, as GET /metrics
// answers) and returns an error naming every query of the dashboard file
// name that selects a metric the scrape does not hold, or a label that
// metric does not carry (TargetLabels aside). A histogram is queried
// through its _bucket (with le), _sum and _count series, a summary
// through its own name (with quantile), _sum and _count. A labelled
// metric appears in a scrape once one of its series was counted: the
// caller counts what the dashboard queries before scraping.
func Check(name string, scrape io.Reader) error {
	qs, err := Queries(name)
	if err != nil {
		return err
	}
	if len(qs) == 0 {
		return fmt.Errorf("%s: no queries", name)
	}
	if err := check(qs, scrape); err != nil {
		return fmt.Errorf("%s:\n\t%w", name, err)
	}
	return nil
}

// check reports every query of qs that selects a series, or a label,
// that scrape does not hold.
func check(qs []Query, scrape io.Reader) error {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(scrape)
	if err != nil {
		return fmt.Errorf("scrape: %w", err)
	}
	series := map[string]map[string]bool{} // series name -> its labels
	for fam, f := range fams {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		with := func(extra string) map[string]bool {
			out := map[string]bool{extra: true}
			for l := range labels {
				out[l] = true
			}
			return out
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			series[fam+"_bucket"] = with("le")
			series[fam+"_sum"], series[fam+"_count"] = labels, labels
		case dto.MetricType_SUMMARY:
			series[fam] = with("quantile")
			series[fam+"_sum"], series[fam+"_count"] = labels, labels
		default:
			series[fam] = labels
		}
	}
	var problems []string
	for _, q := range qs {
		sels, err := Selectors(q.Expr)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %q: %v", q.Where, q.Expr, err))
			continue
		}
		if len(sels) == 0 {
			problems = append(problems, fmt.Sprintf("%s: %q selects no metric", q.Where, q.Expr))
		}
		for _, sel := range sels {
			labels, ok := series[sel.Metric]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: metric %s is not exported", q.Where, sel.Metric))
				continue
			}
			for _, l := range sel.Labels {
				if !labels[l] && !slices.Contains(TargetLabels, l) {
					problems = append(problems, fmt.Sprintf("%s: metric %s has no label %s (it has %s)", q.Where, sel.Metric, l, keys(labels)))
				}
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n\t"))
	}
	return nil
}

func keys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	if len(ks) == 0 {
		return "none"
	}
	return strings.Join(ks, ", ")
}
