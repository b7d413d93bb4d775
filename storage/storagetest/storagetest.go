// Package storagetest is the conformance suite every storage.Store backend
// runs. A backend is correct when RunTests passes against it:
//
//	func TestConformance(t *testing.T) {
//		storagetest.RunTests(t, func(t *testing.T) storage.Store {
//			return newEmptyStore(t) // closed by t.Cleanup
//		})
//	}
//
// The concurrency cases (exactly-once code redemption, refresh rotation, jti
// use, serialised client updates) are part of the suite and cannot be
// skipped. Subtests run in parallel, each on its own fresh store.
//
// The rules it checks come from RFC 6749 §4.1.2 and §10.5 (a code is redeemed
// once), RFC 9700 §4.14.2 (refresh rotation, reuse revokes the family),
// RFC 7009 §2.1 (revoking a refresh token revokes its family) and RFC 7523 §3
// (a jti is accepted once); approvals of tool calls are decided once and
// used once.
package storagetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// Concurrency is the number of goroutines in each race.
const Concurrency = 32

// RunTests runs the whole suite. newStore must return an empty store that is
// closed when t ends.
func RunTests(t *testing.T, newStore func(t *testing.T) storage.Store) {
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"clients", clientCases},
		{"tokens", tokenCases},
		{"grants", grantCases},
		{"grant races", raceCases},
		{"statuses", statusCases},
		{"consents", consentCases},
		{"keys", keyCases},
		{"jtis", jtiCases},
		{"counters", counterCases},
		{"sessions", sessionCases},
		{"users", userCases},
		{"approvals", approvalCases},
		{"audit events", auditCases},
		{"hourly stats", statsCases},
		{"tokens with users", tokenUserCases},
		{"transactions", txCases},
		{"values", roundTripCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					s := newStore(t)
					tc.run(t, s)
				})
			}
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, s storage.Store)
}

// now is a base time every backend can store exactly: UTC, whole
// milliseconds (PostgreSQL keeps microseconds, SQLite nanoseconds).
func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

func ok(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", what, err)
	}
}

