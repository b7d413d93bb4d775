package as

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"flag"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/as/loginui"
	"github.com/mcpauth/mcpauth/storage/memory"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

const (
	mcpURI      = "http://127.0.0.1:8080/mcp"
	otherURI    = "http://127.0.0.1:8081/other"
	ciSecret    = "ci-bot-secret-0123456789abcdef"
	rsSecret    = "rs-secret-0123456789abcdefghij"
	webSecret   = "web-app-secret-0123456789abcdef"
	appRedirect = "https://app.example/callback"
	alicePW     = "correct horse battery staple"
)

var aliceHash = func() string {
	h, err := bcrypt.GenerateFromPassword([]byte(alicePW), bcrypt.MinCost)
	if err != nil {
		panic(err)
	}
	return string(h)
}()

// clock is a settable time source shared by the server and the pages.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type harness struct {
	t      testing.TB
	srv    *httptest.Server
	as     *Server
	store  *memory.Store
	clock  *clock
	issuer string
	jwtKey *ecdsa.PrivateKey // private_key_jwt key of client "jwt-bot"
	// fetchedAttacker counts fetches of key URLs named in hostile
	// assertion headers (jku, x5u); it must stay 0.
	fetchedAttacker atomic.Int32
}

// harnessUI stands for the harness's login pages in the Config a mod
// sees: newHarness builds them once the mod has chosen the store.
var harnessUI = &loginui.UI{}

