package dpop

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const tokenURL = "https://as.example/token"

func newSigner(t testing.TB) *Signer {
	t.Helper()
	s, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// forge signs arbitrary header and claims with key, for proofs a Signer
// would never make.
func forge(t *testing.T, key any, alg jose.SignatureAlgorithm, hdr map[jose.HeaderKey]any, embed bool, claims map[string]any) string {
	t.Helper()
	opts := &jose.SignerOptions{EmbedJWK: embed, ExtraHeaders: hdr}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func goodClaims() map[string]any {
	return map[string]any{"jti": "j1", "htm": "POST", "htu": tokenURL, "iat": time.Now().Unix()}
}

func TestCheckAcceptsSignerProof(t *testing.T) {
	s := newSigner(t)
	proof, err := s.Proof("POST", tokenURL+"?x=1#f", "", "")
	if err != nil {
		t.Fatal(err)
	}
	var c Checker
	p, err := c.Check(context.Background(), proof, Request{Method: "POST", URI: tokenURL})
	if err != nil {
		t.Fatal(err)
	}
	if p.Thumbprint != s.Thumbprint() || p.Alg != "ES256" || p.URI != tokenURL {
		t.Fatalf("proof %+v, signer thumbprint %s", p, s.Thumbprint())
	}
}

// RFC 7638 §3.1 gives the thumbprint of its example RSA key.
func TestThumbprintRFC7638Example(t *testing.T) {
	const jwk = `{"kty":"RSA","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw","e":"AQAB","alg":"RS256","kid":"2011-04-29"}`
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON([]byte(jwk)); err != nil {
		t.Fatal(err)
	}
	tp, err := Thumbprint(&k)
	if err != nil {
		t.Fatal(err)
	}
	if tp != "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs" {
		t.Fatalf("thumbprint %s", tp)
	}
}

func TestAccessTokenHashRFC9449Example(t *testing.T) {
	// RFC 9449 §7.1 figure: the access token and its ath.
	const tok = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
	if got := AccessTokenHash(tok); got != "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo" {
		t.Fatalf("ath %s", got)
	}
}

func TestCheckRefuses(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	typ := map[jose.HeaderKey]any{jose.HeaderType: Type}
	now := time.Now()
	with := func(k string, v any) map[string]any {
		c := goodClaims()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	hmacProof := forge(t, []byte("0123456789abcdef0123456789abcdef"), jose.HS256, typ, false, goodClaims())
	// A private jwk embedded by hand: go-jose would refuse to embed it.
	priv := jose.JSONWebKey{Key: ec}
	privJSON, _ := priv.MarshalJSON()
	var privMap map[string]any
	_ = json.Unmarshal(privJSON, &privMap)
	privHdr := map[jose.HeaderKey]any{jose.HeaderType: Type, "jwk": privMap}
	noneHdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"dpop+jwt"}`))
	nonePayload, _ := json.Marshal(goodClaims())
	noneProof := noneHdr + "." + base64.RawURLEncoding.EncodeToString(nonePayload) + "."
	s := newSigner(t)
	good, _ := s.Proof("POST", tokenURL, "", "")
	other := newSigner(t)
	otherProof, _ := other.Proof("POST", tokenURL, "", "")
	// Signature by ec, jwk of another key.
	parts := strings.Split(good, ".")
	otherParts := strings.Split(otherProof, ".")
	wrongKey := otherParts[0] + "." + parts[1] + "." + parts[2]

	cases := map[string]string{
		"empty":             "",
		"garbage":           "a.b.c",
		"two proofs":        good + "," + good,
		"alg none":          noneProof,
		"alg HS256":         hmacProof,
		"no typ":            forge(t, ec, jose.ES256, nil, true, goodClaims()),
		"typ JWT":           forge(t, ec, jose.ES256, map[jose.HeaderKey]any{jose.HeaderType: "JWT"}, true, goodClaims()),
		"no jwk":            forge(t, ec, jose.ES256, typ, false, goodClaims()),
		"private jwk":       forge(t, ec, jose.ES256, privHdr, false, goodClaims()),
		"wrong key":         wrongKey,
		"no jti":            forge(t, ec, jose.ES256, typ, true, with("jti", nil)),
		"no htm":            forge(t, ec, jose.ES256, typ, true, with("htm", nil)),
		"no htu":            forge(t, ec, jose.ES256, typ, true, with("htu", nil)),
		"no iat":            forge(t, ec, jose.ES256, typ, true, with("iat", nil)),
		"iat string":        forge(t, ec, jose.ES256, typ, true, with("iat", "now")),
		"htm GET":           forge(t, ec, jose.ES256, typ, true, with("htm", "GET")),
		"htu other path":    forge(t, ec, jose.ES256, typ, true, with("htu", "https://as.example/tokens")),
		"htu other host":    forge(t, ec, jose.ES256, typ, true, with("htu", "https://evil.example/token")),
		"htu http":          forge(t, ec, jose.ES256, typ, true, with("htu", "http://as.example/token")),
		"iat old":           forge(t, ec, jose.ES256, typ, true, with("iat", now.Add(-6*time.Minute).Unix())),
		"iat future":        forge(t, ec, jose.ES256, typ, true, with("iat", now.Add(6*time.Minute).Unix())),
		"jti too long":      forge(t, ec, jose.ES256, typ, true, with("jti", strings.Repeat("x", 300))),
		"claims not JSON":   forge(t, ec, jose.ES256, typ, true, nil),
		"oversized":         strings.Repeat("a", 9000) + ".b.c",
		"JSON serializaton": `{"payload":"e30","signatures":[]}`,
	}
	var c Checker
	for name, proof := range cases {
		t.Run(name, func(t *testing.T) {
			if name == "two proofs" {
				h := http.Header{}
				h.Set(HeaderName, proof)
				if _, _, err := FromHeader(h); !errors.Is(err, ErrInvalidProof) {
					t.Fatalf("FromHeader: %v", err)
				}
			}
			_, err := c.Check(context.Background(), proof, Request{Method: "POST", URI: tokenURL})
			if !errors.Is(err, ErrInvalidProof) {
				t.Fatalf("err = %v, want ErrInvalidProof", err)
			}
		})
	}
}

func TestFromHeader(t *testing.T) {
	h := http.Header{}
	if _, ok, err := FromHeader(h); ok || err != nil {
		t.Fatal("absent header reported present")
	}
	h.Add(HeaderName, "a.b.c")
	if p, ok, err := FromHeader(h); !ok || err != nil || p != "a.b.c" {
		t.Fatalf("%q %v %v", p, ok, err)
	}
	h.Add(HeaderName, "d.e.f")
	if _, _, err := FromHeader(h); !errors.Is(err, ErrInvalidProof) {
		t.Fatalf("two headers: %v", err)
	}
}

func TestCheckAccessTokenHash(t *testing.T) {
	s := newSigner(t)
	var c Checker
	req := Request{Method: "GET", URI: "https://mcp.example/mcp", AccessToken: "tok"}
	p, _ := s.Proof("GET", req.URI, "tok", "")
	if _, err := c.Check(context.Background(), p, req); err != nil {
		t.Fatal(err)
	}
	p, _ = s.Proof("GET", req.URI, "other", "")
	if _, err := c.Check(context.Background(), p, req); !errors.Is(err, ErrInvalidProof) {
		t.Fatalf("wrong ath: %v", err)
	}
	p, _ = s.Proof("GET", req.URI, "", "")
	if _, err := c.Check(context.Background(), p, req); !errors.Is(err, ErrInvalidProof) {
		t.Fatalf("no ath: %v", err)
	}
}

func TestCheckNonce(t *testing.T) {
	s := newSigner(t)
	var c Checker
	req := Request{Method: "POST", URI: tokenURL, Nonce: "n-1"}
	p, _ := s.Proof("POST", tokenURL, "", "")
	if _, err := c.Check(context.Background(), p, req); !errors.Is(err, ErrUseNonce) {
		t.Fatalf("no nonce: %v", err)
	}
	p, _ = s.Proof("POST", tokenURL, "", "n-2")
	if _, err := c.Check(context.Background(), p, req); !errors.Is(err, ErrUseNonce) {
		t.Fatalf("wrong nonce: %v", err)
	}
	p, _ = s.Proof("POST", tokenURL, "", "n-1")
	if _, err := c.Check(context.Background(), p, req); err != nil {
		t.Fatalf("right nonce: %v", err)
	}
	req = Request{Method: "POST", URI: tokenURL, CheckNonce: func(n string) bool { return n == "ok" }}
	p, _ = s.Proof("POST", tokenURL, "", "ok")
	if _, err := c.Check(context.Background(), p, req); err != nil {
		t.Fatalf("CheckNonce accepted: %v", err)
	}
	p, _ = s.Proof("POST", tokenURL, "", "bad")
	if _, err := c.Check(context.Background(), p, req); !errors.Is(err, ErrUseNonce) {
		t.Fatalf("CheckNonce refused: %v", err)
	}
}

func TestCheckReplay(t *testing.T) {
	s := newSigner(t)
	c := Checker{JTIs: NewMemoryJTIs(0)}
	p, _ := s.Proof("POST", tokenURL, "", "")
	req := Request{Method: "POST", URI: tokenURL}
	if _, err := c.Check(context.Background(), p, req); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(context.Background(), p, req); !errors.Is(err, ErrReplay) || !errors.Is(err, ErrInvalidProof) {
		t.Fatalf("replay: %v", err)
	}
	p2, _ := s.Proof("POST", tokenURL, "", "")
	if _, err := c.Check(context.Background(), p2, req); err != nil {
		t.Fatalf("fresh proof: %v", err)
	}
}

type failingStore struct{}

var errDown = errors.New("store down")

func (failingStore) UseJTI(context.Context, string, time.Time) error { return errDown }

func TestCheckReplayStoreOutage(t *testing.T) {
	s := newSigner(t)
	c := Checker{JTIs: failingStore{}}
	p, _ := s.Proof("POST", tokenURL, "", "")
	if _, err := c.Check(context.Background(), p, Request{Method: "POST", URI: tokenURL}); !errors.Is(err, errDown) || errors.Is(err, ErrInvalidProof) {
		t.Fatalf("outage: %v", err)
	}
}

func TestMemoryJTIsBounded(t *testing.T) {
	m := NewMemoryJTIs(3)
	exp := time.Now().Add(time.Hour)
	for _, id := range []string{"a", "b", "c", "d"} {
		if err := m.UseJTI(context.Background(), id, exp); err != nil {
			t.Fatal(err)
		}
	}
	if len(m.ids) > 3 {
		t.Fatalf("%d ids kept", len(m.ids))
	}
	if err := m.UseJTI(context.Background(), "d", exp); !errors.Is(err, ErrReplay) {
		t.Fatalf("newest id forgotten: %v", err)
	}
	m.ids["e"] = time.Now().Add(-time.Second)
	if err := m.UseJTI(context.Background(), "e", exp); err != nil {
		t.Fatalf("expired id still refused: %v", err)
	}
}

func TestNormalizeURI(t *testing.T) {
	same := [][2]string{
		{"https://AS.example:443/token", "https://as.example/token"},
		{"HTTPS://as.example/a/./b/../token?q#f", "https://as.example/a/token"},
		{"http://127.0.0.1:80", "http://127.0.0.1/"},
		{"http://[::1]:8080/x", "http://[::1]:8080/x"},
		// Only the scheme's own default port is dropped.
		{"https://as.example:8443/token", "https://as.example:8443/token"},
		{"http://as.example:443/token", "http://as.example:443/token"},
		{"https://as.example:80/token", "https://as.example:80/token"},
		// RFC 3986 §5.2.4: a final "." or ".." leaves the trailing slash.
		{"https://as.example/a/.", "https://as.example/a/"},
		{"https://as.example/a/b/..", "https://as.example/a/"},
		// ".." above the root is dropped; the empty segment after it stays.
		{"https://as.example/..//a", "https://as.example//a"},
		{"https://as.example/../a", "https://as.example/a"},
	}
	for _, c := range same {
		a, err := NormalizeURI(c[0])
		if err != nil || a != c[1] {
			t.Errorf("NormalizeURI(%q) = %q, %v; want %q", c[0], a, err, c[1])
		}
	}
	for _, bad := range []string{"", "/token", "ftp://x/y", "https://u@x/y", "mailto:a@b", "https:///token", "//as.example/token"} {
		if _, err := NormalizeURI(bad); err == nil {
			t.Errorf("NormalizeURI(%q) accepted", bad)
		}
	}
}

func TestSignerKeyTypes(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	for _, k := range []any{rk} {
		s, err := NewSigner(k.(*rsa.PrivateKey))
		if err != nil {
			t.Fatal(err)
		}
		p, _ := s.Proof("POST", tokenURL, "", "")
		var c Checker
		got, err := c.Check(context.Background(), p, Request{Method: "POST", URI: tokenURL})
		if err != nil || got.Alg != "PS256" {
			t.Fatalf("%v %+v", err, got)
		}
		c.Algs = []string{"ES256"}
		if _, err := c.Check(context.Background(), p, Request{Method: "POST", URI: tokenURL}); !errors.Is(err, ErrInvalidProof) {
			t.Fatalf("alg outside the list accepted: %v", err)
		}
	}
}

func FuzzParse(f *testing.F) {
	s := newSigner(f)
	p, _ := s.Proof("POST", tokenURL, "tok", "n")
	f.Add(p)
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, proof string) {
		got, err := Parse(proof, DefaultAlgs)
		if err != nil {
			if !errors.Is(err, ErrInvalidProof) {
				t.Fatalf("error %v does not wrap ErrInvalidProof", err)
			}
			return
		}
		if got.JTI == "" || got.Method == "" || got.URI == "" || got.Thumbprint == "" || !got.JWK.IsPublic() {
			t.Fatalf("accepted incomplete proof %+v", got)
		}
	})
}

func TestNonces(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	n, err := NewNonces(secret, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	a, b := n.Issue(now), n.Issue(now)
	if a == b || !n.Valid(a, now) || !n.Valid(b, now.Add(59*time.Second)) {
		t.Fatal("fresh nonces refused or repeated")
	}
	if n.Valid(a, now.Add(2*time.Minute)) {
		t.Fatal("expired nonce accepted")
	}
	other, _ := NewNonces([]byte("another-secret-0123456789abcdefXX"), time.Minute)
	for _, bad := range []string{other.Issue(now), "", "abc", a[:len(a)-2] + "AA", "!!"} {
		if n.Valid(bad, now) {
			t.Errorf("accepted %q", bad)
		}
	}
	if _, err := NewNonces([]byte("short"), 0); err == nil {
		t.Fatal("short secret accepted")
	}
}

// TestCheckReplayRememberedForTheWholeWindow: a proof is remembered for as
// long as its iat passes the window check, so it is a replay even at the
// window's far edge (RFC 9449 §11.1).
func TestCheckReplayRememberedForTheWholeWindow(t *testing.T) {
	s := newSigner(t)
	iat := time.Now().Truncate(time.Second)
	s.SetClock(func() time.Time { return iat })
	p, err := s.Proof("POST", tokenURL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	now := iat
	jtis := NewMemoryJTIs(0)
	jtis.now = func() time.Time { return now }
	c := Checker{JTIs: jtis, Now: func() time.Time { return now }}
	req := Request{Method: "POST", URI: tokenURL}
	if _, err := c.Check(context.Background(), p, req); err != nil {
		t.Fatal(err)
	}
	now = iat.Add(DefaultWindow)
	if _, err := c.Check(context.Background(), p, req); !errors.Is(err, ErrReplay) {
		t.Fatalf("at the window's edge: %v; want ErrReplay", err)
	}
}

// TestParseRefusesIatOutOfRange: iat must be a non-negative number of
// seconds no later than 2^40 (about year 36812), whatever the window.
func TestParseRefusesIatOutOfRange(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[jose.HeaderKey]any{jose.HeaderType: Type}
	for _, iat := range []any{-1, float64(1<<40) + 1, 1e300} {
		claims := goodClaims()
		claims["iat"] = iat
		if _, err := Parse(forge(t, key, jose.ES256, hdr, true, claims), DefaultAlgs); !errors.Is(err, ErrInvalidProof) || !strings.Contains(err.Error(), "iat") {
			t.Errorf("iat %v: %v; want an invalid iat", iat, err)
		}
	}
	claims := goodClaims()
	claims["iat"] = 1 << 40
	if _, err := Parse(forge(t, key, jose.ES256, hdr, true, claims), DefaultAlgs); err != nil {
		t.Errorf("iat 2^40: %v", err)
	}
}
