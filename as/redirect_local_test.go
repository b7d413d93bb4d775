package as

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// Pins localRedirect, which decides whether a remembered consent still takes
// a click (RFC 8252 §8.6): loopback, localhost and private-use schemes reach
// a program on the device; https and other hosts over http do not.
func TestLocalRedirect(t *testing.T) {
	for _, tc := range []struct {
		uri  string
		want bool
	}{
		{"https://app.example/cb", false},
		{"https://127.0.0.1/cb", false},
		{"http://localhost:7777/cb", true},
		{"http://LOCALHOST/cb", true},
		{"http://127.0.0.1/cb", true},
		{"http://[::1]:9/cb", true},
		{"http://10.0.0.1/cb", false},
		{"http://intranet.example/cb", false},
		{"com.example.app:/oauth/cb", true},
		{"http://%zz/cb", false},
	} {
		if got := localRedirect(tc.uri); got != tc.want {
			t.Errorf("localRedirect(%q) = %v, want %v", tc.uri, got, tc.want)
		}
	}
}

// Pins matchRedirectURI's loopback port exception (RFC 8252 §7.3): it holds
// only for a registration that is itself http on a loopback host without
// userinfo, never for an https one or another IP literal.
func TestLoopbackPortExceptionNeedsAnHTTPLoopbackRegistration(t *testing.T) {
	for _, tc := range []struct {
		registered, requested string
	}{
		{"https://127.0.0.1/cb", "http://127.0.0.1:5555/cb"},
		{"http://user@127.0.0.1/cb", "http://127.0.0.1:5555/cb"},
		{"http://10.0.0.1/cb", "http://10.0.0.1:5555/cb"},
		{"http://192.0.2.7/cb", "http://192.0.2.7:80/cb"},
	} {
		if matchRedirectURI([]string{tc.registered}, tc.requested) {
			t.Errorf("%s matched registration %s", tc.requested, tc.registered)
		}
	}
	if !matchRedirectURI([]string{"http://127.0.0.1/cb"}, "http://127.0.0.1:5555/cb") {
		t.Error("the loopback port exception does not hold for http://127.0.0.1/cb")
	}
}

