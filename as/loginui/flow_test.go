package loginui

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLoginThenConsentThenRedirect(t *testing.T) {
	for _, tc := range []struct {
		name, user, pw string
	}{
		{"an argon2id user signs in and approves", "alice", alicePW},
		{"a bcrypt user signs in and approves", "bob", bobPW},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			b := h.browser()
			consent := b.login(authorizePath("scope", "mcp:tools mcp:admin"), tc.user, tc.pw)
			if consent.StatusCode != http.StatusOK || !strings.Contains(consent.Body, "Allow access?") {
				t.Fatalf("after login: status %d, want the consent page:\n%s", consent.StatusCode, consent.Body)
			}
			for _, want := range []string{"app.example", "Example MCP server", "http://127.0.0.1:8080/mcp", "mcp:tools", "mcp:admin", "Use the tools of the MCP server", "Signed in as <strong>" + tc.user} {
				if !strings.Contains(consent.Body, want) {
					t.Errorf("consent page lacks %q", want)
				}
			}
			loc := b.submit(consent.form(t, "action", "approve")).redirectedTo(t)
			if loc.Host != "app.example" || loc.Query().Get("code") != "code-for-"+tc.user || loc.Query().Get("state") != "st-1" {
				t.Fatalf("redirected to %s", loc)
			}
			res := h.lastResult()
			if res.Subject != tc.user || !slices.Equal(res.Scopes, []string{"mcp:tools", "mcp:admin"}) || res.Denied || res.AuthTime.IsZero() {
				t.Fatalf("result = %+v", res)
			}
			c, err := h.store.GetConsent(context.Background(), tc.user, "demo-app", "http://127.0.0.1:8080/mcp")
			if err != nil {
				t.Fatalf("consent not remembered: %v", err)
			}
			if !slices.Equal(c.Scopes, []string{"mcp:tools", "mcp:admin"}) {
				t.Fatalf("remembered scopes %v", c.Scopes)
			}
		})
	}
}

func TestDenyAnswersAccessDeniedAndRemembersNothing(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	consent := b.login(authorizePath(), "alice", alicePW)
	loc := b.submit(consent.form(t, "action", "deny")).redirectedTo(t)
	if loc.Query().Get("error") != "access_denied" || loc.Query().Get("code") != "" {
		t.Fatalf("redirected to %s", loc)
	}
	if res := h.lastResult(); !res.Denied || res.Subject != "alice" {
		t.Fatalf("result = %+v", res)
	}
	list, err := h.store.ListConsents(context.Background(), "alice")
	if err != nil || len(list) != 0 {
		t.Fatalf("consents after deny: %v, %v", list, err)
	}
	// The next request asks again.
	if p := b.get(authorizePath("state", "st-2")); !strings.Contains(p.Body, "Allow access?") {
		t.Fatalf("after deny the next request did not ask again: %d", p.StatusCode)
	}
}

func TestRememberedConsent(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	consent := b.login(authorizePath("scope", "mcp:tools mcp:admin"), "alice", alicePW)
	b.submit(consent.form(t, "action", "approve")).redirectedTo(t)

	t.Run("a covered request skips the page", func(t *testing.T) {
		loc := b.get(authorizePath("state", "st-2", "scope", "mcp:tools")).redirectedTo(t)
		if loc.Query().Get("granted") != "mcp:tools" || loc.Query().Get("state") != "st-2" {
			t.Fatalf("redirected to %s", loc)
		}
	})
	t.Run("a wider request asks again", func(t *testing.T) {
		p := b.get(authorizePath("state", "st-3", "scope", "mcp:tools mcp:extra"))
		if p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "Allow access?") {
			t.Fatalf("status %d, want the consent page", p.StatusCode)
		}
		b.submit(p.form(t, "action", "approve")).redirectedTo(t)
		c, err := h.store.GetConsent(context.Background(), "alice", "demo-app", "http://127.0.0.1:8080/mcp")
		if err != nil || !slices.Equal(c.Scopes, []string{"mcp:tools", "mcp:admin", "mcp:extra"}) {
			t.Fatalf("remembered %v, %v; want the union", c, err)
		}
	})
	t.Run("another resource asks again", func(t *testing.T) {
		p := b.get(authorizePath("state", "st-4", "resource", "http://127.0.0.1:8081/mcp"))
		if !strings.Contains(p.Body, "Allow access?") {
			t.Fatalf("status %d, want the consent page", p.StatusCode)
		}
	})
	t.Run("another client asks again", func(t *testing.T) {
		p := b.get(authorizePath("state", "st-5", "client_id", "other-app"))
		if !strings.Contains(p.Body, "Allow access?") {
			t.Fatalf("status %d, want the consent page", p.StatusCode)
		}
	})
	t.Run("prompt=consent shows the page anyway", func(t *testing.T) {
		p := b.get(authorizePath("state", "st-6", "prompt", "consent"))
		if !strings.Contains(p.Body, "Allow access?") {
			t.Fatalf("status %d, want the consent page", p.StatusCode)
		}
		loc := b.submit(p.form(t, "action", "approve")).redirectedTo(t)
		if loc.Query().Get("code") == "" {
			t.Fatalf("redirected to %s", loc)
		}
	})
	t.Run("prompt=login asks for the password once, then completes", func(t *testing.T) {
		path := authorizePath("state", "st-7", "prompt", "login")
		after := b.login(path, "alice", alicePW)
		loc := after.redirectedTo(t)
		if loc.Query().Get("code") != "code-for-alice" {
			t.Fatalf("redirected to %s", loc)
		}
		// Replaying the same URL asks for the password again.
		if p := b.get(path); !strings.Contains(p.Body, `name="password"`) {
			t.Fatalf("replayed prompt=login URL did not ask for the password: %d", p.StatusCode)
		}
	})
	t.Run("prompt=login can switch to another person", func(t *testing.T) {
		after := b.login(authorizePath("state", "st-8", "prompt", "login"), "bob", bobPW)
		if !strings.Contains(after.Body, "Signed in as <strong>bob") {
			t.Fatalf("status %d, want bob's consent page", after.StatusCode)
		}
	})
}

