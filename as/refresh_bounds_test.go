package as

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/storage"
)

// TestRotatedRefreshTokenExpiresAtTheGrantEnd: a refresh token issued by
// rotation expires when its grant does (RFC 9700 §4.14.2), not
// RefreshTokenTTL after the rotation.
func TestRotatedRefreshTokenExpiresAtTheGrantEnd(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.GrantLifetime = time.Hour; c.RefreshTokenTTL = 30 * 24 * time.Hour })
	grantedAt := h.clock.Now()
	tok := h.codeFlow("mcp:tools")
	status, body := refresh(h, tok.RefreshToken)
	if status != 200 {
		t.Fatalf("refresh: %d %v", status, body)
	}
	rt, _ := body["refresh_token"].(string)
	rec, err := h.store.GetToken(context.Background(), storage.KindRefreshToken, h.as.tokens.RefreshTokenSignature(context.Background(), rt))
	if err != nil {
		t.Fatal(err)
	}
	if end := grantedAt.Add(time.Hour); rec.ExpiresAt.After(end) {
		t.Fatalf("rotated refresh token expires at %s, after the grant's end %s", rec.ExpiresAt, end)
	}
	if rec.ExpiresAt.Before(grantedAt.Add(59 * time.Minute)) {
		t.Fatalf("rotated refresh token expires at %s, well before the grant's end", rec.ExpiresAt)
	}
}

// TestRefreshOfAGrantStoredWithoutGrantedAtAndScopes: a refresh token whose
// session has neither GrantedAt nor the granted Scopes (records written
// before they were kept) still refreshes, bounded by the token's own scopes.
func TestRefreshOfAGrantStoredWithoutGrantedAtAndScopes(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	now := h.clock.Now()
	sess := &session{Subject: "alice", ExpiresAt: map[fosite.TokenType]time.Time{fosite.RefreshToken: now.Add(time.Hour)}}
	req := &fosite.Request{
		ID: "grant-without-gat", RequestedAt: now, Client: h.as.clients.static["demo-app"],
		RequestedScope: fosite.Arguments{"mcp:tools"}, GrantedScope: fosite.Arguments{"mcp:tools"},
		RequestedAudience: fosite.Arguments{mcpURI}, GrantedAudience: fosite.Arguments{mcpURI},
		Form: url.Values{}, Session: sess,
	}
	rt, sig, err := h.as.tokens.GenerateRefreshToken(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.as.store.CreateRefreshTokenSession(ctx, sig, "", req); err != nil {
		t.Fatal(err)
	}
	status, body := refresh(h, rt)
	if status != 200 || body["scope"] != "mcp:tools" {
		t.Fatalf("refresh: %d %v, want 200 with scope mcp:tools", status, body)
	}
	if _, c := h.claims(body["access_token"].(string)); c["sub"] != "alice" || c["aud"] != mcpURI || c["scope"] != "mcp:tools" {
		t.Fatalf("claims %v", c)
	}
}