func is(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// race runs f in n goroutines released at once and returns how many
// returned nil and the distinct non-nil errors.
func race(n int, f func(i int) error) (succeeded int, errs []error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		start = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err := f(i)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				succeeded++
			} else {
				errs = append(errs, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	return succeeded, errs
}

// allAre fails unless every error is (wraps) want.
func allAre(t *testing.T, errs []error, want error) {
	t.Helper()
	for _, err := range errs {
		if !errors.Is(err, want) {
			t.Fatalf("got error %v, want %v", err, want)
		}
	}
}

func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func normStrings(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func normBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func normClient(c storage.Client) storage.Client {
	c.SecretHash = normBytes(c.SecretHash)
	c.SecretExpiresAt = normTime(c.SecretExpiresAt)
	c.RedirectURIs = normStrings(c.RedirectURIs)
	c.GrantTypes = normStrings(c.GrantTypes)
	c.ResponseTypes = normStrings(c.ResponseTypes)
	c.Scopes = normStrings(c.Scopes)
	c.Resources = normStrings(c.Resources)
	c.JWKS = normBytes(c.JWKS)
	c.Metadata = normBytes(c.Metadata)
	c.RegistrationTokenHash = normBytes(c.RegistrationTokenHash)
	c.CreatedAt = normTime(c.CreatedAt)
	c.UpdatedAt = normTime(c.UpdatedAt)
	c.LastUsedAt = normTime(c.LastUsedAt)
	return c
}

func normToken(k storage.Token) storage.Token {
	k.CreatedAt = normTime(k.CreatedAt)
	k.ExpiresAt = normTime(k.ExpiresAt)
	k.RotatedAt = normTime(k.RotatedAt)
	k.Data = normBytes(k.Data)
	return k
}

func normConsent(c storage.Consent) storage.Consent {
	c.Scopes = normStrings(c.Scopes)
	c.RedirectURIs = normStrings(c.RedirectURIs)
	c.GrantedAt = normTime(c.GrantedAt)
	c.ExpiresAt = normTime(c.ExpiresAt)
	return c
}

func normKey(k storage.SigningKey) storage.SigningKey {
	k.PublicJWK = normBytes(k.PublicJWK)
	k.PrivateSealed = normBytes(k.PrivateSealed)
	k.CreatedAt = normTime(k.CreatedAt)
	k.RetiredAt = normTime(k.RetiredAt)
	return k
}

func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

// fullClient has every field set.
func fullClient(id string, at time.Time) *storage.Client {
	return &storage.Client{
		ID:                      id,
		SecretHash:              []byte{0, 1, 2, 0xff, 0xfe},
		SecretExpiresAt:         at.Add(24 * time.Hour),
		Public:                  false,
		Name:                    "Example \"client\" ü",
		RedirectURIs:            []string{"https://app.example/cb", "http://127.0.0.1/cb", "x,y{z}\"q"},
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		Scopes:                  []string{"mcp:read", "mcp:write"},
		Resources:               []string{"https://mcp.example/mcp"},
		TokenEndpointAuthMethod: "private_key_jwt",
		JWKS:                    []byte(`{"keys":[]}`),
		JWKSURI:                 "https://app.example/jwks.json",
		ApplicationType:         "web",
		Metadata:                []byte(`{"client_name":"Example"}`),
		RegistrationTokenHash:   []byte{9, 8, 7},
		Source:                  "dcr",
		CreatedAt:               at,
		UpdatedAt:               at.Add(time.Second),
		LastUsedAt:              at.Add(2 * time.Second),
	}
}

func getClient(t *testing.T, s storage.Store, id string) storage.Client {
	t.Helper()
	c, err := s.GetClient(context.Background(), id)
	ok(t, err, "GetClient "+id)
	return normClient(*c)
}

var clientCases = []testCase{
	{"ListClients pages through every client in ID order", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		for _, id := range []string{"b", "https://app.example/c", "a", "c2", "Z"} {
			ok(t, s.CreateClient(ctx, fullClient(id, at)), "CreateClient "+id)
		}
		var got []string
		after := ""
		for range 10 {
			page, err := s.ListClients(ctx, after, 2)
			ok(t, err, "ListClients")
			if len(page) > 2 {
				t.Fatalf("ListClients(limit 2) returned %d clients", len(page))
			}
			if len(page) == 0 {
				break
			}
			for _, c := range page {
				got = append(got, c.ID)
			}
			after = page[len(page)-1].ID
		}
		same(t, "ids", got, []string{"Z", "a", "b", "c2", "https://app.example/c"})
		page, err := s.ListClients(ctx, "", 1)
		ok(t, err, "ListClients")
		if len(page) != 1 {
			t.Fatalf("ListClients(limit 1) = %d clients", len(page))
		}
		same(t, "listed client", normClient(page[0]), normClient(*fullClient("Z", at)))
		none, err := s.ListClients(ctx, "", 0)
		ok(t, err, "ListClients limit 0")
		if len(none) != 0 {
			t.Fatalf("ListClients(limit 0) = %d clients", len(none))
		}
	}},
	{"a created client reads back with every field", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		c := fullClient("c1", now())
		ok(t, s.CreateClient(ctx, c), "CreateClient")
		same(t, "client", getClient(t, s, "c1"), normClient(*c))

		pub := &storage.Client{ID: "c2", Public: true, Source: "config", CreatedAt: now(), UpdatedAt: now()}
		ok(t, s.CreateClient(ctx, pub), "CreateClient minimal")
		same(t, "minimal client", getClient(t, s, "c2"), normClient(*pub))
	}},
	{"a client with zero CreatedAt gets the current time", func(t *testing.T, s storage.Store) {
		before := time.Now().Add(-time.Second)
		ok(t, s.CreateClient(context.Background(), &storage.Client{ID: "c", Source: "dcr"}), "CreateClient")
		got := getClient(t, s, "c")
		if got.CreatedAt.Before(before) || got.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Fatalf("CreatedAt = %v, want about now", got.CreatedAt)
		}
	}},
	{"creating a client twice fails with ErrAlreadyExists", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateClient(ctx, fullClient("c", now())), "first")
		other := fullClient("c", now())
		other.Name = "second"
		is(t, s.CreateClient(ctx, other), storage.ErrAlreadyExists, "second")
		if got := getClient(t, s, "c"); got.Name == "second" {
			t.Fatal("duplicate create overwrote the client")
		}
	}},
	{"an unknown client is ErrNotFound for every keyed method", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		_, err := s.GetClient(ctx, "nope")
		is(t, err, storage.ErrNotFound, "GetClient")
		is(t, s.UpdateClient(ctx, "nope", func(c storage.Client) (storage.Client, error) { return c, nil }), storage.ErrNotFound, "UpdateClient")
		is(t, s.DeleteClient(ctx, "nope"), storage.ErrNotFound, "DeleteClient")
		is(t, s.TouchClient(ctx, "nope", now()), storage.ErrNotFound, "TouchClient")
	}},
	{"an update stores what the closure returns", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		ok(t, s.CreateClient(ctx, fullClient("c", at)), "CreateClient")
		var seen storage.Client
		err := s.UpdateClient(ctx, "c", func(c storage.Client) (storage.Client, error) {
			seen = c
			c.Name = "renamed"
			c.RedirectURIs = []string{"https://new.example/cb"}
			c.SecretHash = nil
			c.UpdatedAt = at.Add(time.Hour)
			return c, nil
		})
		ok(t, err, "UpdateClient")
		same(t, "closure input", normClient(seen), normClient(*fullClient("c", at)))
		want := normClient(*fullClient("c", at))
		want.Name, want.RedirectURIs, want.SecretHash, want.UpdatedAt = "renamed", []string{"https://new.example/cb"}, nil, at.Add(time.Hour)
		same(t, "updated client", getClient(t, s, "c"), want)
	}},
	{"an update whose closure errors returns that error and writes nothing", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		c := fullClient("c", now())
		ok(t, s.CreateClient(ctx, c), "CreateClient")
		boom := errors.New("policy says no")
		err := s.UpdateClient(ctx, "c", func(c storage.Client) (storage.Client, error) {
			c.Name = "half-written"
			return c, boom
		})
		if err != boom { // storage.ClientStore: "returned unchanged", not wrapped
			t.Fatalf("UpdateClient = %v, want the closure's error unchanged", err)
		}
		same(t, "client", getClient(t, s, "c"), normClient(*c))
	}},
	{"concurrent updates of one client are serialised and lose nothing", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateClient(ctx, &storage.Client{ID: "c", Source: "dcr", CreatedAt: now(), UpdatedAt: now()}), "CreateClient")
		n, errs := race(Concurrency, func(i int) error {
			return s.UpdateClient(ctx, "c", func(c storage.Client) (storage.Client, error) {
				c.Scopes = append(c.Scopes, fmt.Sprintf("s%d", i))
				return c, nil
			})
		})
		if n != Concurrency {
			t.Fatalf("%d updates succeeded, errors: %v", n, errs)
		}
		if got := getClient(t, s, "c"); len(got.Scopes) != Concurrency {
			t.Fatalf("client has %d scopes after %d appends: lost updates", len(got.Scopes), Concurrency)
		}
	}},
	{"a deleted client is gone and deleting again is ErrNotFound", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateClient(ctx, fullClient("c", now())), "CreateClient")
		ok(t, s.DeleteClient(ctx, "c"), "DeleteClient")
		_, err := s.GetClient(ctx, "c")
		is(t, err, storage.ErrNotFound, "GetClient after delete")
		is(t, s.DeleteClient(ctx, "c"), storage.ErrNotFound, "second DeleteClient")
		ok(t, s.CreateClient(ctx, fullClient("c", now())), "CreateClient again after delete")
	}},
	{"touching a client sets LastUsedAt and nothing else", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		c := fullClient("c", now())
		c.LastUsedAt = time.Time{}
		ok(t, s.CreateClient(ctx, c), "CreateClient")
		at := now().Add(time.Minute)
		ok(t, s.TouchClient(ctx, "c", at), "TouchClient")
		want := normClient(*c)
		want.LastUsedAt = at
		same(t, "touched client", getClient(t, s, "c"), want)
	}},
	{"touching again within the granularity may keep the earlier time and a later touch moves it", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateClient(ctx, &storage.Client{ID: "c", Source: "dcr", CreatedAt: now()}), "CreateClient")
		first := now()
		ok(t, s.TouchClient(ctx, "c", first), "first TouchClient")
		soon := first.Add(storage.TouchGranularity / 2)
		ok(t, s.TouchClient(ctx, "c", soon), "TouchClient within granularity")
		if got := getClient(t, s, "c").LastUsedAt; !got.Equal(first) && !got.Equal(soon) {
			t.Fatalf("LastUsedAt = %v, want %v or %v", got, first, soon)
		}
		later := first.Add(2 * storage.TouchGranularity)
		ok(t, s.TouchClient(ctx, "c", later), "later TouchClient")
		if got := getClient(t, s, "c").LastUsedAt; !got.Equal(later) {
			t.Fatalf("LastUsedAt = %v after a touch past the granularity, want %v", got, later)
		}
	}},
	{"touching one client from many goroutines succeeds every time", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateClient(ctx, &storage.Client{ID: "c", Source: "dcr", CreatedAt: now()}), "CreateClient")
		at := now()
		n, errs := race(Concurrency, func(int) error { return s.TouchClient(ctx, "c", at) })
		if n != Concurrency {
			t.Fatalf("%d of %d TouchClient calls succeeded: %v", n, Concurrency, errs)
		}
		if got := getClient(t, s, "c").LastUsedAt; !got.Equal(at) {
			t.Fatalf("LastUsedAt = %v, want %v", got, at)
		}
	}},
	{"clients are counted by source", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		for i, src := range []string{"dcr", "dcr", "cimd", "config", "dcr"} {
			c := fullClient(fmt.Sprintf("c%d", i), now())
			c.Source = src
			ok(t, s.CreateClient(ctx, c), "CreateClient")
		}
		for src, want := range map[string]int{"": 5, "dcr": 3, "cimd": 1, "config": 1, "other": 0} {
			got, err := s.CountClients(ctx, src)
			ok(t, err, "CountClients")
			if got != want {
				t.Errorf("CountClients(%q) = %d, want %d", src, got, want)
			}
		}
	}},
	{"reaping deletes never-used and idle dynamic clients only, up to the limit", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		old, recent := base.Add(-48*time.Hour), base.Add(-time.Hour)
		neverUsedBefore, idleBefore := base.Add(-24*time.Hour), base.Add(-12*time.Hour)
		type cl struct {
			id, source        string
			created, lastUsed time.Time
			reaped            bool
		}
		clients := []cl{
			{"dcr-old-never-used", "dcr", old, time.Time{}, true},
			{"cimd-old-never-used", "cimd", old, time.Time{}, true},
			{"dcr-old-idle", "dcr", old, old, true},
			{"cimd-idle", "cimd", old, base.Add(-13 * time.Hour), true},
			{"dcr-new-never-used", "dcr", recent, time.Time{}, false},
			{"dcr-old-recently-used", "dcr", old, recent, false},
			{"config-old-never-used", "config", old, time.Time{}, false},
			{"config-idle", "config", old, old, false},
			{"other-source", "", old, time.Time{}, false},
		}
		for _, c := range clients {
			ok(t, s.CreateClient(ctx, &storage.Client{ID: c.id, Source: c.source, CreatedAt: c.created, UpdatedAt: c.created, LastUsedAt: c.lastUsed}), "CreateClient")
		}
		n, err := s.ReapClients(ctx, neverUsedBefore, idleBefore, 3)
		ok(t, err, "ReapClients")
		if n != 3 {
			t.Fatalf("first ReapClients(limit 3) = %d, want 3", n)
		}
		n, err = s.ReapClients(ctx, neverUsedBefore, idleBefore, 3)
		ok(t, err, "ReapClients")
		if n != 1 {
			t.Fatalf("second ReapClients = %d, want 1", n)
		}
		n, err = s.ReapClients(ctx, neverUsedBefore, idleBefore, 3)
		ok(t, err, "ReapClients")
		if n != 0 {
			t.Fatalf("third ReapClients = %d, want 0", n)
		}
		for _, c := range clients {
			_, err := s.GetClient(ctx, c.id)
			if c.reaped {
				is(t, err, storage.ErrNotFound, c.id+" should be reaped")
			} else {
				ok(t, err, c.id+" should be kept")
			}
		}
	}},
}

