package loginui

import (
	"github.com/mcpauth/mcpauth/as/authflow"

	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/upstream"
)

var volatileRE = regexp.MustCompile(`value="[^"]*"`)

func TestFailedLoginsLookAlike(t *testing.T) {
	h := newHarness(t, nil)
	var bodies []string
	for _, tc := range []struct {
		name, user, pw string
	}{
		{"a wrong password for an argon2id user is refused", "alice", "wrong"},
		{"a wrong password for a bcrypt user is refused", "bob", "wrong"},
		{"an unknown user is refused the same way", "mallory", "wrong"},
		{"a username differing only in case is refused", "Alice", alicePW},
		{"an empty password is refused", "alice", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := h.browser()
			p := b.get(authorizePath())
			got := b.submit(p.form(t, "username", tc.user, "password", tc.pw))
			if got.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", got.StatusCode)
			}
			if !strings.Contains(got.Body, "Incorrect username or password.") {
				t.Fatalf("no generic failure message:\n%s", got.Body)
			}
			if strings.Contains(got.Body, "Allow access?") {
				t.Fatal("consent page after a failed login")
			}
			bodies = append(bodies, volatileRE.ReplaceAllString(got.Body, `value=""`))
		})
	}
	for i := 1; i < len(bodies); i++ {
		if bodies[i] != bodies[0] {
			t.Errorf("failure page %d differs from the first:\n%s\n---\n%s", i, bodies[0], bodies[i])
		}
	}
}

func TestThrottling(t *testing.T) {
	cfg := func(c *Config) {
		c.AccountFreeAttempts = 2
		c.AddressFreeAttempts = 6
		c.LockoutBase = time.Minute
		c.LockoutMax = 10 * time.Minute
	}
	attempt := func(b *browser, user, pw string) page {
		b.h.t.Helper()
		p := b.get("/consents")
		return b.submit(p.form(b.h.t, "username", user, "password", pw))
	}
	for _, user := range []string{"alice", "nobody-here"} {
		t.Run("an account is locked after its free failures and backs off: "+user, func(t *testing.T) {
			h := newHarness(t, cfg)
			b := h.browser()
			for i := range 3 {
				if got := attempt(b, user, "wrong"); got.StatusCode != http.StatusUnauthorized {
					t.Fatalf("failure %d: status %d, want 401", i+1, got.StatusCode)
				}
			}
			// Locked now: even the right password is not checked.
			got := attempt(b, user, alicePW)
			if got.StatusCode != http.StatusTooManyRequests || !strings.Contains(got.Body, "Too many sign-in attempts") {
				t.Fatalf("status %d, want 429", got.StatusCode)
			}
			if ra, _ := strconv.Atoi(got.Header.Get("Retry-After")); ra < 45 || ra > 60 {
				t.Fatalf("Retry-After %q, want about 60", got.Header.Get("Retry-After"))
			}
			h.clock.Advance(61 * time.Second)
			// One more failure doubles the lockout.
			if got := attempt(b, user, "wrong"); got.StatusCode != http.StatusUnauthorized {
				t.Fatalf("after waiting: status %d, want 401", got.StatusCode)
			}
			got = attempt(b, user, "wrong")
			if ra, _ := strconv.Atoi(got.Header.Get("Retry-After")); got.StatusCode != http.StatusTooManyRequests || ra < 100 || ra > 120 {
				t.Fatalf("status %d Retry-After %q, want 429 and about 120", got.StatusCode, got.Header.Get("Retry-After"))
			}
			h.clock.Advance(121 * time.Second)
			got = attempt(b, user, alicePW)
			if user == "alice" && got.StatusCode != http.StatusOK {
				t.Fatalf("the right password after the lockout: status %d, want the consents page", got.StatusCode)
			}
			if user != "alice" && got.StatusCode != http.StatusUnauthorized {
				t.Fatalf("unknown user after the lockout: status %d, want 401", got.StatusCode)
			}
		})
	}
	t.Run("an address spraying many usernames is locked", func(t *testing.T) {
		h := newHarness(t, cfg)
		b := h.browser()
		for i := range 7 {
			if got := attempt(b, "user"+strconv.Itoa(i), "wrong"); got.StatusCode != http.StatusUnauthorized {
				t.Fatalf("failure %d: status %d, want 401", i+1, got.StatusCode)
			}
		}
		if got := attempt(b, "alice", alicePW); got.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("status %d, want 429", got.StatusCode)
		}
	})
	t.Run("a success clears the account's failures", func(t *testing.T) {
		h := newHarness(t, cfg)
		b := h.browser()
		attempt(b, "alice", "wrong")
		attempt(b, "alice", "wrong")
		if got := attempt(b, "alice", alicePW); got.StatusCode != http.StatusOK {
			t.Fatalf("status %d", got.StatusCode)
		}
		b2 := h.browser()
		for i := range 2 {
			if got := attempt(b2, "alice", "wrong"); got.StatusCode != http.StatusUnauthorized {
				t.Fatalf("failure %d after a success: status %d, want 401", i+1, got.StatusCode)
			}
		}
	})
}