func TestRememberedConsentExpires(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.ConsentTTL = time.Hour })
	b := h.browser()
	b.submit(b.login(authorizePath(), "alice", alicePW).form(t, "action", "approve")).redirectedTo(t)
	b.get(authorizePath("state", "st-2")).redirectedTo(t)
	h.clock.Advance(90 * time.Minute)
	// The session (2 h idle, 12 h in all) is still valid, the consent is not.
	if p := b.get(authorizePath("state", "st-3")); !strings.Contains(p.Body, "Allow access?") {
		t.Fatalf("status %d, want the consent page after the consent expired", p.StatusCode)
	}
}

func TestPostedAuthorizationRequest(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	params, _ := url.ParseQuery(strings.TrimPrefix(authorizePath("state", "posted"), "/authorize?"))
	login := b.post("/authorize", params)
	f := login.form(t, "username", "alice", "password", alicePW)
	if f.Action != LoginPath || f.Fields.Get("txn") == "" || f.Fields.Get("state") != "" {
		t.Fatalf("login form posts to %q with %v, want the login step with the transaction only", f.Action, f.Fields)
	}
	consent := b.submit(f)
	if !strings.Contains(consent.Body, "Allow access?") {
		t.Fatalf("status %d, want the consent page", consent.StatusCode)
	}
	loc := b.submit(consent.form(t, "action", "approve")).redirectedTo(t)
	if loc.Query().Get("state") != "posted" || loc.Query().Get("code") == "" {
		t.Fatalf("redirected to %s", loc)
	}
}

// TestASessionEndedBetweenThePages: the person's session ends (signed out
// in another tab) while the consent page is open; its answer asks them to
// sign in again, and the authorization goes on from there, in the new
// session, to the consent page and the code.
func TestASessionEndedBetweenThePages(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	consent := b.login(authorizePath(), "alice", alicePW)
	if !strings.Contains(consent.Body, "Allow access?") {
		t.Fatalf("status %d, want the consent page", consent.StatusCode)
	}
	out := b.get("/logout")
	b.submit(out.form(t))
	again := b.submit(consent.form(t, "action", "approve"))
	if again.StatusCode != http.StatusForbidden || !strings.Contains(again.Body, "Your session expired. Please sign in again.") || !strings.Contains(again.Body, `name="password"`) {
		t.Fatalf("status %d, want 403 with the login form:\n%s", again.StatusCode, again.Body)
	}
	if _, err := h.store.GetConsent(context.Background(), "alice", "demo-app", "http://127.0.0.1:8080/mcp"); err == nil {
		t.Fatal("consent stored by the answer of an ended session")
	}
	consent = b.submit(again.form(t, "username", "alice", "password", alicePW))
	if !strings.Contains(consent.Body, "Allow access?") {
		t.Fatalf("after signing in again: status %d, want the consent page", consent.StatusCode)
	}
	if loc := b.submit(consent.form(t, "action", "approve")).redirectedTo(t); loc.Query().Get("code") != "code-for-alice" || loc.Query().Get("state") != "st-1" {
		t.Fatalf("redirected to %s", loc)
	}
}

// TestAConsentFormCannotWidenTheScope: the scopes granted are those the
// transaction asked about; scope fields added to the form change nothing.
func TestAConsentFormCannotWidenTheScope(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	consent := b.login(authorizePath(), "alice", alicePW)
	loc := b.submit(consent.form(t, "action", "approve", "scope", "mcp:tools mcp:admin", "mcpauth_scope", "mcp:admin")).redirectedTo(t)
	if loc.Query().Get("granted") != "mcp:tools" {
		t.Fatalf("granted %q, want mcp:tools", loc.Query().Get("granted"))
	}
}
