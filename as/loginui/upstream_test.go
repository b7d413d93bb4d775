package loginui

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mcpauth/mcpauth/internal/testop"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/upstream"
)

var opPeople = []testop.Person{
	{ID: "u-alice", Username: "alice", Password: "alice-pw", Email: "alice@acme.example", EmailVerified: true, Name: "Alice Admin", Groups: []string{"mcp-users", "mcp-admins"}},
	{ID: "u-bob", Username: "bob", Password: "bob-pw", Email: "bob@acme.example", EmailVerified: true, Name: "Bob", Groups: []string{"mcp-users"}},
	{ID: "u-eve", Username: "eve", Password: "eve-pw", Email: "eve@elsewhere.example", EmailVerified: true, Groups: []string{"mcp-users"}},
	{ID: "u-carol", Username: "carol", Password: "carol-pw", Email: "carol@acme.example", EmailVerified: true, Groups: []string{"sales"}},
}

// upstreamEnv is the harness with a real OpenID provider as its upstream
// "corp"; the provider's clock can be moved apart from ours.
type upstreamEnv struct {
	*harness
	op     *testop.OP
	mu     sync.Mutex
	opSkew time.Duration
}

func (e *upstreamEnv) providerNow() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Now().Add(e.opSkew)
}

func (e *upstreamEnv) skew(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opSkew = d
}

// newUpstreamEnv starts the provider and the pages; localUsers keeps the
// password accounts, issuer (when set) replaces the provider's address.
func newUpstreamEnv(t testing.TB, localUsers bool, issuer string) *upstreamEnv {
	t.Helper()
	return newUpstreamEnvScopes(t, localUsers, issuer, []string{"openid", "email", "profile", "groups", "offline_access"})
}

// newUpstreamEnvScopes is newUpstreamEnv asking the provider for scopes.
func newUpstreamEnvScopes(t testing.TB, localUsers bool, issuer string, scopes []string) *upstreamEnv {
	t.Helper()
	e := &upstreamEnv{op: testop.Start(t, opPeople, testop.Client{ID: "mcpauth", Secret: "op-secret", ClaimsInIDToken: true})}
	if issuer == "" {
		issuer = e.op.Issuer
	}
	e.harness = newHarnessAt(t, func(h *harness, c *Config) {
		p, err := upstream.New(upstream.Config{
			ID: "corp", Issuer: issuer, ClientID: "mcpauth", ClientSecret: "op-secret",
			RedirectURL:    "http://" + h.srv.Listener.Addr().String() + "/upstream/corp/callback",
			Scopes:         scopes,
			AllowedDomains: []string{"acme.example"}, AllowedGroups: []string{"mcp-users"},
			ClaimScopes: map[string]map[string][]string{"groups": {"mcp-users": {"mcp:tools"}, "mcp-admins": {"mcp:admin"}}},
			Now:         e.providerNow,
			HTTPClient:  upstream.NewHTTPClient(2 * time.Second),
		})
		if err != nil {
			t.Fatal(err)
		}
		c.Upstreams = []Upstream{{Provider: p, Name: "Acme SSO"}}
		c.UpstreamUsers = h.store
		if !localUsers {
			c.Users = nil
		}
	})
	e.op.SetRedirectURIs("mcpauth", e.srv.URL+"/upstream/corp/callback")
	return e
}

var upstreamFormRE = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)" class="upstream">(.*?)</form>`)

// toProvider opens path and returns where the browser is sent at the
// provider: straight away (one provider, no local users) or after the
// provider's button.
func (e *upstreamEnv) toProvider(b *browser, path string) *url.URL {
	e.t.Helper()
	p := b.get(path)
	if p.StatusCode == http.StatusOK {
		m := upstreamFormRE.FindStringSubmatch(p.Body)
		if m == nil {
			e.t.Fatalf("no provider button on %s: %s", path, p.Body)
		}
		v := url.Values{}
		for _, hm := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
			v.Set(html.UnescapeString(hm[1]), html.UnescapeString(hm[2]))
		}
		p = b.post(html.UnescapeString(m[1]), v)
	}
	if p.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("status %d, want 303 to the provider: %s", p.StatusCode, p.Body)
	}
	u, err := url.Parse(p.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(u.String(), e.op.Issuer) {
		e.t.Fatalf("sent to %q, not to the provider", p.Header.Get("Location"))
	}
	return u
}

