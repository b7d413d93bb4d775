package as

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpauth/mcpauth/storage"
)

func TestClientCredentials(t *testing.T) {
	h := newHarness(t, nil)
	cases := []struct {
		name      string
		resources []string
		scopes    []string
		wantAud   string
		wantScope string
		wantErr   string
	}{
		{"uses the default resource when none is sent", nil, nil, mcpURI, "mcp:tools", ""},
		{"accepts the resource with a trailing slash", []string{mcpURI + "/"}, []string{"mcp:tools"}, mcpURI, "mcp:tools", ""},
		{"accepts an uppercase host", []string{"HTTP://127.0.0.1:8080/mcp"}, nil, mcpURI, "mcp:tools", ""},
		{"narrows scopes to what the client may have", []string{mcpURI}, []string{"mcp:tools", "mcp:admin", "*"}, mcpURI, "mcp:tools", ""},
		{"refuses a resource the client may not use", []string{otherURI}, nil, "", "", "invalid_target"},
		{"refuses an unknown resource", []string{"https://elsewhere.example/mcp"}, nil, "", "", "invalid_target"},
		{"refuses a dot-segment escape", []string{mcpURI + "/../admin"}, nil, "", "", "invalid_target"},
		{"refuses a query", []string{mcpURI + "?x"}, nil, "", "", "invalid_target"},
		{"refuses a prefix match", []string{mcpURI + "x"}, nil, "", "", "invalid_target"},
		{"refuses a urn", []string{"urn:mcp"}, nil, "", "", "invalid_target"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conf := clientcredentials.Config{ClientID: "ci-bot", ClientSecret: ciSecret, TokenURL: h.issuer + "/token",
				Scopes: tc.scopes, EndpointParams: url.Values{"resource": tc.resources}}
			tok, err := conf.Token(context.Background())
			if tc.wantErr != "" {
				var re *oauth2.RetrieveError
				if err == nil || !asRetrieve(err, &re) || re.ErrorCode != tc.wantErr {
					t.Fatalf("err = %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			typ, c := h.claims(tok.AccessToken)
			if typ != "at+jwt" || c["aud"] != tc.wantAud || c["scope"] != tc.wantScope || c["sub"] != "ci-bot" || c["client_id"] != "ci-bot" {
				t.Errorf("typ %s claims %v", typ, c)
			}
			if tok.RefreshToken != "" {
				t.Error("client credentials issued a refresh token")
			}
		})
	}
}

func asRetrieve(err error, re **oauth2.RetrieveError) bool {
	r, ok := err.(*oauth2.RetrieveError)
	*re = r
	return ok
}

func TestClientAuthentication(t *testing.T) {
	h := newHarness(t, nil)
	cc := url.Values{"grant_type": {"client_credentials"}}
	withID := func(kv ...string) url.Values {
		v := cloneValues(cc)
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	cases := []struct {
		name       string
		form       url.Values
		user, pass string
		status     int
		want       string
	}{
		{"accepts client_secret_basic", cc, "ci-bot", ciSecret, 200, ""},
		{"accepts client_secret_post", withID("client_id", "ci-bot", "client_secret", ciSecret), "", "", 200, ""},
		{"refuses a wrong secret", cc, "ci-bot", ciSecret + "x", 401, "invalid_client"},
		{"refuses an unknown client", cc, "ghost", "whatever-secret", 401, "invalid_client"},
		{"refuses no authentication", cc, "", "", 401, "invalid_client"},
		{"refuses two methods at once", withID("client_secret", ciSecret), "ci-bot", ciSecret, 400, "invalid_request"},
		{"refuses a public client", withID("client_id", "demo-app"), "", "", 400, "unauthorized_client"},
		{"refuses a client without the grant", cc, "web-app", webSecret, 400, "unauthorized_client"},
		{"refuses an unknown grant type", url.Values{"grant_type": {"password"}}, "ci-bot", ciSecret, 400, "unsupported_grant_type"},
		{"refuses a repeated grant type", url.Values{"grant_type": {"client_credentials", "client_credentials"}}, "ci-bot", ciSecret, 400, "invalid_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post("/token", tc.form, tc.user, tc.pass)
			if resp.StatusCode != tc.status || (tc.want != "" && body["error"] != tc.want) {
				t.Errorf("status %d body %v; want %d %s", resp.StatusCode, body, tc.status, tc.want)
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q", resp.Header.Get("Cache-Control"))
			}
			if tc.status >= 400 && body["error"] == nil {
				t.Errorf("error response without error: %v", body)
			}
		})
	}
}

// assertion builds a private_key_jwt client assertion (RFC 7523 §3).
func (h *harness) assertion(t *testing.T, key *ecdsa.PrivateKey, jti string, aud string, exp time.Duration) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: "jwt-bot", Subject: "jwt-bot", Audience: jwt.Audience{aud}, ID: jti,
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(exp)),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPrivateKeyJWTAndJTIReplay(t *testing.T) {
	h := newHarness(t, nil)
	form := func(a string) url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}
	}
	a := h.assertion(t, h.jwtKey, "jti-1", h.issuer, time.Minute)
	resp, body := h.post("/token", form(a), "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("first use: %d %v", resp.StatusCode, body)
	}
	if _, c := h.claims(body["access_token"].(string)); c["sub"] != "jwt-bot" || c["aud"] != mcpURI {
		t.Errorf("claims %v", c)
	}
	resp, body = h.post("/token", form(a), "", "")
	if resp.StatusCode != 401 || body["error"] != "invalid_client" {
		t.Errorf("replayed jti: %d %v", resp.StatusCode, body)
	}
	// The issuer with one trailing slash is the same audience (URL
	// normalising clients; the MCP conformance suite accepts both).
	resp, body = h.post("/token", form(h.assertion(t, h.jwtKey, "jti-2", h.issuer+"/", time.Minute)), "", "")
	if resp.StatusCode != 200 {
		t.Errorf("issuer with a trailing slash as audience: %d %v", resp.StatusCode, body)
	}
	other, _ := ecdsaKey()
	cases := []struct {
		name, a string
		hint    string // in error_description: which check refused it
	}{
		{"refuses another audience", h.assertion(t, h.jwtKey, "jti-3", "https://other.example/token", time.Minute), "must be this server's issuer identifier"},
		{"refuses a long-lived assertion", h.assertion(t, h.jwtKey, "jti-4", h.issuer, 24*time.Hour), "The client assertion lives too long."},
		{"refuses an expired assertion", h.assertion(t, h.jwtKey, "jti-5", h.issuer, -time.Minute), "Client authentication failed."},
		{"refuses garbage", "a.b.c", "The client assertion is not a JWS."},
		{"refuses alg none", "eyJhbGciOiJub25lIn0.eyJpc3MiOiJqd3QtYm90In0.", "The client assertion's algorithm is not allowed."},
		{"refuses a key not registered", h.assertion(t, other, "jti-6", h.issuer, time.Minute), "Unable to verify the integrity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post("/token", form(tc.a), "", "")
			desc, _ := body["error_description"].(string)
			if resp.StatusCode != 401 || body["error"] != "invalid_client" || !strings.Contains(desc, tc.hint) || body["access_token"] != nil {
				t.Errorf("%d %v; want 401 invalid_client saying %q", resp.StatusCode, body, tc.hint)
			}
		})
	}
	// The expired assertion was refused for its exp: the same assertion
	// with a fresh exp and jti is accepted.
	if resp, body := h.post("/token", form(h.assertion(t, h.jwtKey, "jti-7", h.issuer, time.Minute)), "", ""); resp.StatusCode != 200 {
		t.Errorf("a fresh assertion after the refusals: %d %v", resp.StatusCode, body)
	}
}