// createRegisteredClient stores a public client as dynamic registration
// would, so authorization errors go to our own page (RFC 9700 §4.11.2).
func createRegisteredClient(t *testing.T, h *harness) {
	t.Helper()
	err := h.store.CreateClient(context.Background(), &storage.Client{
		ID: "registered-app", TokenEndpointAuthMethod: "none", RedirectURIs: []string{appRedirect},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Source: "dcr", CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An error for a registered client is shown on our page with its error word
// and description, not redirected; without login pages it is a plain 400
// page, never a crash.
func TestClientErrorPageNamesTheErrorAndWorksWithoutLoginPages(t *testing.T) {
	for _, withUI := range []bool{true, false} {
		h := newHarness(t, func(c *Config) {
			if !withUI {
				c.UI = nil
			}
		})
		createRegisteredClient(t, h)
		v := authorizeParams("registered-app")
		v.Set("redirect_uri", appRedirect)
		v.Set("code_challenge_method", "plain")
		p := h.browser().get(h.issuer + "/authorize?" + v.Encode())
		if p.StatusCode != http.StatusBadRequest || p.Header.Get("Location") != "" {
			t.Fatalf("UI %v: status %d, Location %q; want 400 on our page", withUI, p.StatusCode, p.Header.Get("Location"))
		}
		want := "The authorization request is not valid."
		if withUI {
			want = "(invalid_request). code_challenge_method must be S256."
		}
		if !strings.Contains(p.Body, want) {
			t.Fatalf("UI %v: page does not contain %q:\n%s", withUI, want, p.Body)
		}
	}
}

// Pins allLoopback, which makes the consent page warn of an application
// that returns only to this computer, and hostOf, which names where it
// returns to.
func TestAllLoopbackAndHostOf(t *testing.T) {
	for _, tc := range []struct {
		uris []string
		want bool
	}{
		{nil, false},
		{[]string{"http://127.0.0.1/cb", "http://localhost:7777/cb", "http://[::1]/cb"}, true},
		{[]string{"http://127.0.0.1/cb", "https://app.example/cb"}, false},
		{[]string{"http://10.0.0.1/cb"}, false},
		{[]string{"http://%zz/cb"}, false},
	} {
		if got := allLoopback(tc.uris); got != tc.want {
			t.Errorf("allLoopback(%q) = %v, want %v", tc.uris, got, tc.want)
		}
	}
	for raw, want := range map[string]string{
		"https://app.example:8443/cb": "app.example:8443",
		"com.example.app:/cb":         "com.example.app:",
		"http://%zz/cb":               "",
	} {
		if got := hostOf(raw); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", raw, got, want)
		}
	}
}

// Pins sameClientRecord, which lets the client cache reuse a conversion:
// an identical record is the same, and a change to any field the
// conversion reads is not (else a changed secret or redirect URI would be
// served from the cache).
func TestSameClientRecordSeesEveryField(t *testing.T) {
	at := time.Unix(1700000000, 0)
	base := storage.Client{
		ID: "c", CreatedAt: at, UpdatedAt: at, SecretHash: []byte("h"), SecretExpiresAt: at, Public: false,
		Name: "n", RedirectURIs: []string{"https://a.example/cb"}, TokenEndpointAuthMethod: "client_secret_basic",
		JWKSURI: "https://a.example/jwks", JWKS: []byte("{}"), Source: "dcr", ApplicationType: "web",
		GrantTypes: []string{"authorization_code"}, Scopes: []string{"s"}, Resources: []string{mcpURI}, Metadata: []byte("{}"),
	}
	same := base
	if !sameClientRecord(&base, &same) {
		t.Fatal("an identical record is not the same")
	}
	changes := map[string]func(*storage.Client){
		"ID":                      func(c *storage.Client) { c.ID = "d" },
		"CreatedAt":               func(c *storage.Client) { c.CreatedAt = at.Add(time.Second) },
		"UpdatedAt":               func(c *storage.Client) { c.UpdatedAt = at.Add(time.Second) },
		"SecretHash":              func(c *storage.Client) { c.SecretHash = []byte("x") },
		"SecretExpiresAt":         func(c *storage.Client) { c.SecretExpiresAt = at.Add(time.Second) },
		"Public":                  func(c *storage.Client) { c.Public = true },
		"Name":                    func(c *storage.Client) { c.Name = "m" },
		"RedirectURIs":            func(c *storage.Client) { c.RedirectURIs = []string{"https://b.example/cb"} },
		"TokenEndpointAuthMethod": func(c *storage.Client) { c.TokenEndpointAuthMethod = "none" },
		"JWKSURI":                 func(c *storage.Client) { c.JWKSURI = "https://b.example/jwks" },
		"JWKS":                    func(c *storage.Client) { c.JWKS = []byte(`{"keys":[]}`) },
		"Source":                  func(c *storage.Client) { c.Source = "cimd" },
		"ApplicationType":         func(c *storage.Client) { c.ApplicationType = "native" },
		"GrantTypes":              func(c *storage.Client) { c.GrantTypes = []string{"client_credentials"} },
		"Scopes":                  func(c *storage.Client) { c.Scopes = []string{"t"} },
		"Resources":               func(c *storage.Client) { c.Resources = []string{otherURI} },
		"Metadata":                func(c *storage.Client) { c.Metadata = []byte(`{"a":1}`) },
	}
	for field, change := range changes {
		changed := base
		change(&changed)
		if sameClientRecord(&base, &changed) {
			t.Errorf("a record with another %s is the same", field)
		}
	}
}

// Our error pages come from the configured login pages, so they link the
// stylesheet under the issuer's path (loginui.Config.BasePath).
func TestErrorPageIsTheConfiguredUIs(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.UI = uiUnder(t, c, "/auth")
	})
	p := h.browser().get(h.issuer + "/authorize?" + authorizeParams("no-such-client").Encode())
	if p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "Unknown client") {
		t.Fatalf("status %d, want 400 and the unknown client page:\n%s", p.StatusCode, p.Body)
	}
	if !strings.Contains(p.Body, `href="/auth/`) {
		t.Fatalf("error page does not link under /auth:\n%s", p.Body)
	}
}