func TestFormsNeedTheirTokens(t *testing.T) {
	for _, tc := range []struct {
		name   string
		step   string // which form: login or consent
		tamper func(f form, other form) form
	}{
		{"a login without a CSRF token is refused", stepLogin, func(f, _ form) form { f.Fields.Del("csrf"); return f }},
		{"a login with a wrong CSRF token is refused", stepLogin, func(f, _ form) form { f.Fields.Set("csrf", "AAAA"); return f }},
		{"a login with another session's CSRF token is refused", stepLogin, func(f, o form) form { f.Fields.Set("csrf", o.Fields.Get("csrf")); return f }},
		{"a login without a transaction is refused", stepLogin, func(f, _ form) form { f.Fields.Del("txn"); return f }},
		{"a login with another session's transaction is refused", stepLogin, func(f, o form) form { f.Fields.Set("txn", o.Fields.Get("txn")); return f }},
		{"a consent without a CSRF token is refused", stepConsent, func(f, _ form) form { f.Fields.Del("csrf"); return f }},
		{"a consent with another session's CSRF token is refused", stepConsent, func(f, o form) form { f.Fields.Set("csrf", o.Fields.Get("csrf")); return f }},
		{"a consent with a login page's transaction is refused", stepConsent, func(f, o form) form { f.Fields.Set("txn", o.Fields.Get("txn")); return f }},
		{"a consent without a transaction is refused", stepConsent, func(f, _ form) form { f.Fields.Del("txn"); return f }},
		{"a consent with a garbled transaction is refused", stepConsent, func(f, _ form) form {
			f.Fields.Set("txn", f.Fields.Get("txn")[:len(f.Fields.Get("txn"))-2]+"AA")
			return f
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A harness (and consent store) of its own, so a consent stored
			// by another case cannot change what this one sees.
			h := newHarness(t, nil)
			other := h.browser().get(authorizePath()).form(t)
			b := h.browser()
			var f form
			if tc.step == stepLogin {
				f = b.get(authorizePath()).form(t, "username", "alice", "password", alicePW)
			} else {
				f = b.login(authorizePath(), "alice", alicePW).form(t, "action", "approve")
			}
			got := b.submit(tc.tamper(f, other))
			says := "This sign-in form has expired or was already used."
			if tc.step == stepConsent {
				says = "This form has expired or was already used."
			}
			if got.StatusCode != http.StatusForbidden || !strings.Contains(got.Body, says) {
				t.Fatalf("status %d, want 403 saying %q; body:\n%s", got.StatusCode, says, got.Body)
			}
			if tc.step == stepLogin && b.get("/consents").StatusCode == http.StatusOK && strings.Contains(b.get("/consents").Body, "Signed in as") {
				t.Fatal("logged in despite the refused form")
			}
			if _, err := h.store.GetConsent(context.Background(), "alice", "demo-app", "http://127.0.0.1:8080/mcp"); err == nil {
				t.Fatal("consent stored despite the refused form")
			}
		})
	}
}