func fullToken(kind storage.TokenKind, sig, requestID string, at time.Time) *storage.Token {
	return &storage.Token{
		Kind:        kind,
		Signature:   sig,
		RequestID:   requestID,
		ClientID:    "client-1",
		Subject:     "alice",
		Active:      true,
		CreatedAt:   at,
		ExpiresAt:   at.Add(time.Hour),
		Data:        []byte{0, 1, 2, 3, 0xff},
		StatusIndex: 7,
	}
}

func getToken(t *testing.T, s storage.Store, kind storage.TokenKind, sig string) storage.Token {
	t.Helper()
	tok, err := s.GetToken(context.Background(), kind, sig)
	ok(t, err, "GetToken "+sig)
	return normToken(*tok)
}

var tokenCases = []testCase{
	{"a created token reads back with every field", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		for _, kind := range []storage.TokenKind{storage.KindAuthorizeCode, storage.KindPKCE, storage.KindAccessToken, storage.KindRefreshToken} {
			tok := fullToken(kind, "sig-"+string(kind), "req", now())
			ok(t, s.CreateToken(ctx, tok), "CreateToken")
			same(t, "token", getToken(t, s, kind, tok.Signature), normToken(*tok))
		}
		rotated := fullToken(storage.KindRefreshToken, "rotated", "req", now())
		rotated.Active, rotated.RotatedAt = false, now().Add(time.Minute)
		ok(t, s.CreateToken(ctx, rotated), "CreateToken rotated")
		same(t, "rotated token", getToken(t, s, storage.KindRefreshToken, "rotated"), normToken(*rotated))
	}},
	{"a duplicate kind and signature fails with ErrAlreadyExists, another kind does not", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateToken(ctx, fullToken(storage.KindAccessToken, "sig", "r1", now())), "first")
		is(t, s.CreateToken(ctx, fullToken(storage.KindAccessToken, "sig", "r2", now())), storage.ErrAlreadyExists, "duplicate")
		ok(t, s.CreateToken(ctx, fullToken(storage.KindRefreshToken, "sig", "r1", now())), "same signature, other kind")
		if got := getToken(t, s, storage.KindAccessToken, "sig"); got.RequestID != "r1" {
			t.Fatal("duplicate create overwrote the token")
		}
	}},
	{"concurrent creates of one signature create it once and the others still commit", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		n, errs := race(Concurrency, func(i int) error {
			if i%2 == 0 {
				return s.CreateToken(ctx, fullToken(storage.KindAccessToken, "same", fmt.Sprintf("r%d", i), now()))
			}
			return s.CreateToken(ctx, fullToken(storage.KindAccessToken, fmt.Sprintf("own-%d", i), "r", now()))
		})
		if n != Concurrency/2+1 {
			t.Fatalf("%d creates succeeded, want %d (every distinct one and one of the duplicates): %v", n, Concurrency/2+1, errs)
		}
		allAre(t, errs, storage.ErrAlreadyExists)
		for i := 1; i < Concurrency; i += 2 {
			getToken(t, s, storage.KindAccessToken, fmt.Sprintf("own-%d", i))
		}
		getToken(t, s, storage.KindAccessToken, "same")
	}},
	{"an unknown token is ErrNotFound for every keyed method", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateToken(ctx, fullToken(storage.KindAccessToken, "sig", "r", now())), "CreateToken")
		_, err := s.GetToken(ctx, storage.KindRefreshToken, "sig")
		is(t, err, storage.ErrNotFound, "GetToken other kind")
		is(t, s.DeactivateToken(ctx, storage.KindAccessToken, "nope"), storage.ErrNotFound, "DeactivateToken")
		is(t, s.RotateToken(ctx, storage.KindRefreshToken, "nope", now(), time.Minute), storage.ErrNotFound, "RotateToken")
		is(t, s.DeleteToken(ctx, storage.KindAccessToken, "nope"), storage.ErrNotFound, "DeleteToken")
	}},
	{"a deactivated token stays readable and cannot be deactivated again", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		tok := fullToken(storage.KindAuthorizeCode, "code", "r", now())
		ok(t, s.CreateToken(ctx, tok), "CreateToken")
		ok(t, s.DeactivateToken(ctx, storage.KindAuthorizeCode, "code"), "DeactivateToken")
		want := normToken(*tok)
		want.Active = false
		same(t, "deactivated token", getToken(t, s, storage.KindAuthorizeCode, "code"), want)
		is(t, s.DeactivateToken(ctx, storage.KindAuthorizeCode, "code"), storage.ErrInactive, "second DeactivateToken")
		is(t, s.RotateToken(ctx, storage.KindAuthorizeCode, "code", now(), time.Minute), storage.ErrInactive, "RotateToken of inactive")
	}},
	{"an authorization code is redeemed exactly once under concurrent attempts", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateToken(ctx, fullToken(storage.KindAuthorizeCode, "code", "r", now())), "CreateToken")
		n, errs := race(Concurrency, func(int) error {
			return s.DeactivateToken(ctx, storage.KindAuthorizeCode, "code")
		})
		if n != 1 {
			t.Fatalf("%d of %d concurrent DeactivateToken calls succeeded, want exactly 1", n, Concurrency)
		}
		allAre(t, errs, storage.ErrInactive)
	}},
	{"rotating sets RotatedAt once and keeps the token active", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		tok := fullToken(storage.KindRefreshToken, "rt", "r", now())
		ok(t, s.CreateToken(ctx, tok), "CreateToken")
		at := now().Add(time.Minute)
		ok(t, s.RotateToken(ctx, storage.KindRefreshToken, "rt", at, 0), "RotateToken")
		want := normToken(*tok)
		want.RotatedAt = at
		same(t, "rotated token", getToken(t, s, storage.KindRefreshToken, "rt"), want)
		is(t, s.RotateToken(ctx, storage.KindRefreshToken, "rt", at, 0), storage.ErrInactive, "second rotation with grace 0")
		is(t, s.RotateToken(ctx, storage.KindRefreshToken, "rt", at.Add(time.Hour), 0), storage.ErrInactive, "later rotation with grace 0")
	}},
	{"rotation with grace 0 succeeds exactly once under concurrent attempts", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateToken(ctx, fullToken(storage.KindRefreshToken, "rt", "r", now())), "CreateToken")
		at := now()
		n, errs := race(Concurrency, func(int) error {
			return s.RotateToken(ctx, storage.KindRefreshToken, "rt", at, 0)
		})
		if n != 1 {
			t.Fatalf("%d of %d concurrent RotateToken calls succeeded, want exactly 1", n, Concurrency)
		}
		allAre(t, errs, storage.ErrInactive)
	}},
	{"rotation within the grace window succeeds again and fails after it", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateToken(ctx, fullToken(storage.KindRefreshToken, "rt", "r", now())), "CreateToken")
		first := now()
		grace := 30 * time.Second
		ok(t, s.RotateToken(ctx, storage.KindRefreshToken, "rt", first, grace), "first rotation")
		ok(t, s.RotateToken(ctx, storage.KindRefreshToken, "rt", first.Add(10*time.Second), grace), "second rotation within grace")
		if got := getToken(t, s, storage.KindRefreshToken, "rt"); !got.RotatedAt.Equal(first) {
			t.Fatalf("RotatedAt = %v, want the first rotation %v", got.RotatedAt, first)
		}
		is(t, s.RotateToken(ctx, storage.KindRefreshToken, "rt", first.Add(31*time.Second), grace), storage.ErrInactive, "rotation after grace")
	}},
	{"a rotated token deactivated within the grace window rotates no more, unless that was rolled back", func(t *testing.T, s storage.Store) {
		// The AS deactivates a rotated refresh token when one of its
		// successors is used, in that successor's rotation transaction:
		// from then on the grace window no longer applies to it.
		ctx := context.Background()
		ok(t, s.CreateToken(ctx, fullToken(storage.KindRefreshToken, "rt1", "r", now())), "CreateToken rt1")
		ok(t, s.CreateToken(ctx, fullToken(storage.KindRefreshToken, "rt2", "r", now())), "CreateToken rt2")
		at := now()
		grace := time.Minute
		ok(t, s.RotateToken(ctx, storage.KindRefreshToken, "rt1", at, grace), "rotating rt1")

		txCtx, err := s.BeginTX(ctx)
		ok(t, err, "BeginTX")
		ok(t, s.DeactivateToken(txCtx, storage.KindRefreshToken, "rt1"), "deactivating rt1 in a transaction")
		ok(t, s.RotateToken(txCtx, storage.KindRefreshToken, "rt2", at, grace), "rotating rt2 in the same transaction")
		ok(t, s.Rollback(txCtx), "Rollback")
		if got := getToken(t, s, storage.KindRefreshToken, "rt1"); !got.Active {
			t.Fatal("rolled-back deactivation of a rotated token is visible")
		}
		ok(t, s.RotateToken(ctx, storage.KindRefreshToken, "rt1", at.Add(time.Second), grace), "rt1 within grace after the rollback")

		txCtx, err = s.BeginTX(ctx)
		ok(t, err, "BeginTX")
		ok(t, s.DeactivateToken(txCtx, storage.KindRefreshToken, "rt1"), "deactivating rt1 in a transaction")
		ok(t, s.RotateToken(txCtx, storage.KindRefreshToken, "rt2", at, grace), "rotating rt2 in the same transaction")
		ok(t, s.Commit(txCtx), "Commit")
		is(t, s.RotateToken(ctx, storage.KindRefreshToken, "rt1", at.Add(2*time.Second), grace), storage.ErrInactive, "rt1 within grace after its deactivation")
		is(t, s.DeactivateToken(ctx, storage.KindRefreshToken, "rt1"), storage.ErrInactive, "deactivating rt1 again")
		if got := getToken(t, s, storage.KindRefreshToken, "rt1"); got.Active || !got.RotatedAt.Equal(at) {
			t.Errorf("rt1 Active=%v RotatedAt=%v, want inactive and rotated at %v", got.Active, got.RotatedAt, at)
		}
	}},
	{"concurrent rotations within the grace window all succeed", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateToken(ctx, fullToken(storage.KindRefreshToken, "rt", "r", now())), "CreateToken")
		at := now()
		n, errs := race(Concurrency, func(int) error {
			return s.RotateToken(ctx, storage.KindRefreshToken, "rt", at, time.Minute)
		})
		if n != Concurrency {
			t.Fatalf("%d of %d rotations within grace succeeded: %v", n, Concurrency, errs)
		}
	}},
	{"revoking a family deactivates exactly that request's tokens of that kind", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		for _, tok := range []*storage.Token{
			fullToken(storage.KindRefreshToken, "fam-1", "family", now()),
			fullToken(storage.KindRefreshToken, "fam-2", "family", now()),
			fullToken(storage.KindRefreshToken, "fam-3", "family", now()),
			fullToken(storage.KindAccessToken, "fam-access", "family", now()),
			fullToken(storage.KindRefreshToken, "other", "other-family", now()),
		} {
			ok(t, s.CreateToken(ctx, tok), "CreateToken")
		}
		ok(t, s.DeactivateToken(ctx, storage.KindRefreshToken, "fam-2"), "DeactivateToken")
		ok(t, s.RevokeTokens(ctx, storage.KindRefreshToken, "family"), "RevokeTokens")
		for sig, active := range map[string]bool{"fam-1": false, "fam-2": false, "fam-3": false, "other": true} {
			if got := getToken(t, s, storage.KindRefreshToken, sig); got.Active != active {
				t.Errorf("%s active = %v, want %v", sig, got.Active, active)
			}
		}
		if !getToken(t, s, storage.KindAccessToken, "fam-access").Active {
			t.Error("RevokeTokens(refresh) deactivated an access token")
		}
		ok(t, s.RevokeTokens(ctx, storage.KindAccessToken, "no-such-family"), "RevokeTokens of nothing")
	}},
	{"a deleted token is gone", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateToken(ctx, fullToken(storage.KindAccessToken, "sig", "r", now())), "CreateToken")
		ok(t, s.DeleteToken(ctx, storage.KindAccessToken, "sig"), "DeleteToken")
		_, err := s.GetToken(ctx, storage.KindAccessToken, "sig")
		is(t, err, storage.ErrNotFound, "GetToken after delete")
		is(t, s.DeleteToken(ctx, storage.KindAccessToken, "sig"), storage.ErrNotFound, "second DeleteToken")
	}},
	{"expired tokens are deleted in batches of at most limit", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		for i := range 25 {
			tok := fullToken(storage.KindAccessToken, fmt.Sprintf("old-%d", i), "r", base.Add(-2*time.Hour))
			ok(t, s.CreateToken(ctx, tok), "CreateToken")
		}
		for i := range 5 {
			tok := fullToken(storage.KindRefreshToken, fmt.Sprintf("new-%d", i), "r", base)
			ok(t, s.CreateToken(ctx, tok), "CreateToken")
		}
		for _, want := range []int{10, 10, 5, 0} {
			n, err := s.DeleteExpiredTokens(ctx, base, 10)
			ok(t, err, "DeleteExpiredTokens")
			if n != want {
				t.Fatalf("DeleteExpiredTokens = %d, want %d", n, want)
			}
		}
		for i := range 5 {
			getToken(t, s, storage.KindRefreshToken, fmt.Sprintf("new-%d", i))
		}
		_, err := s.GetToken(ctx, storage.KindAccessToken, "old-0")
		is(t, err, storage.ErrNotFound, "expired token")
	}},
}

