package as

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/storage"
)

// ccToken asks for a client-credentials token and returns the status and
// the JSON answer.
func (h *harness) ccToken(id, secret string, scope string) (int, map[string]any) {
	h.t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if scope != "" {
		form.Set("scope", scope)
	}
	resp, body := h.post("/token", form, id, secret)
	return resp.StatusCode, body
}

// TestClientCredentialsScopeRule: requested scopes are narrowed to what the
// client may have and unknown ones dropped; when none can be granted the
// answer is invalid_scope (RFC 6749 §5.2), never a token with an empty scope.
func TestClientCredentialsScopeRule(t *testing.T) {
	h := newHarness(t, nil)
	cases := []struct {
		name      string
		scope     string
		wantScope string
		wantErr   string
	}{
		{"refuses a scope the client may not have", "mcp:admin", "", "invalid_scope"},
		{"refuses scopes no resource knows", "openid profile", "", "invalid_scope"},
		{"refuses another resource's scope", "other:read", "", "invalid_scope"},
		{"drops unknown scopes and grants the rest", "openid mcp:tools profile", "mcp:tools", ""},
		{"accepts offline_access and grants the defaults", "offline_access", "mcp:tools", ""},
		{"grants the defaults when none is named", "", "mcp:tools", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := h.ccToken("ci-bot", ciSecret, tc.scope)
			if tc.wantErr != "" {
				if status != http.StatusBadRequest || body["error"] != tc.wantErr {
					t.Fatalf("%d %v, want 400 %s", status, body, tc.wantErr)
				}
				return
			}
			if status != http.StatusOK || body["scope"] != tc.wantScope {
				t.Fatalf("%d %v, want 200 with scope %q", status, body, tc.wantScope)
			}
			if _, c := h.claims(body["access_token"].(string)); c["scope"] != tc.wantScope {
				t.Errorf("token scope %v, want %q", c["scope"], tc.wantScope)
			}
		})
	}
}

// TestDefaultScopesApplyWhenNoneIsRequested: a request naming no scope gets
// the resource's default_scopes, not every scope the client may have; a
// client naming a scope still gets it.
func TestDefaultScopesApplyWhenNoneIsRequested(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Resources[0].DefaultScopes = []string{"mcp:tools"} })
	// rs may have every scope of the resource.
	if status, body := h.ccToken("rs", rsSecret, ""); status != 200 || body["scope"] != "mcp:tools" {
		t.Errorf("client credentials naming no scope: %d %v, want scope mcp:tools", status, body)
	}
	if status, body := h.ccToken("rs", rsSecret, "mcp:admin"); status != 200 || body["scope"] != "mcp:admin" {
		t.Errorf("client credentials naming mcp:admin: %d %v", status, body)
	}
	if tok := h.codeFlow(); tok.Extra("scope") != "mcp:tools" {
		t.Errorf("code flow naming no scope: scope %v, want mcp:tools", tok.Extra("scope"))
	}
	if tok := h.codeFlow("mcp:admin", "mcp:tools"); tok.Extra("scope") != "mcp:tools mcp:admin" {
		t.Errorf("code flow naming both scopes: scope %v", tok.Extra("scope"))
	}
}

func TestDefaultScopesMustBeScopesOfTheResource(t *testing.T) {
	h := newHarness(t, nil)
	_, err := New(context.Background(), Config{Issuer: h.issuer, Store: h.store, Secret: make([]byte, 32),
		Resources: []Resource{{URI: mcpURI, Scopes: []string{"a"}, DefaultScopes: []string{"b"}}}})
	if err == nil || !strings.Contains(err.Error(), "DefaultScopes") {
		t.Fatalf("err = %v, want one naming DefaultScopes", err)
	}
}

