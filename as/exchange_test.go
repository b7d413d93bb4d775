package as

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	thirdURI       = "http://127.0.0.1:8082/third"
	mcpSrvSecret   = "mcp-server-secret-0123456789abcdef"
	otherRSSecret  = "other-rs-secret-0123456789abcdefgh"
	strangerSecret = "stranger-secret-0123456789abcdefgh"
)

// exchangeHarness adds to the standard harness a third resource, clients
// that exchange tokens, and a policy:
//
//	mcp   -> other  other:read  for mcp-server and jwt-bot
//	other -> third  third:read  for other-rs (the second link of a chain)
//	mcp   -> third  third:read  for mcp-server, if the subject has mcp:admin
func exchangeHarness(t testing.TB, mod func(*Config)) *harness {
	t.Helper()
	return newHarness(t, func(c *Config) {
		c.Resources = append(c.Resources, Resource{URI: thirdURI, Name: "Third", Scopes: []string{"third:read", "third:write"}})
		for i := range c.Clients {
			if c.Clients[i].ID == "jwt-bot" {
				c.Clients[i].GrantTypes = append(c.Clients[i].GrantTypes, GrantTypeTokenExchange)
			}
		}
		c.Clients = append(c.Clients,
			Client{ID: "mcp-server", Secret: mcpSrvSecret, GrantTypes: []string{GrantTypeTokenExchange},
				Resources: []string{otherURI, thirdURI}, Scopes: []string{"other:read", "third:read"}},
			Client{ID: "other-rs", Secret: otherRSSecret, GrantTypes: []string{GrantTypeTokenExchange},
				Resources: []string{thirdURI}},
			Client{ID: "stranger", Secret: strangerSecret, GrantTypes: []string{GrantTypeTokenExchange},
				Resources: []string{otherURI}},
			Client{ID: "public-exchanger", Public: true, GrantTypes: []string{GrantTypeTokenExchange}},
		)
		c.ExchangePolicy = []ExchangeRule{
			{From: mcpURI, To: otherURI, Scopes: []string{"other:read"}, Clients: []string{"mcp-server", "jwt-bot"}},
			{From: otherURI + "/", To: thirdURI, Scopes: []string{"third:read", "third:write"}, Clients: []string{"other-rs"}},
			{From: mcpURI, To: thirdURI, Scopes: []string{"third:read"}, SubjectScopes: []string{"mcp:admin"}, Clients: []string{"mcp-server"}},
		}
		if mod != nil {
			mod(c)
		}
	})
}

// exchangeForm is a token exchange request for subject, towards target.
func exchangeForm(subject, target string, kv ...string) url.Values {
	v := url.Values{
		"grant_type":         {GrantTypeTokenExchange},
		"subject_token":      {subject},
		"subject_token_type": {TokenTypeAccessToken},
	}
	if target != "" {
		v.Set("resource", target)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			v.Del(kv[i])
		} else {
			v.Add(kv[i], kv[i+1])
		}
	}
	return v
}

// exchange runs one exchange as mcp-server and fails the test unless it
// succeeds; it returns the response body.
func (h *harness) exchange(t *testing.T, subject, target, user, pass string, kv ...string) map[string]any {
	t.Helper()
	resp, body := h.post("/token", exchangeForm(subject, target, kv...), user, pass)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("exchange: %d %v", resp.StatusCode, body)
	}
	return body
}

func TestTokenExchangeIssuesDelegatedTokenForTheTarget(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	_, uc := h.claims(user.AccessToken)

	resp, body := h.post("/token", exchangeForm(user.AccessToken, otherURI), "mcp-server", mcpSrvSecret)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	if body["issued_token_type"] != TokenTypeAccessToken || !strings.EqualFold(body["token_type"].(string), "bearer") ||
		body["scope"] != "other:read" || body["refresh_token"] != nil {
		t.Errorf("response %v", body)
	}
	tok := body["access_token"].(string)
	typ, c := h.claims(tok)
	if typ != "at+jwt" {
		t.Errorf("typ %q", typ)
	}
	want := map[string]any{"iss": h.issuer, "sub": "alice", "aud": otherURI, "client_id": "mcp-server", "scope": "other:read"}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("claim %s = %v, want %v", k, c[k], v)
		}
	}
	if act, _ := json.Marshal(c["act"]); string(act) != `{"sub":"mcp-server"}` {
		t.Errorf("act %s", act)
	}
	if c["exp"].(float64) > uc["exp"].(float64) {
		t.Errorf("exp %v after the subject token's %v", c["exp"], uc["exp"])
	}
	if c["jti"] == uc["jti"] {
		t.Error("the exchanged token reuses the subject's jti")
	}
	if ei := body["expires_in"].(float64); ei <= 0 || ei > DefaultAccessTokenTTL.Seconds() {
		t.Errorf("expires_in %v", ei)
	}

	// Introspectable by the exchanging client like any token of its own.
	_, in := h.post("/introspect", url.Values{"token": {tok}}, "mcp-server", mcpSrvSecret)
	if in["active"] != true || in["sub"] != "alice" || in["aud"] != otherURI || in["client_id"] != "mcp-server" || in["scope"] != "other:read" {
		t.Errorf("introspection %v", in)
	}
}