func getConsent(t *testing.T, s storage.Store, subject, clientID, resource string) storage.Consent {
	t.Helper()
	c, err := s.GetConsent(context.Background(), subject, clientID, resource)
	ok(t, err, "GetConsent")
	return normConsent(*c)
}

var consentCases = []testCase{
	{"a consent reads back and a second put replaces it", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		_, err := s.GetConsent(ctx, "alice", "c", "https://mcp.example/mcp")
		is(t, err, storage.ErrNotFound, "GetConsent before put")
		c := &storage.Consent{Subject: "alice", ClientID: "c", Resource: "https://mcp.example/mcp", Scopes: []string{"a", "b"},
			RedirectURIs: []string{"http://127.0.0.1/cb", "https://app.example/cb"}, GrantedAt: now(), ExpiresAt: now().Add(time.Hour)}
		ok(t, s.PutConsent(ctx, c), "PutConsent")
		same(t, "consent", getConsent(t, s, "alice", "c", c.Resource), normConsent(*c))
		c2 := &storage.Consent{Subject: "alice", ClientID: "c", Resource: c.Resource, Scopes: []string{"z"}, GrantedAt: now().Add(time.Minute)}
		ok(t, s.PutConsent(ctx, c2), "PutConsent replace")
		same(t, "replaced consent", getConsent(t, s, "alice", "c", c.Resource), normConsent(*c2))
		_, err = s.GetConsent(ctx, "alice", "c", "https://other.example/")
		is(t, err, storage.ErrNotFound, "GetConsent other resource")
	}},
	{"consents are listed per subject and deleted per client or all", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		put := func(sub, cid, res string) {
			ok(t, s.PutConsent(ctx, &storage.Consent{Subject: sub, ClientID: cid, Resource: res, Scopes: []string{"s"}, GrantedAt: now()}), "PutConsent")
		}
		put("alice", "c1", "r1")
		put("alice", "c1", "r2")
		put("alice", "c2", "r1")
		put("bob", "c1", "r1")
		list := func(sub string) []string {
			cs, err := s.ListConsents(ctx, sub)
			ok(t, err, "ListConsents")
			var out []string
			for _, c := range cs {
				if c.Subject != sub {
					t.Fatalf("ListConsents(%q) returned %q's consent", sub, c.Subject)
				}
				out = append(out, c.ClientID+"/"+c.Resource)
			}
			slices.Sort(out)
			return out
		}
		same(t, "alice", list("alice"), []string{"c1/r1", "c1/r2", "c2/r1"})
		same(t, "nobody", len(list("nobody")), 0)
		ok(t, s.DeleteConsents(ctx, "alice", "c1"), "DeleteConsents c1")
		same(t, "alice after deleting c1", list("alice"), []string{"c2/r1"})
		same(t, "bob untouched", list("bob"), []string{"c1/r1"})
		ok(t, s.DeleteConsents(ctx, "alice", ""), "DeleteConsents all")
		same(t, "alice after deleting all", len(list("alice")), 0)
		ok(t, s.DeleteConsents(ctx, "alice", ""), "DeleteConsents of nothing")
		same(t, "bob still untouched", list("bob"), []string{"c1/r1"})
	}},
	{"expired consents are deleted in batches and unbounded ones are kept", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		for i := range 7 {
			ok(t, s.PutConsent(ctx, &storage.Consent{Subject: "alice", ClientID: fmt.Sprintf("old%d", i), Resource: "r", GrantedAt: base.Add(-2 * time.Hour), ExpiresAt: base.Add(-time.Hour)}), "PutConsent")
		}
		ok(t, s.PutConsent(ctx, &storage.Consent{Subject: "alice", ClientID: "forever", Resource: "r", GrantedAt: base.Add(-2 * time.Hour)}), "PutConsent")
		ok(t, s.PutConsent(ctx, &storage.Consent{Subject: "alice", ClientID: "later", Resource: "r", GrantedAt: base, ExpiresAt: base.Add(time.Hour)}), "PutConsent")
		for _, want := range []int{3, 3, 1, 0} {
			n, err := s.DeleteExpiredConsents(ctx, base, 3)
			ok(t, err, "DeleteExpiredConsents")
			if n != want {
				t.Fatalf("DeleteExpiredConsents = %d, want %d", n, want)
			}
		}
		getConsent(t, s, "alice", "forever", "r")
		getConsent(t, s, "alice", "later", "r")
	}},
}

