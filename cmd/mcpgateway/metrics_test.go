package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// scrape reads the gateway's metrics as Prometheus text and parses them.
func scrape(t *testing.T, g *Gateway) map[string]*dto.MetricFamily {
	t.Helper()
	h := g.MetricsHandler()
	if h == nil {
		t.Fatal("no metrics handler")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, rec.Body.String())
	}
	return families
}

// value is the counter value, or the histogram's sample count, of the
// series of name whose labels include want; 0 when there is none.
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := families[name]
	if f == nil {
		return 0
	}
	total := 0.0
series:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

const metricsConfig = policyConfig + `
metrics: {listen: "127.0.0.1:0"}
upstream_auth:
  exchange: {client_id: gw, client_secret: "${GW_SECRET}", resource: UPSTREAM, scopes: [upstream:call]}
`

// The counters move with calls made through the gateway by the MCP SDK's
// client and by raw requests, and agree with the audit lines: every
// (method, tool, result) the audit wrote is counted as often.
func TestGatewayMetricsCountRealCalls(t *testing.T) {
	s := newStack(t, false, metricsConfig)
	ctx := context.Background()
	before := scrape(t, s.g)
	if n := value(before, "mcpgateway_requests_total", nil); n != 0 {
		t.Fatalf("%v requests before any call", n)
	}

	user := s.connect(t, s.token(t, "user-bot"))
	for range 3 {
		if _, err := user.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := user.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "forbidden"}}); err == nil {
		t.Fatal("a call the policy denies passed")
	}
	// Two prompts/list pass, the third is rate limited.
	for range 3 {
		_, _ = user.ListPrompts(ctx, nil)
	}
	// admin_stats needs mcp:admin: a 403 insufficient_scope (the SDK's
	// session ends with it).
	if _, err := user.CallTool(ctx, &mcp.CallToolParams{Name: "admin_stats"}); err == nil {
		t.Fatal("a call without its scope passed")
	}
	// Refusals for the token.
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	if resp := rawPost(t, s, "", "", call, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	if resp := rawPost(t, s, "not-a-jwt", "", call, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a bad token: %d", resp.StatusCode)
	}
	if resp := rawPost(t, s, "", "", call, map[string]string{"Authorization": "Bearer"}); resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a malformed header: %d", resp.StatusCode)
	}

	m := scrape(t, s.g)
	// Every audit line is counted under its method, tool and result.
	type key struct{ method, tool, result string }
	lines := map[key]float64{}
	for _, line := range strings.Split(strings.TrimSpace(s.audit.String()), "\n") {
		var e struct {
			Event, Method, Tool, Result string
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if e.Event == rsmiddleware.EventResponse {
			e.Method = "response"
		}
		lines[key{e.Method, e.Tool, e.Result}]++
	}
	total := 0.0
	for k, n := range lines {
		total += n
		if got := value(m, "mcpgateway_requests_total", map[string]string{"method": k.method, "tool": k.tool, "result": k.result}); got != n {
			t.Errorf("requests %+v: %v counted, %v audited", k, got, n)
		}
	}
	if got := value(m, "mcpgateway_requests_total", nil); got != total {
		t.Errorf("%v requests counted, %v audit lines", got, total)
	}
	if got := value(m, "mcpgateway_request_duration_seconds", nil); got != total {
		t.Errorf("%v latencies observed, %v audit lines", got, total)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"mcpgateway_requests_total", map[string]string{"method": "tools/call", "tool": "echo", "result": "ok"}, 3},
		{"mcpgateway_requests_total", map[string]string{"method": "tools/call", "tool": "echo", "result": "denied_by_policy"}, 1},
		{"mcpgateway_requests_total", map[string]string{"method": "tools/call", "tool": "admin_stats", "result": "denied"}, 1},
		{"mcpgateway_requests_total", map[string]string{"method": "prompts/list", "result": "rate_limited"}, 1},
		{"mcpgateway_policy_denials_total", map[string]string{"rule": "0"}, 1},
		{"mcpgateway_rate_limited_total", map[string]string{"rate_limit": "0"}, 1},
		{"mcpgateway_token_refusals_total", map[string]string{"reason": "insufficient_scope"}, 1},
		{"mcpgateway_token_refusals_total", map[string]string{"reason": "missing_token"}, 1},
		{"mcpgateway_token_refusals_total", map[string]string{"reason": "invalid_token"}, 1},
		{"mcpgateway_token_refusals_total", map[string]string{"reason": "unavailable"}, 0},
		// Every tools/call audited: 3 ok, a policy denial, a scope
		// denial and the 3 raw calls refused for their token.
		{"mcpgateway_request_duration_seconds", map[string]string{"method": "tools/call"}, 8},
		{"mcpgateway_exchange_duration_seconds", map[string]string{"result": "ok"}, 1},
		{"mcpgateway_upstream_errors_total", nil, 0},
	} {
		if got := value(m, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The forwarded requests (initialize, the notification, three calls,
	// two lists) each took an upstream hop.
	if got := value(m, "mcpgateway_upstream_duration_seconds", nil); got < 7 {
		t.Errorf("%v upstream hops observed, want at least 7", got)
	}
	if got := value(m, "mcpgateway_token_refusals_total", map[string]string{"reason": "invalid_request"}) +
		value(m, "mcpgateway_token_refusals_total", map[string]string{"reason": "invalid_token"}); got != 2 {
		t.Errorf("a bad token and a malformed header: %v refusals", got)
	}

	// An upstream that is gone: the client gets 502, the metrics an
	// upstream error.
	s.up.srv.Close()
	admin := s.token(t, "admin-bot")
	if resp := rawPost(t, s, admin, "", initialize, nil); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("upstream gone: %d", resp.StatusCode)
	}
	if got := value(scrape(t, s.g), "mcpgateway_upstream_errors_total", map[string]string{"reason": "unreachable"}); got != 1 {
		t.Errorf("upstream errors (unreachable) %v, want 1", got)
	}
}

// Without metrics.listen there is no metrics handler, and the public
// listener serves no /metrics.
func TestGatewayServesNoMetricsByDefault(t *testing.T) {
	s := newStack(t, false, baseConfig)
	if s.g.MetricsHandler() != nil {
		t.Fatal("a metrics handler without metrics.listen")
	}
	s2 := newStack(t, false, baseConfig+"metrics: {listen: \"127.0.0.1:0\"}\n")
	resp, err := http.Get(s2.gw.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Fatal("the public listener serves /metrics")
	}
}

// The tool label takes the configured names and the names of calls the
// upstream answered, at most MaxToolLabels of them; names of refused
// calls and names beyond the cap are "other".
func TestGatewayMetricsBoundTheToolLabel(t *testing.T) {
	m := newMetrics([]string{"configured"})
	m.audit(rsmiddleware.AuditEvent{Method: "tools/call", Tool: "never-answered", Result: rsmiddleware.AuditUnauthorized})
	m.audit(rsmiddleware.AuditEvent{Method: "tools/call", Tool: "configured", Result: rsmiddleware.AuditDenied})
	for i := range 2 * MaxToolLabels {
		m.audit(rsmiddleware.AuditEvent{Method: "tools/call", Tool: fmt.Sprintf("tool-%d", i), Result: rsmiddleware.AuditOK})
	}
	m.audit(rsmiddleware.AuditEvent{Method: "x/" + strings.Repeat("y", 100), Result: rsmiddleware.AuditOK})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]bool{}
	for _, s := range families["mcpgateway_requests_total"].Metric {
		for _, l := range s.Label {
			if l.GetName() == "tool" && l.GetValue() != "" {
				tools[l.GetValue()] = true
			}
			if l.GetName() == "method" && strings.HasPrefix(l.GetValue(), "x/") {
				t.Errorf("an unknown method is a label value: %q", l.GetValue())
			}
		}
	}
	if len(tools) != MaxToolLabels+1 { // the names and "other"
		t.Errorf("%d tool label values, want %d", len(tools), MaxToolLabels+1)
	}
	if tools["never-answered"] || !tools["configured"] || !tools["tool-0"] || tools[fmt.Sprintf("tool-%d", MaxToolLabels)] {
		t.Errorf("label values: configured %v, tool-0 %v, never-answered %v", tools["configured"], tools["tool-0"], tools["never-answered"])
	}
	if got := value(families, "mcpgateway_requests_total", map[string]string{"tool": "other"}); got != MaxToolLabels+2 {
		t.Errorf("%v calls counted as other, want %d", got, MaxToolLabels+2)
	}
	if got := value(families, "mcpgateway_requests_total", map[string]string{"method": "other"}); got != 1 {
		t.Errorf("%v calls of method other, want 1", got)
	}
}

