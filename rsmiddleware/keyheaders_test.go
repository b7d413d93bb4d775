package rsmiddleware

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

// TestVerifyNeverFollowsKeyLocationHeaders: a token signed by an attacker's
// key that names the attacker's key set in jku or x5u (with our kid), or
// embeds the key, is refused, and the named URLs are never fetched. Keys
// come only from the configured issuer's JWKS, by kid (SECURITY-CHECKLIST,
// "JWT handling everywhere").
func TestVerifyNeverFollowsKeyLocationHeaders(t *testing.T) {
	ks := newKeyServer(t)
	v := ks.verifier(t, func(c *Config) { c.CacheSize = -1 })
	attacker, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var fetched atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: attacker.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	}))
	t.Cleanup(evil.Close)
	sign := func(opts *jose.SignerOptions) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: attacker}, opts.WithType("at+jwt").WithHeader("kid", "k1"))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := json.Marshal(ks.claims())
		j, err := s.Sign(p)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := j.CompactSerialize()
		return out
	}
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"refuses a token naming the attacker's key set in jku", sign((&jose.SignerOptions{}).WithHeader("jku", evil.URL))},
		{"refuses a token naming the attacker's certificate in x5u", sign((&jose.SignerOptions{}).WithHeader("x5u", evil.URL))},
		{"refuses a token embedding the attacker's key", sign(&jose.SignerOptions{EmbedJWK: true})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p, err := v.Verify(context.Background(), tc.token); err == nil {
				t.Fatalf("Verify accepted it: %+v", p)
			} else if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("err = %v, want ErrInvalidToken", err)
			}
		})
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the verifier fetched a URL named in a token header %d times", n)
	}
	// The genuine key still verifies.
	if _, err := v.Verify(context.Background(), ks.mint(ks.claims())); err != nil {
		t.Errorf("a genuine token: %v", err)
	}
}
