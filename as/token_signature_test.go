package as

import (
	"context"
	"testing"
)

// TestAccessTokenSignature: the record key of an access token is the
// signature part of a three-part JWS compact serialization (RFC 7515 §7.1),
// and nothing else has one.
func TestAccessTokenSignature(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct{ token, want string }{
		{"aGVhZGVy.cGF5bG9hZA.c2ln", "c2ln"},
		{".cGF5bG9hZA.c2ln", "c2ln"},
		{"aGVhZGVy.cGF5bG9hZA.", ""},
		{"aGVhZGVy.c2ln", ""},
		{"aGVhZGVy.cGF5bG9hZA.ZXh0cmE.c2ln", ""},
		{"c2ln", ""},
		{"", ""},
	} {
		if got := h.as.tokens.AccessTokenSignature(context.Background(), tc.token); got != tc.want {
			t.Errorf("AccessTokenSignature(%q) = %q, want %q", tc.token, got, tc.want)
		}
	}
}