func TestTokenExchangeRequests(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	admin := h.codeFlow("mcp:tools", "mcp:admin")
	exchanged := h.exchange(t, user.AccessToken, otherURI, "mcp-server", mcpSrvSecret)["access_token"].(string)
	_, cc := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	ccToken := cc["access_token"].(string)

	cases := []struct {
		name       string
		user, pass string
		form       url.Values
		wantStatus int
		wantErr    string
		wantScope  string
		wantAud    string
	}{
		{"exchanges with client_secret_post", "", "",
			exchangeForm(user.AccessToken, otherURI, "client_id", "mcp-server", "client_secret", mcpSrvSecret), 200, "", "other:read", otherURI},
		{"accepts the jwt subject token type", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "subject_token_type", "", "subject_token_type", TokenTypeJWT), 200, "", "other:read", otherURI},
		{"accepts an explicit access token requested_token_type", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "requested_token_type", TokenTypeAccessToken), 200, "", "other:read", otherURI},
		{"accepts audience instead of resource", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, "", "audience", otherURI), 200, "", "other:read", otherURI},
		{"accepts resource and audience naming the same target", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "audience", otherURI+"/"), 200, "", "other:read", otherURI},
		{"accepts a client credentials token as the subject", "mcp-server", mcpSrvSecret,
			exchangeForm(ccToken, otherURI), 200, "", "other:read", otherURI},
		{"narrows the requested scopes to the policy", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "scope", "other:read mcp:admin third:read"), 200, "", "other:read", otherURI},
		{"grants a rule whose subject scopes the token carries", "mcp-server", mcpSrvSecret,
			exchangeForm(admin.AccessToken, thirdURI), 200, "", "third:read", thirdURI},

		{"refuses a scope outside the policy", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "scope", "mcp:admin"), 400, "invalid_scope", "", ""},
		{"refuses a client not named by any rule", "stranger", strangerSecret,
			exchangeForm(user.AccessToken, otherURI), 400, "invalid_target", "", ""},
		{"refuses an unknown target", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, "https://elsewhere.example/api"), 400, "invalid_target", "", ""},
		{"refuses a target the client may not use", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, mcpURI), 400, "invalid_target", "", ""},
		{"refuses a target with a dot-segment escape", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI+"/../admin"), 400, "invalid_target", "", ""},
		{"refuses a request without target", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, ""), 400, "invalid_target", "", ""},
		{"refuses two targets", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "audience", thirdURI), 400, "invalid_target", "", ""},
		{"refuses a subject token for another audience", "mcp-server", mcpSrvSecret,
			exchangeForm(exchanged, otherURI), 400, "invalid_grant", "", ""},
		{"refuses a subject token lacking the scopes a rule requires", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, thirdURI), 400, "invalid_grant", "", ""},
		{"refuses a forged payload under a real signature", "mcp-server", mcpSrvSecret,
			exchangeForm(forge(user.AccessToken), otherURI), 400, "invalid_grant", "", ""},
		{"refuses a refresh token as the subject", "mcp-server", mcpSrvSecret,
			exchangeForm(user.RefreshToken, otherURI), 400, "invalid_grant", "", ""},
		{"refuses garbage as the subject", "mcp-server", mcpSrvSecret,
			exchangeForm("not-a-token", otherURI), 400, "invalid_grant", "", ""},
		{"refuses an oversized subject token", "mcp-server", mcpSrvSecret,
			exchangeForm(strings.Repeat("a", maxSubjectToken)+"."+user.AccessToken, otherURI), 400, "invalid_grant", "", ""},
		{"refuses a missing subject token", "mcp-server", mcpSrvSecret,
			exchangeForm("", otherURI, "subject_token", ""), 400, "invalid_request", "", ""},
		{"refuses a repeated subject token", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "subject_token", admin.AccessToken), 400, "invalid_request", "", ""},
		{"refuses a missing subject token type", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "subject_token_type", ""), 400, "invalid_request", "", ""},
		{"refuses an id_token subject token type", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "subject_token_type", "", "subject_token_type", "urn:ietf:params:oauth:token-type:id_token"), 400, "invalid_request", "", ""},
		{"refuses a refresh_token requested token type", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "requested_token_type", "urn:ietf:params:oauth:token-type:refresh_token"), 400, "invalid_request", "", ""},
		{"refuses an actor token", "mcp-server", mcpSrvSecret,
			exchangeForm(user.AccessToken, otherURI, "actor_token", ccToken, "actor_token_type", TokenTypeAccessToken), 400, "invalid_request", "", ""},
		{"refuses a wrong client secret", "mcp-server", "wrong-secret-0123456789abcdef",
			exchangeForm(user.AccessToken, otherURI), 401, "invalid_client", "", ""},
		{"refuses a public client", "", "",
			exchangeForm(user.AccessToken, otherURI, "client_id", "public-exchanger"), 401, "invalid_client", "", ""},
		{"refuses a client without the grant type", "ci-bot", ciSecret,
			exchangeForm(user.AccessToken, otherURI), 400, "unauthorized_client", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post("/token", tc.form, tc.user, tc.pass)
			if resp.StatusCode != tc.wantStatus || (tc.wantErr != "" && body["error"] != tc.wantErr) {
				t.Fatalf("status %d body %v; want %d %s", resp.StatusCode, body, tc.wantStatus, tc.wantErr)
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q", resp.Header.Get("Cache-Control"))
			}
			if tc.wantErr != "" {
				if body["access_token"] != nil {
					t.Error("an error response carries a token")
				}
				if desc, _ := body["error_description"].(string); desc == "" {
					t.Error("no error_description")
				}
				return
			}
			_, c := h.claims(body["access_token"].(string))
			if c["aud"] != tc.wantAud || c["scope"] != tc.wantScope || body["scope"] != tc.wantScope {
				t.Errorf("aud %v scope %v (response scope %v)", c["aud"], c["scope"], body["scope"])
			}
		})
	}
	t.Run("the actor token refusal says why", func(t *testing.T) {
		_, body := h.post("/token", exchangeForm(user.AccessToken, otherURI, "actor_token", ccToken), "mcp-server", mcpSrvSecret)
		if desc, _ := body["error_description"].(string); !strings.Contains(desc, "actor_token") {
			t.Errorf("description %q", desc)
		}
	})
}

