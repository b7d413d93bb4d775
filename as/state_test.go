package as

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestStateIsOptionalAndReturnedExactly: state belongs to the client and is
// optional with PKCE (OAuth 2.1 §4.1.1, §7.12). A request without one, or
// with one of any length, gets a code; the redirect carries state exactly as
// sent, or none when none was sent (RFC 6749 §4.1.2), on success and on
// error alike.
func TestStateIsOptionalAndReturnedExactly(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	states := []struct {
		name  string
		state string
	}{
		{"no state", ""},
		{"one character", "x"},
		{"seven characters", "abcdefg"},
		{"reserved and non-ASCII characters", "a b+c/d?e=f&g%h#i;é"},
		{"a long value", strings.Repeat("s", 1500)},
	}
	for _, tc := range states {
		t.Run("success with "+tc.name, func(t *testing.T) {
			v := oauth2.GenerateVerifier()
			u := h.browser().authorize(conf.AuthCodeURL(tc.state, oauth2.S256ChallengeOption(v)))
			q := u.Query()
			if q.Get("code") == "" || q.Get("error") != "" {
				t.Fatalf("redirected to %s, want a code", u)
			}
			checkState(t, q["state"], tc.state)
			tok, err := conf.Exchange(context.Background(), q.Get("code"), oauth2.VerifierOption(v))
			if err != nil || tok.AccessToken == "" {
				t.Fatalf("exchange: %v", err)
			}
		})
		t.Run("error with "+tc.name, func(t *testing.T) {
			// A plain PKCE challenge is refused after the client and its
			// redirect URI are known: the error goes back to the client.
			p := h.browser().get(conf.AuthCodeURL(tc.state, oauth2.SetAuthURLParam("code_challenge", strings.Repeat("a", 43)),
				oauth2.SetAuthURLParam("code_challenge_method", "plain")))
			u := redirected(t, p)
			q := u.Query()
			if q.Get("error") != "invalid_request" || q.Get("iss") != h.issuer {
				t.Fatalf("redirected to %s, want invalid_request with iss", u)
			}
			checkState(t, q["state"], tc.state)
		})
	}
}

func checkState(t *testing.T, got []string, sent string) {
	t.Helper()
	switch {
	case sent == "" && len(got) != 0:
		t.Errorf("state %q in the redirect, want none (none was sent)", got)
	case sent != "" && (len(got) != 1 || got[0] != sent):
		t.Errorf("state %q in the redirect, want exactly %q", got, sent)
	}
}
