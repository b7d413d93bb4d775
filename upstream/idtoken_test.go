package upstream_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpauth/mcpauth/upstream"
)

// TestIDTokenClaimEdges pins each claim check of OpenID Connect Core
// §3.1.3.7 at its edge: what passes at the limit and what fails one step
// beyond, with the error class the login pages show.
func TestIDTokenClaimEdges(t *testing.T) {
	fp := newFakeProvider(t)
	now := fakeNow
	skew := upstream.DefaultSkew
	cases := []struct {
		name string
		skew time.Duration // Config.Skew; 0 leaves the default
		edit func(c map[string]any)
		want error
	}{
		{name: "a single audience as a string, no azp", edit: func(c map[string]any) { c["aud"] = fakeClientID }},
		{name: "a single audience as an array, no azp", edit: func(c map[string]any) { c["aud"] = []any{fakeClientID} }},
		{name: "our azp with a single audience", edit: func(c map[string]any) { c["azp"] = fakeClientID }},
		{name: "an empty azp", edit: func(c map[string]any) { c["azp"] = "" }, want: upstream.ErrInvalidToken},
		{name: "an audience that is not a string", edit: func(c map[string]any) { c["aud"] = []any{fakeClientID, 7} }, want: upstream.ErrInvalidToken},
		{name: "nbf in the past", edit: func(c map[string]any) { c["nbf"] = now.Add(-time.Hour).Unix() }},
		{name: "nbf ahead by exactly the skew", edit: func(c map[string]any) { c["nbf"] = now.Add(skew).Unix() }},
		{name: "nbf a second beyond the skew", edit: func(c map[string]any) { c["nbf"] = now.Add(skew + time.Second).Unix() }, want: upstream.ErrClockSkew},
		{name: "iat ahead by exactly the skew", edit: func(c map[string]any) { c["iat"] = now.Add(skew).Unix() }},
		{name: "iat a second beyond the skew", edit: func(c map[string]any) { c["iat"] = now.Add(skew + time.Second).Unix() }, want: upstream.ErrClockSkew},
		{name: "iat 0, the epoch", edit: func(c map[string]any) { c["iat"] = 0 }},
		{name: "iat negative", edit: func(c map[string]any) { c["iat"] = -1 }, want: upstream.ErrInvalidToken},
		{name: "iat a string", edit: func(c map[string]any) { c["iat"] = "1900000000" }, want: upstream.ErrInvalidToken},
		{name: "exp a second within the skew", edit: func(c map[string]any) { c["exp"] = now.Add(-skew + time.Second).Unix() }},
		{name: "exp exactly the skew ago", edit: func(c map[string]any) { c["exp"] = now.Add(-skew).Unix() }, want: upstream.ErrExpired},
		{name: "exp 0, the epoch, is expired", edit: func(c map[string]any) { c["exp"] = 0 }, want: upstream.ErrExpired},
		{name: "exp negative is no date", edit: func(c map[string]any) { c["exp"] = -1 }, want: upstream.ErrInvalidToken},
		{name: "exp 2^40 is the last date read", edit: func(c map[string]any) { c["exp"] = int64(1) << 40 }},
		{name: "exp 2^40+1 is no date", edit: func(c map[string]any) { c["exp"] = int64(1)<<40 + 1 }, want: upstream.ErrInvalidToken},
		{name: "exp beyond float64", edit: func(c map[string]any) { c["exp"] = json.Number("1e400") }, want: upstream.ErrInvalidToken},
		{name: "exp fractional", edit: func(c map[string]any) { c["exp"] = json.Number("1900000300.5") }},
		{name: "default skew: exp a minute ago", edit: func(c map[string]any) { c["exp"] = now.Add(-time.Minute).Unix() }},
		{name: "skew 10s: exp 9s ago", skew: 10 * time.Second, edit: func(c map[string]any) { c["exp"] = now.Add(-9 * time.Second).Unix() }},
		{name: "skew 10s: exp 11s ago", skew: 10 * time.Second, edit: func(c map[string]any) { c["exp"] = now.Add(-11 * time.Second).Unix() }, want: upstream.ErrExpired},
		{name: "no sub", edit: func(c map[string]any) { delete(c, "sub") }, want: upstream.ErrInvalidToken},
		{name: "iss without its scheme", edit: func(c map[string]any) { c["iss"] = strings.TrimPrefix(c["iss"].(string), "http://") }, want: upstream.ErrInvalidToken},
		{name: "no nonce", edit: func(c map[string]any) { delete(c, "nonce") }, want: upstream.ErrInvalidToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := fp.relyingParty(func(c *upstream.Config) { c.Skew = tc.skew })
			c := fp.claims()
			tc.edit(c)
			got, err := p.VerifyIDToken(context.Background(), fp.idToken(c), "n-1")
			if tc.want == nil {
				if err != nil || got["sub"] != c["sub"] {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
			for _, other := range []error{upstream.ErrInvalidToken, upstream.ErrExpired, upstream.ErrClockSkew} {
				if other != tc.want && errors.Is(err, other) {
					t.Fatalf("%v is also %v", err, other)
				}
			}
		})
	}
}

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestIDTokenKeySelection: which keys of the provider's JWK Set may verify
// a token (RFC 7517 §4.2-4.4: use, alg and kid of each key).
func TestIDTokenKeySelection(t *testing.T) {
	other := newECKey(t)
	cases := []struct {
		name string
		keys func(fp *fakeProvider) []jose.JSONWebKey
		kid  string // the token's kid header; "" for none
		ok   bool
	}{
		{name: "no kid: the signing key first of two", kid: "", ok: true, keys: func(fp *fakeProvider) []jose.JSONWebKey {
			return []jose.JSONWebKey{{Key: &fp.key.PublicKey, KeyID: "a"}, {Key: &other.PublicKey, KeyID: "b"}}
		}},
		{name: "no kid: the signing key second of two", kid: "", ok: true, keys: func(fp *fakeProvider) []jose.JSONWebKey {
			return []jose.JSONWebKey{{Key: &other.PublicKey, KeyID: "b"}, {Key: &fp.key.PublicKey, KeyID: "a"}}
		}},
		{name: "two keys of one kid, the signing key second", kid: "k1", ok: true, keys: func(fp *fakeProvider) []jose.JSONWebKey {
			return []jose.JSONWebKey{{Key: &other.PublicKey, KeyID: "k1"}, {Key: &fp.key.PublicKey, KeyID: "k1"}}
		}},
		{name: "a key without alg or use", kid: "k1", ok: true, keys: func(fp *fakeProvider) []jose.JSONWebKey {
			return []jose.JSONWebKey{{Key: &fp.key.PublicKey, KeyID: "k1"}}
		}},
		{name: "a key for another alg", kid: "k1", ok: false, keys: func(fp *fakeProvider) []jose.JSONWebKey {
			return []jose.JSONWebKey{{Key: &fp.key.PublicKey, KeyID: "k1", Algorithm: "ES384"}}
		}},
		{name: "a key for encryption", kid: "k1", ok: false, keys: func(fp *fakeProvider) []jose.JSONWebKey {
			return []jose.JSONWebKey{{Key: &fp.key.PublicKey, KeyID: "k1", Use: "enc"}}
		}},
		{name: "a key of another kid", kid: "k1", ok: false, keys: func(fp *fakeProvider) []jose.JSONWebKey {
			return []jose.JSONWebKey{{Key: &fp.key.PublicKey, KeyID: "k2"}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fp := newFakeProvider(t)
			fp.set(func(fp *fakeProvider) { fp.jwks = fp.keySet(tc.keys(fp)...) })
			p := fp.relyingParty(nil)
			c := fp.claims()
			got, err := p.VerifyIDToken(context.Background(), fp.sign(c, fp.key, tc.kid), "n-1")
			if tc.ok {
				if err != nil || got["sub"] != "u-1" {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, upstream.ErrInvalidToken) || got != nil {
				t.Fatalf("got %v, %v; want ErrInvalidToken", got, err)
			}
		})
	}
}

// TestJWKSKeysThatAreSkipped: keys the relying party cannot use (a type
// go-jose does not know, a private key, a public key with no exponent) are
// skipped, those after them still read (RFC 7517 §5), and a set with no
// usable key is the provider being unusable.
func TestJWKSKeysThatAreSkipped(t *testing.T) {
	private := func(fp *fakeProvider) string {
		b, err := json.Marshal(jose.JSONWebKey{Key: fp.key, KeyID: fp.kid, Algorithm: "ES256", Use: "sig"})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	public := func(fp *fakeProvider) string {
		b, err := json.Marshal(jose.JSONWebKey{Key: &fp.key.PublicKey, KeyID: fp.kid})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	const unknownType = `{"kty":"XYZ","kid":"k1"}`
	const noExponent = `{"kty":"RSA","kid":"k1","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":""}`
	cases := []struct {
		name string
		jwks func(fp *fakeProvider) string
		want error // nil: the token verifies
	}{
		{name: "a key of unknown type before the key", jwks: func(fp *fakeProvider) string { return `{"keys":[` + unknownType + `,` + public(fp) + `]}` }},
		{name: "a private key before the key", jwks: func(fp *fakeProvider) string { return `{"keys":[` + private(fp) + `,` + public(fp) + `]}` }},
		{name: "an RSA key without exponent before the key", jwks: func(fp *fakeProvider) string { return `{"keys":[` + noExponent + `,` + public(fp) + `]}` }},
		{name: "only a private key", jwks: func(fp *fakeProvider) string { return `{"keys":[` + private(fp) + `]}` }, want: upstream.ErrUnavailable},
		{name: "only an RSA key without exponent", jwks: func(fp *fakeProvider) string { return `{"keys":[` + noExponent + `]}` }, want: upstream.ErrUnavailable},
		{name: "only a key of unknown type", jwks: func(fp *fakeProvider) string { return `{"keys":[` + unknownType + `]}` }, want: upstream.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fp := newFakeProvider(t)
			fp.set(func(fp *fakeProvider) { fp.jwks = tc.jwks(fp) })
			p := fp.relyingParty(nil)
			got, err := p.VerifyIDToken(context.Background(), fp.idToken(fp.claims()), "n-1")
			if tc.want == nil {
				if err != nil || got["sub"] != "u-1" {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
