package rsmiddleware

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/metadata"
)

// publicURL is the MCP endpoint's public URL: the test server listens on
// loopback, as a server behind a proxy would.
const publicURL = testResource

func newDPoP(t testing.TB, mod func(*DPoPConfig)) *DPoP {
	t.Helper()
	cfg := DPoPConfig{PublicURL: publicURL, JTIs: dpop.NewMemoryJTIs(0)}
	if mod != nil {
		mod(&cfg)
	}
	d, err := NewDPoP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func signer(t testing.TB) *dpop.Signer {
	t.Helper()
	s, err := dpop.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// boundToken mints a token bound to k (cnf.jkt).
func (ks *keyServer) boundToken(k *dpop.Signer) string {
	c := ks.claims()
	c["cnf"] = map[string]any{"jkt": k.Thumbprint()}
	return ks.mint(c)
}

func call(t *testing.T, f *rsFixture, method, auth string, proofs ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func mustProof(t *testing.T, k *dpop.Signer, method, uri, token string) string {
	t.Helper()
	p, err := k.Proof(method, uri, token, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDPoPMiddlewareAcceptsBoundToken(t *testing.T) {
	f := newRS(t, func(c *MiddlewareConfig) { c.DPoP = newDPoP(t, nil) })
	k := signer(t)
	tok := f.ks.boundToken(k)
	resp := call(t, f, "POST", "DPoP "+tok, mustProof(t, k, "POST", publicURL, tok))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d %v", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}
	// The scheme is case-insensitive; the query of htu is ignored.
	resp = call(t, f, "POST", "dpop "+tok, mustProof(t, k, "POST", publicURL+"?x=1", tok))
	if resp.StatusCode != 200 {
		t.Fatalf("lower-case scheme: status %d %v", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}
	// A Bearer token still works beside DPoP.
	if resp := call(t, f, "POST", "Bearer "+f.ks.mint(f.ks.claims())); resp.StatusCode != 200 {
		t.Fatalf("Bearer: status %d", resp.StatusCode)
	}
}

func TestDPoPMiddlewareRefusals(t *testing.T) {
	f := newRS(t, func(c *MiddlewareConfig) { c.DPoP = newDPoP(t, nil) })
	k, other := signer(t), signer(t)
	tok := f.ks.boundToken(k)
	plain := f.ks.mint(f.ks.claims())
	replayed := mustProof(t, k, "POST", publicURL, tok)
	if resp := call(t, f, "POST", "DPoP "+tok, replayed); resp.StatusCode != 200 {
		t.Fatalf("first use: %d", resp.StatusCode)
	}
	k.SetClock(func() time.Time { return time.Now().Add(-6 * time.Minute) })
	stale := mustProof(t, k, "POST", publicURL, tok)
	k.SetClock(time.Now)
	cases := []struct {
		name, auth string
		proofs     []string
		scheme     string // the challenge carrying the error
		code       string
	}{
		{"bound token as Bearer", "Bearer " + tok, nil, "Bearer", ErrCodeInvalidToken},
		{"bound token as Bearer with a proof", "Bearer " + tok, []string{mustProof(t, k, "POST", publicURL, tok)}, "Bearer", ErrCodeInvalidToken},
		{"no proof", "DPoP " + tok, nil, "DPoP", ErrCodeInvalidDPoPProof},
		{"two proofs", "DPoP " + tok, []string{mustProof(t, k, "POST", publicURL, tok), mustProof(t, k, "POST", publicURL, tok)}, "DPoP", ErrCodeInvalidDPoPProof},
		{"replayed proof", "DPoP " + tok, []string{replayed}, "DPoP", ErrCodeInvalidDPoPProof},
		{"wrong ath", "DPoP " + tok, []string{mustProof(t, k, "POST", publicURL, plain)}, "DPoP", ErrCodeInvalidDPoPProof},
		{"no ath", "DPoP " + tok, []string{mustProof(t, k, "POST", publicURL, "")}, "DPoP", ErrCodeInvalidDPoPProof},
		{"wrong htu", "DPoP " + tok, []string{mustProof(t, k, "POST", f.srv.URL+"/mcp", tok)}, "DPoP", ErrCodeInvalidDPoPProof},
		{"wrong htm", "DPoP " + tok, []string{mustProof(t, k, "GET", publicURL, tok)}, "DPoP", ErrCodeInvalidDPoPProof},
		{"stale iat", "DPoP " + tok, []string{stale}, "DPoP", ErrCodeInvalidDPoPProof},
		{"other key", "DPoP " + tok, []string{mustProof(t, other, "POST", publicURL, tok)}, "DPoP", ErrCodeInvalidToken},
		{"unbound token as DPoP", "DPoP " + plain, []string{mustProof(t, k, "POST", publicURL, plain)}, "DPoP", ErrCodeInvalidToken},
		{"bad token", "DPoP " + tok + "x", []string{mustProof(t, k, "POST", publicURL, tok+"x")}, "DPoP", ErrCodeInvalidToken},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := call(t, f, "POST", c.auth, c.proofs...)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d", resp.StatusCode)
			}
			chs := resp.Header.Values("WWW-Authenticate")
			if len(chs) != 2 || !strings.HasPrefix(chs[0], c.scheme+" ") {
				t.Fatalf("challenges %q, want %s first", chs, c.scheme)
			}
			if !strings.Contains(chs[0], `error="`+c.code+`"`) || strings.Contains(chs[1], "error=") {
				t.Fatalf("challenges %q, want error %s in the first only", chs, c.code)
			}
			for _, ch := range chs {
				if !strings.Contains(ch, `resource_metadata="`+f.prm+`"`) {
					t.Fatalf("challenge without resource_metadata: %q", ch)
				}
			}
		})
	}
}

func TestDPoPMiddlewareChallengeWithoutCredentials(t *testing.T) {
	f := newRS(t, func(c *MiddlewareConfig) { c.DPoP = newDPoP(t, nil) })
	resp := call(t, f, "POST", "")
	chs := resp.Header.Values("WWW-Authenticate")
	if resp.StatusCode != 401 || len(chs) != 2 || !strings.HasPrefix(chs[0], "Bearer ") || !strings.HasPrefix(chs[1], `DPoP algs="ES256 `) {
		t.Fatalf("status %d challenges %q", resp.StatusCode, chs)
	}
	for _, ch := range chs {
		if strings.Contains(ch, "error") {
			t.Fatalf("error in a challenge to a request without credentials: %q", ch)
		}
	}
}

func TestDPoPRequiredRefusesBearer(t *testing.T) {
	f := newRS(t, func(c *MiddlewareConfig) { c.DPoP = newDPoP(t, func(c *DPoPConfig) { c.Required = true }) })
	resp := call(t, f, "POST", "Bearer "+f.ks.mint(f.ks.claims()))
	chs := resp.Header.Values("WWW-Authenticate")
	if resp.StatusCode != 401 || len(chs) != 1 || !strings.HasPrefix(chs[0], "DPoP ") || !strings.Contains(chs[0], `error="invalid_token"`) {
		t.Fatalf("status %d challenges %q", resp.StatusCode, chs)
	}
	k := signer(t)
	tok := f.ks.boundToken(k)
	if resp := call(t, f, "POST", "DPoP "+tok, mustProof(t, k, "POST", publicURL, tok)); resp.StatusCode != 200 {
		t.Fatalf("bound token: %d", resp.StatusCode)
	}
}

// Without DPoP configured the Bearer-only middleware still refuses a
// DPoP-bound token (RFC 9449 §7.2) and answers the DPoP scheme like any
// unknown one.
func TestBearerOnlyMiddlewareRefusesBoundToken(t *testing.T) {
	f := newRS(t, func(c *MiddlewareConfig) { c.BearerOnly = true })
	k := signer(t)
	tok := f.ks.boundToken(k)
	resp := call(t, f, "POST", "Bearer "+tok)
	chs := resp.Header.Values("WWW-Authenticate")
	if resp.StatusCode != 401 || len(chs) != 1 || !strings.Contains(chs[0], `error="invalid_token"`) {
		t.Fatalf("status %d challenges %q", resp.StatusCode, chs)
	}
	resp = call(t, f, "POST", "DPoP "+tok, mustProof(t, k, "POST", publicURL, tok))
	chs = resp.Header.Values("WWW-Authenticate")
	if resp.StatusCode != 401 || len(chs) != 1 || strings.Contains(chs[0], "error") {
		t.Fatalf("DPoP scheme: status %d challenges %q", resp.StatusCode, chs)
	}
}

// TestMiddlewareAcceptsDPoPByDefault: without DPoP configured, a
// DPoP-bound token with a proof for the Verifier's resource passes; sent
// as Bearer it is still refused (RFC 9449 §7.2), and so is a proof for
// another URL.
func TestMiddlewareAcceptsDPoPByDefault(t *testing.T) {
	f := newRS(t, nil)
	k := signer(t)
	tok := f.ks.boundToken(k)
	if resp := call(t, f, "POST", "DPoP "+tok, mustProof(t, k, "POST", publicURL, tok)); resp.StatusCode != 200 {
		t.Fatalf("DPoP scheme: %d %q", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}
	if resp := call(t, f, "POST", "Bearer "+tok); resp.StatusCode != 401 {
		t.Fatalf("a bound token as Bearer: %d", resp.StatusCode)
	}
	if resp := call(t, f, "POST", "DPoP "+tok, mustProof(t, k, "POST", "https://elsewhere.example/mcp", tok)); resp.StatusCode != 401 {
		t.Fatalf("a proof for another URL: %d", resp.StatusCode)
	}
	// A proof is usable once.
	proof := mustProof(t, k, "POST", publicURL, tok)
	if resp := call(t, f, "POST", "DPoP "+tok, proof); resp.StatusCode != 200 {
		t.Fatalf("first use: %d", resp.StatusCode)
	}
	if resp := call(t, f, "POST", "DPoP "+tok, proof); resp.StatusCode != 401 {
		t.Fatalf("a replayed proof: %d", resp.StatusCode)
	}
	// Bearer tokens pass as before.
	if resp := call(t, f, "POST", "Bearer "+f.ks.mint(f.ks.claims())); resp.StatusCode != 200 {
		t.Fatalf("Bearer: %d", resp.StatusCode)
	}
}

func TestDPoPIntrospectedBinding(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) {
		c.Introspection = &ClientCredentials{ClientID: rsClientID, ClientSecret: rsClientSecret}
	})
	k := signer(t)
	tok := ks.boundToken(k)
	p, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.DPoPThumbprint != k.Thumbprint() {
		t.Fatalf("introspected thumbprint %q", p.DPoPThumbprint)
	}
}

func TestDPoPPRM(t *testing.T) {
	doc, err := NewProtectedResourceMetadata(testResource, []string{"https://as.example"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	newDPoP(t, func(c *DPoPConfig) { c.Required = true; c.Algs = []string{"ES256", "HS256", "none"} }).AddToPRM(&doc)
	b, _ := json.Marshal(doc)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	algs, _ := m["dpop_signing_alg_values_supported"].([]any)
	if len(algs) != 1 || algs[0] != "ES256" || m["dpop_bound_access_tokens_required"] != true {
		t.Fatalf("PRM %s", b)
	}
	doc = metadata.ProtectedResourceMetadata{}
	newDPoP(t, nil).AddToPRM(&doc)
	if doc.DPoPBoundAccessTokensRequired || len(doc.DPoPSigningAlgValuesSupported) == 0 {
		t.Fatalf("PRM %+v", doc)
	}
	if _, err := NewDPoP(DPoPConfig{PublicURL: "/mcp"}); err == nil {
		t.Fatal("relative PublicURL accepted")
	}
}

func TestParseAuthorizationScheme(t *testing.T) {
	for _, c := range []struct{ in, scheme, tok string }{
		{"Bearer abc", SchemeBearer, "abc"}, {"DPoP abc", SchemeDPoP, "abc"}, {"dpop abc", SchemeDPoP, "abc"},
	} {
		s, tok, err := ParseAuthorizationScheme(c.in)
		if err != nil || s != c.scheme || tok != c.tok {
			t.Errorf("%q: %q %q %v", c.in, s, tok, err)
		}
	}
	for _, in := range []string{"DPoP", "DPoP ", "DPoP a b", "DPoP a,b"} {
		if _, _, err := ParseAuthorizationScheme(in); err != ErrMalformedAuthorization {
			t.Errorf("%q: %v", in, err)
		}
	}
	if _, _, err := ParseAuthorizationScheme("Basic abc"); err != ErrNoToken {
		t.Errorf("Basic: %v", err)
	}
}

func TestDPoPMiddlewareNonces(t *testing.T) {
	nonces, err := dpop.NewNonces([]byte("0123456789abcdef0123456789abcdef"), 0)
	if err != nil {
		t.Fatal(err)
	}
	f := newRS(t, func(c *MiddlewareConfig) { c.DPoP = newDPoP(t, func(c *DPoPConfig) { c.Nonces = nonces }) })
	k := signer(t)
	tok := f.ks.boundToken(k)
	resp := call(t, f, "POST", "DPoP "+tok, mustProof(t, k, "POST", publicURL, tok))
	chs := resp.Header.Values("WWW-Authenticate")
	nonce := resp.Header.Values("DPoP-Nonce")
	if resp.StatusCode != 401 || len(chs) == 0 || !strings.HasPrefix(chs[0], "DPoP ") || !strings.Contains(chs[0], `error="use_dpop_nonce"`) ||
		len(nonce) != 1 || nonce[0] == "" || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "DPoP-Nonce") {
		t.Fatalf("status %d challenges %q nonce %q expose %q", resp.StatusCode, chs, nonce, resp.Header.Get("Access-Control-Expose-Headers"))
	}
	withNonce, err := k.Proof("POST", publicURL, tok, nonce[0])
	if err != nil {
		t.Fatal(err)
	}
	if resp := call(t, f, "POST", "DPoP "+tok, withNonce); resp.StatusCode != 200 {
		t.Fatalf("with the nonce: %d %q", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}
	forged, _ := k.Proof("POST", publicURL, tok, "forged")
	if resp := call(t, f, "POST", "DPoP "+tok, forged); resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "use_dpop_nonce") {
		t.Fatalf("forged nonce: %d %q", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}
}

// TestDPoPNonceWithoutNonces: without Nonces (and on a nil DPoP) Nonce is
// empty, so no DPoP-Nonce header is ever sent.
func TestDPoPNonceWithoutNonces(t *testing.T) {
	d, err := NewDPoP(DPoPConfig{PublicURL: testResource})
	if err != nil {
		t.Fatal(err)
	}
	var none *DPoP
	if got, gotNil := d.Nonce(), none.Nonce(); got != "" || gotNil != "" {
		t.Fatalf("Nonce() = %q, nil DPoP %q; want both empty", got, gotNil)
	}
}
