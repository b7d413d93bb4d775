package rsmiddleware

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpauth/mcpauth/metadata"
)

const (
	testResource   = "https://mcp.example.com/mcp"
	otherResource  = "https://other.example.com/mcp"
	downstreamRes  = "https://api.example.com/v1"
	rsClientID     = "mcp-server"
	rsClientSecret = "s3cret/with+chars"
)

// keyServer is a small authorization server for tests: it serves RFC 8414
// metadata, a JWKS, RFC 7662 introspection and an RFC 8693 token endpoint,
// and signs tokens with go-jose.
type keyServer struct {
	t      testing.TB
	srv    *httptest.Server
	issuer string

	mu      sync.Mutex
	keys    map[string]*ecdsa.PrivateKey
	current string
	revoked map[string]bool // jti

	down atomic.Bool
	// keepClaims makes introspection answer active:false with every claim
	// of the token still in the answer.
	keepClaims    atomic.Bool
	jwksHits      atomic.Int32
	tokenHits     atomic.Int32
	introHits     atomic.Int32
	exchangeTTL   time.Duration
	allowedTarget string // token exchange policy: the only downstream resource

	// The Token Status List served at /statuslists/1 (status_test.go):
	// statusBits is the one-bit list; statusClaims, when set, changes the
	// list token's claims before signing; statusTyp its typ.
	statusBits   []byte
	statusClaims func(map[string]any)
	statusTyp    string
	statusHits   atomic.Int32
	// statusContentType and statusBody, when set, replace the list's
	// content type and the whole answer.
	statusContentType, statusBody string
}

func newKeyServer(t testing.TB) *keyServer { return newKeyServerAt(t, "") }

// newKeyServerAt is newKeyServer whose issuer (in its metadata and tokens)
// is issuer rather than the address it listens on ("" for that address).
func newKeyServerAt(t testing.TB, issuer string) *keyServer {
	ks := &keyServer{t: t, keys: map[string]*ecdsa.PrivateKey{}, revoked: map[string]bool{}, exchangeTTL: 5 * time.Minute, allowedTarget: downstreamRes}
	mux := http.NewServeMux()
	ks.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ks.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(ks.srv.Close)
	ks.issuer = ks.srv.URL
	if issuer != "" {
		ks.issuer = issuer
	}
	ks.rotate("k1")
	meta := metadata.AuthorizationServerMetadata{
		Issuer:                 ks.issuer,
		TokenEndpoint:          ks.issuer + "/token",
		JWKSURI:                ks.issuer + "/jwks.json",
		IntrospectionEndpoint:  ks.issuer + "/introspect",
		ResponseTypesSupported: []string{"code"},
		GrantTypesSupported:    []string{GrantTypeTokenExchange},
	}
	mh, err := metadata.Handler(meta)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/.well-known/oauth-authorization-server", mh)
	mux.HandleFunc("/jwks.json", ks.serveJWKS)
	mux.HandleFunc("/introspect", ks.serveIntrospect)
	mux.HandleFunc("/token", ks.serveToken)
	mux.HandleFunc("/statuslists/1", ks.serveStatusList)
	ks.statusBits = make([]byte, 64)
	ks.statusTyp = "statuslist+jwt"
	return ks
}

// rotate adds a new current signing key.
func (ks *keyServer) rotate(kid string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ks.t.Fatal(err)
	}
	ks.mu.Lock()
	ks.keys[kid] = k
	ks.current = kid
	ks.mu.Unlock()
}

func (ks *keyServer) serveJWKS(w http.ResponseWriter, r *http.Request) {
	ks.jwksHits.Add(1)
	ks.mu.Lock()
	var set jose.JSONWebKeySet
	for kid, k := range ks.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"})
	}
	ks.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(set)
}

// claims returns a valid claim set for testResource.
func (ks *keyServer) claims() map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": ks.issuer, "sub": "alice", "aud": testResource, "client_id": "client-1",
		"scope": "mcp:read", "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"jti": base64.RawURLEncoding.EncodeToString(randBytes(ks.t, 12)),
	}
}

func randBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// mint signs claims with the current key (header typ at+jwt, kid).
func (ks *keyServer) mint(claims map[string]any) string {
	ks.mu.Lock()
	kid := ks.current
	ks.mu.Unlock()
	return ks.mintWith(kid, "at+jwt", claims)
}

