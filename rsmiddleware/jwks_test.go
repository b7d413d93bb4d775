package rsmiddleware

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpauth/mcpauth/metadata"
)

// TestVerifierChoosesTheKeysOfTheSet: keys for signatures are used with or
// without use and alg; encryption keys and private keys are not; the set
// is read as application/json or application/jwk-set+json, never as
// another content type.
func TestVerifierChoosesTheKeysOfTheSet(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		jwk         jose.JSONWebKey
		contentType string
		ok          bool
	}{
		{"uses a key without use or alg", jose.JSONWebKey{Key: &key.PublicKey, KeyID: "k"}, "application/json", true},
		{"reads application/jwk-set+json", jose.JSONWebKey{Key: &key.PublicKey, KeyID: "k", Use: "sig"}, "application/jwk-set+json", true},
		{"ignores an encryption key", jose.JSONWebKey{Key: &key.PublicKey, KeyID: "k", Use: "enc"}, "application/json", false},
		{"ignores a private key", jose.JSONWebKey{Key: key, KeyID: "k", Use: "sig"}, "application/json", false},
		{"refuses a set served as text/html", jose.JSONWebKey{Key: &key.PublicKey, KeyID: "k", Use: "sig"}, "text/html", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			srv := httptest.NewServer(mux)
			defer srv.Close()
			mh, _ := metadata.Handler(metadata.AuthorizationServerMetadata{Issuer: srv.URL, JWKSURI: srv.URL + "/jwks", ResponseTypesSupported: []string{"code"}})
			mux.Handle("/.well-known/oauth-authorization-server", mh)
			mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{tt.jwk}})
			})
			s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k"))
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			p, _ := json.Marshal(map[string]any{"iss": srv.URL, "sub": "alice", "aud": testResource, "client_id": "c", "jti": "j",
				"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
			j, _ := s.Sign(p)
			tok, _ := j.CompactSerialize()
			v, err := NewVerifier(Config{Issuer: srv.URL, Resource: testResource, CacheSize: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(context.Background(), tok)
			if tt.ok != (err == nil) {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// TestIntrospectionModeCachesNothing: in introspection mode a token the AS
// has revoked is refused at once, though it was accepted before.
func TestIntrospectionModeCachesNothing(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) {
		c.Introspection = &ClientCredentials{ClientID: rsClientID, ClientSecret: rsClientSecret}
	})
	tok := ks.mint(ks.claims())
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	ks.revoke(tok)
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("revoked token: %v; want ErrInvalidToken", err)
	}
}

// TestVerifierDefaultSkewIsThirtySeconds: without Config.ClockSkew a token
// expired 20 s ago is accepted, one expired 40 s ago is not.
func TestVerifierDefaultSkewIsThirtySeconds(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.CacheSize = -1 })
	for _, tc := range []struct {
		ago time.Duration
		ok  bool
	}{{20 * time.Second, true}, {40 * time.Second, false}} {
		c := ks.claims()
		c["exp"] = time.Now().Add(-tc.ago).Unix()
		_, err := v.Verify(context.Background(), ks.mint(c))
		if tc.ok != (err == nil) {
			t.Errorf("expired %v ago: %v", tc.ago, err)
		}
	}
}

// TestOnlyPlainHeadersAreRemembered: a header with a member besides alg,
// kid and typ takes the full path every time.
func TestOnlyPlainHeadersAreRemembered(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.CacheSize = -1 })
	ks.mu.Lock()
	k := ks.keys[ks.current]
	kid := ks.current
	ks.mu.Unlock()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid).WithHeader("cty", "x"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(ks.claims())
	j, _ := s.Sign(payload)
	tok, _ := j.CompactSerialize()
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	h, _, _, _ := splitCompact(tok)
	if _, ok := v.headers.get(h); ok {
		t.Fatal("a header with cty was remembered")
	}
}

// TestVerifierTokenLengthLimit: a token of exactly 16 KiB is verified, not
// refused for its length.
func TestVerifierTokenLengthLimit(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.CacheSize = -1 })
	// The payload segment grows one or two characters at a time; a kid of
	// another length shifts where those steps fall.
	var exact string
	for _, kid := range []string{"k", "kk", "kkk"} {
		ks.rotate(kid)
		for n := 11000; n < 12500 && exact == ""; n++ {
			c := ks.claims()
			c["pad"] = strings.Repeat("p", n)
			tok := ks.mint(c)
			if len(tok) == 16<<10 {
				exact = tok
			}
			if len(tok) > 16<<10 {
				break
			}
		}
		if exact != "" {
			break
		}
	}
	if exact == "" {
		t.Fatal("no token of exactly 16 KiB")
	}
	if _, err := v.Verify(context.Background(), exact); err != nil {
		t.Fatalf("a token of 16 KiB: %v", err)
	}
	if _, err := v.Verify(context.Background(), exact+"A"); err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("a token over 16 KiB: %v; want too long", err)
	}
}

// TestUnknownKidRefreshesAreRateLimitedByDefault: without RefreshInterval,
// tokens naming an unknown kid do not make the Verifier fetch the key set
// again and again (30 s between refreshes).
func TestUnknownKidRefreshesAreRateLimitedByDefault(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.RefreshInterval, c.CacheSize = 0, -1 })
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Fatal(err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ks.mu.Lock()
	ks.keys["stranger"] = other
	ks.mu.Unlock()
	hits := ks.jwksHits.Load()
	for range 3 {
		// Named kid "stranger", published only now: within the interval
		// the Verifier does not look again.
		if _, err := v.Verify(context.Background(), ks.mintWith("stranger", "at+jwt", ks.claims())); err == nil {
			t.Fatal("a token of a key published after the last refresh was accepted within the interval")
		}
	}
	if got := ks.jwksHits.Load() - hits; got > 1 {
		t.Fatalf("%d key set fetches for three tokens of an unknown kid; want at most 1", got)
	}
}

// TestVerifierKeySetSizeLimit: a key set of exactly maxFetchBytes is read,
// one byte more is refused.
func TestVerifierKeySetSizeLimit(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Use: "sig"}}})
	for _, tc := range []struct {
		size int
		ok   bool
	}{{maxFetchBytes, true}, {maxFetchBytes + 1, false}} {
		mux := http.NewServeMux()
		srv := httptest.NewServer(mux)
		mh, _ := metadata.Handler(metadata.AuthorizationServerMetadata{Issuer: srv.URL, JWKSURI: srv.URL + "/jwks", ResponseTypesSupported: []string{"code"}})
		mux.Handle("/.well-known/oauth-authorization-server", mh)
		body := string(set) + strings.Repeat(" ", tc.size-len(set))
		mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		})
		s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k"))
		now := time.Now()
		p, _ := json.Marshal(map[string]any{"iss": srv.URL, "sub": "alice", "aud": testResource, "client_id": "c", "jti": "j",
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
		j, _ := s.Sign(p)
		tok, _ := j.CompactSerialize()
		v, err := NewVerifier(Config{Issuer: srv.URL, Resource: testResource, CacheSize: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(context.Background(), tok)
		srv.Close()
		if tc.ok != (err == nil) {
			t.Errorf("key set of %d bytes: %v", tc.size, err)
		}
	}
}
