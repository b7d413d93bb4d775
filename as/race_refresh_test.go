package as

import (
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// grantAt runs the code flow at the first instance and redeems the code
// once, returning the tokens.
func grantAt(t *testing.T, hs []*harness, b *browser) (accessToken, refreshToken string) {
	t.Helper()
	conf := hs[0].oauthConfig("demo-app", "")
	verifier := oauth2.GenerateVerifier()
	u := b.authorize(conf.AuthCodeURL("state-abcdefgh", oauth2.S256ChallengeOption(verifier)))
	tok, err := conf.Exchange(t.Context(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("code redemption: %v", err)
	}
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token")
	}
	return tok.AccessToken, tok.RefreshToken
}

// TestRaceOneRefreshTokenWithoutGrace presents one refresh token eight
// times at once across three instances with the grace window disabled:
// exactly one refresh succeeds, every other answers 400 invalid_grant (RFC
// 6749 §5.2: the refresh token is used), none answers 5xx, and since the
// token was presented more than once the family is revoked (RFC 9700
// §4.14.2), including what the one success issued.
func TestRaceOneRefreshTokenWithoutGrace(t *testing.T) {
	for _, be := range raceBackends {
		t.Run("on "+be.name, func(t *testing.T) {
			hs := cluster(t, be.open(t, 3), func(c *Config) { c.RefreshGrace = -1 })
			b := hs[0].browser()
			n := rounds(be.rounds)
			failed := 0
			for round := 0; round < n && failed < 5; round++ {
				at0, rt0 := grantAt(t, hs, b)
				ans := raceOnce(hs, 8, refreshForm(rt0))
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
				rt1, _ := won["refresh_token"].(string)
				at1, _ := won["access_token"].(string)
				if status, body := refresh(hs[1], rt1); status != 400 || body["error"] != "invalid_grant" {
					t.Errorf("round %d: the refresh token issued to a reused token's winner: %d %v", round, status, body)
					failed++
				}
				for _, at := range []string{at0, at1} {
					if active(t, hs[2], at) {
						t.Errorf("round %d: an access token of a reused family is still active", round)
						failed++
					}
				}
			}
		})
	}
}

// TestRaceOneRefreshTokenWithinGrace presents one refresh token eight times
// at once across three instances with a grace window: all succeed, and the
// family stays consistent: every refresh token handed out works, and once
// the window has passed a reuse is refused and revokes them all.
func TestRaceOneRefreshTokenWithinGrace(t *testing.T) {
	for _, be := range raceBackends {
		t.Run("on "+be.name, func(t *testing.T) {
			hs := cluster(t, be.open(t, 3), func(c *Config) { c.RefreshGrace = 2 * time.Second })
			b := hs[0].browser()
			n := rounds(be.rounds / 4)
			failed := 0
			start := clocks(hs)
			for round := 0; round < n && failed < 5; round++ {
				// Each round starts at the same time: the code flow's
				// expiry checks mix the server clock with real time.
				setClocks(hs, start)
				_, rt0 := grantAt(t, hs, b)
				ans := raceOnce(hs, 8, refreshForm(rt0))
				if got := tally(ans); got["200"] != 8 {
					t.Errorf("round %d: answers %s; want eight 200", round, tallyString(got))
					failed++
					continue
				}
				var next []string
				for _, a := range ans {
					rt, _ := a.body["refresh_token"].(string)
					next = append(next, rt)
				}
				// Every refresh token handed out works once, at any instance.
				var last []string
				for i, rt := range next {
					status, body := refresh(hs[(i+1)%len(hs)], rt)
					if status != 200 {
						t.Errorf("round %d: refresh token %d of %d: %d %v", round, i+1, len(next), status, body)
						failed++
						continue
					}
					last = append(last, body["refresh_token"].(string))
				}
				for _, h := range hs {
					h.clock.Advance(3 * time.Second)
				}
				// Past the window, a second use is reuse: refused, and the
				// whole family goes.
				if status, body := refresh(hs[0], next[0]); status != 400 || body["error"] != "invalid_grant" {
					t.Errorf("round %d: reuse after the window: %d %v", round, status, body)
					failed++
				}
				for _, rt := range last {
					if status, body := refresh(hs[2], rt); status != 400 || body["error"] != "invalid_grant" {
						t.Errorf("round %d: a family member survived reuse: %d %v", round, status, body)
						failed++
						break
					}
				}
			}
		})
	}
}

// TestRaceReuseOfSeveralFamilyMembers replays several used members of one
// refresh-token family at once, past the grace window, across three
// instances: each replay is reuse and revokes the same family, and the
// revocations must wait for each other rather than deadlock (which
// PostgreSQL would break by failing one of them: a 5xx). Every answer is
// 400 invalid_grant and the family's newest token is revoked.
func TestRaceReuseOfSeveralFamilyMembers(t *testing.T) {
	for _, be := range raceBackends {
		t.Run("on "+be.name, func(t *testing.T) {
			hs := cluster(t, be.open(t, 3), func(c *Config) { c.RefreshGrace = time.Second })
			b := hs[0].browser()
			n := rounds(be.rounds / 4)
			failed := 0
			start := clocks(hs)
			for round := 0; round < n && failed < 5; round++ {
				// Each round starts at the same time: the code flow's
				// expiry checks mix the server clock with real time.
				setClocks(hs, start)
				_, rt := grantAt(t, hs, b)
				chain := []string{rt}
				for i := 0; i < 6; i++ {
					status, body := refresh(hs[i%len(hs)], rt)
					if status != 200 {
						t.Fatalf("round %d: refresh %d: %d %v", round, i, status, body)
					}
					rt = body["refresh_token"].(string)
					chain = append(chain, rt)
				}
				for _, h := range hs {
					h.clock.Advance(2 * time.Second)
				}
				// Replay every used member (all but the newest) at once.
				used := chain[:len(chain)-1]
				ans := raceEach(hs, used)
				got := tally(ans)
				if bad := fiveHundreds(ans); len(bad) > 0 {
					t.Errorf("round %d: %d answers were 5xx, first %d %v", round, len(bad), bad[0].status, bad[0].body)
				}
				if got["400 invalid_grant"] != len(used) {
					t.Errorf("round %d: answers %s; want %d x 400 invalid_grant", round, tallyString(got), len(used))
					failed++
				}
				if status, body := refresh(hs[0], rt); status != 400 || body["error"] != "invalid_grant" {
					t.Errorf("round %d: the newest member survived reuse: %d %v", round, status, body)
					failed++
				}
			}
		})
	}
}
