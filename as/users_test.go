package as

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

// openPostgresDSN opens and migrates the PostgreSQL store at dsn.
func openPostgresDSN(t *testing.T, dsn string, maxConns int32) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{MaxConns: maxConns})
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestAUserDisabledInTheStoreIsRefusedAtRefreshAndIntrospection(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	tok := h.codeFlow("mcp:tools")
	if !active(t, h, tok.AccessToken) {
		t.Fatal("fresh access token inactive")
	}
	if err := h.store.SetUserDisabled(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	if status, body := refresh(h, tok.RefreshToken); status != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("refresh of a disabled user's grant: %d %v", status, body)
	}
	if active(t, h, tok.AccessToken) {
		t.Error("a disabled user's access token is active at introspection")
	}
	gs, err := h.as.ListGrants(ctx, GrantFilter{User: "alice"}, 0)
	if err != nil || len(gs) != 1 || !gs[0].Orphaned || gs[0].OrphanedBecause != "user" {
		t.Fatalf("ListGrants of a disabled user = %+v, %v; want one orphaned grant", gs, err)
	}
	// The refusal rotated nothing: the AS alone revokes nothing, so once
	// the record is enabled again the same refresh token works.
	if err := h.store.SetUserDisabled(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	if status, body := refresh(h, tok.RefreshToken); status != 200 {
		t.Fatalf("refresh after enabling: %d %v", status, body)
	}
}

func TestAnUpstreamUserIsActiveWhileTheirUpstreamIsConfigured(t *testing.T) {
	var cfg Config
	h := newHarness(t, func(c *Config) { cfg = *c })
	ctx := context.Background()
	tok := h.codeFlow("mcp:tools")
	// The person's record says they signed in through upstream "corp";
	// the restarted server has no local alice.
	if _, err := h.store.RecordLogin(ctx, &storage.User{Subject: "alice", Upstream: "corp", UpstreamSubject: "00u1"}); err != nil {
		t.Fatal(err)
	}
	serve := func(upstreams ...string) {
		c := cfg
		c.UpstreamIDs = upstreams
		h2 := restart(t, h, c, []loginui.User{{Username: "bob", PasswordHash: aliceHash}})
		h.as = h2.as
		h.srv.Config.Handler = h2.as.Handler()
	}

	serve("other", "corp")
	status, body := refresh(h, tok.RefreshToken)
	if status != 200 {
		t.Fatalf("refresh of an upstream user whose upstream is configured: %d %v", status, body)
	}
	at, rt := body["access_token"].(string), body["refresh_token"].(string)
	if !active(t, h, at) {
		t.Fatal("an upstream user's access token is inactive while the upstream is configured")
	}

	serve("other")
	if status, body := refresh(h, rt); status != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("refresh after the upstream was removed: %d %v", status, body)
	}
	if active(t, h, at) {
		t.Error("access token active after its person's upstream was removed")
	}

	serve("corp")
	if err := h.store.SetUserDisabled(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	if status, body := refresh(h, rt); status != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("refresh of a disabled upstream user: %d %v", status, body)
	}
}

// A record that cannot be read is never taken as an answer: with the
// users table locked by another session, refresh and introspection answer
// 503 temporarily_unavailable, rotate nothing, and work once it is free.
func TestAnUnreadableUserRecordIsNeverAGrant(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	store := openPostgresDSN(t, dsn+"&lock_timeout=200ms", 4)
	h := newHarness(t, func(c *Config) { c.Store = store })
	tok := h.codeFlow("mcp:tools")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE users IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	status, body := refresh(h, tok.RefreshToken)
	if status != 503 || body["error"] != "temporarily_unavailable" {
		t.Fatalf("refresh while the user record cannot be read: %d %v", status, body)
	}
	resp, ib := h.post("/introspect", url.Values{"token": {tok.AccessToken}}, "rs", rsSecret)
	if resp.StatusCode != 503 || ib["error"] != "temporarily_unavailable" || ib["active"] != nil {
		t.Fatalf("introspection while the user record cannot be read: %d %v", resp.StatusCode, ib)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing was rotated: the same refresh token still works.
	if status, body = refresh(h, tok.RefreshToken); status != 200 {
		t.Fatalf("refresh once the record is readable: %d %v", status, body)
	}
}