func TestFlowTokensAreSingleUse(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.FlowTTL = 5 * time.Minute })
	b := h.browser()
	consent := b.login(authorizePath(), "alice", alicePW)
	f := consent.form(t, "action", "approve")
	b.submit(f).redirectedTo(t)
	if got := b.submit(f); got.StatusCode != http.StatusForbidden {
		t.Fatalf("replayed consent: status %d, want 403", got.StatusCode)
	}
	t.Run("a login form replayed is refused", func(t *testing.T) {
		b := h.browser()
		f := b.get(authorizePath()).form(t, "username", "alice", "password", "wrong")
		b.submit(f)
		f.Fields.Set("password", alicePW)
		if got := b.submit(f); got.StatusCode != http.StatusForbidden {
			t.Fatalf("status %d, want 403", got.StatusCode)
		}
	})
	t.Run("an expired consent form is refused", func(t *testing.T) {
		b := h.browser()
		f := b.login(authorizePath("prompt", "consent"), "alice", alicePW).form(t, "action", "approve")
		h.clock.Advance(6 * time.Minute)
		if got := b.submit(f); got.StatusCode != http.StatusForbidden {
			t.Fatalf("status %d, want 403", got.StatusCode)
		}
	})
}

func TestSessionIsRotatedAtLogin(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	login := b.get(authorizePath())
	srvURL, _ := url.Parse(h.srv.URL)
	before := h.sessionOf(b.c.Jar.Cookies(srvURL))
	if before.ID == "" || before.Subject != "" {
		t.Fatalf("anonymous session %+v", before)
	}
	b.submit(login.form(t, "username", "alice", "password", alicePW))
	after := h.sessionOf(b.c.Jar.Cookies(srvURL))
	if after.Subject != "alice" {
		t.Fatalf("session after login %+v", after)
	}
	if after.ID == before.ID {
		t.Fatal("session id not rotated at login")
	}
	// A fixated (pre-login) cookie planted by an attacker stays anonymous.
	attacker := h.browser()
	attacker.c.Jar.SetCookies(srvURL, []*http.Cookie{{Name: "mcpauth_session", Value: h.encodeSession(before)}})
	if p := attacker.get("/consents"); strings.Contains(p.Body, "Signed in as") {
		t.Fatal("the pre-login session id is logged in")
	}
}

func (h *harness) sessionOf(cs []*http.Cookie) session {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	for _, c := range cs {
		r.AddCookie(c)
	}
	return h.ui.readSession(r)
}

