// Package testop runs a real OpenID provider for tests: zitadel/oidc's
// pkg/op with its example storage and login page, on 127.0.0.1, with
// people who have passwords, verified emails and groups. Only tests import
// it.
package testop

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Person is someone who can sign in at the provider.
type Person struct {
	ID, Username, Password, Email string
	EmailVerified                 bool
	Name                          string
	Groups                        []string
}

// Client is a relying party registered at the provider.
type Client struct {
	ID, Secret   string
	RedirectURIs []string
	// ClaimsInIDToken puts email, profile and groups claims into the ID
	// token; false leaves them to the userinfo endpoint, as OpenID Connect
	// Core §5.4 says for a code flow.
	ClaimsInIDToken bool
	// PublicKey and KeyID, when set, make the client authenticate with
	// private_key_jwt (RFC 7523) under this key instead of its secret.
	PublicKey crypto.PublicKey
	KeyID     string
}

// OP is a running provider.
type OP struct {
	Issuer string
	Server *httptest.Server
	store  *groupStorage
	// Tamper, when set, rewrites the id_token of every token response
	// (for tests of ID tokens the provider would not issue).
	tamper   func(claims map[string]any) (map[string]any, *rsa.PrivateKey, string)
	tamperMu sync.Mutex

	// seen records what the provider received and issued, and sendIss
	// whether it names itself in authorization responses.
	seenMu        sync.Mutex
	authRequests  []url.Values
	refreshTokens []string
	sendIss       bool
}

// Start runs a provider with people and clients until the test ends.
func Start(t testing.TB, people []Person, clients ...Client) *OP {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String() + "/"

	users := map[string]*storage.User{}
	groups := map[string][]string{}
	for _, p := range people {
		users[p.ID] = &storage.User{
			ID: p.ID, Username: p.Username, Password: p.Password,
			FirstName: p.Name, Email: p.Email, EmailVerified: p.EmailVerified,
		}
		groups[p.ID] = p.Groups
	}
	raw, err := json.Marshal(users)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	us, err := storage.StoreFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cls := map[string]*storage.Client{}
	inToken := map[string]bool{}
	keys := map[string]Client{}
	for _, c := range clients {
		cls[c.ID] = storage.WebClient(c.ID, c.Secret, c.RedirectURIs...)
		inToken[c.ID] = c.ClaimsInIDToken
		if c.PublicKey != nil {
			keys[c.ID] = c
		}
	}
	gs := &groupStorage{Storage: storage.NewStorageWithClients(us, cls), groups: groups, inToken: inToken, refused: map[string]bool{}, redirects: map[string][]string{}, keys: keys}
	o := &OP{Issuer: issuer, store: gs}
	router := exampleop.SetupServer(issuer, gs, slog.New(slog.NewTextHandler(io.Discard, nil)), false)
	srv.Config.Handler = o.observe(o.tamperToken(router))
	srv.Start()
	o.Server = srv
	t.Cleanup(srv.Close)
	return o
}

// SetGroups changes a person's groups from now on.
func (o *OP) SetGroups(id string, groups []string) {
	o.store.mu.Lock()
	defer o.store.mu.Unlock()
	o.store.groups[id] = groups
}

// SetRedirectURIs replaces the redirect URIs of client id (for relying
// parties whose address is known only once the provider runs).
func (o *OP) SetRedirectURIs(id string, uris ...string) {
	o.store.mu.Lock()
	defer o.store.mu.Unlock()
	o.store.redirects[id] = uris
}

// RefuseRefresh makes the provider refuse every refresh token of person id
// (as when their account is blocked).
func (o *OP) RefuseRefresh(id string) {
	o.store.mu.Lock()
	defer o.store.mu.Unlock()
	o.store.refused[id] = true
}

// SigningKey returns the provider's private signing key and its kid.
func (o *OP) SigningKey(ctx context.Context) (*rsa.PrivateKey, string) {
	k, err := o.store.SigningKey(ctx)
	if err != nil {
		panic(err)
	}
	return k.Key().(*rsa.PrivateKey), k.ID()
}