// TestAuthorizeScopeRule: at the authorization endpoint unknown scopes are
// dropped, offline_access is accepted, and a request with nothing grantable
// is redirected with invalid_scope, iss and state.
func TestAuthorizeScopeRule(t *testing.T) {
	h := newHarness(t, nil)
	if tok := h.codeFlow("openid", "profile", "mcp:tools"); tok.Extra("scope") != "mcp:tools" {
		t.Errorf("scope %v, want mcp:tools", tok.Extra("scope"))
	}
	tok := h.codeFlow("offline_access")
	if tok.Extra("scope") != "mcp:tools mcp:admin offline_access" || tok.RefreshToken == "" {
		t.Errorf("offline_access alone: scope %v, refresh token %q; want the defaults, offline_access and a refresh token", tok.Extra("scope"), tok.RefreshToken)
	}
	conf := h.oauthConfig("demo-app", "", "openid", "profile")
	u := redirected(t, h.browser().get(conf.AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))))
	q := u.Query()
	if u.Host != "app.example" || q.Get("error") != "invalid_scope" || q.Get("iss") != h.issuer || q.Get("state") != "st" {
		t.Errorf("nothing grantable: redirected to %s, want invalid_scope with iss and state", u)
	}
}

func TestMetadataListsOfflineAccess(t *testing.T) {
	h := newHarness(t, nil)
	resp, err := http.Get(h.issuer + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md struct {
		Scopes []string `json:"scopes_supported"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(md.Scopes, "offline_access") || !slices.Contains(md.Scopes, "mcp:tools") {
		t.Errorf("scopes_supported %v lacks offline_access or the resources' scopes", md.Scopes)
	}
}

// TestRefreshMayNarrowNeverWiden: a refresh may ask for fewer of the scopes
// the person granted, unknown ones are dropped, one naming none gets the
// whole original grant (RFC 6749 §6), and nothing outside it is ever given.
func TestRefreshMayNarrowNeverWiden(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.codeFlow("mcp:tools", "mcp:admin")
	rt := tok.RefreshToken
	step := func(scope, want, wantErr string) {
		t.Helper()
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"demo-app"}}
		if scope != "" {
			form.Set("scope", scope)
		}
		resp, body := h.post("/token", form, "", "")
		if wantErr != "" {
			if resp.StatusCode != 400 || body["error"] != wantErr {
				t.Fatalf("refresh with scope %q: %d %v, want %s", scope, resp.StatusCode, body, wantErr)
			}
			return
		}
		if resp.StatusCode != 200 || body["scope"] != want {
			t.Fatalf("refresh with scope %q: %d %v, want scope %q", scope, resp.StatusCode, body, want)
		}
		if _, c := h.claims(body["access_token"].(string)); c["scope"] != want {
			t.Fatalf("refresh with scope %q: token scope %v, want %q", scope, c["scope"], want)
		}
		rt = body["refresh_token"].(string)
	}
	step("mcp:tools", "mcp:tools", "")
	step("mcp:admin openid", "mcp:admin", "")
	step("other:read", "", "invalid_scope")
	step("", "mcp:tools mcp:admin", "")

	// A grant of mcp:tools alone never widens to mcp:admin.
	rt = h.codeFlow("mcp:tools").RefreshToken
	step("mcp:tools mcp:admin", "mcp:tools", "")
	step("mcp:admin", "", "invalid_scope")
	step("", "mcp:tools", "")
}

// TestRegisteredClientScopeIsItsDefaultNotItsCeiling: a registered client
// that registered with mcp:tools gets mcp:tools when it names no scope, and
// may ask for more within the registration policy (step-up), never beyond it.
func TestRegisteredClientScopeIsItsDefaultNotItsCeiling(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.RegistrationScopes = []string{"mcp:tools", "mcp:admin"}
		c.RegistrationResources = []string{mcpURI}
	})
	rec := &storage.Client{ID: "dcr-client", Public: true, Name: "Registered", TokenEndpointAuthMethod: "none",
		RedirectURIs: []string{appRedirect}, GrantTypes: []string{"authorization_code", "refresh_token"},
		Scopes: []string{"mcp:tools"}, Resources: []string{mcpURI}, Source: "dcr"}
	if err := h.store.CreateClient(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	conf := h.oauthConfig("dcr-client", "")
	flow := func(b *browser, scopes ...string) string {
		t.Helper()
		conf.Scopes = scopes
		v := oauth2.GenerateVerifier()
		u := b.authorize(conf.AuthCodeURL("state-1", oauth2.S256ChallengeOption(v)))
		tok, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(v))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := tok.Extra("scope").(string)
		return s
	}
	b := h.browser()
	if got := flow(b); got != "mcp:tools" {
		t.Errorf("naming no scope: %q, want the registered mcp:tools", got)
	}
	if got := flow(b, "mcp:tools", "mcp:admin"); got != "mcp:tools mcp:admin" {
		t.Errorf("step-up: %q, want mcp:tools mcp:admin", got)
	}
	if got := flow(b, "mcp:tools", "other:read"); got != "mcp:tools" {
		t.Errorf("beyond the policy: %q, want mcp:tools", got)
	}
	conf.Scopes = []string{"other:read"}
	// A registered client's error is shown on our page (RFC 9700 §4.11.2),
	// with the error response behind a link back.
	p := b.get(conf.AuthCodeURL("state-2", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	if p.StatusCode != http.StatusBadRequest || p.Header.Get("Location") != "" || !strings.Contains(p.Body, `href="`+appRedirect+`?error=invalid_scope&amp;`) {
		t.Errorf("only a scope outside the policy: %d, want our page linking to an invalid_scope response:\n%s", p.StatusCode, p.Body)
	}
}

// TestResourceWithoutScopesGrantsNoneAndRefusesNothing: a resource that
// defines no scopes issues tokens without scope, whatever is named.
func TestResourceWithoutScopesGrantsNoneAndRefusesNothing(t *testing.T) {
	const plainURI = "http://127.0.0.1:8082/plain"
	const plainSecret = "plain-bot-secret-0123456789abcdef"
	h := newHarness(t, func(c *Config) {
		c.Resources = append(c.Resources, Resource{URI: plainURI, Name: "Plain"})
		c.Clients = append(c.Clients, Client{ID: "plain-bot", Secret: plainSecret, GrantTypes: []string{"client_credentials"}, Resources: []string{plainURI}})
	})
	for _, scope := range []string{"", "openid", "offline_access"} {
		form := url.Values{"grant_type": {"client_credentials"}, "resource": {plainURI}}
		if scope != "" {
			form.Set("scope", scope)
		}
		resp, body := h.post("/token", form, "plain-bot", plainSecret)
		if sc, _ := body["scope"].(string); resp.StatusCode != 200 || sc != "" {
			t.Errorf("scope %q: %d %v, want 200 without scope", scope, resp.StatusCode, body)
			continue
		}
		if _, c := h.claims(body["access_token"].(string)); c["aud"] != plainURI || c["scope"] != nil {
			t.Errorf("scope %q: claims %v", scope, c)
		}
	}
}

// TestNoGrantableDefaultIsInvalidScope: a request naming no scope, from a
// client that may have none of the resource's default scopes, is refused
// rather than given a token without scope.
func TestNoGrantableDefaultIsInvalidScope(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Resources[0].DefaultScopes = []string{"mcp:admin"} })
	// ci-bot may have mcp:tools only.
	status, body := h.ccToken("ci-bot", ciSecret, "")
	if status != http.StatusBadRequest || body["error"] != "invalid_scope" || !strings.Contains(body["error_description"].(string), "No scope was requested") {
		t.Errorf("%d %v, want 400 invalid_scope saying no scope was requested", status, body)
	}
	if status, body := h.ccToken("ci-bot", ciSecret, "mcp:tools"); status != 200 || body["scope"] != "mcp:tools" {
		t.Errorf("naming mcp:tools: %d %v", status, body)
	}
}
