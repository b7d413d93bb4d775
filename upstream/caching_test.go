package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/upstream"
)

// TestKeySetCacheLifetime: the JWK Set is fetched again when it is
// DefaultKeyTTL old, not before for a kid it holds; an unknown kid fetches
// it again from exactly KeyRefreshInterval after the last try; a failed
// fetch keeps the keys it had.
func TestKeySetCacheLifetime(t *testing.T) {
	fp := newFakeProvider(t)
	p := fp.relyingParty(nil)
	ctx := context.Background()
	verify := func(kid string) error {
		_, err := p.VerifyIDToken(ctx, fp.sign(fp.claims(), fp.key, kid), "n-1")
		return err
	}
	fetches := func(want int, when string) {
		t.Helper()
		if n := fp.count("/jwks"); n != want {
			t.Fatalf("%s: %d key set fetches, want %d", when, n, want)
		}
	}
	if err := verify("k1"); err != nil {
		t.Fatal(err)
	}
	fetches(1, "first token")
	fp.advance(upstream.DefaultKeyRefreshInterval + time.Second)
	if err := verify("k1"); err != nil {
		t.Fatal(err)
	}
	fetches(1, "a known kid within the key lifetime")
	fp.advance(upstream.DefaultKeyTTL - upstream.DefaultKeyRefreshInterval - 2*time.Second)
	if err := verify("k1"); err != nil {
		t.Fatal(err)
	}
	fetches(1, "a second before the key lifetime ends")
	fp.advance(time.Second)
	if err := verify("k1"); err != nil {
		t.Fatal(err)
	}
	fetches(2, "exactly the key lifetime")

	fp.advance(upstream.DefaultKeyRefreshInterval - time.Second)
	if err := verify("k9"); !errors.Is(err, upstream.ErrInvalidToken) {
		t.Fatalf("unknown kid: %v", err)
	}
	fetches(2, "an unknown kid a second before the refresh interval")
	fp.advance(time.Second)
	if err := verify("k9"); !errors.Is(err, upstream.ErrInvalidToken) {
		t.Fatalf("unknown kid: %v", err)
	}
	fetches(3, "an unknown kid exactly the refresh interval after the last fetch")

	fp.set(func(fp *fakeProvider) { fp.jwks = "not a key set" })
	fp.advance(upstream.DefaultKeyTTL)
	if err := verify("k1"); err != nil {
		t.Fatalf("a failed key set fetch dropped the cached keys: %v", err)
	}
	fetches(4, "the failed fetch")
}

// TestDiscoveryCacheLifetime: the discovery document is read again when it
// is DefaultMetadataTTL old and not before; a failed read is retried from
// exactly KeyRefreshInterval later, not before, and the cached document
// stays in use while reads fail.
func TestDiscoveryCacheLifetime(t *testing.T) {
	ctx := context.Background()
	reads := func(t *testing.T, fp *fakeProvider, want int, when string) {
		t.Helper()
		if n := fp.count("/.well-known/openid-configuration"); n != want {
			t.Fatalf("%s: %d discovery reads, want %d", when, n, want)
		}
	}
	t.Run("cached for its lifetime", func(t *testing.T) {
		fp := newFakeProvider(t)
		p := fp.relyingParty(nil)
		authURL := func() {
			t.Helper()
			if _, err := p.AuthCodeURL(ctx, "st", "n", upstream.NewVerifier()); err != nil {
				t.Fatal(err)
			}
		}
		authURL()
		reads(t, fp, 1, "first use")
		fp.advance(upstream.DefaultKeyRefreshInterval + time.Second)
		authURL()
		reads(t, fp, 1, "within the document's lifetime")
		fp.advance(upstream.DefaultMetadataTTL - upstream.DefaultKeyRefreshInterval - 2*time.Second)
		authURL()
		reads(t, fp, 1, "a second before the lifetime ends")
		fp.advance(time.Second)
		authURL()
		reads(t, fp, 2, "exactly the lifetime")
		fp.set(func(fp *fakeProvider) { fp.discoveryStatus = http.StatusServiceUnavailable })
		fp.advance(upstream.DefaultMetadataTTL)
		authURL()
		reads(t, fp, 3, "a failed read after the lifetime (the cached document is used)")
	})
	t.Run("a failed read is retried at the refresh interval", func(t *testing.T) {
		fp := newFakeProvider(t)
		fp.set(func(fp *fakeProvider) { fp.discoveryStatus = http.StatusServiceUnavailable })
		p := fp.relyingParty(nil)
		if _, err := p.AuthCodeURL(ctx, "st", "n", upstream.NewVerifier()); !errors.Is(err, upstream.ErrUnavailable) {
			t.Fatalf("failing discovery: %v", err)
		}
		fp.set(func(fp *fakeProvider) { fp.discoveryStatus = 0 })
		fp.advance(upstream.DefaultKeyRefreshInterval - time.Second)
		if _, err := p.AuthCodeURL(ctx, "st", "n", upstream.NewVerifier()); !errors.Is(err, upstream.ErrUnavailable) || !strings.Contains(err.Error(), "not retried yet") {
			t.Fatalf("a second before the retry: %v", err)
		}
		reads(t, fp, 1, "a second before the retry")
		fp.advance(time.Second)
		if _, err := p.AuthCodeURL(ctx, "st", "n", upstream.NewVerifier()); err != nil {
			t.Fatalf("exactly the refresh interval after the failure: %v", err)
		}
		reads(t, fp, 2, "the retry")
	})
}