// signIn signs in at the provider and returns the callback URL it sends
// the browser back to (not yet followed).
func (e *upstreamEnv) signIn(b *browser, path, user string) *url.URL {
	e.t.Helper()
	at := e.toProvider(b, path)
	q := at.Query()
	if q.Has("resource") || q.Get("scope") != "openid email profile groups offline_access" || q.Get("code_challenge_method") != "S256" || q.Get("nonce") == "" {
		e.t.Fatalf("authorization request to the provider: %v", q)
	}
	cb, err := e.op.SignIn(b.c, at.String(), user, user+"-pw")
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.HasPrefix(cb.String(), e.srv.URL+"/upstream/corp/callback?") {
		e.t.Fatalf("provider sent the browser to %s", cb)
	}
	return cb
}

func (b *browser) open(u *url.URL) page {
	b.h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		b.h.t.Fatal(err)
	}
	return b.do(req)
}

func (e *upstreamEnv) record(subject string) *storage.User {
	u, err := e.store.GetUser(context.Background(), subject)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return u
}

func TestUpstreamSignInThenOurConsent(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	b := e.browser()
	path := authorizePath("scope", "mcp:tools mcp:admin")
	cb := e.signIn(b, path, "alice")
	anon := sessionCookie(b, e.srv.URL)
	consent := b.open(cb)
	if consent.StatusCode != http.StatusOK || !strings.Contains(consent.Body, "Allow access?") || !strings.Contains(consent.Body, "Signed in as <strong>Alice Admin (corp:u-alice)</strong>") {
		t.Fatalf("after the callback: status %d\n%s", consent.StatusCode, consent.Body)
	}
	if c := sessionCookie(b, e.srv.URL); c == "" || c == anon {
		t.Fatal("the session was not rotated at sign-in")
	}
	for _, s := range []string{"mcp:tools", "mcp:admin"} {
		if !strings.Contains(consent.Body, s) {
			t.Fatalf("consent page lacks %s", s)
		}
	}
	to := b.submit(consent.form(t, "action", "approve")).redirectedTo(t)
	if to.Query().Get("code") != "code-for-corp:u-alice" || to.Query().Get("granted") != "mcp:tools mcp:admin" {
		t.Fatalf("redirected to %s", to)
	}
	rec := e.record("corp:u-alice")
	if rec == nil || rec.Upstream != "corp" || rec.UpstreamSubject != "u-alice" || rec.Email != "alice@acme.example" || rec.Name != "Alice Admin" ||
		!slices.Equal(rec.Groups, []string{"mcp-users", "mcp-admins"}) || rec.CheckedAt.IsZero() {
		t.Fatalf("record %+v", rec)
	}
	sealer, err := RefreshSealer([]byte("0123456789abcdef0123456789abcdef-test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := sealer.Open(rec.UpstreamRefresh, []byte("corp:u-alice"))
	if err != nil || len(rt) == 0 || strings.Contains(string(rec.UpstreamRefresh), string(rt)) {
		t.Fatalf("upstream refresh token not sealed: %v", err)
	}
	if _, err := sealer.Open(rec.UpstreamRefresh, []byte("corp:u-bob")); err == nil {
		t.Fatal("the sealed refresh token opens for another subject")
	}
	if !e.ui.active(context.Background(), "corp:u-alice") || e.ui.active(context.Background(), "corp:u-nobody") || e.ui.active(context.Background(), "other:u-alice") {
		t.Fatal("UserActive does not follow the records of configured upstreams")
	}
}

func TestUpstreamScopeCap(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	b := e.browser()
	// bob (mcp-users) gets the resource's default scopes (here both, as
	// as/ would fill them in): the consent page offers only what his
	// groups allow, and the grant carries only that.
	consent := b.open(e.signIn(b, authorizePath("scope", "mcp:tools mcp:admin", "test_default_scopes", "1"), "bob"))
	if consent.StatusCode != http.StatusOK || strings.Contains(consent.Body, "mcp:admin") || !strings.Contains(consent.Body, "mcp:tools") {
		t.Fatalf("consent page for bob: %d\n%s", consent.StatusCode, consent.Body)
	}
	to := b.submit(consent.form(t, "action", "approve")).redirectedTo(t)
	if to.Query().Get("granted") != "mcp:tools" {
		t.Fatalf("granted %q", to.Query().Get("granted"))
	}
	// Naming mcp:admin, alone or with mcp:tools (a step-up), is refused
	// with the scope named; offline_access is not capped.
	for i, scope := range []string{"mcp:admin", "mcp:tools mcp:admin", "mcp:tools offline_access mcp:admin"} {
		n := len(e.results)
		to = b.get(authorizePath("scope", scope, "state", fmt.Sprint("st-", i))).redirectedTo(t)
		if to.Query().Get("error") != "access_denied" || len(e.results) != n+1 {
			t.Fatalf("%q beyond the cap: %s", scope, to)
		}
		if r := e.lastResult(); !r.Denied || !slices.Equal(r.NotPermitted, []string{"mcp:admin"}) || r.Subject != "corp:u-bob" {
			t.Fatalf("result %+v", r)
		}
	}
	to = b.submit(b.get(authorizePath("scope", "mcp:tools offline_access", "state", "st-ok")).form(t, "action", "approve")).redirectedTo(t)
	if to.Query().Get("granted") != "mcp:tools offline_access" {
		t.Fatalf("within the cap: %s", to)
	}
}

func TestNotPermittedPage(t *testing.T) {
	h := newHarness(t, nil)
	rec := httptest.NewRecorder()
	h.ui.NotPermittedPage(rec, []string{"mcp:admin"}, "https://app.example/callback?error=access_denied&state=s")
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "mcp:admin") ||
		!strings.Contains(rec.Body.String(), `href="https://app.example/callback?error=access_denied&amp;state=s"`) ||
		!strings.Contains(rec.Body.String(), "The application will be told that access was denied.") {
		t.Fatalf("page %d:\n%s", rec.Code, rec.Body.String())
	}
}

func TestUpstreamCallbackFailures(t *testing.T) {
	other := testop.NewKey()
	tamper := func(f func(c map[string]any)) func(map[string]any) (map[string]any, *rsa.PrivateKey, string) {
		return func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) { f(c); return c, nil, "" }
	}
	cases := []struct {
		name   string
		user   string
		skew   time.Duration
		tamper func(map[string]any) (map[string]any, *rsa.PrivateKey, string)
		status int
		text   string
	}{
		{name: "wrong nonce", user: "alice", tamper: tamper(func(c map[string]any) { c["nonce"] = "another" }), status: http.StatusBadGateway, text: "was not valid"},
		{name: "ID token for another audience", user: "alice", tamper: tamper(func(c map[string]any) { c["aud"] = "someone-else" }), status: http.StatusBadGateway, text: "was not valid"},
		{name: "signed by an unknown key", user: "alice", tamper: func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) { return c, other, "unknown" }, status: http.StatusBadGateway, text: "was not valid"},
		{name: "expired", user: "alice", skew: 2 * time.Hour, status: http.StatusBadGateway, text: "had expired when it arrived"},
		{name: "clock skew", user: "alice", skew: -time.Hour, status: http.StatusBadGateway, text: "clocks of Acme SSO and this service disagree"},
		{name: "outside allowed_groups", user: "carol", status: http.StatusForbidden, text: "not in any of the allowed groups"},
		{name: "outside allowed_domains", user: "eve", status: http.StatusForbidden, text: "verified email address at one of the allowed domains"},
	}
	e := newUpstreamEnv(t, true, "")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := e.browser()
			cb := e.signIn(b, authorizePath(), tc.user)
			e.op.Tamper(tc.tamper)
			e.skew(tc.skew)
			defer func() { e.op.Tamper(nil); e.skew(0) }()
			n := len(e.results)
			p := b.open(cb)
			if p.StatusCode != tc.status || !strings.Contains(p.Body, html.EscapeString(tc.text)) {
				t.Fatalf("status %d, want %d with %q:\n%s", p.StatusCode, tc.status, tc.text, p.Body)
			}
			assertNothingDone(t, e, b, n, "corp:u-"+tc.user)
			// The same answer again is refused as used, whatever the first
			// outcome was.
			e.op.Tamper(nil)
			e.skew(0)
			if p := b.open(cb); p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "already used") {
				t.Fatalf("replayed state: %d\n%s", p.StatusCode, p.Body)
			}
			assertNothingDone(t, e, b, n, "corp:u-"+tc.user)
		})
	}
	t.Run("state from another browser", func(t *testing.T) {
		cb := e.signIn(e.browser(), authorizePath(), "alice")
		b := e.browser()
		b.get(authorizePath()) // a session of its own
		n := len(e.results)
		if p := b.open(cb); p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "started in another browser") {
			t.Fatalf("status %d:\n%s", p.StatusCode, p.Body)
		}
		assertNothingDone(t, e, b, n, "corp:u-alice")
	})
	t.Run("forged or missing state", func(t *testing.T) {
		b := e.browser()
		cb := e.signIn(b, authorizePath(), "alice")
		for _, q := range []string{"state=forged&code=" + url.QueryEscape(cb.Query().Get("code")), "code=x", "state=a&state=b&code=x", "state=" + url.QueryEscape(cb.Query().Get("state")) + "&code=a&code=b"} {
			u, _ := url.Parse(e.srv.URL + "/upstream/corp/callback?" + q)
			if p := b.open(u); p.StatusCode != http.StatusBadRequest || strings.Contains(p.Body, "panic") {
				t.Fatalf("%s: status %d:\n%s", q, p.StatusCode, p.Body)
			}
		}
		assertNothingDone(t, e, b, len(e.results), "corp:u-alice")
	})
	t.Run("state of another provider's path", func(t *testing.T) {
		b := e.browser()
		cb := e.signIn(b, authorizePath(), "alice")
		u, _ := url.Parse(strings.Replace(cb.String(), "/upstream/corp/", "/upstream/other/", 1))
		if p := b.open(u); p.StatusCode != http.StatusNotFound {
			t.Fatalf("status %d", p.StatusCode)
		}
	})
	t.Run("the provider answers an error", func(t *testing.T) {
		b := e.browser()
		cb := e.signIn(b, authorizePath(), "alice")
		u, _ := url.Parse(e.srv.URL + "/upstream/corp/callback?error=access_denied&state=" + url.QueryEscape(cb.Query().Get("state")))
		n := len(e.results)
		if p := b.open(u); p.StatusCode != http.StatusForbidden || !strings.Contains(p.Body, "did not complete the sign-in (access_denied)") {
			t.Fatalf("status %d:\n%s", p.StatusCode, p.Body)
		}
		assertNothingDone(t, e, b, n, "corp:u-alice")
	})
	t.Run("a disabled person", func(t *testing.T) {
		if err := e.store.SetUserDisabled(context.Background(), "corp:u-bob", true); err != nil {
			t.Fatal(err)
		}
		b := e.browser()
		n := len(e.results)
		if p := b.open(e.signIn(b, authorizePath(), "bob")); p.StatusCode != http.StatusForbidden || !strings.Contains(p.Body, "Account disabled") {
			t.Fatalf("status %d:\n%s", p.StatusCode, p.Body)
		}
		if len(e.results) != n || signedIn(b) || e.ui.active(context.Background(), "corp:u-bob") {
			t.Fatal("a disabled person signed in")
		}
	})
}

