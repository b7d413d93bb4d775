package as

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/connections"
	"github.com/mcpauth/mcpauth/internal/syncbuf"
	"github.com/mcpauth/mcpauth/internal/testprovider"
)

const (
	githubAPI     = "https://api.github.example"
	ghGateway     = "gh-gateway"
	ghGatewaySecr = "gh-gateway-secret-0123456789abcdef"
)

// connHarness is exchangeHarness with a connection "github" at a test
// provider, released to gh-gateway (a confidential client of mcpURI with
// no grant types of its own), and the server's log.
type connHarness struct {
	*harness
	tp    *testprovider.Provider
	cp    *connections.Provider
	vault *connections.Vault
	logs  *syncbuf.Buffer
	// vclock is the vault's clock: the wall clock, which the provider's
	// expiries count from, moved on by the tests.
	vclock *clock
}

func newConnHarness(t *testing.T, pc testprovider.Config) *connHarness {
	t.Helper()
	ch := &connHarness{tp: testprovider.New(pc), logs: &syncbuf.Buffer{}, vclock: &clock{t: time.Now()}}
	srv := httptest.NewServer(ch.tp.Handler())
	t.Cleanup(srv.Close)
	ch.tp.Issuer = srv.URL
	var err error
	ch.cp, err = connections.NewProvider(connections.Config{
		ID: "github", Name: "GitHub",
		AuthorizationEndpoint: ch.tp.AuthorizationEndpoint(), TokenEndpoint: ch.tp.TokenEndpoint(),
		ClientID: "client", ClientSecret: "client-secret", Scopes: []string{"repo", "read:user"},
		Resource: githubAPI, Clients: []string{ghGateway}, RedirectURL: "https://as.example/connections/github/callback",
	})
	if err != nil {
		t.Fatal(err)
	}
	ch.harness = exchangeHarness(t, func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(ch.logs, nil))
		c.Clients = append(c.Clients, Client{ID: ghGateway, Secret: ghGatewaySecr, Resources: []string{mcpURI}})
		v, err := connections.NewVault(connections.VaultConfig{Providers: []*connections.Provider{ch.cp}, Store: c.Store,
			Secret: c.Secret, Now: ch.vclock.Now})
		if err != nil {
			t.Fatal(err)
		}
		ch.vault = v
		c.Connections = v
	})
	return ch
}