func (h *harness) encodeSession(s session) string {
	v, err := h.ui.cookies.Encode(h.ui.cookie.session, s)
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

func TestLogout(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	b.login("/consents", "alice", alicePW)
	page := b.get("/logout")
	if !strings.Contains(page.Body, "You are signed in as <strong>alice") {
		t.Fatalf("logout page:\n%s", page.Body)
	}
	f := page.form(t)
	noCSRF := form{Action: f.Action, Fields: cloneValues(f.Fields)}
	noCSRF.Fields.Del("csrf")
	if got := b.submit(noCSRF); got.StatusCode != http.StatusForbidden {
		t.Fatalf("logout without CSRF: status %d, want 403", got.StatusCode)
	}
	if p := b.get("/consents"); !strings.Contains(p.Body, "Signed in as") {
		t.Fatal("a refused logout logged out")
	}
	got := b.submit(f)
	if got.StatusCode != http.StatusOK || !strings.Contains(got.Body, "You are signed out.") {
		t.Fatalf("logout: status %d", got.StatusCode)
	}
	// The cookie is deleted at once (Max-Age=0), not left to expire.
	if sc := got.Header.Get("Set-Cookie"); !strings.HasPrefix(sc, "mcpauth_session=;") || !strings.Contains(sc, "; Max-Age=0") {
		t.Fatalf("logout Set-Cookie %q, want the session cookie deleted", sc)
	}
	if p := b.get(authorizePath()); !strings.Contains(p.Body, `name="password"`) {
		t.Fatal("still logged in after logout")
	}
}

func TestHostileClientNamesAreEscaped(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	hostile := `<script>alert(1)</script><img src=x onerror=alert(2)>"Claude`
	path := authorizePath("test_client_name", hostile, "test_cimd_host", "evil.example<b>", "resource", `http://127.0.0.1:8080/mcp"><script>x</script>`)
	for _, p := range []page{b.get(path), b.login(path, "alice", alicePW)} {
		if strings.Contains(p.Body, "<script") || strings.Contains(p.Body, "<img") || strings.Contains(p.Body, "<b>") {
			t.Fatalf("unescaped client-supplied markup:\n%s", p.Body)
		}
		if !strings.Contains(p.Body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatalf("escaped name missing:\n%s", p.Body)
		}
		if !strings.Contains(p.Body, "app.example") {
			t.Fatal("redirect host not shown next to the name")
		}
	}
}

func TestClientNamesAreCleaned(t *testing.T) {
	for _, tc := range []struct {
		name, client, id, want string
	}{
		{"a bidi override is dropped", "\u202eedualC", "x", "edualC"},
		{"zero-width characters are dropped", "Cl\u200baude", "x", "Claude"},
		{"control characters are dropped", "Demo\x00\x1b[31m app", "x", "Demo[31m app"},
		{"invalid UTF-8 is dropped", "Demo\xff app", "x", "Demo app"},
		{"a long name is cut", strings.Repeat("a", 200), "x", strings.Repeat("a", 80) + "…"},
		{"an empty name falls back to the client id", "", "client-1", "client-1"},
		{"a blank name falls back to the client id", "\u200b ", "client-1", "client-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := displayName(&authflow.Transaction{Display: authflow.Display{ClientName: tc.client}, Request: authflow.Request{ClientID: tc.id}}); got != tc.want {
				t.Fatalf("displayName = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConsentPageDetails(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name, redirect, cimd string
		warn                 bool
	}{
		{"a loopback-only client gets a warning", "http://127.0.0.1:7777/callback", "", true},
		{"a web client gets none", "https://app.example/callback", "", false},
		{"a CIMD client shows its document host", "https://app.example/callback", "cimd.example", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := h.browser()
			p := b.login(authorizePath("redirect_uri", tc.redirect, "test_cimd_host", tc.cimd), "alice", alicePW)
			if got := strings.Contains(p.Body, "Local application."); got != tc.warn {
				t.Fatalf("warning shown = %v, want %v", got, tc.warn)
			}
			if tc.cimd != "" && !strings.Contains(p.Body, "Published by</dt><dd><code>"+tc.cimd) {
				t.Fatalf("CIMD host missing:\n%s", p.Body)
			}
			if tc.cimd == "" && strings.Contains(p.Body, "Published by") {
				t.Fatal("CIMD row without a CIMD host")
			}
		})
	}
}

func TestSecurityHeadersOnEveryPage(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	pages := map[string]page{
		"login page":       b.get(authorizePath()),
		"error page":       b.get("/authorize?redirect_uri=%3A"),
		"not found page":   b.get("/nope"),
		"stylesheet":       b.get("/ui/style.css"),
		"missing asset":    b.get("/ui/nope.css"),
		"logout page anon": b.get("/logout"),
		"consents login":   b.get("/consents"),
	}
	pages["consent page"] = b.login(authorizePath(), "alice", alicePW)
	pages["consents page"] = b.get("/consents")
	pages["logout page"] = b.get("/logout")
	pages["bad form"] = b.post(authorizePath(), url.Values{"mcpauth_step": {"bogus"}})
	for name, p := range pages {
		t.Run(name+" carries the headers", func(t *testing.T) {
			want := map[string]string{
				"X-Frame-Options":        "DENY",
				"Referrer-Policy":        "no-referrer",
				"X-Content-Type-Options": "nosniff",
			}
			for k, v := range want {
				if got := p.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			csp := p.Header.Get("Content-Security-Policy")
			for _, d := range []string{"frame-ancestors 'none'", "default-src 'none'", "style-src 'self'"} {
				if !strings.Contains(csp, d) {
					t.Errorf("CSP %q lacks %q", csp, d)
				}
			}
			if strings.Contains(csp, "form-action") {
				t.Errorf("CSP %q has form-action, which blocks the redirect after consent in Chromium", csp)
			}
			if name != "stylesheet" && p.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q, want no-store", p.Header.Get("Cache-Control"))
			}
			if p.StatusCode >= 500 {
				t.Errorf("status %d", p.StatusCode)
			}
			if strings.Contains(p.Body, "<style") || strings.Contains(p.Body, "style=") || strings.Contains(p.Body, "<script") {
				t.Error("inline style or script")
			}
		})
	}
	if ct := pages["stylesheet"].Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/css") {
		t.Errorf("stylesheet Content-Type %q", ct)
	}
}

func TestErrorPage(t *testing.T) {
	for _, tc := range []struct {
		name          string
		status        int
		title, detail string
		wantStatus    int
	}{
		{"an unknown client page is escaped", 400, "Unknown client", `client "<x>" is not registered`, 400},
		{"a non-error status becomes 400", 200, "Odd", "", 400},
		{"an empty title uses the status text", 404, "", "", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			ErrorPage(rec, tc.status, tc.title, tc.detail)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tc.wantStatus)
			}
			body := rec.Body.String()
			if strings.Contains(body, "<x>") {
				t.Fatal("unescaped detail")
			}
			if rec.Header().Get("X-Frame-Options") != "DENY" || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
				t.Fatal("missing anti-framing headers")
			}
			if tc.title == "" && !strings.Contains(body, http.StatusText(tc.wantStatus)) {
				t.Fatal("no default title")
			}
		})
	}
}

