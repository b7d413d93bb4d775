package scaletest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/jackc/pgx/v5"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/scaletest/load"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

// cluster starts n instances on one PostgreSQL schema at the same time (so
// their migrations and first keys race), all with one issuer, as behind a
// load balancer; nothing listens at the issuer's own address, every request
// goes to one instance through instance.client.
func cluster(t *testing.T, n int, grace string) []*instance {
	t.Helper()
	ins, _ := clusterOn(t, n, grace)
	return ins
}

// clusterOn is cluster that also returns the URL of the shared schema.
func clusterOn(t *testing.T, n int, grace string) ([]*instance, string) {
	t.Helper()
	dsn, _ := pgtest.Schema(t)
	issuer := "http://" + freeAddr(t)
	ins := make([]*instance, n)
	for i := range ins {
		ins[i] = newInstance(t, conf{issuer: issuer, storage: dsn, grace: grace})
	}
	var wg sync.WaitGroup
	ok := make([]bool, n)
	for i, in := range ins {
		wg.Add(1)
		go func() { defer wg.Done(); ok[i] = in.start(t) }()
	}
	wg.Wait()
	if slices.Contains(ok, false) {
		t.FailNow()
	}
	return ins, dsn
}

// verifier is the resource server's verifier with every fetch (metadata,
// JWKS) going to one instance.
func verifier(t *testing.T, in *instance) *rsmiddleware.Verifier {
	t.Helper()
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{
		Issuer: in.issuer, Resource: resource, HTTPClient: in.client(),
		RefreshInterval: 50 * time.Millisecond, CacheSize: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// token gets a client-credentials token from one instance with
// golang.org/x/oauth2.
func token(t *testing.T, in *instance) string {
	t.Helper()
	cc := clientcredentials.Config{ClientID: botID, ClientSecret: botSecret, TokenURL: in.issuer + "/token",
		Scopes: []string{"mcp:tools"}, AuthStyle: oauth2.AuthStyleInHeader}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), oauth2.HTTPClient, in.client()), 20*time.Second)
	defer cancel()
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatalf("client credentials at %s: %v", in.addr, err)
	}
	return tok.AccessToken
}

func kid(t *testing.T, token string) string {
	t.Helper()
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Headers[0].KeyID
}

func jwksKIDs(t *testing.T, in *instance) []string {
	t.Helper()
	resp, err := in.client().Get(in.issuer + "/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if resp.StatusCode != http.StatusOK || jsonDecode(resp, &set) != nil {
		t.Fatalf("JWKS at %s: %s", in.addr, resp.Status)
	}
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.KeyID)
	}
	slices.Sort(out)
	return out
}

// poll calls cond until it is true or the deadline passes.
func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// keyReload bounds how long an instance takes to see a key written by
// another process (signing.key_reload in docs/CONFIGURATION.md: every 15
// seconds), with room for a slow CI.
const keyReload = 45 * time.Second

