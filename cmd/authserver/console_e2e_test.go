package main

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/securecookie"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

const bobPW = "bob-password-for-tests"

// consoleConfig is adminConfig with bob, a person who is not an
// administrator, and alice in admin.people.
func consoleConfig(t *testing.T, issuer, listen, adminListen, storage string) string {
	t.Helper()
	hash, err := password.Hash(bobPW)
	if err != nil {
		t.Fatal(err)
	}
	cfg := adminConfig(t, issuer, listen, adminListen, storage, "ops-bot")
	cfg = strings.Replace(cfg, "admin:\n", fmt.Sprintf("  - username: bob\n    password_hash: %q\nadmin:\n  people: [alice]\n", hash), 1)
	return cfg
}

// agentGrant is a grant alice gives demo-app through the login and
// consent pages, redeemed with golang.org/x/oauth2: the agent whose
// access the console revokes.
func agentGrant(t *testing.T, issuer string) (*oauth2.Config, *oauth2.Token) {
	t.Helper()
	code := authorizationCode(t, issuer, issuer, appRedirect, "alice", alicePW)
	conf := &oauth2.Config{ClientID: "demo-app", RedirectURL: appRedirect,
		Endpoint: oauth2.Endpoint{TokenURL: issuer + "/token", AuthStyle: oauth2.AuthStyleInParams}}
	tok, err := conf.Exchange(context.Background(), code.Code, oauth2.VerifierOption(code.Verifier))
	if err != nil || tok.RefreshToken == "" {
		t.Fatalf("redeeming the agent's code: %v %+v", err, tok)
	}
	return conf, tok
}

// refresh refreshes tok with the client as the agent would.
func refresh(conf *oauth2.Config, tok *oauth2.Token) (*oauth2.Token, error) {
	old := *tok
	old.Expiry = time.Now().Add(-time.Hour)
	return conf.TokenSource(context.Background(), &old).Token()
}

var (
	formRe   = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)"[^>]*>(.*?)</form>`)
	hiddenRe = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
)

// postForm finds the form of page whose body contains marker, fills its
// hidden fields and extra, and posts it.
func postForm(c *http.Client, base *url.URL, page, marker string, extra url.Values) (*http.Response, string, error) {
	for _, m := range formRe.FindAllStringSubmatch(page, -1) {
		if !strings.Contains(m[2], marker) {
			continue
		}
		form := url.Values{}
		for _, h := range hiddenRe.FindAllStringSubmatch(m[2], -1) {
			form.Add(html.UnescapeString(h[1]), html.UnescapeString(h[2]))
		}
		for k, v := range extra {
			form[k] = v
		}
		action, err := base.Parse(html.UnescapeString(m[1]))
		if err != nil {
			return nil, "", err
		}
		return readPage(c.PostForm(action.String(), form))
	}
	return nil, "", fmt.Errorf("no form with %q on the page:\n%s", marker, page)
}

