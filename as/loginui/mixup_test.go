package loginui

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/internal/testop"
	"github.com/mcpauth/mcpauth/upstream"
)

// TestTheProviderGetsAnAuthorizationRequestOfOurOwn: the authorization
// request the provider receives carries our client_id, our callback, the
// configured scopes, a PKCE S256 challenge, a state and a nonce of ours,
// and nothing of the OAuth client's request (its resource, scopes, state
// or PKCE challenge). The code exchange then succeeds, so the provider
// checked our code_verifier against the challenge it received.
func TestTheProviderGetsAnAuthorizationRequestOfOurOwn(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	b := e.browser()
	client, err := url.ParseQuery(strings.TrimPrefix(authorizePath(), "/authorize?"))
	if err != nil {
		t.Fatal(err)
	}
	cb := e.signIn(b, authorizePath(), "alice")
	reqs := e.op.AuthRequests()
	if len(reqs) != 1 {
		t.Fatalf("the provider received %d authorization requests, want 1: %v", len(reqs), reqs)
	}
	q := reqs[0]
	for name, want := range map[string]string{
		"client_id":             "mcpauth",
		"redirect_uri":          e.srv.URL + "/upstream/corp/callback",
		"response_type":         "code",
		"scope":                 "openid email profile groups offline_access",
		"code_challenge_method": "S256",
	} {
		if got := q.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if len(q.Get("code_challenge")) != 43 || q.Get("code_challenge") == client.Get("code_challenge") {
		t.Errorf("code_challenge %q: not a challenge of our own", q.Get("code_challenge"))
	}
	if len(q.Get("nonce")) < 43 {
		t.Errorf("nonce %q: not a random value of ours", q.Get("nonce"))
	}
	if s := q.Get("state"); s == "" || s == client.Get("state") || cb.Query().Get("state") != s {
		t.Errorf("state %q (the client's is %q, the callback's %q)", s, client.Get("state"), cb.Query().Get("state"))
	}
	if q.Has("resource") {
		t.Errorf("the client's resource was forwarded: %v", q["resource"])
	}
	for name, vs := range q {
		for _, v := range vs {
			if strings.Contains(v, "mcp:") || strings.Contains(v, client.Get("resource")) {
				t.Errorf("%s=%q carries the client's scopes or resource", name, v)
			}
		}
	}
	if p := b.open(cb); p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "Allow access?") {
		t.Fatalf("after the callback: status %d, want our consent page:\n%s", p.StatusCode, p.Body)
	}
}

// TestTheCallbackChecksTheIssParameter: with two providers, an answer at
// one provider's callback whose iss names the other, or that lacks the
// iss its provider promised in discovery, is refused on a page of ours
// before the code is redeemed (RFC 9207 §2.4), error answers included; the
// right iss is accepted (last, as it records the person).
func TestTheCallbackChecksTheIssParameter(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	partnerOP := testop.Start(t, opPeople, testop.Client{ID: "mcpauth", Secret: "op-secret", ClaimsInIDToken: true})
	partners, err := upstream.New(upstream.Config{ID: "partners", Issuer: partnerOP.Issuer, ClientID: "mcpauth", ClientSecret: "op-secret",
		RedirectURL: e.srv.URL + "/upstream/partners/callback", Scopes: []string{"openid", "email"}})
	if err != nil {
		t.Fatal(err)
	}
	e.ui.cfg.Upstreams = append(e.ui.cfg.Upstreams, Upstream{Provider: partners, Name: "Partner Workspace"})
	e.op.SendIss(true)

	withIss := func(cb *url.URL, set func(q url.Values)) *url.URL {
		u := *cb
		q := u.Query()
		set(q)
		u.RawQuery = q.Encode()
		return &u
	}
	refused := func(t *testing.T, b *browser, u *url.URL) {
		t.Helper()
		n := len(e.results)
		if p := b.open(u); p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "did not come from Acme SSO") {
			t.Fatalf("status %d, want 400 naming the iss:\n%s", p.StatusCode, p.Body)
		}
		assertNothingDone(t, e, b, n, "corp:u-alice")
	}
	t.Run("the other provider's iss is refused", func(t *testing.T) {
		b := e.browser()
		cb := e.signIn(b, authorizePath(), "alice")
		refused(t, b, withIss(cb, func(q url.Values) { q.Set("iss", partnerOP.Issuer) }))
	})
	t.Run("a missing iss is refused when the provider promised one", func(t *testing.T) {
		b := e.browser()
		cb := e.signIn(b, authorizePath(), "alice")
		refused(t, b, withIss(cb, func(q url.Values) { q.Del("iss") }))
	})
	t.Run("an error answer with the other provider's iss is refused as such", func(t *testing.T) {
		b := e.browser()
		cb := e.signIn(b, authorizePath(), "alice")
		refused(t, b, withIss(cb, func(q url.Values) { q.Del("code"); q.Set("error", "access_denied"); q.Set("iss", partnerOP.Issuer) }))
	})
	t.Run("an error answer with the provider's iss is the provider's error", func(t *testing.T) {
		for _, code := range []string{"access_denied", "login_required", "interaction_required"} {
			b := e.browser()
			cb := e.signIn(b, authorizePath(), "alice")
			n := len(e.results)
			p := b.open(withIss(cb, func(q url.Values) { q.Del("code"); q.Set("error", code) }))
			if p.StatusCode != http.StatusForbidden || !strings.Contains(p.Body, "did not complete the sign-in ("+code+")") {
				t.Fatalf("%s: status %d:\n%s", code, p.StatusCode, p.Body)
			}
			assertNothingDone(t, e, b, n, "corp:u-alice")
		}
	})
	t.Run("a wrong iss is refused from a provider that promised none", func(t *testing.T) {
		f := newUpstreamEnv(t, false, "")
		b := f.browser()
		cb := f.signIn(b, authorizePath(), "alice")
		if cb.Query().Has("iss") {
			t.Fatalf("the provider sent an iss: %s", cb)
		}
		n := len(f.results)
		if p := b.open(withIss(cb, func(q url.Values) { q.Set("iss", partnerOP.Issuer) })); p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "did not come from Acme SSO") {
			t.Fatalf("status %d:\n%s", p.StatusCode, p.Body)
		}
		assertNothingDone(t, f, b, n, "corp:u-alice")
	})
	t.Run("the provider's iss is accepted", func(t *testing.T) {
		b := e.browser()
		cb := e.signIn(b, "/consents", "alice")
		if cb.Query().Get("iss") != e.op.Issuer {
			t.Fatalf("the provider sent no iss: %s", cb)
		}
		if p := b.open(cb); !strings.Contains(p.Body, "Signed in as") {
			t.Fatalf("status %d:\n%s", p.StatusCode, p.Body)
		}
	})
}

