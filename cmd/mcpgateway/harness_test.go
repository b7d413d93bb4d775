package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/internal/syncbuf"
	"github.com/mcpauth/mcpauth/storage/memory"
)

const (
	botSecret = "bot-secret-0123456789abcdef"
	gwSecret  = "gw-secret-0123456789abcdef"
)

// syncBuffer collects the audit lines.
type syncBuffer = syncbuf.Buffer

// upstream is an MCP server of the Go SDK that records the headers of
// every request it receives.
type upstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	// authorization headers seen, one per request ("" when absent)
	auth []string
	// DPoP headers seen, one per request ("" when absent)
	dpop []string
	// Mcp-Session-Id headers seen, one per request ("" when absent)
	sessions []string
	// X-MCP-Identity headers seen, one per request ("" when absent)
	identities []string
}

func (u *upstream) seenIdentities() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.identities...)
}

func (u *upstream) seenSessions() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.sessions...)
}

func (u *upstream) seenDPoP() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.dpop...)
}

func (u *upstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auth...)
}

func newUpstream(t testing.TB, jsonResponse bool) *upstream {
	t.Helper()
	h := goUpstreamHandler(jsonResponse)
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auth = append(u.auth, r.Header.Get("Authorization"))
		u.dpop = append(u.dpop, r.Header.Get("DPoP"))
		u.sessions = append(u.sessions, r.Header.Get("Mcp-Session-Id"))
		u.identities = append(u.identities, strings.Join(r.Header.Values("X-MCP-Identity"), ","))
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// goUpstreamHandler is a Streamable HTTP MCP server of the Go SDK with the
// tools echo and admin_stats, the prompts greeting and incident_report, the
// resources file:///readme and file:///etc/secrets and the resource
// template db://{table}/rows.
func goUpstreamHandler(jsonResponse bool) http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "0"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Echoes text."},
		func(ctx context.Context, req *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "admin_stats", Description: "Statistics for administrators."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "42 sessions"}}}, nil, nil
		})
	prompt := func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: req.Params.Name}}}}, nil
	}
	server.AddPrompt(&mcp.Prompt{Name: "greeting"}, prompt)
	server.AddPrompt(&mcp.Prompt{Name: "incident_report"}, prompt)
	read := func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "contents"}}}, nil
	}
	server.AddResource(&mcp.Resource{URI: "file:///readme", Name: "readme"}, read)
	server.AddResource(&mcp.Resource{URI: "file:///etc/secrets", Name: "secrets"}, read)
	server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "db://{table}/rows", Name: "rows"}, read)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse, Logger: slog.New(slog.DiscardHandler)})
}

// stack is an in-process AS, an upstream, and the gateway between them.
type stack struct {
	issuer   string
	resource string // the gateway's
	up       *upstream
	gw       *httptest.Server
	audit    *syncBuffer
	cfg      *Config
	g        *Gateway
}

// startAS starts an in-process AS for the gateway's resource and the
// upstream's, with the clients of the tests, and returns its issuer.
func startAS(t testing.TB, resource, upRes string) string {
	t.Helper()
	return startASWith(t, resource, upRes, nil)
}

