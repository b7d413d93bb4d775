package as

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/storage"
)

// These tests each pin one defence of this package on its own, without the
// second layer (fosite, or a later check) that would also refuse the request.

// Pins matchRedirectURI: exact comparison, and the port exception only for
// loopback IP literals, with path and query always compared.
func TestMatchRedirectURI(t *testing.T) {
	registered := []string{
		"https://app.example/callback",
		"http://127.0.0.1/cb",
		"http://[::1]:8000/cb",
		"http://intranet.example:8080/cb",
		"myapp:/oauth/cb",
	}
	cases := []struct {
		uri string
		ok  bool
	}{
		{"https://app.example/callback", true},
		{"myapp:/oauth/cb", true},
		{"http://intranet.example:8080/cb", true},
		{"https://app.example/callback/x", false},
		{"https://app.example/callbackx", false},
		{"https://app.example/callback?x=1", false},
		{"https://app.example/callback#f", false},
		{"https://app.example/call", false},
		{"https://app.example:8443/callback", false},
		{"myapp:/oauth/cb/x", false},
		{"http://intranet.example:9090/cb", false},
		{"http://intranet.example/cb", false},
		{"http://127.0.0.1:54321/cb", true},
		{"http://127.0.0.1/cb", true},
		{"http://[::1]:9/cb", true},
		{"http://127.0.0.1:54321/cb/x", false},
		{"http://127.0.0.1:54321/other", false},
		{"http://127.0.0.1:54321/c", false},
		{"http://127.0.0.1:54321/cb?x=1", false},
		{"http://[::1]:9/cbx", false},
		{"http://[::1]:9/", false},
		{"http://127.0.0.1:54321/cb#f", false},
		{"http://user@127.0.0.1:54321/cb", false},
		{"https://127.0.0.1:54321/cb", false},
		{"http://app.example:54321/callback", false},
	}
	for _, tc := range cases {
		if got := matchRedirectURI(registered, tc.uri); got != tc.ok {
			t.Errorf("matchRedirectURI(%q) = %v, want %v", tc.uri, got, tc.ok)
		}
	}
}

// Pins readCode: a code record that is no longer active is refused at its
// first read with fosite.ErrInvalidatedAuthorizeCode.
func TestRedeemedCodeIsRefusedAtItsFirstRead(t *testing.T) {
	h := newHarness(t, nil)
	code, verifier := h.authorizeCode()
	sig := h.as.tokens.AuthorizeCodeSignature(context.Background(), code)
	if _, err := h.as.store.readCode(context.Background(), sig); err != nil {
		t.Fatalf("readCode before redemption: %v", err)
	}
	redeemCode(t, h, code, verifier)
	req, err := h.as.store.readCode(context.Background(), sig)
	if !errors.Is(err, fosite.ErrInvalidatedAuthorizeCode) {
		t.Fatalf("readCode of a redeemed code = %v, want ErrInvalidatedAuthorizeCode", err)
	}
	if req == nil || req.GetClient().GetID() != "demo-app" {
		t.Fatalf("the refused code's request is %v, want demo-app's (needed to revoke its grant)", req)
	}
}

// Pins GetAuthorizeCodeSession's own revocation of the grant a replayed
// code issued (RFC 6749 §4.1.2), without fosite's revocation after it.
func TestCodeReplayRevokesTheGrantAtLookup(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	code, verifier := h.authorizeCode()
	tok := redeemCode(t, h, code, verifier)
	atSig := h.as.tokens.AccessTokenSignature(ctx, tok["access_token"].(string))
	rtSig := h.as.tokens.RefreshTokenSignature(ctx, tok["refresh_token"].(string))
	for kind, sig := range map[storage.TokenKind]string{storage.KindAccessToken: atSig, storage.KindRefreshToken: rtSig} {
		if st, err := h.store.GetToken(ctx, kind, sig); err != nil || !st.Active {
			t.Fatalf("%v before the replay: %+v, %v", kind, st, err)
		}
	}
	sig := h.as.tokens.AuthorizeCodeSignature(ctx, code)
	if _, err := h.as.store.GetAuthorizeCodeSession(ctx, sig, &session{}); !errors.Is(err, fosite.ErrInvalidatedAuthorizeCode) {
		t.Fatalf("GetAuthorizeCodeSession of a redeemed code = %v", err)
	}
	for kind, sig := range map[storage.TokenKind]string{storage.KindAccessToken: atSig, storage.KindRefreshToken: rtSig} {
		st, err := h.store.GetToken(ctx, kind, sig)
		if err != nil {
			t.Fatalf("%v after the replay: %v", kind, err)
		}
		if st.Active {
			t.Errorf("%v issued from the replayed code is still active", kind)
		}
	}
}

