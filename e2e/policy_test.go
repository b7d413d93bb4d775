package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpauth/mcpauth/internal/freeport"
)

// policyGatewayConfig is what this test adds to deploy/mcpgateway.yaml: the
// rules, injection, identity and rate limit of docs/POLICY.md's example.
const policyGatewayConfig = `
policy:
  rules:
    - tools: ["delete_*"]
      allow: "'ops' in claims.groups && args.environment != 'production'"
      message: "Only ops may delete, and never in production."
  inject:
    create_ticket: {reporter: "claims.sub", tenant: "claims.tenant"}
identity:
  header: X-MCP-Identity
rate_limits:
  - tools: ["echo"]
    per: subject
    rate: 60
    interval: 1m
`

// policyUser is a person of the stack signed in through the gateway.
type policyUser struct {
	session *mcp.ClientSession
	token   string
}

// connectThroughGateway runs the MCP Go SDK's OAuth client against the
// gateway for one person (login and consent forms of the real AS).
func connectThroughGateway(t *testing.T, ctx context.Context, resource, user, password string) policyUser {
	t.Helper()
	redirect := loopbackRedirect(t)
	tokens := &tokenSources{}
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: newFormLogin(user, password, redirect).fetch,
		NewTokenSource:           tokens.newTokenSource,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "mcpauth e2e policy client", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "policy-e2e", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: resource, OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatalf("%s: connect: %v", user, err)
	}
	t.Cleanup(func() { session.Close() })
	all := tokens.all()
	return policyUser{session: session, token: all[len(all)-1].AccessToken}
}

