package upstream_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/internal/safehttp"
	"github.com/mcpauth/mcpauth/internal/testop"
	"github.com/mcpauth/mcpauth/upstream"
)

const callback = "http://127.0.0.1:1/upstream/corp/callback"

var people = []testop.Person{
	{ID: "u-alice", Username: "alice", Password: "alice-pw", Email: "alice@acme.example", EmailVerified: true, Name: "Alice", Groups: []string{"mcp-users", "mcp-admins"}},
	{ID: "u-bob", Username: "bob", Password: "bob-pw", Email: "bob@acme.example", EmailVerified: true, Name: "Bob", Groups: []string{"mcp-users"}},
	{ID: "u-eve", Username: "eve", Password: "eve-pw", Email: "eve@elsewhere.example", EmailVerified: true, Groups: []string{"mcp-users"}},
	{ID: "u-mal", Username: "mal", Password: "mal-pw", Email: "mal@acme.example", EmailVerified: false, Groups: []string{"mcp-users"}},
	{ID: "u-carol", Username: "carol", Password: "carol-pw", Email: "carol@acme.example", EmailVerified: true, Groups: []string{"sales"}},
}

func startOP(t *testing.T, inToken bool) *testop.OP {
	return testop.Start(t, people, testop.Client{ID: "mcpauth", Secret: "op-secret", RedirectURIs: []string{callback}, ClaimsInIDToken: inToken})
}

func provider(t *testing.T, op *testop.OP, edit func(*upstream.Config)) *upstream.Provider {
	t.Helper()
	cfg := upstream.Config{
		ID: "corp", Issuer: op.Issuer, ClientID: "mcpauth", ClientSecret: "op-secret",
		RedirectURL: callback, Scopes: []string{"openid", "email", "profile", "groups", "offline_access"},
		AllowedDomains: []string{"acme.example"}, AllowedGroups: []string{"mcp-users"},
		ClaimScopes: map[string]map[string][]string{"groups": {"mcp-users": {"mcp:tools"}, "mcp-admins": {"mcp:admin", "mcp:tools"}}},
	}
	if edit != nil {
		edit(&cfg)
	}
	p, err := upstream.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// signIn runs the browser part at the real provider and returns the code
// from the callback, checking that state came back unchanged.
func signIn(t *testing.T, op *testop.OP, p *upstream.Provider, user, pw, state, nonce, verifier string) string {
	t.Helper()
	authURL, err := p.AuthCodeURL(context.Background(), state, nonce, verifier)
	if err != nil {
		t.Fatal(err)
	}
	q := mustParse(t, authURL).Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") != nonce || q.Get("state") != state {
		t.Fatalf("authorization URL lacks PKCE, nonce or state: %s", authURL)
	}
	if q.Has("resource") {
		t.Fatalf("authorization URL carries a resource: %s", authURL)
	}
	cb, err := op.SignIn(&http.Client{}, authURL, user, pw)
	if err != nil {
		t.Fatal(err)
	}
	if cb.Query().Get("state") != state || cb.Query().Get("code") == "" {
		t.Fatalf("callback %s", cb)
	}
	return cb.Query().Get("code")
}