func TestIntrospectionVisibility(t *testing.T) {
	h := newHarness(t, nil)
	_, tok := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	at := tok["access_token"].(string)
	cases := []struct {
		name       string
		user, pass string
		token      string
		status     int
		active     bool
	}{
		{"shows the resource server tokens for its resource", "rs", rsSecret, at, 200, true},
		{"shows a client its own token", "ci-bot", ciSecret, at, 200, true},
		{"hides a token from an unrelated client", "web-app", webSecret, at, 200, false},
		{"answers inactive for garbage", "rs", rsSecret, "garbage", 200, false},
		{"answers inactive for a forged payload with a real signature", "rs", rsSecret, forge(at), 200, false},
		{"refuses an unauthenticated caller", "", "", at, 401, false},
		{"refuses a wrong secret", "rs", "nope-nope-nope", at, 401, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post("/introspect", url.Values{"token": {tc.token}}, tc.user, tc.pass)
			if resp.StatusCode != tc.status || (tc.status == 200 && body["active"] != tc.active) {
				t.Errorf("%d %v", resp.StatusCode, body)
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q", resp.Header.Get("Cache-Control"))
			}
			if tc.status == 401 && (body["error"] != "invalid_client" || body["active"] != nil) {
				t.Errorf("refused caller got %v, want invalid_client and no answer about the token", body)
			}
			if tc.active && (body["aud"] != mcpURI || body["sub"] != "ci-bot" || body["iss"] != h.issuer || body["scope"] != "mcp:tools") {
				t.Errorf("introspection %v", body)
			}
		})
	}
	resp, body := h.post("/introspect", url.Values{"token": {at}, "client_id": {"demo-app"}}, "", "")
	if resp.StatusCode != 401 || body["error"] != "invalid_client" {
		t.Errorf("public client introspected: %d %v", resp.StatusCode, body)
	}
	h.clock.Advance(time.Hour)
	if active(t, h, at) {
		t.Error("expired token still active")
	}
}

