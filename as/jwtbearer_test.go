package as

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpauth/mcpauth/internal/safehttp"
	"github.com/mcpauth/mcpauth/storage"
)

const idpIssuer = "https://idp.example"

// keyServer is an https issuer: OpenID Connect Discovery for itself (the
// workload issuer) and two JWK Sets, /wl-jwks and /idp-jwks, whose keys a
// test may replace. It counts fetches of each path.
type keyServer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	sets    map[string]jose.JSONWebKeySet
	fetches map[string]*atomic.Int32
	// down makes every path answer 503 (still counted); otherIssuer makes
	// the discovery document name another issuer.
	down, otherIssuer atomic.Bool
}

func newKeyServer(t testing.TB) *keyServer {
	ks := &keyServer{sets: map[string]jose.JSONWebKeySet{}, fetches: map[string]*atomic.Int32{
		"/.well-known/openid-configuration": {}, "/wl-jwks": {}, "/idp-jwks": {}}}
	ks.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := ks.fetches[r.URL.Path]
		if n == nil {
			http.NotFound(w, r)
			return
		}
		n.Add(1)
		if ks.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/.well-known/openid-configuration" {
			iss := ks.srv.URL
			if ks.otherIssuer.Load() {
				iss = "https://evil.example"
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": ks.srv.URL + "/wl-jwks"})
			return
		}
		ks.mu.Lock()
		set := ks.sets[r.URL.Path]
		ks.mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(ks.srv.Close)
	return ks
}

func (ks *keyServer) publish(path string, keys ...jose.JSONWebKey) {
	ks.mu.Lock()
	ks.sets[path] = jose.JSONWebKeySet{Keys: keys}
	ks.mu.Unlock()
}

// client is the SSRF-safe fetcher the server uses, trusting the test
// server's certificate and allowed to reach loopback.
func (ks *keyServer) client(t testing.TB) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(ks.srv.Certificate())
	c, err := safehttp.NewClient(safehttp.Config{Allow: []string{"127.0.0.0/8"}, RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type idpKeyPair struct {
	priv *ecdsa.PrivateKey
	kid  string
}

func newIdPKey(t testing.TB, kid string) idpKeyPair {
	k, err := ecdsaKey()
	if err != nil {
		t.Fatal(err)
	}
	return idpKeyPair{k, kid}
}

func (k idpKeyPair) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: "ES256", Use: "sig"}
}

// mint signs claims with k and the JOSE typ (none when empty).
func (k idpKeyPair) mint(t testing.TB, typ string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithHeader("kid", k.kid)
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.priv}, opts)
	if err != nil {
		t.Fatal(err)
	}
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

const xaaSecret = "xaa-client-secret-0123456789"

type fedWorld struct {
	*harness
	ks        *keyServer
	idpKey    idpKeyPair
	wlKey     idpKeyPair
	spiffeKey idpKeyPair
	n         atomic.Int32
}

func (w *fedWorld) jti() string { return fmt.Sprintf("jti-%d", w.n.Add(1)) }

func newFedWorld(t testing.TB, mod func(*Config)) *fedWorld {
	ks := newKeyServer(t)
	w := &fedWorld{ks: ks, idpKey: newIdPKey(t, "idp-1"), wlKey: newIdPKey(t, "wl-1"), spiffeKey: newIdPKey(t, "sp-1")}
	ks.publish("/idp-jwks", w.idpKey.public())
	ks.publish("/wl-jwks", w.wlKey.public())
	spiffeJWKS, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{w.spiffeKey.public()}})
	w.harness = newHarness(t, func(c *Config) {
		c.FederationHTTPClient = ks.client(t)
		c.Clients = append(c.Clients, Client{ID: "xaa-client", Secret: xaaSecret, GrantTypes: []string{GrantTypeJWTBearer}})
		c.EnterpriseIdPs = []EnterpriseIdP{{Issuer: idpIssuer, JWKSURI: ks.srv.URL + "/idp-jwks", Clients: []string{"xaa-client", "demo-app"}}}
		c.WorkloadIssuers = []WorkloadIssuer{
			{Issuer: ks.srv.URL, Rules: []WorkloadRule{
				{Subject: "system:serviceaccount:prod:*", Claims: map[string]string{"ns": "prod"}, ClientID: "wl-prod", Resources: []string{mcpURI}, Scopes: []string{"mcp:tools"}},
				{Subject: "conformance-workload", ClientID: "conformance-wif", Resources: []string{mcpURI, otherURI}, Scopes: []string{"mcp:tools", "mcp:admin", "other:read"}},
			}},
			{Issuer: "spiffe://example.org", JWKS: spiffeJWKS, Rules: []WorkloadRule{
				{Subject: "spiffe://example.org/ns/prod/sa/*", ClientID: "spiffe-prod", Resources: []string{mcpURI}, Scopes: []string{"mcp:tools"}},
			}},
		}
		if mod != nil {
			mod(c)
		}
	})
	return w
}

// idJAG returns the claims of a valid ID-JAG for xaa-client, as the
// conformance IdP makes them (no scope claim, 5 minutes).
func (w *fedWorld) idJAG() map[string]any {
	now := time.Now()
	return map[string]any{"iss": idpIssuer, "sub": "alice-at-idp", "aud": w.issuer, "client_id": "xaa-client",
		"resource": mcpURI, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": w.jti()}
}

func (w *fedWorld) workloadJWT(sub string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": w.ks.srv.URL, "sub": sub, "aud": w.issuer, "iat": now.Unix(),
		"exp": now.Add(5 * time.Minute).Unix(), "jti": w.jti()}
}

func jwtBearer(assertion string, kv ...string) url.Values {
	f := url.Values{"grant_type": {GrantTypeJWTBearer}, "assertion": {assertion}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Add(kv[i], kv[i+1])
	}
	return f
}

func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// wantError checks an OAuth error answer with no token in it.
func wantError(t *testing.T, resp *http.Response, body map[string]any, status int, code string) {
	t.Helper()
	if resp.StatusCode != status || body["error"] != code || body["access_token"] != nil {
		t.Errorf("%d %v; want %d %s", resp.StatusCode, body, status, code)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q", resp.Header.Get("Cache-Control"))
	}
}