// The command serves the metrics on metrics.listen, a listener of its
// own, and not on the public one.
func TestCommandServesMetricsOnItsOwnListener(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "mcpgateway.yaml")
	text := "listen: 127.0.0.1:0\nresource: https://mcp.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:3001/mcp\naudit: {format: off}\nmetrics: {listen: \"127.0.0.1:0\"}\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--config", conf}, io.Discard, logs) }()
	addr := func(msg string) string {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, `msg="`+msg+`"`) {
					_, a, _ := strings.Cut(line, "addr=")
					a, _, _ = strings.Cut(a, " ")
					return a
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("no %q in the log:\n%s", msg, logs)
		return ""
	}
	public, metrics := addr("mcpgateway: listening"), addr("mcpgateway: metrics listening")
	get := func(u string) (int, string) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// A refused request is counted, with the audit off.
	if code, _ := get("http://" + public + "/mcp"); code != http.StatusUnauthorized {
		t.Fatalf("GET /mcp without a token: %d", code)
	}
	code, body := get("http://" + metrics + "/metrics")
	if code != http.StatusOK || !strings.Contains(body, `mcpgateway_token_refusals_total{reason="missing_token"} 1`) || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics listener: %d\n%s", code, body)
	}
	if code, _ := get("http://" + public + "/metrics"); code == http.StatusOK {
		t.Fatal("the public listener serves /metrics")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
