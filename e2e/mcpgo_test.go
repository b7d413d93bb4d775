package e2e

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
)

// mcpgoSession is an mcp-go client signed in to the gateway.
type mcpgoSession struct {
	c        *mcpgo.Client
	clientID string
	token    string
}

// mcpgoConnect connects mcp-go's OAuth Streamable HTTP client to resource
// as alice, asking for scopes: the first Initialize fails with mcp-go's
// authorization-required error (the gateway's 401), the application then
// registers (DCR, unless clientID is given), opens the authorization URL
// in the form-walking browser, redeems the code with PKCE and state, and
// initializes again.
func mcpgoConnect(t *testing.T, ctx context.Context, resource, clientID string, scopes []string) *mcpgoSession {
	t.Helper()
	redirect := loopbackRedirect(t)
	store := mcpgo.NewMemoryTokenStore()
	c, err := mcpgo.NewOAuthStreamableHttpClient(resource, mcpgo.OAuthConfig{
		ClientID: clientID, RedirectURI: redirect, Scopes: scopes, TokenStore: store, PKCEEnabled: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	initialize := func() error {
		req := mcpgomcp.InitializeRequest{}
		req.Params.ProtocolVersion = mcpgomcp.LATEST_PROTOCOL_VERSION
		req.Params.ClientInfo = mcpgomcp.Implementation{Name: "mcpauth-e2e-mcp-go", Version: "0"}
		_, err := c.Initialize(ctx, req)
		return err
	}
	err = initialize()
	if !mcpgo.IsOAuthAuthorizationRequiredError(err) {
		t.Fatalf("initialize without a token: %v, want mcp-go's authorization-required error", err)
	}
	h := mcpgo.GetOAuthHandler(err)
	if clientID == "" {
		if err := h.RegisterClient(ctx, "mcpauth e2e mcp-go client"); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	verifier, err := mcpgo.GenerateCodeVerifier()
	if err != nil {
		t.Fatal(err)
	}
	state, err := mcpgo.GenerateState()
	if err != nil {
		t.Fatal(err)
	}
	authURL, err := h.GetAuthorizationURL(ctx, state, mcpgo.GenerateCodeChallenge(verifier))
	if err != nil {
		t.Fatalf("authorization URL: %v", err)
	}
	if q := mustQuery(t, authURL); strings.TrimSuffix(q.Get("resource"), "/") != resource || q.Get("code_challenge_method") != "S256" {
		t.Errorf("authorization URL %s: want resource %s and S256", authURL, resource)
	}
	target, err := newFormLogin(demoUser, demoPassword, redirect).authorize(ctx, authURL)
	if err != nil {
		t.Fatalf("authorization: %v", err)
	}
	back := mustQuery(t, target)
	if back.Get("state") != state || back.Get("code") == "" {
		t.Fatalf("authorization response %s", target)
	}
	if err := h.ProcessAuthorizationResponse(ctx, back.Get("code"), back.Get("state"), verifier); err != nil {
		t.Fatalf("code exchange: %v", err)
	}
	if err := initialize(); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	tok, err := store.GetToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &mcpgoSession{c: c, clientID: h.GetClientID(), token: tok.AccessToken}
}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

func (s *mcpgoSession) tools(t *testing.T, ctx context.Context) []string {
	t.Helper()
	res, err := s.c.ListTools(ctx, mcpgomcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func (s *mcpgoSession) call(ctx context.Context, name string, args map[string]any) (*mcpgomcp.CallToolResult, error) {
	req := mcpgomcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	return s.c.CallTool(ctx, req)
}

// TestMCPGoClientThroughTheGateway runs mcp-go (github.com/mark3labs/mcp-go,
// a Go MCP implementation independent of the official SDK) against
// mcpgateway in front of the TypeScript MCP server: its OAuth client
// discovers the AS through the gateway's 401 and protected resource
// metadata, registers, and is authorized for mcp:tools; tools/list hides
// admin_stats and calling it is refused 403 insufficient_scope; the
// application re-authorizes the same client_id for mcp:tools mcp:admin,
// and the admin tool is listed and runs.
func TestMCPGoClientThroughTheGateway(t *testing.T) {
	_, upstream, _, resource := startGatewayStack(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	first := mcpgoConnect(t, ctx, resource, "", []string{"mcp:tools"})
	if got := first.tools(t, ctx); !slices.Equal(got, []string{"countdown", "echo"}) {
		t.Errorf("tools %q, want [countdown echo]", got)
	}
	res, err := first.call(ctx, "echo", map[string]any{"text": "from mcp-go"})
	if err != nil || res.IsError || res.Content[0].(mcpgomcp.TextContent).Text != "from mcp-go" {
		t.Fatalf("echo: %v %+v", err, res)
	}
	_, err = first.call(ctx, "admin_stats", map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "insufficient_scope") {
		t.Fatalf("admin_stats with mcp:tools: %v, want the gateway's 403", err)
	}
	if slices.Contains(upstream.calls(t), "admin_stats") {
		t.Fatal("the server ran admin_stats for a token without mcp:admin")
	}

	stepped := mcpgoConnect(t, ctx, resource, first.clientID, []string{"mcp:tools", "mcp:admin"})
	if stepped.clientID != first.clientID {
		t.Errorf("client_id %q after the step-up, want %q", stepped.clientID, first.clientID)
	}
	if sc := scopesOf(t, stepped.token); !slices.Contains(sc, "mcp:admin") {
		t.Errorf("stepped-up token scopes %q", sc)
	}
	if got := stepped.tools(t, ctx); !slices.Equal(got, []string{"admin_stats", "countdown", "echo"}) {
		t.Errorf("tools after the step-up %q", got)
	}
	res, err = stepped.call(ctx, "admin_stats", map[string]any{})
	if err != nil || res.IsError || !strings.HasPrefix(res.Content[0].(mcpgomcp.TextContent).Text, "sessions: ") {
		t.Fatalf("admin_stats after the step-up: %v %+v", err, res)
	}
	for i, r := range upstream.seen(t) {
		if r.Authorization != "" {
			t.Errorf("upstream request %d carried Authorization", i)
		}
	}
}