func toolText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError || len(res.Content) == 0 {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		t.Fatalf("tool error: %q", text)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// TestGatewayPolicyInFrontOfATypeScriptServer: the AS puts alice's email,
// groups (ops) and tenant into the gateway's tokens (token_claims); the
// gateway's rules let ops delete outside production only and hide
// delete_thing from bob (dev); injection sets create_ticket's reporter
// from the token whatever the model sent; the TypeScript server, which
// never sees a token, learns the caller from the gateway's identity JWT,
// checked with jose against the gateway's JWKS; and the 61st echo of a
// person within a minute is refused with 429.
func TestGatewayPolicyInFrontOfATypeScriptServer(t *testing.T) {
	logs := &lockedBuffer{}
	gw, ts := freeport.Addr(t), freeport.Addr(t)
	resource := "http://" + gw + "/mcp"
	upstream := startTSServer(t, logs, ts, false, "POLICY_TOOLS=1",
		"IDENTITY_JWKS=http://"+gw+"/.well-known/jwks.json", "IDENTITY_ISSUER="+resource, "IDENTITY_AUDIENCE=http://"+ts+"/mcp")
	s := startStack(t, stackOptions{editConfig: func(c string) string {
		c = strings.NewReplacer(gatewayAddr, gw, tsServerAddr, ts).Replace(c)
		gwRes := "  - uri: http://" + gw + "/mcp\n    name: MCP server behind mcpgateway\n    scopes: [mcp:tools, mcp:admin]\n"
		if !strings.Contains(c, gwRes) {
			t.Fatal("deploy/authserver.yaml changed shape: update the test's edit")
		}
		c = strings.Replace(c, gwRes, gwRes+"    token_claims: [email, groups, tenant]\n", 1)
		for user, attrs := range map[string]string{
			"alice": "    email: alice@acme.example\n    groups: [ops]\n    tenant: acme\n",
			"bob":   "    email: bob@acme.example\n    groups: [dev]\n    tenant: acme\n",
		} {
			i := strings.Index(c, "  - username: "+user+"\n")
			if i < 0 {
				t.Fatalf("no user %s in deploy/authserver.yaml", user)
			}
			j := i + strings.Index(c[i:], "password_hash:")
			end := j + strings.Index(c[j:], "\n") + 1
			c = c[:end] + attrs + c[end:]
		}
		return c
	}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- gateway and upstream output ---\n%s", logs)
		}
	})
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	cfgPath := gatewayConfig(t, s, gw, ts, auditFile, false)
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, append(raw, policyGatewayConfig...), 0o600); err != nil {
		t.Fatal(err)
	}
	startGateway(t, s, logs, cfgPath, gw, ts)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alice := connectThroughGateway(t, ctx, resource, demoUser, demoPassword)
	bob := connectThroughGateway(t, ctx, resource, "bob", "bob-demo-password")
	if c := jwtClaims(t, alice.token); c["email"] != "alice@acme.example" || c["tenant"] != "acme" || fmt.Sprint(c["groups"]) != "[ops]" {
		t.Fatalf("alice's token claims %v: want email, groups and tenant (resources[].token_claims)", c)
	}

	call := func(u policyUser, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		return u.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	}
	const denial = "Only ops may delete, and never in production."
	t.Run("ops may delete in staging, never in production", func(t *testing.T) {
		res, err := call(alice, "delete_thing", map[string]any{"environment": "staging"})
		if err != nil || toolText(t, res) != "deleted in staging" {
			t.Fatalf("staging: %v %v", res, err)
		}
		if _, err := call(alice, "delete_thing", map[string]any{"environment": "production"}); err == nil || !strings.Contains(err.Error(), denial) {
			t.Fatalf("production: %v, want the rule's message", err)
		}
	})
	t.Run("outside ops, delete_thing is not listed and not callable", func(t *testing.T) {
		list := func(u policyUser) []string {
			res, err := u.session.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, tl := range res.Tools {
				out = append(out, tl.Name)
			}
			return out
		}
		if got := list(bob); slices.Contains(got, "delete_thing") || !slices.Contains(got, "create_ticket") {
			t.Errorf("bob's tools %v: want create_ticket and no delete_thing", got)
		}
		if got := list(alice); !slices.Contains(got, "delete_thing") {
			t.Errorf("alice's tools %v lack delete_thing", got)
		}
		if _, err := call(bob, "delete_thing", map[string]any{"environment": "staging"}); err == nil || !strings.Contains(err.Error(), denial) {
			t.Fatalf("bob's call: %v, want the rule's message", err)
		}
	})
	t.Run("inject overrides the reporter the model sent", func(t *testing.T) {
		res, err := call(bob, "create_ticket", map[string]any{"title": "printer", "reporter": "mallory", "tenant": "evil"})
		if err != nil {
			t.Fatal(err)
		}
		if got := toolText(t, res); got != "printer by bob for acme" {
			t.Errorf("ticket %q, want reporter bob and tenant acme from the token", got)
		}
	})
	t.Run("the TypeScript server learns the caller from the identity JWT", func(t *testing.T) {
		res, err := call(alice, "whoami", map[string]any{})
		if err != nil {
			t.Fatal(err)
		}
		if got := toolText(t, res); got != "alice alice@acme.example ops acme" {
			t.Errorf("whoami %q", got)
		}
		for _, r := range upstream.seen(t) {
			if r.Authorization != "" {
				t.Fatalf("the server saw an Authorization header: %+v", r)
			}
		}
	})
	t.Run("the audit names the denials and never the arguments", func(t *testing.T) {
		b, _ := os.ReadFile(auditFile)
		if !strings.Contains(string(b), `"result":"denied_by_policy","rule":0`) || strings.Contains(string(b), "mallory") {
			t.Errorf("audit:\n%s", b)
		}
	})
	t.Run("the 61st echo within a minute is 429", func(t *testing.T) {
		// A token bucket of 60 refilled at one a second: the first refusal
		// comes at call 61, later by one call for each second the calls
		// took.
		start := time.Now()
		sid := rawSession(t, resource, alice.token)
		refused := 0
		var last *http.Response
		for i := 1; i <= 200 && refused == 0; i++ {
			resp := rawCall(t, resource, alice.token, sid, i, `{"name":"echo","arguments":{"text":"x"}}`)
			if resp.StatusCode == http.StatusTooManyRequests {
				refused, last = i, resp
			} else if resp.StatusCode != http.StatusOK {
				t.Fatalf("call %d: %d", i, resp.StatusCode)
			}
		}
		took := time.Since(start)
		if refused < 61 || float64(refused) > 61+took.Seconds()+1 {
			t.Fatalf("first refusal at call %d after %v, want 61 (plus one per second)", refused, took)
		}
		body, _ := io.ReadAll(last.Body)
		var m struct {
			Error struct{ Code int } `json:"error"`
		}
		if last.Header.Get("Retry-After") == "" || json.Unmarshal(body, &m) != nil || m.Error.Code != -32031 {
			t.Errorf("429: Retry-After %q, body %s", last.Header.Get("Retry-After"), body)
		}
		// bob has his own bucket.
		if _, err := call(bob, "echo", map[string]any{"text": "still here"}); err != nil {
			t.Errorf("bob's echo: %v", err)
		}
	})
}

// rawSession opens an MCP session through the gateway by hand and returns
// its Mcp-Session-Id.
func rawSession(t *testing.T, resource, token string) string {
	t.Helper()
	resp := rawPost(t, resource, token, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d", resp.StatusCode)
	}
	if resp := rawPost(t, resource, token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	return sid
}

func rawCall(t *testing.T, resource, token, sid string, id int, params string) *http.Response {
	t.Helper()
	return rawPost(t, resource, token, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, id, params))
}

func rawPost(t *testing.T, resource, token, sid, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, resource, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read the whole answer (an event stream ends with the answer), so
	// the body stays readable after the connection is reused.
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	return resp
}