func TestConsentsPageListsAndRevokes(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.ClientNames = func(_ context.Context, id string) string {
			if id == "demo-app" {
				return "Demo <App>"
			}
			return ""
		}
	})
	ctx := context.Background()
	now := time.Now()
	for _, c := range []storage.Consent{
		{Subject: "alice", ClientID: "demo-app", Resource: "http://127.0.0.1:8080/mcp", Scopes: []string{"mcp:tools"}, GrantedAt: now},
		{Subject: "alice", ClientID: "other-app", Resource: "http://127.0.0.1:8080/mcp", Scopes: []string{"mcp:admin"}, GrantedAt: now},
		{Subject: "alice", ClientID: "old-app", Resource: "http://127.0.0.1:8080/mcp", GrantedAt: now.Add(-48 * time.Hour), ExpiresAt: now.Add(-time.Hour)},
		{Subject: "bob", ClientID: "bobs-app", Resource: "http://127.0.0.1:8080/mcp", GrantedAt: now},
	} {
		if err := h.store.PutConsent(ctx, &c); err != nil {
			t.Fatal(err)
		}
	}
	b := h.browser()
	list := b.login("/consents", "alice", alicePW)
	if list.StatusCode != http.StatusOK {
		t.Fatalf("status %d", list.StatusCode)
	}
	for _, want := range []string{"Demo &lt;App&gt;", "other-app", "mcp:admin"} {
		if !strings.Contains(list.Body, want) {
			t.Errorf("list lacks %q", want)
		}
	}
	for _, unwanted := range []string{"bobs-app", "old-app"} {
		if strings.Contains(list.Body, unwanted) {
			t.Errorf("list shows %q", unwanted)
		}
	}
	var forms []form
	for _, f := range list.forms() {
		if f.Fields.Get(stepField) == "revoke" {
			forms = append(forms, f)
		}
	}
	if len(forms) != 2 {
		t.Fatalf("%d revoke forms, want 2", len(forms))
	}
	var revoke form
	for _, f := range forms {
		if f.Fields.Get("client_id") == "other-app" {
			revoke = f
		}
	}
	bad := form{Action: revoke.Action, Fields: cloneValues(revoke.Fields)}
	bad.Fields.Set("csrf", "forged")
	if got := b.submit(bad); got.StatusCode != http.StatusForbidden {
		t.Fatalf("revoke with a forged CSRF token: status %d, want 403", got.StatusCode)
	}
	// Another person's form cannot revoke alice's consent either.
	mallory := h.browser()
	if got := mallory.submit(revoke); got.StatusCode == http.StatusSeeOther || strings.Contains(got.Body, "Applications with access") {
		t.Fatalf("anonymous revoke: status %d", got.StatusCode)
	}
	after := b.submit(revoke)
	if after.StatusCode != http.StatusOK || strings.Contains(after.Body, "other-app") || !strings.Contains(after.Body, "demo-app") {
		t.Fatalf("after revoke: status %d:\n%s", after.StatusCode, after.Body)
	}
	if _, err := h.store.GetConsent(ctx, "alice", "other-app", "http://127.0.0.1:8080/mcp"); err == nil {
		t.Fatal("consent still stored")
	}
	if _, err := h.store.GetConsent(ctx, "bob", "bobs-app", "http://127.0.0.1:8080/mcp"); err != nil {
		t.Fatal("bob's consent was touched")
	}
}

