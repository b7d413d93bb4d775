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
	base := func() Config {
		return Config{Issuer: "https://as.example.com", Resource: testResource, Algorithms: []string{"ES256", "RS256"},
			Introspection: &ClientCredentials{ClientID: "x", ClientSecret: "y"}}
	}
	if _, err := NewVerifier(base()); err != nil {
		t.Fatalf("NewVerifier of the unmodified config: %v", err)
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // in the error
	}{
		{"refuses a missing issuer", func(c *Config) { c.Issuer = "" }, "Issuer is required"},
		{"refuses a missing resource", func(c *Config) { c.Resource = "" }, "Resource is required"},
		{"refuses a resource with a query", func(c *Config) { c.Resource = testResource + "?x=1" }, "Config.Resource"},
		{"refuses an issuer with a fragment", func(c *Config) { c.Issuer = "https://as.example.com#x" }, "Config.Issuer"},
		{"refuses alg none", func(c *Config) { c.Algorithms = []string{"none"} }, `algorithm "none" is not allowed`},
		{"refuses HMAC algorithms", func(c *Config) { c.Algorithms = []string{"ES256", "HS256"} }, `algorithm "HS256" is not allowed`},
		{"refuses introspection without a secret", func(c *Config) { c.Introspection.ClientSecret = "" }, "needs ClientID and ClientSecret"},
		{"refuses introspection without a client id", func(c *Config) { c.Introspection.ClientID = "" }, "needs ClientID and ClientSecret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base()
			tt.change(&cfg)
			v, err := NewVerifier(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewVerifier(%+v) = %v, %v; want an error saying %q", cfg, v, err, tt.want)
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
		why   string // what the refusal must name
	}{
		{"accepts a valid token", ks.mint(ks.claims()), true, ""},
		{"accepts an audience with a trailing slash", with(func(c map[string]any) { c["aud"] = testResource + "/" }), true, ""},
		{"accepts an audience array containing the resource", with(func(c map[string]any) { c["aud"] = []string{otherResource, testResource} }), true, ""},
		{"accepts a fosite-style scp list when scope is absent", with(func(c map[string]any) { delete(c, "scope"); c["scp"] = []string{"mcp:read"} }), true, ""},
		{"accepts typ application/at+jwt", ks.mintWith("k1", "application/at+jwt", ks.claims()), true, ""},
		{"accepts a token expired within the clock skew", with(func(c map[string]any) { c["exp"] = time.Now().Add(-10 * time.Second).Unix() }), true, ""},
		{"refuses a valid token for another resource (audience confusion)", with(func(c map[string]any) { c["aud"] = otherResource }), false, "aud ["},
		{"refuses an audience that is a prefix of the resource", with(func(c map[string]any) { c["aud"] = "https://mcp.example.com" }), false, "aud ["},
		{"refuses an audience extending the resource path", with(func(c map[string]any) { c["aud"] = testResource + "/admin" }), false, "aud ["},
		{"refuses an audience with dot segments", with(func(c map[string]any) { c["aud"] = testResource + "/../admin" }), false, "aud ["},
		{"refuses an audience with a query", with(func(c map[string]any) { c["aud"] = testResource + "?x=y" }), false, "aud ["},
		{"refuses a token without an audience", with(func(c map[string]any) { delete(c, "aud") }), false, "aud ["},
		{"refuses alg none", unsigned(map[string]any{"alg": "none", "typ": "at+jwt", "kid": "k1"}, ks.claims(), nil), false, "unexpected signature algorithm"},
		{"refuses HS256 signed with the public key bytes", unsigned(map[string]any{"alg": "HS256", "typ": "at+jwt", "kid": "k1"}, ks.claims(), func(in string) []byte {
			return hmacSHA256(pubDER, in)
		}), false, "unexpected signature algorithm"},
		{"refuses an embedded jwk signed by another key", attackerSigned, false, "cryptographic primitive"},
		{"refuses a token expired a minute ago (beyond the default 30 s skew)", with(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() }), false, "expired at"},
		{"refuses a token not valid for another minute", with(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Minute).Unix() }), false, "not valid before"},
		{"refuses an expired token", with(func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() }), false, "expired at"},
		{"refuses a token without exp", with(func(c map[string]any) { delete(c, "exp") }), false, "no exp"},
		{"refuses a token not valid yet", with(func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), false, "not valid before"},
		{"refuses an ID token (typ JWT)", ks.mintWith("k1", "JWT", ks.claims()), false, "is not at+jwt"},
		{"refuses a token without typ", ks.mintWith("k1", "", ks.claims()), false, "is not at+jwt"},
		{"refuses a wrong issuer", with(func(c map[string]any) { c["iss"] = "https://evil.example.com" }), false, "is not the configured issuer"},
		{"refuses the issuer with a trailing slash", with(func(c map[string]any) { c["iss"] = ks.issuer + "/" }), false, "is not the configured issuer"},
		{"refuses a token without sub", with(func(c map[string]any) { delete(c, "sub") }), false, "are required"},
		{"refuses a token without client_id", with(func(c map[string]any) { delete(c, "client_id") }), false, "are required"},
		{"refuses a token without jti", with(func(c map[string]any) { delete(c, "jti") }), false, "are required"},
		{"refuses a token issued in the future", with(func(c map[string]any) { c["iat"] = time.Now().Add(time.Hour).Unix() }), false, "issued in the future"},
		{"refuses a token with an unknown kid", unsigned(map[string]any{"alg": "ES256", "typ": "at+jwt", "kid": "nope"}, ks.claims(), func(string) []byte { return make([]byte, 64) }), false, "unknown kid"},
		{"refuses a tampered payload", func() string {
			parts := strings.Split(ks.mint(ks.claims()), ".")
			c := ks.claims()
			c["scope"] = "admin"
			b, _ := json.Marshal(c)
			parts[1] = base64.RawURLEncoding.EncodeToString(b)
			return strings.Join(parts, ".")
		}(), false, "cryptographic primitive"},
		{"refuses garbage", "not-a-jwt", false, "three parts"},
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
			if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("Verify = %+v, %v; want ErrInvalidToken saying %q", p, err, tt.why)
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
	// Pins introspectToken's refusal of active:false (RFC 7662 §2.2), even
	// when the answer carries claims that would pass every other check.
	ks.keepClaims.Store(true)
	if p, err := v.Verify(context.Background(), ks.mint(ks.claims())); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "inactive") {
		t.Fatalf("active:false with valid claims: %+v, %v", p, err)
	}
	ks.keepClaims.Store(false)
	bad := ks.verifier(t, func(c *Config) { c.Introspection = &ClientCredentials{ClientID: rsClientID, ClientSecret: "wrong"} })
	if _, err := bad.Verify(context.Background(), ks.mint(ks.claims())); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("wrong introspection credentials: %v", err)
	}
}