func TestIDJAGRedeemed(t *testing.T) {
	w := newFedWorld(t, nil)
	a := w.idpKey.mint(t, typIDJAG, w.idJAG())
	resp, body := w.post("/token", jwtBearer(a, "scope", "mcp:tools"), "xaa-client", xaaSecret)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	if body["refresh_token"] != nil || body["scope"] != "mcp:tools" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("response %v, Cache-Control %q", body, resp.Header.Get("Cache-Control"))
	}
	if exp, _ := body["expires_in"].(float64); exp <= 0 || exp > 300 {
		t.Errorf("expires_in %v: want within the assertion's 5 minutes", body["expires_in"])
	}
	typ, c := w.claims(body["access_token"].(string))
	if typ != "at+jwt" || c["sub"] != idpIssuer+"#alice-at-idp" || c["aud"] != mcpURI || c["client_id"] != "xaa-client" || c["scope"] != "mcp:tools" {
		t.Errorf("typ %s claims %v", typ, c)
	}
	// The same ID-JAG again is a replay.
	resp, body = w.post("/token", jwtBearer(a, "scope", "mcp:tools"), "xaa-client", xaaSecret)
	wantError(t, resp, body, 400, "invalid_grant")

	// The token introspects as active for the resource server, with the
	// federated subject although no local account has it.
	_, tok := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, w.idJAG())), "xaa-client", xaaSecret)
	_, in := w.post("/introspect", url.Values{"token": {tok["access_token"].(string)}}, "rs", rsSecret)
	if in["active"] != true || in["sub"] != idpIssuer+"#alice-at-idp" || in["client_id"] != "xaa-client" {
		t.Errorf("introspection %v", in)
	}
}

// TestIDJAGNeedsTheGrantType: the authenticated client of an ID-JAG must
// have the jwt-bearer grant among its grant types (RFC 6749 §5.2), whether
// it is configured or registered; fails if that check is dropped.
func TestIDJAGNeedsTheGrantType(t *testing.T) {
	const regSecret = "registered-secret-0123456789abcdef"
	w := newFedWorld(t, func(c *Config) {
		c.Clients = append(c.Clients, Client{ID: "xaa-cc", Secret: xaaSecret, GrantTypes: []string{"client_credentials"}})
		c.EnterpriseIdPs[0].Clients = append(c.EnterpriseIdPs[0].Clients, "xaa-cc", "reg-cc", "reg-bearer")
	})
	for id, grants := range map[string][]string{"reg-cc": {"client_credentials"}, "reg-bearer": {GrantTypeJWTBearer}} {
		if err := w.store.CreateClient(context.Background(), &storage.Client{
			ID: id, SecretHash: w.as.clients.hasher.Hash(regSecret), TokenEndpointAuthMethod: authSecretBasic,
			GrantTypes: grants, Source: "dcr", CreatedAt: w.clock.Now(), UpdatedAt: w.clock.Now(),
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, id, secret string
		status           int
		code             string
	}{
		{"a configured client without the grant", "xaa-cc", xaaSecret, 400, "unauthorized_client"},
		{"a registered client without the grant", "reg-cc", regSecret, 400, "unauthorized_client"},
		{"a configured client with the grant", "xaa-client", xaaSecret, 200, ""},
		{"a registered client with the grant", "reg-bearer", regSecret, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "client_id", tc.id))
			resp, body := w.post("/token", jwtBearer(a), tc.id, tc.secret)
			if tc.status != 200 {
				wantError(t, resp, body, tc.status, tc.code)
				return
			}
			if resp.StatusCode != 200 || body["access_token"] == nil {
				t.Fatalf("%d %v", resp.StatusCode, body)
			}
			if _, c := w.claims(body["access_token"].(string)); c["client_id"] != tc.id {
				t.Errorf("claims %v", c)
			}
		})
	}
}

func TestIDJAGScopesAreTheIntersection(t *testing.T) {
	w := newFedWorld(t, nil)
	cases := []struct {
		name, claim, request, want string
	}{
		{"no claim, the request", "", "mcp:admin", "mcp:admin"},
		{"claim and request", "mcp:tools", "mcp:tools mcp:admin", "mcp:tools"},
		{"claim only", "mcp:admin", "", "mcp:admin"},
		{"claim beyond the resource", "mcp:tools other:read", "", "mcp:tools"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := w.idJAG()
			if tc.claim != "" {
				cl["scope"] = tc.claim
			}
			resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, cl), "scope", tc.request), "xaa-client", xaaSecret)
			if resp.StatusCode != 200 || body["scope"] != tc.want {
				t.Errorf("%d %v; want scope %q", resp.StatusCode, body, tc.want)
			}
		})
	}
	resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "scope", "mcp:admin")), "scope", "mcp:tools"), "xaa-client", xaaSecret)
	wantError(t, resp, body, 400, "invalid_scope")
}

