package rsmiddleware

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func TestNewVerifierRefusesIncompleteConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"refuses a missing issuer", Config{Resource: testResource}},
		{"refuses a missing resource", Config{Issuer: "https://as.example.com"}},
		{"refuses a resource with a query", Config{Issuer: "https://as.example.com", Resource: testResource + "?x=1"}},
		{"refuses an issuer with a fragment", Config{Issuer: "https://as.example.com#x", Resource: testResource}},
		{"refuses alg none", Config{Issuer: "https://as.example.com", Resource: testResource, Algorithms: []string{"none"}}},
		{"refuses HMAC algorithms", Config{Issuer: "https://as.example.com", Resource: testResource, Algorithms: []string{"ES256", "HS256"}}},
		{"refuses introspection without a secret", Config{Issuer: "https://as.example.com", Resource: testResource, Introspection: &ClientCredentials{ClientID: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, err := NewVerifier(tt.cfg); err == nil {
				t.Fatalf("NewVerifier(%+v) = %v, want an error", tt.cfg, v)
			}
		})
	}
}

// unsigned builds a compact JWS by hand (for alg none and HMAC forgeries).
func unsigned(header, claims map[string]any, sign func(input string) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	var sig []byte
	if sign != nil {
		sig = sign(input)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestVerifyJWT(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.CacheSize = -1 })
	with := func(mod func(map[string]any)) string {
		c := ks.claims()
		mod(c)
		return ks.mint(c)
	}
	pubDER := func() []byte {
		ks.mu.Lock()
		defer ks.mu.Unlock()
		der, _ := x509.MarshalPKIXPublicKey(&ks.keys["k1"].PublicKey)
		return der
	}()
	attacker, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	attackerSigned := func() string {
		s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: attacker},
			(&jose.SignerOptions{EmbedJWK: true}).WithType("at+jwt").WithHeader("kid", "k1"))
		p, _ := json.Marshal(ks.claims())
		j, _ := s.Sign(p)
		out, _ := j.CompactSerialize()
		return out
	}()

	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"accepts a valid token", ks.mint(ks.claims()), true},
		{"accepts an audience with a trailing slash", with(func(c map[string]any) { c["aud"] = testResource + "/" }), true},
		{"accepts an audience array containing the resource", with(func(c map[string]any) { c["aud"] = []string{otherResource, testResource} }), true},
		{"accepts a fosite-style scp list when scope is absent", with(func(c map[string]any) { delete(c, "scope"); c["scp"] = []string{"mcp:read"} }), true},
		{"accepts typ application/at+jwt", ks.mintWith("k1", "application/at+jwt", ks.claims()), true},
		{"accepts a token expired within the clock skew", with(func(c map[string]any) { c["exp"] = time.Now().Add(-10 * time.Second).Unix() }), true},
		{"refuses a valid token for another resource (audience confusion)", with(func(c map[string]any) { c["aud"] = otherResource }), false},
		{"refuses an audience that is a prefix of the resource", with(func(c map[string]any) { c["aud"] = "https://mcp.example.com" }), false},
		{"refuses an audience extending the resource path", with(func(c map[string]any) { c["aud"] = testResource + "/admin" }), false},
		{"refuses an audience with dot segments", with(func(c map[string]any) { c["aud"] = testResource + "/../admin" }), false},
		{"refuses an audience with a query", with(func(c map[string]any) { c["aud"] = testResource + "?x=y" }), false},
		{"refuses a token without an audience", with(func(c map[string]any) { delete(c, "aud") }), false},
		{"refuses alg none", unsigned(map[string]any{"alg": "none", "typ": "at+jwt", "kid": "k1"}, ks.claims(), nil), false},
		{"refuses HS256 signed with the public key bytes", unsigned(map[string]any{"alg": "HS256", "typ": "at+jwt", "kid": "k1"}, ks.claims(), func(in string) []byte {
			return hmacSHA256(pubDER, in)
		}), false},
		{"refuses an embedded jwk signed by another key", attackerSigned, false},
		{"refuses an expired token", with(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), false},
		{"refuses a token without exp", with(func(c map[string]any) { delete(c, "exp") }), false},
		{"refuses a token not valid yet", with(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), false},
		{"refuses an ID token (typ JWT)", ks.mintWith("k1", "JWT", ks.claims()), false},
		{"refuses a token without typ", ks.mintWith("k1", "", ks.claims()), false},
		{"refuses a wrong issuer", with(func(c map[string]any) { c["iss"] = "https://evil.example.com" }), false},
		{"refuses the issuer with a trailing slash", with(func(c map[string]any) { c["iss"] = ks.issuer + "/" }), false},
		{"refuses a token without sub", with(func(c map[string]any) { delete(c, "sub") }), false},
		{"refuses a token without client_id", with(func(c map[string]any) { delete(c, "client_id") }), false},
		{"refuses a token without jti", with(func(c map[string]any) { delete(c, "jti") }), false},
		{"refuses a token issued in the future", with(func(c map[string]any) { c["iat"] = time.Now().Add(time.Hour).Unix() }), false},
		{"refuses a token with an unknown kid", unsigned(map[string]any{"alg": "ES256", "typ": "at+jwt", "kid": "nope"}, ks.claims(), func(string) []byte { return make([]byte, 64) }), false},
		{"refuses a tampered payload", func() string {
			parts := strings.Split(ks.mint(ks.claims()), ".")
			c := ks.claims()
			c["scope"] = "admin"
			b, _ := json.Marshal(c)
			parts[1] = base64.RawURLEncoding.EncodeToString(b)
			return strings.Join(parts, ".")
		}(), false},
		{"refuses garbage", "not-a-jwt", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := v.Verify(context.Background(), tt.token)
			if tt.ok {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if p.Subject != "alice" || p.ClientID != "client-1" || !p.HasScopes("mcp:read") || p.TokenID == "" {
					t.Fatalf("principal %+v", p)
				}
				return
			}
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("Verify = %+v, %v; want ErrInvalidToken", p, err)
			}
		})
	}
}