// connect runs the provider's code flow for subject and stores the tokens.
func (ch *connHarness) connect(t *testing.T, subject string) *connections.Token {
	t.Helper()
	u, err := ch.cp.AuthCodeURL(context.Background(), "s", "verifier-0123456789012345678901234567890123")
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	tok, err := ch.cp.Exchange(context.Background(), loc.Query().Get("code"), "verifier-0123456789012345678901234567890123")
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.vault.Save(context.Background(), subject, "github", tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestConnectionExchangeReleasesTheProvidersToken(t *testing.T) {
	ch := newConnHarness(t, testprovider.Config{Login: "alice-gh"})
	user := ch.codeFlow("mcp:tools")

	// Not connected yet: interaction_required with where to connect.
	resp, body := ch.post("/token", exchangeForm(user.AccessToken, githubAPI, "requested_token_type", TokenTypeAccessToken), ghGateway, ghGatewaySecr)
	want := ch.issuer + "/connections?connection=github"
	if resp.StatusCode != http.StatusBadRequest || body["error"] != "interaction_required" || body["connect_uri"] != want {
		t.Fatalf("not connected: %d %v", resp.StatusCode, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}

	tok := ch.connect(t, "alice")
	resp, body = ch.post("/token", exchangeForm(user.AccessToken, githubAPI, "requested_token_type", TokenTypeAccessToken), ghGateway, ghGatewaySecr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("connected: %d %v", resp.StatusCode, body)
	}
	if body["access_token"] != tok.AccessToken || body["issued_token_type"] != TokenTypeAccessToken || body["token_type"] != "bearer" ||
		body["refresh_token"] != nil || body["scope"] != "repo read:user" {
		t.Fatalf("answer %v", body)
	}
	if exp, _ := body["expires_in"].(float64); exp < 3000 || exp > 3610 {
		t.Fatalf("expires_in %v", body["expires_in"])
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	// The token works at the provider's API, as alice's account there.
	req, _ := http.NewRequest(http.MethodGet, ch.tp.UserEndpoint(), nil)
	req.Header.Set("Authorization", "Bearer "+body["access_token"].(string))
	ur, err := http.DefaultClient.Do(req)
	if err != nil || ur.StatusCode != http.StatusOK {
		t.Fatalf("provider API: %v %v", ur, err)
	}
	ur.Body.Close()

	// The connection may be named by its id as audience (RFC 8693 §2.1).
	byID := ch.exchange(t, user.AccessToken, "", ghGateway, ghGatewaySecr, "audience", "github")
	if byID["access_token"] != tok.AccessToken {
		t.Fatalf("audience=github: %v", byID)
	}
	if resp, b := ch.post("/token", exchangeForm(user.AccessToken, "", "audience", "gitlab"), ghGateway, ghGatewaySecr); resp.StatusCode != http.StatusBadRequest || b["error"] != "invalid_target" {
		t.Fatalf("audience of no connection: %d %v", resp.StatusCode, b)
	}

	logs := ch.logs.String()
	if !strings.Contains(logs, `"event":"connection.token_released"`) || !strings.Contains(logs, `"connection":"github"`) ||
		!strings.Contains(logs, `"client_id":"gh-gateway"`) {
		t.Fatalf("no connection.token_released audit event:\n%s", logs)
	}
	if strings.Contains(logs, tok.AccessToken) || strings.Contains(logs, tok.RefreshToken) {
		t.Fatal("a provider token is in the log")
	}
}

func TestConnectionExchangeRefusals(t *testing.T) {
	ch := newConnHarness(t, testprovider.Config{})
	ch.connect(t, "alice")
	user := ch.codeFlow("mcp:tools")
	other := ch.exchange(t, user.AccessToken, otherURI, "mcp-server", mcpSrvSecret)["access_token"].(string)
	cases := []struct {
		name, subject, user, pass string
		extra                     []string
		status                    int
		code                      string
	}{
		{"a client not in the connection's clients", user.AccessToken, "mcp-server", mcpSrvSecret, nil, http.StatusBadRequest, "invalid_target"},
		{"a client that does not authenticate", user.AccessToken, ghGateway, "wrong", nil, http.StatusUnauthorized, "invalid_client"},
		{"a subject token of another audience", other, ghGateway, ghGatewaySecr, nil, http.StatusBadRequest, "invalid_grant"},
		{"a subject token that is not ours", "eyJhbGciOiJub25lIn0.e30.", ghGateway, ghGatewaySecr, nil, http.StatusBadRequest, "invalid_grant"},
		{"another requested token type", user.AccessToken, ghGateway, ghGatewaySecr, []string{"requested_token_type", "urn:ietf:params:oauth:token-type:refresh_token"}, http.StatusBadRequest, "invalid_request"},
		{"an actor token", user.AccessToken, ghGateway, ghGatewaySecr, []string{"actor_token", "x", "actor_token_type", TokenTypeAccessToken}, http.StatusBadRequest, "invalid_request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := ch.post("/token", exchangeForm(c.subject, githubAPI, c.extra...), c.user, c.pass)
			if resp.StatusCode != c.status || body["error"] != c.code || body["access_token"] != nil {
				t.Fatalf("%d %v, want %d %s", resp.StatusCode, body, c.status, c.code)
			}
		})
	}
	t.Run("a disabled person", func(t *testing.T) {
		ctx := context.Background()
		if err := ch.store.SetUserDisabled(ctx, "alice", true); err != nil {
			t.Fatal(err)
		}
		defer ch.store.SetUserDisabled(ctx, "alice", false)
		resp, body := ch.post("/token", exchangeForm(user.AccessToken, githubAPI), ghGateway, ghGatewaySecr)
		if resp.StatusCode != http.StatusBadRequest || body["error"] != "invalid_grant" || body["access_token"] != nil {
			t.Fatalf("%d %v", resp.StatusCode, body)
		}
	})
	t.Run("the same request from an allowed client works", func(t *testing.T) {
		ch.exchange(t, user.AccessToken, githubAPI, ghGateway, ghGatewaySecr)
	})
	if strings.Contains(ch.logs.String(), `"event":"connection.token_released","client_id":"mcp-server"`) {
		t.Fatal("a refused client got a token")
	}
}

func TestConnectionExchangeRefreshesAndAsksToReconnect(t *testing.T) {
	ch := newConnHarness(t, testprovider.Config{AccessTTL: time.Hour})
	first := ch.connect(t, "alice")
	user := ch.codeFlow("mcp:tools")
	ch.vclock.Advance(time.Hour)
	body := ch.exchange(t, user.AccessToken, githubAPI, ghGateway, ghGatewaySecr)
	if body["access_token"] == first.AccessToken || ch.tp.Count("refresh") != 1 || !ch.tp.Active(body["access_token"].(string)) {
		t.Fatalf("after expiry: %v, %d refreshes", body, ch.tp.Count("refresh"))
	}
	ch.vclock.Advance(-time.Hour) // back to the wall clock: the refreshed token is fresh
	if again := ch.exchange(t, user.AccessToken, githubAPI, ghGateway, ghGatewaySecr); again["access_token"] != body["access_token"] || ch.tp.Count("refresh") != 1 {
		t.Fatalf("a fresh refreshed token was refreshed again: %d refreshes", ch.tp.Count("refresh"))
	}
	ch.tp.RefuseRefresh(true)
	ch.vclock.Advance(time.Hour)
	resp, b := ch.post("/token", exchangeForm(user.AccessToken, githubAPI), ghGateway, ghGatewaySecr)
	if resp.StatusCode != http.StatusBadRequest || b["error"] != "interaction_required" || b["connect_uri"] == nil {
		t.Fatalf("refused refresh: %d %v", resp.StatusCode, b)
	}
	if !strings.Contains(ch.logs.String(), `"reason":"needs_reconnect"`) {
		t.Fatal("no audit of the refusal")
	}
}

func TestConnectionExchangeWithoutConnectionsIsUnknownTarget(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	resp, body := h.post("/token", exchangeForm(user.AccessToken, githubAPI), "mcp-server", mcpSrvSecret)
	if resp.StatusCode != http.StatusBadRequest || body["error"] != "invalid_target" {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
}

func TestConnectionPagesAreServed(t *testing.T) {
	ch := newConnHarness(t, testprovider.Config{})
	for path, want := range map[string]int{"/connections": http.StatusOK, "/connections/github/callback": http.StatusBadRequest,
		"/connections/gitlab/callback": http.StatusNotFound} {
		resp, err := http.Get(ch.issuer + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	plain := exchangeHarness(t, nil)
	resp, err := http.Get(plain.issuer + "/connections")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/connections without connections: %d", resp.StatusCode)
	}
}
