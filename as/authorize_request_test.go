package as

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/storage"
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

// response_mode=query is the only mode served, and request objects are
// refused whichever of request or request_uri carries one (RFC 9101 §10.1,
// request_not_supported), before anything else reads them.
func TestResponseModeAndRequestObjectChecks(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct {
		name, param, value, wantError string
	}{
		{"accepts response_mode query", "response_mode", "query", ""},
		{"refuses response_mode fragment", "response_mode", "fragment", "unsupported_response_mode"},
		{"refuses a request object alone", "request", "eyJhbGciOiJub25lIn0.e30.", "request_not_supported"},
		{"refuses a request_uri alone", "request_uri", "https://app.example/request.jwt", "request_not_supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := authorizeParams("demo-app")
			v.Set("redirect_uri", appRedirect)
			v.Set(tc.param, tc.value)
			u := h.browser().authorize(h.issuer + "/authorize?" + v.Encode())
			if got := u.Scheme + "://" + u.Host + u.Path; got != appRedirect {
				t.Fatalf("sent to %s, want %s", u, appRedirect)
			}
			q := u.Query()
			if q.Get("state") != "s-12345678" || q.Get("iss") != h.issuer {
				t.Fatalf("redirect %s lacks the state or iss", u)
			}
			if tc.wantError == "" {
				if q.Get("code") == "" || q.Get("error") != "" {
					t.Fatalf("redirect %s: want a code and no error", u)
				}
				return
			}
			if q.Get("error") != tc.wantError || q.Get("code") != "" {
				t.Fatalf("redirect %s: want error=%s and no code", u, tc.wantError)
			}
		})
	}
}

// consentPage logs alice in for the request and returns the consent page.
func consentPage(t *testing.T, b *browser, authURL string) page {
	t.Helper()
	p := b.get(authURL)
	if strings.Contains(p.Body, `name="password"`) {
		p = b.submit(p, "username", "alice", "password", alicePW)
	}
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, `value="approve"`) {
		t.Fatalf("status %d, want the consent page; body:\n%s", p.StatusCode, p.Body)
	}
	return p
}

// The consent page names a publisher only for a client whose id is an
// https URL (a Client ID Metadata Document), never for a plain client id.
func TestConsentNamesThePublisherOnlyOfURLClientIDs(t *testing.T) {
	const urlClient = "https://tools.example/client.json"
	h := newHarness(t, func(c *Config) {
		c.Clients = append(c.Clients, Client{ID: urlClient, Public: true, Name: "Tools", RedirectURIs: []string{appRedirect}})
	})
	v := authorizeParams("demo-app")
	v.Set("redirect_uri", appRedirect)
	if p := consentPage(t, h.browser(), h.issuer+"/authorize?"+v.Encode()); strings.Contains(p.Body, "Published by") {
		t.Fatalf("consent page of demo-app names a publisher:\n%s", p.Body)
	}
	v.Set("client_id", urlClient)
	p := consentPage(t, h.browser(), h.issuer+"/authorize?"+v.Encode())
	if !strings.Contains(p.Body, "<dt>Published by</dt><dd><code>tools.example</code></dd>") {
		t.Fatalf("consent page of %s does not name tools.example as publisher:\n%s", urlClient, p.Body)
	}
}

// A remembered consent is used without a click by a public client whose
// redirect URI is an https URL: only loopback and private-use redirects
// need the confirmation of RFC 8252 §8.6.
func TestRememberedConsentOfAPublicClientOnHTTPSIsSilent(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	v := authorizeParams("demo-app")
	v.Set("redirect_uri", appRedirect)
	if u := b.authorize(h.issuer + "/authorize?" + v.Encode()); u.Query().Get("code") == "" {
		t.Fatalf("first authorization: %s carries no code", u)
	}
	v = authorizeParams("demo-app")
	v.Set("redirect_uri", appRedirect)
	u := redirected(t, b.get(h.issuer+"/authorize?"+v.Encode()))
	if u.Query().Get("code") == "" {
		t.Fatalf("second authorization: %s carries no code", u)
	}
}

// The placeholder fosite parses the request with never leaves the server:
// the redirect carries the client's state exactly, or none when it sent
// none, and the stored code request holds no state at all.
func TestStatePlaceholderNeverLeavesTheServer(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	for _, state := range []string{"s-12345678", ""} {
		v := authorizeParams("demo-app")
		v.Set("redirect_uri", appRedirect)
		if state == "" {
			v.Del("state")
		}
		u := h.browser().authorize(h.issuer + "/authorize?" + v.Encode())
		code := u.Query().Get("code")
		if code == "" {
			t.Fatalf("state %q: %s carries no code", state, u)
		}
		_, sr, err := h.as.store.load(ctx, storage.KindAuthorizeCode, h.as.tokens.AuthorizeCodeSignature(ctx, code))
		if err != nil {
			t.Fatalf("state %q: stored code: %v", state, err)
		}
		if got, has := u.Query().Get("state"), u.Query().Has("state"); got != state || has != (state != "") {
			t.Errorf("state %q: redirect has state %q (present %v)", state, got, has)
		}
		form := sr.Form
		if form.Has("state") {
			t.Errorf("state %q: stored form has state %q", state, form.Get("state"))
		}
		for k, vs := range form {
			for _, v := range vs {
				if strings.Contains(v, statePlaceholder) {
					t.Errorf("state %q: stored form %s carries the placeholder", state, k)
				}
			}
		}
	}
}