func TestIDJAGChecks(t *testing.T) {
	w := newFedWorld(t, nil)
	other := newIdPKey(t, "idp-1") // same kid, key not the IdP's
	now := time.Now()
	cases := []struct {
		name       string
		assertion  func() string
		user, pass string
		extra      []string
		status     int
		code       string
	}{
		{"untrusted issuer", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "iss", "https://evil.example")) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"signature by another key", func() string { return other.mint(t, typIDJAG, w.idJAG()) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"aud another server", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "aud", "https://other.example")) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"aud the token endpoint", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "aud", w.issuer+"/token")) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"aud with a second value", func() string {
			return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "aud", []string{w.issuer, "https://other.example"}))
		}, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"client_id of another client", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "client_id", "web-app")) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"no client_id", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "client_id", nil)) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"resource not configured", func() string {
			return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "resource", "https://unknown.example/mcp"))
		}, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"request resource differs from the claim", func() string { return w.idpKey.mint(t, typIDJAG, w.idJAG()) }, "xaa-client", xaaSecret, []string{"resource", otherURI}, 400, "invalid_target"},
		{"expired", func() string {
			return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "iat", now.Add(-10*time.Minute).Unix(), "exp", now.Add(-2*time.Minute).Unix()))
		}, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"no exp", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "exp", nil)) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"no iat", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "iat", nil)) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"iat in the future", func() string {
			return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "iat", now.Add(5*time.Minute).Unix(), "exp", now.Add(10*time.Minute).Unix()))
		}, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"nbf in the future", func() string {
			return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "nbf", now.Add(3*time.Minute).Unix()))
		}, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"lives too long", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "exp", now.Add(2*time.Hour).Unix())) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"no jti", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "jti", nil)) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"no sub", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "sub", nil)) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"cnf.jkt without a DPoP proof", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "cnf", map[string]any{"jkt": "x"})) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"cnf other than jkt", func() string {
			return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "cnf", map[string]any{"x5t#S256": "x"}))
		}, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"authorization_details", func() string {
			return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "authorization_details", []any{map[string]any{"type": "x"}}))
		}, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"typ JWT: not an ID-JAG, and the IdP is no workload issuer", func() string { return w.idpKey.mint(t, "JWT", w.idJAG()) }, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
		{"no client authentication", func() string { return w.idpKey.mint(t, typIDJAG, w.idJAG()) }, "", "", nil, 401, "invalid_client"},
		{"a wrong client secret", func() string { return w.idpKey.mint(t, typIDJAG, w.idJAG()) }, "xaa-client", "wrong-secret-0123456789", nil, 401, "invalid_client"},
		{"a client the IdP does not list", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "client_id", "ci-bot")) }, "ci-bot", ciSecret, nil, 400, "unauthorized_client"},
		{"a public client", func() string { return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "client_id", "demo-app")) }, "", "", []string{"client_id", "demo-app"}, 400, "unauthorized_client"},
		{"alg none", func() string {
			return "eyJhbGciOiJub25lIiwidHlwIjoib2F1dGgtaWQtamFnK2p3dCJ9." + b64json(w.idJAG()) + "."
		}, "xaa-client", xaaSecret, nil, 400, "invalid_grant"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := w.post("/token", jwtBearer(tc.assertion(), tc.extra...), tc.user, tc.pass)
			wantError(t, resp, body, tc.status, tc.code)
		})
	}
	t.Run("missing assertion", func(t *testing.T) {
		resp, body := w.post("/token", url.Values{"grant_type": {GrantTypeJWTBearer}}, "xaa-client", xaaSecret)
		wantError(t, resp, body, 400, "invalid_request")
	})
	// The refusals consumed nothing: a valid ID-JAG still works, also with
	// aud the issuer plus one trailing slash, in a one-element array.
	resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "aud", []string{w.issuer + "/"}))), "xaa-client", xaaSecret)
	if resp.StatusCode != 200 {
		t.Errorf("valid ID-JAG after the refusals: %d %v", resp.StatusCode, body)
	}
}

func b64json(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestIDJAGLinkByEmail(t *testing.T) {
	w := newFedWorld(t, func(c *Config) { c.EnterpriseIdPs[0].LinkByEmail = true })
	resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "email", "alice"))), "xaa-client", xaaSecret)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	if _, c := w.claims(body["access_token"].(string)); c["sub"] != "alice" {
		t.Errorf("sub %v; want the local account alice", c["sub"])
	}
	resp, body = w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "email", "mallory"))), "xaa-client", xaaSecret)
	wantError(t, resp, body, 400, "invalid_grant")
	resp, body = w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, w.idJAG())), "xaa-client", xaaSecret)
	wantError(t, resp, body, 400, "invalid_grant")
}

// link_by_email links an ID-JAG to a local account only: an email that
// names a person who signed in through an upstream provider (their
// subject "<upstream>:<sub>", active while that upstream is configured) is
// no local account, and gets no token for that person, which would also
// escape the cap of their claim mapping.
func TestIDJAGLinkByEmailNeverLinksAnUpstreamPerson(t *testing.T) {
	w := newFedWorld(t, func(c *Config) {
		c.EnterpriseIdPs[0].LinkByEmail = true
		c.UpstreamIDs = []string{"corp"}
	})
	if _, err := w.store.RecordLogin(context.Background(), &storage.User{Subject: "corp:u-carol", Upstream: "corp", UpstreamSubject: "u-carol"}); err != nil {
		t.Fatal(err)
	}
	resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "email", "corp:u-carol"))), "xaa-client", xaaSecret)
	wantError(t, resp, body, 400, "invalid_grant")
	// A local account is still linked.
	if resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "email", "alice"))), "xaa-client", xaaSecret); resp.StatusCode != 200 {
		t.Fatalf("local alice: %d %v", resp.StatusCode, body)
	}
}

func TestIDJAGKeyRotationAndRefetchLimit(t *testing.T) {
	w := newFedWorld(t, nil)
	if resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, w.idJAG())), "xaa-client", xaaSecret); resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	fetches := w.ks.fetches["/idp-jwks"]
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches; want 1", n)
	}
	// Unknown kids: at most one fetch per interval, whatever their number.
	stranger := newIdPKey(t, "unknown-kid")
	for range 5 {
		resp, body := w.post("/token", jwtBearer(stranger.mint(t, typIDJAG, w.idJAG())), "xaa-client", xaaSecret)
		wantError(t, resp, body, 400, "invalid_grant")
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches after unknown kids within the interval; want 1", n)
	}
	// The IdP rotates; after the interval the new kid is fetched.
	next := newIdPKey(t, "idp-2")
	w.ks.publish("/idp-jwks", next.public())
	w.clock.Advance(issuerKeysMinRefresh)
	resp, body := w.post("/token", jwtBearer(next.mint(t, typIDJAG, w.idJAG())), "xaa-client", xaaSecret)
	if resp.StatusCode != 200 || fetches.Load() != 2 {
		t.Errorf("rotated key: %d %v, %d fetches", resp.StatusCode, body, fetches.Load())
	}
	// The old key is gone from the set: its ID-JAGs are refused.
	resp, body = w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, w.idJAG())), "xaa-client", xaaSecret)
	wantError(t, resp, body, 400, "invalid_grant")
}