// forge keeps the signature of token and changes its payload.
func forge(token string) string {
	p := strings.Split(token, ".")
	return p[0] + ".eyJzdWIiOiJhZG1pbiJ9." + p[2]
}

func TestStorageOutageAnswers503(t *testing.T) {
	h := newHarness(t, nil)
	h.store.Close()
	resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
	if resp.StatusCode != http.StatusServiceUnavailable || body["error"] != "temporarily_unavailable" {
		t.Errorf("token: %d %v", resp.StatusCode, body)
	}
	resp, body = h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "dcr-client", "x")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("lookup of a storage client: %d %v", resp.StatusCode, body)
	}
}

func TestJWKSHasNoPrivateParts(t *testing.T) {
	h := newHarness(t, nil)
	resp, err := http.Get(h.issuer + "/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Keys) != 1 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("keys %v headers %v", doc.Keys, resp.Header)
	}
	for _, k := range doc.Keys {
		for _, priv := range []string{"d", "p", "q", "dp", "dq", "qi"} {
			if _, ok := k[priv]; ok {
				t.Errorf("JWKS key has private member %q", priv)
			}
		}
		if k["kid"] == nil || k["alg"] != "ES256" || k["use"] != "sig" {
			t.Errorf("key %v", k)
		}
	}
}

func TestOversizedAndMalformedBodiesGetOAuthErrors(t *testing.T) {
	h := newHarness(t, nil)
	cases := []struct {
		name  string
		body  string
		ctype string
	}{
		{"answers a body over 64 KiB with invalid_request", "grant_type=client_credentials&x=" + strings.Repeat("a", 70<<10), "application/x-www-form-urlencoded"},
		{"answers a bad escape with invalid_request", "grant_type=%zz", "application/x-www-form-urlencoded"},
		{"answers JSON with invalid_request", `{"grant_type":"client_credentials"}`, "application/json"},
		{"answers an empty body with invalid_request", "", "application/x-www-form-urlencoded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/token", "/introspect", "/revoke"} {
				req, _ := http.NewRequest(http.MethodPost, h.issuer+path, strings.NewReader(tc.body))
				req.Header.Set("Content-Type", tc.ctype)
				req.SetBasicAuth("ci-bot", ciSecret)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var body map[string]any
				_ = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				if resp.StatusCode != 400 || body["error"] != "invalid_request" || resp.Header.Get("Cache-Control") != "no-store" {
					t.Errorf("%s: %d %v %v", path, resp.StatusCode, body, resp.Header)
				}
			}
		})
	}
}

