package as

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ory/fosite"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/storage"
)

// Tests for lines of the security checklist (docs/SECURITY.md) that no
// other test pinned down.

// TestCodeRedirectLeaksNothing: the 303 that carries a code (and the one
// that carries an error) is not cached, sends no Referer onwards and has no
// CORS headers (RFC 9700 §4.2.4, §4.12; the authorization endpoint is not
// for scripts).
func TestCodeRedirectLeaksNothing(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	b := h.browser()
	p := b.get(conf.AuthCodeURL("state-abcdefgh", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	p = b.submit(p, "username", "alice", "password", alicePW)
	codeRedirect := b.submit(p, "action", "approve")
	errorRedirect := h.browser().get(conf.AuthCodeURL("state-abcdefgh", oauth2.SetAuthURLParam("code_challenge_method", "plain"), oauth2.SetAuthURLParam("code_challenge", strings.Repeat("a", 43))))
	errorPage := h.browser().get(h.issuer + "/authorize?client_id=nobody&response_type=code")
	for name, p := range map[string]page{"code redirect": codeRedirect, "error redirect": errorRedirect, "error page": errorPage} {
		t.Run(name, func(t *testing.T) {
			if name != "error page" {
				u := redirected(t, p)
				if u.Host != "app.example" {
					t.Fatalf("redirected to %s", u)
				}
			}
			if got := p.Header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", got)
			}
			if got := p.Header.Get("Referrer-Policy"); got != "no-referrer" {
				t.Errorf("Referrer-Policy %q, want no-referrer", got)
			}
			for k := range p.Header {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("CORS header %s on the authorization endpoint", k)
				}
			}
		})
	}
}

// TestCodesHaveEnoughEntropyAndExpire: codes carry at least 128 random
// bits, differ every time, and die after CodeTTL (at most 10 minutes,
// RFC 9700 §4.2 / OAuth 2.1 §4.1.2).
func TestCodesHaveEnoughEntropyAndExpire(t *testing.T) {
	h := newHarness(t, nil)
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		code, _ := h.authorizeCode()
		key, _, ok := strings.Cut(code, ".")
		raw, err := base64.RawURLEncoding.DecodeString(key)
		if !ok || err != nil || len(raw) < 16 {
			t.Fatalf("code %q: random part %d bytes (%v), want >= 16", code, len(raw), err)
		}
		if seen[key] {
			t.Fatal("a code repeated")
		}
		seen[key] = true
	}
	code, verifier := h.authorizeCode()
	// fosite dates the code's expiry from the wall clock, which has moved
	// on from the harness clock by however long the test took so far.
	h.clock.Advance(time.Since(h.clock.Now()) + DefaultCodeTTL + time.Second)
	f := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {verifier}}
	if resp, body := h.post("/token", f, "", ""); resp.StatusCode != 400 || body["error"] != "invalid_grant" {
		t.Errorf("expired code: %d %v", resp.StatusCode, body)
	}

	cfg := Config{Issuer: "https://as.example", Resources: h.as.cfg.Resources, Clients: h.as.cfg.Clients, Store: h.store, Secret: h.as.cfg.Secret, CodeTTL: MaxCodeTTL}
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatalf("New refused a CodeTTL of exactly 10 minutes: %v", err)
	}
	cfg.CodeTTL = MaxCodeTTL + time.Minute
	if _, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "CodeTTL") {
		t.Errorf("New with a CodeTTL over 10 minutes: %v, want the CodeTTL named", err)
	}
}

// TestRefreshTokenIsBoundToItsClient: another client presenting a refresh
// token gets invalid_grant (RFC 6749 §6), and the token stays usable by
// its own client.
func TestRefreshTokenIsBoundToItsClient(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.codeFlow("mcp:tools")
	resp, body := h.post("/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}, "web-app", webSecret)
	if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("refresh by another client: %d %v", resp.StatusCode, body)
	}
	if status, body := refresh(h, tok.RefreshToken); status != 200 {
		t.Errorf("refresh by its own client afterwards: %d %v", status, body)
	}
}

// TestAccessTokensAreShortLived: exp - iat is the configured access token
// lifetime (15 minutes by default), and introspection calls the token
// inactive once it has passed.
func TestAccessTokensAreShortLived(t *testing.T) {
	h := newHarness(t, nil)
	tok := h.codeFlow("mcp:tools")
	_, c := h.claims(tok.AccessToken)
	exp, _ := c["exp"].(float64)
	iat, _ := c["iat"].(float64)
	if d := time.Duration(exp-iat) * time.Second; d <= 0 || d > DefaultAccessTokenTTL {
		t.Errorf("lifetime %s, want (0, %s]", d, DefaultAccessTokenTTL)
	}
	h.clock.Advance(DefaultAccessTokenTTL + time.Second)
	if active(t, h, tok.AccessToken) {
		t.Error("an expired access token is active")
	}
}

