package as

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestFirstCodeRedemptionIsNotAuditedAsReplay: the code.replayed audit
// event (and the grant revocation that goes with it) belongs to a code
// presented again, never to its first redemption; the revocation of a
// replay logs no error when it succeeds.
func TestFirstCodeRedemptionIsNotAuditedAsReplay(t *testing.T) {
	h, logs := newLoggedHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	verifier := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-replay-1234", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI)))
	code := u.Query().Get("code")
	tok, err := conf.Exchange(context.Background(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	replays := func() int {
		n := 0
		for _, e := range logs.events(t) {
			if e["event"] == "code.replayed" {
				n++
			}
		}
		return n
	}
	if n := replays(); n != 0 {
		t.Fatalf("the first redemption logged %d code.replayed events, want none", n)
	}
	if status, body := refresh(h, tok.RefreshToken); status != 200 {
		t.Fatalf("the grant of a first redemption must stay usable: refresh %d %v", status, body)
	}
	if _, err := conf.Exchange(context.Background(), code, oauth2.VerifierOption(verifier)); err == nil {
		t.Fatal("a replayed code was redeemed")
	}
	if n := replays(); n == 0 {
		t.Fatal("a replayed code logged no code.replayed event")
	}
	// The revocation that answers the replay succeeded: no error of it.
	if strings.Contains(logs.String(), "revoking a grant") {
		t.Fatalf("the replay's revocation logged an error:\n%s", logs)
	}
	if status, body := refresh(h, tok.RefreshToken); status != 400 || body["error"] != "invalid_grant" {
		t.Fatalf("refresh after the replay: %d %v, want invalid_grant (the grant revoked)", status, body)
	}
}
