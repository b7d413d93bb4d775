package loginui

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/mcpauth/mcpauth/as/authflow"
	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// Test users. Hashes are computed once: argon2id for alice, bcrypt for bob.
var (
	hashOnce  sync.Once
	aliceHash string
	bobHash   string
)

const (
	alicePW = "correct horse battery staple"
	bobPW   = "bobpw-1234"
)

func testUsers(t testing.TB) []User {
	hashOnce.Do(func() {
		h, err := password.Hash(alicePW)
		if err != nil {
			panic(err)
		}
		aliceHash = h
		b, err := bcrypt.GenerateFromPassword([]byte(bobPW), bcrypt.DefaultCost)
		if err != nil {
			panic(err)
		}
		bobHash = string(b)
	})
	return []User{{Username: "alice", PasswordHash: aliceHash}, {Username: "bob", PasswordHash: bobHash}}
}

// clock is a settable time source that starts at the wall clock, so the
// memory store's own clock and ours agree on what has expired.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// harness is a real HTTP server: /authorize builds a transaction from the
// query and /authorize/continue opens one (standing in for as/, which
// validates the request first), both run the step authflow.Next decides,
// and an answer is a 303 to the redirect URI with a made-up code; every
// other path is UI.Handler.
type harness struct {
	t     testing.TB
	ui    *UI
	store *memory.Store
	srv   *httptest.Server
	clock *clock
	// results are the answers sent to the client, in order.
	mu      sync.Mutex
	results []Result
}

// Result is an answer the harness sent to the client.
type Result struct {
	Subject      string
	Scopes       []string // granted
	Denied       bool
	Interacted   bool
	NotPermitted []string
	// AuthTime is when Subject signed in.
	AuthTime time.Time
}

// serveAuthorize builds the transaction as/ would from the query, or from
// the body of a request POSTed without one. The test_* parameters set
// what as/ works out from the client's registration.
func (h *harness) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.Method == http.MethodPost && q.Get("client_id") == "" {
		if err := r.ParseForm(); err != nil {
			ErrorPage(w, http.StatusBadRequest, "Bad request", "")
			return
		}
		q = r.PostForm
	}
	ru, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || ru.Host == "" {
		ErrorPage(w, http.StatusBadRequest, "Invalid request", "The redirect URI is not registered.")
		return
	}
	maxAge := int64(-1)
	if v := q.Get("max_age"); v != "" {
		maxAge, _ = strconv.ParseInt(v, 10, 64)
	}
	redirects := []string{ru.String()}
	if v := q.Get("test_redirect_uris"); v != "" {
		redirects = strings.Fields(v)
	}
	t := h.ui.flow.New(authflow.Request{
		ClientID:           q.Get("client_id"),
		RedirectURI:        ru.String(),
		State:              q.Get("state"),
		CodeChallenge:      q.Get("code_challenge"),
		Resource:           q.Get("resource"),
		Scopes:             strings.Fields(q.Get("scope")),
		ScopesNamed:        q.Get("test_default_scopes") != "1",
		ForceLogin:         q.Get("prompt") == "login",
		ForceConsent:       q.Get("prompt") == "consent",
		MaxAge:             maxAge,
		ConfirmRemembered:  q.Get("test_confirm") == "1",
		ClientRedirectURIs: redirects,
	}, authflow.Display{
		ClientName:   q.Get("test_client_name"),
		RedirectHost: ru.Host,
		CIMDHost:     q.Get("test_cimd_host"),
		LoopbackOnly: ru.Hostname() == "127.0.0.1",
		ResourceName: "Example MCP server",
	})
	h.proceed(w, r, t, h.ui.Session(w, r))
}

// serveContinue opens the transaction a step returns to, as as/ does.
func (h *harness) serveContinue(w http.ResponseWriter, r *http.Request) {
	sess := h.ui.Session(w, r)
	t, err := h.ui.flow.Open(r.Context(), r.URL.Query().Get("txn"), sess.ID)
	if err != nil {
		ErrorPage(w, http.StatusBadRequest, "Sign-in expired", err.Error())
		return
	}
	h.proceed(w, r, t, sess)
}

// proceed runs the step authflow.Next decides, as as/ does.
func (h *harness) proceed(w http.ResponseWriter, r *http.Request, t *authflow.Transaction, sess authflow.Session) {
	ctx := r.Context()
	t.Session = sess.ID
	in := authflow.Input{Txn: t, Session: sess, OnlyProvider: h.ui.OnlyProvider(), Now: h.ui.now()}
	if sess.Subject != "" {
		in.Active = h.ui.active(ctx, sess.Subject)
		var err error
		if in.Cap.Scopes, in.Cap.Capped, err = h.ui.People().Cap(ctx, sess.Subject); err != nil {
			ErrorPage(w, http.StatusServiceUnavailable, "Temporarily unavailable", "")
			return
		}
		if c, err := h.store.GetConsent(ctx, sess.Subject, t.Request.ClientID, t.Request.Resource); err == nil {
			in.Remembered = authflow.Remembered(c, in.Now, t.Request.ClientRedirectURIs)
		}
	}
	d := authflow.Next(in)
	res := Result{Subject: sess.Subject, Interacted: t.Interacted(), AuthTime: sess.AuthTime}
	v := url.Values{"state": {t.Request.State}}
	switch d.Step {
	case authflow.SignIn, authflow.SignInAt:
		h.ui.SignIn(w, r, sess, t, d)
		return
	case authflow.Consent, authflow.Confirm:
		h.ui.Ask(w, r, sess, t, d)
		return
	case authflow.NotPermitted:
		res.Denied, res.NotPermitted = true, d.NotPermitted
		v.Set("error", "access_denied")
	case authflow.Deny:
		res.Denied = true
		v.Set("error", "access_denied")
	case authflow.Issue:
		res.Scopes = d.Scopes
		v.Set("code", "code-for-"+sess.Subject)
		v.Set("granted", strings.Join(d.Scopes, " "))
	}
	h.mu.Lock()
	h.results = append(h.results, res)
	h.mu.Unlock()
	http.Redirect(w, r, t.Request.RedirectURI+"?"+v.Encode(), http.StatusSeeOther)
}