// Tamper makes every token response carry an ID token whose claims f
// rewrote, signed with the returned key and kid (nil key: the provider's
// own key). nil f stops it.
func (o *OP) Tamper(f func(claims map[string]any) (map[string]any, *rsa.PrivateKey, string)) {
	o.tamperMu.Lock()
	defer o.tamperMu.Unlock()
	o.tamper = f
}

// NewKey returns a fresh RSA key the provider does not publish.
func NewKey() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// SendIss makes the provider add its issuer as the iss parameter of every
// authorization response and say so in discovery
// (authorization_response_iss_parameter_supported, RFC 9207 §2, §3).
func (o *OP) SendIss(on bool) {
	o.seenMu.Lock()
	defer o.seenMu.Unlock()
	o.sendIss = on
}

// AuthRequests returns the query of every authorization request the
// provider received, in order.
func (o *OP) AuthRequests() []url.Values {
	o.seenMu.Lock()
	defer o.seenMu.Unlock()
	out := make([]url.Values, len(o.authRequests))
	for i, q := range o.authRequests {
		out[i] = url.Values(http.Header(q).Clone())
	}
	return out
}

// RefreshTokens returns every refresh token the token endpoint issued, in
// order.
func (o *OP) RefreshTokens() []string {
	o.seenMu.Lock()
	defer o.seenMu.Unlock()
	return slices.Clone(o.refreshTokens)
}

// observe records authorization requests and issued refresh tokens, and
// adds iss to authorization responses and discovery when SendIss is on.
func (o *OP) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.seenMu.Lock()
		sendIss := o.sendIss
		if r.URL.Path == "/auth" {
			o.authRequests = append(o.authRequests, r.URL.Query())
		}
		o.seenMu.Unlock()
		if r.URL.Path != "/oauth/token" && r.URL.Path != "/.well-known/openid-configuration" && !sendIss {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		switch r.URL.Path {
		case "/oauth/token":
			var tr struct {
				RefreshToken string `json:"refresh_token"`
			}
			if json.Unmarshal(body, &tr) == nil && tr.RefreshToken != "" {
				o.seenMu.Lock()
				o.refreshTokens = append(o.refreshTokens, tr.RefreshToken)
				o.seenMu.Unlock()
			}
		case "/.well-known/openid-configuration":
			var doc map[string]any
			if sendIss && rec.Code == http.StatusOK && json.Unmarshal(body, &doc) == nil {
				doc["authorization_response_iss_parameter_supported"] = true
				body, _ = json.Marshal(doc)
				rec.Header().Del("Content-Length")
			}
		}
		if loc := rec.Header().Get("Location"); sendIss && rec.Code >= 300 && rec.Code < 400 && loc != "" {
			base, _ := url.Parse(o.Issuer)
			if u, err := base.Parse(loc); err == nil && u.Host != base.Host && u.Query().Has("state") {
				q := u.Query()
				q.Set("iss", o.Issuer)
				u.RawQuery = q.Encode()
				rec.Header().Set("Location", u.String())
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

func (o *OP) tamperToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.tamperMu.Lock()
		f := o.tamper
		o.tamperMu.Unlock()
		if f == nil || r.URL.Path != "/oauth/token" {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var body map[string]any
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
			copyResponse(w, rec)
			return
		}
		if raw, ok := body["id_token"].(string); ok {
			tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
			if err != nil {
				copyResponse(w, rec)
				return
			}
			var claims map[string]any
			_ = tok.UnsafeClaimsWithoutVerification(&claims)
			claims, key, kid := f(claims)
			if key == nil {
				key, kid = o.SigningKey(r.Context())
			}
			sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
			if err != nil {
				panic(err)
			}
			s, err := jwt.Signed(sig).Claims(claims).Serialize()
			if err != nil {
				panic(err)
			}
			body["id_token"] = s
		}
		out, _ := json.Marshal(body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(out)
	})
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// groupStorage is the example storage with a groups claim (asked with the
// groups scope) and a refresh refusal per person.
type groupStorage struct {
	*storage.Storage
	mu      sync.Mutex
	groups  map[string][]string
	inToken map[string]bool
	refused map[string]bool
	// redirects replaces a client's redirect URIs when set (SetRedirectURIs).
	redirects map[string][]string
	// keys are the clients that authenticate with private_key_jwt.
	keys map[string]Client
}

func (s *groupStorage) GetKeyByIDAndClientID(ctx context.Context, keyID, clientID string) (*jose.JSONWebKey, error) {
	c, ok := s.keys[clientID]
	if !ok || c.KeyID != keyID {
		return nil, fmt.Errorf("no key %q for client %q", keyID, clientID)
	}
	return &jose.JSONWebKey{KeyID: keyID, Use: "sig", Key: c.PublicKey}, nil
}

func (s *groupStorage) groupsOf(id string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.groups[id])
}

type groupClient struct {
	op.Client
	inToken   bool
	redirects []string
	keyAuth   bool
}

func (c groupClient) AuthMethod() oidc.AuthMethod {
	if c.keyAuth {
		return oidc.AuthMethodPrivateKeyJWT
	}
	return c.Client.AuthMethod()
}

func (c groupClient) RedirectURIs() []string {
	if c.redirects != nil {
		return c.redirects
	}
	return c.Client.RedirectURIs()
}

func (c groupClient) IsScopeAllowed(scope string) bool {
	return scope == "groups" || c.Client.IsScopeAllowed(scope)
}

func (c groupClient) IDTokenUserinfoClaimsAssertion() bool { return c.inToken }

// ClockSkew allows no skew at the provider: tests move our clock instead.
func (c groupClient) ClockSkew() time.Duration { return 0 }

func (s *groupStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, keyAuth := s.keys[id]
	return groupClient{Client: c, inToken: s.inToken[id], redirects: s.redirects[id], keyAuth: keyAuth}, nil
}

func (s *groupStorage) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, token op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, token, scopes); err != nil {
		return err
	}
	if slices.Contains(scopes, "groups") {
		info.AppendClaims("groups", s.groupsOf(token.GetSubject()))
	}
	return nil
}