func TestSecureCookies(t *testing.T) {
	for _, tc := range []struct {
		name, base, wantName, wantPath string
		secure                         bool
	}{
		{"https issuers get __Host- cookies", "/auth", "__Host-mcpauth_session", "/", true},
		{"http issuers with a path scope the cookie to it", "/auth", "mcpauth_session", "/auth", false},
		{"http issuers without a path use /", "", "mcpauth_session", "/", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Secure = tc.secure; c.BasePath = tc.base })
			rec := httptest.NewRecorder()
			h.serveAuthorize(rec, httptest.NewRequest(http.MethodGet, authorizePath(), nil))
			cs := rec.Result().Cookies()
			if len(cs) != 1 {
				t.Fatalf("%d cookies", len(cs))
			}
			c := cs[0]
			if c.Name != tc.wantName || c.Path != tc.wantPath || c.Secure != tc.secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Domain != "" {
				t.Fatalf("cookie %+v", c)
			}
			if !strings.Contains(rec.Body.String(), `href="`+tc.base+`/ui/style.css"`) {
				t.Fatal("stylesheet link not under BasePath")
			}
		})
	}
}

// idOnly is a provider that New only asks for its id.
type idOnly string

func (p idOnly) ID() string { return string(p) }
func (idOnly) AuthCodeURL(context.Context, string, string, string, ...string) (string, error) {
	return "", errors.New("not used")
}
func (idOnly) CheckResponseIssuer(context.Context, string) error { return errors.New("not used") }
func (idOnly) Exchange(context.Context, string, string, string) (*upstream.Identity, error) {
	return nil, errors.New("not used")
}
func (idOnly) Check(*upstream.Identity) error      { return nil }
func (idOnly) Capped() bool                        { return false }
func (idOnly) Scopes(map[string][]string) []string { return nil }