// signWithServerKey signs claims with the AS's own current key under the
// given typ: a token the AS could have issued but did not.
func signWithServerKey(t *testing.T, h *harness, typ string, claims map[string]any) string {
	t.Helper()
	k, err := h.as.keys.signingKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.alg), Key: jose.JSONWebKey{Key: k.priv, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		t.Fatal(err)
	}
	return sign(t, signer, claims)
}

func sign(t *testing.T, signer jose.Signer, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTokenExchangeRefusesTokensThisServerDidNotIssue(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	_, uc := h.claims(user.AccessToken)
	k, err := h.as.keys.signingKey()
	if err != nil {
		t.Fatal(err)
	}
	foreignKey, err := ecdsaKey()
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: foreignKey, KeyID: k.kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	idToken := map[string]any{"iss": h.issuer, "sub": "alice", "aud": "demo-app", "iat": uc["iat"], "exp": uc["exp"], "nonce": "n"}
	cases := []struct {
		name  string
		token string
	}{
		{"refuses an ID-token-shaped JWT signed with the server's key", signWithServerKey(t, h, "JWT", idToken)},
		{"refuses the user's claims re-signed with the server's key as typ JWT", signWithServerKey(t, h, "JWT", uc)},
		{"refuses an at+jwt signed with the server's key but never issued", signWithServerKey(t, h, "at+jwt", uc)},
		{"refuses the user's claims signed by a foreign key under our kid", sign(t, foreign, uc)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post("/token", exchangeForm(tc.token, otherURI), "mcp-server", mcpSrvSecret)
			if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
				t.Errorf("%d %v", resp.StatusCode, body)
			}
		})
	}
}