func TestJWTBearerMetadata(t *testing.T) {
	w := newFedWorld(t, nil)
	md := w.as.Metadata()
	if !slices.Contains(md.GrantTypesSupported, GrantTypeJWTBearer) || !slices.Equal(md.AuthorizationGrantProfilesSupported, []string{GrantProfileIDJAG}) {
		t.Errorf("grants %v profiles %v", md.GrantTypesSupported, md.AuthorizationGrantProfilesSupported)
	}
	doc, _ := json.Marshal(md)
	if strings.Contains(string(doc), idpIssuer) {
		t.Error("the metadata discloses a trusted IdP")
	}
	// Workload issuers only: the grant, not the ID-JAG profile.
	wl := newFedWorld(t, func(c *Config) { c.EnterpriseIdPs = nil })
	if md := wl.as.Metadata(); !slices.Contains(md.GrantTypesSupported, GrantTypeJWTBearer) || md.AuthorizationGrantProfilesSupported != nil {
		t.Errorf("workload only: grants %v profiles %v", md.GrantTypesSupported, md.AuthorizationGrantProfilesSupported)
	}
	// Neither: not advertised, and refused as unsupported.
	h := newHarness(t, nil)
	if md := h.as.Metadata(); slices.Contains(md.GrantTypesSupported, GrantTypeJWTBearer) || md.AuthorizationGrantProfilesSupported != nil {
		t.Errorf("unconfigured: grants %v profiles %v", md.GrantTypesSupported, md.AuthorizationGrantProfilesSupported)
	}
	resp, body := h.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, w.idJAG())), "ci-bot", ciSecret)
	wantError(t, resp, body, 400, "unsupported_grant_type")
	resp, body = h.post("/token", jwtBearer("a.b.c"), "", "")
	wantError(t, resp, body, 400, "unsupported_grant_type")
}

func TestWorkloadTokenExchanged(t *testing.T) {
	w := newFedWorld(t, nil)
	a := w.wlKey.mint(t, "", w.workloadJWT("conformance-workload"))
	// The conformance client sends a client_id nobody registered; it is ignored.
	resp, body := w.post("/token", jwtBearer(a, "resource", mcpURI, "client_id", "conformance-wif-workload"), "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	if body["refresh_token"] != nil || body["scope"] != "mcp:tools mcp:admin" {
		t.Errorf("response %v", body)
	}
	_, c := w.claims(body["access_token"].(string))
	if c["sub"] != w.ks.srv.URL+"#conformance-workload" || c["client_id"] != "conformance-wif" || c["aud"] != mcpURI {
		t.Errorf("claims %v", c)
	}
	if n := w.ks.fetches["/.well-known/openid-configuration"].Load(); n != 1 {
		t.Errorf("%d discovery fetches; want 1", n)
	}
	_, in := w.post("/introspect", url.Values{"token": {body["access_token"].(string)}}, "rs", rsSecret)
	if in["active"] != true || in["client_id"] != "conformance-wif" {
		t.Errorf("introspection %v", in)
	}
	// The same token again is a replay.
	resp, body = w.post("/token", jwtBearer(a), "", "")
	wantError(t, resp, body, 400, "invalid_grant")

	for _, aud := range []any{w.issuer + "/", w.issuer + "/token", []string{"https://other.example", w.issuer}} {
		resp, body := w.post("/token", jwtBearer(w.wlKey.mint(t, "", with(w.workloadJWT("conformance-workload"), "aud", aud))), "", "")
		if resp.StatusCode != 200 {
			t.Errorf("aud %v: %d %v", aud, resp.StatusCode, body)
		}
	}
	// A rule's glob and claims; the other resource of the second rule.
	resp, body = w.post("/token", jwtBearer(w.wlKey.mint(t, "", with(w.workloadJWT("system:serviceaccount:prod:api"), "ns", "prod"))), "", "")
	if resp.StatusCode != 200 || body["scope"] != "mcp:tools" {
		t.Errorf("glob rule: %d %v", resp.StatusCode, body)
	} else if _, c := w.claims(body["access_token"].(string)); c["client_id"] != "wl-prod" {
		t.Errorf("glob rule client_id %v", c["client_id"])
	}
	resp, body = w.post("/token", jwtBearer(w.wlKey.mint(t, "", w.workloadJWT("conformance-workload")), "resource", otherURI), "", "")
	if resp.StatusCode != 200 || body["scope"] != "other:read" {
		t.Errorf("other resource: %d %v", resp.StatusCode, body)
	}
	// A static JWK Set for a non-https issuer (SPIFFE).
	now := time.Now()
	sp := w.spiffeKey.mint(t, "JWT", map[string]any{"iss": "spiffe://example.org", "sub": "spiffe://example.org/ns/prod/sa/api",
		"aud": []string{w.issuer}, "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix()})
	resp, body = w.post("/token", jwtBearer(sp), "", "")
	if resp.StatusCode != 200 {
		t.Errorf("spiffe: %d %v", resp.StatusCode, body)
	}
	// Without a jti, the token's hash is single use.
	resp, body = w.post("/token", jwtBearer(sp), "", "")
	wantError(t, resp, body, 400, "invalid_grant")
}

func TestWorkloadChecks(t *testing.T) {
	w := newFedWorld(t, nil)
	other := newIdPKey(t, "wl-1")
	now := time.Now()
	ok := func(kv ...any) string { return w.wlKey.mint(t, "", with(w.workloadJWT("conformance-workload"), kv...)) }
	cases := []struct {
		name      string
		assertion string
		extra     []string
		code      string
	}{
		{"expired", ok("iat", now.Add(-10*time.Minute).Unix(), "exp", now.Add(-60*time.Second-assertionSkew).Unix()), nil, "invalid_grant"},
		{"wrong audience", ok("aud", "https://wrong.example"), nil, "invalid_grant"},
		{"no audience", ok("aud", nil), nil, "invalid_grant"},
		{"malformed", "not-a-jwt", nil, "invalid_grant"},
		{"three parts of garbage", "a.b.c", nil, "invalid_grant"},
		{"untrusted issuer", ok("iss", "https://evil.example"), nil, "invalid_grant"},
		{"signature by another key", other.mint(t, "", w.workloadJWT("conformance-workload")), nil, "invalid_grant"},
		{"no iat", ok("iat", nil), nil, "invalid_grant"},
		{"too old", ok("iat", now.Add(-2*time.Hour).Unix()), nil, "invalid_grant"},
		{"no matching subject", w.wlKey.mint(t, "", w.workloadJWT("someone-else")), nil, "unauthorized_client"},
		{"two resources", ok(), []string{"resource", mcpURI, "resource", otherURI}, "invalid_target"},
		{"glob matches, claim differs", w.wlKey.mint(t, "", with(w.workloadJWT("system:serviceaccount:prod:api"), "ns", "dev")), nil, "unauthorized_client"},
		{"glob matches, claim missing", w.wlKey.mint(t, "", w.workloadJWT("system:serviceaccount:prod:api")), nil, "unauthorized_client"},
		{"glob does not match", w.wlKey.mint(t, "", with(w.workloadJWT("system:serviceaccount:dev:api"), "ns", "prod")), nil, "unauthorized_client"},
		{"scope beyond the rule", w.wlKey.mint(t, "", with(w.workloadJWT("system:serviceaccount:prod:api"), "ns", "prod")), []string{"scope", "mcp:admin"}, "invalid_scope"},
		{"resource beyond the rule", w.wlKey.mint(t, "", with(w.workloadJWT("system:serviceaccount:prod:api"), "ns", "prod")), []string{"resource", otherURI}, "invalid_target"},
		{"an ID-JAG issuer's JWT", w.idpKey.mint(t, "", with(w.idJAG(), "iss", idpIssuer)), nil, "invalid_grant"},
		{"a spiffe subject no rule admits", w.spiffeKey.mint(t, "", map[string]any{"iss": "spiffe://example.org", "sub": "spiffe://example.org/ns/dev/sa/api",
			"aud": w.issuer, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}), nil, "unauthorized_client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := w.post("/token", jwtBearer(tc.assertion, tc.extra...), "", "")
			wantError(t, resp, body, 400, tc.code)
		})
	}
	t.Run("missing assertion", func(t *testing.T) {
		resp, body := w.post("/token", url.Values{"grant_type": {GrantTypeJWTBearer}}, "", "")
		wantError(t, resp, body, 400, "invalid_request")
	})
	t.Run("a rule's client_id cannot authenticate", func(t *testing.T) {
		resp, body := w.post("/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {"conformance-wif"}}, "", "")
		wantError(t, resp, body, 401, "invalid_client")
	})
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"a", "a", true}, {"a", "ab", false}, {"*", "", true}, {"*", "anything", true},
		{"spiffe://x/ns/*/sa/api", "spiffe://x/ns/prod/sa/api", true},
		{"spiffe://x/ns/*/sa/api", "spiffe://x/ns/prod/sa/apix", false},
		{"a*b*c", "abc", true}, {"a*b*c", "aXbYc", true}, {"a*b*c", "acb", false},
		{"ab*ba", "aba", false}, {"*.prod", "x.prod", true}, {"*.prod", ".pro", false},
	}
	for _, tc := range cases {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.pattern, tc.s, got)
		}
	}
}

