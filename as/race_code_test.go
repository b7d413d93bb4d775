package as

import (
	"net/url"
	"testing"

	"golang.org/x/oauth2"
)

// TestRaceOneCodeRedeemedAtSeveralInstances redeems each of many codes
// eight times at once across three instances sharing one store: exactly one
// redemption succeeds, every other answers 400 invalid_grant (RFC 6749
// §5.2), none answers 5xx, and what the one success issued is revoked
// because the code was presented more than once (RFC 6749 §4.1.2).
func TestRaceOneCodeRedeemedAtSeveralInstances(t *testing.T) {
	for _, be := range raceBackends {
		t.Run("on "+be.name, func(t *testing.T) {
			hs := cluster(t, be.open(t, 3), nil)
			b := hs[0].browser()
			conf := hs[0].oauthConfig("demo-app", "")
			n := rounds(be.rounds)
			failed := 0
			for round := 0; round < n && failed < 5; round++ {
				verifier := oauth2.GenerateVerifier()
				u := b.authorize(conf.AuthCodeURL("state-abcdefgh", oauth2.S256ChallengeOption(verifier)))
				code := u.Query().Get("code")
				if code == "" {
					t.Fatalf("round %d: no code in %s", round, u)
				}
				form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {appRedirect},
					"client_id": {"demo-app"}, "code_verifier": {verifier}}
				ans := raceOnce(hs, 8, form)
				got := tally(ans)
				if bad := fiveHundreds(ans); len(bad) > 0 {
					t.Errorf("round %d: %d answers were 5xx, first %d %v", round, len(bad), bad[0].status, bad[0].body)
				}
				if got["200"] != 1 || got["400 invalid_grant"] != 7 {
					t.Errorf("round %d: answers %s; want one 200 and seven 400 invalid_grant", round, tallyString(got))
					failed++
					continue
				}
				var won map[string]any
				for _, a := range ans {
					if a.status == 200 {
						won = a.body
					}
				}
				at, _ := won["access_token"].(string)
				rt, _ := won["refresh_token"].(string)
				if at == "" || rt == "" {
					t.Fatalf("round %d: token response without tokens: %v", round, won)
				}
				if active(t, hs[1], at) {
					t.Errorf("round %d: the access token of a code presented eight times is still active", round)
					failed++
				}
				if status, body := refresh(hs[2], rt); status != 400 || body["error"] != "invalid_grant" {
					t.Errorf("round %d: the refresh token of a code presented eight times: %d %v", round, status, body)
					failed++
				}
			}
		})
	}
}