// TestDiscoveryEndpointChecks: the endpoints of the discovery document must
// be absolute URLs without credentials or fragment, https, or http when the
// issuer is http; a userinfo endpoint that is not is dropped and never
// read.
func TestDiscoveryEndpointChecks(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, endpoint string
		ok             bool
	}{
		{"https for an http issuer", "https://login.example/authorize", true},
		{"http for an http issuer", "", true},
		{"no host", "http:///authorize", false},
		{"a relative URL", "/authorize", false},
		{"credentials", "http://user:pw@127.0.0.1/authorize", false},
		{"a fragment", "http://127.0.0.1/authorize#f", false},
		{"not a URL", "http://127.0.0.1/%zz", false},
		{"another scheme", "ftp://127.0.0.1/authorize", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fp := newFakeProvider(t)
			if tc.endpoint != "" {
				fp.set(func(fp *fakeProvider) { fp.meta["authorization_endpoint"] = tc.endpoint })
			}
			p := fp.relyingParty(nil)
			u, err := p.AuthCodeURL(ctx, "st", "n", upstream.NewVerifier())
			if !tc.ok {
				if !errors.Is(err, upstream.ErrUnavailable) || !strings.Contains(err.Error(), "authorization_endpoint") {
					t.Fatalf("got %q, %v; want the endpoint refused", u, err)
				}
				return
			}
			want := tc.endpoint
			if want == "" {
				want = fp.issuer + "/authorize"
			}
			if err != nil || !strings.HasPrefix(u, want+"?") {
				t.Fatalf("got %q, %v; want %s?...", u, err, want)
			}
		})
	}
	t.Run("a userinfo endpoint with credentials is never read", func(t *testing.T) {
		fp := newFakeProvider(t)
		fp.set(func(fp *fakeProvider) {
			fp.meta["userinfo_endpoint"] = strings.Replace(fp.issuer, "http://", "http://user:pw@", 1) + "/userinfo"
		})
		p := fp.relyingParty(func(c *upstream.Config) { c.AllowedGroups = []string{"staff"} })
		fp.answerToken(fp.idToken(fp.claims()))
		fp.answerUserinfo(map[string]any{"sub": "u-1", "groups": []string{"staff"}})
		id, err := p.Exchange(ctx, "code", "verifier", "n-1")
		if err != nil || id.Subject != "u-1" || id.Groups != nil {
			t.Fatalf("got %+v, %v", id, err)
		}
		if n := fp.count("/userinfo"); n != 0 {
			t.Fatalf("userinfo read %d times", n)
		}
	})
}