func TestPrivateKeyJWTWithJWKSURI(t *testing.T) {
	var h *harness
	var fetches atomic.Int32
	jwksSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: h.jwtKey.Public(), KeyID: "k1", Algorithm: "ES256"}}})
	}))
	t.Cleanup(jwksSrv.Close)
	h = newHarness(t, func(c *Config) {
		c.JWKSHTTPClient = jwksSrv.Client()
		c.Clients = append(c.Clients, Client{ID: "uri-bot", JWKSURI: jwksSrv.URL, GrantTypes: []string{"client_credentials"}})
	})
	// The assertion helper signs as jwt-bot; sign one as uri-bot.
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: h.jwtKey, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assert := func(jti string) url.Values {
		now := time.Now()
		a, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: "uri-bot", Subject: "uri-bot", Audience: jwt.Audience{h.issuer}, ID: jti,
			IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute))}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}
	}
	for i, jti := range []string{"u-1", "u-2"} {
		resp, body := h.post("/token", assert(jti), "", "")
		if resp.StatusCode != 200 {
			t.Fatalf("assertion %d: %d %v", i, resp.StatusCode, body)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("jwks_uri fetched %d times, want 1 (cached)", n)
	}
	if resp, body := h.post("/token", assert("u-1"), "", ""); resp.StatusCode != 401 || body["error"] != "invalid_client" {
		t.Errorf("replayed jti: %d %v", resp.StatusCode, body)
	}
}

// TestPrivateKeyJWTStoredKeysWithoutUse: a registered client's inline JWKS
// whose keys omit "use" works like a configured client's or a jwks_uri
// document (sigUse); fosite only considers keys with use "sig".
func TestPrivateKeyJWTStoredKeysWithoutUse(t *testing.T) {
	h := newHarness(t, nil)
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: h.jwtKey.Public(), KeyID: "k1", Algorithm: "ES256"}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(jwks), `"use"`) {
		t.Fatalf("test JWKS carries use: %s", jwks)
	}
	if err := h.store.CreateClient(context.Background(), &storage.Client{
		ID: "dcr-jwt", JWKS: jwks, TokenEndpointAuthMethod: "private_key_jwt", GrantTypes: []string{"client_credentials"}, Source: "dcr",
	}); err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: h.jwtKey, KeyID: "k1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: "dcr-jwt", Subject: "dcr-jwt", Audience: jwt.Audience{h.issuer}, ID: "jti-stored",
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute)),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("stored private_key_jwt client: %d %v", resp.StatusCode, body)
	}
	if _, c := h.claims(body["access_token"].(string)); c["sub"] != "dcr-jwt" || c["client_id"] != "dcr-jwt" || c["aud"] != mcpURI {
		t.Errorf("claims %v", c)
	}
}

