package upstream_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/internal/seal"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/upstream"
)

// TestRecheckAtRefresh signs bob in at the real provider, records him as
// the login pages do, and rechecks him as the AS does at refresh.
func TestRecheckAtRefresh(t *testing.T) {
	op := startOP(t, true)
	var offset time.Duration
	now := func() time.Time { return time.Now().Add(offset) }
	p := provider(t, op, nil)
	ctx := context.Background()
	verifier, nonce := upstream.NewVerifier(), upstream.RandomToken()
	id, err := p.Exchange(ctx, signIn(t, op, p, "bob", "bob-pw", "st", nonce, verifier), verifier, nonce)
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.New([]byte("0123456789abcdef0123456789abcdef-recheck"), "test refresh")
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New()
	const sub = "corp:u-bob"
	if _, err := store.RecordLogin(ctx, &storage.User{Subject: sub, Upstream: "corp", UpstreamSubject: id.Subject, Groups: id.Groups, Claims: id.Claims,
		UpstreamRefresh: sealer.Seal([]byte(id.RefreshToken), []byte(sub)), CheckedAt: now()}); err != nil {
		t.Fatal(err)
	}
	rc := &upstream.Rechecker{Providers: map[string]*upstream.Provider{"corp": p}, After: map[string]time.Duration{"corp": time.Hour}, Store: store, Sealer: sealer, Now: now}
	stored := func() *storage.User {
		u, err := store.GetUser(ctx, sub)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	refused := func(ok bool, err error) bool {
		var rf *upstream.Refusal
		return !ok && errors.As(err, &rf)
	}

	before := stored()
	if ok, err := rc.Recheck(ctx, sub, []string{"mcp:tools"}); !ok || err != nil {
		t.Fatalf("recent confirmation: %v %v", ok, err)
	}
	if !slices.Equal(stored().UpstreamRefresh, before.UpstreamRefresh) {
		t.Fatal("rechecked before recheck_after")
	}
	if ok, err := rc.Recheck(ctx, "alice", []string{"mcp:tools"}); !ok || err != nil {
		t.Fatalf("a local person is not rechecked: %v %v", ok, err)
	}

	offset = 2 * time.Hour
	if ok, err := rc.Recheck(ctx, sub, []string{"mcp:tools", "offline_access"}); !ok || err != nil {
		t.Fatalf("recheck of a person still allowed: %v %v", ok, err)
	}
	after := stored()
	if !after.CheckedAt.After(before.CheckedAt.Add(time.Hour)) || slices.Equal(after.UpstreamRefresh, before.UpstreamRefresh) {
		t.Fatalf("record not updated: checked %s -> %s", before.CheckedAt, after.CheckedAt)
	}
	if rt, err := sealer.Open(after.UpstreamRefresh, []byte(sub)); err != nil || string(rt) == id.RefreshToken {
		t.Fatalf("the rotated refresh token is not what is stored (%v)", err)
	}

	offset = 4 * time.Hour
	if ok, err := rc.Recheck(ctx, sub, []string{"mcp:tools", "mcp:admin"}); !refused(ok, err) {
		t.Fatalf("a grant beyond the person's mapping: %v %v", ok, err)
	}
	if !stored().CheckedAt.Equal(after.CheckedAt) {
		t.Fatal("a refused recheck counted as a confirmation")
	}
	// The refresh token the provider rotated during that recheck was
	// kept: a grant within the mapping still rechecks.
	if ok, err := rc.Recheck(ctx, sub, []string{"mcp:tools"}); !ok || err != nil {
		t.Fatalf("recheck after a refused one: %v %v", ok, err)
	}
	offset = 5 * time.Hour

	op.SetGroups("u-bob", []string{"sales"})
	offset = 6 * time.Hour
	if ok, err := rc.Recheck(ctx, sub, []string{"mcp:tools"}); !refused(ok, err) {
		t.Fatalf("a person who left mcp-users: %v %v", ok, err)
	}
	op.SetGroups("u-bob", []string{"mcp-users"})
	op.RefuseRefresh("u-bob")
	if ok, err := rc.Recheck(ctx, sub, []string{"mcp:tools"}); !refused(ok, err) {
		t.Fatalf("the provider refuses the refresh token: %v %v", ok, err)
	}

	op.Server.Close()
	p2 := provider(t, op, func(c *upstream.Config) { c.Now = now })
	rc.Providers["corp"] = p2
	if ok, err := rc.Recheck(ctx, sub, []string{"mcp:tools"}); ok || err == nil || refused(ok, err) || !errors.Is(err, upstream.ErrUnavailable) {
		t.Fatalf("provider down: %v %v", ok, err)
	}
}
