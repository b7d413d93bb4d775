package as

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/ory/fosite"
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

// TestTokenVerificationNeedsAKidOfOurs: a token signed with a key whose
// kid is not in our key set is a signature mismatch, whatever it claims.
func TestTokenVerificationNeedsAKidOfOurs(t *testing.T) {
	h := newHarness(t, nil)
	now := h.clock.Now()
	stranger, err := newSigningKey("ES256")
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(accessClaims{Issuer: h.issuer, Subject: "alice", Audience: mcpURI, ClientID: "demo-app",
		IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Minute).Unix(), ID: "j1"})
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := stranger.signCompact(payload)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := h.as.tokens.verify(context.Background(), tok); !errors.Is(err, fosite.ErrTokenSignatureMismatch) {
		t.Fatalf("verify of a token with an unknown kid = %+v, %v; want a signature mismatch", c, err)
	}
}