// A jwks_uri that answers an error, redirects or sends an oversized document
// makes the assertion fail as invalid_client (401), never a server error.
func TestPrivateKeyJWTWithBrokenJWKSURI(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"not found", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }},
		{"redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }},
		{"oversized", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"keys":[],"pad":"` + strings.Repeat("a", jwksMaxBody) + `"}`))
		}},
		{"not a JWK set", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>")) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			t.Cleanup(srv.Close)
			client := srv.Client()
			client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			h := newHarness(t, func(cfg *Config) {
				cfg.JWKSHTTPClient = client
				cfg.Clients = append(cfg.Clients, Client{ID: "uri-bot", JWKSURI: srv.URL, GrantTypes: []string{"client_credentials"}})
			})
			signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: h.jwtKey, KeyID: "k1"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			a, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: "uri-bot", Subject: "uri-bot", Audience: jwt.Audience{h.issuer}, ID: "b-1",
				IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute))}).Serialize()
			if err != nil {
				t.Fatal(err)
			}
			resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"},
				"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}, "", "")
			if resp.StatusCode != 401 || body["error"] != "invalid_client" {
				t.Errorf("%d %v", resp.StatusCode, body)
			}
		})
	}
}

// typedAssertion builds a client assertion for jwt-bot with the given JOSE
// typ (none when empty) and raw aud claim value.
func (h *harness) typedAssertion(t *testing.T, typ string, aud any, jti string) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithHeader("kid", "k1")
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: h.jwtKey}, opts)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s, err := jwt.Signed(signer).Claims(map[string]any{
		"iss": "jwt-bot", "sub": "jwt-bot", "aud": aud, "jti": jti,
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestClientAssertionAudienceAndType checks the rfc7523bis rules: the
// issuer as the sole aud value (a string or a one-element array, with or
// without one trailing slash), the token endpoint URL refused unless the
// legacy switch is on, and typ client-authentication+jwt or none.
func TestClientAssertionAudienceAndType(t *testing.T) {
	h := newHarness(t, nil)
	form := func(a string) url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {clientAssertionType}, "client_assertion": {a}}
	}
	n := 0
	jti := func() string { n++; return fmt.Sprintf("aud-typ-%d", n) }
	ok := []struct {
		name string
		typ  string
		aud  any
	}{
		{"issuer as a string, untyped", "", h.issuer},
		{"issuer in a one-element array", "", []string{h.issuer}},
		{"issuer with a trailing slash in an array", "", []string{h.issuer + "/"}},
		{"typ client-authentication+jwt", "client-authentication+jwt", h.issuer},
		{"typ application/client-authentication+jwt", "application/client-authentication+jwt", h.issuer},
		{"typ JWT counts as untyped", "JWT", h.issuer},
	}
	for _, tc := range ok {
		t.Run("accepts "+tc.name, func(t *testing.T) {
			resp, body := h.post("/token", form(h.typedAssertion(t, tc.typ, tc.aud, jti())), "", "")
			if resp.StatusCode != 200 || body["access_token"] == nil {
				t.Errorf("%d %v", resp.StatusCode, body)
			}
		})
	}
	bad := []struct {
		name string
		typ  string
		aud  any
		hint string
	}{
		{"the token endpoint URL", "", h.issuer + "/token", "issuer identifier"},
		{"the token endpoint URL in an array", "", []string{h.issuer + "/token"}, "issuer identifier"},
		{"the issuer beside another audience", "", []string{h.issuer, "https://other.example"}, "issuer identifier"},
		{"the issuer twice", "", []string{h.issuer, h.issuer}, "issuer identifier"},
		{"the issuer with two trailing slashes", "", h.issuer + "//", "issuer identifier"},
		{"an empty array", "", []string{}, "issuer identifier"},
		{"no aud", "", nil, "issuer identifier"},
		{"a number as aud", "", 7, "issuer identifier"},
		{"the issuer in another case", "", strings.ToUpper(h.issuer), "issuer identifier"},
		{"typ at+jwt", "at+jwt", h.issuer, "typ"},
		{"typ oauth-id-jag+jwt", "oauth-id-jag+jwt", h.issuer, "typ"},
		{"typ dpop+jwt", "dpop+jwt", h.issuer, "typ"},
	}
	for _, tc := range bad {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			resp, body := h.post("/token", form(h.typedAssertion(t, tc.typ, tc.aud, jti())), "", "")
			desc, _ := body["error_description"].(string)
			if resp.StatusCode != 401 || body["error"] != "invalid_client" || !strings.Contains(desc, tc.hint) || body["access_token"] != nil {
				t.Errorf("%d %v; want 401 invalid_client about %q", resp.StatusCode, body, tc.hint)
			}
		})
	}
	t.Run("refuses another client_assertion_type with invalid_client", func(t *testing.T) {
		f := form(h.typedAssertion(t, "", h.issuer, jti()))
		f.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:saml2-bearer")
		resp, body := h.post("/token", f, "", "")
		if resp.StatusCode != 401 || body["error"] != "invalid_client" {
			t.Errorf("%d %v", resp.StatusCode, body)
		}
	})

	legacy := newHarness(t, func(c *Config) { c.AssertionAudienceTokenEndpoint = true })
	for _, aud := range []any{legacy.issuer + "/token", legacy.issuer} {
		resp, body := legacy.post("/token", form(legacy.typedAssertion(t, "", aud, jti())), "", "")
		if resp.StatusCode != 200 {
			t.Errorf("legacy switch, aud %v: %d %v", aud, resp.StatusCode, body)
		}
	}
	resp, body := legacy.post("/token", form(legacy.typedAssertion(t, "", []string{legacy.issuer, legacy.issuer + "/token"}, jti())), "", "")
	if resp.StatusCode != 401 || body["error"] != "invalid_client" {
		t.Errorf("legacy switch, two audiences: %d %v", resp.StatusCode, body)
	}
}
