package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/deploy/grafana"
)

// Every series the gateway's Grafana dashboard queries, and every label
// it selects or groups by, is one the gateway serves on metrics.listen,
// after real calls through it (a labelled metric appears once one of its
// series was counted): a tool call answered, one denied by a policy rule,
// a rate-limited list, a request without a token. A panel naming a
// metric or label that is not (or no longer) exported fails here.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	s := newStack(t, false, metricsConfig)
	ctx := context.Background()
	user := s.connect(t, s.token(t, "user-bot"))
	if _, err := user.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := user.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "forbidden"}}); err == nil {
		t.Fatal("a call the policy denies passed")
	}
	for range 3 { // rate_limits[0] lets two prompts/list pass
		_, _ = user.ListPrompts(ctx, nil)
	}
	if resp := rawPost(t, s, "", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}

	rec := httptest.NewRecorder()
	s.g.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	if err := grafana.Check(grafana.Gateway, strings.NewReader(rec.Body.String())); err != nil {
		t.Error(err)
	}
}
