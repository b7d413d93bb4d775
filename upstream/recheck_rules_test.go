package upstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/upstream"
)

// TestRecheckWhoAndWhen: who is rechecked (a person of a configured
// provider with recheck_after) and when (from exactly recheck_after after
// the last confirmation), and what a recheck without claim_scopes allows.
func TestRecheckWhoAndWhen(t *testing.T) {
	ctx := context.Background()
	sealer, err := seal.New([]byte("0123456789abcdef0123456789abcdef-recheck"), "test refresh")
	if err != nil {
		t.Fatal(err)
	}
	const sub = "fake:u-1"
	cases := []struct {
		name     string
		upstream string // the record's provider
		after    map[string]time.Duration
		mapping  map[string]map[string][]string
		elapsed  time.Duration // since the record's CheckedAt
		scopes   []string
		refresh  bool   // the provider's token endpoint is used
		refusal  string // "" allowed; else words of the Refusal
	}{
		{name: "a provider no longer configured", upstream: "gone", after: map[string]time.Duration{"gone": time.Hour, "fake": time.Hour}, elapsed: 2 * time.Hour, scopes: []string{"s"}},
		{name: "no recheck_after", upstream: "fake", after: map[string]time.Duration{}, elapsed: 1000 * time.Hour, scopes: []string{"s"}},
		{name: "recheck_after zero", upstream: "fake", after: map[string]time.Duration{"fake": 0}, elapsed: 1000 * time.Hour, scopes: []string{"s"}},
		{name: "a second before recheck_after", upstream: "fake", after: map[string]time.Duration{"fake": time.Hour}, elapsed: time.Hour - time.Second, scopes: []string{"s"}},
		{name: "exactly recheck_after, no claim_scopes: any scope", upstream: "fake", after: map[string]time.Duration{"fake": time.Hour}, elapsed: time.Hour, scopes: []string{"mcp:anything", "offline_access"}, refresh: true},
		{name: "claim_scopes allowing the scopes", upstream: "fake", after: map[string]time.Duration{"fake": time.Hour}, elapsed: time.Hour,
			mapping: map[string]map[string][]string{"groups": {"staff": {"s1", "s2"}}}, scopes: []string{"s2", "offline_access"}, refresh: true},
		{name: "two scopes beyond claim_scopes: the first is named", upstream: "fake", after: map[string]time.Duration{"fake": time.Hour}, elapsed: time.Hour,
			mapping: map[string]map[string][]string{"groups": {"staff": {"s1"}}}, scopes: []string{"s1", "x1", "x2"}, refresh: true, refusal: `scope "x1"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fp := newFakeProvider(t)
			p := fp.relyingParty(func(c *upstream.Config) { c.ClaimScopes = tc.mapping })
			c := fp.claims()
			c["groups"] = []any{"staff"}
			fp.answerToken(fp.idToken(c))
			store := memory.New()
			if _, err := store.RecordLogin(ctx, &storage.User{Subject: sub, Upstream: tc.upstream, UpstreamSubject: "u-1",
				UpstreamRefresh: sealer.Seal([]byte("rt-0"), []byte(sub)), CheckedAt: fakeNow}); err != nil {
				t.Fatal(err)
			}
			rc := &upstream.Rechecker{Providers: map[string]*upstream.Provider{"fake": p}, After: tc.after, Store: store, Sealer: sealer,
				Now: func() time.Time { return fakeNow.Add(tc.elapsed) }}
			ok, err := rc.Recheck(ctx, sub, tc.scopes)
			if n := fp.count("/token"); (n == 1) != tc.refresh || n > 1 {
				t.Fatalf("%d token requests; want a refresh: %v", n, tc.refresh)
			}
			if tc.refusal == "" {
				if !ok || err != nil {
					t.Fatalf("refused: %v %v", ok, err)
				}
				return
			}
			var rf *upstream.Refusal
			if ok || !errors.As(err, &rf) || !strings.Contains(rf.Reason, tc.refusal) || strings.Contains(rf.Reason, "x2") {
				t.Fatalf("got %v %v; want a refusal naming %s", ok, err, tc.refusal)
			}
		})
	}
}
