package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/upstream"
)

// TestSubjectCharacters: the subject claim is 1 to 255 printable ASCII
// characters (OpenID Connect Core §2), space and tilde included.
func TestSubjectCharacters(t *testing.T) {
	fp := newFakeProvider(t)
	p := fp.relyingParty(nil)
	for _, tc := range []struct {
		sub string
		ok  bool
	}{
		{strings.Repeat("a", upstream.MaxSubjectLen), true},
		{strings.Repeat("a", upstream.MaxSubjectLen+1), false},
		{"ann smith", true},
		{"!~", true},
		{"ann\nsmith", false},
		{"ann\x1f", false},
		{"ann\x7f", false},
		{"anné", false},
	} {
		c := fp.claims()
		c["sub"] = tc.sub
		fp.answerToken(fp.idToken(c))
		id, err := p.Exchange(context.Background(), "code", "verifier", "n-1")
		if tc.ok {
			if err != nil || id.Subject != tc.sub {
				t.Fatalf("sub %q: %v, %v", tc.sub, id, err)
			}
			continue
		}
		if !errors.Is(err, upstream.ErrInvalidToken) || id != nil {
			t.Fatalf("sub %q: got %v, %v; want ErrInvalidToken", tc.sub, id, err)
		}
	}
}

// TestIdentityFromClaims pins how the verified claims become an Identity.
func TestIdentityFromClaims(t *testing.T) {
	fp := newFakeProvider(t)
	cases := []struct {
		name  string
		cfg   func(*upstream.Config)
		edit  func(c map[string]any)
		check func(t *testing.T, id *upstream.Identity)
	}{
		{name: "email_verified as the string true", edit: func(c map[string]any) { c["email_verified"] = "true" },
			check: func(t *testing.T, id *upstream.Identity) {
				if !id.EmailVerified {
					t.Fatal("not verified")
				}
			}},
		{name: "email_verified as the string false", edit: func(c map[string]any) { c["email_verified"] = "false" },
			check: func(t *testing.T, id *upstream.Identity) {
				if id.EmailVerified {
					t.Fatal("verified")
				}
			}},
		{name: "email_verified false", edit: func(c map[string]any) { c["email_verified"] = false },
			check: func(t *testing.T, id *upstream.Identity) {
				if id.EmailVerified {
					t.Fatal("verified")
				}
			}},
		{name: "name, and preferred_username beside it", edit: func(c map[string]any) { c["name"], c["preferred_username"] = "Ann Smith", "ann" },
			check: func(t *testing.T, id *upstream.Identity) {
				if id.Name != "Ann Smith" {
					t.Fatalf("name %q", id.Name)
				}
			}},
		{name: "preferred_username without name", edit: func(c map[string]any) { c["preferred_username"] = "ann" },
			check: func(t *testing.T, id *upstream.Identity) {
				if id.Name != "ann" {
					t.Fatalf("name %q", id.Name)
				}
			}},
		{name: "auth_time", edit: func(c map[string]any) { c["auth_time"] = fakeNow.Add(-time.Hour).Unix() },
			check: func(t *testing.T, id *upstream.Identity) {
				if !id.AuthTime.Equal(fakeNow.Add(-time.Hour)) {
					t.Fatalf("auth_time %s", id.AuthTime)
				}
			}},
		{name: "no groups: no groups claim", cfg: func(c *upstream.Config) { c.ClaimScopes = map[string]map[string][]string{"groups": {"g": {"s"}}} },
			check: func(t *testing.T, id *upstream.Identity) {
				if _, ok := id.Claims["groups"]; ok || id.Groups != nil {
					t.Fatalf("groups %v, claims %v", id.Groups, id.Claims)
				}
			}},
		{name: "groups without claim_scopes are kept in the claims", edit: func(c map[string]any) { c["groups"] = []any{"a", "b"} },
			check: func(t *testing.T, id *upstream.Identity) {
				if !slices.Equal(id.Groups, []string{"a", "b"}) || !reflect.DeepEqual(id.Claims, map[string][]string{"groups": {"a", "b"}}) {
					t.Fatalf("groups %v, claims %v", id.Groups, id.Claims)
				}
			}},
		{name: "groups: duplicates and objects dropped, booleans and numbers read",
			edit: func(c map[string]any) {
				c["groups"] = []any{"a", "a", map[string]any{"x": 1}, nil, true, json.Number("7"), "b"}
			},
			check: func(t *testing.T, id *upstream.Identity) {
				if !slices.Equal(id.Groups, []string{"a", "true", "7", "b"}) {
					t.Fatalf("groups %q", id.Groups)
				}
			}},
		{name: "a mapped claim absent, one present as a number",
			cfg: func(c *upstream.Config) {
				c.ClaimScopes = map[string]map[string][]string{"roles": {"r": {"s"}}, "level": {"3": {"s3"}}}
			},
			edit: func(c map[string]any) { c["level"] = 3 },
			check: func(t *testing.T, id *upstream.Identity) {
				if !reflect.DeepEqual(id.Claims, map[string][]string{"level": {"3"}}) {
					t.Fatalf("claims %v", id.Claims)
				}
			}},
		{name: "a kept claim (the tenant of access tokens)",
			cfg:  func(c *upstream.Config) { c.KeepClaims = []string{"org"} },
			edit: func(c map[string]any) { c["org"] = "acme" },
			check: func(t *testing.T, id *upstream.Identity) {
				if !reflect.DeepEqual(id.Claims, map[string][]string{"org": {"acme"}}) {
					t.Fatalf("claims %v", id.Claims)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := fp.relyingParty(tc.cfg)
			c := fp.claims()
			if tc.edit != nil {
				tc.edit(c)
			}
			fp.answerToken(fp.idToken(c))
			// Userinfo, if read, says nothing more.
			fp.answerUserinfo(map[string]any{"sub": "u-1"})
			id, err := p.Exchange(context.Background(), "code", "verifier", "n-1")
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, id)
		})
	}
}

