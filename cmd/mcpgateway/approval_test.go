package main

import (
	"strings"
	"testing"
	"time"
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