func FuzzJWTBearerAssertion(f *testing.F) {
	f.Add("eyJhbGciOiJFUzI1NiIsInR5cCI6Im9hdXRoLWlkLWphZytqd3QifQ.eyJpc3MiOiJodHRwczovL2lkcC5leGFtcGxlIn0.AAAA", "mcp:tools")
	f.Add("a.b.c", "")
	f.Add("", "x")
	w := newFedWorld(f, nil)
	handler := w.as.Handler()
	f.Fuzz(func(t *testing.T, assertion, scope string) {
		for _, user := range []string{"", "xaa-client"} {
			req := httptest.NewRequest(http.MethodPost, w.issuer+"/token", strings.NewReader(jwtBearer(assertion, "scope", scope).Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if user != "" {
				req.SetBasicAuth(user, xaaSecret)
			}
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			var body map[string]any
			if rec.Code >= 500 || rec.Code == 200 || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body["error"] == nil {
				t.Fatalf("status %d body %s", rec.Code, rec.Body)
			}
		}
	})
}

func TestFederationConfigRefused(t *testing.T) {
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{newIdPKey(t, "k").public()}})
	base := func() Config {
		return Config{Issuer: "https://as.example", Store: nil, Resources: []Resource{{URI: mcpURI, Scopes: []string{"mcp:tools"}}}}
	}
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"http IdP", func(c *Config) {
			c.EnterpriseIdPs = []EnterpriseIdP{{Issuer: "http://idp", JWKS: jwks, Clients: []string{"a"}}}
		}, "https URL"},
		{"IdP without keys", func(c *Config) { c.EnterpriseIdPs = []EnterpriseIdP{{Issuer: idpIssuer, Clients: []string{"a"}}} }, "JWKS or JWKSURI is required"},
		{"IdP with both", func(c *Config) {
			c.EnterpriseIdPs = []EnterpriseIdP{{Issuer: idpIssuer, JWKS: jwks, JWKSURI: "https://idp.example/jwks", Clients: []string{"a"}}}
		}, "not both"},
		{"IdP without clients", func(c *Config) { c.EnterpriseIdPs = []EnterpriseIdP{{Issuer: idpIssuer, JWKS: jwks}} }, "at least one client"},
		{"private key in JWKS", func(c *Config) {
			priv, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: newIdPKey(t, "k").priv, KeyID: "k"}}})
			c.EnterpriseIdPs = []EnterpriseIdP{{Issuer: idpIssuer, JWKS: priv, Clients: []string{"a"}}}
		}, "private"},
		{"workload spiffe issuer without JWKS", func(c *Config) {
			c.WorkloadIssuers = []WorkloadIssuer{{Issuer: "spiffe://x", Rules: []WorkloadRule{{Subject: "*", ClientID: "w", Resources: []string{mcpURI}, Scopes: []string{"mcp:tools"}}}}}
		}, "https URL unless JWKS"},
		{"workload without rules", func(c *Config) { c.WorkloadIssuers = []WorkloadIssuer{{Issuer: "https://wl.example"}} }, "at least one rule"},
		{"rule with an unknown resource", func(c *Config) {
			c.WorkloadIssuers = []WorkloadIssuer{{Issuer: "https://wl.example", Rules: []WorkloadRule{{Subject: "*", ClientID: "w", Resources: []string{"https://nope"}, Scopes: []string{"mcp:tools"}}}}}
		}, "not a configured resource"},
		{"rule with a foreign scope", func(c *Config) {
			c.WorkloadIssuers = []WorkloadIssuer{{Issuer: "https://wl.example", Rules: []WorkloadRule{{Subject: "*", ClientID: "w", Resources: []string{mcpURI}, Scopes: []string{"x"}}}}}
		}, "not a scope"},
		{"rule client_id of a configured client", func(c *Config) {
			c.Clients = []Client{{ID: "w", Secret: "0123456789abcdef0123"}}
			c.WorkloadIssuers = []WorkloadIssuer{{Issuer: "https://wl.example", Rules: []WorkloadRule{{Subject: "*", ClientID: "w", Resources: []string{mcpURI}, Scopes: []string{"mcp:tools"}}}}}
		}, "not the ID of a configured client"},
		{"issuer both IdP and workload", func(c *Config) {
			c.EnterpriseIdPs = []EnterpriseIdP{{Issuer: idpIssuer, JWKS: jwks, Clients: []string{"a"}}}
			c.WorkloadIssuers = []WorkloadIssuer{{Issuer: idpIssuer, JWKS: jwks, Rules: []WorkloadRule{{Subject: "*", ClientID: "w", Resources: []string{mcpURI}, Scopes: []string{"mcp:tools"}}}}}
		}, "listed twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mod(&c)
			_, _, err := compileFederation(&c, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v; want %q", err, tc.want)
			}
		})
	}
}