func newHarness(t testing.TB, mod func(*Config)) *harness {
	t.Helper()
	return newHarnessAt(t, func(_ *harness, c *Config) {
		if mod != nil {
			mod(c)
		}
	})
}

// newHarnessAt is newHarness with a mod that may read h.srv.Listener's
// address (chosen before the pages are configured).
func newHarnessAt(t testing.TB, mod func(h *harness, c *Config)) *harness {
	t.Helper()
	h := &harness{t: t, store: memory.New(), clock: &clock{}}
	h.srv = httptest.NewUnstartedServer(nil)
	cfg := Config{
		Users:             testUsers(t),
		Consents:          h.store,
		JTIs:              h.store,
		Secret:            []byte("0123456789abcdef0123456789abcdef-test-secret"),
		Now:               h.clock.Now,
		ScopeDescriptions: map[string]string{"mcp:tools": "Use the tools of the MCP server"},
	}
	mod(h, &cfg)
	ui, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.ui = ui
	mux := http.NewServeMux()
	mux.HandleFunc("/authorize", h.serveAuthorize)
	mux.HandleFunc(ContinuePath, h.serveContinue)
	mux.HandleFunc("/callback", callbackPage)
	mux.Handle("/", ui.Handler())
	h.srv.Config.Handler = mux
	h.srv.Start()
	t.Cleanup(h.srv.Close)
	return h
}

func (h *harness) lastResult() Result {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.results) == 0 {
		h.t.Fatal("no result")
	}
	return h.results[len(h.results)-1]
}

// browser is a cookie-keeping client that follows redirects within the
// test server and stops at any other (the client's redirect URI).
type browser struct {
	h *harness
	c *http.Client
}

func (h *harness) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	srvURL, _ := url.Parse(h.srv.URL)
	return &browser{h: h, c: &http.Client{
		Jar: jar,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != srvURL.Host {
				return http.ErrUseLastResponse
			}
			if via[len(via)-1].Method == http.MethodPost && req.Method != http.MethodGet {
				h.t.Errorf("redirect after POST kept method %s", req.Method)
			}
			return nil
		},
	}}
}

// page is one response with its body read.
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
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.h.t.Fatal(err)
	}
	return page{resp, string(body)}
}

func (b *browser) get(path string) page {
	b.h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.h.srv.URL+path, nil)
	if err != nil {
		b.h.t.Fatal(err)
	}
	return b.do(req)
}

func (b *browser) post(action string, v url.Values) page {
	b.h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.h.srv.URL+action, strings.NewReader(v.Encode()))
	if err != nil {
		b.h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// form is a parsed <form>: where it posts and its hidden fields.
type form struct {
	Action string
	Fields url.Values
}

var (
	formRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)">(.*?)</form>`)
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

func (p page) forms() []form {
	var out []form
	for _, m := range formRE.FindAllStringSubmatch(p.Body, -1) {
		f := form{Action: html.UnescapeString(m[1]), Fields: url.Values{}}
		for _, hm := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			f.Fields.Set(html.UnescapeString(hm[1]), html.UnescapeString(hm[2]))
		}
		out = append(out, f)
	}
	return out
}

// form returns the only form on the page (failing the test otherwise) with
// extra fields set.
func (p page) form(t testing.TB, extra ...string) form {
	t.Helper()
	fs := p.forms()
	if len(fs) != 1 {
		t.Fatalf("page has %d forms, want 1; status %d body:\n%s", len(fs), p.StatusCode, p.Body)
	}
	f := fs[0]
	f.Fields = cloneValues(f.Fields)
	for i := 0; i+1 < len(extra); i += 2 {
		f.Fields.Set(extra[i], extra[i+1])
	}
	return f
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func (b *browser) submit(f form) page {
	b.h.t.Helper()
	return b.post(f.Action, f.Fields)
}

// authorizePath builds an /authorize URL like an MCP client would.
func authorizePath(extra ...string) string {
	v := url.Values{
		"response_type":         {"code"},
		"client_id":             {"demo-app"},
		"redirect_uri":          {"https://app.example/callback"},
		"scope":                 {"mcp:tools"},
		"resource":              {"http://127.0.0.1:8080/mcp"},
		"state":                 {"st-1"},
		"code_challenge":        {"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"},
		"code_challenge_method": {"S256"},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return "/authorize?" + v.Encode()
}

// login fetches path, expects the login form and signs in; it returns the
// page after the 303 that follows a good password.
func (b *browser) login(path, user, pw string) page {
	b.h.t.Helper()
	p := b.get(path)
	if !strings.Contains(p.Body, `name="password"`) {
		b.h.t.Fatalf("GET %s: no login form; status %d", path, p.StatusCode)
	}
	return b.submit(p.form(b.h.t, "username", user, "password", pw))
}

// redirectedTo returns the Location of a 303 to the client, or fails.
func (p page) redirectedTo(t testing.TB) *url.URL {
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