func (ks *keyServer) mintWith(kid, typ string, claims map[string]any) string {
	ks.mu.Lock()
	k := ks.keys[kid]
	ks.mu.Unlock()
	opts := (&jose.SignerOptions{}).WithHeader("kid", kid)
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, opts)
	if err != nil {
		ks.t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		ks.t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		ks.t.Fatal(err)
	}
	return out
}

// parse verifies a token minted here and returns its claims (the AS side of
// introspection and exchange).
func (ks *keyServer) parse(token string) (map[string]any, bool) {
	sig, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return nil, false
	}
	ks.mu.Lock()
	k, ok := ks.keys[sig.Signatures[0].Header.KeyID]
	ks.mu.Unlock()
	if !ok {
		return nil, false
	}
	payload, err := sig.Verify(&k.PublicKey)
	if err != nil {
		return nil, false
	}
	var c map[string]any
	if json.Unmarshal(payload, &c) != nil {
		return nil, false
	}
	if exp, _ := c["exp"].(float64); time.Unix(int64(exp), 0).Before(time.Now()) {
		return nil, false
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if jti, _ := c["jti"].(string); ks.revoked[jti] {
		return nil, false
	}
	return c, true
}

func (ks *keyServer) revoke(token string) {
	c, _ := ks.parse(token)
	ks.mu.Lock()
	ks.revoked[c["jti"].(string)] = true
	ks.mu.Unlock()
}

func (ks *keyServer) clientOK(r *http.Request) bool {
	// RFC 6749 §2.3.1: both parts are form-urlencoded before Basic encoding.
	id, secret, ok := r.BasicAuth()
	id, err1 := url.QueryUnescape(id)
	secret, err2 := url.QueryUnescape(secret)
	return ok && err1 == nil && err2 == nil && id == rsClientID && secret == rsClientSecret
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (ks *keyServer) serveIntrospect(w http.ResponseWriter, r *http.Request) {
	ks.introHits.Add(1)
	if !ks.clientOK(r) {
		writeJSON(w, 401, map[string]string{"error": "invalid_client"})
		return
	}
	c, ok := ks.parse(r.PostFormValue("token"))
	if !ok {
		writeJSON(w, 200, map[string]any{"active": false})
		return
	}
	if ks.keepClaims.Load() {
		c["active"] = false
		c["token_type"] = "Bearer"
		writeJSON(w, 200, c)
		return
	}
	c["active"] = true
	c["token_type"] = "Bearer"
	writeJSON(w, 200, c)
}

// serveToken implements just the RFC 8693 exchange a test needs: the client
// acting for testResource may exchange to allowedTarget.
func (ks *keyServer) serveToken(w http.ResponseWriter, r *http.Request) {
	ks.tokenHits.Add(1)
	if !ks.clientOK(r) {
		writeJSON(w, 401, map[string]string{"error": "invalid_client"})
		return
	}
	if r.PostFormValue("grant_type") != GrantTypeTokenExchange || r.PostFormValue("subject_token_type") != TokenTypeAccessToken {
		writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	c, ok := ks.parse(r.PostFormValue("subject_token"))
	if !ok || c["aud"] != testResource {
		writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
		return
	}
	if r.PostFormValue("resource") != ks.allowedTarget {
		writeJSON(w, 400, map[string]string{"error": "invalid_target", "error_description": "exchange to this resource is not allowed"})
		return
	}
	nc := ks.claims()
	nc["sub"] = c["sub"]
	nc["aud"] = ks.allowedTarget
	nc["client_id"] = rsClientID
	nc["act"] = map[string]any{"sub": rsClientID}
	nc["exp"] = time.Now().Add(ks.exchangeTTL).Unix()
	writeJSON(w, 200, map[string]any{
		"access_token": ks.mint(nc), "issued_token_type": TokenTypeAccessToken,
		"token_type": "Bearer", "expires_in": int(ks.exchangeTTL.Seconds()),
	})
}

func (ks *keyServer) verifier(t testing.TB, mod func(*Config)) *Verifier {
	cfg := Config{Issuer: ks.issuer, Resource: testResource, HTTPClient: ks.srv.Client(), RefreshInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
