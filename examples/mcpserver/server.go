package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/rsmiddleware/mcpsdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Scopes of this server.
const (
	ScopeTools = "mcp:tools" // every request
	ScopeAdmin = "mcp:admin" // admin_stats
	// ScopeReportsRead is what fetch_report asks the downstream API for.
	ScopeReportsRead = "reports:read"
)

type config struct {
	listen, resource, issuer, downstream string
	clientID, clientSecret               string
	// issuerInternal and downstreamInternal are the origins at which this
	// process reaches the AS and the downstream API when they differ from
	// those of --issuer and --downstream (a container network); "" for the
	// same.
	issuerInternal, downstreamInternal string
	// dpop is kept for older command lines (DPoP-bound tokens are accepted
	// by default); dpopRequired accepts only those.
	dpop, dpopRequired bool
	// dpopNonce requires server nonces in proofs (implies dpop), sealed
	// with dpopNonceSecret, or a random secret when it is "".
	dpopNonce       bool
	dpopNonceSecret string
	// statusMaxAge bounds the staleness of the token status list (0: the default).
	statusMaxAge time.Duration
	// httpClient reaches the AS (tests); nil means rsmiddleware's default.
	httpClient *http.Client
}

// reach returns the client for the AS and the transport for the downstream
// API: cfg.httpClient and the default transport, with requests for the
// public origins of --issuer and --downstream sent to --issuer-internal and
// --downstream-internal when those are set (rsmiddleware.RewriteOrigins).
func reach(cfg config) (*http.Client, http.RoundTripper, error) {
	routes := map[string]string{}
	for _, r := range []struct{ public, internal, flag string }{
		{cfg.issuer, cfg.issuerInternal, "--issuer-internal"},
		{cfg.downstream, cfg.downstreamInternal, "--downstream-internal"},
	} {
		if r.internal == "" {
			continue
		}
		u, err := url.Parse(r.public)
		if err != nil || u.Host == "" {
			return nil, nil, fmt.Errorf("%s needs the public URL it stands in for", r.flag)
		}
		routes[u.Scheme+"://"+u.Host] = r.internal
	}
	if len(routes) == 0 {
		return cfg.httpClient, nil, nil
	}
	var base http.RoundTripper
	if cfg.httpClient != nil {
		base = cfg.httpClient.Transport
	}
	rt, err := rsmiddleware.RewriteOrigins(base, routes)
	if err != nil {
		return nil, nil, err
	}
	return &http.Client{Transport: rt, Timeout: 10 * time.Second}, rt, nil
}

// newServer builds the whole HTTP handler: PRM, health, and the guarded MCP
// endpoint.
func newServer(cfg config, logger *slog.Logger) (http.Handler, error) {
	h, _, err := build(cfg, logger)
	return h, err
}

