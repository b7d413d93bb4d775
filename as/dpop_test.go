package as

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/internal/secret"
	"github.com/mcpauth/mcpauth/storage"
)

// postProof sends a token request with the given DPoP header values.
func (h *harness) postProof(form url.Values, user, pass string, proofs ...string) (*http.Response, map[string]any) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(url.QueryEscape(user), url.QueryEscape(pass))
	}
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		h.t.Fatalf("status %d, body not JSON: %s", resp.StatusCode, body)
	}
	return resp, m
}

func (h *harness) proof(s *dpop.Signer, nonce string) string {
	h.t.Helper()
	p, err := s.Proof("POST", h.issuer+"/token", "", nonce)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func newKey(t *testing.T) *dpop.Signer {
	t.Helper()
	s, err := dpop.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var ccForm = url.Values{"grant_type": {"client_credentials"}, "resource": {mcpURI}}

func wantDPoPError(t *testing.T, resp *http.Response, body map[string]any, code string) {
	t.Helper()
	if resp.StatusCode != http.StatusBadRequest || body["error"] != code {
		t.Fatalf("status %d body %v, want 400 %s", resp.StatusCode, body, code)
	}
	if body["access_token"] != nil {
		t.Fatalf("token issued with an error: %v", body)
	}
}

func TestDPoPMetadataAdvertisesAsymmetricAlgs(t *testing.T) {
	h := newHarness(t, nil)
	resp, err := http.Get(h.issuer + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&md)
	algs, _ := md["dpop_signing_alg_values_supported"].([]any)
	if len(algs) == 0 || !slices.Contains(algs, any("ES256")) {
		t.Fatalf("dpop_signing_alg_values_supported = %v", md["dpop_signing_alg_values_supported"])
	}
	for _, a := range algs {
		if s := a.(string); s == "none" || strings.HasPrefix(s, "HS") {
			t.Fatalf("advertises %s", s)
		}
	}
	if _, ok := md["dpop_bound_access_tokens"]; ok {
		t.Fatal("dpop_bound_access_tokens is client metadata, not AS metadata")
	}
}

func TestDPoPClientCredentialsBindsTokenAndIntrospectionShowsCnf(t *testing.T) {
	h := newHarness(t, nil)
	k := newKey(t)
	resp, body := h.postProof(ccForm, "ci-bot", ciSecret, h.proof(k, ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("status %d body %v", resp.StatusCode, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q", cc)
	}
	at := body["access_token"].(string)
	_, c := h.claims(at)
	cnf, _ := c["cnf"].(map[string]any)
	if cnf["jkt"] != k.Thumbprint() {
		t.Fatalf("cnf = %v, want jkt %s", c["cnf"], k.Thumbprint())
	}
	_, in := h.post("/introspect", url.Values{"token": {at}}, "rs", rsSecret)
	if in["active"] != true || in["token_type"] != "DPoP" || in["cnf"].(map[string]any)["jkt"] != k.Thumbprint() {
		t.Fatalf("introspection %v", in)
	}

	// Without a proof the token is a plain Bearer one.
	resp, body = h.postProof(ccForm, "ci-bot", ciSecret)
	if resp.StatusCode != 200 || !strings.EqualFold(body["token_type"].(string), "bearer") {
		t.Fatalf("status %d body %v", resp.StatusCode, body)
	}
	_, c = h.claims(body["access_token"].(string))
	if c["cnf"] != nil {
		t.Fatalf("Bearer token has cnf %v", c["cnf"])
	}
	_, in = h.post("/introspect", url.Values{"token": {body["access_token"].(string)}}, "rs", rsSecret)
	if in["token_type"] != "Bearer" || in["cnf"] != nil {
		t.Fatalf("introspection of a Bearer token %v", in)
	}
}

func TestDPoPTokenEndpointRefusesBadProofs(t *testing.T) {
	h := newHarness(t, nil)
	k := newKey(t)
	used := h.proof(k, "")
	if resp, _ := h.postProof(ccForm, "ci-bot", ciSecret, used); resp.StatusCode != 200 {
		t.Fatalf("first use: %d", resp.StatusCode)
	}
	wrongHTU, _ := k.Proof("POST", h.issuer+"/authorize", "", "")
	wrongHTM, _ := k.Proof("GET", h.issuer+"/token", "", "")
	k.SetClock(func() time.Time { return time.Now().Add(-10 * time.Minute) })
	stale := h.proof(k, "")
	k.SetClock(time.Now)
	cases := map[string][]string{
		"replayed proof": {used},
		"wrong htu":      {wrongHTU},
		"wrong htm":      {wrongHTM},
		"stale iat":      {stale},
		"two headers":    {h.proof(k, ""), h.proof(k, "")},
		"two in one":     {h.proof(k, "") + "," + h.proof(k, "")},
		"not a JWT":      {"not-a-jwt"},
	}
	for name, proofs := range cases {
		t.Run(name, func(t *testing.T) {
			resp, body := h.postProof(ccForm, "ci-bot", ciSecret, proofs...)
			wantDPoPError(t, resp, body, "invalid_dpop_proof")
		})
	}
}

// The conformance suite's DPoP proof alone is checked before the client:
// a good proof on a request with bad client credentials is still invalid_client.
func TestDPoPGoodProofDoesNotAuthenticate(t *testing.T) {
	h := newHarness(t, nil)
	resp, body := h.postProof(ccForm, "ci-bot", "wrong-secret-0123456789", h.proof(newKey(t), ""))
	if resp.StatusCode != http.StatusUnauthorized || body["error"] != "invalid_client" {
		t.Fatalf("status %d body %v", resp.StatusCode, body)
	}
}

func codeForm(code, verifier string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier},
		"client_id": {"demo-app"}, "redirect_uri": {appRedirect}}
}

func TestDPoPPublicClientCodeAndRefreshBoundToKey(t *testing.T) {
	h := newHarness(t, nil)
	k, other := newKey(t), newKey(t)
	code, verifier := h.authorizeCode(oauth2.SetAuthURLParam("resource", mcpURI), oauth2.SetAuthURLParam("dpop_jkt", k.Thumbprint()),
		oauth2.SetAuthURLParam("scope", "mcp:tools offline_access"))
	if code == "" {
		t.Fatal("no code")
	}
	// RFC 9449 §10: the code is bound to dpop_jkt.
	resp, body := h.postProof(codeForm(code, verifier), "", "")
	wantDPoPError(t, resp, body, "invalid_dpop_proof")
	resp, body = h.postProof(codeForm(code, verifier), "", "", h.proof(other, ""))
	wantDPoPError(t, resp, body, "invalid_dpop_proof")
	resp, body = h.postProof(codeForm(code, verifier), "", "", h.proof(k, ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("redeem: %d %v", resp.StatusCode, body)
	}
	_, c := h.claims(body["access_token"].(string))
	if c["cnf"].(map[string]any)["jkt"] != k.Thumbprint() {
		t.Fatalf("cnf %v", c["cnf"])
	}
	rt, _ := body["refresh_token"].(string)
	if rt == "" {
		t.Fatalf("no refresh token: %v", body)
	}
	rform := func(rt string) url.Values {
		return url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"demo-app"}}
	}
	// RFC 9449 §5: a public client's refresh token needs a proof of its key.
	resp, body = h.postProof(rform(rt), "", "")
	wantDPoPError(t, resp, body, "invalid_dpop_proof")
	resp, body = h.postProof(rform(rt), "", "", h.proof(other, ""))
	wantDPoPError(t, resp, body, "invalid_dpop_proof")
	resp, body = h.postProof(rform(rt), "", "", h.proof(k, ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("refresh: %d %v", resp.StatusCode, body)
	}
	rt2 := body["refresh_token"].(string)
	if rt2 == rt {
		t.Fatal("refresh token not rotated")
	}
	// The rotated token keeps the binding.
	resp, body = h.postProof(rform(rt2), "", "", h.proof(other, ""))
	wantDPoPError(t, resp, body, "invalid_dpop_proof")
	resp, body = h.postProof(rform(rt2), "", "")
	wantDPoPError(t, resp, body, "invalid_dpop_proof")
	resp, body = h.postProof(rform(rt2), "", "", h.proof(k, ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("second refresh: %d %v", resp.StatusCode, body)
	}
}

func TestDPoPConfidentialClientRefreshNotBound(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("web-app", webSecret, "mcp:tools", "offline_access")
	verifier := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI)))
	k := newKey(t)
	form := url.Values{"grant_type": {"authorization_code"}, "code": {u.Query().Get("code")}, "code_verifier": {verifier}, "redirect_uri": {appRedirect}}
	resp, body := h.postProof(form, "web-app", webSecret, h.proof(k, ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("redeem: %d %v", resp.StatusCode, body)
	}
	rt := body["refresh_token"].(string)
	resp, body = h.postProof(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}, "web-app", webSecret)
	if resp.StatusCode != 200 || body["token_type"] == "DPoP" {
		t.Fatalf("refresh without proof: %d %v", resp.StatusCode, body)
	}
	_, c := h.claims(body["access_token"].(string))
	if c["cnf"] != nil {
		t.Fatalf("unbound refresh gave cnf %v", c["cnf"])
	}
}