func (s *groupStorage) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	info.AppendClaims("groups", s.groupsOf(info.Subject))
	return nil
}

func (s *groupStorage) TokenRequestByRefreshToken(ctx context.Context, refreshToken string) (op.RefreshTokenRequest, error) {
	r, err := s.Storage.TokenRequestByRefreshToken(ctx, refreshToken)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	refused := s.refused[r.GetSubject()]
	s.mu.Unlock()
	if refused {
		return nil, op.ErrInvalidRefreshToken
	}
	return r, nil
}

var loginForm = regexp.MustCompile(`name="id" value="([^"]+)"`)

// SignIn walks the provider's login page for authURL (an authorization URL
// of the provider) with the person's username and password, using c (whose
// cookie jar and redirect policy are kept). It stops at the first redirect
// that leaves the provider and returns its URL: the relying party's
// callback with code and state.
func (o *OP) SignIn(c *http.Client, authURL, username, password string) (*url.URL, error) {
	base, _ := url.Parse(o.Server.URL)
	cc := *c
	if cc.Jar == nil {
		cc.Jar, _ = cookiejar.New(nil)
	}
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	next := authURL
	for range 10 {
		resp, err := cc.Get(next)
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			loc, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
			if err != nil {
				return nil, err
			}
			if loc.Host != base.Host {
				return loc, nil
			}
			next = loc.String()
			continue
		}
		m := loginForm.FindSubmatch(body)
		if resp.StatusCode != http.StatusOK || m == nil {
			return nil, fmt.Errorf("testop: %s answered %d without a login form: %.300s", next, resp.StatusCode, body)
		}
		form := url.Values{"id": {string(m[1])}, "username": {username}, "password": {password}}
		resp, err = cc.PostForm(o.Server.URL+"/login/username", form)
		if err != nil {
			return nil, err
		}
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode < 300 || resp.StatusCode >= 400 {
			return nil, fmt.Errorf("testop: login as %q answered %d: %.300s", username, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		loc, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
		if err != nil {
			return nil, err
		}
		next = loc.String()
		if loc.Host != base.Host {
			return loc, nil
		}
	}
	return nil, errors.New("testop: too many redirects")
}
