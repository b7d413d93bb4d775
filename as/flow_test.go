package as

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

func TestCodeFlowThroughLoginAndConsentIssuesAudienceBoundJWT(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.codeFlow("mcp:tools", "offline_access", "other:read")
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token")
	}
	typ, c := h.claims(tok.AccessToken)
	if typ != "at+jwt" {
		t.Errorf("typ = %q, want at+jwt", typ)
	}
	want := map[string]any{"iss": h.issuer, "sub": "alice", "aud": mcpURI, "client_id": "demo-app", "scope": "mcp:tools offline_access"}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("claim %s = %v, want %v", k, c[k], v)
		}
	}
	for _, k := range []string{"iat", "exp", "jti"} {
		if c[k] == nil {
			t.Errorf("claim %s missing", k)
		}
	}
	if got := tok.Extra("scope"); got != "mcp:tools offline_access" {
		t.Errorf("token response scope = %v, want mcp:tools offline_access (other:read is another resource's)", got)
	}
}

func TestAuthorizationResponsesCarryIss(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	v := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-abcdefgh", oauth2.S256ChallengeOption(v)))
	if u.Query().Get("iss") != h.issuer || u.Query().Get("state") != "state-abcdefgh" || u.Query().Get("code") == "" {
		t.Errorf("success response %s lacks iss, state or code", u)
	}
	b := h.browser()
	p := b.get(conf.AuthCodeURL("state-abcdefgh", oauth2.SetAuthURLParam("code_challenge", "x")))
	u = redirected(t, p)
	if u.Query().Get("iss") != h.issuer || u.Query().Get("error") != "invalid_request" || u.Query().Get("state") != "state-abcdefgh" {
		t.Errorf("error response %s lacks iss, error or state", u)
	}
}

func TestAuthorizeRejections(t *testing.T) {
	h := newHarness(t, nil)
	challenge := oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())
	base := url.Values{
		"response_type": {"code"}, "client_id": {"demo-app"}, "redirect_uri": {appRedirect},
		"state": {"s-12345678"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
	}
	redirectCases := []struct {
		name   string
		change func(url.Values)
		want   string
	}{
		{"rejects plain PKCE", func(v url.Values) { v.Set("code_challenge_method", "plain") }, "invalid_request"},
		{"rejects a missing code challenge", func(v url.Values) { v.Del("code_challenge"); v.Del("code_challenge_method") }, "invalid_request"},
		{"rejects a challenge without method", func(v url.Values) { v.Del("code_challenge_method") }, "invalid_request"},
		{"rejects an unknown resource", func(v url.Values) { v.Set("resource", "https://evil.example/mcp") }, "invalid_target"},
		{"rejects a dot-segment resource", func(v url.Values) { v.Set("resource", mcpURI+"/../admin") }, "invalid_target"},
		{"rejects a resource with a query", func(v url.Values) { v.Set("resource", mcpURI+"?x") }, "invalid_target"},
		{"rejects a resource with a fragment", func(v url.Values) { v.Set("resource", mcpURI+"#f") }, "invalid_target"},
		{"rejects a prefix of a configured resource", func(v url.Values) { v.Set("resource", "http://127.0.0.1:8080/mc") }, "invalid_target"},
		{"rejects an extension of a configured resource", func(v url.Values) { v.Set("resource", mcpURI+"/admin") }, "invalid_target"},
		{"rejects two resources at once", func(v url.Values) { v["resource"] = []string{mcpURI, otherURI} }, "invalid_target"},
		{"rejects the token response type", func(v url.Values) { v.Set("response_type", "token") }, "unsupported_response_type"},
		{"rejects a repeated scope", func(v url.Values) { v["scope"] = []string{"a", "b"} }, "invalid_request"},
		{"rejects prompt none", func(v url.Values) { v.Set("prompt", "none") }, "login_required"},
	}
	for _, tc := range redirectCases {
		t.Run(tc.name, func(t *testing.T) {
			v := cloneValues(base)
			tc.change(v)
			u := redirected(t, h.browser().get(h.issuer+"/authorize?"+v.Encode()))
			if u.Host != "app.example" {
				t.Fatalf("redirected to %s", u)
			}
			q := u.Query()
			if q.Get("error") != tc.want || q.Get("iss") != h.issuer || q.Get("state") != "s-12345678" {
				t.Errorf("got %s, want error=%s with iss and state", u.RawQuery, tc.want)
			}
		})
	}
	// Each page names the check of ours that refused the request, so a
	// refusal by another layer (fosite's own redirect check) does not pass.
	const (
		unknownClient = "The application that sent you here is not registered with this server."
		noMatch       = "The redirect URI does not match any registered for this application."
		notOne        = "The request must name exactly one client_id and at most one redirect_uri."
	)
	pageCases := []struct {
		name   string
		change func(url.Values)
		detail string
	}{
		{"shows a page for an unknown client", func(v url.Values) { v.Set("client_id", "nobody") }, unknownClient},
		{"shows a page for a redirect URI not registered", func(v url.Values) { v.Set("redirect_uri", "https://evil.example/callback") }, noMatch},
		{"shows a page for a registered URI with a different path", func(v url.Values) { v.Set("redirect_uri", appRedirect+"/x") }, noMatch},
		{"shows a page for a registered URI extended by a query", func(v url.Values) { v.Set("redirect_uri", appRedirect+"?next=https://evil.example") }, noMatch},
		{"shows a page for a registered URI on another port", func(v url.Values) { v.Set("redirect_uri", "https://app.example:8443/callback") }, noMatch},
		{"shows a page for localhost on another port with another path", func(v url.Values) { v.Set("redirect_uri", "http://localhost:7778/other") }, noMatch},
		{"shows a page for a loopback URI with another path", func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:5555/other") }, noMatch},
		{"shows a page for a loopback URI extending the registered path", func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:5555/cb/x") }, noMatch},
		{"shows a page for two client ids", func(v url.Values) { v.Add("client_id", "web-app") }, notOne},
	}
	for _, tc := range pageCases {
		t.Run(tc.name, func(t *testing.T) {
			v := cloneValues(base)
			tc.change(v)
			p := h.browser().get(h.issuer + "/authorize?" + v.Encode())
			if p.StatusCode != http.StatusBadRequest || p.Header.Get("Location") != "" {
				t.Errorf("status %d, Location %q; want 400 and no redirect", p.StatusCode, p.Header.Get("Location"))
			}
			if !strings.Contains(p.Header.Get("Content-Type"), "text/html") || p.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("not an HTML error page with anti-framing headers: %v", p.Header)
			}
			if !strings.Contains(p.Body, html.EscapeString(tc.detail)) {
				t.Errorf("the page does not say %q:\n%s", tc.detail, p.Body)
			}
		})
	}
}

func TestLoopbackRedirectMayUseAnyPort(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	conf.RedirectURL = "http://127.0.0.1:54321/cb"
	v := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-abcdefgh", oauth2.S256ChallengeOption(v)))
	if u.Host != "127.0.0.1:54321" || u.Query().Get("code") == "" {
		t.Fatalf("redirected to %s", u)
	}
	if _, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(v)); err != nil {
		t.Fatal(err)
	}
}

