package as

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/storage"
)

// TestTheRequestIsParsedOncePerAuthorization: a sign-in followed by consent
// is five requests (the authorization request, the login form, the return,
// the consent form, the return) and fosite parses the authorization request
// once, at the first.
func TestTheRequestIsParsedOncePerAuthorization(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	verifier := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("state-12345678", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI))
	before := h.as.authorizeParses.Load()
	b := h.browser()
	var pages []string
	b.c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		pages = append(pages, req.URL.Path)
		if !strings.HasPrefix(req.URL.String(), h.issuer) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	login := b.get(authURL)
	consent := b.submit(login, "username", "alice", "password", alicePW)
	if !strings.Contains(consent.Body, `value="approve"`) {
		t.Fatalf("no consent page after the login: %d", consent.StatusCode)
	}
	u := redirected(t, b.submit(consent, "action", "approve"))
	if got := h.as.authorizeParses.Load() - before; got != 1 {
		t.Fatalf("fosite parsed the authorization request %d times, want 1", got)
	}
	if want := []string{"/authorize/continue", "/authorize/continue", "/callback"}; strings.Join(pages, " ") != strings.Join(want, " ") {
		t.Fatalf("redirects %q, want %q", pages, want)
	}
	tok, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("the code does not redeem: %v", err)
	}
	// A person with a session and a remembered consent: one request, one parse.
	before = h.as.authorizeParses.Load()
	if u := b.authorize(conf.AuthCodeURL("state-22345678", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI))); u.Query().Get("code") == "" {
		t.Fatalf("no code: %s", u)
	}
	if got := h.as.authorizeParses.Load() - before; got != 1 {
		t.Fatalf("a remembered consent: %d parses, want 1", got)
	}
}

// TestMaxAge: max_age (OpenID Connect Core §3.1.2.1) asks a person whose
// sign-in is older than that to sign in again; a newer one goes through.
func TestMaxAge(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	verifier := oauth2.GenerateVerifier()
	at := func(maxAge string) string {
		return conf.AuthCodeURL("state-12345678", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI), oauth2.SetAuthURLParam("max_age", maxAge))
	}
	b := h.browser()
	if u := b.authorize(at("3600")); u.Query().Get("code") == "" {
		t.Fatalf("first authorization: %s", u)
	}
	if p := b.get(at("3600")); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("a sign-in within max_age: status %d, want a code", p.StatusCode)
	}
	p := b.get(at("0"))
	if !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("max_age=0: status %d, want the login page", p.StatusCode)
	}
	if u := redirected(t, b.submit(p, "username", "alice", "password", alicePW)); u.Query().Get("code") == "" || u.Query().Get("iss") != h.issuer {
		t.Fatalf("after signing in again: %s", u)
	}
}

// TestAReturnIsUsableOnce: the return to a transaction after a step spends
// that step; the same URL again (a reload, a copied link) is refused, and
// so is it in another browser.
func TestAReturnIsUsableOnce(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("demo-app", "")
	authURL := conf.AuthCodeURL("state-12345678", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("resource", mcpURI))
	b := h.browser()
	b.c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	login := b.get(authURL)
	back := b.submit(login, "username", "alice", "password", alicePW)
	loc := back.Header.Get("Location")
	if back.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/authorize/continue?txn=") {
		t.Fatalf("login answered %d to %q", back.StatusCode, loc)
	}
	other := h.browser()
	if p := other.get(h.issuer + loc); p.StatusCode != http.StatusBadRequest {
		t.Fatalf("the return in another browser: status %d, want 400", p.StatusCode)
	}
	if p := b.get(h.issuer + loc); !strings.Contains(p.Body, `value="approve"`) {
		t.Fatalf("the return: status %d, want the consent page", p.StatusCode)
	}
	if p := b.get(h.issuer + loc); p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "start again from the application") {
		t.Fatalf("the return again: status %d, want 400", p.StatusCode)
	}
}

// TestAnIssuerWithAPath: under an issuer with a path, the pages' forms post
// to the steps under it and return to the transaction under it, and the
// code redeems at the token endpoint under it.
func TestAnIssuerWithAPath(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Issuer += "/auth"
		c.UI = uiUnder(t, c, "/auth")
	})
	conf := h.oauthConfig("demo-app", "")
	conf.Endpoint = oauth2.Endpoint{AuthURL: h.issuer + "/auth/authorize", TokenURL: h.issuer + "/auth/token", AuthStyle: oauth2.AuthStyleInParams}
	verifier := oauth2.GenerateVerifier()
	b := h.browser()
	login := b.get(conf.AuthCodeURL("state-12345678", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI)))
	if !strings.Contains(login.Body, `action="/auth/authorize/login"`) {
		t.Fatalf("login form does not post under the issuer's path: %d\n%s", login.StatusCode, login.Body)
	}
	consent := b.submit(login, "username", "alice", "password", alicePW)
	if !strings.Contains(consent.Body, `action="/auth/authorize/consent"`) {
		t.Fatalf("no consent page under the issuer's path: %d\n%s", consent.StatusCode, consent.Body)
	}
	u := redirected(t, b.submit(consent, "action", "approve"))
	if u.Query().Get("iss") != h.issuer+"/auth" {
		t.Fatalf("iss %q", u.Query().Get("iss"))
	}
	tok, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("the code does not redeem: %v", err)
	}
}

// TestAClientDeletedDuringTheAuthorizationGetsOurPage: a registered
// client deleted while its consent page is open gets no code and no
// redirect: the approval ends on our "Unknown client" page.
func TestAClientDeletedDuringTheAuthorizationGetsOurPage(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	if err := h.store.CreateClient(ctx, &storage.Client{
		ID: "reg-app", RedirectURIs: []string{appRedirect}, GrantTypes: []string{"authorization_code"}, Resources: []string{mcpURI},
		TokenEndpointAuthMethod: "none", Source: "dcr", CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	conf := h.oauthConfig("reg-app", "")
	b := h.browser()
	login := b.get(conf.AuthCodeURL("state-12345678", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("resource", mcpURI)))
	consent := b.submit(login, "username", "alice", "password", alicePW)
	if !strings.Contains(consent.Body, `value="approve"`) {
		t.Fatalf("no consent page: %d\n%s", consent.StatusCode, consent.Body)
	}
	if err := h.store.DeleteClient(ctx, "reg-app"); err != nil {
		t.Fatal(err)
	}
	p := b.submit(consent, "action", "approve")
	if p.StatusCode != http.StatusBadRequest || p.Header.Get("Location") != "" || !strings.Contains(p.Body, "Unknown client") {
		t.Fatalf("status %d Location %q, want 400 on our page:\n%s", p.StatusCode, p.Header.Get("Location"), p.Body)
	}
}