// TestWhenUserinfoIsRead: userinfo (Core §5.3) is read only when the ID
// token lacks a claim the allow rules, the groups scope or the mapping need;
// its subject must be the ID token's; an unusable answer leaves the ID
// token's claims to stand on their own.
func TestWhenUserinfoIsRead(t *testing.T) {
	cases := []struct {
		name     string
		cfg      func(*upstream.Config)
		userinfo func(fp *fakeProvider)
		reads    int
		groups   []string
		want     error
	}{
		{name: "nothing needs groups", reads: 0},
		{name: "allowed_groups needs groups", cfg: func(c *upstream.Config) { c.AllowedGroups = []string{"staff"} }, reads: 1, groups: []string{"staff"}},
		{name: "the groups scope needs groups", cfg: func(c *upstream.Config) { c.Scopes = append(c.Scopes, "groups") }, reads: 1, groups: []string{"staff"}},
		{name: "claim_scopes needs its claim", cfg: func(c *upstream.Config) { c.ClaimScopes = map[string]map[string][]string{"groups": {"staff": {"s"}}} }, reads: 1, groups: []string{"staff"}},
		{name: "userinfo of another subject", cfg: func(c *upstream.Config) { c.AllowedGroups = []string{"staff"} }, reads: 1,
			userinfo: func(fp *fakeProvider) { fp.answerUserinfo(map[string]any{"sub": "u-2", "groups": []string{"staff"}}) },
			want:     upstream.ErrInvalidToken},
		{name: "userinfo without a subject", cfg: func(c *upstream.Config) { c.AllowedGroups = []string{"staff"} }, reads: 1,
			userinfo: func(fp *fakeProvider) { fp.answerUserinfo(map[string]any{"groups": []string{"staff"}}) },
			want:     upstream.ErrInvalidToken},
		{name: "userinfo fails: the ID token stands", cfg: func(c *upstream.Config) { c.AllowedGroups = []string{"staff"} }, reads: 1,
			userinfo: func(fp *fakeProvider) {
				fp.set(func(fp *fakeProvider) { fp.userinfoStatus = http.StatusInternalServerError })
			}},
		{name: "userinfo answers a JWT: the ID token stands", cfg: func(c *upstream.Config) { c.AllowedGroups = []string{"staff"} }, reads: 1,
			userinfo: func(fp *fakeProvider) {
				fp.set(func(fp *fakeProvider) { fp.userinfoType, fp.userinfoBody = "application/jwt", "e30.e30.c2ln" })
			}},
		{name: "userinfo does not override the ID token", cfg: func(c *upstream.Config) { c.AllowedGroups = []string{"staff"} }, reads: 1,
			userinfo: func(fp *fakeProvider) {
				fp.answerUserinfo(map[string]any{"sub": "u-1", "email": "mallory@acme.example", "groups": []string{"staff"}})
			},
			groups: []string{"staff"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fp := newFakeProvider(t)
			p := fp.relyingParty(tc.cfg)
			fp.answerToken(fp.idToken(fp.claims()))
			fp.answerUserinfo(map[string]any{"sub": "u-1", "groups": []string{"staff"}})
			if tc.userinfo != nil {
				tc.userinfo(fp)
			}
			id, err := p.Exchange(context.Background(), "code", "verifier", "n-1")
			if n := fp.count("/userinfo"); n != tc.reads {
				t.Fatalf("userinfo read %d times, want %d", n, tc.reads)
			}
			if tc.want != nil {
				if !errors.Is(err, tc.want) || id != nil {
					t.Fatalf("got %v, %v; want %v", id, err, tc.want)
				}
				return
			}
			if err != nil || id.Subject != "u-1" || id.Email != "ann@acme.example" || !slices.Equal(id.Groups, tc.groups) {
				t.Fatalf("got %+v, %v; want groups %v", id, err, tc.groups)
			}
		})
	}
}