func TestConsentDenialAnswersAccessDenied(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	b := h.browser()
	p := b.get(conf.AuthCodeURL("state-abcdefgh", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	p = b.submit(p, "username", "alice", "password", alicePW)
	u := redirected(t, b.submit(p, "action", "deny"))
	if u.Query().Get("error") != "access_denied" || u.Query().Get("iss") != h.issuer {
		t.Errorf("got %s", u)
	}
}

// authorizeCode returns a fresh code and its verifier for demo-app.
func (h *harness) authorizeCode(extra ...oauth2.AuthCodeOption) (code, verifier string) {
	h.t.Helper()
	conf := h.oauthConfig("demo-app", "")
	verifier = oauth2.GenerateVerifier()
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}, extra...)
	u := h.browser().authorize(conf.AuthCodeURL("state-abcdefgh", opts...))
	return u.Query().Get("code"), verifier
}

func TestTokenEndpointCodeChecks(t *testing.T) {
	h := newHarness(t, nil)
	form := func(code, verifier string, kv ...string) url.Values {
		v := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {appRedirect}, "client_id": {"demo-app"}}
		if verifier != "" {
			v.Set("code_verifier", verifier)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	cases := []struct {
		name   string
		form   func(code, verifier string) url.Values
		status int
		want   string
	}{
		{"rejects a missing verifier", func(c, _ string) url.Values { return form(c, "") }, 400, "invalid_grant"},
		{"rejects a wrong verifier", func(c, _ string) url.Values { return form(c, oauth2.GenerateVerifier()) }, 400, "invalid_grant"},
		{"rejects a resource not granted", func(c, v string) url.Values { return form(c, v, "resource", otherURI) }, 400, "invalid_target"},
		{"rejects a garbage resource", func(c, v string) url.Values { return form(c, v, "resource", "not a uri") }, 400, "invalid_target"},
		{"rejects another redirect URI", func(c, v string) url.Values { return form(c, v, "redirect_uri", "http://127.0.0.1/cb") }, 400, "invalid_grant"},
		{"rejects an unknown code", func(_, v string) url.Values { return form("nope", v) }, 400, "invalid_grant"},
		{"rejects an unknown client", func(c, v string) url.Values { return form(c, v, "client_id", "ghost") }, 401, "invalid_client"},
		{"rejects another client's code", func(c, v string) url.Values {
			f := form(c, v)
			f.Del("client_id")
			return f
		}, 401, "invalid_client"},
		{"accepts the granted resource", func(c, v string) url.Values { return form(c, v, "resource", mcpURI+"/") }, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, verifier := h.authorizeCode()
			resp, body := h.post("/token", tc.form(code, verifier), "", "")
			if resp.StatusCode != tc.status || (tc.want != "" && body["error"] != tc.want) {
				t.Errorf("status %d body %v; want %d %s", resp.StatusCode, body, tc.status, tc.want)
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q", resp.Header.Get("Cache-Control"))
			}
		})
	}
}