func key(id string, created time.Time) *storage.SigningKey {
	return &storage.SigningKey{ID: id, Algorithm: "ES256", PublicJWK: []byte(`{"kid":"` + id + `"}`), PrivateSealed: []byte{1, 2, 3, 0}, CreatedAt: created}
}

func listKeys(t *testing.T, s storage.Store) []storage.SigningKey {
	t.Helper()
	ks, err := s.ListKeys(context.Background())
	ok(t, err, "ListKeys")
	out := make([]storage.SigningKey, 0, len(ks))
	for _, k := range ks {
		out = append(out, normKey(k))
	}
	return out
}

var keyCases = []testCase{
	{"keys are listed newest first with every field", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		same(t, "empty store", len(listKeys(t, s)), 0)
		base := now()
		k1, k2, k3 := key("k1", base.Add(-2*time.Hour)), key("k2", base), key("k3", base.Add(-time.Hour))
		k1.RetiredAt = base.Add(-time.Hour)
		for _, k := range []*storage.SigningKey{k1, k2, k3} {
			ok(t, s.CreateKey(ctx, k), "CreateKey")
		}
		same(t, "keys", listKeys(t, s), []storage.SigningKey{normKey(*k2), normKey(*k3), normKey(*k1)})
		is(t, s.CreateKey(ctx, key("k1", base)), storage.ErrAlreadyExists, "duplicate CreateKey")
	}},
	{"retiring keys sets RetiredAt on every active key but the kept one", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		old := key("old", base.Add(-3*time.Hour))
		old.RetiredAt = base.Add(-2 * time.Hour)
		for _, k := range []*storage.SigningKey{old, key("a", base.Add(-time.Hour)), key("b", base.Add(-time.Minute)), key("new", base)} {
			ok(t, s.CreateKey(ctx, k), "CreateKey")
		}
		at := base.Add(time.Second)
		ok(t, s.RetireKeys(ctx, "new", at), "RetireKeys")
		want := map[string]time.Time{"old": old.RetiredAt, "a": at, "b": at, "new": {}}
		for _, k := range listKeys(t, s) {
			if !k.RetiredAt.Equal(want[k.ID]) {
				t.Errorf("key %s RetiredAt = %v, want %v", k.ID, k.RetiredAt, want[k.ID])
			}
		}
	}},
	{"a deleted key is gone and an unknown key is ErrNotFound", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.CreateKey(ctx, key("k", now())), "CreateKey")
		ok(t, s.DeleteKey(ctx, "k"), "DeleteKey")
		same(t, "keys after delete", len(listKeys(t, s)), 0)
		is(t, s.DeleteKey(ctx, "k"), storage.ErrNotFound, "second DeleteKey")
	}},
}