// TestIDJAGBoundToADPoPKey redeems an ID-JAG carrying cnf.jkt (ID-JAG
// §8.6.1): only with a DPoP proof of that key, and the access token is
// bound to it. An act claim is carried into the token.
func TestIDJAGBoundToADPoPKey(t *testing.T) {
	w := newFedWorld(t, nil)
	key, other := newKey(t), newKey(t)
	act := map[string]any{"sub": "agent-7"}
	bound := func() string {
		return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "cnf", map[string]any{"jkt": key.Thumbprint()}, "act", act))
	}
	resp, body := w.postProof(jwtBearer(bound()), "xaa-client", xaaSecret, w.proof(other, ""))
	wantError(t, resp, body, 400, "invalid_grant")
	resp, body = w.postProof(jwtBearer(bound()), "xaa-client", xaaSecret)
	wantError(t, resp, body, 400, "invalid_grant")
	resp, body = w.postProof(jwtBearer(bound()), "xaa-client", xaaSecret, w.proof(key, ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	_, c := w.claims(body["access_token"].(string))
	cnf, _ := c["cnf"].(map[string]any)
	if cnf["jkt"] != key.Thumbprint() {
		t.Errorf("cnf %v; want the proof's key", c["cnf"])
	}
	if a, _ := c["act"].(map[string]any); a["sub"] != "agent-7" {
		t.Errorf("act %v; want the ID-JAG's", c["act"])
	}
}

// TestWorkloadTokenWithDPoP: DPoP applies to the jwt-bearer grant like any
// other (RFC 9449 §5), without client authentication.
func TestWorkloadTokenWithDPoP(t *testing.T) {
	w := newFedWorld(t, nil)
	key := newKey(t)
	resp, body := w.postProof(jwtBearer(w.wlKey.mint(t, "", w.workloadJWT("conformance-workload"))), "", "", w.proof(key, ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	if _, c := w.claims(body["access_token"].(string)); c["cnf"].(map[string]any)["jkt"] != key.Thumbprint() {
		t.Errorf("cnf %v", c["cnf"])
	}
}

// TestJWTBearerReplayAcrossInstances: two servers sharing one database
// (SQLite, PostgreSQL) share the one-time-id store, so an ID-JAG or a
// workload token redeemed on one is a replay on the other, also when both
// race for it.
func TestJWTBearerReplayAcrossInstances(t *testing.T) {
	for name, open := range map[string]func(*testing.T) storage.Store{
		"sqlite":   func(t *testing.T) storage.Store { return openSQLite(t) },
		"postgres": func(t *testing.T) storage.Store { return openPostgres(t, 8) },
	} {
		t.Run(name, func(t *testing.T) {
			store := open(t)
			a := newFedWorld(t, func(c *Config) { c.Store = store })
			wlJWKS, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{a.wlKey.public()}})
			b := newFedWorld(t, func(c *Config) {
				c.Store = store
				// a's workload issuer, with its keys given statically.
				c.WorkloadIssuers[0].Issuer, c.WorkloadIssuers[0].JWKS = a.ks.srv.URL, wlJWKS
			})
			// b trusts a's keys too: the same IdP and workload issuer.
			b.idpKey, b.wlKey = a.idpKey, a.wlKey
			b.ks.publish("/idp-jwks", a.idpKey.public())
			cl := a.idJAG()
			cl["aud"] = []string{a.issuer}
			// Each server's issuer differs: mint one ID-JAG per audience with
			// the same jti, as a replay at the other instance would carry it.
			jti := cl["jti"]
			first := a.idpKey.mint(t, typIDJAG, cl)
			if resp, body := a.post("/token", jwtBearer(first), "xaa-client", xaaSecret); resp.StatusCode != 200 {
				t.Fatalf("first redemption: %d %v", resp.StatusCode, body)
			}
			again := a.idpKey.mint(t, typIDJAG, with(b.idJAG(), "jti", jti))
			resp, body := b.post("/token", jwtBearer(again), "xaa-client", xaaSecret)
			wantError(t, resp, body, 400, "invalid_grant")
			if d, _ := body["error_description"].(string); !strings.Contains(d, "jti replay") {
				t.Errorf("refused for %q; want the replay", d)
			}
			// b redeems a's workload tokens (so the race below is a real one).
			if resp, body := b.post("/token", jwtBearer(a.wlKey.mint(t, "", with(a.workloadJWT("conformance-workload"), "aud", b.issuer))), "", ""); resp.StatusCode != 200 {
				t.Fatalf("b redeeming a workload token of a's issuer: %d %v", resp.StatusCode, body)
			}

			// A workload token raced at both instances is redeemed once.
			wl := a.wlKey.mint(t, "", with(a.workloadJWT("conformance-workload"), "aud", []string{a.issuer, b.issuer}))
			var wg sync.WaitGroup
			var mu sync.Mutex
			statuses := map[int]int{}
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h := a.harness
					if i%2 == 1 {
						h = b.harness
					}
					resp, _ := h.post("/token", jwtBearer(wl, "client_id", "x"), "", "")
					mu.Lock()
					statuses[resp.StatusCode]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			if statuses[200] != 1 || statuses[400] != 5 {
				t.Errorf("statuses %v; want one 200", statuses)
			}
		})
	}
}

// TestJWTBearerRefusalsAudited: a refused assertion leaves an audit event
// with its kind, issuer and error, and never the assertion.
func TestJWTBearerRefusalsAudited(t *testing.T) {
	logs := &logCapture{}
	w := newFedWorld(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	a := w.wlKey.mint(t, "", w.workloadJWT("someone-else"))
	resp, body := w.post("/token", jwtBearer(a), "", "")
	wantError(t, resp, body, 400, "unauthorized_client")
	var found bool
	for _, e := range logs.events(t) {
		if e["event"] == "assertion.refused" {
			found = e["kind"] == "workload" && e["iss"] == w.ks.srv.URL && e["error"] == "unauthorized_client"
		}
	}
	if !found || strings.Contains(logs.String(), a) || strings.Contains(logs.String(), strings.Split(a, ".")[2]) {
		t.Errorf("audit events %v", logs.events(t))
	}
	// A replay, refused when the token is about to be issued, is audited too.
	ok := w.wlKey.mint(t, "", w.workloadJWT("conformance-workload"))
	if resp, body := w.post("/token", jwtBearer(ok), "", ""); resp.StatusCode != 200 {
		t.Fatalf("first use: %d %v", resp.StatusCode, body)
	}
	resp, body = w.post("/token", jwtBearer(ok), "", "")
	wantError(t, resp, body, 400, "invalid_grant")
	replays := 0
	for _, e := range logs.events(t) {
		if e["event"] == "assertion.refused" && e["kind"] == "workload" && e["error"] == "invalid_grant" && e["assertion_digest"] == digest(ok) {
			replays++
		}
	}
	if replays != 1 {
		t.Errorf("%d audited replays; want 1: %v", replays, logs.events(t))
	}
}

// TestJWTBearerRefusedForAMissingProofIsNotConsumed: an assertion refused
// by a check that runs after the grant's own (a resource whose tokens are
// only issued DPoP-bound) is not spent: the same ID-JAG or workload token
// sent again with a proof is redeemed, once.
func TestJWTBearerRefusedForAMissingProofIsNotConsumed(t *testing.T) {
	w := newFedWorld(t, func(c *Config) { c.DPoP.RequiredFor = []string{mcpURI} })
	key := newKey(t)
	for _, tc := range []struct {
		name, assertion, user, pass string
	}{
		{"id-jag", w.idpKey.mint(t, typIDJAG, w.idJAG()), "xaa-client", xaaSecret},
		{"workload", w.wlKey.mint(t, "", w.workloadJWT("conformance-workload")), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := w.postProof(jwtBearer(tc.assertion, "resource", mcpURI), tc.user, tc.pass)
			wantDPoPError(t, resp, body, "invalid_dpop_proof")
			resp, body = w.postProof(jwtBearer(tc.assertion, "resource", mcpURI), tc.user, tc.pass, w.proof(key, ""))
			if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
				t.Fatalf("with a proof: %d %v", resp.StatusCode, body)
			}
			resp, body = w.postProof(jwtBearer(tc.assertion, "resource", mcpURI), tc.user, tc.pass, w.proof(key, ""))
			wantError(t, resp, body, 400, "invalid_grant")
			if d, _ := body["error_description"].(string); !strings.Contains(d, "jti replay") {
				t.Errorf("third use refused for %q; want the replay", d)
			}
		})
	}
}