func mustParse(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestSignInThroughTheProvider(t *testing.T) {
	for _, inToken := range []bool{true, false} {
		name := "claims from userinfo"
		if inToken {
			name = "claims in the ID token"
		}
		t.Run(name, func(t *testing.T) {
			op := startOP(t, inToken)
			p := provider(t, op, nil)
			verifier, nonce := upstream.NewVerifier(), upstream.RandomToken()
			code := signIn(t, op, p, "alice", "alice-pw", upstream.RandomToken(), nonce, verifier)
			id, err := p.Exchange(context.Background(), code, verifier, nonce)
			if err != nil {
				t.Fatal(err)
			}
			if id.Subject != "u-alice" || id.Email != "alice@acme.example" || !id.EmailVerified || id.RefreshToken == "" {
				t.Fatalf("identity %+v", id)
			}
			if !slices.Equal(id.Groups, []string{"mcp-users", "mcp-admins"}) || !slices.Equal(id.Claims["groups"], id.Groups) {
				t.Fatalf("groups %v claims %v", id.Groups, id.Claims)
			}
			if err := p.Check(id); err != nil {
				t.Fatal(err)
			}
			if got := p.Scopes(id.Claims); !slices.Equal(got, []string{"mcp:admin", "mcp:tools"}) {
				t.Fatalf("scopes %v", got)
			}
			// The code is single use at the provider.
			if _, err := p.Exchange(context.Background(), code, verifier, nonce); !errors.Is(err, upstream.ErrRefused) {
				t.Fatalf("second exchange: %v", err)
			}
		})
	}
}

func TestExchangeNeedsTheVerifier(t *testing.T) {
	op := startOP(t, true)
	p := provider(t, op, nil)
	verifier, nonce := upstream.NewVerifier(), upstream.RandomToken()
	code := signIn(t, op, p, "bob", "bob-pw", "s1", nonce, verifier)
	if _, err := p.Exchange(context.Background(), code, upstream.NewVerifier(), nonce); !errors.Is(err, upstream.ErrRefused) {
		t.Fatalf("exchange with another verifier: %v", err)
	}
}

func TestIDTokenChecks(t *testing.T) {
	op := startOP(t, true)
	ctx := context.Background()
	other := testop.NewKey()
	cases := []struct {
		name   string
		nonce  string // given to Exchange; "" means the one sent
		now    time.Duration
		tamper func(map[string]any) (map[string]any, *rsa.PrivateKey, string)
		want   error
	}{
		{name: "wrong nonce", nonce: "another-nonce", want: upstream.ErrInvalidToken},
		{name: "expired", now: 2 * time.Hour, want: upstream.ErrExpired},
		{name: "issued in the future", now: -time.Hour, want: upstream.ErrClockSkew},
		{name: "another audience", tamper: func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) {
			c["aud"] = []any{"someone-else"}
			return c, nil, ""
		}, want: upstream.ErrInvalidToken},
		{name: "several audiences without azp", tamper: func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) {
			c["aud"] = []any{"mcpauth", "someone-else"}
			delete(c, "azp")
			return c, nil, ""
		}, want: upstream.ErrInvalidToken},
		{name: "azp of another client", tamper: func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) {
			c["azp"] = "someone-else"
			return c, nil, ""
		}, want: upstream.ErrInvalidToken},
		{name: "another issuer", tamper: func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) {
			c["iss"] = "https://evil.example"
			return c, nil, ""
		}, want: upstream.ErrInvalidToken},
		{name: "unknown key", tamper: func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) {
			return c, other, "not-published"
		}, want: upstream.ErrInvalidToken},
		{name: "known kid, another key", tamper: func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) {
			_, kid := op.SigningKey(context.Background())
			return c, other, kid
		}, want: upstream.ErrInvalidToken},
		{name: "no exp", tamper: func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) {
			delete(c, "exp")
			return c, nil, ""
		}, want: upstream.ErrInvalidToken},
		{name: "several audiences with our azp", tamper: func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) {
			c["aud"] = []any{"mcpauth", "someone-else"}
			c["azp"] = "mcpauth"
			return c, nil, ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := provider(t, op, func(c *upstream.Config) {
				c.Now = func() time.Time { return time.Now().Add(tc.now) }
			})
			verifier, nonce := upstream.NewVerifier(), upstream.RandomToken()
			// Discovery and keys first, with the real clock of the test.
			code := signIn(t, op, p, "alice", "alice-pw", "st", nonce, verifier)
			op.Tamper(tc.tamper)
			defer op.Tamper(nil)
			n := nonce
			if tc.nonce != "" {
				n = tc.nonce
			}
			id, err := p.Exchange(ctx, code, verifier, n)
			if tc.want == nil {
				if err != nil || id.Subject != "u-alice" {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || id != nil {
				t.Fatalf("got %v, %v; want %v", id, err, tc.want)
			}
		})
	}
}