func TestInstancesOnOnePostgresAreOneAuthorizationServer(t *testing.T) {
	t.Parallel()
	ins := cluster(t, 3, "")
	ctx := context.Background()

	// Instances that created their first key at the same time end up
	// serving one key set.
	poll(t, keyReload, "the instances serve one key set", func() bool {
		a := jwksKIDs(t, ins[0])
		return slices.Equal(a, jwksKIDs(t, ins[1])) && slices.Equal(a, jwksKIDs(t, ins[2]))
	})

	// A token issued by each instance verifies at the resource server whose
	// verifier only talks to another instance, and is active there.
	vs := make([]*rsmiddleware.Verifier, len(ins))
	for i := range ins {
		vs[i] = verifier(t, ins[i])
	}
	for i := range ins {
		tok := token(t, ins[i])
		j := (i + 1) % len(ins)
		p, err := vs[j].Verify(ctx, tok)
		if err != nil {
			t.Fatalf("a token from instance %d does not verify with the JWKS of instance %d: %v", i, j, err)
		}
		if p.ClientID != botID || !slices.Equal(p.Audience, []string{resource}) || p.Issuer != ins[0].issuer {
			t.Fatalf("principal %+v", p)
		}
		if !ins[j].introspect(t, tok) {
			t.Fatalf("a token from instance %d is inactive at instance %d", i, j)
		}
	}

	// `authserver keys rotate` against the database: every instance serves
	// the new key and signs with it, and tokens signed with it verify at the
	// other instances (the verifiers refetch the JWKS for the unknown kid).
	before := jwksKIDs(t, ins[0])
	out, err := runBin(t, ins[0].dir, "keys", "rotate", "--config", ins[0].cfg)
	if err != nil || !strings.HasPrefix(out, "new signing key ") {
		t.Fatalf("keys rotate: %v\n%s", err, out)
	}
	newKID := strings.Fields(strings.TrimPrefix(out, "new signing key "))[0]
	if slices.Contains(before, newKID) {
		t.Fatalf("the rotated key %s was served before", newKID)
	}
	for i, in := range ins {
		poll(t, keyReload, fmt.Sprintf("instance %d serves and signs with the rotated key", i), func() bool {
			return slices.Contains(jwksKIDs(t, in), newKID) && kid(t, token(t, in)) == newKID
		})
	}
	for i := range ins {
		tok := token(t, ins[i])
		for j := range ins {
			if _, err := vs[j].Verify(ctx, tok); err != nil {
				t.Fatalf("after rotation, a token from instance %d does not verify at instance %d: %v", i, j, err)
			}
		}
	}
}

// codes mints n codes through instance in's login and consent pages.
func codes(t *testing.T, in *instance, n int) []load.Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := load.MintCodes(ctx, load.Config{
		Issuer: in.issuer, Connect: in.addr, Connections: 4, Scope: "mcp:tools", Resource: resource,
		PublicClientID: appID, RedirectURI: redirectURI, Username: username, Password: userPass,
	}, n)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// race sends form to the instances, perInstance requests to each, all
// released at once, and returns the answers.
func race(t *testing.T, ins []*instance, perInstance int, form url.Values) []answer {
	t.Helper()
	var (
		mu   sync.Mutex
		out  []answer
		wg   sync.WaitGroup
		gate = make(chan struct{})
	)
	for _, in := range ins {
		c := in.client()
		for k := 0; k < perInstance; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				a, err := postWith(c, in.issuer+"/token", form, "", "")
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("instance %s: %v", in.addr, err)
					return
				}
				out = append(out, a)
			}()
		}
	}
	close(gate)
	wg.Wait()
	return out
}

// raceForms sends each form once, spread over the instances, all released
// at once.
func raceForms(t *testing.T, ins []*instance, forms []url.Values) []answer {
	t.Helper()
	var (
		mu   sync.Mutex
		out  []answer
		wg   sync.WaitGroup
		gate = make(chan struct{})
	)
	for i, form := range forms {
		in := ins[i%len(ins)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			a, err := postWith(in.client(), in.issuer+"/token", form, "", "")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("instance %s: %v", in.addr, err)
				return
			}
			out = append(out, a)
		}()
	}
	close(gate)
	wg.Wait()
	return out
}

// tally splits answers into successes and failures; every failure must be
// a 400 (never a 5xx or a transport error, which race reports).
func tally(t *testing.T, answers []answer) (ok, failed []answer) {
	t.Helper()
	for _, a := range answers {
		switch a.status {
		case http.StatusOK:
			ok = append(ok, a)
		case http.StatusBadRequest:
			failed = append(failed, a)
		default:
			t.Errorf("answer %d %s, want 200 or 400", a.status, a.raw)
		}
	}
	return ok, failed
}

// invalidGrant checks that every failed answer says invalid_grant: the code
// or refresh token was already used (RFC 6749 §5.2).
func invalidGrant(t *testing.T, failed []answer) {
	t.Helper()
	for _, a := range failed {
		if a.Error != "invalid_grant" {
			t.Errorf("a request that lost the race answered %q, want invalid_grant (RFC 6749 §5.2): %s", a.Error, a.raw)
		}
	}
}