var jtiCases = []testCase{
	{"a jti is used once and refused until it expires", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.UseJTI(ctx, "j", time.Now().Add(time.Hour)), "first UseJTI")
		is(t, s.UseJTI(ctx, "j", time.Now().Add(time.Hour)), storage.ErrAlreadyUsed, "second UseJTI")
		ok(t, s.UseJTI(ctx, "expired", time.Now().Add(-time.Second)), "UseJTI already expired")
		ok(t, s.UseJTI(ctx, "expired", time.Now().Add(time.Hour)), "UseJTI after expiry")
		is(t, s.UseJTI(ctx, "expired", time.Now().Add(time.Hour)), storage.ErrAlreadyUsed, "UseJTI again")
	}},
	{"a jti is used exactly once under concurrent attempts", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		exp := time.Now().Add(time.Hour)
		n, errs := race(Concurrency, func(int) error { return s.UseJTI(ctx, "j", exp) })
		if n != 1 {
			t.Fatalf("%d of %d concurrent UseJTI calls succeeded, want exactly 1", n, Concurrency)
		}
		allAre(t, errs, storage.ErrAlreadyUsed)
	}},
	{"a jti whose expiry lies centuries ahead is still refused and not deleted as expired", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		for _, years := range []int{300, 400000} {
			id := fmt.Sprintf("far%d", years)
			exp := time.Now().AddDate(years, 0, 0)
			ok(t, s.UseJTI(ctx, id, exp), "UseJTI "+id)
			is(t, s.UseJTI(ctx, id, exp), storage.ErrAlreadyUsed, "second UseJTI "+id)
		}
		n, err := s.DeleteExpiredJTIs(ctx, time.Now(), 10)
		ok(t, err, "DeleteExpiredJTIs")
		same(t, "far jtis deleted as expired", n, 0)
		is(t, s.UseJTI(ctx, "far300", time.Now().Add(time.Hour)), storage.ErrAlreadyUsed, "UseJTI after DeleteExpiredJTIs")
	}},
	{"expired jtis are deleted in batches", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		base := now()
		for i := range 12 {
			ok(t, s.UseJTI(ctx, fmt.Sprintf("old%d", i), base.Add(-time.Minute)), "UseJTI")
		}
		ok(t, s.UseJTI(ctx, "live", base.Add(time.Hour)), "UseJTI")
		for _, want := range []int{5, 5, 2, 0} {
			n, err := s.DeleteExpiredJTIs(ctx, base, 5)
			ok(t, err, "DeleteExpiredJTIs")
			if n != want {
				t.Fatalf("DeleteExpiredJTIs = %d, want %d", n, want)
			}
		}
		is(t, s.UseJTI(ctx, "live", base.Add(time.Hour)), storage.ErrAlreadyUsed, "live jti survived")
	}},
}