func TestCodeReplayRevokesWhatItIssued(t *testing.T) {
	h := newHarness(t, nil)
	code, verifier := h.authorizeCode()
	f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {verifier}}
	resp, first := h.post("/token", f, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("first redemption: %d %v", resp.StatusCode, first)
	}
	resp, second := h.post("/token", f, "", "")
	if resp.StatusCode != 400 || second["error"] != "invalid_grant" {
		t.Fatalf("replay: %d %v", resp.StatusCode, second)
	}
	if active(t, h, first["access_token"].(string)) {
		t.Error("access token from the replayed code is still active")
	}
	resp, body := h.post("/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first["refresh_token"].(string)}, "client_id": {"demo-app"}}, "", "")
	if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
		t.Errorf("refresh token from the replayed code: %d %v", resp.StatusCode, body)
	}
}

func TestConcurrentCodeRedemptionSucceedsOnce(t *testing.T) {
	h := newHarness(t, nil)
	code, verifier := h.authorizeCode()
	f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {verifier}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	var issued []string
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := h.post("/token", f, "", "")
			mu.Lock()
			defer mu.Unlock()
			statuses[resp.StatusCode]++
			switch {
			case resp.StatusCode == 200:
				if at, _ := body["access_token"].(string); at != "" {
					issued = append(issued, at)
				}
			case body["error"] != "invalid_grant":
				t.Errorf("a losing redemption: %d %v, want invalid_grant", resp.StatusCode, body)
			}
		}()
	}
	wg.Wait()
	if statuses[200] != 1 || statuses[200]+statuses[400] != 16 || len(issued) != 1 {
		t.Fatalf("statuses %v, %d tokens; want exactly one 200 with a token and the rest 400", statuses, len(issued))
	}
	// The other presentations of the code are replays (RFC 6749 §4.1.2):
	// what the winner got is revoked.
	if active(t, h, issued[0]) {
		t.Error("the token issued for a code presented 16 times is still active")
	}
}

// active asks the introspection endpoint as the resource server's client.
func active(t *testing.T, h *harness, token string) bool {
	t.Helper()
	resp, body := h.post("/introspect", url.Values{"token": {token}}, "rs", rsSecret)
	if resp.StatusCode != 200 {
		t.Fatalf("introspect: %d %v", resp.StatusCode, body)
	}
	return body["active"] == true
}

func refresh(h *harness, rt string) (int, map[string]any) {
	resp, body := h.post("/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"demo-app"}}, "", "")
	return resp.StatusCode, body
}

func TestRefreshRotationReplayAndGrace(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RefreshGrace = 10 * time.Second })
	tok := h.codeFlow("mcp:tools")
	rt0 := tok.RefreshToken

	status, a := refresh(h, rt0)
	if status != 200 || a["refresh_token"] == rt0 || a["refresh_token"] == nil {
		t.Fatalf("first refresh: %d %v", status, a)
	}
	// A racing second use of rt0 within the grace window succeeds.
	h.clock.Advance(2 * time.Second)
	status, b := refresh(h, rt0)
	if status != 200 {
		t.Fatalf("second use within grace: %d %v", status, b)
	}
	_, c := h.claims(a["access_token"].(string))
	if c["aud"] != mcpURI || c["sub"] != "alice" {
		t.Errorf("refreshed token claims %v", c)
	}
	// After the window, a replay of rt0 revokes the whole family.
	h.clock.Advance(20 * time.Second)
	status, r := refresh(h, rt0)
	if status != 400 || r["error"] != "invalid_grant" {
		t.Fatalf("replay after grace: %d %v", status, r)
	}
	for _, rt := range []string{a["refresh_token"].(string), b["refresh_token"].(string)} {
		if status, body := refresh(h, rt); status != 400 || body["error"] != "invalid_grant" {
			t.Errorf("family member still refreshes after reuse: %d %v", status, body)
		}
	}
	if active(t, h, a["access_token"].(string)) {
		t.Error("access token of the revoked family is still active")
	}
}

