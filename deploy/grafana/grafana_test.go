package grafana

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gopkg.in/yaml.v3"
)

func TestSelectors(t *testing.T) {
	for _, c := range []struct {
		name, expr string
		want       []Selector
	}{
		{"reads a bare metric", `go_goroutines`, []Selector{{Metric: "go_goroutines"}}},
		{"reads the labels of matchers", `x_total{a="1", b!~"2|3",c=~'$v'}`, []Selector{{Metric: "x_total", Labels: []string{"a", "b", "c"}}}},
		{"skips functions, ranges and Grafana's variables", `rate(x_total{instance=~"$instance"}[$__rate_interval])`,
			[]Selector{{Metric: "x_total", Labels: []string{"instance"}}}},
		{"gives a by clause before the parenthesis to the metrics inside", `sum by (le, endpoint) (rate(d_bucket[5m]))`,
			[]Selector{{Metric: "d_bucket", Labels: []string{"le", "endpoint"}}}},
		{"gives a by clause after the parenthesis to the metrics inside", `sum(rate(d_bucket[5m])) by (le)`,
			[]Selector{{Metric: "d_bucket", Labels: []string{"le"}}}},
		{"reads both sides of a binary operator and its on clause", `sum(rate(a_total{x="1"}[5m])) / on (x) group_left sum(b)`,
			[]Selector{{Metric: "a_total", Labels: []string{"x", "x"}}, {Metric: "b", Labels: []string{"x"}}}},
		{"does not read aggregation names, keywords or numbers as metrics", `histogram_quantile(0.95, sum without (pod) (rate(h_bucket[1m] offset 5m))) > bool 1e3 and topk(3, c)`,
			[]Selector{{Metric: "h_bucket", Labels: []string{"pod"}}, {Metric: "c", Labels: []string{"pod"}}}},
		{"does not read the contents of strings", `label_replace(up, "dst", "not_a_metric", "src", "(.*)")`,
			[]Selector{{Metric: "up"}}},
		{"reads a template variable's label_values", `label_values(m_total{a="b"}, instance)`,
			[]Selector{{Metric: "m_total", Labels: []string{"a", "instance"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Selectors(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Selectors(%s)\n got %+v\nwant %+v", c.expr, got, c.want)
			}
		})
	}
}

func TestSelectorsRefusesMalformedQueries(t *testing.T) {
	for _, expr := range []string{
		`x{a="1"`,          // unclosed matchers
		`x{a}`,             // no operator
		`x{a=b}`,           // a value that is not a string
		`{a="1"}`,          // no metric name
		`rate(x[5m)`,       // unclosed range
		`x{a="1}`,          // unclosed string
		`sum by (a-b) (x)`, // not a label name
		`sum by (a (x)`,    // unclosed grouping
		`x{a="1",9="2"}`,   // a label name starting with a digit
	} {
		if sels, err := Selectors(expr); err == nil {
			t.Errorf("Selectors(%s) = %+v, want an error", expr, sels)
		}
	}
}

// scrapeOf is reg's metrics as a program's /metrics serves them.
func scrapeOf(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	return rec.Body.String()
}

func TestCheckFindsWhatAScrapeDoesNotHold(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "app_calls_total", Help: "h"}, []string{"result"})
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "app_duration_seconds", Help: "h"}, []string{"method"})
	s := prometheus.NewSummary(prometheus.SummaryOpts{Name: "app_size_bytes", Help: "h", Objectives: map[float64]float64{0.5: 0.05}})
	unused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "app_unused_total", Help: "h"}, []string{"x"})
	reg.MustRegister(c, h, s, unused)
	c.WithLabelValues("ok").Inc()
	h.WithLabelValues("get").Observe(0.1)
	s.Observe(3)
	scrape := scrapeOf(t, reg)

	for _, tc := range []struct {
		name, expr, problem string
	}{
		{"accepts a counter and its label", `sum by (result) (rate(app_calls_total{instance=~"$instance"}[5m]))`, ""},
		{"accepts a histogram's buckets with le and its labels", `histogram_quantile(0.9, sum by (le, method) (rate(app_duration_seconds_bucket[5m])))`, ""},
		{"accepts a histogram's count and sum", `sum(rate(app_duration_seconds_sum[5m])) / sum(rate(app_duration_seconds_count{job="x"}[5m]))`, ""},
		{"accepts a summary's quantiles", `app_size_bytes{quantile="0.5"} + app_size_bytes_count`, ""},
		{"refuses a metric that is not exported", `sum(rate(app_call_total[5m]))`, "metric app_call_total is not exported"},
		{"refuses a histogram queried by its own name", `app_duration_seconds`, "metric app_duration_seconds is not exported"},
		{"refuses a counter's buckets", `app_calls_total_bucket`, "metric app_calls_total_bucket is not exported"},
		{"refuses a label the metric does not carry", `sum by (reason) (rate(app_calls_total[5m]))`, "metric app_calls_total has no label reason"},
		{"refuses le on a counter", `sum by (le) (app_calls_total)`, "metric app_calls_total has no label le"},
		{"refuses a matcher on a label the metric does not carry", `app_duration_seconds_count{result="ok"}`, "metric app_duration_seconds_count has no label result"},
		{"refuses a labelled metric no series of which was counted", `app_unused_total`, "metric app_unused_total is not exported"},
		{"refuses a query that selects nothing", `vector(1)`, "selects no metric"},
		{"refuses a query that does not parse", `app_calls_total{result}`, "no matcher operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check([]Query{{Where: "panel 1", Expr: tc.expr}}, strings.NewReader(scrape))
			switch {
			case tc.problem == "" && err != nil:
				t.Errorf("%s: %v", tc.expr, err)
			case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem) || !strings.Contains(err.Error(), "panel 1")):
				t.Errorf("%s: got %v, want an error naming panel 1 and %q", tc.expr, err, tc.problem)
			}
		})
	}
}