func TestTokenExchangeRefusesExpiredAndRevokedSubjects(t *testing.T) {
	t.Run("refuses an expired subject token", func(t *testing.T) {
		h := exchangeHarness(t, nil)
		user := h.codeFlow("mcp:tools")
		h.clock.Advance(DefaultAccessTokenTTL + time.Second)
		resp, body := h.post("/token", exchangeForm(user.AccessToken, otherURI), "mcp-server", mcpSrvSecret)
		if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
			t.Errorf("%d %v", resp.StatusCode, body)
		}
	})
	t.Run("refuses a revoked subject token", func(t *testing.T) {
		h := exchangeHarness(t, nil)
		user := h.codeFlow("mcp:tools")
		if resp, _ := h.post("/revoke", url.Values{"token": {user.AccessToken}, "client_id": {"demo-app"}}, "", ""); resp.StatusCode != 200 {
			t.Fatalf("revoke: %d", resp.StatusCode)
		}
		resp, body := h.post("/token", exchangeForm(user.AccessToken, otherURI), "mcp-server", mcpSrvSecret)
		if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
			t.Errorf("%d %v", resp.StatusCode, body)
		}
	})
	t.Run("revoking the user's grant revokes the exchanged tokens", func(t *testing.T) {
		h := exchangeHarness(t, nil)
		user := h.codeFlow("mcp:tools")
		tok := h.exchange(t, user.AccessToken, otherURI, "mcp-server", mcpSrvSecret)["access_token"].(string)
		if !introspectAs(t, h, tok, "mcp-server", mcpSrvSecret) {
			t.Fatal("exchanged token not active")
		}
		if resp, _ := h.post("/revoke", url.Values{"token": {user.RefreshToken}, "client_id": {"demo-app"}}, "", ""); resp.StatusCode != 200 {
			t.Fatalf("revoke: %d", resp.StatusCode)
		}
		if introspectAs(t, h, tok, "mcp-server", mcpSrvSecret) {
			t.Error("exchanged token still active after the user's grant was revoked")
		}
	})
	t.Run("a user's refresh does not revoke exchanged tokens", func(t *testing.T) {
		h := exchangeHarness(t, nil)
		user := h.codeFlow("mcp:tools")
		tok := h.exchange(t, user.AccessToken, otherURI, "mcp-server", mcpSrvSecret)["access_token"].(string)
		if status, body := refresh(h, user.RefreshToken); status != 200 {
			t.Fatalf("refresh: %d %v", status, body)
		}
		if !introspectAs(t, h, tok, "mcp-server", mcpSrvSecret) {
			t.Error("exchanged token revoked by an ordinary refresh")
		}
	})
}

func introspectAs(t *testing.T, h *harness, token, user, pass string) bool {
	t.Helper()
	resp, body := h.post("/introspect", url.Values{"token": {token}}, user, pass)
	if resp.StatusCode != 200 {
		t.Fatalf("introspect: %d %v", resp.StatusCode, body)
	}
	return body["active"] == true
}

func TestTokenExchangeExpiresNoLaterThanTheSubject(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	_, uc := h.claims(user.AccessToken)
	h.clock.Advance(DefaultAccessTokenTTL - 2*time.Minute)
	body := h.exchange(t, user.AccessToken, otherURI, "mcp-server", mcpSrvSecret)
	_, c := h.claims(body["access_token"].(string))
	if c["exp"].(float64) != uc["exp"].(float64) {
		t.Errorf("exp %v, want the subject token's %v", c["exp"], uc["exp"])
	}
	if ei := body["expires_in"].(float64); ei > 120 || ei < 60 {
		t.Errorf("expires_in %v, want at most the subject's remaining 120 s", ei)
	}
	h.clock.Advance(2 * time.Minute)
	if introspectAs(t, h, body["access_token"].(string), "mcp-server", mcpSrvSecret) {
		t.Error("exchanged token outlives its subject token")
	}
}

