package e2e

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestForeignClientsThroughTheGateway runs the TypeScript MCP SDK 1.x and
// v2 clients, installed from npm at pinned versions, against mcpgateway in
// front of the TypeScript MCP server: the 401, the gateway's protected
// resource metadata at the path-inserted well-known URL (RFC 9728 §3.1),
// the AS metadata, DCR, the login and consent forms, tools/list without
// admin_stats, the 403 insufficient_scope step-up for the same client_id,
// tools/list with it and a tools/call of it. SDK 1.x runs with the server
// answering in event streams and the upstream seeing no token; v2 with JSON
// answers and upstream_auth (the server gets the gateway's exchanged token).
func TestForeignClientsThroughTheGateway(t *testing.T) {
	dir := foreignClients(t)
	for _, tc := range []struct {
		sdk          string
		upstreamAuth bool
	}{
		{"v1", false},
		{"v2", true},
	} {
		t.Run("sdk-"+tc.sdk, func(t *testing.T) {
			s, upstream, auditFile, resource := startGatewayStack(t, tc.upstreamAuth)
			gateway := strings.TrimSuffix(resource, "/mcp")
			start := time.Now()
			res, visits := runForeignAt(t, dir, foreignTarget{mcpURL: resource, user: demoUser, password: demoPassword, env: []string{"SDK=" + tc.sdk}}, "gateway.mjs")
			t.Logf("gateway.mjs SDK %s: %d authorizations, step-up by the %s, %d requests, %v", tc.sdk, len(visits), res.StepUp, len(res.Requests), time.Since(start).Round(time.Millisecond))

			// 401 -> PRM (path-inserted) -> AS metadata -> DCR, in that order.
			find := func(from int, method, prefix string, status int) int {
				for i := max(from, 0); i < len(res.Requests); i++ {
					r := res.Requests[i]
					if r.Method == method && strings.HasPrefix(r.URL, prefix) && r.Status == status {
						return i
					}
				}
				return -1
			}
			first := find(0, "POST", resource, 401)
			prm := find(first, "GET", gateway+"/.well-known/oauth-protected-resource/mcp", 200)
			asm := find(prm, "GET", s.Issuer+"/.well-known/", 200)
			reg := find(asm, "POST", s.Issuer+"/register", 201)
			if first != 0 || prm < 0 || asm < 0 || reg < 0 {
				t.Fatalf("no 401 -> PRM -> AS metadata -> DCR sequence: %+v", res.Requests)
			}
			if find(reg, "POST", resource, 403) < 0 {
				t.Errorf("no 403 step-up challenge from the gateway: %+v", res.Requests)
			}
			if !slices.Contains(strings.Fields(res.ChallengeScope), "mcp:admin") || !slices.Contains(strings.Fields(res.ChallengeScope), "mcp:tools") {
				t.Errorf("challenge scope %q, want mcp:tools mcp:admin", res.ChallengeScope)
			}

			if len(res.Registrations) != 1 {
				t.Fatalf("registrations %q, want one client_id for both authorizations", res.Registrations)
			}
			if len(visits) != 2 {
				t.Fatalf("%d authorizations, want 2", len(visits))
			}
			for i, v := range visits {
				q := v.URL.Query()
				if q.Get("client_id") != res.Registrations[0] || strings.TrimSuffix(q.Get("resource"), "/") != resource || q.Get("code_challenge_method") != "S256" {
					t.Errorf("authorization %d: %s", i, v.URL)
				}
				if v.Redirect == nil || v.Redirect.Query().Get("code") == "" || v.Redirect.Query().Get("iss") != s.Issuer {
					t.Errorf("authorization %d answered %v", i, v.Redirect)
				}
			}
			if sc := strings.Fields(visits[0].URL.Query().Get("scope")); slices.Contains(sc, "mcp:admin") {
				t.Errorf("first authorization asked for %q", sc)
			}
			if sc := strings.Fields(visits[1].URL.Query().Get("scope")); !slices.Contains(sc, "mcp:admin") || !slices.Contains(sc, "mcp:tools") {
				t.Errorf("step-up asked for %q, want mcp:tools and mcp:admin", sc)
			}

			if !slices.Equal(res.ToolsBefore, []string{"countdown", "echo"}) {
				t.Errorf("tools before the step-up %q, want [countdown echo]", res.ToolsBefore)
			}
			if !slices.Equal(res.ToolsAfter, []string{"admin_stats", "countdown", "echo"}) {
				t.Errorf("tools after the step-up %q", res.ToolsAfter)
			}
			if res.Echo != "through the gateway" || !strings.HasPrefix(res.AdminText, "sessions: ") {
				t.Errorf("echo %q, admin_stats %q", res.Echo, res.AdminText)
			}
			c := jwtClaims(t, res.SteppedAccessToken)
			if c["client_id"] != res.Registrations[0] || !containsAny(c["aud"], resource) && c["aud"] != resource {
				t.Errorf("stepped-up token claims %v", c)
			}

			// The upstream never saw the client's token: none at all, or
			// the gateway's own.
			for i, r := range upstream.seen(t) {
				if r.Authorization != "" && (!tc.upstreamAuth || strings.Contains(r.Authorization, res.SteppedAccessToken)) {
					t.Errorf("upstream request %d (%s) carried Authorization %.30q", i, r.Method, r.Authorization)
				}
				if tc.upstreamAuth && r.Authorization == "" {
					t.Errorf("upstream request %d (%s) without the gateway's token", i, r.Method)
				}
			}
			// The admin call is audited as ok, for this client.
			b, err := os.ReadFile(auditFile)
			if err != nil {
				t.Fatal(err)
			}
			var audited bool
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var e map[string]any
				if json.Unmarshal([]byte(line), &e) == nil && e["event"] == "tool.call" && e["tool"] == "admin_stats" && e["result"] == "ok" {
					audited = e["client_id"] == res.Registrations[0] && e["sub"] == c["sub"]
				}
			}
			if !audited {
				t.Errorf("no ok tool.call audit line of admin_stats for this client and user:\n%s", b)
			}
		})
	}
}