func readPage(resp *http.Response, err error) (*http.Response, string, error) {
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// consoleSignIn signs user in to the console at consoleURL with a plain
// HTTP client (a cookie jar, forms posted as a browser without script
// would): the sign-in link, the server's login and consent pages, the
// callback. It returns the client and the last page.
func consoleSignIn(t *testing.T, consoleURL, user, pw string) (*http.Client, *http.Response, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	resp, page, err := readPage(c.Get(consoleURL + "/signin"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, `name="password"`) {
		t.Fatalf("no login page after the sign-in link: %d\n%s", resp.StatusCode, page)
	}
	resp, page, err = postForm(c, resp.Request.URL, page, `name="password"`, url.Values{"username": {user}, "password": {pw}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page, `value="approve"`) {
		resp, page, err = postForm(c, resp.Request.URL, page, `value="approve"`, url.Values{"action": {"approve"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return c, resp, page
}

// csrfOf is the CSRF token in a console page's forms.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	return m[1]
}

// consolePages are the GET pages of the console, for a person, a client
// and a grant filter that exist.
func consolePages(consoleURL, person, client string) []string {
	return []string{
		consoleURL + "/",
		consoleURL + "/clients",
		consoleURL + "/clients?q=" + url.QueryEscape(client[:3]),
		consoleURL + "/client?id=" + url.QueryEscape(client),
		consoleURL + "/clients/new",
		consoleURL + "/people",
		consoleURL + "/person?sub=" + url.QueryEscape(person),
		consoleURL + "/grants",
		consoleURL + "/grants?client=" + url.QueryEscape(client),
		consoleURL + "/approvals",
		consoleURL + "/approvals?user=" + url.QueryEscape(person),
		consoleURL + "/connections",
		consoleURL + "/connections?user=" + url.QueryEscape(person),
		consoleURL + "/keys",
		consoleURL + "/audit",
	}
}

// checkPageHeaders: no framing, no caching, no script.
func checkPageHeaders(t *testing.T, u string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "script-src") ||
		!strings.Contains(csp, "default-src 'none'") || h.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: headers %v", u, h)
	}
}

func artifactDir(t *testing.T) string {
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startConsole starts a server with the console on SQLite.
func startConsole(t *testing.T) (issuer, consoleURL string, p *proc) {
	t.Helper()
	dir := t.TempDir()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	issuer = "http://" + addr
	cfgPath := writeConfig(t, dir, consoleConfig(t, issuer, addr, adminAddr, "sqlite:"+filepath.Join(dir, "a.db")))
	p = start(t, dir, issuer, testEnv, "--config", cfgPath)
	return issuer, "http://" + adminAddr + "/console", p
}

var grantIDRe = regexp.MustCompile(`name="grant" value="([^"]+)"`)

// The console over plain HTTP, as a browser without script uses it: a
// person not in admin.people gets the "not permitted" page and no
// session; alice signs in, every page answers without a secret, token or
// hash, cannot be framed, and every form refuses a missing or foreign
// CSRF token; revoking the agent's grant makes its next refresh fail.
func TestConsoleOverHTTP(t *testing.T) {
	issuer, consoleURL, p := startConsole(t)
	agent, tok := agentGrant(t, issuer)

	// bob: the server's "not permitted" page, no console session.
	bobC, resp, page := consoleSignIn(t, consoleURL, "bob", bobPW)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "Access not permitted") || !strings.Contains(page, "admin") {
		t.Fatalf("bob: %d\n%s", resp.StatusCode, page)
	}
	if resp, page, _ := readPage(bobC.Get(consoleURL + "/")); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, `id="signin"`) {
		t.Fatalf("bob has a console session: %d\n%s", resp.StatusCode, page)
	}

	alice, resp, page := consoleSignIn(t, consoleURL, "alice", alicePW)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<h1 id="title">Overview</h1>`) {
		t.Fatalf("alice: %d %s\n%s", resp.StatusCode, resp.Request.URL, page)
	}
	csrf := csrfOf(t, page)
	other, _, otherPage := consoleSignIn(t, consoleURL, "alice", alicePW)
	foreign := csrfOf(t, otherPage)
	if foreign == csrf {
		t.Fatal("two sessions share a CSRF token")
	}

	secrets := map[string]string{
		"server secret": testSecret, "console client secret": consoleSecret([]byte(testSecret)),
		"access token": tok.AccessToken, "refresh token": tok.RefreshToken, "ops-bot secret": opsSecret,
	}
	u, _ := url.Parse(consoleURL + "/")
	for _, ck := range alice.Jar.Cookies(u) {
		secrets["cookie "+ck.Name] = ck.Value
	}
	held := consoleCookie(t, alice, consoleURL)
	secrets["console's access token"], secrets["console's refresh token"] = held.Access, held.Refresh
	if len(secrets) < 8 || held.Access == "" || held.Refresh == "" {
		t.Fatalf("the secrets to look for: %d", len(secrets))
	}
	var grantID string
	for _, pu := range consolePages(consoleURL, "alice", "demo-app") {
		resp, page, err := readPage(alice.Get(pu))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %d\n%s", pu, err, resp.StatusCode, page)
		}
		checkPageHeaders(t, pu, resp.Header)
		for what, v := range secrets {
			if strings.Contains(page, v) {
				t.Errorf("%s shows the %s", pu, what)
			}
		}
		if m := regexp.MustCompile(`\$2[aby]\$|\$argon2|pbkdf2`).FindString(page); m != "" {
			t.Errorf("%s shows a password hash (%s)", pu, m)
		}
		if m := grantIDRe.FindStringSubmatch(page); m != nil && strings.Contains(pu, "grants?client=demo-app") {
			grantID = m[1]
		}
	}
	if grantID == "" {
		t.Fatal("the agent's grant is not listed")
	}

	// Bad input is a 400 page, never a storage error.
	for _, pu := range []string{"/people?q=%00", "/clients?after=%ff", "/client?id=" + strings.Repeat("x", 1025), "/audit?before=-1", "/grants?user=a%0Ab", "/approvals?user=%00", "/approvals?after=%ff", "/connections?user=a%0Ab"} {
		if resp, page, _ := readPage(alice.Get(consoleURL + pu)); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d\n%s", pu, resp.StatusCode, page)
		}
	}

	// Every form refuses a missing or foreign CSRF token, and changes nothing.
	actions := map[string]url.Values{
		"/signout":            {},
		"/clients/new":        {"client_name": {"X"}, "redirect_uris": {"https://x.example/cb"}},
		"/client/delete":      {"id": {"demo-app"}, "confirm": {"yes"}},
		"/person/disable":     {"sub": {"alice"}, "confirm": {"yes"}},
		"/person/enable":      {"sub": {"bob"}},
		"/grants/revoke":      {"grant": {grantID}, "confirm": {"yes"}},
		"/keys/rotate":        {},
		"/keys/retire":        {"kid": {"x"}},
		"/keys/prune":         {"unloadable": {"on"}},
		"/approvals/revoke":   {"id": {"x"}, "confirm": {"yes"}},
		"/connections/revoke": {"sub": {"alice"}, "connection": {"x"}, "confirm": {"yes"}},
	}
	for path, form := range actions {
		for _, token := range []string{"", foreign} {
			f := url.Values{}
			for k, v := range form {
				f[k] = v
			}
			if token != "" {
				f.Set("csrf", token)
			}
			resp, page, err := readPage(alice.PostForm(consoleURL+path, f))
			if err != nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "CSRF") {
				t.Errorf("POST %s with csrf %q: %v %d\n%s", path, token, err, resp.StatusCode, page)
			}
		}
	}
	if strings.Contains(p.stderr.String(), `"event":"admin.`) || strings.Contains(p.stderr.String(), "event=admin.") {
		t.Fatalf("a refused form changed something:\n%s", p.stderr)
	}
	if _, err := refresh(agent, tok); err != nil {
		t.Fatalf("the agent cannot refresh before the revocation: %v", err)
	}
	// Every other action, through its form, as a person would.
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, page, err := readPage(alice.Get(consoleURL + path))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %d\n%s", path, err, resp.StatusCode, page)
		}
		return resp, page
	}
	submit := func(resp *http.Response, page, marker string, extra url.Values, status int, want string) (*http.Response, string) {
		t.Helper()
		resp, page, err := postForm(alice, resp.Request.URL, page, marker, extra)
		if err != nil || resp.StatusCode != status || !strings.Contains(page, want) {
			t.Fatalf("form %s: %v %d, want %d and %q\n%s", marker, err, resp.StatusCode, status, want, page)
		}
		return resp, page
	}
	resp, page = get("/clients/new")
	_, page = submit(resp, page, `id="create"`, url.Values{"client_name": {"Reports bot"}, "redirect_uris": {"https://reports.example/cb"}}, http.StatusCreated, `id="client_secret"`)
	newID := regexp.MustCompile(`<code id="client_id">([^<]+)</code>`).FindStringSubmatch(page)[1]
	resp, page = get("/client?id=" + url.QueryEscape(newID))
	resp, page = submit(resp, page, `id="delete"`, nil, http.StatusOK, `id="confirm"`)
	submit(resp, page, `id="confirm"`, nil, http.StatusOK, "Deleted client "+newID+".")
	resp, page = get("/clients/new")
	submit(resp, page, `id="create"`, url.Values{"client_name": {"Bad"}, "redirect_uris": {"https://x.example/cb#fragment"}}, http.StatusBadRequest, `role="alert"`)
	resp, page = get("/person?sub=bob")
	resp, page = submit(resp, page, `id="disable"`, nil, http.StatusOK, `id="confirm"`)
	submit(resp, page, `id="confirm"`, nil, http.StatusOK, "Disabled bob")
	resp, page = get("/person?sub=bob")
	submit(resp, page, `id="enable"`, nil, http.StatusOK, "Enabled bob")
	resp, page = get("/keys")
	submit(resp, page, `id="rotate"`, nil, http.StatusOK, "signs from now on")
	resp, page = get("/keys")
	submit(resp, page, `id="prune"`, nil, http.StatusOK, "Deleted 0 key(s)")
	for _, ev := range []string{"admin.client.created", "admin.client.deleted", "admin.user.disabled", "admin.user.enabled", "admin.key.rotated"} {
		if !regexp.MustCompile(`event=` + regexp.QuoteMeta(ev) + `[^\n]*admin_client=mcpauth-console admin_subject=alice`).MatchString(p.stderr.String()) {
			t.Errorf("no audit line %s by alice through the console", ev)
		}
	}

	// The second session ends with its sign-in session at the server:
	// logging out there ends it, and only it.
	resp, page, err := readPage(other.Get(issuer + "/logout"))
	if err != nil {
		t.Fatal(err)
	}
	if _, page, err = postForm(other, resp.Request.URL, page, `Sign out`, nil); err != nil {
		t.Fatalf("logging out at the server: %v\n%s", err, page)
	}
	if resp, page, _ := readPage(other.Get(consoleURL + "/")); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, `id="signin"`) {
		t.Fatalf("the console session outlived the server's: %d\n%s", resp.StatusCode, page)
	}
	if resp, _, _ := readPage(alice.Get(consoleURL + "/")); resp.StatusCode != http.StatusOK {
		t.Fatalf("logging out another session ended this one: %d", resp.StatusCode)
	}

	// Revoke the agent's grant: select it, confirm.
	resp, page, err = readPage(alice.Get(consoleURL + "/grants?client=demo-app"))
	if err != nil {
		t.Fatal(err)
	}
	resp, page, err = postForm(alice, resp.Request.URL, page, `id="revoke-selected"`, url.Values{"grant": {grantID}})
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="confirm"`) || !strings.Contains(page, grantID) {
		t.Fatalf("revoke: %v %d\n%s", err, resp.StatusCode, page)
	}
	if _, err := refresh(agent, tok); err != nil {
		t.Fatalf("the agent's grant was revoked before the confirmation: %v", err)
	}
	resp, page, err = postForm(alice, resp.Request.URL, page, `id="confirm"`, nil)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(page, "Revoked 1 grant(s).") {
		t.Fatalf("confirm: %v %d\n%s", err, resp.StatusCode, page)
	}
	if _, err := refresh(agent, tok); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("the agent refreshed after the revocation: %v", err)
	}
	if !strings.Contains(p.stderr.String(), "admin_subject=alice") && !strings.Contains(p.stderr.String(), `"admin_subject":"alice"`) {
		t.Fatalf("the revocation is not audited under alice:\n%s", p.stderr)
	}
	auditShows(t, alice, consoleURL, "alice")

	// Revoking the console's own grant ends the console session.
	form := url.Values{"csrf": {csrf}, "all": {"yes"}, "user": {"alice"}, "client": {"mcpauth-console"}, "confirm": {"yes"}}
	if resp, page, err := readPage(alice.PostForm(consoleURL+"/grants/revoke", form)); err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(page, "Revoked 2 grant(s).") { // one per sign-in
		t.Fatalf("revoking the console's grant: %v %d\n%s", err, resp.StatusCode, page)
	}
	if resp, page, _ := readPage(alice.Get(consoleURL + "/")); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, `id="signin"`) {
		t.Fatalf("the console session outlived its grant: %d\n%s", resp.StatusCode, page)
	}
}

// auditShows waits for the console's audit page to list the revocation
// of demo-app's grant done by admin.
func auditShows(t *testing.T, c *http.Client, consoleURL, admin string) {
	t.Helper()
	row := regexp.MustCompile(`<code>admin\.grants\.revoked</code></td><td><a [^>]*>alice</a></td>\s*<td><a [^>]*>demo-app</a></td><td>` + regexp.QuoteMeta(admin) + `</td>`)
	var page string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var err error
		if _, page, err = readPage(c.Get(consoleURL + "/audit?event=admin.&client=demo-app")); err != nil {
			t.Fatal(err)
		}
		if row.MatchString(page) {
			return
		}
	}
	t.Fatalf("the audit page does not list the revocation by %s:\n%s", admin, page)
}

// Two instances on one PostgreSQL database, the console on the first:
// alice signs in there and revokes the grant the agent got from the
// second instance, whose next refresh there fails; the audit page of the
// first lists the revocation, and the charts count what both issued.
func TestConsoleOverTwoInstancesOnPostgres(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	var mu sync.Mutex
	consoles := map[string]string{}
	procs := startMany(t, 2, func(issuer, listen string) string {
		adminAddr := freeAddr(t)
		mu.Lock()
		consoles[issuer] = "http://" + adminAddr + "/console"
		mu.Unlock()
		return consoleConfig(t, issuer, listen, adminAddr, dsn)
	})
	a, b := procs[0], procs[1]
	consoleURL := consoles[a.issuer]
	agent, tok := agentGrant(t, b.issuer)

	alice, resp, page := consoleSignIn(t, consoleURL, "alice", alicePW)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<h1 id="title">Overview</h1>`) {
		t.Fatalf("alice at the first instance's console: %d\n%s", resp.StatusCode, page)
	}
	if bobC, resp, page := consoleSignIn(t, consoleURL, "bob", bobPW); resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "Access not permitted") {
		t.Fatalf("bob: %d\n%s", resp.StatusCode, page)
	} else if resp, _, _ := readPage(bobC.Get(consoleURL + "/")); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bob has a console session: %d", resp.StatusCode)
	}

	resp, page, err := readPage(alice.Get(consoleURL + "/grants?client=demo-app"))
	if err != nil {
		t.Fatal(err)
	}
	m := grantIDRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the grant made at the second instance is not listed at the first:\n%s", page)
	}
	resp, page, err = postForm(alice, resp.Request.URL, page, `id="revoke-selected"`, url.Values{"grant": {m[1]}})
	if err != nil || !strings.Contains(page, `id="confirm"`) {
		t.Fatalf("revoke: %v\n%s", err, page)
	}
	if _, page, err = postForm(alice, resp.Request.URL, page, `id="confirm"`, nil); err != nil || !strings.Contains(page, "Revoked 1 grant(s).") {
		t.Fatalf("confirm: %v\n%s", err, page)
	}
	if _, err := refresh(agent, tok); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("the agent refreshed at the second instance after the revocation: %v", err)
	}
	auditShows(t, alice, consoleURL, "alice")

	// The second instance's tokens are counted in the first's charts.
	for deadline := time.Now().Add(25 * time.Second); ; time.Sleep(time.Second) {
		_, page, err := readPage(alice.Get(consoleURL + "/"))
		if err != nil {
			t.Fatal(err)
		}
		caption := regexp.MustCompile(`Tokens issued <span class="muted small">\((\d+) in 24 h`).FindStringSubmatch(page)
		// The agent's code and the console's sign-in at least.
		if caption != nil && caption[1] != "0" && caption[1] != "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the charts do not count both instances' tokens: %v", caption)
		}
	}
}

