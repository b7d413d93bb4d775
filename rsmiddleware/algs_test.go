package rsmiddleware

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpauth/mcpauth/metadata"
)

func TestVerifyOtherAlgorithms(t *testing.T) {
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mh, _ := metadata.Handler(metadata.AuthorizationServerMetadata{Issuer: srv.URL, JWKSURI: srv.URL + "/jwks", ResponseTypesSupported: []string{"code"}})
	mux.Handle("/.well-known/oauth-authorization-server", mh)
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: edKey.Public(), KeyID: "ed", Algorithm: "EdDSA", Use: "sig"},
			{Key: rsaKey.Public(), KeyID: "rsa", Algorithm: "RS256", Use: "sig"},
			{Key: p384.Public(), KeyID: "p384", Algorithm: "ES384", Use: "sig"},
		}})
	})
	mint := func(alg jose.SignatureAlgorithm, kid string, key crypto.Signer) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", kid))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		p, _ := json.Marshal(map[string]any{"iss": srv.URL, "sub": "alice", "aud": testResource, "client_id": "c", "jti": "j",
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
		j, _ := s.Sign(p)
		out, _ := j.CompactSerialize()
		return out
	}
	newV := func(algs ...string) *Verifier {
		v, err := NewVerifier(Config{Issuer: srv.URL, Resource: testResource, Algorithms: algs, CacheSize: -1})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name  string
		v     *Verifier
		token string
		ok    bool
	}{
		{"accepts EdDSA by default", newV(), mint(jose.EdDSA, "ed", edKey), true},
		{"accepts RS256 by default", newV(), mint(jose.RS256, "rsa", rsaKey), true},
		{"refuses RS256 when the allowlist is ES256 only", newV("ES256"), mint(jose.RS256, "rsa", rsaKey), false},
		{"refuses PS256 under a key published for RS256", newV("RS256", "PS256"), mint(jose.PS256, "rsa", rsaKey), false},
		{"refuses a token naming the other key's kid", newV(), mint(jose.RS256, "ed", rsaKey), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.v.Verify(context.Background(), tt.token)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidToken)) {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
	// Only ES256 headers take the remembered-header path: a second ES384
	// token under the same header verifies by the full path too.
	v := newV("ES384")
	for i := range 2 {
		if _, err := v.Verify(context.Background(), mint(jose.ES384, "p384", p384)); err != nil {
			t.Fatalf("ES384 token %d: %v", i+1, err)
		}
	}
}
