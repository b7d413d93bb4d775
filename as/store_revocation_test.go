package as

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ory/fosite"

	"github.com/mcpauth/mcpauth/storage"
)

// TestDeleteRefreshTokenSessionDeactivatesTheFamily: fosite's call on
// refresh token reuse deactivates every refresh token of the presented
// token's grant (kept, so later replays still count as reuse), and answers
// nil for a token that is not there.
func TestDeleteRefreshTokenSessionDeactivatesTheFamily(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	now := h.clock.Now()
	sigs := map[string][]string{}
	for _, grant := range []string{"grant-a", "grant-b"} {
		for i := 0; i < 2; i++ {
			req := &fosite.Request{ID: grant, RequestedAt: now, Client: h.as.clients.static["demo-app"],
				GrantedScope: fosite.Arguments{"mcp:tools"}, GrantedAudience: fosite.Arguments{mcpURI}, Form: url.Values{},
				Session: &session{Subject: "alice", ExpiresAt: map[fosite.TokenType]time.Time{fosite.RefreshToken: now.Add(time.Hour)}}}
			_, sig, err := h.as.tokens.GenerateRefreshToken(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.as.store.CreateRefreshTokenSession(ctx, sig, "", req); err != nil {
				t.Fatal(err)
			}
			sigs[grant] = append(sigs[grant], sig)
		}
	}
	if err := h.as.store.DeleteRefreshTokenSession(ctx, sigs["grant-a"][1]); err != nil {
		t.Fatal(err)
	}
	for grant, want := range map[string]bool{"grant-a": false, "grant-b": true} {
		for _, sig := range sigs[grant] {
			rec, err := h.store.GetToken(ctx, storage.KindRefreshToken, sig)
			if err != nil {
				t.Fatalf("%s: the record is gone (%v); want it kept", grant, err)
			}
			if rec.Active != want {
				t.Errorf("%s: a refresh token is active=%v, want %v", grant, rec.Active, want)
			}
		}
	}
	if err := h.as.store.DeleteRefreshTokenSession(ctx, "no-such-signature"); err != nil {
		t.Errorf("an unknown signature: %v, want nil", err)
	}
}

// TestDeletingASeparatePKCERecordLogsNoError: redeeming a code whose
// challenge lives in a KindPKCE record of its own deletes that record
// without logging an error.
func TestDeletingASeparatePKCERecordLogsNoError(t *testing.T) {
	h, logs := newLoggedHarness(t, nil)
	code, verifier := h.authorizeCode()
	separatePKCE(t, h, code)
	resp, body := h.post("/token", url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {appRedirect}, "client_id": {"demo-app"}, "code_verifier": {verifier}}, "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("redemption: %d %v", resp.StatusCode, body)
	}
	if strings.Contains(logs.String(), "deleting PKCE record") {
		t.Fatalf("deleting the PKCE record logged an error:\n%s", logs)
	}
}

// revokeCountingStore counts RevokeTokens calls per kind and answers them
// with err when it is set.
type revokeCountingStore struct {
	*countingStore
	revokes map[storage.TokenKind]int
	err     error
}

func (s *revokeCountingStore) RevokeTokens(ctx context.Context, kind storage.TokenKind, requestID string) error {
	s.mu.Lock()
	s.revokes[kind]++
	s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return s.countingStore.RevokeTokens(ctx, kind, requestID)
}

// TestRevokeRefreshTokenRunsTwiceAndReportsFailure: the revocation of a
// refresh token family runs its statement a second time (for a member
// rotated while the first waited), and a storage failure is returned,
// mapped, not dropped.
func TestRevokeRefreshTokenRunsTwiceAndReportsFailure(t *testing.T) {
	st := &revokeCountingStore{countingStore: newCountingStore(), revokes: map[storage.TokenKind]int{}}
	h := newHarness(t, func(c *Config) { c.Store = st })
	ctx := context.Background()
	if err := h.as.store.RevokeRefreshToken(ctx, "grant-a"); err != nil {
		t.Fatal(err)
	}
	if n := st.revokes[storage.KindRefreshToken]; n != 2 {
		t.Fatalf("RevokeTokens ran %d times, want 2", n)
	}
	st.err = storage.ErrUnavailable
	err := h.as.store.RevokeRefreshToken(ctx, "grant-a")
	if !errors.Is(err, fosite.ErrTemporarilyUnavailable) {
		t.Fatalf("with the store down: %v, want temporarily_unavailable", err)
	}
}