// Pins the configured clients' secret rules: a public client may carry
// neither a secret nor a secret hash, and a secret has at least 16
// characters (exactly 16 is accepted).
func TestConfiguredClientSecretRules(t *testing.T) {
	h := newHarness(t, nil)
	newWith := func(c Client) error {
		cfg := h.as.cfg
		cfg.Clients = append(slices.Clone(h.as.cfg.Clients), c)
		_, err := New(t.Context(), cfg)
		return err
	}
	hash := h.as.clients.hasher.Hash("sixteen-chars-ok")
	for _, tc := range []struct {
		name   string
		client Client
		want   string // "" when accepted
	}{
		{"a secret of 16 characters", Client{ID: "s16", Secret: "sixteen-chars-ok", GrantTypes: []string{"client_credentials"}}, ""},
		{"a secret of 15 characters", Client{ID: "s15", Secret: "fifteen-chars-x", GrantTypes: []string{"client_credentials"}}, "shorter than 16"},
		{"a public client with a secret", Client{ID: "ps", Public: true, Secret: "sixteen-chars-ok", RedirectURIs: []string{appRedirect}}, "a public client has no secret"},
		{"a public client with a secret hash", Client{ID: "ph", Public: true, SecretHash: hash, RedirectURIs: []string{appRedirect}}, "a public client has no secret"},
	} {
		err := newWith(tc.client)
		if tc.want == "" && err != nil {
			t.Errorf("%s: refused: %v", tc.name, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// A stored confidential client that lists no grant types and no redirect
// URI may use client_credentials (its only possible grant), not the code
// flow it could never complete.
func TestStoredClientWithoutRedirectURIsDefaultsToClientCredentials(t *testing.T) {
	h := newHarness(t, nil)
	const sec = "registered-secret-0123456789abcdef"
	err := h.store.CreateClient(context.Background(), &storage.Client{
		ID: "no-redirects", SecretHash: h.as.clients.hasher.Hash(sec), TokenEndpointAuthMethod: authSecretBasic,
		Resources: []string{mcpURI}, Source: "dcr", CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "no-redirects", sec)
	if resp.StatusCode != http.StatusOK || body["access_token"] == nil {
		t.Fatalf("client_credentials: %d %v, want 200 and a token", resp.StatusCode, body)
	}
}

// wrongIDResolver answers every client id with a document of another id.
type wrongIDResolver struct{}

func (wrongIDResolver) ResolveClient(_ context.Context, _ string) (*storage.Client, error) {
	return &storage.Client{ID: "https://other.example/client.json", Public: true, TokenEndpointAuthMethod: "none",
		RedirectURIs: []string{appRedirect}, GrantTypes: []string{"authorization_code"}, ResponseTypes: []string{"code"}, Source: "cimd"}, nil
}

// A resolved client whose id is not the one asked for is unknown: a
// metadata document cannot speak for another client id.
func TestResolvedClientOfAnotherIDIsUnknown(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ClientResolver = wrongIDResolver{} })
	v := authorizeParams("https://tools.example/client.json")
	v.Set("redirect_uri", appRedirect)
	p := h.browser().get(h.issuer + "/authorize?" + v.Encode())
	if p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "Unknown client") {
		t.Fatalf("status %d, want 400 and the unknown client page:\n%s", p.StatusCode, p.Body)
	}
}

// Pins checkRedirectURI, the check of configured redirect URIs: absolute,
// no fragment (RFC 6749 §3.1.2), and a host for http and https.
func TestCheckRedirectURI(t *testing.T) {
	for uri, ok := range map[string]bool{
		"https://app.example/cb":   true,
		"http://127.0.0.1/cb":      true,
		"myapp:/oauth/cb":          true,
		"/cb":                      false,
		"https://app.example/cb#f": false,
		"https://app.example/cb#":  false,
		"https:///cb":              false,
		"http:///cb":               false,
	} {
		if err := checkRedirectURI(uri); (err == nil) != ok {
			t.Errorf("checkRedirectURI(%q) = %v, want accepted %v", uri, err, ok)
		}
	}
}

// Configured clients: one listing a resource that is not configured is
// refused, and a confidential one listing no grant types and no redirect
// URI gets client_credentials.
func TestConfiguredClientResourcesAndDefaultGrant(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Clients = append(c.Clients, Client{ID: "plain-bot", Secret: "plain-bot-secret-0123456789"})
	})
	resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "plain-bot", "plain-bot-secret-0123456789")
	if resp.StatusCode != http.StatusOK || body["access_token"] == nil {
		t.Fatalf("client_credentials: %d %v, want 200 and a token", resp.StatusCode, body)
	}
	cfg := h.as.cfg
	cfg.Clients = append(slices.Clone(h.as.cfg.Clients), Client{ID: "lost-bot", Secret: "lost-bot-secret-0123456789", Resources: []string{"https://unknown.example/mcp"}})
	if _, err := New(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "is not a configured resource") {
		t.Errorf("New with a client listing an unknown resource: %v, want it refused for that resource", err)
	}
}

// uiUnder is the harness's login pages for alice under the issuer path
// basePath (loginui.Config.BasePath), on c's store.
func uiUnder(t *testing.T, c *Config, basePath string) *loginui.UI {
	t.Helper()
	ui, err := loginui.New(loginui.Config{
		Users:    []loginui.User{{Username: "alice", PasswordHash: aliceHash}},
		Consents: c.Store.(*memory.Store),
		JTIs:     c.Store.(*memory.Store),
		Secret:   c.Secret,
		Now:      c.Now,
		BasePath: basePath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return ui
}