// TestFederatedSubjectIsNotALocalPerson: a token issued for an assertion's
// subject ("<iss>#<sub>") is not refused, nor its grant listed as
// orphaned, because no local account has that name: token exchange takes
// it as a subject token, and the exchanged token introspects active with
// the same subject.
func TestFederatedSubjectIsNotALocalPerson(t *testing.T) {
	w := newFedWorld(t, func(c *Config) {
		c.Clients = append(c.Clients, Client{ID: "mcp-server", Secret: mcpSrvSecret, GrantTypes: []string{GrantTypeTokenExchange},
			Resources: []string{otherURI}, Scopes: []string{"other:read"}})
		c.ExchangePolicy = []ExchangeRule{{From: mcpURI, To: otherURI, Scopes: []string{"other:read"}, Clients: []string{"mcp-server"}}}
	})
	sub := w.ks.srv.URL + "#conformance-workload"
	_, tok := w.post("/token", jwtBearer(w.wlKey.mint(t, "", w.workloadJWT("conformance-workload")), "resource", mcpURI), "", "")
	at, _ := tok["access_token"].(string)
	if at == "" {
		t.Fatalf("workload token: %v", tok)
	}
	resp, body := w.post("/token", exchangeForm(at, otherURI), "mcp-server", mcpSrvSecret)
	if resp.StatusCode != 200 {
		t.Fatalf("exchanging a federated subject's token: %d %v", resp.StatusCode, body)
	}
	if _, c := w.claims(body["access_token"].(string)); c["sub"] != sub {
		t.Errorf("exchanged token's sub %v; want %s", c["sub"], sub)
	}
	_, in := w.post("/introspect", url.Values{"token": {body["access_token"].(string)}}, "mcp-server", mcpSrvSecret)
	if in["active"] != true || in["sub"] != sub {
		t.Errorf("introspection of the exchanged token %v", in)
	}
	gs, err := w.as.ListGrants(context.Background(), GrantFilter{Client: "conformance-wif"}, 0)
	if err != nil || len(gs) != 1 {
		t.Fatalf("ListGrants %v, %v; want the workload's grant", gs, err)
	}
	if gs[0].User != sub || gs[0].Orphaned {
		t.Errorf("grant %+v; want %s, not orphaned", gs[0], sub)
	}
}

// TestJWTBearerFarExpiryIsSingleUse: a workload token whose exp lies
// centuries ahead is still redeemed once on every backend. It can only be
// redeemed within maxAssertionAge of its iat, so its jti is remembered
// that long, not until an exp a backend's time encoding cannot hold.
func TestJWTBearerFarExpiryIsSingleUse(t *testing.T) {
	for name, open := range map[string]func(*testing.T) storage.Store{
		"memory":   nil,
		"sqlite":   func(t *testing.T) storage.Store { return openSQLite(t) },
		"postgres": func(t *testing.T) storage.Store { return openPostgres(t, 4) },
	} {
		t.Run(name, func(t *testing.T) {
			w := newFedWorld(t, func(c *Config) {
				if open != nil {
					c.Store = open(t)
				}
			})
			for _, years := range []int{300, 400000} {
				a := w.wlKey.mint(t, "", with(w.workloadJWT("conformance-workload"), "exp", time.Now().AddDate(years, 0, 0).Unix()))
				resp, body := w.post("/token", jwtBearer(a), "", "")
				if resp.StatusCode != 200 {
					t.Fatalf("exp %d years ahead: %d %v", years, resp.StatusCode, body)
				}
				if exp, _ := body["expires_in"].(float64); exp <= 0 || exp > DefaultAccessTokenTTL.Seconds() {
					t.Errorf("expires_in %v", body["expires_in"])
				}
				resp, body = w.post("/token", jwtBearer(a), "", "")
				wantError(t, resp, body, 400, "invalid_grant")
				if d, _ := body["error_description"].(string); !strings.Contains(d, "jti replay") {
					t.Errorf("exp %d years ahead, second use refused for %q; want the replay", years, d)
				}
			}
		})
	}
}