func redeemCode(t *testing.T, h *harness, code, verifier string) map[string]any {
	t.Helper()
	resp, body := h.post("/token", url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {appRedirect},
		"client_id": {"demo-app"}, "code_verifier": {verifier}}, "", "")
	if resp.StatusCode != 200 || body["refresh_token"] == nil {
		t.Fatalf("redemption: %d %v", resp.StatusCode, body)
	}
	return body
}

// Pins pickResource: a client gets tokens only for its own resources
// (RFC 8707 §2.2 invalid_target), refused before fosite's audience check.
func TestClientMayGetTokensOnlyForItsOwnResources(t *testing.T) {
	h := newHarness(t, nil)
	c, err := h.as.clients.get(context.Background(), "ci-bot")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.as.pickResource(c, []string{otherURI}); err == nil || !strings.Contains(fosite.ErrorToRFC6749Error(err).DescriptionField, "may not get tokens") {
		t.Errorf("pickResource(ci-bot, other) = %v, want invalid_target naming the client's resources", err)
	}
	if r, err := h.as.pickResource(c, []string{mcpURI}); err != nil || r.URI != mcpURI {
		t.Errorf("pickResource(ci-bot, mcp) = %v, %v", r, err)
	}
	resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"}, "resource": {otherURI}}, "ci-bot", ciSecret)
	if resp.StatusCode != 400 || body["error"] != "invalid_target" || !strings.Contains(body["error_description"].(string), "may not get tokens for the requested resource") {
		t.Errorf("client credentials for another resource: %d %v", resp.StatusCode, body)
	}
}

// Pins clientManager.authenticate: a registered client's secret past its
// client_secret_expires_at (RFC 7591 §3.2.1) no longer authenticates.
func TestExpiredClientSecretIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	const sec = "registered-secret-0123456789abcdef"
	err := h.store.CreateClient(context.Background(), &storage.Client{
		ID: "expiring", SecretHash: h.as.clients.hasher.Hash(sec), SecretExpiresAt: h.clock.Now().Add(time.Hour),
		TokenEndpointAuthMethod: authSecretBasic, GrantTypes: []string{"client_credentials"}, Resources: []string{mcpURI},
		Source: "dcr", CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if resp, body := h.post("/token", form, "expiring", sec); resp.StatusCode != 200 {
		t.Fatalf("before expiry: %d %v", resp.StatusCode, body)
	}
	h.clock.Advance(2 * time.Hour)
	resp, body := h.post("/token", form, "expiring", sec)
	if resp.StatusCode != 401 || body["error"] != "invalid_client" || !strings.Contains(body["error_description"].(string), "expired") {
		t.Errorf("after expiry: %d %v, want 401 invalid_client naming the expiry", resp.StatusCode, body)
	}
}

// Pins authenticateAssertion's algorithm allowlist and its refusal of key
// references (jku, x5u, jwk) in the header: both refuse an assertion that
// fosite would otherwise verify with the client's registered key.
func TestClientAssertionHeaderChecks(t *testing.T) {
	h := newHarness(t, nil)
	form := func(a string) url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}
	}
	good := signAssertion(t, h.jwtKey, (&jose.SignerOptions{}).WithHeader("kid", "k1"), "jwt-bot", h.issuer)
	if resp, body := h.post("/token", form(good), "", ""); resp.StatusCode != 200 {
		t.Fatalf("a plain assertion signed with the registered key: %d %v", resp.StatusCode, body)
	}
	cases := []struct {
		name, assertion, hint string
	}{
		{"refuses a jku next to the registered key", signAssertion(t, h.jwtKey, (&jose.SignerOptions{}).WithHeader("kid", "k1").WithHeader("jku", "https://attacker.example/jwks"), "jwt-bot", h.issuer), "Key references"},
		{"refuses an x5u next to the registered key", signAssertion(t, h.jwtKey, (&jose.SignerOptions{}).WithHeader("kid", "k1").WithHeader("x5u", "https://attacker.example/cert"), "jwt-bot", h.issuer), "Key references"},
		{"refuses the registered key embedded as jwk", signAssertion(t, h.jwtKey, (&jose.SignerOptions{EmbedJWK: true}).WithHeader("kid", "k1"), "jwt-bot", h.issuer), "Key references"},
		{"refuses an algorithm outside the list", relabel(t, good, "EdDSA"), "algorithm is not allowed"},
		{"refuses HS256", relabel(t, good, "HS256"), "algorithm is not allowed"},
		{"refuses alg none", relabel(t, good, "none"), "algorithm is not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post("/token", form(tc.assertion), "", "")
			desc, _ := body["error_description"].(string)
			if resp.StatusCode != 401 || body["error"] != "invalid_client" || !strings.Contains(desc, tc.hint) {
				t.Errorf("%d %v, want 401 invalid_client saying %q", resp.StatusCode, body, tc.hint)
			}
		})
	}
}