func TestACodeRedeemedAtSeveralInstancesAtOnceSucceedsOnce(t *testing.T) {
	t.Parallel()
	ins := cluster(t, 3, "")
	for round, c := range codes(t, ins[0], 3) {
		ok, failed := tally(t, race(t, ins, 4, codeForm(c.Code, c.Verifier)))
		invalidGrant(t, failed)
		if len(ok) != 1 {
			t.Fatalf("round %d: one code redeemed at 3 instances by 12 requests at once succeeded %d times", round, len(ok))
		}
		// The replays revoked what the code issued (RFC 9700 §4.14.2 applies
		// the same rule to codes, RFC 6749 §4.1.2): the family is consistent
		// on every instance, access and refresh token alike.
		for _, in := range ins {
			if in.introspect(t, ok[0].AccessToken) {
				t.Fatalf("round %d: the access token of a replayed code is still active at %s", round, in.addr)
			}
			if a := in.refresh(t, ok[0].RefreshToken); a.status != http.StatusBadRequest || a.Error != "invalid_grant" {
				t.Fatalf("round %d: the refresh token of a replayed code at %s: %d %s", round, in.addr, a.status, a.raw)
			}
		}
	}
}

func TestConcurrentRefreshesAcrossInstances(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		grace  string
		rounds int // grants raced one after the other
		check  func(t *testing.T, ins []*instance, original string, raced time.Time, ok, failed []answer)
	}{
		{"rotate a refresh token exactly once without a grace window", "0", 4,
			func(t *testing.T, ins []*instance, original string, raced time.Time, ok, failed []answer) {
				if len(ok) != 1 {
					t.Fatalf("one refresh token presented 12 times at 3 instances rotated %d times", len(ok))
				}
				invalidGrant(t, failed)
				// The losers were replays of a rotated token: the family
				// is revoked everywhere, including what the winner got.
				for _, in := range ins {
					if in.introspect(t, ok[0].AccessToken) {
						t.Fatalf("after a replay the winner's access token is active at %s", in.addr)
					}
					if a := in.refresh(t, ok[0].RefreshToken); a.status != http.StatusBadRequest {
						t.Fatalf("after a replay the winner's refresh token refreshed at %s: %s", in.addr, a.raw)
					}
				}
			}},
		{"answer every racing refresh within the grace window and keep the family consistent", "10s", 1,
			func(t *testing.T, ins []*instance, original string, raced time.Time, ok, failed []answer) {
				if len(ok) != 12 {
					t.Fatalf("%d of 12 racing refreshes within the grace window succeeded", len(ok))
				}
				// Every answer is a working grant: its access token is active
				// at every instance and its refresh token rotates once more.
				seen := map[string]bool{}
				var rotated []string // first-generation refresh tokens, rotated below
				for i, a := range ok {
					if seen[a.RefreshToken] {
						t.Fatal("two racing refreshes got the same refresh token")
					}
					seen[a.RefreshToken] = true
					for _, in := range ins {
						if !in.introspect(t, a.AccessToken) {
							t.Fatalf("answer %d: access token inactive at %s", i, in.addr)
						}
					}
					next := ins[i%len(ins)].refresh(t, a.RefreshToken)
					if next.status != http.StatusOK {
						t.Fatalf("answer %d: its refresh token does not refresh: %s", i, next.raw)
					}
					rotated = append(rotated, a.RefreshToken)
					ok[i] = next
				}
				// Once the window has passed, the original and every
				// first-generation token are replays. Presented all at once
				// across the instances (concurrent reuse of many members of
				// one family), each answers invalid_grant, never a 500, and
				// the whole family, every branch the race created, is revoked.
				time.Sleep(11 * time.Second) // past the 10 s window of the last rotation
				var forms []url.Values
				for _, r := range append([]string{original}, rotated...) {
					forms = append(forms, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {r}, "client_id": {appID}})
				}
				replayed, failed := tally(t, raceForms(t, ins, forms))
				if len(replayed) != 0 {
					t.Fatalf("%d replays after the grace window succeeded", len(replayed))
				}
				invalidGrant(t, failed)
				for i, a := range ok {
					in := ins[i%len(ins)]
					if in.introspect(t, a.AccessToken) {
						t.Fatalf("branch %d: access token still active after the family was revoked", i)
					}
					if r := in.refresh(t, a.RefreshToken); r.status != http.StatusBadRequest {
						t.Fatalf("branch %d: refresh token still refreshes after the family was revoked: %s", i, r.raw)
					}
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ins := cluster(t, 3, tc.grace)
			for round, c := range codes(t, ins[0], tc.rounds) {
				first := ins[1].redeem(t, c.Code, c.Verifier)
				if first.status != http.StatusOK || first.RefreshToken == "" {
					t.Fatalf("round %d: code redemption: %d %s", round, first.status, first.raw)
				}
				form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.RefreshToken}, "client_id": {appID}}
				raced := time.Now()
				ok, failed := tally(t, race(t, ins, 4, form))
				tc.check(t, ins, first.RefreshToken, raced, ok, failed)
			}
		})
	}
}