// startASWith is startAS with the AS's handler passed through wrap (nil:
// as it is).
func startASWith(t testing.TB, resource, upRes string, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	asSrv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + asSrv.Listener.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := as.New(ctx, as.Config{
		Issuer: issuer,
		Resources: []as.Resource{
			{URI: resource, Scopes: []string{"mcp:tools", "mcp:admin", "mcp:read"}, Default: true, IntrospectionClients: []string{"gw"},
				ApprovalClients: []string{"gw"}},
			{URI: upRes, Scopes: []string{"upstream:call"}},
		},
		Clients: []as.Client{
			{ID: "user-bot", Secret: botSecret, GrantTypes: []string{"client_credentials"}, Scopes: []string{"mcp:tools"}, Resources: []string{resource}},
			{ID: "admin-bot", Secret: botSecret, GrantTypes: []string{"client_credentials"}, Scopes: []string{"mcp:tools", "mcp:admin"}, Resources: []string{resource}},
			{ID: "gw", Secret: gwSecret, GrantTypes: []string{"client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"},
				Scopes: []string{"upstream:call"}, Resources: []string{upRes}},
		},
		ExchangePolicy: []as.ExchangeRule{{From: resource, To: upRes, Scopes: []string{"upstream:call"}, Clients: []string{"gw"}}},
		Store:          memory.New(),
		Secret:         bytes.Repeat([]byte{7}, 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	asSrv.Config.Handler = srv.Handler()
	if wrap != nil {
		asSrv.Config.Handler = wrap(srv.Handler())
	}
	asSrv.Start()
	t.Cleanup(func() { asSrv.Close(); cancel() })
	return issuer
}

// newStack starts the AS, the upstream and a gateway whose configuration
// is configText with ISSUER, RESOURCE and UPSTREAM substituted.
func newStack(t testing.TB, jsonResponse bool, configText string) *stack {
	t.Helper()
	return newStackTraced(t, jsonResponse, configText, nil)
}

// newStackTraced is newStack with the gateway's spans going to tp.
func newStackTraced(t testing.TB, jsonResponse bool, configText string, tp trace.TracerProvider) *stack {
	t.Helper()
	s := &stack{up: newUpstream(t, jsonResponse), audit: &syncBuffer{}}
	gw := httptest.NewUnstartedServer(nil)
	s.resource = "http://" + gw.Listener.Addr().String() + "/mcp"
	upRes := s.up.srv.URL + "/mcp"

	s.issuer = startAS(t, s.resource, upRes)

	s.startGateway(t, gw, configText, upRes, tp)
	return s
}

// startGateway starts on gw a gateway whose configuration is configText
// with ISSUER, RESOURCE and UPSTREAM (upRes) substituted, its spans going
// to tp (nil: none).
func (s *stack) startGateway(t testing.TB, gw *httptest.Server, configText, upRes string, tp trace.TracerProvider) {
	t.Helper()
	text := strings.NewReplacer("ISSUER", s.issuer, "RESOURCE", s.resource, "UPSTREAM", upRes).Replace(configText)
	cfg, err := ParseConfig([]byte(text), func(k string) (string, bool) {
		if k == "GW_SECRET" {
			return gwSecret, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	s.cfg = cfg
	g, err := NewGateway(cfg, Options{Logger: slog.New(slog.DiscardHandler), AuditWriter: s.audit, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	s.g = g
	gw.Config = g.Server()
	gw.Config.Addr = ""
	// The gateway's goroutines (its server's connections and its
	// transport's to the upstream, started from them) carry the profiler
	// label proc=gateway: go tool pprof -tagfocus proc=gateway.
	pprof.Do(context.Background(), pprof.Labels("proc", "gateway"), func(context.Context) { gw.Start() })
	t.Cleanup(gw.Close)
	s.gw = gw
}

const baseConfig = `
listen: 127.0.0.1:0
resource: RESOURCE
issuer: ISSUER
upstream: UPSTREAM
scopes:
  base: [mcp:tools]
  tools: {admin_stats: [mcp:admin]}
  methods: {resources/read: [mcp:read]}
tenant_claim: client_id
audit: {format: json}
`

// token obtains a client credentials token of client for the gateway.
func (s *stack) token(t testing.TB, client string) string {
	t.Helper()
	return issueToken(t, s.issuer, s.resource, client)
}

// issueToken obtains a client credentials token of client for resource.
func issueToken(t testing.TB, issuer, resource, client string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}}
	req, _ := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, botSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(body, &tr) != nil || tr.AccessToken == "" {
		t.Fatalf("token for %s: %d %s", client, resp.StatusCode, body)
	}
	return tr.AccessToken
}

// bearer is an http.RoundTripper adding a fixed access token.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// connect opens an MCP Go SDK client session through the gateway.
func (s *stack) connect(t testing.TB, token string) *mcp.ClientSession {
	t.Helper()
	client := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: s.resource, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// claims decodes a JWT's payload (the test reads what the servers verified).
func claims(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %.20s", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}