// build is newServer, also returning the MCP server behind the handler.
func build(cfg config, logger *slog.Logger) (http.Handler, *mcp.Server, error) {
	resource, err := metadata.CanonicalResource(cfg.resource)
	if err != nil {
		return nil, nil, errors.New("--resource: " + err.Error())
	}
	u, err := url.Parse(resource)
	if err != nil {
		return nil, nil, err
	}
	path := u.Path
	if path == "" {
		path = "/"
	}
	asClient, downstreamTransport, err := reach(cfg)
	if err != nil {
		return nil, nil, err
	}
	verifier, err := rsmiddleware.NewVerifier(rsmiddleware.Config{
		Issuer:       cfg.issuer,
		Resource:     resource,
		HTTPClient:   asClient,
		Logger:       logger,
		StatusMaxAge: cfg.statusMaxAge,
	})
	if err != nil {
		return nil, nil, err
	}
	prmURL, err := rsmiddleware.ResourceMetadataURL(resource)
	if err != nil {
		return nil, nil, err
	}
	scopes := rsmiddleware.Scopes{
		Base:  []string{ScopeTools},
		Tools: map[string][]string{"admin_stats": {ScopeAdmin}},
	}
	// DPoP-bound tokens are accepted whatever the flags (RFC 9449 §7): a
	// client that sent a proof to the AS holds one. The resource URI is
	// the endpoint's public URL: the htu of proofs.
	dcfg := rsmiddleware.DPoPConfig{PublicURL: resource, Required: cfg.dpopRequired, JTIs: dpop.NewMemoryJTIs(0)}
	if cfg.dpopNonce {
		secret := []byte(cfg.dpopNonceSecret)
		if len(secret) == 0 {
			secret = make([]byte, 32)
			if _, err := rand.Read(secret); err != nil {
				return nil, nil, err
			}
		}
		if dcfg.Nonces, err = dpop.NewNonces(secret, 0); err != nil {
			return nil, nil, fmt.Errorf("MCPSERVER_DPOP_NONCE_SECRET: %v", err)
		}
	}
	dp, err := rsmiddleware.NewDPoP(dcfg)
	if err != nil {
		return nil, nil, err
	}
	guard, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{
		Verifier:            verifier,
		ResourceMetadataURL: prmURL,
		Scopes:              scopes,
		Logger:              logger,
		DPoP:                dp,
	})
	if err != nil {
		return nil, nil, err
	}
	prm, err := rsmiddleware.NewProtectedResourceMetadata(resource, []string{cfg.issuer}, []string{ScopeTools, ScopeAdmin})
	if err != nil {
		return nil, nil, err
	}
	dp.AddToPRM(&prm)

	t := &tools{scopes: scopes, downstream: strings.TrimSuffix(cfg.downstream, "/"), logger: logger, started: time.Now()}
	if cfg.downstream == "" {
		logger.Info("fetch_report is off: start with --downstream URL (the downstream API's resource URI) and MCPSERVER_CLIENT_SECRET (this server's client secret at the AS, for the token exchange) to enable it")
	} else {
		if cfg.clientSecret == "" {
			return nil, nil, errors.New("MCPSERVER_CLIENT_SECRET is not set (needed for token exchange to --downstream)")
		}
		downstreamResource, err := metadata.CanonicalResource(cfg.downstream)
		if err != nil {
			return nil, nil, errors.New("--downstream: " + err.Error())
		}
		ex, err := rsmiddleware.NewExchanger(rsmiddleware.ExchangeConfig{
			Issuer:       cfg.issuer,
			ClientID:     cfg.clientID,
			ClientSecret: cfg.clientSecret,
			Scopes:       []string{ScopeReportsRead},
			HTTPClient:   asClient,
		})
		if err != nil {
			return nil, nil, err
		}
		t.downstreamClient = &http.Client{
			Transport: ex.Transport(downstreamTransport, downstreamResource),
			Timeout:   15 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}

	server := newMCPServer()
	t.register(server)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)

	mux := http.NewServeMux()
	if err := rsmiddleware.MountPRM(mux, prm, true); err != nil {
		return nil, nil, err
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	// Sessions belong to the user who opened them (MCP security best
	// practices: bind to "<user_id>:<session_id>"). Not to the client ID too:
	// the Go SDK's client registers again (a new client ID) when it steps up
	// to more scopes in the middle of a session.
	binding := &rsmiddleware.SessionBinding{Owner: func(p *rsmiddleware.Principal) string { return p.Subject }}
	mux.Handle(path, guard.Wrap(binding.Wrap(t.requests.Wrap(mcpHandler))))
	return mux, server, nil
}

type tools struct {
	scopes           rsmiddleware.Scopes
	downstream       string
	downstreamClient *http.Client
	// requests gives tool handlers the principal and context of the HTTP
	// request carrying their call (the SDK runs them in the session's).
	requests mcpsdk.RequestContexts
	logger   *slog.Logger
	started  time.Time

	mu    sync.Mutex
	calls map[string]int
}

// WhoAmI is the result of the whoami tool.
type WhoAmI struct {
	Subject   string    `json:"sub"`
	ClientID  string    `json:"client_id"`
	Scopes    []string  `json:"scopes"`
	Audience  []string  `json:"aud"`
	Issuer    string    `json:"iss"`
	TokenID   string    `json:"jti"`
	ExpiresAt time.Time `json:"expires_at"`
}

// AdminStats is the result of the admin_stats tool.
type AdminStats struct {
	UptimeSeconds int64          `json:"uptime_seconds"`
	ToolCalls     map[string]int `json:"tool_calls"`
	CalledBy      string         `json:"called_by"`
}

// Report is the result of the fetch_report tool: what the downstream API said.
type Report struct {
	Status int            `json:"status"`
	Body   map[string]any `json:"body"`
}

type empty struct{}

// register adds the tools to s; fetch_report only when a downstream API is
// configured.
func (t *tools) register(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        "whoami",
		Description: "Returns the authenticated principal (needs scope mcp:tools).",
	}, t.whoami)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "admin_stats",
		Description: "Server statistics for administrators (needs scope mcp:admin).",
	}, t.adminStats)
	if t.downstreamClient == nil {
		return // no downstream API configured: no fetch_report
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:        "fetch_report",
		Description: "Fetches a report from the downstream API with a token obtained by token exchange.",
	}, t.fetchReport)
}

func (t *tools) count(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.calls == nil {
		t.calls = map[string]int{}
	}
	t.calls[name]++
}

func (t *tools) whoami(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, WhoAmI, error) {
	t.count("whoami")
	p, _, err := t.requests.Principal(req)
	if err != nil {
		return nil, WhoAmI{}, err
	}
	return nil, WhoAmI{Subject: p.Subject, ClientID: p.ClientID, Scopes: p.Scopes, Audience: p.Audience, Issuer: p.Issuer, TokenID: p.TokenID, ExpiresAt: p.Expiry}, nil
}

func (t *tools) adminStats(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, AdminStats, error) {
	t.count("admin_stats")
	p, _, err := t.requests.Principal(req)
	if err != nil {
		return nil, AdminStats{}, err
	}
	// The middleware answers 403 insufficient_scope before this runs; check
	// again so the tool stays safe if the mapping is ever edited.
	if missing := p.MissingScopes(t.scopes.ForTool("admin_stats")); len(missing) > 0 {
		return nil, AdminStats{}, fmt.Errorf("missing scopes %v", missing)
	}
	t.mu.Lock()
	calls := make(map[string]int, len(t.calls))
	for k, v := range t.calls {
		calls[k] = v
	}
	t.mu.Unlock()
	return nil, AdminStats{UptimeSeconds: int64(time.Since(t.started).Seconds()), ToolCalls: calls, CalledBy: p.Subject}, nil
}

func (t *tools) fetchReport(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, Report, error) {
	t.count("fetch_report")
	if t.downstreamClient == nil {
		return nil, Report{}, errors.New("no --downstream configured")
	}
	p, reqCtx, err := t.requests.Principal(req)
	if err != nil {
		return nil, Report{}, err
	}
	// The outgoing request carries the inbound request's context, from which
	// the exchange RoundTripper takes the user's token to exchange; the
	// Authorization header it sends holds the exchanged token only.
	callCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	hreq, err := http.NewRequestWithContext(mergeValues(callCtx, reqCtx), http.MethodGet, t.downstream+"/report", nil)
	if err != nil {
		return nil, Report{}, err
	}
	resp, err := t.downstreamClient.Do(hreq)
	if err != nil {
		t.logger.Warn("fetch_report failed", "sub", p.Subject, "err", err)
		return nil, Report{}, fmt.Errorf("downstream call failed: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, Report{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, Report{}, fmt.Errorf("downstream answered %s", resp.Status)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, Report{}, errors.New("downstream answered something other than a JSON object")
	}
	return nil, Report{Status: resp.StatusCode, Body: doc}, nil
}

// mergeValues is a context with the deadline and cancellation of ctx and the
// values of values (the inbound HTTP request's, where rsmiddleware keeps the
// principal and token).
func mergeValues(ctx, values context.Context) context.Context {
	return valuesContext{Context: ctx, values: values}
}

type valuesContext struct {
	context.Context
	values context.Context
}

func (c valuesContext) Value(key any) any {
	if v := c.values.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// Authorization extensions this server takes tokens from (MCP
// docs/extensions/auth): announced in its capabilities, as the extensions
// ask of MCP servers. Nothing else is needed on this side: the tokens are
// ordinary access tokens for this resource.
const (
	ExtensionClientCredentials = "io.modelcontextprotocol/oauth-client-credentials"
	ExtensionEnterpriseAuth    = "io.modelcontextprotocol/enterprise-managed-authorization"
)

// newMCPServer is the example MCP server with its capabilities: logging (the
// SDK's default) and the authorization extensions; tools are added by
// tools.register.
func newMCPServer() *mcp.Server {
	caps := &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}
	caps.AddExtension(ExtensionClientCredentials, nil)
	caps.AddExtension(ExtensionEnterpriseAuth, nil)
	return mcp.NewServer(&mcp.Implementation{Name: "mcpauth-example-server", Version: "0.1.0"}, &mcp.ServerOptions{Capabilities: caps})
}
