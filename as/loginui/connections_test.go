package loginui

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/connections"
	"github.com/mcpauth/mcpauth/internal/testprovider"
	"github.com/mcpauth/mcpauth/storage"
)

// connHarness is the pages with two connections, "github" and "slack",
// each at a test provider of its own.
type connHarness struct {
	*harness
	github, slack *testprovider.Provider
	vault         *connections.Vault
}

func newConnHarness(t *testing.T, pc testprovider.Config) *connHarness {
	t.Helper()
	ch := &connHarness{}
	start := func() *testprovider.Provider {
		tp := testprovider.New(pc)
		srv := httptest.NewServer(tp.Handler())
		t.Cleanup(srv.Close)
		tp.Issuer = srv.URL
		return tp
	}
	ch.github, ch.slack = start(), start()
	ch.harness = newHarnessAt(t, func(h *harness, c *Config) {
		base := "http://" + h.srv.Listener.Addr().String()
		var ps []*connections.Provider
		for id, tp := range map[string]*testprovider.Provider{"github": ch.github, "slack": ch.slack} {
			p, err := connections.NewProvider(connections.Config{
				ID: id, Name: strings.ToUpper(id[:1]) + id[1:],
				AuthorizationEndpoint: tp.AuthorizationEndpoint(), TokenEndpoint: tp.TokenEndpoint(), RevocationEndpoint: tp.RevocationEndpoint(),
				ClientID: "client", ClientSecret: "client-secret", Scopes: []string{"repo"},
				Resource: "https://api." + id + ".example", Clients: []string{"gateway"},
				RedirectURL: base + "/connections/" + id + "/callback",
			})
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		v, err := connections.NewVault(connections.VaultConfig{Providers: ps, Store: h.store, Secret: c.Secret, Now: h.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		ch.vault = v
		c.Connections = v
	})
	return ch
}

// connectForm returns the form of the page with the given step and
// connection.
func connectForm(t *testing.T, p page, step, id string) form {
	t.Helper()
	for _, f := range p.forms() {
		if f.Fields.Get(stepField) == step && f.Fields.Get("connection") == id {
			return f
		}
	}
	t.Fatalf("no %s form for %s; status %d body:\n%s", step, id, p.StatusCode, p.Body)
	return form{}
}

// toProvider submits the connect form of id and returns the provider's
// answer: the callback URL (path and query, on the pages' server).
func (ch *connHarness) toProvider(t *testing.T, b *browser, id string) string {
	t.Helper()
	p := b.get("/connections")
	out := b.submit(connectForm(t, p, "connect", id))
	if out.StatusCode != http.StatusSeeOther {
		t.Fatalf("connect: status %d\n%s", out.StatusCode, out.Body)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(out.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("provider answered %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc.RequestURI()
}

func TestConnectionsConnectAndDisconnect(t *testing.T) {
	ch := newConnHarness(t, testprovider.Config{Login: "ada-gh"})
	b := ch.browser()
	b.login("/connections", "alice", alicePW)
	p := b.get("/connections")
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "Github</strong> <span class=\"muted status\">not connected") {
		t.Fatalf("page before connecting: %d\n%s", p.StatusCode, p.Body)
	}
	for k, want := range map[string]string{"X-Frame-Options": "DENY", "Cache-Control": "no-store"} {
		if got := p.Header.Get(k); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	cb := ch.toProvider(t, b, "github")
	auth := ch.github.LastAuthorization()
	if auth.Get("code_challenge_method") != "S256" || auth.Get("code_challenge") == "" || auth.Get("state") == "" {
		t.Fatalf("authorization request %v", auth)
	}
	if !strings.HasPrefix(cb, "/connections/github/callback?") {
		t.Fatalf("callback %s", cb)
	}
	p = b.get(cb)
	if p.StatusCode != http.StatusOK || p.Request.URL.Path != "/connections" || !strings.Contains(p.Body, "Github</strong> <span class=\"muted status\">connected") {
		t.Fatalf("after the callback: %d %s\n%s", p.StatusCode, p.Request.URL, p.Body)
	}
	tok, err := ch.vault.Token(context.Background(), "alice", "github")
	if err != nil || !ch.github.Active(tok.AccessToken) {
		t.Fatalf("Token = %+v, %v", tok, err)
	}
	if strings.Contains(p.Body, tok.AccessToken) {
		t.Fatal("the page shows the access token")
	}
	if _, err := ch.vault.Token(context.Background(), "bob", "github"); !errors.Is(err, connections.ErrNotConnected) {
		t.Fatalf("bob: %v", err)
	}
	// A connection the provider refused to refresh asks to be reconnected.
	if err := ch.store.UpdateConnection(context.Background(), "alice", "github", func(c storage.Connection) (storage.Connection, error) {
		c.NeedsReconnect = true
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	if p = b.get("/connections"); !strings.Contains(p.Body, "Github</strong> <span class=\"muted status\">needs reconnecting") ||
		!strings.Contains(p.Body, "Reconnect Github") {
		t.Fatalf("a connection needing reconnecting:\n%s", p.Body)
	}
	p = b.submit(connectForm(t, p, "disconnect", "github"))
	if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "Github</strong> <span class=\"muted status\">not connected") {
		t.Fatalf("after disconnecting: %d\n%s", p.StatusCode, p.Body)
	}
	if ch.github.Active(tok.AccessToken) || len(ch.github.Revoked()) != 1 {
		t.Fatal("disconnecting did not revoke at the provider")
	}
	if _, err := ch.vault.Token(context.Background(), "alice", "github"); !errors.Is(err, connections.ErrNotConnected) {
		t.Fatalf("after disconnect: %v", err)
	}
}

func TestConsentsPageLinksToConnections(t *testing.T) {
	ch := newConnHarness(t, testprovider.Config{})
	b := ch.browser()
	b.login("/consents", "alice", alicePW)
	if p := b.get("/consents"); !strings.Contains(p.Body, `href="/connections"`) {
		t.Fatalf("/consents has no link to /connections:\n%s", p.Body)
	}
	plain := newHarness(t, nil)
	pb := plain.browser()
	pb.login("/consents", "alice", alicePW)
	if p := pb.get("/consents"); strings.Contains(p.Body, `/connections`) {
		t.Fatal("/consents links to /connections without connections")
	}
	if p := pb.get("/connections"); p.StatusCode != http.StatusNotFound {
		t.Fatalf("/connections without connections: %d", p.StatusCode)
	}
}

func TestConnectionsNeedASignedInPerson(t *testing.T) {
	ch := newConnHarness(t, testprovider.Config{})
	b := ch.browser()
	p := b.get("/connections")
	if !strings.Contains(p.Body, `name="password"`) || strings.Contains(p.Body, `name="connection"`) {
		t.Fatalf("anonymous /connections:\n%s", p.Body)
	}
	// The connect form needs the session's CSRF token.
	b.login("/connections", "alice", alicePW)
	f := connectForm(t, b.get("/connections"), "connect", "github")
	f.Fields.Set("csrf", "forged")
	if p := b.submit(f); p.StatusCode != http.StatusForbidden {
		t.Fatalf("a forged CSRF token: %d", p.StatusCode)
	}
	f.Fields.Del("csrf")
	if p := b.submit(f); p.StatusCode != http.StatusForbidden {
		t.Fatalf("no CSRF token: %d", p.StatusCode)
	}
	f = connectForm(t, b.get("/connections"), "connect", "github")
	f.Fields.Set("connection", "gitlab")
	if p := b.submit(f); p.StatusCode != http.StatusForbidden {
		t.Fatalf("an unknown connection: %d", p.StatusCode)
	}
	if n := ch.github.Count("authorize"); n != 0 {
		t.Fatalf("%d authorizations started", n)
	}
}

func TestConnectionCallbackRefusals(t *testing.T) {
	ch := newConnHarness(t, testprovider.Config{})
	alice := ch.browser()
	alice.login("/connections", "alice", alicePW)
	notConnected := func(t *testing.T) {
		t.Helper()
		for _, id := range []string{"github", "slack"} {
			if _, err := ch.vault.Token(context.Background(), "alice", id); !errors.Is(err, connections.ErrNotConnected) {
				t.Fatalf("%s connected: %v", id, err)
			}
		}
	}
	with := func(cb string, set ...string) string {
		u, _ := url.Parse(cb)
		q := u.Query()
		for i := 0; i+1 < len(set); i += 2 {
			q.Set(set[i], set[i+1])
		}
		u.RawQuery = q.Encode()
		return u.RequestURI()
	}
	cases := []struct {
		name   string
		do     func(t *testing.T) page
		status int
		text   string
	}{
		{"a forged state", func(t *testing.T) page {
			return alice.get(with(ch.toProvider(t, alice, "github"), "state", "forged-state"))
		}, http.StatusBadRequest, "does not belong to a connection started here"},
		{"a state of another connection", func(t *testing.T) page {
			cb := ch.toProvider(t, alice, "github")
			return alice.get(strings.Replace(cb, "/connections/github/", "/connections/slack/", 1))
		}, http.StatusBadRequest, "does not belong to a connection started here"},
		{"another provider's iss", func(t *testing.T) page {
			return alice.get(with(ch.toProvider(t, alice, "github"), "iss", ch.slack.Issuer))
		}, http.StatusBadRequest, "did not come from Github"},
		{"another browser", func(t *testing.T) page {
			cb := ch.toProvider(t, alice, "github")
			other := ch.browser()
			other.login("/connections", "alice", alicePW)
			return other.get(cb)
		}, http.StatusBadRequest, "started in another browser"},
		{"another person", func(t *testing.T) page {
			cb := ch.toProvider(t, alice, "github")
			bob := ch.browser()
			bob.login("/connections", "bob", bobPW)
			return bob.get(cb)
		}, http.StatusBadRequest, "started in another browser"},
		{"a POST", func(t *testing.T) page {
			cb := ch.toProvider(t, alice, "github")
			req, _ := http.NewRequest(http.MethodPost, ch.srv.URL+cb, nil)
			return alice.do(req)
		}, http.StatusMethodNotAllowed, ""},
		{"a HEAD", func(t *testing.T) page {
			cb := ch.toProvider(t, alice, "github")
			req, _ := http.NewRequest(http.MethodHead, ch.srv.URL+cb, nil)
			return alice.do(req)
		}, http.StatusMethodNotAllowed, ""},
		{"a provider error", func(t *testing.T) page {
			cb := ch.toProvider(t, alice, "github")
			u, _ := url.Parse(cb)
			q := u.Query()
			q.Del("code")
			q.Set("error", "access_denied")
			u.RawQuery = q.Encode()
			return alice.get(u.RequestURI())
		}, http.StatusForbidden, "did not complete the connection (access_denied)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.do(t)
			if p.StatusCode != c.status || !strings.Contains(p.Body, c.text) {
				t.Fatalf("status %d, want %d with %q:\n%s", p.StatusCode, c.status, c.text, p.Body)
			}
			notConnected(t)
		})
	}
	t.Run("a replayed answer", func(t *testing.T) {
		cb := ch.toProvider(t, alice, "github")
		if p := alice.get(cb); p.Request.URL.Path != "/connections" {
			t.Fatalf("first use: %d\n%s", p.StatusCode, p.Body)
		}
		first, err := ch.vault.Token(context.Background(), "alice", "github")
		if err != nil {
			t.Fatal(err)
		}
		p := alice.get(cb)
		if p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "already used") {
			t.Fatalf("replay: %d\n%s", p.StatusCode, p.Body)
		}
		again, err := ch.vault.Token(context.Background(), "alice", "github")
		if err != nil || again.AccessToken != first.AccessToken {
			t.Fatal("the replay replaced the connection")
		}
	})
}