func TestDPoPAuthorizeRefusesMalformedJKT(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	p := h.browser().get(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("dpop_jkt", "short")))
	if p.StatusCode == http.StatusOK && strings.Contains(p.Body, `name="password"`) {
		t.Fatal("malformed dpop_jkt reached the login page")
	}
	if !strings.Contains(p.Body, "invalid_request") && !strings.Contains(p.Header.Get("Location"), "invalid_request") {
		t.Fatalf("status %d, no invalid_request: %s %s", p.StatusCode, p.Header.Get("Location"), p.Body)
	}
}

func TestDPoPBoundClientMetadataEnforced(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Clients = append(c.Clients, Client{ID: "dpop-bot", Secret: ciSecret, GrantTypes: []string{"client_credentials"}, DPoPBoundAccessTokens: true})
	})
	hasher, err := secret.NewHasher([]byte("0123456789abcdef0123456789abcdef-test-secret"), purposeSecrets)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.CreateClient(context.Background(), &storage.Client{
		ID: "dcr-dpop", SecretHash: hasher.Hash(ciSecret), TokenEndpointAuthMethod: "client_secret_basic", GrantTypes: []string{"client_credentials"},
		Source: "dcr", Metadata: []byte(`{"grant_types":["client_credentials"],"dpop_bound_access_tokens":true}`),
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"dpop-bot", "dcr-dpop"} {
		t.Run(id, func(t *testing.T) {
			resp, body := h.postProof(ccForm, id, ciSecret)
			wantDPoPError(t, resp, body, "invalid_dpop_proof")
			resp, body = h.postProof(ccForm, id, ciSecret, h.proof(newKey(t), ""))
			if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
				t.Fatalf("with proof: %d %v", resp.StatusCode, body)
			}
		})
	}
}