// consoleSession is what the console's cookie holds.
type consoleSession struct {
	Subject string `json:"sub"`
	Access  string `json:"at"`
	Refresh string `json:"rt"`
}

// consoleCookie opens the console's session cookie of c with the keys
// derived from the test secret.
func consoleCookie(t *testing.T, c *http.Client, consoleURL string) consoleSession {
	t.Helper()
	u, _ := url.Parse(consoleURL + "/")
	mac, _ := hkdf.Key(sha256.New, []byte(testSecret), nil, "mcpauth console cookie mac", 32)
	enc, _ := hkdf.Key(sha256.New, []byte(testSecret), nil, "mcpauth console cookie encryption", 32)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "mcpauth_console" {
			var s consoleSession
			if err := securecookie.New(mac, enc).Decode(ck.Name, ck.Value, &s); err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	t.Fatal("no console cookie")
	return consoleSession{}
}

// postTokenAs posts a token request authenticated as a confidential client.
func postTokenAs(issuer, id, secret string, form url.Values) (int, map[string]any, error) {
	req, _ := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(id, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body map[string]any
	err = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body, err
}

// A person taken out of admin.people (a reload) loses the console at
// their next request, and cannot sign in again.
func TestConsoleSessionEndsWhenThePersonLeavesAdminPeople(t *testing.T) {
	dir := t.TempDir()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	issuer := "http://" + addr
	cfg := consoleConfig(t, issuer, addr, adminAddr, "sqlite:"+filepath.Join(dir, "a.db"))
	p := start(t, dir, issuer, testEnv, "--config", writeConfig(t, dir, cfg))
	consoleURL := "http://" + adminAddr + "/console"
	alice, resp, page := consoleSignIn(t, consoleURL, "alice", alicePW)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<h1 id="title">Overview</h1>`) {
		t.Fatalf("alice: %d\n%s", resp.StatusCode, page)
	}
	held := consoleCookie(t, alice, consoleURL)
	if held.Refresh == "" || held.Access == "" || held.Subject != "alice" {
		t.Fatalf("the console's session: %+v", held)
	}
	writeConfig(t, dir, strings.Replace(cfg, "people: [alice]", "people: [bob]", 1))
	hupAndWait(t, p, 1)
	// The token endpoint itself refuses to refresh her admin grant.
	st, body, err := postTokenAs(issuer, "mcpauth-console", consoleSecret([]byte(testSecret)), url.Values{"grant_type": {"refresh_token"}, "refresh_token": {held.Refresh}})
	if err != nil || st != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("refreshing alice's admin grant after she left admin.people: %d %v %v", st, body, err)
	}
	if resp, page, _ := readPage(alice.Get(consoleURL + "/")); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, `id="signin"`) {
		t.Fatalf("alice kept the console after leaving admin.people: %d\n%s", resp.StatusCode, page)
	}
	if _, resp, page := consoleSignIn(t, consoleURL, "alice", alicePW); resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "Access not permitted") {
		t.Fatalf("alice signed in again: %d\n%s", resp.StatusCode, page)
	}
	if _, resp, page := consoleSignIn(t, consoleURL, "bob", bobPW); resp.StatusCode != http.StatusOK || !strings.Contains(page, `<span class="who">bob</span>`) {
		t.Fatalf("bob, now in admin.people: %d\n%s", resp.StatusCode, page)
	}
}
