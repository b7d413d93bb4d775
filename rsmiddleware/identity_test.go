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
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

type identityFixture struct {
	key *ecdsa.PrivateKey
	srv *httptest.Server
	v   *IdentityVerifier
}

const identityAud = "http://upstream.example/mcp"

func newIdentityFixture(t *testing.T) *identityFixture {
	t.Helper()
	fx := &identityFixture{}
	fx.key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	fx.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != IdentityJWKSPath {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &fx.key.PublicKey, KeyID: "k1", Algorithm: "ES256"}}})
	}))
	t.Cleanup(fx.srv.Close)
	var err error
	fx.v, err = NewIdentityVerifier(IdentityVerifierConfig{Issuer: fx.srv.URL + "/mcp", Audience: identityAud})
	if err != nil {
		t.Fatal(err)
	}
	return fx
}

func (fx *identityFixture) sign(t *testing.T, alg jose.SignatureAlgorithm, key any, kid, typ string, mod func(map[string]any)) string {
	t.Helper()
	now := time.Now()
	c := map[string]any{"iss": fx.srv.URL + "/mcp", "aud": identityAud, "sub": "alice", "client_id": "app", "scope": "a b",
		"groups": []string{"ops"}, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": "j1"}
	if mod != nil {
		mod(c)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestIdentityVerifier(t *testing.T) {
	fx := newIdentityFixture(t)
	good := fx.sign(t, jose.ES256, fx.key, "k1", IdentityType, nil)
	c, err := fx.v.Verify(context.Background(), good)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "alice" || c.ClientID != "app" || len(c.Scopes()) != 2 || c.Extra["groups"].([]any)[0] != "ops" {
		t.Errorf("claims %+v", c)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, tc := range []struct {
		name string
		tok  string
	}{
		{"refuses another typ", fx.sign(t, jose.ES256, fx.key, "k1", "at+jwt", nil)},
		{"refuses HS256", fx.sign(t, jose.HS256, []byte("0123456789abcdef0123456789abcdef"), "k1", IdentityType, nil)},
		{"refuses another key under the kid", fx.sign(t, jose.ES256, other, "k1", IdentityType, nil)},
		{"refuses an unknown kid", fx.sign(t, jose.ES256, fx.key, "k2", IdentityType, nil)},
		{"refuses another issuer", fx.sign(t, jose.ES256, fx.key, "k1", IdentityType, func(c map[string]any) { c["iss"] = "http://evil/mcp" })},
		{"refuses another audience", fx.sign(t, jose.ES256, fx.key, "k1", IdentityType, func(c map[string]any) { c["aud"] = "http://other/mcp" })},
		{"refuses an expired JWT", fx.sign(t, jose.ES256, fx.key, "k1", IdentityType, func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() })},
		{"refuses a JWT without sub", fx.sign(t, jose.ES256, fx.key, "k1", IdentityType, func(c map[string]any) { delete(c, "sub") })},
		{"refuses garbage", "a.b.c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := fx.v.Verify(context.Background(), tc.tok); !errors.Is(err, ErrIdentity) {
				t.Fatalf("err = %v, want ErrIdentity", err)
			}
		})
	}
	h := fx.v.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := IdentityFromContext(r.Context())
		_, _ = w.Write([]byte(c.Subject))
	}))
	for _, tc := range []struct {
		vals   []string
		status int
	}{{nil, 401}, {[]string{good, good}, 401}, {[]string{"x"}, 401}, {[]string{good}, 200}} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header[http.CanonicalHeaderKey(DefaultIdentityHeader)] = tc.vals
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status || tc.status == 200 && w.Body.String() != "alice" {
			t.Errorf("%d headers: %d %s", len(tc.vals), w.Code, w.Body)
		}
	}
	if _, err := NewIdentityVerifier(IdentityVerifierConfig{Issuer: "x"}); err == nil {
		t.Error("a verifier without audience")
	}
}