// TestRefreshWithoutAnIDToken: a refresh answer may omit the ID token (Core
// §12.2); userinfo must then confirm the person, and its refusals and
// failures are the refresh's. A sign-in without an ID token is refused.
func TestRefreshWithoutAnIDToken(t *testing.T) {
	ctx := context.Background()
	t.Run("sign-in without an ID token", func(t *testing.T) {
		fp := newFakeProvider(t)
		p := fp.relyingParty(nil)
		fp.answerToken("")
		fp.answerUserinfo(map[string]any{"sub": "u-1"})
		if id, err := p.Exchange(ctx, "code", "verifier", "n-1"); !errors.Is(err, upstream.ErrInvalidToken) || id != nil {
			t.Fatalf("got %v, %v", id, err)
		}
		if n := fp.count("/userinfo"); n != 0 {
			t.Fatalf("userinfo read %d times", n)
		}
	})
	cases := []struct {
		name     string
		noInfo   bool // discovery names no userinfo endpoint
		userinfo func(fp *fakeProvider)
		want     error
	}{
		{name: "userinfo confirms the person"},
		{name: "userinfo names another person", userinfo: func(fp *fakeProvider) { fp.answerUserinfo(map[string]any{"sub": "u-2"}) }, want: upstream.ErrInvalidToken},
		{name: "userinfo answers 401", userinfo: func(fp *fakeProvider) { fp.set(func(fp *fakeProvider) { fp.userinfoStatus = http.StatusUnauthorized }) }, want: upstream.ErrRefused},
		{name: "userinfo answers 403", userinfo: func(fp *fakeProvider) { fp.set(func(fp *fakeProvider) { fp.userinfoStatus = http.StatusForbidden }) }, want: upstream.ErrRefused},
		{name: "userinfo answers 500", userinfo: func(fp *fakeProvider) {
			fp.set(func(fp *fakeProvider) { fp.userinfoStatus = http.StatusInternalServerError })
		}, want: upstream.ErrUnavailable},
		{name: "userinfo answers a JWT", userinfo: func(fp *fakeProvider) {
			fp.set(func(fp *fakeProvider) { fp.userinfoType, fp.userinfoBody = "application/jwt", "e30.e30.c2ln" })
		}, want: upstream.ErrInvalidToken},
		{name: "no userinfo endpoint", noInfo: true, want: upstream.ErrInvalidToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fp := newFakeProvider(t)
			if tc.noInfo {
				fp.set(func(fp *fakeProvider) { delete(fp.meta, "userinfo_endpoint") })
			}
			p := fp.relyingParty(nil)
			fp.answerToken("")
			fp.answerUserinfo(map[string]any{"sub": "u-1", "email": "ann@acme.example"})
			if tc.userinfo != nil {
				tc.userinfo(fp)
			}
			id, err := p.Refresh(ctx, "rt-0", "u-1")
			if tc.want != nil {
				if !errors.Is(err, tc.want) || id != nil {
					t.Fatalf("got %v, %v; want %v", id, err, tc.want)
				}
				return
			}
			if err != nil || id.Subject != "u-1" || id.Email != "ann@acme.example" || id.RefreshToken != "rt-1" {
				t.Fatalf("got %+v, %v", id, err)
			}
		})
	}
}
