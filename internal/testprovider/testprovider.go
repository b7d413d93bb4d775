// Package testprovider is a small OAuth 2.0 authorization server with an
// API of its own, standing in for GitHub, Google or Slack in tests of
// connected accounts: the authorization code grant with PKCE S256
// (RFC 6749 §4.1, RFC 7636), refresh tokens that rotate (RFC 6749 §6),
// short access token lifetimes, revocation (RFC 7009), RFC 8414 metadata,
// the optional iss parameter of RFC 9207, and GET /user, which answers the
// login of the person a bearer token belongs to (as GitHub's API does).
//
// There is no login page: the authorization endpoint approves at once, as
// the person set with SetLogin. Tokens and codes are random and kept in
// memory. It is for tests and local trials only.
package testprovider

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Config configures a Provider. Zero values are usable.
type Config struct {
	// ClientID and ClientSecret are the one client's credentials
	// (client_secret_basic or client_secret_post). Defaults "client" and
	// "client-secret".
	ClientID, ClientSecret string
	// Login is the person the authorization endpoint signs in; default
	// "octocat". SetLogin changes it.
	Login string
	// AccessTTL is the lifetime of access tokens; default one hour.
	AccessTTL time.Duration
	// SendIss adds iss to authorization responses and says so in the
	// metadata (RFC 9207).
	SendIss bool
	// NoRefreshTokens issues access tokens alone.
	NoRefreshTokens bool
	// TokenType is the token_type of token answers; default "bearer".
	TokenType string
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Provider is the server; mount Handler at Issuer (its base URL), which
// must be set before the first request.
type Provider struct {
	// Issuer is the base URL the handler is served at, without a trailing
	// slash.
	Issuer string

	cfg Config

	mu       sync.Mutex
	login    string
	codes    map[string]*grant
	access   map[string]*token
	refresh  map[string]*token
	refused  bool
	revoked  []string
	counts   map[string]int
	lastAuth url.Values
}

type grant struct {
	login, redirectURI, challenge, scope string
	exp                                  time.Time
}

type token struct {
	login, scope string
	exp          time.Time // zero for refresh tokens
	family       string
}

// New returns a provider; set Issuer before use.
func New(cfg Config) *Provider {
	if cfg.ClientID == "" {
		cfg.ClientID = "client"
	}
	if cfg.ClientSecret == "" {
		cfg.ClientSecret = "client-secret"
	}
	if cfg.Login == "" {
		cfg.Login = "octocat"
	}
	if cfg.AccessTTL <= 0 {
		cfg.AccessTTL = time.Hour
	}
	if cfg.TokenType == "" {
		cfg.TokenType = "bearer"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Provider{cfg: cfg, login: cfg.Login, codes: map[string]*grant{}, access: map[string]*token{},
		refresh: map[string]*token{}, counts: map[string]int{}}
}

// Endpoint URLs.
func (p *Provider) AuthorizationEndpoint() string { return p.Issuer + "/authorize" }
func (p *Provider) TokenEndpoint() string         { return p.Issuer + "/token" }
func (p *Provider) RevocationEndpoint() string    { return p.Issuer + "/revoke" }
func (p *Provider) UserEndpoint() string          { return p.Issuer + "/user" }

// SetLogin makes the authorization endpoint sign in login from now on.
func (p *Provider) SetLogin(login string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.login = login
}

// SetAccessTTL sets the lifetime of the access tokens issued from now on.
func (p *Provider) SetAccessTTL(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cfg.AccessTTL = d
}

// RefuseRefresh makes every refresh answer invalid_grant (true) or work
// again (false).
func (p *Provider) RefuseRefresh(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused = refuse
}

// ExpireAccessTokens makes every access token issued so far expired.
func (p *Provider) ExpireAccessTokens() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.access {
		t.exp = p.cfg.Now().Add(-time.Second)
	}
}

// Count returns how many requests of a kind were answered successfully:
// "authorize", "code", "refresh", "revoke", "user".
func (p *Provider) Count(kind string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[kind]
}

// Revoked returns the tokens presented at the revocation endpoint.
func (p *Provider) Revoked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.revoked...)
}

// LastAuthorization returns the query of the last authorization request.
func (p *Provider) LastAuthorization() url.Values {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastAuth
}

// Active reports whether access token tok would be accepted by /user now.
func (p *Provider) Active(tok string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.access[tok]
	return ok && p.cfg.Now().Before(t.exp)
}