func TestVerifierCanonicalisesTheConfiguredResource(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.Resource = "HTTPS://MCP.example.com:443/mcp/" })
	if v.Resource() != testResource {
		t.Fatalf("Resource() = %q", v.Resource())
	}
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatalf("token for the canonical form: %v", err)
	}
}

func TestVerifyReadsActAndAudience(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, nil)
	c := ks.claims()
	c["aud"] = []string{testResource}
	c["scope"] = "mcp:read mcp:write"
	c["act"] = map[string]any{"sub": "svc-a", "act": map[string]any{"sub": "svc-b"}}
	p, err := v.Verify(context.Background(), ks.mint(c))
	if err != nil {
		t.Fatal(err)
	}
	if p.Actor == nil || p.Actor.Subject != "svc-a" || p.Actor.Actor == nil || p.Actor.Actor.Subject != "svc-b" {
		t.Fatalf("act = %+v", p.Actor)
	}
	if len(p.Audience) != 1 || p.Audience[0] != testResource || !p.HasScopes("mcp:read", "mcp:write") || p.HasScopes("admin") {
		t.Fatalf("principal %+v", p)
	}
}

func TestKeyRotationIsPickedUpWithoutRestart(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.RefreshInterval = time.Nanosecond })
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatal(err)
	}
	ks.rotate("k2")
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatalf("token signed with the rotated key: %v", err)
	}
	if got := ks.jwksHits.Load(); got != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", got)
	}
}

func TestUnknownKIDRefreshIsRateLimited(t *testing.T) {
	ks := newKeyServer(t)
	now := time.Now()
	v := ks.verifier(t, func(c *Config) { c.RefreshInterval = time.Minute; c.Now = func() time.Time { return now } })
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatal(err)
	}
	ks.rotate("k2")
	for i := 0; i < 5; i++ {
		if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("attempt %d inside the rate limit: %v", i, err)
		}
	}
	if got := ks.jwksHits.Load(); got != 1 {
		t.Fatalf("JWKS fetched %d times within one interval, want 1", got)
	}
	now = now.Add(2 * time.Minute)
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatalf("after the interval: %v", err)
	}
}

func TestCachedKeysKeepWorkingWhileTheASIsDown(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.RefreshInterval = time.Nanosecond; c.CacheSize = -1 })
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatal(err)
	}
	ks.down.Store(true)
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatalf("fresh token with a cached key while the AS is down: %v", err)
	}
	if _, err := v.Verify(context.Background(), ks.mintWith("k1", "JWT", ks.claims())); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("bad token while the AS is down: %v", err)
	}
}

func TestNoKeysAndASDownIsUnavailableUntilItComesBack(t *testing.T) {
	ks := newKeyServer(t)
	ks.down.Store(true)
	now := time.Now()
	v := ks.verifier(t, func(c *Config) { c.Now = func() time.Time { return now } })
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	ks.down.Store(false)
	now = now.Add(2 * time.Second) // far below RefreshInterval (1 h in tests)
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatalf("AS back, no keys yet: %v", err)
	}
}

func TestVerifiedTokenCache(t *testing.T) {
	ks := newKeyServer(t)
	now := time.Now()
	v := ks.verifier(t, func(c *Config) { c.Now = func() time.Time { return now }; c.CacheSize = 2 })
	tok := ks.mint(ks.claims())
	p1, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := v.Verify(context.Background(), tok)
	if err != nil || p1 != p2 {
		t.Fatalf("second verification did not come from the cache: %v", err)
	}
	for i := 0; i < 5; i++ {
		if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.cache.len(); n > 2 {
		t.Fatalf("cache holds %d entries, bound is 2", n)
	}
	now = now.Add(time.Hour)
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("expired cached token: %v", err)
	}
}

func TestIntrospectionMode(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) {
		c.Introspection = &ClientCredentials{ClientID: rsClientID, ClientSecret: rsClientSecret}
	})
	tok := ks.mint(ks.claims())
	p, err := v.Verify(context.Background(), tok)
	if err != nil || p.Subject != "alice" || !p.HasScopes("mcp:read") {
		t.Fatalf("Verify = %+v, %v", p, err)
	}
	ks.revoke(tok)
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("revoked token: %v", err)
	}
	c := ks.claims()
	c["aud"] = otherResource
	if _, err := v.Verify(context.Background(), ks.mint(c)); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("active token for another resource: %v", err)
	}
	if got := ks.introHits.Load(); got != 3 {
		t.Fatalf("introspected %d times, want 3 (no caching)", got)
	}
	bad := ks.verifier(t, func(c *Config) { c.Introspection = &ClientCredentials{ClientID: rsClientID, ClientSecret: "wrong"} })
	if _, err := bad.Verify(context.Background(), ks.mint(ks.claims())); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("wrong introspection credentials: %v", err)
	}
}