func TestTokenExchangeChainNestsActors(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	_, uc := h.claims(user.AccessToken)
	first := h.exchange(t, user.AccessToken, otherURI, "mcp-server", mcpSrvSecret)["access_token"].(string)
	second := h.exchange(t, first, thirdURI, "other-rs", otherRSSecret, "scope", "third:read")
	_, c := h.claims(second["access_token"].(string))
	if act, _ := json.Marshal(c["act"]); string(act) != `{"act":{"sub":"mcp-server"},"sub":"other-rs"}` {
		t.Errorf("act %s", act)
	}
	if c["sub"] != "alice" || c["aud"] != thirdURI || c["client_id"] != "other-rs" || c["scope"] != "third:read" {
		t.Errorf("claims %v", c)
	}
	if c["exp"].(float64) > uc["exp"].(float64) {
		t.Errorf("exp %v after the original subject's %v", c["exp"], uc["exp"])
	}
	// The chain's tokens belong to the user's grant: revoking it ends them all.
	if resp, _ := h.post("/revoke", url.Values{"token": {user.AccessToken}, "client_id": {"demo-app"}}, "", ""); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if introspectAs(t, h, second["access_token"].(string), "other-rs", otherRSSecret) {
		t.Error("the end of the chain is still active after the user's grant was revoked")
	}
	resp, body := h.post("/token", exchangeForm(first, thirdURI), "other-rs", otherRSSecret)
	if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
		t.Errorf("exchanging a revoked link: %d %v", resp.StatusCode, body)
	}
}

// Exchange is not single-use (documented on exchangeHandler): a resource
// server may exchange the same subject token again, and gets a new token.
func TestTokenExchangeMayBeRepeated(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	a := h.exchange(t, user.AccessToken, otherURI, "mcp-server", mcpSrvSecret)["access_token"].(string)
	b := h.exchange(t, user.AccessToken, otherURI, "mcp-server", mcpSrvSecret)["access_token"].(string)
	_, ca := h.claims(a)
	_, cb := h.claims(b)
	if a == b || ca["jti"] == cb["jti"] {
		t.Error("a repeated exchange returned the same token")
	}
	if !introspectAs(t, h, a, "mcp-server", mcpSrvSecret) || !introspectAs(t, h, b, "mcp-server", mcpSrvSecret) {
		t.Error("the first token stopped working when the exchange was repeated")
	}
}

