package as

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
)

// Pins localRedirect, which decides whether a remembered consent still takes
// a click (RFC 8252 §8.6): loopback, localhost and private-use schemes reach
// a program on the device; https and other hosts over http do not.
func TestLocalRedirect(t *testing.T) {
	for _, tc := range []struct {
		uri  string
		want bool
	}{
		{"https://app.example/cb", false},
		{"https://127.0.0.1/cb", false},
		{"http://localhost:7777/cb", true},
		{"http://LOCALHOST/cb", true},
		{"http://127.0.0.1/cb", true},
		{"http://[::1]:9/cb", true},
		{"http://10.0.0.1/cb", false},
		{"http://intranet.example/cb", false},
		{"com.example.app:/oauth/cb", true},
		{"http://%zz/cb", false},
	} {
		if got := localRedirect(tc.uri); got != tc.want {
			t.Errorf("localRedirect(%q) = %v, want %v", tc.uri, got, tc.want)
		}
	}
}

// Pins matchRedirectURI's loopback port exception (RFC 8252 §7.3): it holds
// only for a registration that is itself http on a loopback host without
// userinfo, never for an https one or another IP literal.
func TestLoopbackPortExceptionNeedsAnHTTPLoopbackRegistration(t *testing.T) {
	for _, tc := range []struct {
		registered, requested string
	}{
		{"https://127.0.0.1/cb", "http://127.0.0.1:5555/cb"},
		{"http://user@127.0.0.1/cb", "http://127.0.0.1:5555/cb"},
		{"http://10.0.0.1/cb", "http://10.0.0.1:5555/cb"},
		{"http://192.0.2.7/cb", "http://192.0.2.7:80/cb"},
	} {
		if matchRedirectURI([]string{tc.registered}, tc.requested) {
			t.Errorf("%s matched registration %s", tc.requested, tc.registered)
		}
	}
	if !matchRedirectURI([]string{"http://127.0.0.1/cb"}, "http://127.0.0.1:5555/cb") {
		t.Error("the loopback port exception does not hold for http://127.0.0.1/cb")
	}
}

// createRegisteredClient stores a public client as dynamic registration
// would, so authorization errors go to our own page (RFC 9700 §4.11.2).
func createRegisteredClient(t *testing.T, h *harness) {
	t.Helper()
	err := h.store.CreateClient(context.Background(), &storage.Client{
		ID: "registered-app", TokenEndpointAuthMethod: "none", RedirectURIs: []string{appRedirect},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		Source: "dcr", CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An error for a registered client is shown on our page with its error word
// and description, not redirected; without login pages it is a plain 400
// page, never a crash.
func TestClientErrorPageNamesTheErrorAndWorksWithoutLoginPages(t *testing.T) {
	for _, withUI := range []bool{true, false} {
		h := newHarness(t, func(c *Config) {
			if !withUI {
				c.UI = nil
			}
		})
		createRegisteredClient(t, h)
		v := authorizeParams("registered-app")
		v.Set("redirect_uri", appRedirect)
		v.Set("code_challenge_method", "plain")
		p := h.browser().get(h.issuer + "/authorize?" + v.Encode())
		if p.StatusCode != http.StatusBadRequest || p.Header.Get("Location") != "" {
			t.Fatalf("UI %v: status %d, Location %q; want 400 on our page", withUI, p.StatusCode, p.Header.Get("Location"))
		}
		want := "The authorization request is not valid."
		if withUI {
			want = "(invalid_request). code_challenge_method must be S256."
		}
		if !strings.Contains(p.Body, want) {
			t.Fatalf("UI %v: page does not contain %q:\n%s", withUI, want, p.Body)
		}
	}
}