// newHarness starts the AS on a real loopback listener with memory storage,
// the real login pages and a set of clients; mod may change the config.
func newHarness(t testing.TB, mod func(*Config)) *harness {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	store := memory.New()
	clk := &clock{t: time.Now()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef-test-secret")
	cfg := Config{
		Issuer: issuer,
		Resources: []Resource{
			{URI: mcpURI, Name: "Example MCP", Scopes: []string{"mcp:tools", "mcp:admin"}, Default: true, IntrospectionClients: []string{"rs"}},
			{URI: otherURI, Name: "Other", Scopes: []string{"other:read"}},
		},
		Clients: []Client{
			{ID: "demo-app", Public: true, Name: "Demo", RedirectURIs: []string{appRedirect, "http://127.0.0.1/cb", "http://localhost:7777/cb"}},
			{ID: "web-app", Secret: webSecret, Name: "Web", RedirectURIs: []string{appRedirect}},
			{ID: "ci-bot", Secret: ciSecret, GrantTypes: []string{"client_credentials"}, Scopes: []string{"mcp:tools"}, Resources: []string{mcpURI}},
			{ID: "rs", Secret: rsSecret, GrantTypes: []string{"client_credentials"}, Resources: []string{mcpURI}},
			{ID: "jwt-bot", JWKS: jwks, GrantTypes: []string{"client_credentials"}},
		},
		UI:     harnessUI,
		Store:  store,
		Secret: secret,
		Now:    clk.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	if cfg.UI == harnessUI {
		// The harness's pages, revoking in the server's store as serve
		// wires them: the revoker is built first and given to both.
		if cfg.Revoker == nil {
			cfg.Revoker = NewGrantRevoker(cfg.Store, cfg.Logger)
		}
		ui, err := loginui.New(loginui.Config{
			Users:     []loginui.User{{Username: "alice", PasswordHash: aliceHash}},
			Consents:  store,
			JTIs:      store,
			Approvals: store,
			Secret:    secret,
			Now:       clk.Now,
			Revoker:   cfg.Revoker,
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg.UI = ui
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = s.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	return &harness{t: t, srv: ts, as: s, store: store, clock: clk, issuer: issuer, jwtKey: key}
}

// oauthConfig is a golang.org/x/oauth2 client for one of the test clients.
func (h *harness) oauthConfig(id, secret string, scopes ...string) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if secret == "" {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID:     id,
		ClientSecret: secret,
		Endpoint:     oauth2.Endpoint{AuthURL: h.issuer + "/authorize", TokenURL: h.issuer + "/token", AuthStyle: style},
		RedirectURL:  appRedirect,
		Scopes:       scopes,
	}
}

// browser is a person's browser: cookies, and redirects followed only on
// the AS's own host.
type browser struct {
	h *harness
	c *http.Client
}

func (h *harness) browser() *browser {
	jar, _ := cookiejar.New(nil)
	host := h.srv.Listener.Addr().String()
	return &browser{h: h, c: &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != host {
			return http.ErrUseLastResponse
		}
		return nil
	}}}
}

type page struct {
	*http.Response
	Body string
}

func (b *browser) do(req *http.Request) page {
	b.h.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return page{resp, string(body)}
}

func (b *browser) get(rawURL string) page {
	b.h.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, rawURL, nil)
	return b.do(req)
}

var (
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)">(.*?)</form>`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// submit posts the page's only form with extra fields.
func (b *browser) submit(p page, extra ...string) page {
	b.h.t.Helper()
	m := formRE.FindAllStringSubmatch(p.Body, -1)
	if len(m) != 1 {
		b.h.t.Fatalf("page has %d forms, want 1; status %d body:\n%s", len(m), p.StatusCode, p.Body)
	}
	v := url.Values{}
	for _, hm := range hiddenRE.FindAllStringSubmatch(m[0][2], -1) {
		v.Set(html.UnescapeString(hm[1]), html.UnescapeString(hm[2]))
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	action := html.UnescapeString(m[0][1])
	if strings.HasPrefix(action, "/") {
		action = b.h.issuer + action
	}
	req, _ := http.NewRequest(http.MethodPost, action, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// authorize runs the browser part of the code flow through the real login
// and consent forms and returns where the AS sent the browser back to.
func (b *browser) authorize(authURL string) *url.URL {
	b.h.t.Helper()
	p := b.get(authURL)
	if strings.Contains(p.Body, `name="password"`) {
		p = b.submit(p, "username", "alice", "password", alicePW)
	}
	if strings.Contains(p.Body, `value="approve"`) {
		p = b.submit(p, "action", "approve")
	}
	return redirected(b.h.t, p)
}

func redirected(t testing.TB, p page) *url.URL {
	t.Helper()
	if p.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d, want 303 to the client; body:\n%s", p.StatusCode, p.Body)
	}
	u, err := url.Parse(p.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// codeFlow runs the whole flow for demo-app and returns the token.
func (h *harness) codeFlow(scopes ...string) *oauth2.Token {
	h.t.Helper()
	conf := h.oauthConfig("demo-app", "", scopes...)
	verifier := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI)))
	code := u.Query().Get("code")
	if code == "" {
		h.t.Fatalf("no code in %s", u)
	}
	tok, err := conf.Exchange(context.Background(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// post sends a form to an endpoint with optional HTTP Basic credentials and
// decodes the JSON answer.
func (h *harness) post(path string, form url.Values, user, pass string) (*http.Response, map[string]any) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.issuer+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(url.QueryEscape(user), url.QueryEscape(pass))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(body) > 0 && json.Unmarshal(body, &m) != nil {
		h.t.Fatalf("%s: status %d, body not JSON: %s", path, resp.StatusCode, body)
	}
	return resp, m
}

// claims verifies an access token against the AS's published JWKS and
// returns its header type and claims.
func (h *harness) claims(token string) (typ string, c map[string]any) {
	h.t.Helper()
	resp, err := http.Get(h.issuer + "/jwks.json")
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		h.t.Fatal(err)
	}
	jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.EdDSA})
	if err != nil {
		h.t.Fatal(err)
	}
	keys := set.Key(jws.Signatures[0].Header.KeyID)
	if len(keys) != 1 {
		h.t.Fatalf("kid %q not in JWKS", jws.Signatures[0].Header.KeyID)
	}
	payload, err := jws.Verify(keys[0])
	if err != nil {
		h.t.Fatal(err)
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		h.t.Fatal(err)
	}
	typ, _ = jws.Signatures[0].Header.ExtraHeaders[jose.HeaderType].(string)
	return typ, c
}

func ecdsaKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }
