package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	exchangeClientID   = "example-mcpserver"
)

// tokenSources is the MCP client's token source, made observable: it
// records every token the client obtained (code exchange, step-up, refresh)
// and can force a refresh, as happens when an access token expires.
type tokenSources struct {
	mu      sync.Mutex
	cfg     *oauth2.Config
	ctx     context.Context
	inner   oauth2.TokenSource
	current *oauth2.Token
	issued  []*oauth2.Token // every distinct token, oldest first
}

// newTokenSource is the AuthorizationCodeHandlerConfig.NewTokenSource hook.
func (ts *tokenSources) newTokenSource(ctx context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.cfg, ts.ctx = cfg, ctx
	ts.inner = cfg.TokenSource(ctx, tok)
	ts.note(tok)
	return ts, nil
}

func (ts *tokenSources) note(tok *oauth2.Token) {
	if ts.current == nil || ts.current.AccessToken != tok.AccessToken {
		ts.issued = append(ts.issued, tok)
	}
	ts.current = tok
}

// Token implements oauth2.TokenSource.
func (ts *tokenSources) Token() (*oauth2.Token, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	tok, err := ts.inner.Token()
	if err != nil {
		return nil, err
	}
	ts.note(tok)
	return tok, nil
}

// refresh redeems the current refresh token now (RFC 6749 §6) and makes the
// result the current token.
func (ts *tokenSources) refresh() (old, fresh *oauth2.Token, err error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	old = ts.current
	ts.inner = ts.cfg.TokenSource(ts.ctx, &oauth2.Token{RefreshToken: old.RefreshToken})
	fresh, err = ts.inner.Token()
	if err != nil {
		return old, nil, err
	}
	ts.note(fresh)
	return old, fresh, nil
}

func (ts *tokenSources) all() []*oauth2.Token {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]*oauth2.Token(nil), ts.issued...)
}

// flow says how one run of the full MCP authorization flow registers and
// logs in.
type flow struct {
	// cimd, when set, is the Client ID Metadata Document URL used as
	// client_id; otherwise the client registers by DCR.
	cimd        *cimdServer
	redirectURI string
	fetch       auth.AuthorizationCodeFetcher
	// afterLogin, when set, checks the login and consent pages seen.
	afterLogin func(t *testing.T, authorizations int)
}

// whoami is the whoami tool's result.
type whoami struct {
	Subject  string   `json:"sub"`
	ClientID string   `json:"client_id"`
	Scopes   []string `json:"scopes"`
	Audience []string `json:"aud"`
	Issuer   string   `json:"iss"`
	TokenID  string   `json:"jti"`
}

// seen is one record of the downstream API (examples/downstream).
type seen struct {
	Path     string   `json:"path"`
	Status   int      `json:"status"`
	TokenSHA string   `json:"token_sha256"`
	Subject  string   `json:"sub"`
	Audience []string `json:"aud"`
	ClientID string   `json:"client_id"`
	Scopes   []string `json:"scopes"`
	TokenID  string   `json:"jti"`
	Actor    *struct {
		Subject  string `json:"sub"`
		ClientID string `json:"client_id"`
	} `json:"act"`
}

