package upstream

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestIDTokenIssuerMatches: an ID token's iss equals the configured issuer
// byte for byte; only Google's issuer also accepts the scheme-less
// accounts.google.com its ID tokens may carry.
func TestIDTokenIssuerMatches(t *testing.T) {
	for _, tc := range []struct {
		name, configured, iss string
		want                  bool
	}{
		{"accepts Google's issuer as configured", "https://accounts.google.com", "https://accounts.google.com", true},
		{"accepts Google's scheme-less form", "https://accounts.google.com", "accounts.google.com", true},
		{"refuses Google's form with http", "https://accounts.google.com", "http://accounts.google.com", false},
		{"refuses Google's form with a trailing slash", "https://accounts.google.com", "https://accounts.google.com/", false},
		{"refuses Google's form in another case", "https://accounts.google.com", "Accounts.Google.com", false},
		{"refuses another host's scheme-less form for Google", "https://accounts.google.com", "accounts.google.com.evil.example", false},
		{"refuses the scheme-less form of a configured scheme-less issuer's https form", "accounts.google.com", "https://accounts.google.com", false},
		{"keeps the exact match for another issuer", "https://login.acme.example", "https://login.acme.example", true},
		{"refuses the scheme-less form of another issuer", "https://login.acme.example", "login.acme.example", false},
		{"refuses Google's issuer for another provider", "https://login.acme.example", "accounts.google.com", false},
		{"refuses Google's issuer with a path", "https://accounts.google.com/o", "accounts.google.com/o", false},
		{"refuses an empty iss", "https://accounts.google.com", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := idTokenIssuerMatches(tc.configured, tc.iss); got != tc.want {
				t.Fatalf("idTokenIssuerMatches(%q, %q) = %v, want %v", tc.configured, tc.iss, got, tc.want)
			}
		})
	}
}

// TestTheIDTokenCheckAcceptsGooglesSchemelessIssuer: the claim checks of an
// ID token (checkClaims, after the signature) take accounts.google.com for
// Google's issuer, and nothing but the exact issuer for another provider.
func TestTheIDTokenCheckAcceptsGooglesSchemelessIssuer(t *testing.T) {
	now := time.Unix(1900000000, 0)
	claims := func(iss string) map[string]any {
		return map[string]any{"iss": iss, "aud": "cid", "sub": "1234", "nonce": "n",
			"iat": json.Number("1900000000"), "exp": json.Number("1900000300")}
	}
	for _, tc := range []struct {
		issuer, iss string
		ok          bool
	}{
		{"https://accounts.google.com", "https://accounts.google.com", true},
		{"https://accounts.google.com", "accounts.google.com", true},
		{"https://accounts.google.com", "https://accounts.google.com.evil.example", false},
		{"https://login.acme.example", "https://login.acme.example", true},
		{"https://login.acme.example", "login.acme.example", false},
		{"https://login.acme.example", "accounts.google.com", false},
	} {
		p, err := New(Config{ID: "g", Issuer: tc.issuer, ClientID: "cid", RedirectURL: "https://as.example/upstream/g/callback",
			Scopes: []string{"openid"}, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		err = p.checkClaims(claims(tc.iss), "n")
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrInvalidToken) {
			t.Errorf("issuer %q, iss %q: %v, want ok %v", tc.issuer, tc.iss, err, tc.ok)
		}
	}
}