// seed writes one record of each kind for the transaction cases.
func seed(t *testing.T, s storage.Store) {
	t.Helper()
	ctx := context.Background()
	ok(t, s.CreateClient(ctx, fullClient("existing", now())), "CreateClient")
	ok(t, s.CreateToken(ctx, fullToken(storage.KindAuthorizeCode, "existing-code", "r0", now())), "CreateToken")
	ok(t, s.CreateToken(ctx, fullToken(storage.KindRefreshToken, "existing-rt", "r0", now())), "CreateToken")
	ok(t, s.CreateKey(ctx, key("existing-key", now())), "CreateKey")
}

// writeAll performs one write of each kind inside txCtx.
func writeAll(t *testing.T, s storage.Store, txCtx context.Context) {
	t.Helper()
	ok(t, s.CreateClient(txCtx, fullClient("tx-client", now())), "CreateClient in tx")
	ok(t, s.UpdateClient(txCtx, "existing", func(c storage.Client) (storage.Client, error) {
		c.Name = "changed in tx"
		return c, nil
	}), "UpdateClient in tx")
	ok(t, s.CreateToken(txCtx, fullToken(storage.KindAccessToken, "tx-at", "r1", now())), "CreateToken in tx")
	ok(t, s.DeactivateToken(txCtx, storage.KindAuthorizeCode, "existing-code"), "DeactivateToken in tx")
	ok(t, s.RotateToken(txCtx, storage.KindRefreshToken, "existing-rt", now(), 0), "RotateToken in tx")
	ok(t, s.PutConsent(txCtx, &storage.Consent{Subject: "alice", ClientID: "tx-client", Resource: "r", GrantedAt: now()}), "PutConsent in tx")
	ok(t, s.CreateKey(txCtx, key("tx-key", now())), "CreateKey in tx")
	ok(t, s.UseJTI(txCtx, "tx-jti", time.Now().Add(time.Hour)), "UseJTI in tx")
	ok(t, s.AppendAuditEvents(txCtx, []storage.AuditEvent{auditEvent("tx.event", "alice", "tx-client", now())}), "AppendAuditEvents in tx")
	ok(t, s.AddStats(txCtx, []storage.StatCount{{Hour: now(), Name: "tx_stat", Count: 1}}), "AddStats in tx")

	// The transaction reads its own writes.
	if _, err := s.GetToken(txCtx, storage.KindAccessToken, "tx-at"); err != nil {
		t.Fatalf("GetToken in the writing transaction: %v", err)
	}
	tok, err := s.GetToken(txCtx, storage.KindAuthorizeCode, "existing-code")
	ok(t, err, "GetToken in tx")
	if tok.Active {
		t.Fatal("the transaction does not see its own DeactivateToken")
	}
}

