package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestParseConfigApproval(t *testing.T) {
	base := "resource: https://gw.example/mcp\nissuer: https://as.example/tenant/\nupstream: http://127.0.0.1:1/mcp\n"
	c, err := ParseConfig([]byte(base+`approval: {tools: ["delete_*", "send_email"], ttl: 5m, client_id: gateway, client_secret: ${GATEWAY_SECRET}}`+"\n"),
		env(map[string]string{"GATEWAY_SECRET": "s3cret: #1"}))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Approval
	if len(a.Tools) != 2 || a.Tools[0] != "delete_*" || a.TTL != 5*time.Minute || a.ClientID != "gateway" || a.ClientSecret != "s3cret: #1" {
		t.Fatalf("%+v", a)
	}
	if rs := a.rs(c.Issuer, nil); rs.Endpoint != "https://as.example/tenant/approvals" {
		t.Fatalf("endpoint %q", rs.Endpoint)
	}
	for _, tc := range []struct{ extra, want string }{
		{"approval: {ttl: 5m, client_id: g, client_secret: s}\n", "approval.tools"},
		{"approval: {tools: [\"\"], client_id: g, client_secret: s}\n", "approval.tools[0]"},
		{"approval: {tools: [x], ttl: 2h, client_id: g, client_secret: s}\n", "approval.ttl"},
		{"approval: {tools: [x], ttl: 1500ms, client_id: g, client_secret: s}\n", "approval.ttl"},
		{"approval: {tools: [x], client_id: g}\n", "client_secret"},
		{"approval: {tools: [x], client_id: g, client_secret: ${MISSING}}\n", "MISSING"},
		{"approval: {tools: [x], client_id: g, client_secret: s, tool: y}\n", "tool"},
	} {
		if _, err := ParseConfig([]byte(base+tc.extra), env(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %s", tc.extra, err, tc.want)
		}
	}
}

// approvalConfig holds send_email for a person's approval, asking the
// in-process AS as client (gw is in its approval_clients).
func approvalConfig(client string) string {
	return baseConfig + "approval: {tools: [send_email, \"delete_*\"], ttl: 2m, client_id: " + client + ", client_secret: ${GW_SECRET}}\n"
}

// callSendEmail calls send_email through the gateway with cs.
func callSendEmail(t *testing.T, cs *mcp.ClientSession) (*mcp.CallToolResult, error) {
	t.Helper()
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_email", Arguments: map[string]any{"to": "bob@example.com"}})
}

// The in-process AS answers the gateway's questions: a token of no person
// (client credentials) has nobody to approve it, and a gateway with a wrong
// secret is not allowed to ask; either way the call is refused with
// -32034 and never forwarded, while a tool that needs no approval goes on.
// (Approval by a person, end to end: e2e/approval_test.go.)
func TestGatewayApprovalFailsClosed(t *testing.T) {
	for _, tc := range []struct{ name, secret, reason string }{
		{"a token of no person", "${GW_SECRET}", "names no person to ask"},
		{"a wrong client secret", "not-the-secret", "invalid_client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t, false, strings.Replace(approvalConfig("gw"), "${GW_SECRET}", tc.secret, 1))
			cs := s.connect(t, s.token(t, "user-bot"))
			before := len(s.up.seen())
			_, err := callSendEmail(t, cs)
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != -32034 || !strings.Contains(rpcErr.Message, tc.reason) || !strings.Contains(rpcErr.Message, "It was not run.") {
				t.Fatalf("%v", err)
			}
			if n := len(s.up.seen()); n != before {
				t.Errorf("the upstream saw %d requests", n-before)
			}
			if a := s.audit.String(); !strings.Contains(a, `"result":"approval_unavailable","error_code":-32034`) || strings.Contains(a, "bob@example.com") {
				t.Errorf("audit:\n%s", a)
			}
			if r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err != nil || r.IsError {
				t.Fatalf("echo: %+v %v", r, err)
			}
		})
	}
}