// TestRedemptionsThatReadBeforeTheWinnerCommittedAnswerInvalidGrant makes
// the race deterministic: a test transaction holds the row lock of every
// code or refresh token (SELECT ... FOR UPDATE, as a slow concurrent
// writer would), so all racing requests read the record as active and then
// queue on the conditional UPDATE that decides the race. When the lock goes,
// one wins; the others must fail exactly like a replay: invalid_grant, and
// the grant's tokens revoked (RFC 6749 §4.1.2 for codes, RFC 9700 §4.14.2
// for refresh tokens).
func TestRedemptionsThatReadBeforeTheWinnerCommittedAnswerInvalidGrant(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		kind string // storage.TokenKind of the raced record
		form func(t *testing.T, ins []*instance, c load.Code) url.Values
	}{
		{"a code redeemed by racing requests", "code", func(_ *testing.T, _ []*instance, c load.Code) url.Values {
			return codeForm(c.Code, c.Verifier)
		}},
		{"a refresh token rotated by racing requests without a grace window", "refresh", func(t *testing.T, ins []*instance, c load.Code) url.Values {
			first := ins[1].redeem(t, c.Code, c.Verifier)
			if first.status != http.StatusOK || first.RefreshToken == "" {
				t.Fatalf("code redemption: %d %s", first.status, first.raw)
			}
			return url.Values{"grant_type": {"refresh_token"}, "refresh_token": {first.RefreshToken}, "client_id": {appID}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ins, dsn := clusterOn(t, 3, "0")
			form := tc.form(t, ins, codes(t, ins[0], 1)[0])

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "SELECT 1 FROM tokens WHERE kind = $1 FOR UPDATE", tc.kind); err != nil {
				t.Fatal(err)
			}
			done := make(chan []answer)
			go func() { done <- race(t, ins, 4, form) }()
			// Wait until the racers queue on the lock (or give up waiting
			// after a while: the race still runs, only less sharply).
			waiting := func() int {
				var n int
				conn2, err := pgx.Connect(ctx, dsn)
				if err != nil {
					return 0
				}
				defer conn2.Close(context.Background())
				conn2.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE tokens SET %' AND datname = current_database()`).Scan(&n)
				return n
			}
			deadline := time.Now().Add(15 * time.Second)
			for waiting() < 12 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			ok, failed := tally(t, <-done)
			if len(ok) != 1 {
				t.Fatalf("%d of 12 racing requests succeeded, want 1", len(ok))
			}
			invalidGrant(t, failed)
			for _, in := range ins {
				if in.introspect(t, ok[0].AccessToken) {
					t.Errorf("the winner's access token is still active at %s after the race was lost by replays", in.addr)
				}
				if a := in.refresh(t, ok[0].RefreshToken); a.status != http.StatusBadRequest {
					t.Errorf("the winner's refresh token still refreshes at %s after the race was lost by replays: %s", in.addr, a.raw)
				}
			}
		})
	}
}
