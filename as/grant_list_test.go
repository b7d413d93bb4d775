package as

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// TestListGrantsLimit: ListGrants returns at most limit grants, and up to
// maxGrantList when limit is zero or negative (the store itself would
// return them all).
func TestListGrantsLimit(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	now := h.clock.Now()
	for i := range maxGrantList + 1 {
		if err := h.store.CreateToken(ctx, &storage.Token{
			Kind: storage.KindAccessToken, Signature: fmt.Sprintf("sig-%d", i), RequestID: fmt.Sprintf("grant-%d", i),
			ClientID: "ci-bot", Active: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour),
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ limit, want int }{{1, 1}, {2, 2}, {0, maxGrantList}, {-1, maxGrantList}} {
		gs, err := h.as.ListGrants(ctx, GrantFilter{Client: "ci-bot"}, tc.limit)
		if err != nil || len(gs) != tc.want {
			t.Errorf("ListGrants(limit %d) = %d grants, %v; want %d", tc.limit, len(gs), err, tc.want)
		}
	}
}

// TestFederatedSubject: a subject is federated only when it is
// "<iss>#<sub>" with iss a configured enterprise IdP or workload issuer.
func TestFederatedSubject(t *testing.T) {
	s := &Server{cfg: Config{
		EnterpriseIdPs:  []EnterpriseIdP{{Issuer: "https://idp.example"}, {Issuer: "https://idp2.example"}},
		WorkloadIssuers: []WorkloadIssuer{{Issuer: "https://wl.example"}, {Issuer: "spiffe://example.org"}},
	}}
	for sub, want := range map[string]bool{
		"https://idp.example#alice":   true,
		"https://idp2.example#alice":  true,
		"https://wl.example#job":      true,
		"spiffe://example.org#x":      true,
		"https://other.example#alice": false,
		"https://idp.example":         false,
		"alice":                       false,
		"":                            false,
	} {
		if got := s.federatedSubject(sub); got != want {
			t.Errorf("federatedSubject(%q) = %v, want %v", sub, got, want)
		}
	}
}