var txCases = []testCase{
	{"a rolled-back transaction leaves nothing behind", func(t *testing.T, s storage.Store) {
		seed(t, s)
		ctx := context.Background()
		txCtx, err := s.BeginTX(ctx)
		ok(t, err, "BeginTX")
		writeAll(t, s, txCtx)
		ok(t, s.Rollback(txCtx), "Rollback")

		_, err = s.GetClient(ctx, "tx-client")
		is(t, err, storage.ErrNotFound, "client created in rolled-back tx")
		if c := getClient(t, s, "existing"); c.Name == "changed in tx" {
			t.Error("update of rolled-back tx is visible")
		}
		_, err = s.GetToken(ctx, storage.KindAccessToken, "tx-at")
		is(t, err, storage.ErrNotFound, "token created in rolled-back tx")
		if !getToken(t, s, storage.KindAuthorizeCode, "existing-code").Active {
			t.Error("deactivation of rolled-back tx is visible")
		}
		if !getToken(t, s, storage.KindRefreshToken, "existing-rt").RotatedAt.IsZero() {
			t.Error("rotation of rolled-back tx is visible")
		}
		_, err = s.GetConsent(ctx, "alice", "tx-client", "r")
		is(t, err, storage.ErrNotFound, "consent of rolled-back tx")
		if ks := listKeys(t, s); len(ks) != 1 {
			t.Errorf("%d keys after rollback, want 1", len(ks))
		}
		ok(t, s.UseJTI(ctx, "tx-jti", time.Now().Add(time.Hour)), "jti of rolled-back tx is usable")
		same(t, "audit events of rolled-back tx", listAudit(t, s, storage.AuditFilter{Limit: 10}), []storage.AuditEvent{})
		same(t, "stats of rolled-back tx", listStats(t, s, time.Time{}), []storage.StatCount{})
		// The code can still be redeemed once.
		ok(t, s.DeactivateToken(ctx, storage.KindAuthorizeCode, "existing-code"), "redeem after rollback")
	}},
	{"a committed transaction is visible to everyone", func(t *testing.T, s storage.Store) {
		seed(t, s)
		ctx := context.Background()
		txCtx, err := s.BeginTX(ctx)
		ok(t, err, "BeginTX")
		writeAll(t, s, txCtx)
		ok(t, s.Commit(txCtx), "Commit")

		getClient(t, s, "tx-client")
		if c := getClient(t, s, "existing"); c.Name != "changed in tx" {
			t.Error("committed update is missing")
		}
		getToken(t, s, storage.KindAccessToken, "tx-at")
		is(t, s.DeactivateToken(ctx, storage.KindAuthorizeCode, "existing-code"), storage.ErrInactive, "code deactivated in committed tx")
		is(t, s.RotateToken(ctx, storage.KindRefreshToken, "existing-rt", now(), 0), storage.ErrInactive, "token rotated in committed tx")
		getConsent(t, s, "alice", "tx-client", "r")
		if ks := listKeys(t, s); len(ks) != 2 {
			t.Errorf("%d keys after commit, want 2", len(ks))
		}
		is(t, s.UseJTI(ctx, "tx-jti", time.Now().Add(time.Hour)), storage.ErrAlreadyUsed, "jti of committed tx")
		same(t, "audit events of committed tx", auditEvents(listAudit(t, s, storage.AuditFilter{Limit: 10})), []string{"tx.event"})
		same(t, "stats of committed tx", len(listStats(t, s, time.Time{})), 1)
	}},
	{"a failed write inside a transaction can be rolled back cleanly", func(t *testing.T, s storage.Store) {
		seed(t, s)
		ctx := context.Background()
		txCtx, err := s.BeginTX(ctx)
		ok(t, err, "BeginTX")
		ok(t, s.CreateToken(txCtx, fullToken(storage.KindAccessToken, "tx-at", "r1", now())), "CreateToken in tx")
		is(t, s.CreateClient(txCtx, fullClient("existing", now())), storage.ErrAlreadyExists, "duplicate CreateClient in tx")
		ok(t, s.Rollback(txCtx), "Rollback")
		_, err = s.GetToken(ctx, storage.KindAccessToken, "tx-at")
		is(t, err, storage.ErrNotFound, "token of rolled-back tx")
		getClient(t, s, "existing")
	}},
	{"a code redeemed in concurrent transactions is redeemed exactly once", func(t *testing.T, s storage.Store) {
		seed(t, s)
		ctx := context.Background()
		n, errs := race(Concurrency, func(i int) error {
			txCtx, err := s.BeginTX(ctx)
			if err != nil {
				return err
			}
			if err := s.DeactivateToken(txCtx, storage.KindAuthorizeCode, "existing-code"); err != nil {
				_ = s.Rollback(txCtx)
				return err
			}
			if err := s.CreateToken(txCtx, fullToken(storage.KindAccessToken, fmt.Sprintf("at-%d", i), "r0", now())); err != nil {
				_ = s.Rollback(txCtx)
				return err
			}
			return s.Commit(txCtx)
		})
		if n != 1 {
			t.Fatalf("%d of %d transactions redeemed the code, want exactly 1 (errors %v)", n, Concurrency, errs)
		}
		allAre(t, errs, storage.ErrInactive)
		issued := 0
		for i := range Concurrency {
			if _, err := s.GetToken(ctx, storage.KindAccessToken, fmt.Sprintf("at-%d", i)); err == nil {
				issued++
			}
		}
		if issued != 1 {
			t.Fatalf("%d access tokens issued for one code, want 1", issued)
		}
	}},
	{"commit and rollback without a transaction fail", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		if err := s.Commit(ctx); err == nil {
			t.Error("Commit without a transaction returned nil")
		}
		if err := s.Rollback(ctx); err == nil {
			t.Error("Rollback without a transaction returned nil")
		}
		txCtx, err := s.BeginTX(ctx)
		ok(t, err, "BeginTX")
		ok(t, s.Commit(txCtx), "Commit")
		if err := s.Rollback(txCtx); err == nil {
			t.Error("Rollback after Commit returned nil")
		}
	}},
	{"beginning a transaction while another is open proceeds or ends with its context", func(t *testing.T, s storage.Store) {
		seed(t, s)
		ctx := context.Background()
		first, err := s.BeginTX(ctx)
		ok(t, err, "first BeginTX")
		ok(t, s.CreateToken(first, fullToken(storage.KindAccessToken, "first", "r", now())), "write in first")
		waitCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		second, err := s.BeginTX(waitCtx)
		if err == nil {
			// Backends with concurrent transactions (PostgreSQL) proceed.
			ok(t, s.Rollback(second), "Rollback second")
		} else if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("BeginTX while another transaction is open = %v, want success or the context's error", err)
		}
		ok(t, s.Commit(first), "Commit first")
		third, err := s.BeginTX(ctx)
		ok(t, err, "BeginTX after the first ended")
		ok(t, s.Rollback(third), "Rollback third")
		getToken(t, s, storage.KindAccessToken, "first")
	}},
	{"ping succeeds on a working store", func(t *testing.T, s storage.Store) {
		ok(t, s.Ping(context.Background()), "Ping")
	}},
}