func TestUnknownKidRefetchesKeysAtALimitedRate(t *testing.T) {
	op := startOP(t, true)
	var offset time.Duration
	p := provider(t, op, func(c *upstream.Config) {
		c.Now = func() time.Time { return time.Now().Add(offset) }
	})
	ctx := context.Background()
	exchange := func() error {
		verifier, nonce := upstream.NewVerifier(), upstream.RandomToken()
		code := signIn(t, op, p, "alice", "alice-pw", "st", nonce, verifier)
		_, err := p.Exchange(ctx, code, verifier, nonce)
		return err
	}
	if err := exchange(); err != nil {
		t.Fatal(err)
	}
	if n := p.KeyFetches(); n != 1 {
		t.Fatalf("%d key fetches after one sign-in", n)
	}
	other := testop.NewKey()
	op.Tamper(func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) { return c, other, "rotated" })
	defer op.Tamper(nil)
	for round := range 2 {
		offset += upstream.DefaultKeyRefreshInterval + time.Second
		for range 3 {
			if err := exchange(); !errors.Is(err, upstream.ErrInvalidToken) {
				t.Fatalf("token of an unpublished key: %v", err)
			}
		}
		if n := p.KeyFetches(); n != 2+round {
			t.Fatalf("%d key fetches after round %d: an unknown kid must refetch once per interval, not per token", n, round)
		}
	}
}

func TestAllowRules(t *testing.T) {
	op := startOP(t, true)
	p := provider(t, op, nil)
	for _, tc := range []struct{ user, rule string }{
		{"bob", ""},
		{"eve", "allowed_domains"},  // another domain
		{"mal", "allowed_domains"},  // email not verified
		{"carol", "allowed_groups"}, // not in mcp-users
		{"alice", ""},
	} {
		t.Run(tc.user, func(t *testing.T) {
			verifier, nonce := upstream.NewVerifier(), upstream.RandomToken()
			code := signIn(t, op, p, tc.user, tc.user+"-pw", "st", nonce, verifier)
			id, err := p.Exchange(context.Background(), code, verifier, nonce)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Check(id)
			var de *upstream.DeniedError
			switch {
			case tc.rule == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.rule != "" && (!errors.As(err, &de) || de.Rule != tc.rule || !errors.Is(err, upstream.ErrDenied)):
				t.Fatalf("got %v, want refusal by %s", err, tc.rule)
			}
		})
	}
}

func TestRefreshRereadsClaims(t *testing.T) {
	op := startOP(t, true)
	p := provider(t, op, nil)
	ctx := context.Background()
	verifier, nonce := upstream.NewVerifier(), upstream.RandomToken()
	code := signIn(t, op, p, "bob", "bob-pw", "st", nonce, verifier)
	id, err := p.Exchange(ctx, code, verifier, nonce)
	if err != nil {
		t.Fatal(err)
	}
	op.SetGroups("u-bob", []string{"sales"})
	again, err := p.Refresh(ctx, id.RefreshToken, id.Subject)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Groups, []string{"sales"}) || again.RefreshToken == "" {
		t.Fatalf("after refresh %+v", again)
	}
	if err := p.Check(again); err == nil {
		t.Fatal("a person who left mcp-users is still allowed")
	}
	if _, err := p.Refresh(ctx, again.RefreshToken, "u-alice"); !errors.Is(err, upstream.ErrInvalidToken) {
		t.Fatalf("refresh that names another person: %v", err)
	}
	op.RefuseRefresh("u-bob")
	if _, err := p.Refresh(ctx, again.RefreshToken, id.Subject); !errors.Is(err, upstream.ErrRefused) {
		t.Fatalf("refused refresh: %v", err)
	}
}

