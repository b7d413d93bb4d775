package rsmiddleware

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// labelled passes an answer through with its Content-Type set to ct.
type labelled struct {
	http.ResponseWriter
	ct string
}

func (l *labelled) WriteHeader(code int) {
	l.Header().Set("Content-Type", l.ct)
	l.ResponseWriter.WriteHeader(code)
}

func (l *labelled) Write(b []byte) (int, error) {
	l.Header().Set("Content-Type", l.ct)
	return l.ResponseWriter.Write(b)
}

// TestJWKSMediaType: a JWK Set served as application/jwk-set+json (RFC 7517
// §8.5.1) is accepted; the AS metadata served with that type is not (RFC 8414
// §3.2 says application/json). Fails if either fetch changes its media types.
func TestJWKSMediaType(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		ok         bool
	}{
		{"accepts a JWK Set labelled application/jwk-set+json", "/jwks.json", true},
		{"refuses AS metadata labelled application/jwk-set+json", "/.well-known/oauth-authorization-server", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var next http.Handler
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == tc.path {
					w = &labelled{ResponseWriter: w, ct: "application/jwk-set+json"}
				}
				next.ServeHTTP(w, r)
			}))
			t.Cleanup(front.Close)
			ks := newKeyServerAt(t, front.URL)
			next = ks.srv.Config.Handler
			v := ks.verifier(t, func(c *Config) { c.HTTPClient = front.Client() })
			_, err := v.Verify(context.Background(), ks.mint(ks.claims()))
			if tc.ok && err != nil {
				t.Fatalf("verify: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrUnavailable) {
				t.Fatalf("verify: %v; want ErrUnavailable (no usable metadata)", err)
			}
		})
	}
}