// TestAProviderFailingAtTheCallbackIsOurPage: after the person signed in
// at the provider, a code its token endpoint refuses, and the provider
// going down before the code is redeemed, are pages of ours that say so
// (400, 502); nothing is issued, recorded or signed in.
func TestAProviderFailingAtTheCallbackIsOurPage(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	t.Run("a code the provider refuses", func(t *testing.T) {
		b := e.browser()
		cb := e.signIn(b, authorizePath(), "alice")
		u := *cb
		q := u.Query()
		q.Set("code", "not-a-code-of-the-provider")
		u.RawQuery = q.Encode()
		n := len(e.results)
		if p := b.open(&u); p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "Acme SSO did not accept this sign-in") {
			t.Fatalf("status %d:\n%s", p.StatusCode, p.Body)
		}
		assertNothingDone(t, e, b, n, "corp:u-alice")
	})
	t.Run("the provider down before the code is redeemed", func(t *testing.T) {
		b := e.browser()
		cb := e.signIn(b, authorizePath(), "alice")
		e.op.Server.Close()
		n := len(e.results)
		p := b.open(cb)
		if p.StatusCode != http.StatusBadGateway || !strings.Contains(p.Body, "Acme SSO cannot be reached") || strings.Contains(p.Body, e.op.Server.Listener.Addr().String()) {
			t.Fatalf("status %d:\n%s", p.StatusCode, p.Body)
		}
		assertNothingDone(t, e, b, n, "corp:u-alice")
	})
}

// FuzzUpstreamCallback sends the callback arbitrary answers, with a state
// this browser really started (or an arbitrary one) and arbitrary code,
// error and iss parameters, to the running pages and the real provider: the
// answer is always a page of ours, never a 5xx or a redirect (to the OAuth
// client or anywhere), and nothing is issued or recorded.
func FuzzUpstreamCallback(f *testing.F) {
	f.Add(true, "", "code", "", "")
	f.Add(true, "", "", "access_denied", "")
	f.Add(true, "", "c", "", "http://127.0.0.1:1/")
	f.Add(true, "&state=again", "c", "", "")
	f.Add(false, "forged", "c", "", "")
	f.Add(true, "", "c", "login_required\x00", "")
	f.Add(false, "", "", "", "")
	e := newUpstreamEnv(f, false, "")
	f.Fuzz(func(t *testing.T, realState bool, state, code, errCode, iss string) {
		e.t = t // the harness's helpers report to this input's test
		b := e.browser()
		q := url.Values{}
		if realState {
			at := e.toProvider(b, authorizePath())
			q.Set("state", at.Query().Get("state"))
			if state != "" {
				q.Add("state", state)
			}
		} else if state != "" {
			q.Set("state", state)
		}
		for name, v := range map[string]string{"code": code, "error": errCode, "iss": iss} {
			if v != "" {
				q.Set(name, v)
			}
		}
		n := len(e.results)
		u, _ := url.Parse(e.srv.URL + "/upstream/corp/callback?" + q.Encode())
		p := b.open(u)
		if p.StatusCode >= 500 && p.StatusCode != http.StatusBadGateway || p.StatusCode < 400 {
			t.Fatalf("%s: status %d (Location %q):\n%s", q.Encode(), p.StatusCode, p.Header.Get("Location"), p.Body)
		}
		if len(e.results) != n || signedIn(b) {
			t.Fatalf("%s: an authorization result or a session came of it", q.Encode())
		}
		if rec := e.record("corp:u-alice"); rec != nil {
			t.Fatalf("%s: recorded %+v", q.Encode(), rec)
		}
	})
}