func TestUnreachableProvider(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p, err := upstream.New(upstream.Config{ID: "corp", Issuer: "http://" + addr, ClientID: "c", ClientSecret: "s", RedirectURL: callback, Scopes: []string{"openid"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AuthCodeURL(context.Background(), "s", "n", upstream.NewVerifier()); !errors.Is(err, upstream.ErrUnavailable) {
		t.Fatalf("unreachable provider: %v", err)
	}
	if _, err := p.Exchange(context.Background(), "code", upstream.NewVerifier(), "n"); !errors.Is(err, upstream.ErrUnavailable) {
		t.Fatalf("unreachable provider: %v", err)
	}
}

func TestHostileProviderDocuments(t *testing.T) {
	var issuer string
	big := strings.Repeat("x", upstream.MaxJWKSBytes+1)
	mux := http.NewServeMux()
	mux.HandleFunc("/big/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"issuer":"` + issuer + `/big","pad":"` + big + `"}`))
	})
	mux.HandleFunc("/other/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"issuer":"https://evil.example","authorization_endpoint":"` + issuer + `/a","token_endpoint":"` + issuer + `/t","jwks_uri":"` + issuer + `/k"}`))
	})
	mux.HandleFunc("/bigkeys/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"issuer":"` + issuer + `/bigkeys","authorization_endpoint":"` + issuer + `/a","token_endpoint":"` + issuer + `/t","jwks_uri":"` + issuer + `/bigkeys/jwks"}`))
	})
	mux.HandleFunc("/bigkeys/jwks", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"keys":[],"pad":"` + big + `"}`))
	})
	// The slow answers wait for the client to give up; a client without a
	// timeout would get, after 30 s, a document that is no timeout error.
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
			w.Write([]byte(`{}`))
		}
	}
	mux.HandleFunc("/slow/.well-known/openid-configuration", slow)
	mux.HandleFunc("/slowkeys/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"issuer":"` + issuer + `/slowkeys","authorization_endpoint":"` + issuer + `/a","token_endpoint":"` + issuer + `/t","jwks_uri":"` + issuer + `/slowkeys/jwks"}`))
	})
	mux.HandleFunc("/slowkeys/jwks", slow)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	issuer = srv.URL
	newP := func(path string) *upstream.Provider {
		p, err := upstream.New(upstream.Config{ID: "x", Issuer: issuer + path, ClientID: "c", ClientSecret: "s", RedirectURL: callback,
			Scopes: []string{"openid"}, HTTPClient: upstream.NewHTTPClient(500 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := newP("/big").AuthCodeURL(context.Background(), "s", "n", "v"); !errors.Is(err, upstream.ErrUnavailable) || !errors.Is(err, safehttp.ErrTooLarge) {
		t.Fatalf("oversized discovery: %v", err)
	}
	if _, err := newP("/other").AuthCodeURL(context.Background(), "s", "n", "v"); !errors.Is(err, upstream.ErrUnavailable) || !strings.Contains(err.Error(), "names issuer") {
		t.Fatalf("discovery of another issuer: %v", err)
	}
	if _, err := newP("/bigkeys").VerifyIDToken(context.Background(), "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsifQ.e30.c2ln", "n"); !errors.Is(err, upstream.ErrUnavailable) || !errors.Is(err, safehttp.ErrTooLarge) {
		t.Fatalf("oversized JWKS: %v", err)
	}
	if _, err := newP("/slow").AuthCodeURL(context.Background(), "s", "n", "v"); !errors.Is(err, upstream.ErrUnavailable) || !errors.Is(err, safehttp.ErrTimeout) {
		t.Fatalf("slow discovery: %v, want a timeout", err)
	}
	if _, err := newP("/slowkeys").VerifyIDToken(context.Background(), "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsifQ.e30.c2ln", "n"); !errors.Is(err, upstream.ErrUnavailable) || !errors.Is(err, safehttp.ErrTimeout) {
		t.Fatalf("slow JWKS: %v, want a timeout", err)
	}
}

func TestAuthorizationParamsAndPrivateKeyJWTConfig(t *testing.T) {
	op := startOP(t, true)
	p := provider(t, op, func(c *upstream.Config) {
		c.AuthParams = map[string]string{"access_type": "offline", "hd": "acme.example"}
	})
	u, err := p.AuthCodeURL(context.Background(), "st", "no", upstream.NewVerifier())
	if err != nil {
		t.Fatal(err)
	}
	q := mustParse(t, u).Query()
	if q.Get("access_type") != "offline" || q.Get("hd") != "acme.example" || q.Get("scope") != "openid email profile groups offline_access" || q.Get("client_id") != "mcpauth" {
		t.Fatalf("authorization URL %s", u)
	}
	if _, err := upstream.New(upstream.Config{ID: "x", Issuer: "https://x", ClientID: "c", RedirectURL: callback, Scopes: []string{"email"}}); err == nil {
		t.Fatal("scopes without openid accepted")
	}
}

// TestPrivateKeyJWTAtTheProvider: the code exchange and the refresh
// authenticate with a signed assertion (RFC 7523 §2.2) the real provider
// verifies with the registered public key.
func TestPrivateKeyJWTAtTheProvider(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	op := testop.Start(t, people, testop.Client{ID: "mcpauth", RedirectURIs: []string{callback}, ClaimsInIDToken: true, PublicKey: key.Public(), KeyID: "k1"})
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		audience string
		signer   *ecdsa.PrivateKey
		ok       bool
	}{
		{"aud the issuer, as the provider asks", op.Issuer, key, true},
		{"aud the token endpoint, which this provider refuses", "", key, false},
		{"a key the provider does not know", op.Issuer, mustKey(t), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := provider(t, op, func(c *upstream.Config) {
				c.ClientSecret, c.PrivateKey, c.KeyID, c.KeyAlg, c.AssertionAudience = "", tc.signer, "k1", "ES256", tc.audience
			})
			verifier, nonce := upstream.NewVerifier(), upstream.RandomToken()
			id, err := p.Exchange(ctx, signIn(t, op, p, "bob", "bob-pw", "st", nonce, verifier), verifier, nonce)
			if !tc.ok {
				if !errors.Is(err, upstream.ErrRefused) {
					t.Fatalf("got %v, want the provider to refuse", err)
				}
				return
			}
			if err != nil || id.Subject != "u-bob" {
				t.Fatalf("exchange: %v", err)
			}
			again, err := p.Refresh(ctx, id.RefreshToken, id.Subject)
			if err != nil || again.Subject != "u-bob" {
				t.Fatalf("refresh: %v", err)
			}
		})
	}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSubjectClaim: the subject comes from the configured claim (Entra ID
// needs oid); a token without it is refused.
func TestSubjectClaim(t *testing.T) {
	op := startOP(t, true)
	ctx := context.Background()
	for _, tc := range []struct {
		claim, want string
	}{{"email", "bob@acme.example"}, {"oid", ""}} {
		p := provider(t, op, func(c *upstream.Config) { c.SubjectClaim = tc.claim })
		verifier, nonce := upstream.NewVerifier(), upstream.RandomToken()
		id, err := p.Exchange(ctx, signIn(t, op, p, "bob", "bob-pw", "st", nonce, verifier), verifier, nonce)
		if tc.want == "" {
			if !errors.Is(err, upstream.ErrInvalidToken) {
				t.Fatalf("subject_claim %s absent from the token: %v", tc.claim, err)
			}
			continue
		}
		if err != nil || id.Subject != tc.want {
			t.Fatalf("subject_claim %s: %v %v", tc.claim, id, err)
		}
	}
}