func TestNewRejectsBadConfig(t *testing.T) {
	h := newHarness(t, nil)
	good := func() Config {
		return Config{Consents: h.store, JTIs: h.store, Secret: make([]byte, 32), Users: testUsers(t)}
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"a short secret is refused", func(c *Config) { c.Secret = c.Secret[:31] }},
		{"a missing consent store is refused", func(c *Config) { c.Consents = nil }},
		{"a missing JTI store is refused", func(c *Config) { c.JTIs = nil }},
		{"a base path with a trailing slash is refused", func(c *Config) { c.BasePath = "/auth/" }},
		{"a relative base path is refused", func(c *Config) { c.BasePath = "auth" }},
		{"a malformed password hash is refused", func(c *Config) { c.Users = []User{{Username: "x", PasswordHash: "plain"}} }},
		{"a duplicate user is refused", func(c *Config) { c.Users = append(c.Users, c.Users[0]) }},
		{"an empty username is refused", func(c *Config) { c.Users = []User{{PasswordHash: aliceHash}} }},
		{"an upstream without a provider is refused", func(c *Config) { c.Upstreams, c.UpstreamUsers = []Upstream{{Name: "SSO"}}, h.store }},
		{"an upstream with an empty id is refused", func(c *Config) { c.Upstreams, c.UpstreamUsers = []Upstream{{Provider: idOnly("")}}, h.store }},
		{"an upstream id with a colon is refused", func(c *Config) { c.Upstreams, c.UpstreamUsers = []Upstream{{Provider: idOnly("corp:x")}}, h.store }},
		{"an upstream id with a slash is refused", func(c *Config) { c.Upstreams, c.UpstreamUsers = []Upstream{{Provider: idOnly("corp/x")}}, h.store }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.mod(&c)
			if _, err := New(c); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
	c := good()
	c.Upstreams, c.UpstreamUsers = []Upstream{{Provider: idOnly("corp")}}, h.store
	if _, err := New(c); err != nil {
		t.Fatalf("an upstream with a good id: %v", err)
	}
}

func TestHostileRequestsNeverFail500(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name, path, ctype, body string
		want                    int
	}{
		{"a duplicated step field is a bad request", LoginPath, "application/x-www-form-urlencoded", "mcpauth_step=login&mcpauth_step=consent", 400},
		{"an unknown step is a bad request", LoginPath, "application/x-www-form-urlencoded", "mcpauth_step=admin", 400},
		{"another step's field is a bad request", ConsentPath, "application/x-www-form-urlencoded", "mcpauth_step=login", 400},
		{"broken percent-encoding is a bad request", LoginPath, "application/x-www-form-urlencoded", "mcpauth_step=%zz", 400},
		{"a JSON body is a bad request", LoginPath, "application/json", `{"mcpauth_step":"login"}`, 400},
		{"an oversized body is a bad request", LoginPath, "application/x-www-form-urlencoded", "x=" + strings.Repeat("a", 64<<10), 400},
		{"an overlong username is a bad request", LoginPath, "application/x-www-form-urlencoded", "mcpauth_step=login&username=" + strings.Repeat("a", 300), 400},
		{"an overlong transaction is a bad request", ConsentPath, "application/x-www-form-urlencoded", "txn=" + strings.Repeat("a", 13<<10), 400},
		{"a garbage transaction is refused", LoginPath, "application/x-www-form-urlencoded", "mcpauth_step=login&csrf=x&txn=%00%ff", 403},
		{"a consent without a session is refused", ConsentPath, "application/x-www-form-urlencoded", "mcpauth_step=consent&action=approve", 403},
		{"a GET of a step is not allowed", ConsentPath + "?txn=x", "", "", 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.body == "" {
				method = http.MethodGet
			}
			req, _ := http.NewRequest(method, h.srv.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.ctype)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func TestNewWarnsAboutWeakPasswordHashes(t *testing.T) {
	h := newHarness(t, nil)
	weak, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	strong, err := password.Hash("pw")
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	_, err = New(Config{Consents: h.store, JTIs: h.store, Secret: make([]byte, 32),
		Users:  []User{{Username: "old-user", PasswordHash: string(weak)}, {Username: "new-user", PasswordHash: strong}},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "weak password hash") || !strings.Contains(out, "old-user") {
		t.Errorf("no warning naming old-user: %q", out)
	}
	if strings.Contains(out, "new-user") || strings.Contains(out, string(weak)) {
		t.Errorf("warning names the strong user or prints a hash: %q", out)
	}
}
