package loginui

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/upstream"
)

// TestTheLoginPageOffersWhatIsConfigured: with local accounts the login
// page has the password form and a button per provider; with one provider
// and no local accounts the browser goes straight to the provider; with two
// providers and no local accounts the page has their buttons and no
// password form.
func TestTheLoginPageOffersWhatIsConfigured(t *testing.T) {
	t.Run("local accounts and one provider", func(t *testing.T) {
		e := newUpstreamEnv(t, true, "")
		p := e.browser().get(authorizePath())
		if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, `name="password"`) || len(upstreamFormRE.FindAllString(p.Body, -1)) != 1 {
			t.Fatalf("status %d, want the password form and one provider button:\n%s", p.StatusCode, p.Body)
		}
	})
	t.Run("one provider only", func(t *testing.T) {
		e := newUpstreamEnv(t, false, "")
		req, err := http.NewRequest(http.MethodGet, e.srv.URL+authorizePath(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), e.op.Issuer) {
			t.Fatalf("status %d Location %q, want 303 to the provider", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("two providers only", func(t *testing.T) {
		e := newUpstreamEnv(t, false, "")
		second, err := upstream.New(upstream.Config{ID: "partners", Issuer: "https://login.partner.example", ClientID: "mcpauth", ClientSecret: "s",
			RedirectURL: e.srv.URL + "/upstream/partners/callback", Scopes: []string{"openid", "email"}})
		if err != nil {
			t.Fatal(err)
		}
		e.ui.cfg.Upstreams = append(e.ui.cfg.Upstreams, Upstream{Provider: second, Name: "Partner Workspace"})
		p := e.browser().get(authorizePath())
		if p.StatusCode != http.StatusOK || strings.Contains(p.Body, `name="password"`) || len(upstreamFormRE.FindAllString(p.Body, -1)) != 2 {
			t.Fatalf("status %d, want two provider buttons and no password form:\n%s", p.StatusCode, p.Body)
		}
	})
}

// TestADisabledUpstreamPersonIsAskedToSignInAgain: once an operator
// disables the record of a person signed in through a provider, the
// authorization endpoint sends them to sign in instead of to the consent
// page.
func TestADisabledUpstreamPersonIsAskedToSignInAgain(t *testing.T) {
	e := newUpstreamEnv(t, true, "")
	b := e.browser()
	if p := b.open(e.signIn(b, authorizePath(), "alice")); !strings.Contains(p.Body, "Allow access?") {
		t.Fatalf("after the callback: status %d, want the consent page", p.StatusCode)
	}
	if err := e.store.SetUserDisabled(context.Background(), "corp:u-alice", true); err != nil {
		t.Fatal(err)
	}
	if p := b.get(authorizePath()); p.StatusCode != http.StatusOK || strings.Contains(p.Body, "Allow access?") || !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("a disabled person at /authorize: status %d, want the login page:\n%s", p.StatusCode, p.Body)
	}
}
