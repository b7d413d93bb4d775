package as

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// authorizeParams is a valid authorization request of demo-app without
// its redirect_uri.
func authorizeParams(clientID string) url.Values {
	return url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "state": {"s-12345678"},
		"code_challenge":        {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())},
		"code_challenge_method": {"S256"}, "resource": {mcpURI},
	}
}

// An omitted redirect_uri means the registered one only when the client
// registered exactly one (RFC 6749 §3.1.2.3); with several it is refused on
// our page, never guessed.
func TestOmittedRedirectURIIsTheOnlyRegisteredOne(t *testing.T) {
	h := newHarness(t, nil)

	u := h.browser().authorize(h.issuer + "/authorize?" + authorizeParams("web-app").Encode())
	if got := u.Scheme + "://" + u.Host + u.Path; got != appRedirect {
		t.Fatalf("sent to %s, want the only registered redirect URI %s", u, appRedirect)
	}
	if u.Query().Get("code") == "" || u.Query().Get("state") != "s-12345678" {
		t.Fatalf("redirect %s carries no code or the wrong state", u)
	}

	p := h.browser().get(h.issuer + "/authorize?" + authorizeParams("demo-app").Encode())
	if p.StatusCode != http.StatusBadRequest || p.Header.Get("Location") != "" {
		t.Fatalf("client with three redirect URIs, none named: status %d, Location %q; want 400 and no redirect", p.StatusCode, p.Header.Get("Location"))
	}
	if !strings.Contains(p.Body, "The request has no redirect_uri.") {
		t.Fatalf("page does not name the missing redirect_uri:\n%s", p.Body)
	}
}

// A POSTed authorization request without a query is read from its body
// (RFC 6749 §3.1: the endpoint may support POST), as far as the login page.
func TestAuthorizationRequestMayBePostedInTheBody(t *testing.T) {
	h := newHarness(t, nil)
	v := authorizeParams("web-app")
	v.Set("redirect_uri", appRedirect)
	req, err := http.NewRequest(http.MethodPost, h.issuer+"/authorize", strings.NewReader(v.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	p := h.browser().do(req)
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("POSTed request: status %d, want 200 and the login form; body:\n%s", p.StatusCode, p.Body)
	}
}
