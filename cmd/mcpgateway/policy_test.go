package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const policyConfig = baseConfig + `
policy:
  rules:
    - tools: ["echo"]
      allow: "client_id == 'admin-bot' || args.text != 'forbidden'"
      message: "Only admin-bot may echo that."
    - prompts: ["incident_*"]
      resources: ["file:///etc/*"]
      allow: "client_id == 'admin-bot'"
      message: "Not for bots."
rate_limits:
  - methods: ["prompts/list"]
    per: client
    rate: 2
    interval: 1h
`

func TestGatewayAppliesPolicyRules(t *testing.T) {
	s := newStack(t, false, policyConfig)
	ctx := context.Background()
	user := s.connect(t, s.token(t, "user-bot"))
	if _, err := user.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}); err != nil {
		t.Fatalf("an allowed echo: %v", err)
	}
	_, err := user.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "forbidden"}})
	if err == nil || !strings.Contains(err.Error(), "Only admin-bot may echo that.") {
		t.Fatalf("a denied echo: %v, want the rule's message", err)
	}
	admin := s.connect(t, s.token(t, "admin-bot"))
	if _, err := admin.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "forbidden"}}); err != nil {
		t.Fatalf("admin-bot's echo: %v", err)
	}
	// Lists match calls: the prompt and the resource no argument makes
	// callable for user-bot are left out; echo stays (callable with other
	// text).
	prompts, err := user.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range prompts.Prompts {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"greeting"}) {
		t.Errorf("user-bot's prompts %v, want [greeting]", names)
	}
	if got := toolNames(t, user); !slices.Contains(got, "echo") {
		t.Errorf("user-bot's tools %v lack echo", got)
	}
	if _, err := user.GetPrompt(ctx, &mcp.GetPromptParams{Name: "incident_report"}); err == nil || !strings.Contains(err.Error(), "Not for bots.") {
		t.Errorf("a hidden prompt: %v", err)
	}
	audit := s.audit.String()
	if !strings.Contains(audit, `"result":"denied_by_policy","rule":0`) || !strings.Contains(audit, `"result":"denied_by_policy","rule":1`) {
		t.Errorf("audit lacks the denials: %s", audit)
	}
	// The third prompts/list of a client within the hour is refused.
	if _, err := user.ListPrompts(ctx, nil); err != nil {
		t.Fatal(err)
	}
	resp := rawPost(t, s, s.token(t, "user-bot"), "", `{"jsonrpc":"2.0","id":5,"method":"prompts/list"}`, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third prompts/list: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if id, code, _ := rpcError(t, resp); code != -32031 || id != float64(5) {
		t.Errorf("rate limited answer: id %v code %d", id, code)
	}
	if !strings.Contains(s.audit.String(), `"result":"rate_limited","rate_limit":0`) {
		t.Errorf("audit lacks rate_limited")
	}
}

func TestParseConfigPolicyErrors(t *testing.T) {
	base := "resource: https://gw.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:1/mcp\n"
	for _, tc := range []struct{ extra, want string }{
		{"policy: {rules: [{tools: [x], allow: \"nope.sub == 1\"}]}\n", "policy.rules[0].allow"},
		{"policy: {rules: [{tools: [x], allow: \"true\"}, {tools: [y], allow: \"1 +\"}]}\n", "policy.rules[1].allow"},
		{"policy: {rules: [{tools: [x], allow: \"true\", alow: \"x\"}]}\n", "alow"},
		{"policy: {inject: {t: {a: \"args.a\"}}}\n", "policy.inject.t.a"},
		{"rate_limits: [{tools: [\"*\"], per: ip, rate: 1, interval: 1m}]\n", "rate_limits[0].per"},
		{"rate_limits: [{tools: [\"*\"], per: subject, rate: 1}]\n", "rate_limits[0].interval"},
	} {
		if _, err := ParseConfig([]byte(base+tc.extra), env(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %s", tc.extra, err, tc.want)
		}
	}
	c, err := ParseConfig([]byte(base+"policy: {rules: [{methods: [\"*\"], allow: \"true\", message: m}], inject: {t: {a: claims.sub}}}\nrate_limits: [{tools: [\"*\"], per: tenant, rate: 60, interval: 1m, burst: 20}]\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.policy == nil || c.limits == nil || c.RateLimits[0].Burst != 20 || c.Policy.Rules[0].Message != "m" {
		t.Errorf("%+v", c)
	}
}