func TestRefreshWithoutGraceAllowsOneUse(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RefreshGrace = -1 })
	tok := h.codeFlow()
	if status, body := refresh(h, tok.RefreshToken); status != 200 {
		t.Fatalf("%d %v", status, body)
	}
	if status, body := refresh(h, tok.RefreshToken); status != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("second use: %d %v", status, body)
	}
}

func TestConcurrentRefreshesWithinGraceAllSucceed(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.codeFlow()
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, body := refresh(h, tok.RefreshToken); status != 200 {
				errs <- body["error"].(string)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("racing refresh failed: %s", e)
	}
}

func TestRefreshScopeMayOnlyNarrow(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.codeFlow("mcp:tools")
	resp, body := h.post("/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}, "client_id": {"demo-app"}, "scope": {"mcp:admin"}}, "", "")
	if resp.StatusCode != 400 || body["error"] != "invalid_scope" {
		t.Errorf("%d %v", resp.StatusCode, body)
	}
}

func TestRevokingRefreshTokenRevokesFamily(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.codeFlow()
	resp, _ := h.post("/revoke", url.Values{"token": {tok.RefreshToken}, "client_id": {"demo-app"}}, "", "")
	if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("revoke: %d %v", resp.StatusCode, resp.Header)
	}
	if status, body := refresh(h, tok.RefreshToken); status != 400 || body["error"] != "invalid_grant" {
		t.Errorf("revoked refresh token still works: %d %v", status, body)
	}
	if active(t, h, tok.AccessToken) {
		t.Error("access token of a revoked family still active")
	}
	resp, _ = h.post("/revoke", url.Values{"token": {"unknown-token"}, "client_id": {"demo-app"}}, "", "")
	if resp.StatusCode != 200 {
		t.Errorf("revoking an unknown token: %d", resp.StatusCode)
	}
}

func TestRefreshNeverOutlivesTheGrant(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.GrantLifetime = time.Hour })
	tok := h.codeFlow()
	status, body := refresh(h, tok.RefreshToken)
	if status != 200 {
		t.Fatalf("%d %v", status, body)
	}
	h.clock.Advance(2 * time.Hour)
	if status, body := refresh(h, body["refresh_token"].(string)); status != 400 || body["error"] != "invalid_grant" {
		t.Errorf("refresh after the grant's lifetime: %d %v", status, body)
	}
}

// TestIntrospectRefreshTokenAcrossRotation: introspection of a refresh token
// agrees with the token endpoint: active until rotated, still active within
// the grace window, inactive after it.
func TestIntrospectRefreshTokenAcrossRotation(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RefreshGrace = 10 * time.Second })
	conf := h.oauthConfig("web-app", webSecret)
	verifier := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(verifier)))
	tok, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	rt := tok.RefreshToken
	if rt == "" {
		t.Fatal("no refresh token")
	}
	introspectToken := func(token string) map[string]any {
		t.Helper()
		resp, body := h.post("/introspect", url.Values{"token": {token}, "token_type_hint": {"refresh_token"}}, "web-app", webSecret)
		if resp.StatusCode != 200 {
			t.Fatalf("introspect: %d %v", resp.StatusCode, body)
		}
		return body
	}
	introspect := func() map[string]any { t.Helper(); return introspectToken(rt) }
	if b := introspect(); b["active"] != true || b["token_type"] != "refresh_token" || b["client_id"] != "web-app" || b["sub"] != "alice" {
		t.Errorf("fresh refresh token: %v", b)
	}
	// The record is found by the signature part alone; another key part
	// with it is not this server's token.
	forged := strings.Repeat("A", 43) + rt[strings.IndexByte(rt, '.'):]
	if b := introspectToken(forged); b["active"] != false || len(b) != 1 {
		t.Errorf("refresh token with a forged key part: %v", b)
	}
	resp, body := h.post("/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}, "web-app", webSecret)
	if resp.StatusCode != 200 {
		t.Fatalf("refresh: %d %v", resp.StatusCode, body)
	}
	h.clock.Advance(2 * time.Second)
	if b := introspect(); b["active"] != true {
		t.Errorf("rotated refresh token within the grace window: %v", b)
	}
	h.clock.Advance(20 * time.Second)
	if b := introspect(); b["active"] != false || len(b) != 1 {
		t.Errorf("rotated refresh token after the grace window: %v", b)
	}
}