// TestOurAccessTokenIsNoClientCredential: a Bearer access token this AS
// issued does not authenticate a client at /token, /introspect or /revoke
// (hostile_test.go covers the same on every backend; this names it).
func TestOurAccessTokenIsNoClientCredential(t *testing.T) {
	h := newHarness(t, nil)
	_, cc := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	at := cc["access_token"].(string)
	for _, path := range []string{"/token", "/introspect", "/revoke"} {
		req, _ := http.NewRequest(http.MethodPost, h.issuer+path, strings.NewReader(url.Values{"grant_type": {"client_credentials"}, "token": {at}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+at)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error       string `json:"error"`
			AccessToken string `json:"access_token"`
			Active      *bool  `json:"active"`
		}
		if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusUnauthorized || e.Error != "invalid_client" || e.AccessToken != "" || e.Active != nil {
			t.Errorf("%s with our access token as Bearer: %d %s, want 401 invalid_client", path, resp.StatusCode, body)
		}
	}
	// The refused /revoke did not revoke it.
	if !active(t, h, at) {
		t.Error("the token was revoked by a request that used it as a client credential")
	}
}

// TestNothingSecretIsStoredInTheClear: the private signing key is sealed
// (its PKCS#8 bytes, or any large piece of them, do not appear in the
// record), and a token record's payload names neither the subject nor the
// client in the clear; records are keyed by signature, never the token.
func TestNothingSecretIsStoredInTheClear(t *testing.T) {
	h := newHarness(t, nil)
	k, err := h.as.keys.signingKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := h.store.ListKeys(context.Background())
	if err != nil || len(recs) == 0 {
		t.Fatalf("ListKeys: %v, %d keys", err, len(recs))
	}
	for _, rec := range recs {
		for i := 0; i+16 <= len(der); i += 8 {
			if bytes.Contains(rec.PrivateSealed, der[i:i+16]) || bytes.Contains(rec.PublicJWK, der[i:i+16]) {
				t.Fatalf("key %s: 16 bytes of the private key appear in the stored record", rec.ID)
			}
		}
		if bytes.Contains(rec.PublicJWK, []byte(`"d"`)) {
			t.Errorf("key %s: stored public JWK has a private member", rec.ID)
		}
	}

	tok := h.codeFlow("mcp:tools")
	sig := tok.AccessToken[strings.LastIndexByte(tok.AccessToken, '.')+1:]
	rec, err := h.store.GetToken(context.Background(), storage.KindAccessToken, sig)
	if err != nil {
		t.Fatalf("the access token is not stored under its JWS signature: %v", err)
	}
	for _, plain := range []string{"alice", "demo-app", "mcp:tools", tok.AccessToken} {
		if bytes.Contains(rec.Data, []byte(plain)) {
			t.Errorf("stored token payload contains %q in the clear", plain)
		}
	}
	if _, err := h.store.GetToken(context.Background(), storage.KindRefreshToken, tok.RefreshToken); err == nil {
		t.Error("a refresh token record is keyed by the raw token")
	}
}

// TestCodeFlowWithoutResourceGetsTheDefaultAudience: Claude Code, Codex and
// the conformance suite omit resource; the token is for the configured
// default resource, never one with an empty audience (CLIENT-QUIRKS).
func TestCodeFlowWithoutResourceGetsTheDefaultAudience(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("demo-app", "", "mcp:tools")
	verifier := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-12345678", oauth2.S256ChallengeOption(verifier)))
	tok, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	if _, c := h.claims(tok.AccessToken); c["aud"] != mcpURI {
		t.Errorf("aud = %v, want the default resource %s", c["aud"], mcpURI)
	}
	status, body := refresh(h, tok.RefreshToken)
	if status != 200 {
		t.Fatalf("refresh: %d %v", status, body)
	}
	if _, c := h.claims(body["access_token"].(string)); c["aud"] != mcpURI {
		t.Errorf("refreshed aud = %v, want %s", c["aud"], mcpURI)
	}
}

// TestReusedRefreshTokenIsInactiveAtLookup pins the first layer of reuse
// detection on its own: once a refresh token was rotated longer than the
// grace window ago, looking it up answers fosite.ErrInactiveToken (which
// makes fosite revoke the family). The rotation step refuses it too
// (refreshRaceLost), so the end-to-end tests alone would not notice this
// layer going.
func TestReusedRefreshTokenIsInactiveAtLookup(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.RefreshGrace = 10 * time.Second })
	tok := h.codeFlow("mcp:tools")
	ctx := context.Background()
	sig := h.as.tokens.RefreshTokenSignature(ctx, tok.RefreshToken)
	if _, err := h.as.store.GetRefreshTokenSession(ctx, sig, nil); err != nil {
		t.Fatalf("a fresh refresh token: %v", err)
	}
	if status, body := refresh(h, tok.RefreshToken); status != 200 {
		t.Fatalf("refresh: %d %v", status, body)
	}
	if _, err := h.as.store.GetRefreshTokenSession(ctx, sig, nil); err != nil {
		t.Errorf("within the grace window: %v, want active", err)
	}
	h.clock.Advance(11 * time.Second)
	if _, err := h.as.store.GetRefreshTokenSession(ctx, sig, nil); !errors.Is(err, fosite.ErrInactiveToken) {
		t.Errorf("after the grace window: %v, want fosite.ErrInactiveToken", err)
	}
}