func TestTokenExchangeWithPrivateKeyJWT(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	form := exchangeForm(user.AccessToken, otherURI,
		"client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
		"client_assertion", h.assertion(t, h.jwtKey, "x-jti-1", h.issuer, time.Minute))
	resp, body := h.post("/token", form, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	_, c := h.claims(body["access_token"].(string))
	if act, _ := json.Marshal(c["act"]); string(act) != `{"sub":"jwt-bot"}` || c["client_id"] != "jwt-bot" {
		t.Errorf("act %s claims %v", act, c)
	}
}

func TestTokenExchangeWithoutPolicyAllowsNothing(t *testing.T) {
	h := exchangeHarness(t, func(c *Config) { c.ExchangePolicy = nil })
	user := h.codeFlow("mcp:tools")
	resp, body := h.post("/token", exchangeForm(user.AccessToken, otherURI), "mcp-server", mcpSrvSecret)
	if resp.StatusCode != 400 || body["error"] != "invalid_target" {
		t.Errorf("%d %v", resp.StatusCode, body)
	}
}

func TestTokenExchangeIsAdvertised(t *testing.T) {
	h := newHarness(t, nil)
	resp, err := http.Get(h.issuer + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md struct {
		Grants []string `json:"grant_types_supported"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range md.Grants {
		found = found || g == GrantTypeTokenExchange
	}
	if !found {
		t.Errorf("grant_types_supported %v lacks %s", md.Grants, GrantTypeTokenExchange)
	}
}

func TestExchangePolicyValidation(t *testing.T) {
	res := []Resource{
		{URI: mcpURI, Scopes: []string{"mcp:tools", "mcp:admin"}},
		{URI: otherURI, Scopes: []string{"other:read"}},
	}
	cases := []struct {
		name    string
		rule    ExchangeRule
		wantErr string
	}{
		{"accepts a rule between configured resources", ExchangeRule{From: mcpURI, To: otherURI + "/", Scopes: []string{"other:read"}}, ""},
		{"refuses an unknown From", ExchangeRule{From: "https://x.example", To: otherURI, Scopes: []string{"other:read"}}, "From"},
		{"refuses an unknown To", ExchangeRule{From: mcpURI, To: "https://x.example", Scopes: []string{"other:read"}}, "To"},
		{"refuses From equal to To", ExchangeRule{From: mcpURI, To: mcpURI + "/", Scopes: []string{"mcp:tools"}}, "same resource"},
		{"refuses a rule without scopes", ExchangeRule{From: mcpURI, To: otherURI}, "Scopes"},
		{"refuses a scope that is not the target's", ExchangeRule{From: mcpURI, To: otherURI, Scopes: []string{"mcp:tools"}}, "Scopes"},
		{"refuses a subject scope that is not the source's", ExchangeRule{From: mcpURI, To: otherURI, Scopes: []string{"other:read"}, SubjectScopes: []string{"other:read"}}, "SubjectScopes"},
		{"refuses an empty client ID", ExchangeRule{From: mcpURI, To: otherURI, Scopes: []string{"other:read"}, Clients: []string{""}}, "Clients"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compileExchangePolicy([]ExchangeRule{tc.rule}, res)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one mentioning %s", err, tc.wantErr)
			}
		})
	}
	// New refuses the same.
	cfg := Config{ExchangePolicy: []ExchangeRule{{From: mcpURI, To: mcpURI, Scopes: []string{"mcp:tools"}}}}
	h := newHarness(t, nil)
	cfg.Issuer, cfg.Resources, cfg.Store, cfg.Secret = h.issuer, res, h.store, []byte(strings.Repeat("s", 32))
	if _, err := New(t.Context(), cfg); err == nil {
		t.Error("New accepted an exchange rule from a resource to itself")
	}
}

func TestTokenExchangeDuringStorageOutageAnswers503(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	h.store.Close()
	resp, body := h.post("/token", exchangeForm(user.AccessToken, otherURI), "mcp-server", mcpSrvSecret)
	if resp.StatusCode != http.StatusServiceUnavailable || body["error"] != "temporarily_unavailable" {
		t.Errorf("%d %v", resp.StatusCode, body)
	}
}

func TestTokenExchangeRuleWithoutClientsAppliesToClientsWithTheGrant(t *testing.T) {
	h := exchangeHarness(t, func(c *Config) {
		c.ExchangePolicy = []ExchangeRule{{From: mcpURI, To: otherURI, Scopes: []string{"other:read"}}}
	})
	user := h.codeFlow("mcp:tools")
	cases := []struct {
		name, user, pass string
		wantStatus       int
		wantErr          string
	}{
		{"lets a client with the grant and the target resource exchange", "stranger", strangerSecret, 200, ""},
		{"refuses a client with the grant that may not use the target", "other-rs", otherRSSecret, 400, "invalid_target"},
		{"refuses a client without the grant", "ci-bot", ciSecret, 400, "unauthorized_client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post("/token", exchangeForm(user.AccessToken, otherURI), tc.user, tc.pass)
			if resp.StatusCode != tc.wantStatus || (tc.wantErr != "" && body["error"] != tc.wantErr) {
				t.Fatalf("%d %v", resp.StatusCode, body)
			}
			if tc.wantErr == "" {
				if _, c := h.claims(body["access_token"].(string)); c["client_id"] != tc.user || c["aud"] != otherURI {
					t.Errorf("claims %v", c)
				}
			}
		})
	}
}

// TestRevokingAGrantEndsTheTokensExchangedFromIt: an exchanged token joins
// the grant of its subject token and shares its status index, so revoking
// the grant from either client's side (the person revoking the app, an
// operator revoking or deleting the exchanging client) ends all of it at
// introspection, as the status list already says.
func TestRevokingAGrantEndsTheTokensExchangedFromIt(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		filter GrantFilter
	}{
		{"the person revokes the app", GrantFilter{User: "alice", Client: "demo-app"}},
		{"the exchanging client's grants are revoked", GrantFilter{Client: "mcp-server"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := exchangeHarness(t, nil)
			user := h.codeFlow("mcp:tools")
			ex := h.exchange(t, user.AccessToken, otherURI, "mcp-server", mcpSrvSecret)["access_token"].(string)
			if _, err := h.as.RevokeGrants(ctx, tc.filter); err != nil {
				t.Fatal(err)
			}
			if introspectAs(t, h, ex, "mcp-server", mcpSrvSecret) || introspectAs(t, h, user.AccessToken, "rs", rsSecret) {
				t.Error("a token of the revoked grant introspects active")
			}
			if !statusOf(t, h, ex) || !statusOf(t, h, user.AccessToken) {
				t.Error("the grant's status is not revoked")
			}
			resp, body := h.post("/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {user.RefreshToken}, "client_id": {"demo-app"}}, "", "")
			wantError(t, resp, body, 400, "invalid_grant")
			if gs, err := h.as.ListGrants(ctx, GrantFilter{}, 0); err != nil || len(gs) != 0 {
				t.Errorf("grants left %+v, %v", gs, err)
			}
		})
	}
}
