package connections_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/connections"
	"github.com/mcpauth/mcpauth/internal/testprovider"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
	"github.com/mcpauth/mcpauth/storage/sqlite"
	"github.com/mcpauth/mcpauth/upstream"
)

var secret = bytes.Repeat([]byte("k"), 32)

// startProvider runs a test provider and returns it with a connection to it.
func startProvider(t *testing.T, pc testprovider.Config, mod func(*connections.Config)) (*testprovider.Provider, *connections.Provider) {
	t.Helper()
	tp := testprovider.New(pc)
	srv := httptest.NewServer(tp.Handler())
	t.Cleanup(srv.Close)
	tp.Issuer = srv.URL
	cfg := connections.Config{
		ID: "github", Name: "GitHub",
		AuthorizationEndpoint: tp.AuthorizationEndpoint(), TokenEndpoint: tp.TokenEndpoint(), RevocationEndpoint: tp.RevocationEndpoint(),
		ClientID: "client", ClientSecret: "client-secret", Scopes: []string{"repo", "read:user"},
		Resource: "https://api.github.example", Clients: []string{"gateway"},
		RedirectURL: "https://as.example/connections/github/callback",
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := connections.NewProvider(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tp, p
}

// authorize runs the provider's authorization step as a browser would and
// returns the callback's query.
func authorize(t *testing.T, p *connections.Provider, state, verifier string) url.Values {
	t.Helper()
	u, err := p.AuthCodeURL(context.Background(), state, verifier)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize answered %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc.Query()
}

// connect runs the code flow and saves the tokens for subject.
func connect(t *testing.T, v *connections.Vault, p *connections.Provider, subject string) *connections.Token {
	t.Helper()
	verifier := upstream.NewVerifier()
	q := authorize(t, p, "state", verifier)
	tok, err := p.Exchange(context.Background(), q.Get("code"), verifier)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Save(context.Background(), subject, p.ID(), tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

func newVault(t *testing.T, st storage.ConnectionStore, now func() time.Time, ps ...*connections.Provider) *connections.Vault {
	t.Helper()
	v, err := connections.NewVault(connections.VaultConfig{Providers: ps, Store: st, Secret: secret, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCodeFlowSendsPKCEAndRedeems(t *testing.T) {
	tp, p := startProvider(t, testprovider.Config{}, nil)
	verifier := upstream.NewVerifier()
	q := authorize(t, p, "our-state", verifier)
	if q.Get("state") != "our-state" || q.Get("code") == "" {
		t.Fatalf("callback %v", q)
	}
	last := tp.LastAuthorization()
	if last.Get("code_challenge_method") != "S256" || last.Get("scope") != "repo read:user" ||
		last.Get("redirect_uri") != "https://as.example/connections/github/callback" {
		t.Fatalf("authorization request %v", last)
	}
	if _, err := p.Exchange(context.Background(), q.Get("code"), upstream.NewVerifier()); !errors.Is(err, connections.ErrRefused) {
		t.Fatalf("a wrong verifier: %v, want ErrRefused", err)
	}
	q = authorize(t, p, "s", verifier)
	tok, err := p.Exchange(context.Background(), q.Get("code"), verifier)
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken == "" || tok.RefreshToken == "" || tok.TokenType != "bearer" || tok.ExpiresAt.IsZero() ||
		len(tok.Scopes) != 2 || !tp.Active(tok.AccessToken) {
		t.Fatalf("token %+v", tok)
	}
}

// TestTokensAreSealedAtRest connects on SQLite and PostgreSQL and reads
// what the database holds: neither token appears, and the vault still
// hands the access token out.
func TestTokensAreSealedAtRest(t *testing.T) {
	ctx := context.Background()
	backends := []struct {
		name string
		open func(t *testing.T) (storage.Store, func() []byte)
	}{
		{"sqlite", func(t *testing.T) (storage.Store, func() []byte) {
			path := filepath.Join(t.TempDir(), "as.db")
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, func() []byte {
				var all []byte
				for _, f := range []string{path, path + "-wal"} {
					b, _ := os.ReadFile(f)
					all = append(all, b...)
				}
				if len(all) == 0 {
					t.Fatal("the database files are empty")
				}
				return all
			}
		}},
		{"postgres", func(t *testing.T) (storage.Store, func() []byte) {
			dsn, _ := pgtest.Schema(t)
			s, err := postgres.Open(ctx, dsn, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, func() []byte {
				rows, err := s.Pool().Query(ctx, `SELECT c::text, access_token, coalesce(refresh_token, ''::bytea) FROM connections c`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var all []byte
				n := 0
				for rows.Next() {
					var text string
					var at, rt []byte
					if err := rows.Scan(&text, &at, &rt); err != nil {
						t.Fatal(err)
					}
					all = append(append(append(all, text...), at...), rt...)
					n++
				}
				if n != 1 {
					t.Fatalf("%d rows", n)
				}
				return all
			}
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			st, dump := b.open(t)
			_, p := startProvider(t, testprovider.Config{}, nil)
			v := newVault(t, st, nil, p)
			tok := connect(t, v, p, "corp:ada")
			raw := dump()
			if !bytes.Contains(raw, []byte("corp:ada")) {
				t.Fatal("the dump does not hold the record at all; the test reads the wrong place")
			}
			for name, secret := range map[string]string{"access": tok.AccessToken, "refresh": tok.RefreshToken} {
				if bytes.Contains(raw, []byte(secret)) {
					t.Fatalf("the %s token is stored in clear", name)
				}
			}
			got, err := v.Token(ctx, "corp:ada", "github")
			if err != nil || got.AccessToken != tok.AccessToken || got.RefreshToken != "" {
				t.Fatalf("Token = %+v, %v", got, err)
			}
		})
	}
}

func TestSealedTokensAreBoundToPersonAndConnection(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	_, p := startProvider(t, testprovider.Config{}, nil)
	v := newVault(t, st, nil, p)
	connect(t, v, p, "ada")
	c, err := st.GetConnection(ctx, "ada", "github")
	if err != nil {
		t.Fatal(err)
	}
	c.Subject = "mallory"
	if err := st.PutConnection(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Token(ctx, "mallory", "github"); !errors.Is(err, connections.ErrReconnect) {
		t.Fatalf("a record copied to another person: %v, want ErrReconnect", err)
	}
	other, err := connections.NewVault(connections.VaultConfig{Providers: []*connections.Provider{p}, Store: st, Secret: bytes.Repeat([]byte("x"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Token(ctx, "ada", "github"); !errors.Is(err, connections.ErrReconnect) {
		t.Fatalf("another secret: %v, want ErrReconnect", err)
	}
}

func TestTokenRefreshesAnExpiredToken(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	tp, p := startProvider(t, testprovider.Config{AccessTTL: time.Minute}, func(c *connections.Config) { c.Now = clock })
	st := memory.New()
	v := newVault(t, st, clock, p)
	first := connect(t, v, p, "ada")
	got, err := v.Token(ctx, "ada", "github")
	if err != nil || got.AccessToken != first.AccessToken || tp.Count("refresh") != 0 {
		t.Fatalf("a fresh token: %+v, %v, %d refreshes", got, err, tp.Count("refresh"))
	}
	now = now.Add(31 * time.Second) // within refreshEarly of its expiry
	var wg sync.WaitGroup
	toks := make([]*connections.Token, 8)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks[i], _ = v.Token(ctx, "ada", "github")
		}()
	}
	wg.Wait()
	for _, tok := range toks {
		if tok == nil || tok.AccessToken == first.AccessToken || !tp.Active(tok.AccessToken) {
			t.Fatalf("after expiry: %+v", tok)
		}
	}
	if n := tp.Count("refresh"); n < 1 || n > 8 {
		t.Fatalf("%d refreshes", n)
	}
	// The rotated refresh token was stored: a second expiry refreshes again.
	now = now.Add(2 * time.Minute)
	again, err := v.Token(ctx, "ada", "github")
	if err != nil || again.AccessToken == toks[0].AccessToken {
		t.Fatalf("second refresh: %+v, %v", again, err)
	}
}

func TestRefusedRefreshNeedsReconnect(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	tp, p := startProvider(t, testprovider.Config{AccessTTL: time.Minute}, nil)
	st := memory.New()
	v := newVault(t, st, func() time.Time { return now }, p)
	connect(t, v, p, "ada")
	tp.RefuseRefresh(true)
	now = now.Add(time.Hour)
	if _, err := v.Token(ctx, "ada", "github"); !errors.Is(err, connections.ErrReconnect) {
		t.Fatalf("refused refresh: %v", err)
	}
	tp.RefuseRefresh(false)
	if _, err := v.Token(ctx, "ada", "github"); !errors.Is(err, connections.ErrReconnect) {
		t.Fatalf("a marked connection was released: %v", err)
	}
	list, err := v.List(ctx, "ada")
	if err != nil || len(list) != 1 || !list[0].NeedsReconnect || !list[0].Configured {
		t.Fatalf("List = %+v, %v", list, err)
	}
	connect(t, v, p, "ada")
	if _, err := v.Token(ctx, "ada", "github"); err != nil {
		t.Fatalf("after reconnecting: %v", err)
	}
}

func TestNotConnectedAndUnknown(t *testing.T) {
	_, p := startProvider(t, testprovider.Config{}, nil)
	v := newVault(t, memory.New(), nil, p)
	if _, err := v.Token(context.Background(), "ada", "github"); !errors.Is(err, connections.ErrNotConnected) {
		t.Fatalf("not connected: %v", err)
	}
	if _, err := v.Token(context.Background(), "ada", "slack"); !errors.Is(err, connections.ErrUnknown) {
		t.Fatalf("unknown: %v", err)
	}
}

func TestDisconnectRevokesAtTheProvider(t *testing.T) {
	ctx := context.Background()
	tp, p := startProvider(t, testprovider.Config{}, nil)
	st := memory.New()
	v := newVault(t, st, nil, p)
	tok := connect(t, v, p, "ada")
	ok, err := v.Disconnect(ctx, "ada", "github")
	if err != nil || !ok {
		t.Fatalf("Disconnect = %v, %v", ok, err)
	}
	if r := tp.Revoked(); len(r) != 1 || r[0] != tok.RefreshToken {
		t.Fatalf("revoked %d tokens, want the refresh token", len(r))
	}
	if tp.Active(tok.AccessToken) {
		t.Fatal("the access token still works at the provider")
	}
	if _, err := v.Token(ctx, "ada", "github"); !errors.Is(err, connections.ErrNotConnected) {
		t.Fatalf("after disconnect: %v", err)
	}
	if ok, err := v.Disconnect(ctx, "ada", "github"); ok || err != nil {
		t.Fatalf("second Disconnect = %v, %v", ok, err)
	}
}

func TestReconnectRevokesThePreviousGrant(t *testing.T) {
	tp, p := startProvider(t, testprovider.Config{}, nil)
	v := newVault(t, memory.New(), nil, p)
	first := connect(t, v, p, "ada")
	connect(t, v, p, "ada")
	if r := tp.Revoked(); len(r) != 1 || r[0] != first.RefreshToken {
		t.Fatalf("revoked %d tokens", len(r))
	}
}

func TestCheckResponseIssuer(t *testing.T) {
	ctx := context.Background()
	tpE, byEndpoints := startProvider(t, testprovider.Config{SendIss: true}, nil)
	tp, _ := startProvider(t, testprovider.Config{SendIss: true}, nil)
	byIssuer, err := connections.NewProvider(connections.Config{ID: "x", Issuer: tp.Issuer, ClientID: "client", ClientSecret: "client-secret",
		Resource: "https://api.example", RedirectURL: "https://as.example/cb"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		p    *connections.Provider
		iss  string
		ok   bool
	}{
		{"accepts the issuer of configured endpoints", byEndpoints, tpE.Issuer, true},
		{"accepts no iss from configured endpoints", byEndpoints, "", true},
		{"refuses another provider's iss", byEndpoints, "https://evil.example", false},
		{"refuses a longer path", byEndpoints, tpE.Issuer + "/authorize/x", false},
		{"accepts the configured issuer", byIssuer, tp.Issuer, true},
		{"refuses no iss when the metadata promises one", byIssuer, "", false},
		{"refuses another issuer", byIssuer, tp.Issuer + "/other", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.CheckResponseIssuer(ctx, c.iss)
			if c.ok != (err == nil) || (err != nil && !errors.Is(err, connections.ErrWrongIssuer)) {
				t.Fatalf("CheckResponseIssuer(%q) = %v", c.iss, err)
			}
		})
	}
}

// staleOnce answers the first GetConnection with a record read earlier:
// an instance that read the connection before another instance refreshed
// it.
type staleOnce struct {
	storage.ConnectionStore
	stale *storage.Connection
}

func (s *staleOnce) GetConnection(ctx context.Context, subject, id string) (*storage.Connection, error) {
	if c := s.stale; c != nil {
		s.stale = nil
		return c, nil
	}
	return s.ConnectionStore.GetConnection(ctx, subject, id)
}

// Two instances share the store; the second refreshes with the refresh
// token the first already used (and the provider rotated): it gets the
// first one's tokens, and the connection is not marked.
func TestARefreshLostToAnotherInstanceUsesItsTokens(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	tp, p := startProvider(t, testprovider.Config{AccessTTL: time.Minute}, nil)
	st := memory.New()
	a := newVault(t, st, clock, p)
	connect(t, a, p, "ada")
	before, err := st.GetConnection(ctx, "ada", "github")
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	tp.SetAccessTTL(time.Hour) // the refreshed token is fresh at the moved clock
	refreshed, err := a.Token(ctx, "ada", "github")
	if err != nil {
		t.Fatal(err)
	}
	b := newVault(t, &staleOnce{ConnectionStore: st, stale: before}, clock, p)
	got, err := b.Token(ctx, "ada", "github")
	if err != nil || got.AccessToken != refreshed.AccessToken {
		t.Fatalf("the second instance: %+v, %v", got, err)
	}
	if n := tp.Count("refresh"); n != 1 {
		t.Fatalf("%d refreshes accepted", n)
	}
	if list, _ := a.List(ctx, "ada"); len(list) != 1 || list[0].NeedsReconnect {
		t.Fatalf("the connection was marked: %+v", list)
	}
}
