package as

import (
	"context"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
)

const xchSecret = "xch-secret-0123456789abcdefghijkl"

// ruleHarness is the standard harness with a third resource (default scope
// third:read), a client "xch" that may exchange tokens towards it with
// either of its scopes, and policy as the exchange policy.
func ruleHarness(t *testing.T, policy []ExchangeRule, mod func(*Config)) *harness {
	t.Helper()
	return newHarness(t, func(c *Config) {
		c.Resources = append(c.Resources, Resource{URI: thirdURI, Name: "Third",
			Scopes: []string{"third:read", "third:write"}, DefaultScopes: []string{"third:read"}})
		c.Clients = append(c.Clients, Client{ID: "xch", Secret: xchSecret, GrantTypes: []string{GrantTypeTokenExchange},
			Resources: []string{thirdURI}, Scopes: []string{"third:read", "third:write"}})
		c.ExchangePolicy = policy
		if mod != nil {
			mod(c)
		}
	})
}

// TestExchangeTakesTheFirstRuleFromTheSubjectsResource: of the rules
// towards the target, those from another resource are passed over and the
// first one from the subject token's resource applies.
func TestExchangeTakesTheFirstRuleFromTheSubjectsResource(t *testing.T) {
	h := ruleHarness(t, []ExchangeRule{
		{From: otherURI, To: thirdURI, Scopes: []string{"third:write"}},
		{From: mcpURI, To: thirdURI, Scopes: []string{"third:read"}},
		{From: mcpURI, To: thirdURI, Scopes: []string{"third:write"}},
	}, nil)
	user := h.codeFlow("mcp:tools")
	resp, body := h.post("/token", exchangeForm(user.AccessToken, thirdURI), "xch", xchSecret)
	if resp.StatusCode != 200 || body["scope"] != "third:read" {
		t.Fatalf("exchange: %d %v, want 200 with the second rule's scope third:read", resp.StatusCode, body)
	}
}

// TestExchangeDefaultScopes: an exchange naming no scope gets the target's
// DefaultScopes within the rule, or, when the rule allows none of them,
// every scope the rule allows.
func TestExchangeDefaultScopes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rule  []string
		scope string
	}{
		{"the target's default scopes within the rule", []string{"third:read", "third:write"}, "third:read"},
		{"the rule's scopes when it allows no default one", []string{"third:write"}, "third:write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := ruleHarness(t, []ExchangeRule{{From: mcpURI, To: thirdURI, Scopes: tc.rule}}, nil)
			user := h.codeFlow("mcp:tools")
			resp, body := h.post("/token", exchangeForm(user.AccessToken, thirdURI), "xch", xchSecret)
			if resp.StatusCode != 200 || body["scope"] != tc.scope {
				t.Fatalf("exchange: %d %v, want 200 with scope %q", resp.StatusCode, body, tc.scope)
			}
		})
	}
}

// TestSubjectRevokedDuringAnExchangeIsRefused: a subject token revoked
// after the exchange verified it and before the new token is answered
// makes the exchange invalid_grant, and the token issued meanwhile is
// deactivated.
func TestSubjectRevokedDuringAnExchangeIsRefused(t *testing.T) {
	cs := newCountingStore()
	h := ruleHarness(t, []ExchangeRule{{From: mcpURI, To: thirdURI, Scopes: []string{"third:read"}}},
		func(c *Config) { c.Store = cs })
	user := h.codeFlow("mcp:tools")
	ctx := context.Background()
	subjectSig := h.as.tokens.AccessTokenSignature(ctx, user.AccessToken)
	armed := true
	cs.afterGet = func(kind storage.TokenKind) {
		if kind == storage.KindAccessToken && armed {
			armed = false // revoked right after the first check read it
			if err := cs.Store.DeactivateToken(ctx, storage.KindAccessToken, subjectSig); err != nil {
				t.Error(err)
			}
		}
	}
	cs.reset()
	resp, body := h.post("/token", exchangeForm(user.AccessToken, thirdURI), "xch", xchSecret)
	if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("exchange: %d %v, want 400 invalid_grant", resp.StatusCode, body)
	}
	cs.mu.Lock()
	created := cs.created
	cs.mu.Unlock()
	issued := 0
	for _, rec := range created {
		if rec.Kind != storage.KindAccessToken {
			continue
		}
		issued++
		got, err := cs.Store.GetToken(ctx, storage.KindAccessToken, rec.Signature)
		if err != nil || got.Active {
			t.Errorf("the token issued by the refused exchange: %+v, %v; want it inactive", got, err)
		}
	}
	if issued != 1 {
		t.Fatalf("the refused exchange stored %d access tokens, want the one it deactivated", issued)
	}
}
