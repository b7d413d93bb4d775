package as

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestLoopbackRedirectOnAnyPort runs the code flow to a loopback redirect URI
// on a port other than the registered one (RFC 8252 §7.3), for 127.0.0.1,
// [::1] and localhost, registered with and without a port; the path, the
// query, the scheme and the host itself still have to match exactly.
func TestLoopbackRedirectOnAnyPort(t *testing.T) {
	registered := []string{
		"http://127.0.0.1:7000/cb", "http://[::1]:7001/cb", "http://localhost:7002/cb",
		"http://127.0.0.1/p", "http://[::1]/p", "http://localhost/p",
		"http://localhost:7003/q?x=1",
	}
	h := newHarness(t, func(c *Config) {
		c.Clients = append(c.Clients, Client{ID: "native", Public: true, Name: "Native", RedirectURIs: registered})
	})
	flow := func(t *testing.T, redirectURI string) (int, string) {
		t.Helper()
		conf := h.oauthConfig("native", "", "mcp:tools")
		conf.RedirectURL = redirectURI
		verifier := oauth2.GenerateVerifier()
		b := h.browser()
		authURL := conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI))
		p := b.get(authURL)
		if p.StatusCode != http.StatusOK {
			return p.StatusCode, p.Body
		}
		u := b.authorize(authURL)
		want, _ := url.Parse(redirectURI)
		if u.Scheme != want.Scheme || u.Host != want.Host || u.Path != want.Path || u.Query().Get("x") != want.Query().Get("x") || u.Query().Get("code") == "" {
			t.Fatalf("redirected to %s, want %s with a code", u, redirectURI)
		}
		tok, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatalf("token for %s: %v", redirectURI, err)
		}
		if tok.AccessToken == "" {
			t.Fatal("no access token")
		}
		return http.StatusOK, ""
	}
	for _, uri := range []string{
		"http://127.0.0.1:7000/cb", "http://127.0.0.1:50123/cb",
		"http://[::1]:50124/cb",
		"http://localhost:50125/cb", "http://localhost:7002/cb",
		"http://127.0.0.1:50126/p", "http://127.0.0.1/p",
		"http://[::1]:50127/p",
		"http://localhost:50128/p", "http://localhost/p",
		"http://localhost:50129/q?x=1",
	} {
		t.Run("accepts "+uri, func(t *testing.T) {
			if code, body := flow(t, uri); code != http.StatusOK {
				t.Fatalf("status %d: %.300s", code, body)
			}
		})
	}
	for _, uri := range []string{
		"http://localhost:50130/cb/x",   // path
		"http://localhost:50131/c",      // path prefix
		"http://localhost:50132/q?x=2",  // query
		"http://localhost:50133/q",      // query dropped
		"https://localhost:50134/cb",    // scheme
		"http://127.0.0.1:50135/q?x=1",  // registered for localhost only
		"http://localhost.:50136/cb",    // another host name
		"http://127.0.0.2:50137/cb",     // another loopback address
		"http://user@localhost:7002/cb", // userinfo
		"http://example.com:7002/cb",    // not loopback
	} {
		t.Run("refuses "+uri, func(t *testing.T) {
			code, body := flow(t, uri)
			if code != http.StatusBadRequest || !strings.Contains(body, "redirect URI") {
				t.Fatalf("status %d, want 400 and our error page: %.300s", code, body)
			}
		})
	}
}

// FuzzMatchRedirectURI: a requested URI matches a registered one only when it
// is the same string, or both are http on the same loopback host with the
// same path and query (the port alone may differ) and no userinfo or
// fragment.
func FuzzMatchRedirectURI(f *testing.F) {
	for _, s := range [][2]string{
		{"http://127.0.0.1/cb", "http://127.0.0.1:5000/cb"},
		{"http://localhost:1/q?x=1", "http://localhost:2/q?x=1"},
		{"http://[::1]/p", "http://[::1]:9/p"},
		{"https://app.example/cb", "https://app.example/cb"},
		{"http://localhost/cb", "http://127.0.0.1/cb"},
		{"http://localhost/cb", "http://localhost:1/cb#f"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, registered, requested string) {
		if !matchRedirectURI([]string{registered}, requested) || registered == requested {
			return
		}
		g, err1 := url.Parse(registered)
		r, err2 := url.Parse(requested)
		if err1 != nil || err2 != nil {
			t.Fatalf("%q matched %q, but one does not parse", requested, registered)
		}
		if r.Scheme != "http" || g.Scheme != "http" || !loopbackHost(r.Hostname()) || g.Hostname() != r.Hostname() ||
			g.EscapedPath() != r.EscapedPath() || g.RawQuery != r.RawQuery || r.User != nil || r.Fragment != "" || strings.Contains(requested, "#") {
			t.Fatalf("%q matched %q", requested, registered)
		}
	})
}
