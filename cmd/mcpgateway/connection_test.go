package main

import (
	"bytes"
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/connections"
	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/internal/testprovider"
	"github.com/mcpauth/mcpauth/storage/memory"
	upstreamoidc "github.com/mcpauth/mcpauth/upstream"
)

const (
	alicePassword = "alice-password-0123456789"
	appRedirect   = "http://127.0.0.1:1/callback"
)

// connStack is an AS with a person (alice), login pages and a connection
// "github" at a test provider, an upstream MCP server that refuses any
// credentials but the provider's live tokens and answers the provider's
// login of the token's owner, and a gateway with upstream_auth.connection
// in front of it.
type connStack struct {
	issuer, resource string
	tp               *testprovider.Provider
	cp               *connections.Provider
	vault            *connections.Vault
	gw               *httptest.Server
	mu               sync.Mutex
	upstreamAuth     []string
	// strict: the upstream refuses requests without credentials too, as
	// GitHub's MCP server does.
	strict bool
}

func newConnStack(t *testing.T) *connStack { return newConnStackOf(t, false) }

func newConnStackOf(t *testing.T, strict bool) *connStack {
	t.Helper()
	cs := &connStack{tp: testprovider.New(testprovider.Config{Login: "alice-gh"}), strict: strict}
	ps := httptest.NewServer(cs.tp.Handler())
	t.Cleanup(ps.Close)
	cs.tp.Issuer = ps.URL

	// The upstream: a Go SDK server whose tool whoami reads the bearer
	// token it received and answers the provider's login of its owner.
	server := mcp.NewServer(&mcp.Implementation{Name: "github-like", Version: "0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "The provider's user name."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			preq, _ := http.NewRequestWithContext(ctx, http.MethodGet, cs.tp.UserEndpoint(), nil)
			preq.Header.Set("Authorization", req.Extra.Header.Get("Authorization"))
			resp, err := http.DefaultClient.Do(preq)
			if err != nil {
				return nil, nil, err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{JSONResponse: true, Logger: slog.New(slog.DiscardHandler)})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := r.Header.Get("Authorization")
		cs.mu.Lock()
		cs.upstreamAuth = append(cs.upstreamAuth, a)
		cs.mu.Unlock()
		// No credentials are fine for what needs no account (initialize,
		// tools/list); credentials must be a live provider token.
		if tok, ok := strings.CutPrefix(a, "Bearer "); (a != "" || cs.strict) && (!ok || !cs.tp.Active(tok)) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "bad credentials", http.StatusUnauthorized)
			return
		}
		mh.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)

	gw := httptest.NewUnstartedServer(nil)
	cs.resource = "http://" + gw.Listener.Addr().String() + "/mcp"
	asSrv := httptest.NewUnstartedServer(nil)
	cs.issuer = "http://" + asSrv.Listener.Addr().String()
	store := memory.New()
	secret := bytes.Repeat([]byte{9}, 32)
	var err error
	cs.cp, err = connections.NewProvider(connections.Config{ID: "github", Name: "GitHub",
		AuthorizationEndpoint: cs.tp.AuthorizationEndpoint(), TokenEndpoint: cs.tp.TokenEndpoint(), RevocationEndpoint: cs.tp.RevocationEndpoint(),
		ClientID: "client", ClientSecret: "client-secret", Scopes: []string{"repo"}, Resource: "https://api.github.example",
		Clients: []string{"gh-gw"}, RedirectURL: cs.issuer + "/connections/github/callback"})
	if err != nil {
		t.Fatal(err)
	}
	cs.vault, err = connections.NewVault(connections.VaultConfig{Providers: []*connections.Provider{cs.cp}, Store: store, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	hash, err := password.Hash(alicePassword)
	if err != nil {
		t.Fatal(err)
	}
	ui, err := loginui.New(loginui.Config{Users: []loginui.User{{Username: "alice", PasswordHash: hash}}, Consents: store, JTIs: store,
		Secret: secret, Connections: cs.vault})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := as.New(ctx, as.Config{
		Issuer:    cs.issuer,
		Resources: []as.Resource{{URI: cs.resource, Scopes: []string{"mcp:tools"}, Default: true}},
		Clients: []as.Client{
			{ID: "demo-app", Public: true, RedirectURIs: []string{appRedirect}},
			{ID: "gh-gw", Secret: gwSecret, Resources: []string{cs.resource}},
		},
		UI: ui, Store: store, Secret: secret, Connections: cs.vault,
	})
	if err != nil {
		t.Fatal(err)
	}
	asSrv.Config.Handler = srv.Handler()
	asSrv.Start()
	t.Cleanup(func() { asSrv.Close(); cancel() })

	cfg, err := ParseConfig([]byte(strings.NewReplacer("ISSUER", cs.issuer, "RESOURCE", cs.resource, "UPSTREAM", up.URL+"/mcp").Replace(`
listen: 127.0.0.1:0
resource: RESOURCE
issuer: ISSUER
upstream: UPSTREAM
scopes: {base: [mcp:tools]}
upstream_auth: {connection: github, client_id: gh-gw, client_secret: ${GW_SECRET}}
audit: {format: json}
`)), func(k string) (string, bool) { return gwSecret, k == "GW_SECRET" })
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGateway(cfg, Options{Logger: slog.New(slog.DiscardHandler), AuditWriter: &syncBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	gw.Config = g.Server()
	gw.Config.Addr = ""
	gw.Start()
	t.Cleanup(gw.Close)
	cs.gw = gw
	return cs
}

var (
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)"[^>]*>(.*?)</form>`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// personToken signs alice in on the AS's pages and consents, as a browser
// would, and returns her access token for the gateway's resource.
func (cs *connStack) personToken(t *testing.T) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	asHost := strings.TrimPrefix(cs.issuer, "http://")
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Host != asHost {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	conf := &oauth2.Config{ClientID: "demo-app", RedirectURL: appRedirect, Scopes: []string{"mcp:tools"},
		Endpoint: oauth2.Endpoint{AuthURL: cs.issuer + "/authorize", TokenURL: cs.issuer + "/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	resp, err := c.Get(conf.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", cs.resource)))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); strings.HasPrefix(loc, appRedirect) {
			u, _ := url.Parse(loc)
			tok, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
			if err != nil {
				t.Fatal(err)
			}
			return tok.AccessToken
		}
		m := formRE.FindStringSubmatch(string(body))
		if m == nil {
			t.Fatalf("no form (status %d):\n%s", resp.StatusCode, body)
		}
		v := url.Values{}
		for _, h := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			v.Set(html.UnescapeString(h[1]), html.UnescapeString(h[2]))
		}
		if strings.Contains(m[2], `name="password"`) {
			v.Set("username", "alice")
			v.Set("password", alicePassword)
		} else {
			v.Set("action", "approve")
		}
		target, _ := url.Parse(cs.issuer)
		action, _ := target.Parse(html.UnescapeString(m[1]))
		if resp, err = c.PostForm(action.String(), v); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the authorization did not end at the client")
	return ""
}

