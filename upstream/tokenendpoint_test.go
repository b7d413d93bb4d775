package upstream_test

import (
	"context"
	"crypto"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/mcpauth/mcpauth/upstream"
)

// TestTokenEndpointAnswers: an OAuth error answer of the token endpoint
// (RFC 6749 §5.2: an error code, or HTTP 400 or 401) is the provider
// refusing the grant; anything else that is not a token is the provider
// being unusable. Both for the code exchange (client_secret_basic) and the
// refresh with a private_key_jwt assertion (RFC 7523 §2.2).
func TestTokenEndpointAnswers(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   map[string]any
		want   error
	}{
		{"400 without error code", http.StatusBadRequest, map[string]any{}, upstream.ErrRefused},
		{"401 without error code", http.StatusUnauthorized, map[string]any{}, upstream.ErrRefused},
		{"403 with an error code", http.StatusForbidden, map[string]any{"error": "access_denied"}, upstream.ErrRefused},
		{"200 with an error code", http.StatusOK, map[string]any{"error": "invalid_grant"}, upstream.ErrRefused},
		{"500 without error code", http.StatusInternalServerError, map[string]any{}, upstream.ErrUnavailable},
		{"502 without error code", http.StatusBadGateway, map[string]any{}, upstream.ErrUnavailable},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fp := newFakeProvider(t)
			fp.set(func(fp *fakeProvider) { fp.tokenStatus, fp.tokenBody = tc.status, tc.body })
			id, err := fp.relyingParty(nil).Exchange(ctx, "code", "verifier", "n-1")
			if !errors.Is(err, tc.want) || id != nil {
				t.Fatalf("code exchange: got %v, %v; want %v", id, err, tc.want)
			}
			p := fp.relyingParty(func(c *upstream.Config) {
				c.ClientSecret, c.PrivateKey, c.KeyID, c.KeyAlg = "", crypto.Signer(newECKey(t)), "rp-1", "ES256"
			})
			id, err = p.Refresh(ctx, "rt-0", "u-1")
			if !errors.Is(err, tc.want) || id != nil {
				t.Fatalf("refresh with an assertion: got %v, %v; want %v", id, err, tc.want)
			}
		})
	}
	t.Run("token endpoint unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + l.Addr().String() + "/token"
		l.Close()
		fp := newFakeProvider(t)
		fp.set(func(fp *fakeProvider) { fp.meta["token_endpoint"] = closed })
		if id, err := fp.relyingParty(nil).Exchange(ctx, "code", "verifier", "n-1"); !errors.Is(err, upstream.ErrUnavailable) || id != nil {
			t.Fatalf("got %v, %v", id, err)
		}
	})
}

// TestTokenEndpointClientAuthentication: the client secret goes in the
// Authorization header (client_secret_basic, the default when the provider
// lists no method) unless the provider lists client_secret_post and not
// client_secret_basic (RFC 6749 §2.3.1).
func TestTokenEndpointClientAuthentication(t *testing.T) {
	for _, tc := range []struct {
		name    string
		methods []string
		post    bool
	}{
		{"none listed", nil, false},
		{"basic only", []string{"client_secret_basic"}, false},
		{"post only", []string{"client_secret_post"}, true},
		{"basic and post", []string{"client_secret_post", "client_secret_basic"}, false},
		{"neither", []string{"private_key_jwt"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := newFakeProvider(t)
			if tc.methods != nil {
				fp.set(func(fp *fakeProvider) { fp.meta["token_endpoint_auth_methods_supported"] = tc.methods })
			}
			fp.answerToken(fp.idToken(fp.claims()))
			if _, err := fp.relyingParty(nil).Exchange(context.Background(), "code", "verifier", "n-1"); err != nil {
				t.Fatal(err)
			}
			var auth, secret string
			fp.set(func(fp *fakeProvider) { auth, secret = fp.tokenAuth, fp.tokenForm.Get("client_secret") })
			if tc.post {
				if auth != "" || secret != "s3cret-s3cret" {
					t.Fatalf("Authorization %q, client_secret %q; want the secret in the body", auth, secret)
				}
				return
			}
			if auth == "" || secret != "" {
				t.Fatalf("Authorization %q, client_secret %q; want HTTP Basic", auth, secret)
			}
		})
	}
}