func TestDPoPRequiredForResource(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DPoP.RequiredFor = []string{mcpURI} })
	resp, body := h.postProof(ccForm, "ci-bot", ciSecret)
	wantDPoPError(t, resp, body, "invalid_dpop_proof")
	resp, body = h.postProof(ccForm, "ci-bot", ciSecret, h.proof(newKey(t), ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("with proof: %d %v", resp.StatusCode, body)
	}
	// Another resource still gets Bearer tokens without a proof.
	resp, body = h.postProof(url.Values{"grant_type": {"client_credentials"}, "resource": {otherURI}}, "rs", rsSecret)
	if resp.StatusCode == http.StatusBadRequest && body["error"] == "invalid_dpop_proof" {
		t.Fatalf("other resource required a proof: %v", body)
	}
	if _, err := New(context.Background(), Config{Issuer: h.issuer, Store: h.store, Secret: []byte("0123456789abcdef0123456789abcdef-test-secret"),
		Resources: []Resource{{URI: mcpURI}}, DPoP: DPoPConfig{RequiredFor: []string{"https://unknown.example/mcp"}}}); err == nil {
		t.Fatal("RequiredFor naming an unknown resource accepted")
	}
}

func TestDPoPNonceRoundTrip(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.DPoP.Nonce = true })
	k := newKey(t)
	resp, body := h.postProof(ccForm, "ci-bot", ciSecret, h.proof(k, ""))
	wantDPoPError(t, resp, body, "use_dpop_nonce")
	nonce := resp.Header.Values("DPoP-Nonce")
	if len(nonce) != 1 || nonce[0] == "" {
		t.Fatalf("DPoP-Nonce %q", nonce)
	}
	resp, body = h.postProof(ccForm, "ci-bot", ciSecret, h.proof(k, nonce[0]))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("with nonce: %d %v", resp.StatusCode, body)
	}
	if resp.Header.Get("DPoP-Nonce") == "" {
		t.Fatal("no fresh nonce on success")
	}
	resp, body = h.postProof(ccForm, "ci-bot", ciSecret, h.proof(k, "forged-nonce"))
	wantDPoPError(t, resp, body, "use_dpop_nonce")
	// A nonce from another secret (another deployment) does not open.
	other := newHarness(t, func(c *Config) {
		c.DPoP.Nonce = true
		c.Secret = []byte("another-secret-0123456789abcdef-0123456789")
	})
	otherResp, _ := other.postProof(ccForm, "ci-bot", ciSecret, other.proof(k, ""))
	resp, body = h.postProof(ccForm, "ci-bot", ciSecret, h.proof(k, otherResp.Header.Get("DPoP-Nonce")))
	wantDPoPError(t, resp, body, "use_dpop_nonce")
	// Nonces expire.
	h.clock.Advance(dpopNonceTTL + time.Minute)
	k.SetClock(h.clock.Now)
	resp, body = h.postProof(ccForm, "ci-bot", ciSecret, h.proof(k, nonce[0]))
	wantDPoPError(t, resp, body, "use_dpop_nonce")
	// Without a proof no nonce is needed: the token is a Bearer one.
	resp, body = h.postProof(ccForm, "ci-bot", ciSecret)
	if resp.StatusCode != 200 {
		t.Fatalf("no proof: %d %v", resp.StatusCode, body)
	}
}

