package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/internal/safehttp"
	"github.com/mcpauth/mcpauth/storage/memory"
)

const (
	mcpURI   = "http://127.0.0.1:8080/mcp"
	password = "correct horse battery staple"
)

var secret = []byte("0123456789abcdef0123456789abcdef-e2e-secret")

var aliceHash = func() string {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	return string(h)
}()

// world is an AS with registration and CIMD on one mux, plus a TLS server on
// 127.0.0.1 publishing client metadata documents and JWK sets.
type world struct {
	t      testing.TB
	srv    *httptest.Server
	issuer string
	store  *memory.Store
	docs   *httptest.Server
	mu     sync.Mutex
	routes map[string][]byte
	cimd   *dcr.CIMDResolver
}

// newWorld starts the world; mods adjust the AS configuration first.
func newWorld(t testing.TB, mods ...func(*as.Config)) *world {
	t.Helper()
	w := &world{t: t, routes: map[string][]byte{}}
	w.docs = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		b, ok := w.routes[r.URL.Path]
		w.mu.Unlock()
		if !ok {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("Cache-Control", "max-age=300")
		rw.Write(b)
	}))
	t.Cleanup(w.docs.Close)
	docsURL, _ := url.Parse(w.docs.URL)
	fetch, err := safehttp.NewClient(safehttp.Config{
		Allow:   []string{docsURL.Host},
		RootCAs: w.docs.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs,
	})
	if err != nil {
		t.Fatal(err)
	}

	ts := httptest.NewUnstartedServer(nil)
	w.issuer = "http://" + ts.Listener.Addr().String()
	w.store = memory.New()
	resolver, err := dcr.NewCIMDResolver(dcr.CIMDConfig{
		HTTPClient: fetch, Scopes: []string{"mcp:tools"}, Resources: []string{mcpURI}, Store: w.store,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.cimd = resolver
	ui, err := loginui.New(loginui.Config{
		Users:    []loginui.User{{Username: "alice", PasswordHash: aliceHash}},
		Consents: w.store, JTIs: w.store, Secret: secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cfg := as.Config{
		Issuer:               w.issuer,
		Resources:            []as.Resource{{URI: mcpURI, Name: "Example MCP", Scopes: []string{"mcp:tools"}, Default: true}},
		UI:                   ui,
		Store:                w.store,
		Secret:               secret,
		ClientResolver:       resolver,
		JWKSHTTPClient:       fetch,
		RegistrationEndpoint: w.issuer + "/register",
	}
	for _, mod := range mods {
		mod(&cfg)
	}
	server, err := as.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := dcr.New(dcr.Config{
		Endpoint: w.issuer + "/register", Store: w.store, Secret: secret,
		Policy: dcr.Policy{Open: true, Scopes: []string{"mcp:tools"}, Resources: []string{mcpURI}, RateLimit: dcr.RateLimit{PerMinute: -1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", server.Handler())
	reg.Mount(mux)
	ts.Config.Handler = mux
	ts.Start()
	t.Cleanup(ts.Close)
	w.srv = ts
	return w
}

// publish serves v as JSON at path on the document server and returns its URL.
func (w *world) publish(path string, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.routes[path] = b
	w.mu.Unlock()
	return w.docs.URL + path
}

func (w *world) register(body string) dcr.ClientInformation {
	w.t.Helper()
	resp, err := http.Post(w.issuer+"/register", "application/json", strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var ci dcr.ClientInformation
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		w.t.Fatalf("register: %d %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &ci); err != nil {
		w.t.Fatal(err)
	}
	return ci
}

func (w *world) oauth(id, secret, redirect string) *oauth2.Config {
	style := oauth2.AuthStyleInParams
	if secret != "" {
		style = oauth2.AuthStyleInHeader
	}
	return &oauth2.Config{ClientID: id, ClientSecret: secret, RedirectURL: redirect, Scopes: []string{"mcp:tools"},
		Endpoint: oauth2.Endpoint{AuthURL: w.issuer + "/authorize", TokenURL: w.issuer + "/token", AuthStyle: style}}
}

var (
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)">(.*?)</form>`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// authorize plays the person: follows the AS's own pages, logs in as alice,
// approves, and returns where the AS sends the browser (a 303 elsewhere), or
// fails with the last page.
func (w *world) authorize(authURL string) *url.URL {
	w.t.Helper()
	return w.authorizeAs(w.browser(), authURL)
}

// browser is an HTTP client with its own cookie jar that follows redirects
// within the AS and stops at the first one leaving it.
func (w *world) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	host := w.srv.Listener.Addr().String()
	return &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != host {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

// authorizeAs is authorize with the browser c, whose cookies (login session,
// remembered consent) carry over between calls.
func (w *world) authorizeAs(c *http.Client, authURL string) *url.URL {
	w.t.Helper()
	do := func(req *http.Request) (*http.Response, string) {
		resp, err := c.Do(req)
		if err != nil {
			w.t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	req, _ := http.NewRequest(http.MethodGet, authURL, nil)
	resp, body := do(req)
	for step := 0; step < 3 && resp.StatusCode == http.StatusOK; step++ {
		m := formRE.FindAllStringSubmatch(body, -1)
		if len(m) != 1 {
			break
		}
		v := url.Values{}
		for _, hm := range hiddenRE.FindAllStringSubmatch(m[0][2], -1) {
			v.Set(html.UnescapeString(hm[1]), html.UnescapeString(hm[2]))
		}
		switch {
		case strings.Contains(body, `name="password"`):
			v.Set("username", "alice")
			v.Set("password", password)
		case strings.Contains(body, `value="approve"`):
			v.Set("action", "approve")
		}
		action := html.UnescapeString(m[0][1])
		if strings.HasPrefix(action, "/") {
			action = w.issuer + action
		}
		req, _ := http.NewRequest(http.MethodPost, action, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, body = do(req)
	}
	if resp.StatusCode != http.StatusSeeOther {
		w.t.Fatalf("authorization ended with %d, want a 303 to the client:\n%s", resp.StatusCode, body)
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		w.t.Fatal(err)
	}
	if u.Query().Get("code") == "" {
		w.t.Fatalf("no code in %s", u)
	}
	return u
}

// codeFlow runs authorization and the public-client code exchange.
func (w *world) codeFlow(conf *oauth2.Config) (*url.URL, *oauth2.Token) {
	w.t.Helper()
	verifier := oauth2.GenerateVerifier()
	u := w.authorize(conf.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier)))
	tok, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		w.t.Fatalf("exchange: %v", err)
	}
	if tok.AccessToken == "" {
		w.t.Fatal("no access token")
	}
	return u, tok
}

func TestClaudeRegistersGetsATokenAndRegistersAgainOnceDeleted(t *testing.T) {
	w := newWorld(t)
	body := `{"client_name":"Claude","redirect_uris":["https://claude.ai/api/mcp/auth_callback"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"],"response_types":["code"]}`
	ci := w.register(body)
	conf := w.oauth(ci.ClientID, "", "https://claude.ai/api/mcp/auth_callback")
	u, tok := w.codeFlow(conf)
	if u.Host != "claude.ai" || u.Query().Get("iss") != w.issuer {
		t.Errorf("redirected to %s", u)
	}
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token for a client registered with refresh_token")
	}
	// The registration is deleted (RFC 7592, or reaped): the next refresh is
	// 401 invalid_client, which is what makes Claude register again.
	req, _ := http.NewRequest(http.MethodDelete, ci.RegistrationClientURI, nil)
	req.Header.Set("Authorization", "Bearer "+ci.RegistrationAccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %v %v", resp, err)
	}
	resp.Body.Close()
	_, err = conf.TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response.StatusCode != http.StatusUnauthorized || re.ErrorCode != "invalid_client" {
		t.Fatalf("refresh after deletion: %v", err)
	}
	again := w.register(body)
	w.codeFlow(w.oauth(again.ClientID, "", "https://claude.ai/api/mcp/auth_callback"))
}

func TestVSCodeRedirectsOnAnotherLoopbackPort(t *testing.T) {
	w := newWorld(t)
	ci := w.register(`{"client_name":"Visual Studio Code","redirect_uris":["http://127.0.0.1:33418/","http://127.0.0.1/"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"]}`)
	u, _ := w.codeFlow(w.oauth(ci.ClientID, "", "http://127.0.0.1:51234/"))
	if u.Host != "127.0.0.1:51234" {
		t.Errorf("redirected to %s", u)
	}
}

func TestCursorRedirectsToItsPrivateUseScheme(t *testing.T) {
	w := newWorld(t)
	ci := w.register(`{"client_name":"Cursor","redirect_uris":["cursor://anysphere.cursor-mcp/oauth/callback","https://www.cursor.com/agents/mcp/oauth/callback","http://localhost:8787/callback"],"token_endpoint_auth_method":"none"}`)
	u, _ := w.codeFlow(w.oauth(ci.ClientID, "", "cursor://anysphere.cursor-mcp/oauth/callback"))
	if u.Scheme != "cursor" {
		t.Errorf("redirected to %s", u)
	}
}

func TestConfidentialRegistrationAuthenticatesWithItsSecret(t *testing.T) {
	w := newWorld(t)
	for _, method := range []string{"client_secret_basic", "client_secret_post"} {
		t.Run(method, func(t *testing.T) {
			ci := w.register(`{"client_name":"Backend","redirect_uris":["https://app.example.org/cb"],"token_endpoint_auth_method":"` + method + `"}`)
			conf := w.oauth(ci.ClientID, ci.ClientSecret, "https://app.example.org/cb")
			if method == "client_secret_post" {
				conf.Endpoint.AuthStyle = oauth2.AuthStyleInParams
			}
			w.codeFlow(conf)
			conf.ClientSecret = "wrong"
			verifier := oauth2.GenerateVerifier()
			u := w.authorize(conf.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier)))
			_, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
			var re *oauth2.RetrieveError
			if !errors.As(err, &re) || re.ErrorCode != "invalid_client" {
				t.Fatalf("wrong secret: %v", err)
			}
		})
	}
}

func TestClaudeCIMDListingJWTBearerGetsAToken(t *testing.T) {
	w := newWorld(t)
	id := w.docs.URL + "/oauth/mcp-oauth-client-metadata"
	w.publish("/oauth/mcp-oauth-client-metadata", map[string]any{
		"client_id": id, "client_name": "Claude", "client_uri": "https://claude.ai",
		"redirect_uris":              []string{"https://claude.ai/api/mcp/auth_callback"},
		"grant_types":                []string{"authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
	u, tok := w.codeFlow(w.oauth(id, "", "https://claude.ai/api/mcp/auth_callback"))
	if u.Host != "claude.ai" || tok.RefreshToken == "" {
		t.Errorf("redirect %s, refresh token %q", u, tok.RefreshToken)
	}
}

func TestChatGPTCIMDAuthenticatesWithPrivateKeyJWT(t *testing.T) {
	w := newWorld(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwksURI := w.publish("/oauth/jwks.json", jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "chatgpt-1", Algorithm: "ES256", Use: "sig"}}})
	id := w.docs.URL + "/oauth/client.json"
	redirect := "https://chatgpt.com/connector_platform_oauth_redirect"
	w.publish("/oauth/client.json", map[string]any{
		"client_id": id, "client_name": "ChatGPT", "redirect_uris": []string{redirect},
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": jwksURI,
	})
	assertion := func(jti string) string {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: "chatgpt-1"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		s, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: id, Subject: id, Audience: jwt.Audience{w.issuer}, ID: jti,
			IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute))}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	exchange := func(a string) (int, map[string]any) {
		conf := w.oauth(id, "", redirect)
		verifier := oauth2.GenerateVerifier()
		u := w.authorize(conf.AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier)))
		form := url.Values{"grant_type": {"authorization_code"}, "code": {u.Query().Get("code")}, "redirect_uri": {redirect},
			"code_verifier": {verifier}, "client_id": {id},
			"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}
		resp, err := http.PostForm(w.issuer+"/token", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	a := assertion("jti-chatgpt-1")
	if status, m := exchange(a); status != http.StatusOK || m["access_token"] == nil {
		t.Fatalf("token: %d %v", status, m)
	}
	// The same assertion again is a replay (jti single use).
	if status, m := exchange(a); status != http.StatusUnauthorized || m["error"] != "invalid_client" {
		t.Fatalf("replayed assertion: %d %v", status, m)
	}
	// Without an assertion the confidential CIMD client cannot get a token.
	if status, m := exchange(""); status != http.StatusUnauthorized && status != http.StatusBadRequest {
		t.Fatalf("no assertion: %d %v", status, m)
	}
}

func TestHostileCIMDClientIDsAreUnknownClients(t *testing.T) {
	w := newWorld(t)
	docsURL, _ := url.Parse(w.docs.URL)
	for _, id := range []string{
		"https://169.254.169.254/latest/client.json",
		"https://10.0.0.1/client.json",
		"https://localhost:" + docsURL.Port() + "/client.json", // loopback by name, not on the allowlist
		w.docs.URL + "/missing.json",
	} {
		t.Run(id, func(t *testing.T) {
			form := url.Values{"grant_type": {"authorization_code"}, "code": {"x"}, "redirect_uri": {"https://a.example/cb"},
				"code_verifier": {strings.Repeat("v", 43)}, "client_id": {id}}
			resp, err := http.PostForm(w.issuer+"/token", form)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || m["error"] != "invalid_client" {
				t.Fatalf("token endpoint: %d %v", resp.StatusCode, m)
			}
			q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {"https://a.example/cb"},
				"code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"}, "state": {"s-0123456789"}}
			resp, err = (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(w.issuer + "/authorize?" + q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Fatalf("authorize: %d (want an error page, never a redirect or a 5xx)", resp.StatusCode)
			}
		})
	}
	if n, _ := w.store.CountClients(context.Background(), "cimd"); n != 0 {
		t.Fatalf("%d CIMD clients stored from hostile ids", n)
	}
}

func TestCIMDRedirectURIMustBeInTheDocument(t *testing.T) {
	w := newWorld(t)
	id := w.docs.URL + "/doc.json"
	w.publish("/doc.json", map[string]any{"client_id": id, "client_name": "Doc", "redirect_uris": []string{"https://good.example/cb"}})
	q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {"https://evil.example/cb"},
		"code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"}, "state": {"s-0123456789"}}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(w.issuer + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Fatalf("unregistered redirect: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestMetadataAdvertisesRegistrationAndCIMD(t *testing.T) {
	w := newWorld(t)
	resp, err := http.Get(w.issuer + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	if m["registration_endpoint"] != w.issuer+"/register" || m["client_id_metadata_document_supported"] != true {
		t.Fatalf("metadata %v", m)
	}
	if algs, _ := m["token_endpoint_auth_signing_alg_values_supported"].([]any); len(algs) == 0 {
		t.Errorf("token_endpoint_auth_signing_alg_values_supported missing: %v", m)
	}
	methods, _ := m["token_endpoint_auth_methods_supported"].([]any)
	for _, want := range []string{"none", "client_secret_basic", "client_secret_post", "private_key_jwt"} {
		found := false
		for _, got := range methods {
			found = found || got == want
		}
		if !found {
			t.Errorf("token_endpoint_auth_methods_supported %v lacks %s", methods, want)
		}
	}
}

// A changed metadata document takes effect once the cached copy expires:
// the AS must not keep serving a stale stored copy (a redirect URI the
// document dropped stops working).
func TestCIMDDocumentChangesTakeEffectAfterTheCache(t *testing.T) {
	w := newWorld(t)
	id := w.docs.URL + "/changing.json"
	w.publish("/changing.json", map[string]any{"client_id": id, "client_name": "Doc", "redirect_uris": []string{"https://old.example/cb"}})
	w.codeFlow(w.oauth(id, "", "https://old.example/cb"))
	w.publish("/changing.json", map[string]any{"client_id": id, "client_name": "Doc", "redirect_uris": []string{"https://new.example/cb"}})
	w.cimd.Forget(id) // as if max-age had passed
	q := url.Values{"response_type": {"code"}, "client_id": {id}, "redirect_uri": {"https://old.example/cb"},
		"code_challenge": {strings.Repeat("c", 43)}, "code_challenge_method": {"S256"}, "state": {"s-0123456789"}}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(w.issuer + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("redirect URI dropped from the document still accepted: %d", resp.StatusCode)
	}
	w.codeFlow(w.oauth(id, "", "https://new.example/cb"))
}
