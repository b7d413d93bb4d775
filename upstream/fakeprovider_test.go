package upstream_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpauth/mcpauth/upstream"
)

// fakeProvider is an OpenID provider on httptest whose every answer a test
// sets: the discovery document, the JWK Set, the token endpoint's answer and
// the userinfo answer. It counts the requests each path gets and runs the
// clock the relying party reads.
type fakeProvider struct {
	t      *testing.T
	srv    *httptest.Server
	issuer string
	key    *ecdsa.PrivateKey
	kid    string

	mu sync.Mutex
	// now is the relying party's clock (Config.Now).
	now time.Time
	// meta is the discovery document; discoveryStatus, when not 0 or 200,
	// is answered instead.
	meta            map[string]any
	discoveryStatus int
	// jwks is the body of the jwks_uri.
	jwks string
	// tokenStatus and tokenBody are the token endpoint's answer;
	// tokenForm is the form of the last token request, tokenAuth its
	// Authorization header.
	tokenStatus int
	tokenBody   map[string]any
	tokenForm   url.Values
	tokenAuth   string
	// userinfoStatus, userinfoType and userinfoBody are userinfo's answer.
	userinfoStatus int
	userinfoType   string
	userinfoBody   string
	hits           map[string]int
}

const fakeClientID = "mcpauth"

// fakeNow is the time the tests of the fake provider start at.
var fakeNow = time.Unix(1_900_000_000, 0)

func newFakeProvider(t *testing.T) *fakeProvider {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	fp := &fakeProvider{t: t, key: key, kid: "k1", now: fakeNow, hits: map[string]int{}}
	fp.srv = httptest.NewServer(http.HandlerFunc(fp.serve))
	t.Cleanup(fp.srv.Close)
	fp.issuer = fp.srv.URL
	fp.meta = map[string]any{
		"issuer":                 fp.issuer,
		"authorization_endpoint": fp.issuer + "/authorize",
		"token_endpoint":         fp.issuer + "/token",
		"userinfo_endpoint":      fp.issuer + "/userinfo",
		"jwks_uri":               fp.issuer + "/jwks",
	}
	fp.jwks = fp.keySet(jose.JSONWebKey{Key: &key.PublicKey, KeyID: fp.kid, Algorithm: "ES256", Use: "sig"})
	fp.tokenStatus = http.StatusOK
	fp.userinfoStatus = http.StatusOK
	fp.userinfoType = "application/json"
	return fp
}

func (fp *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	fp.hits[r.URL.Path]++
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		if fp.discoveryStatus != 0 && fp.discoveryStatus != http.StatusOK {
			w.WriteHeader(fp.discoveryStatus)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(fp.meta)
	case "/jwks":
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(fp.jwks))
	case "/token":
		r.ParseForm()
		fp.tokenForm, fp.tokenAuth = r.PostForm, r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(fp.tokenStatus)
		json.NewEncoder(w).Encode(fp.tokenBody)
	case "/userinfo":
		w.Header().Set("Content-Type", fp.userinfoType)
		w.WriteHeader(fp.userinfoStatus)
		w.Write([]byte(fp.userinfoBody))
	default:
		http.NotFound(w, r)
	}
}

// set runs f with the provider's fields locked.
func (fp *fakeProvider) set(f func(fp *fakeProvider)) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	f(fp)
}

// advance moves the relying party's clock.
func (fp *fakeProvider) advance(d time.Duration) {
	fp.set(func(fp *fakeProvider) { fp.now = fp.now.Add(d) })
}

// count returns how many requests path got.
func (fp *fakeProvider) count(path string) int {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.hits[path]
}

// keySet returns the JSON of a JWK Set of keys.
func (fp *fakeProvider) keySet(keys ...jose.JSONWebKey) string {
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		fp.t.Fatal(err)
	}
	return string(b)
}

// claims returns the claims of a valid ID token at the current clock for
// nonce "n-1".
func (fp *fakeProvider) claims() map[string]any {
	fp.mu.Lock()
	now := fp.now
	fp.mu.Unlock()
	return map[string]any{
		"iss": fp.issuer, "aud": fakeClientID, "sub": "u-1", "nonce": "n-1",
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"email": "ann@acme.example", "email_verified": true,
	}
}

// sign returns claims as a compact JWS by key with the kid header kid ("" for
// none).
func (fp *fakeProvider) sign(claims map[string]any, key *ecdsa.PrivateKey, kid string) string {
	fp.t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, opts)
	if err != nil {
		fp.t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		fp.t.Fatal(err)
	}
	jws, err := sig.Sign(payload)
	if err != nil {
		fp.t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		fp.t.Fatal(err)
	}
	return s
}

// idToken signs claims with the provider's published key.
func (fp *fakeProvider) idToken(claims map[string]any) string { return fp.sign(claims, fp.key, fp.kid) }

// answerToken makes the token endpoint answer 200 with an access token, a
// refresh token and, unless idToken is "", that ID token.
func (fp *fakeProvider) answerToken(idToken string) {
	body := map[string]any{"access_token": "at-1", "token_type": "Bearer", "refresh_token": "rt-1", "expires_in": 300}
	if idToken != "" {
		body["id_token"] = idToken
	}
	fp.set(func(fp *fakeProvider) { fp.tokenStatus, fp.tokenBody = http.StatusOK, body })
}

// answerUserinfo makes userinfo answer 200 with the JSON of claims.
func (fp *fakeProvider) answerUserinfo(claims map[string]any) {
	b, err := json.Marshal(claims)
	if err != nil {
		fp.t.Fatal(err)
	}
	fp.set(func(fp *fakeProvider) {
		fp.userinfoStatus, fp.userinfoType, fp.userinfoBody = http.StatusOK, "application/json", string(b)
	})
}

// relyingParty returns a Provider for fp with client_id mcpauth, a client
// secret, the scopes openid and email, no allow rules and fp's clock; edit
// changes the configuration first.
func (fp *fakeProvider) relyingParty(edit func(*upstream.Config)) *upstream.Provider {
	fp.t.Helper()
	cfg := upstream.Config{
		ID: "fake", Issuer: fp.issuer, ClientID: fakeClientID, ClientSecret: "s3cret-s3cret",
		RedirectURL: "http://127.0.0.1:1/upstream/fake/callback", Scopes: []string{"openid", "email"},
		Now: func() time.Time {
			fp.mu.Lock()
			defer fp.mu.Unlock()
			return fp.now
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	p, err := upstream.New(cfg)
	if err != nil {
		fp.t.Fatal(err)
	}
	return p
}