// TestIssuerKeysStaleSetKeptWhileIssuerIsDown: once the cached JWK Set is
// older than issuerKeysTTL and the issuer does not answer, the old set
// keeps verifying assertions, and the issuer is asked again at most once
// per issuerKeysMinRefresh, not once per request.
func TestIssuerKeysStaleSetKeptWhileIssuerIsDown(t *testing.T) {
	w := newFedWorld(t, nil)
	mint := func() string {
		now := w.clock.Now()
		return w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "iat", now.Unix(), "exp", now.Add(5*time.Minute).Unix()))
	}
	if resp, body := w.post("/token", jwtBearer(mint()), "xaa-client", xaaSecret); resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	fetches := w.ks.fetches["/idp-jwks"]
	w.ks.down.Store(true)
	w.clock.Advance(issuerKeysTTL)
	for i := range 4 {
		if resp, body := w.post("/token", jwtBearer(mint()), "xaa-client", xaaSecret); resp.StatusCode != 200 {
			t.Fatalf("request %d with the issuer down: %d %v", i, resp.StatusCode, body)
		}
	}
	if n := fetches.Load(); n != 2 {
		t.Errorf("%d fetches; want the first and one retry while the issuer is down", n)
	}
	// After the interval it is asked again, and its answer is used.
	w.ks.down.Store(false)
	next := newIdPKey(t, "idp-2")
	w.ks.publish("/idp-jwks", next.public())
	w.clock.Advance(issuerKeysMinRefresh)
	now := w.clock.Now()
	resp, body := w.post("/token", jwtBearer(next.mint(t, typIDJAG, with(w.idJAG(), "iat", now.Unix(), "exp", now.Add(5*time.Minute).Unix()))), "xaa-client", xaaSecret)
	if resp.StatusCode != 200 || fetches.Load() != 3 {
		t.Errorf("after the interval: %d %v, %d fetches", resp.StatusCode, body, fetches.Load())
	}
}

// allActive is a user directory in which every name is an active account.
type allActive struct{}

func (allActive) UserActive(string) bool { return true }

// TestJWTBearerRequestAndHeaderChecks: refusals of assertions that are
// otherwise valid, so each passes only while its own check holds.
func TestJWTBearerRequestAndHeaderChecks(t *testing.T) {
	w := newFedWorld(t, func(c *Config) {
		c.Clients = append(c.Clients, Client{ID: "xaa-narrow", Secret: xaaSecret, GrantTypes: []string{GrantTypeJWTBearer}, Resources: []string{otherURI}})
		c.EnterpriseIdPs[0].Clients = append(c.EnterpriseIdPs[0].Clients, "xaa-narrow")
	})
	t.Run("an assertion over 16 KiB", func(t *testing.T) {
		a := w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "pad", strings.Repeat("x", maxAssertion)))
		resp, body := w.post("/token", jwtBearer(a), "xaa-client", xaaSecret)
		wantError(t, resp, body, 400, "invalid_grant")
		if d, _ := body["error_description"].(string); !strings.Contains(d, "too large") {
			t.Errorf("refused for %q; want the size", d)
		}
	})
	t.Run("a repeated assertion parameter", func(t *testing.T) {
		f := jwtBearer(w.idpKey.mint(t, typIDJAG, w.idJAG()))
		f.Add("assertion", w.idpKey.mint(t, typIDJAG, w.idJAG()))
		resp, body := w.post("/token", f, "xaa-client", xaaSecret)
		wantError(t, resp, body, 400, "invalid_request")
	})
	t.Run("an ID-JAG for a resource the client may not use", func(t *testing.T) {
		resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "client_id", "xaa-narrow"))), "xaa-narrow", xaaSecret)
		wantError(t, resp, body, 400, "invalid_target")
		resp, body = w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, with(w.idJAG(), "client_id", "xaa-narrow", "resource", otherURI))), "xaa-narrow", xaaSecret)
		if resp.StatusCode != 200 {
			t.Errorf("its own resource: %d %v", resp.StatusCode, body)
		}
	})
	t.Run("a key in the header", func(t *testing.T) {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: w.idpKey.priv},
			(&jose.SignerOptions{EmbedJWK: true}).WithType(typIDJAG))
		if err != nil {
			t.Fatal(err)
		}
		a := sign(t, signer, w.idJAG())
		resp, body := w.post("/token", jwtBearer(a), "xaa-client", xaaSecret)
		wantError(t, resp, body, 400, "invalid_grant")
	})
	for _, tc := range []struct {
		name string
		mod  func(*jose.JSONWebKey)
	}{
		{"the IdP's key published for encryption", func(k *jose.JSONWebKey) { k.Use = "enc" }},
		{"the IdP's key published for another alg", func(k *jose.JSONWebKey) { k.Algorithm = "ES384" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newFedWorld(t, nil)
			k := w.idpKey.public()
			tc.mod(&k)
			w.ks.publish("/idp-jwks", k)
			resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, w.idJAG())), "xaa-client", xaaSecret)
			wantError(t, resp, body, 400, "invalid_grant")
		})
	}
	t.Run("a discovery document naming another issuer", func(t *testing.T) {
		w := newFedWorld(t, nil)
		w.ks.otherIssuer.Store(true)
		resp, body := w.post("/token", jwtBearer(w.wlKey.mint(t, "", w.workloadJWT("conformance-workload"))), "", "")
		wantError(t, resp, body, 400, "invalid_grant")
		if n := w.ks.fetches["/wl-jwks"].Load(); n != 0 {
			t.Errorf("%d fetches of the jwks_uri a foreign discovery document names; want 0", n)
		}
	})
	t.Run("link by email without an email", func(t *testing.T) {
		w := newFedWorld(t, func(c *Config) {
			c.EnterpriseIdPs[0].LinkByEmail = true
			c.Users = allActive{}
		})
		resp, body := w.post("/token", jwtBearer(w.idpKey.mint(t, typIDJAG, w.idJAG())), "xaa-client", xaaSecret)
		wantError(t, resp, body, 400, "invalid_grant")
	})
}