// probeDiscovery walks the discovery chain by hand, as a client author would
// debug it: 401 -> PRM -> AS metadata. It returns the AS metadata.
func probeDiscovery(t *testing.T, s *launch.Stack) map[string]any {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"probe","version":"0"}}}`
	req, _ := http.NewRequest(http.MethodPost, s.MCPURL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated initialize: %s, want 401", resp.Status)
	}
	challenge := resp.Header.Get("WWW-Authenticate")
	prmURL := strings.Replace(s.MCPURL, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)
	if !strings.HasPrefix(challenge, "Bearer ") || !strings.Contains(challenge, `resource_metadata="`+prmURL+`"`) {
		t.Errorf("401 challenge %q does not name %s", challenge, prmURL)
	}
	if strings.Contains(challenge, "error=") {
		t.Errorf("401 without a token carries an error code: %q (RFC 6750 §3.1)", challenge)
	}

	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
		BearerMethods        []string `json:"bearer_methods_supported"`
	}
	getJSON(t, prmURL, &prm)
	if prm.Resource != s.MCPURL || !slices.Equal(prm.AuthorizationServers, []string{s.Issuer}) {
		t.Errorf("PRM resource %q servers %v, want %q [%s]", prm.Resource, prm.AuthorizationServers, s.MCPURL, s.Issuer)
	}
	if !slices.Contains(prm.ScopesSupported, "mcp:tools") || slices.Contains(prm.ScopesSupported, "offline_access") {
		t.Errorf("PRM scopes_supported = %v", prm.ScopesSupported)
	}

	var asm map[string]any
	getJSON(t, s.Issuer+"/.well-known/oauth-authorization-server", &asm)
	if asm["issuer"] != s.Issuer {
		t.Errorf("AS metadata issuer %v, want %s", asm["issuer"], s.Issuer)
	}
	if !containsAny(asm["code_challenge_methods_supported"], "S256") {
		t.Errorf("AS metadata code_challenge_methods_supported = %v, want S256", asm["code_challenge_methods_supported"])
	}
	if asm["client_id_metadata_document_supported"] != true {
		t.Errorf("AS metadata does not advertise client_id_metadata_document_supported")
	}
	if r, _ := asm["registration_endpoint"].(string); r == "" {
		t.Errorf("AS metadata has no registration_endpoint")
	}
	return asm
}

func containsAny(list any, want string) bool {
	l, _ := list.([]any)
	for _, v := range l {
		if v == want {
			return true
		}
	}
	return false
}

// runFlow drives a real MCP client (the Go SDK's AuthorizationCodeHandler and
// mcp.Client over Streamable HTTP) through the whole MCP authorization flow
// against the running stack, and checks every step.
func runFlow(t *testing.T, s *launch.Stack, f flow) {
	asm := probeDiscovery(t, s)

	rec := &recorder{base: http.DefaultTransport}
	httpClient := &http.Client{Transport: rec}
	tokens := &tokenSources{}
	var filterCalls int
	var fetches []string
	var mu sync.Mutex
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL: f.redirectURI,
		AuthorizationCodeFetcher: func(ctx context.Context, a *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			mu.Lock()
			fetches = append(fetches, a.URL)
			mu.Unlock()
			return f.fetch(ctx, a)
		},
		// The first authorization asks only for mcp:tools, so that
		// admin_stats has to step up to mcp:admin later.
		ScopeFilter: func(discovered []string) []string {
			mu.Lock()
			defer mu.Unlock()
			filterCalls++
			if filterCalls == 1 {
				return slices.DeleteFunc(slices.Clone(discovered), func(s string) bool { return s == "mcp:admin" })
			}
			return discovered
		},
		Client:         httpClient,
		NewTokenSource: tokens.newTokenSource,
	}
	if f.cimd != nil {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: f.cimd.URL}
	} else {
		cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName:              "mcpauth e2e DCR client",
				RedirectURIs:            []string{f.redirectURI},
				TokenEndpointAuthMethod: "none",
				GrantTypes:              []string{"authorization_code", "refresh_token"},
				ResponseTypes:           []string{"code"},
			},
		}
	}
	handler, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpauth-e2e", Version: "0.0.1"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:     s.MCPURL,
		HTTPClient:   httpClient,
		OAuthHandler: handler,
	}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nHTTP exchanges:\n%s", err, rec)
	}
	defer session.Close()

	// The dance, as the client performed it.
	t.Run("the client discovered, registered and authorized", func(t *testing.T) {
		prmURL := strings.Replace(s.MCPURL, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)
		steps := []struct {
			what, method, url string
			status            int
		}{
			{"unauthenticated request answered 401", "POST", s.MCPURL, 401},
			{"protected resource metadata fetched", "GET", prmURL, 200},
			{"AS metadata fetched", "GET", s.Issuer + "/.well-known/", 200},
		}
		if f.cimd == nil {
			steps = append(steps, struct {
				what, method, url string
				status            int
			}{"client registered by DCR", "POST", asm["registration_endpoint"].(string), 201})
		}
		steps = append(steps,
			struct {
				what, method, url string
				status            int
			}{"code redeemed at the token endpoint", "POST", asm["token_endpoint"].(string), 200},
			struct {
				what, method, url string
				status            int
			}{"request retried with the token", "POST", s.MCPURL, 200},
		)
		at := 0
		for _, st := range steps {
			i := rec.find(at, st.method, st.url, st.status)
			if i < 0 {
				t.Fatalf("step %q (%s %s -> %d) not found after exchange %d; exchanges:\n%s", st.what, st.method, st.url, st.status, at, rec)
			}
			at = i + 1
		}
		if f.cimd != nil {
			if f.cimd.Hits() == 0 {
				t.Errorf("the AS never fetched the client metadata document %s", f.cimd.URL)
			}
			if rec.find(0, "POST", asm["registration_endpoint"].(string), 0) >= 0 {
				t.Errorf("a CIMD client registered by DCR too")
			}
		}
		mu.Lock()
		first := fetches[0]
		mu.Unlock()
		u, err := url.Parse(first)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) < 43 {
			t.Errorf("authorization request without PKCE S256: %v", q)
		}
		if q.Get("resource") != s.MCPURL {
			t.Errorf("authorization request resource = %q, want %q", q.Get("resource"), s.MCPURL)
		}
		if f.cimd != nil && q.Get("client_id") != f.cimd.URL {
			t.Errorf("client_id = %q, want the CIMD URL %q", q.Get("client_id"), f.cimd.URL)
		}
		if scopes := strings.Fields(q.Get("scope")); !slices.Contains(scopes, "mcp:tools") || slices.Contains(scopes, "mcp:admin") {
			t.Errorf("first authorization asked for scopes %v, want mcp:tools without mcp:admin", scopes)
		}
		if f.afterLogin != nil {
			f.afterLogin(t, 1)
		}
	})

	first := tokens.all()[0]
	claims := jwtClaims(t, first.AccessToken)
	var me whoami
	t.Run("whoami returns the principal of an audience-bound token", func(t *testing.T) {
		me = callTool[whoami](t, ctx, session, "whoami")
		if me.Subject == "" || me.Subject != claims["sub"] {
			t.Errorf("whoami sub %q, token sub %v", me.Subject, claims["sub"])
		}
		if !slices.Equal(me.Audience, []string{s.MCPURL}) || !containsAny(toList(claims["aud"]), s.MCPURL) {
			t.Errorf("aud: whoami %v, token %v; want exactly %s", me.Audience, claims["aud"], s.MCPURL)
		}
		if f.cimd != nil && me.ClientID != f.cimd.URL {
			t.Errorf("client_id %q, want %q", me.ClientID, f.cimd.URL)
		}
		if me.Issuer != s.Issuer || claims["iss"] != s.Issuer {
			t.Errorf("iss %q / %v, want %s", me.Issuer, claims["iss"], s.Issuer)
		}
		if slices.Contains(me.Scopes, "mcp:admin") || !slices.Contains(me.Scopes, "mcp:tools") {
			t.Errorf("scopes %v, want mcp:tools without mcp:admin", me.Scopes)
		}
	})

	t.Run("admin_stats steps up to mcp:admin", func(t *testing.T) {
		before := len(rec.exchanges())
		var stats struct {
			CalledBy string `json:"called_by"`
		}
		stats = callTool[struct {
			CalledBy string `json:"called_by"`
		}](t, ctx, session, "admin_stats")
		if stats.CalledBy != me.Subject {
			t.Errorf("admin_stats called_by %q, want %q", stats.CalledBy, me.Subject)
		}
		i := rec.find(before, "POST", s.MCPURL, 403)
		if i < 0 {
			t.Fatalf("no 403 step-up challenge; exchanges:\n%s", rec)
		}
		ch := rec.exchanges()[i].WWWAuth
		if !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, "mcp:admin") || !strings.Contains(ch, "resource_metadata=") {
			t.Errorf("step-up challenge %q", ch)
		}
		mu.Lock()
		n := len(fetches)
		last := fetches[n-1]
		mu.Unlock()
		if n != 2 {
			t.Fatalf("%d authorizations, want 2 (initial and step-up)", n)
		}
		u, _ := url.Parse(last)
		if scopes := strings.Fields(u.Query().Get("scope")); !slices.Contains(scopes, "mcp:admin") || !slices.Contains(scopes, "mcp:tools") {
			t.Errorf("step-up asked for %v, want mcp:tools and mcp:admin", scopes)
		}
		after := callTool[whoami](t, ctx, session, "whoami")
		if !slices.Contains(after.Scopes, "mcp:admin") || after.Subject != me.Subject {
			t.Errorf("after step-up whoami = %+v", after)
		}
		if f.afterLogin != nil {
			f.afterLogin(t, 2)
		}
	})

	t.Run("the refresh token rotates and the new access token works", func(t *testing.T) {
		old, fresh, err := tokens.refresh()
		if err != nil {
			t.Fatalf("refresh: %v", err)
		}
		if fresh.AccessToken == old.AccessToken {
			t.Errorf("refresh returned the same access token")
		}
		if fresh.RefreshToken == "" || fresh.RefreshToken == old.RefreshToken {
			t.Errorf("refresh token was not rotated")
		}
		fc := jwtClaims(t, fresh.AccessToken)
		if fc["sub"] != me.Subject || !containsAny(toList(fc["aud"]), s.MCPURL) {
			t.Errorf("refreshed token sub %v aud %v", fc["sub"], fc["aud"])
		}
		after := callTool[whoami](t, ctx, session, "whoami")
		if after.TokenID != fc["jti"] {
			t.Errorf("server saw jti %q, want the refreshed token's %v", after.TokenID, fc["jti"])
		}
		// The rotated-out refresh token, replayed long after the race
		// grace window would have closed, is refused (RFC 9700 §4.14.2).
		// (Not waited for here: the grace window is configurable; the AS
		// tests cover replay.)
	})

	t.Run("fetch_report reaches the downstream API with an exchanged token only", func(t *testing.T) {
		if !containsAny(asm["grant_types_supported"], grantTokenExchange) {
			t.Errorf("the AS does not advertise the RFC 8693 token-exchange grant: grant_types_supported = %v", asm["grant_types_supported"])
		}
		report := callTool[struct {
			Status int            `json:"status"`
			Body   map[string]any `json:"body"`
		}](t, ctx, session, "fetch_report")
		if report.Status != 200 || report.Body["for"] != me.Subject || report.Body["via"] != exchangeClientID {
			t.Errorf("fetch_report = %d %v", report.Status, report.Body)
		}
		var records []seen
		getJSON(t, strings.Replace(s.DownstreamURL, "/api", "/debug/seen", 1), &records)
		userTokens := map[string]bool{}
		userJTIs := map[string]bool{}
		for _, tok := range tokens.all() {
			userTokens[fingerprint(tok.AccessToken)] = true
			userJTIs[jwtClaims(t, tok.AccessToken)["jti"].(string)] = true
		}
		var accepted int
		for _, r := range records {
			if userTokens[r.TokenSHA] {
				t.Errorf("the downstream API received one of the user's tokens (%s -> %d)", r.Path, r.Status)
			}
			if r.Status != 200 {
				continue
			}
			accepted++
			if r.Subject != me.Subject {
				t.Errorf("downstream saw sub %q, want %q", r.Subject, me.Subject)
			}
			if !slices.Contains(r.Audience, s.DownstreamURL) || slices.Contains(r.Audience, s.MCPURL) {
				t.Errorf("downstream saw aud %v, want %s only", r.Audience, s.DownstreamURL)
			}
			if r.Actor == nil || (r.Actor.Subject != exchangeClientID && r.Actor.ClientID != exchangeClientID) {
				t.Errorf("downstream saw act %+v, want the MCP server %s", r.Actor, exchangeClientID)
			}
			if userJTIs[r.TokenID] {
				t.Errorf("downstream saw the jti of a user token")
			}
			if !slices.Contains(r.Scopes, "reports:read") || slices.Contains(r.Scopes, "mcp:admin") {
				t.Errorf("downstream token scopes %v, want reports:read only", r.Scopes)
			}
		}
		if accepted == 0 {
			t.Fatalf("the downstream API accepted no request; records: %+v", records)
		}
	})

	t.Run("a user token sent straight to the downstream API is refused", func(t *testing.T) {
		user := tokens.all()
		req, _ := http.NewRequest(http.MethodGet, s.DownstreamURL+"/report", nil)
		req.Header.Set("Authorization", "Bearer "+user[len(user)-1].AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("token for %s at %s: %s %q, want 401 invalid_token (audience)", s.MCPURL, s.DownstreamURL, resp.Status, resp.Header.Get("WWW-Authenticate"))
		}
	})
}

func toList(v any) any {
	if s, ok := v.(string); ok {
		return []any{s}
	}
	return v
}

// callTool calls a tool and decodes its structured result.
func callTool[T any](t *testing.T, ctx context.Context, session *mcp.ClientSession, name string) T {
	t.Helper()
	var out T
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	if res.IsError {
		var text []string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text = append(text, tc.Text)
			}
		}
		t.Fatalf("tools/call %s failed: %s", name, strings.Join(text, "; "))
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("tools/call %s: result %s: %v", name, raw, err)
	}
	return out
}