// The dashboards are the two files the programs' tests check, and each
// imports into any Grafana: its data source is the import input
// DS_PROMETHEUS (and, when provisioned from a file, the data source
// variable of that name), every panel and target uses it, panel ids are
// unique, the grid is 24 columns wide, and every panel that shows data has
// queries.
func TestDashboardsImportAnywhere(t *testing.T) {
	names, err := fs.Glob(Dashboards, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{AuthServer, Gateway}; !slices.Equal(names, want) {
		t.Fatalf("dashboards %v, want %v: a new dashboard needs a test that checks it against its program's scrape (Check)", names, want)
	}
	for _, name := range names {
		b, _ := Dashboards.ReadFile(name)
		var d struct {
			Inputs []struct {
				Name, Type, PluginID string
			} `json:"__inputs"`
			UID           string `json:"uid"`
			Title         string `json:"title"`
			SchemaVersion int    `json:"schemaVersion"`
			Templating    struct {
				List []struct {
					Name, Type string
					Query      any
				}
			}
			Panels []struct {
				ID         int
				Type       string
				Title      string
				Datasource map[string]string
				GridPos    struct{ H, W, X, Y int }
				Targets    []struct {
					Datasource map[string]string
					RefID      string
					Expr       string
				}
			}
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].Type != "datasource" || d.Inputs[0].PluginID != "prometheus" {
			t.Errorf("%s: __inputs %+v, want the one Prometheus data source DS_PROMETHEUS", name, d.Inputs)
		}
		if d.UID == "" || d.Title == "" || d.SchemaVersion < 39 {
			t.Errorf("%s: uid %q, title %q, schemaVersion %d (Grafana 11 writes 39)", name, d.UID, d.Title, d.SchemaVersion)
		}
		hasVar := false
		for _, v := range d.Templating.List {
			hasVar = hasVar || (v.Name == "DS_PROMETHEUS" && v.Type == "datasource" && v.Query == "prometheus")
		}
		if !hasVar {
			t.Errorf("%s: no data source variable DS_PROMETHEUS", name)
		}
		ids := map[int]bool{}
		queries := 0
		ds := map[string]string{"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", name, p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
				t.Errorf("%s: panel %d %q: gridPos %+v outside the 24 columns", name, p.ID, p.Title, p.GridPos)
			}
			if p.Type == "row" {
				continue
			}
			if !reflect.DeepEqual(p.Datasource, ds) || len(p.Targets) == 0 {
				t.Errorf("%s: panel %d %q: datasource %v, %d targets", name, p.ID, p.Title, p.Datasource, len(p.Targets))
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if !reflect.DeepEqual(tg.Datasource, ds) || tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: panel %d %q: target %+v", name, p.ID, p.Title, tg)
				}
				refs[tg.RefID] = true
				queries++
			}
		}
		if queries < 10 {
			t.Errorf("%s: %d queries", name, queries)
		}
	}
}

// provisioning.yaml is a Grafana dashboard provider (apiVersion 1) of type
// file whose path is where its comment says to mount this directory.
func TestProvisioningFileNamesTheDashboards(t *testing.T) {
	b, err := os.ReadFile("provisioning.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name, Type string
			Options    struct {
				Path string
			}
		}
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if p.APIVersion != 1 || len(p.Providers) != 1 || p.Providers[0].Type != "file" || p.Providers[0].Name == "" {
		t.Fatalf("provisioning.yaml: %+v", p)
	}
	path := p.Providers[0].Options.Path
	if path == "" || !strings.Contains(string(b), "deploy/grafana as "+path) {
		t.Errorf("provisioning.yaml: the path %q is not the one its comment says to mount deploy/grafana at", path)
	}
}