// assertNothingDone checks that a failed callback issued nothing, recorded
// nobody and signed nobody in.
func assertNothingDone(t *testing.T, e *upstreamEnv, b *browser, results int, subject string) {
	t.Helper()
	if len(e.results) != results {
		t.Fatal("an authorization result was produced")
	}
	if rec := e.record(subject); rec != nil {
		t.Fatalf("recorded %+v", rec)
	}
	if signedIn(b) {
		t.Fatal("the browser is signed in")
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	upstreamDownPage(t, "http://"+addr, addr)
}

// TestUpstreamOversizedDiscovery: a provider whose discovery document
// exceeds the cap is treated as unavailable, on the same page.
func TestUpstreamOversizedDiscovery(t *testing.T) {
	var issuer string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"` + issuer + `","authorization_endpoint":"` + issuer + `/a","token_endpoint":"` + issuer + `/t","jwks_uri":"` + issuer + `/k","pad":"` + strings.Repeat("x", upstream.MaxDiscoveryBytes) + `"}`))
	}))
	defer srv.Close()
	issuer = srv.URL
	upstreamDownPage(t, issuer, srv.Listener.Addr().String())
}

// upstreamDownPage checks that choosing a provider that cannot be used
// shows our page, says nothing internal, and leaves the password form
// working.
func upstreamDownPage(t *testing.T, issuer, addr string) {
	t.Helper()
	e := newUpstreamEnv(t, true, issuer)
	b := e.browser()
	p := b.get(authorizePath())
	m := upstreamFormRE.FindStringSubmatch(p.Body)
	if m == nil || !strings.Contains(p.Body, "Sign in with Acme SSO") || !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("login page with a provider and local users:\n%s", p.Body)
	}
	v := url.Values{}
	for _, hm := range hiddenRE.FindAllStringSubmatch(m[2], -1) {
		v.Set(html.UnescapeString(hm[1]), html.UnescapeString(hm[2]))
	}
	p = b.post(html.UnescapeString(m[1]), v)
	if p.StatusCode != http.StatusBadGateway || !strings.Contains(p.Body, "Acme SSO cannot be reached") || strings.Contains(p.Body, addr) {
		t.Fatalf("status %d:\n%s", p.StatusCode, p.Body)
	}
	if len(e.results) != 0 || signedIn(b) {
		t.Fatal("something was issued")
	}
	// The password form still works.
	if to := b.submit(b.login(authorizePath(), "alice", alicePW).form(t, "action", "approve")).redirectedTo(t); to.Query().Get("code") != "code-for-alice" {
		t.Fatalf("local login: %s", to)
	}
}

func sessionCookie(b *browser, base string) string {
	u, _ := url.Parse(base)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "mcpauth_session" {
			return c.Value
		}
	}
	return ""
}

// FuzzCallbackParams feeds the callback's query parser arbitrary queries:
// it never panics, and what it accepts has one state, exactly one of code
// and error, and bounded, printable error codes.
func FuzzCallbackParams(f *testing.F) {
	f.Add("state=abc&code=xyz")
	f.Add("state=abc&error=access_denied&error_description=no")
	f.Add("state=a&state=b&code=c")
	f.Add("code=x")
	f.Add("state=%00&error=%22%0A")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		c, err := parseCallback(q)
		if err != nil {
			return
		}
		if c.State == "" || (c.Code == "") == (c.Error == "") || len(q["state"]) != 1 || len(c.State) > maxStateLen || len(c.Code) > maxCodeLen {
			t.Fatalf("accepted %q as %+v", raw, c)
		}
		if strings.ContainsFunc(c.Error, func(r rune) bool { return r < 0x20 || r > 0x7e }) || len(c.Error) > 64 {
			t.Fatalf("accepted error code %q", c.Error)
		}
	})
}

// TestUpstreamLoginPageInHeadlessChromium shows the login page with two
// providers and local users in Chromium, signs in through the first one at
// the real provider's own page, and reaches our consent page. The
// screenshots go to $ARTIFACTS_DIR (or $LOGINUI_SCREENSHOTS) when set.
// Skipped when Chromium is not installed, unless CI is set.
func TestUpstreamLoginPageInHeadlessChromium(t *testing.T) {
	chromium := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed")
		}
		t.Skip("chromium is not installed")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	e := newUpstreamEnv(t, true, "")
	second, err := upstream.New(upstream.Config{ID: "partners", Issuer: "https://login.partner.example", ClientID: "mcpauth", ClientSecret: "s",
		RedirectURL: e.srv.URL + "/upstream/partners/callback", Scopes: []string{"openid", "email"}})
	if err != nil {
		t.Fatal(err)
	}
	e.ui.cfg.Upstreams = append(e.ui.cfg.Upstreams, Upstream{Provider: second, Name: "Partner Workspace"})

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(900, 900),
	)...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	type css = chromedp.CSS
	path := authorizePath("redirect_uri", e.srv.URL+"/callback", "test_client_name", "Demo App", "scope", "mcp:tools")
	step("login page", chromedp.Do(ctx, chromedp.Navigate(e.srv.URL+path), chromedp.WaitVisible(css(`#password`))))
	loginText, err := chromedp.Run(ctx, chromedp.Text(css(`main`)))
	step("login text", err)
	buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('form.upstream button').length`))
	step("buttons", err)
	width, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('form.upstream button')).width`))
	step("button style", err)
	loginShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	step("login screenshot", err)
	for _, want := range []string{"Sign in with Acme SSO", "Sign in with Partner Workspace", "or with a local account", "Username", "Password"} {
		if !strings.Contains(loginText, want) {
			t.Errorf("login page lacks %q:\n%s", want, loginText)
		}
	}
	if buttons != 2 || width == "auto" || width == "" {
		t.Errorf("%d provider buttons, width %q", buttons, width)
	}
	step("signing in at the provider", chromedp.Do(ctx,
		chromedp.Click(css(`form.upstream button`)),
		// Our own login page has #username and #password too: wait until
		// the browser has left it for the provider's.
		chromedp.WaitNotPresent(css(`form.upstream`)),
		chromedp.WaitVisible(css(`#username`)),
		chromedp.SendKeys(css(`#username`), "alice"),
		chromedp.SendKeys(css(`#password`), "alice-pw"),
		chromedp.Submit(css(`#password`)),
		chromedp.WaitVisible(css(`button[value=approve]`)),
	))
	consentText, err := chromedp.Run(ctx, chromedp.Text(css(`main`)))
	step("consent text", err)
	consentShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	step("consent screenshot", err)
	if !strings.Contains(consentText, "corp:u-alice") || !strings.Contains(consentText, "Demo App") {
		t.Errorf("consent page after the provider:\n%s", consentText)
	}
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = os.Getenv("LOGINUI_SCREENSHOTS")
	}
	if dir != "" {
		for name, b := range map[string][]byte{"login-upstreams.png": loginShot, "consent-upstream.png": consentShot} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestUpstreamSignInOnTheConsentsPage: the provider's button on the
// /consents page signs the person in and comes back to /consents.
func TestUpstreamSignInOnTheConsentsPage(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	b := e.browser()
	at := e.toProvider(b, "/consents")
	cb, err := e.op.SignIn(b.c, at.String(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	p := b.open(cb)
	if p.StatusCode != http.StatusOK || p.Request.URL.Path != "/consents" || !strings.Contains(p.Body, "Signed in as") || !strings.Contains(p.Body, "corp:u-alice") {
		t.Fatalf("after the callback: %d %s\n%s", p.StatusCode, p.Request.URL, p.Body)
	}
}

// TestUpstreamPromptLogin: prompt=login at our authorization endpoint asks
// the provider for a new authentication (max_age=0) and refuses an answer
// whose auth_time is older than the request.
func TestUpstreamPromptLogin(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	b := e.browser()
	if to := b.submit(b.open(e.signIn(b, authorizePath(), "alice")).form(t, "action", "approve")).redirectedTo(t); to.Query().Get("code") == "" {
		t.Fatalf("first sign-in: %s", to)
	}
	at := e.toProvider(b, authorizePath("prompt", "login", "state", "st-2"))
	if at.Query().Get("max_age") != "0" {
		t.Fatalf("prompt=login sent no max_age=0 to the provider: %s", at)
	}
	cb, err := e.op.SignIn(b.c, at.String(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if to := b.open(cb).redirectedTo(t); to.Query().Get("code") != "code-for-corp:u-alice" {
		t.Fatalf("after a fresh sign-in: %s", to)
	}

	at = e.toProvider(b, authorizePath("prompt", "login", "state", "st-3"))
	cb, err = e.op.SignIn(b.c, at.String(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	e.op.Tamper(func(c map[string]any) (map[string]any, *rsa.PrivateKey, string) {
		c["auth_time"] = time.Now().Add(-time.Hour).Unix()
		return c, nil, ""
	})
	defer e.op.Tamper(nil)
	n := len(e.results)
	if p := b.open(cb); p.StatusCode != http.StatusBadGateway || !strings.Contains(p.Body, "did not") || len(e.results) != n {
		t.Fatalf("an old auth_time after prompt=login: %d\n%s", p.StatusCode, p.Body)
	}
}
