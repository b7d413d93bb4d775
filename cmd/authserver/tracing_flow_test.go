package main

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/internal/otlptest"
)

var (
	flowFormRE   = regexp.MustCompile(`(?s)<form method="post" action="([^"]*)">(.*?)</form>`)
	flowHiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// TestServeTracesTheAuthorizationWithoutItsSecrets: an authorization
// code flow through the login and consent pages, traced, exports spans of
// every step (/authorize, /authorize/login, /authorize/continue,
// /authorize/consent, /token), and none of them holds the password, the
// CSRF token, the sealed transaction, the code, the PKCE verifier or the
// access token.
func TestServeTracesTheAuthorizationWithoutItsSecrets(t *testing.T) {
	const password = "correct horse battery staple, traced"
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	rc := otlptest.New(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	const redirect = "http://127.0.0.1:7777/cb"
	conf := strings.Replace(stackConfig(issuer, addr, "memory"), "clients:\n", "clients:\n  - id: demo-app\n    public: true\n    redirect_uris: ["+redirect+"]\n", 1) +
		"users:\n  - username: alice\n    password_hash: \"" + string(hash) + "\"\n"
	cfg := writeConfig(t, dir, conf)
	lookup := func(k string) (string, bool) {
		switch k {
		case "AUTHSERVER_SECRET":
			return testSecret, true
		case "CI_BOT_SECRET":
			return botSecret, true
		case "OTEL_EXPORTER_OTLP_ENDPOINT":
			return rc.URL(), true
		}
		return "", false
	}
	_, stop := serveInProcess(t, cfg, issuer, lookup)
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), issuer) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	var sent []string // every hidden value a form carried
	submit := func(page string, extra url.Values) *http.Response {
		t.Helper()
		m := flowFormRE.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no form in:\n%s", page)
		}
		v := url.Values{}
		for _, h := range flowHiddenRE.FindAllStringSubmatch(m[2], -1) {
			v.Set(html.UnescapeString(h[1]), html.UnescapeString(h[2]))
			sent = append(sent, html.UnescapeString(h[2]))
		}
		for k, vs := range extra {
			v[k] = vs
		}
		resp, err := b.PostForm(issuer+html.UnescapeString(m[1]), v)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	read := func(resp *http.Response) string {
		t.Helper()
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	oc := &oauth2.Config{ClientID: "demo-app", RedirectURL: redirect, Scopes: []string{"mcp:tools"},
		Endpoint: oauth2.Endpoint{AuthURL: issuer + "/authorize", TokenURL: issuer + "/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	resp, err := b.Get(oc.AuthCodeURL("st-traced-123", oauth2.S256ChallengeOption(verifier)))
	if err != nil {
		t.Fatal(err)
	}
	consent := read(submit(read(resp), url.Values{"username": {"alice"}, "password": {password}}))
	back := submit(consent, url.Values{"action": {"approve"}})
	back.Body.Close()
	loc, err := url.Parse(back.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("no code: %d %q", back.StatusCode, back.Header.Get("Location"))
	}
	code := loc.Query().Get("code")
	tok, err := oc.Exchange(context.Background(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	spans := rc.Spans()
	paths := map[string]bool{}
	for _, s := range spans {
		paths[s.Attrs["url.path"]] = true
	}
	for _, p := range []string{"/authorize", "/authorize/login", "/authorize/continue", "/authorize/consent", "/token"} {
		if !paths[p] {
			t.Errorf("no span of %s:\n%s", p, otlptest.Describe(spans))
		}
	}
	secrets := append([]string{password, code, verifier, tok.AccessToken}, sent...)
	for _, s := range spans {
		for _, v := range s.Strings {
			for _, sec := range secrets {
				if len(sec) >= 8 && strings.Contains(v, sec) {
					t.Errorf("span %q holds %.12s...", s.Name, sec)
				}
			}
		}
	}
}