// relabel changes the alg of a compact JWS header and keeps its signature.
func relabel(t *testing.T, jws, alg string) string {
	t.Helper()
	parts := strings.Split(jws, ".")
	hdr, _, ok := peekJWT(jws)
	if !ok {
		t.Fatal("not a JWS")
	}
	var m map[string]any
	if err := json.Unmarshal(hdr, &m); err != nil {
		t.Fatal(err)
	}
	m["alg"] = alg
	b, _ := json.Marshal(m)
	parts[0] = b64(b)
	return strings.Join(parts, ".")
}

// Pins verifySubject's first check: a revoked subject token is refused
// before anything is issued (RFC 8693 §2.2.2 invalid_grant).
func TestRevokedSubjectTokenIsRefusedAtVerification(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	eh := &exchangeHandler{s: h.as}
	if _, err := eh.verifySubject(context.Background(), user.AccessToken); err != nil {
		t.Fatalf("verifySubject before revocation: %v", err)
	}
	if resp, _ := h.post("/revoke", url.Values{"token": {user.AccessToken}, "client_id": {"demo-app"}}, "", ""); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if g, err := eh.verifySubject(context.Background(), user.AccessToken); !errors.Is(err, errBadSubject) {
		t.Errorf("verifySubject of a revoked token = %+v, %v; want errBadSubject", g, err)
	}
}

// Pins tokenStrategy.verify: typ at+jwt (RFC 9068 §4), iss and exp are
// checked of a token signed with our own key.
func TestTokenVerificationChecksTypIssuerAndExpiry(t *testing.T) {
	h := newHarness(t, nil)
	k, err := h.as.keys.signingKey()
	if err != nil {
		t.Fatal(err)
	}
	now := h.clock.Now()
	claims := func(mod func(*accessClaims)) accessClaims {
		c := accessClaims{Issuer: h.issuer, Subject: "alice", Audience: mcpURI, ClientID: "demo-app",
			IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Minute).Unix(), ID: "j1"}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	sign := func(typ string, c accessClaims) string {
		opts := (&jose.SignerOptions{}).WithHeader("kid", k.kid)
		if typ != "" {
			opts = opts.WithType(jose.ContentType(typ))
		}
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.alg), Key: k.priv}, opts)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := json.Marshal(c)
		j, err := s.Sign(p)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := j.CompactSerialize()
		return out
	}
	if _, err := h.as.tokens.verify(context.Background(), sign("at+jwt", claims(nil))); err != nil {
		t.Fatalf("a token of ours: %v", err)
	}
	cases := []struct {
		name  string
		token string
	}{
		{"refuses typ JWT", sign("JWT", claims(nil))},
		{"refuses a token without typ", sign("", claims(nil))},
		{"refuses another issuer", sign("at+jwt", claims(func(c *accessClaims) { c.Issuer = "https://evil.example" }))},
		{"refuses the issuer with a trailing slash", sign("at+jwt", claims(func(c *accessClaims) { c.Issuer += "/" }))},
		{"refuses an expired token", sign("at+jwt", claims(func(c *accessClaims) { c.ExpiresAt = now.Add(-time.Second).Unix() }))},
		{"refuses a token expiring now", sign("at+jwt", claims(func(c *accessClaims) { c.ExpiresAt = now.Unix() }))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := h.as.tokens.verify(context.Background(), tc.token); err == nil {
				t.Errorf("verify accepted %+v", c)
			}
		})
	}
}