// connect links alice's account at the provider through its code flow.
func (cs *connStack) connect(t *testing.T) {
	t.Helper()
	verifier := upstreamoidc.NewVerifier()
	u, _ := cs.cp.AuthCodeURL(context.Background(), "s", verifier)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	tok, err := cs.cp.Exchange(context.Background(), loc.Query().Get("code"), verifier)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.vault.Save(context.Background(), "alice", "github", tok); err != nil {
		t.Fatal(err)
	}
}

func (cs *connStack) whoami(t *testing.T, session *mcp.ClientSession) (string, bool) {
	t.Helper()
	res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("content %+v", res.Content)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

func TestUpstreamAuthConnection(t *testing.T) {
	cs := newConnStack(t)
	token := cs.personToken(t)
	client := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	session, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: cs.resource, HTTPClient: client}, nil)
	if err != nil {
		t.Fatalf("initialize, which needs no account: %v", err)
	}
	text, isErr := cs.whoami(t, session)
	if !isErr || !strings.Contains(text, cs.issuer+"/connections?connection=github") {
		t.Fatalf("before connecting: %v %q", isErr, text)
	}
	cs.connect(t)
	defer session.Close()
	text, isErr = cs.whoami(t, session)
	if isErr || !strings.Contains(text, `"login":"alice-gh"`) {
		t.Fatalf("after connecting: %v %q", isErr, text)
	}
	cs.mu.Lock()
	last := cs.upstreamAuth[len(cs.upstreamAuth)-1]
	for _, a := range cs.upstreamAuth {
		if strings.Contains(a, token) {
			t.Fatal("the caller's token reached the upstream")
		}
	}
	cs.mu.Unlock()
	if tok, _ := strings.CutPrefix(last, "Bearer "); !cs.tp.Active(tok) {
		t.Fatalf("the upstream got %q, not a provider token", last)
	}
	refreshes := cs.tp.Count("code")
	// Cached per person: the next calls take no exchange round trip to the provider.
	cs.whoami(t, session)
	if cs.tp.Count("code") != refreshes {
		t.Fatal("a new grant at the provider per call")
	}

	// Disconnected (the provider revokes the token): the next call gets
	// the connect URL again, although the gateway had the token cached.
	if ok, err := cs.vault.Disconnect(context.Background(), "alice", "github"); !ok || err != nil {
		t.Fatalf("Disconnect: %v %v", ok, err)
	}
	text, isErr = cs.whoami(t, session)
	if !isErr || !strings.Contains(text, cs.issuer+"/connections?connection=github") {
		t.Fatalf("after disconnecting: %v %q", isErr, text)
	}
}

// An upstream that needs the account for everything (initialize too) gets
// no request without it: initialize is answered with the connect URL
// (-32042, whose message names the URL for a client without URL
// elicitation), and works once the person connected.
func TestUpstreamAuthConnectionStrictUpstream(t *testing.T) {
	cs := newConnStackOf(t, true)
	client := &http.Client{Transport: bearer{cs.personToken(t), http.DefaultTransport}}
	connect := func() (*mcp.ClientSession, error) {
		return mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: cs.resource, HTTPClient: client}, nil)
	}
	// The Go SDK client shows the error's message only: it must name the
	// connect page.
	if _, err := connect(); err == nil || !strings.Contains(err.Error(), "needs your github account") ||
		!strings.Contains(err.Error(), cs.issuer+"/connections?connection=github") {
		t.Fatalf("initialize before connecting: %v", err)
	}
	cs.connect(t)
	session, err := connect()
	if err != nil {
		t.Fatalf("initialize after connecting: %v", err)
	}
	defer session.Close()
	if text, isErr := cs.whoami(t, session); isErr || !strings.Contains(text, `"login":"alice-gh"`) {
		t.Fatalf("after connecting: %v %q", isErr, text)
	}
}