func TestDPoPTokenCORSExposesNonce(t *testing.T) {
	h := newHarness(t, nil)
	req, _ := http.NewRequest(http.MethodOptions, h.issuer+"/token", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "dpop")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "DPoP") {
		t.Fatalf("Allow-Headers %q", resp.Header.Get("Access-Control-Allow-Headers"))
	}
	resp, _ = h.postProof(ccForm, "ci-bot", ciSecret)
	if !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "DPoP-Nonce") {
		t.Fatalf("Expose-Headers %q", resp.Header.Get("Access-Control-Expose-Headers"))
	}
}

// BenchmarkDPoPTokenProof is what a proof adds to a token request at the
// AS: parsing, one signature verification with the proof's jwk, the
// thumbprint, and the jti recorded in the (memory) one-time-id store.
func BenchmarkDPoPTokenProof(b *testing.B) {
	h := newHarness(b, nil)
	k, err := dpop.GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	proofs := make([]*http.Request, b.N)
	for i := range proofs {
		p, _ := k.Proof("POST", h.issuer+"/token", "", "")
		proofs[i] = httptest.NewRequest("POST", "/token", nil)
		proofs[i].Header.Set("DPoP", p)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx, err := h.as.checkTokenProof(context.Background(), proofs[i])
		if err != nil || dpopKeyFrom(ctx) == "" {
			b.Fatal(err)
		}
	}
}

// Two instances on one PostgreSQL database (one issuer, one secret): a
// proof used at one is refused at the other (the jti is kept in the shared
// one-time-id store), and a nonce issued by one is accepted by the other.
func TestDPoPReplayAndNoncesSharedByInstances(t *testing.T) {
	store := openPostgres(t, 8)
	a := newHarness(t, func(c *Config) { c.Store = store; c.DPoP.Nonce = true })
	b := newHarness(t, func(c *Config) {
		c.Store = store
		c.DPoP.Nonce = true
		c.Issuer = a.issuer // the same issuer behind a load balancer
	})
	k := newKey(t)
	resp, _ := a.postProof(ccForm, "ci-bot", ciSecret, a.proof(k, ""))
	nonce := resp.Header.Get("DPoP-Nonce")
	if nonce == "" {
		t.Fatal("no nonce")
	}
	p := a.proof(k, nonce)
	if resp, body := a.postProof(ccForm, "ci-bot", ciSecret, p); resp.StatusCode != 200 {
		t.Fatalf("instance a: %d %v", resp.StatusCode, body)
	}
	// b serves the same issuer: send the same proof to it.
	resp, body := b.postProof(ccForm, "ci-bot", ciSecret, p)
	wantDPoPError(t, resp, body, "invalid_dpop_proof")
	if d, _ := body["error_description"].(string); !strings.Contains(d, "used before") {
		t.Fatalf("refused for another reason: %v", body)
	}
	// A fresh proof with a's nonce is accepted by b.
	if resp, body := b.postProof(ccForm, "ci-bot", ciSecret, a.proof(k, nonce)); resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("instance b with a's nonce: %d %v", resp.StatusCode, body)
	}
}

// RFC 9449 §5: DPoP applies to every grant, token exchange included.
func TestDPoPTokenExchangeBindsToken(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")
	k := newKey(t)
	resp, body := h.postProof(exchangeForm(user.AccessToken, otherURI), "mcp-server", mcpSrvSecret, h.proof(k, ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	_, c := h.claims(body["access_token"].(string))
	if cnf, _ := c["cnf"].(map[string]any); cnf["jkt"] != k.Thumbprint() {
		t.Fatalf("cnf %v", c["cnf"])
	}
	resp, body = h.postProof(exchangeForm(user.AccessToken, otherURI), "mcp-server", mcpSrvSecret, "garbage")
	wantDPoPError(t, resp, body, "invalid_dpop_proof")
}

// The jwt-bearer grant (workload identity) binds its token like every other.
func TestDPoPJWTBearerBindsToken(t *testing.T) {
	w := newFedWorld(t, nil)
	k := newKey(t)
	a := w.wlKey.mint(t, "", w.workloadJWT("conformance-workload"))
	resp, body := w.postProof(jwtBearer(a, "resource", mcpURI), "", "", w.proof(k, ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	_, c := w.claims(body["access_token"].(string))
	if cnf, _ := c["cnf"].(map[string]any); cnf["jkt"] != k.Thumbprint() {
		t.Fatalf("cnf %v", c["cnf"])
	}
}