// Handler serves /authorize, /token, /revoke, /user and
// /.well-known/oauth-authorization-server.
func (p *Provider) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	mux.HandleFunc("POST /revoke", p.revoke)
	mux.HandleFunc("GET /user", p.user)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", p.metadata)
	return mux
}

func random() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code})
}

func (p *Provider) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                         p.Issuer,
		"authorization_endpoint":                         p.AuthorizationEndpoint(),
		"token_endpoint":                                 p.TokenEndpoint(),
		"revocation_endpoint":                            p.RevocationEndpoint(),
		"response_types_supported":                       []string{"code"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"authorization_response_iss_parameter_supported": p.cfg.SendIss,
	})
}

// authorize is RFC 6749 §4.1.1: it approves at once as the current login.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	p.lastAuth = q
	p.mu.Unlock()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if q.Get("client_id") != p.cfg.ClientID || err != nil || !redirect.IsAbs() {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	answer := url.Values{"state": {q.Get("state")}}
	if p.cfg.SendIss {
		answer.Set("iss", p.Issuer)
	}
	switch {
	case q.Get("response_type") != "code":
		answer.Set("error", "unsupported_response_type")
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		answer.Set("error", "invalid_request")
	default:
		code := random()
		p.mu.Lock()
		p.codes[code] = &grant{login: p.login, redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge"),
			scope: q.Get("scope"), exp: p.cfg.Now().Add(time.Minute)}
		p.counts["authorize"]++
		p.mu.Unlock()
		answer.Set("code", code)
	}
	if redirect.RawQuery != "" {
		redirect.RawQuery += "&"
	}
	redirect.RawQuery += answer.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// clientOK checks client_secret_basic or client_secret_post.
func (p *Provider) clientOK(r *http.Request) bool {
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	return subtle.ConstantTimeCompare([]byte(id), []byte(p.cfg.ClientID)) == 1 &&
		subtle.ConstantTimeCompare([]byte(secret), []byte(p.cfg.ClientSecret)) == 1
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	if !p.clientOK(r) {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	f := r.PostForm
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	var login, scope, family string
	switch f.Get("grant_type") {
	case "authorization_code":
		g, ok := p.codes[f.Get("code")]
		delete(p.codes, f.Get("code"))
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || now.After(g.exp) || g.redirectURI != f.Get("redirect_uri") ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		login, scope, family = g.login, g.scope, random()
		p.counts["code"]++
	case "refresh_token":
		t, ok := p.refresh[f.Get("refresh_token")]
		if !ok || p.refused {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		delete(p.refresh, f.Get("refresh_token")) // rotation
		login, scope, family = t.login, t.scope, t.family
		p.counts["refresh"]++
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	at := random()
	p.access[at] = &token{login: login, scope: scope, exp: now.Add(p.cfg.AccessTTL), family: family}
	out := map[string]any{"access_token": at, "token_type": p.cfg.TokenType,
		"expires_in": int(p.cfg.AccessTTL / time.Second), "scope": scope}
	if !p.cfg.NoRefreshTokens {
		rt := random()
		p.refresh[rt] = &token{login: login, scope: scope, family: family}
		out["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, out)
}

// revoke is RFC 7009 §2: the token's whole grant (its family) ends; an
// unknown token is answered 200 as well (§2.2).
func (p *Provider) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	if !p.clientOK(r) {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	tok := r.PostForm.Get("token")
	p.mu.Lock()
	defer p.mu.Unlock()
	p.revoked = append(p.revoked, tok)
	p.counts["revoke"]++
	family := ""
	if t, ok := p.access[tok]; ok {
		family = t.family
	}
	if t, ok := p.refresh[tok]; ok {
		family = t.family
	}
	for _, m := range []map[string]*token{p.access, p.refresh} {
		for k, t := range m {
			if family != "" && t.family == family {
				delete(m, k)
			}
		}
	}
	w.WriteHeader(http.StatusOK)
}

// user answers {"login": ...} for a valid bearer token, 401 otherwise.
func (p *Provider) user(w http.ResponseWriter, r *http.Request) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	t, found := p.access[tok]
	valid := ok && found && p.cfg.Now().Before(t.exp)
	if valid {
		p.counts["user"]++
	}
	p.mu.Unlock()
	if !valid {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"login": t.login})
}
