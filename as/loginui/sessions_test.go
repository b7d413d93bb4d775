package loginui

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// copyOf is a second browser holding a copy of b's cookies, as an attacker
// who lifted them would.
func (b *browser) copyOf() *browser {
	c := b.h.browser()
	u, _ := url.Parse(b.h.srv.URL)
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(u, b.c.Jar.Cookies(u))
	c.c.Jar = jar
	return c
}

func signedIn(b *browser) bool {
	b.h.t.Helper()
	return strings.Contains(b.get("/consents").Body, "Signed in as")
}

// TestLogoutEndsTheSessionEverywhere: after logout a copied session cookie
// no longer signs anyone in, since the session is gone from the store.
func TestLogoutEndsTheSessionEverywhere(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	b.login("/consents", "alice", alicePW)
	stolen := b.copyOf()
	if !signedIn(stolen) {
		t.Fatal("the copied cookie does not sign in before logout")
	}
	if got := b.submit(b.get("/logout").form(t)); got.StatusCode != http.StatusOK || !strings.Contains(got.Body, "You are signed out.") {
		t.Fatalf("logout: %d", got.StatusCode)
	}
	if signedIn(stolen) {
		t.Fatal("a copy of the cookie still works after logout")
	}
	if p := stolen.get(authorizePath()); !strings.Contains(p.Body, `name="password"`) {
		t.Fatal("the copied cookie skips the login at /authorize after logout")
	}
}

// TestSessionLifetimes: a session ends after SessionIdleTTL without use and
// after SessionTTL in all, however busy.
func TestSessionLifetimes(t *testing.T) {
	cfg := func(c *Config) { c.SessionIdleTTL = 30 * time.Minute; c.SessionTTL = 2 * time.Hour }
	t.Run("idle", func(t *testing.T) {
		h := newHarness(t, cfg)
		b := h.browser()
		b.login("/consents", "alice", alicePW)
		h.clock.Advance(20 * time.Minute)
		if !signedIn(b) {
			t.Fatal("signed out after 20 minutes")
		}
		h.clock.Advance(20 * time.Minute)
		if !signedIn(b) {
			t.Fatal("signed out 20 minutes after the last use")
		}
		h.clock.Advance(31 * time.Minute)
		if signedIn(b) {
			t.Fatal("still signed in after 31 idle minutes")
		}
	})
	t.Run("absolute", func(t *testing.T) {
		h := newHarness(t, cfg)
		b := h.browser()
		b.login("/consents", "alice", alicePW)
		for i := range 5 {
			h.clock.Advance(20 * time.Minute)
			if !signedIn(b) {
				t.Fatalf("signed out after %d busy minutes", 20*(i+1))
			}
		}
		h.clock.Advance(21 * time.Minute)
		if signedIn(b) {
			t.Fatal("still signed in after the absolute lifetime")
		}
	})
}

// TestALoginFormIsGoodForItsFlowLifetime: the visitor's session outlives
// the forms it carries, so a login form posted nine minutes after it was
// served (FlowTTL 10 minutes) still signs in.
func TestALoginFormIsGoodForItsFlowLifetime(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	f := b.get("/consents").form(t, "username", "alice", "password", alicePW)
	h.clock.Advance(9 * time.Minute)
	if got := b.submit(f); got.StatusCode != http.StatusOK || !strings.Contains(got.Body, "Signed in as") {
		t.Fatalf("status %d, want the consents page", got.StatusCode)
	}
}

// TestConsentsPageListsAndEndsSessions: the person sees where they are
// signed in and can end another browser's session from /consents.
func TestConsentsPageListsAndEndsSessions(t *testing.T) {
	h := newHarness(t, nil)
	a, other := h.browser(), h.browser()
	a.login("/consents", "alice", alicePW)
	other.login("/consents", "alice", alicePW)
	bob := h.browser()
	bob.login("/consents", "bob", bobPW)
	page := a.get("/consents")
	var ends []form
	for _, f := range page.forms() {
		if f.Fields.Get(stepField) == "end_session" {
			ends = append(ends, f)
		}
	}
	if len(ends) != 2 || strings.Count(page.Body, "(this browser)") != 1 {
		t.Fatalf("%d sessions listed, want alice's 2:\n%s", len(ends), page.Body)
	}
	// The form names a session by its stored id; bob's cannot be ended
	// by alice even if she learns it.
	bobs := bob.get("/consents").forms()
	for _, f := range bobs {
		if id := f.Fields.Get("session_id"); id != "" {
			forged := form{Action: ends[0].Action, Fields: cloneValues(ends[0].Fields)}
			forged.Fields.Set("session_id", id)
			a.submit(forged)
		}
	}
	if !signedIn(bob) {
		t.Fatal("alice ended bob's session")
	}
	for _, f := range ends {
		if !strings.Contains(page.Body, `value="`+f.Fields.Get("session_id")+`">`+"\n"+`<button type="submit" class="secondary">End this session`) {
			continue
		}
		if got := a.submit(f); got.StatusCode != http.StatusOK {
			t.Fatalf("ending the other session: %d", got.StatusCode)
		}
	}
	if signedIn(other) {
		t.Fatal("the other browser is still signed in")
	}
	if !signedIn(a) {
		t.Fatal("ending the other session signed this browser out")
	}
	noCSRF := form{Action: ends[0].Action, Fields: cloneValues(ends[0].Fields)}
	noCSRF.Fields.Del("csrf")
	if got := a.submit(noCSRF); got.StatusCode != http.StatusForbidden {
		t.Fatalf("ending a session without CSRF: %d, want 403", got.StatusCode)
	}
}

// TestClientErrorPageLinks: the link back works for a private-use scheme
// (html/template alone would blank it) and is left out for schemes that run
// code.
func TestClientErrorPageLinks(t *testing.T) {
	h := newHarness(t, nil)
	for _, tc := range []struct{ back, want string }{
		{"cursor://anysphere.cursor-mcp/cb?error=x", `href="cursor://anysphere.cursor-mcp/cb?error=x"`},
		{"http://127.0.0.1:7777/cb?error=x", `href="http://127.0.0.1:7777/cb?error=x"`},
		{"javascript:alert(1)", ""},
		{"data:text/html,hi", ""},
		{"/cb?error=x", ""},
		{"cb?error=x", ""},
		{"%zz", ""},
	} {
		rec := httptest.NewRecorder()
		h.ui.ClientErrorPage(rec, http.StatusBadRequest, "Error", "", tc.back)
		body := rec.Body.String()
		if tc.want == "" {
			if strings.Contains(body, "Return to") || strings.Contains(body, "alert") || strings.Contains(body, "data:") {
				t.Errorf("%s: a link was rendered:\n%s", tc.back, body)
			}
			continue
		}
		if !strings.Contains(body, tc.want) {
			t.Errorf("%s: no %s in:\n%s", tc.back, tc.want, body)
		}
	}
}

// frozenClock is a time source that moves only when told, starting on a
// whole second so lifetimes in whole seconds end exactly on a tick.
type frozenClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFrozenClock() *frozenClock { return &frozenClock{now: time.Unix(time.Now().Unix(), 0)} }

func (c *frozenClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *frozenClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// TestAnAnonymousSessionEndsAtItsExpiry: the session a visitor gets with
// the login form lasts three flow lifetimes, up to the second before its
// expiry and not at it.
func TestAnAnonymousSessionEndsAtItsExpiry(t *testing.T) {
	clk := newFrozenClock()
	start := clk.Now()
	h := newHarness(t, func(c *Config) { c.Now = clk.Now })
	early, late := h.browser(), h.browser()
	early.get("/consents")
	late.get("/consents")
	clk.Set(start.Add(25 * time.Minute))
	fe := early.get("/consents").form(t, "username", "alice", "password", alicePW)
	fl := late.get("/consents").form(t, "username", "alice", "password", alicePW)
	clk.Set(start.Add(30*time.Minute - time.Second))
	if got := early.submit(fe); !strings.Contains(got.Body, "Signed in as") {
		t.Fatalf("a second before the session's expiry: status %d, want signed in", got.StatusCode)
	}
	clk.Set(start.Add(30 * time.Minute))
	if got := late.submit(fl); got.StatusCode != http.StatusForbidden || strings.Contains(got.Body, "Signed in as") {
		t.Fatalf("at the session's expiry: status %d, want 403", got.StatusCode)
	}
}

// TestTheIdleDeadlineIsRefreshedAfterAMinute: a page a minute after the
// last refresh moves the idle deadline, so the session outlives the first
// deadline.
func TestTheIdleDeadlineIsRefreshedAfterAMinute(t *testing.T) {
	clk := newFrozenClock()
	start := clk.Now()
	h := newHarness(t, func(c *Config) { c.Now = clk.Now; c.SessionIdleTTL = 30 * time.Minute })
	b := h.browser()
	b.login("/consents", "alice", alicePW)
	clk.Set(start.Add(time.Minute))
	if !signedIn(b) {
		t.Fatal("signed out a minute after the login")
	}
	clk.Set(start.Add(30*time.Minute + 30*time.Second))
	if !signedIn(b) {
		t.Fatal("signed out 29.5 minutes after the last page, with an idle lifetime of 30")
	}
}

// TestTheStoredSessionIsTheAuthority: a stored session of another subject,
// or one whose absolute lifetime is over, signs nobody in, whatever the
// cookie says.
func TestTheStoredSessionIsTheAuthority(t *testing.T) {
	h := newHarnessAt(t, func(h *harness, c *Config) { c.Sessions = h.store })
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(*storage.Session)
	}{
		{"a record of another subject", func(s *storage.Session) { s.Subject = "bob" }},
		{"a record past its absolute lifetime", func(s *storage.Session) { s.ExpiresAt = h.clock.Now().Add(-time.Second) }},
	} {
		b := h.browser()
		b.login("/consents", "alice", alicePW)
		list, err := h.store.ListSessions(ctx, "alice")
		if err != nil || len(list) != 1 {
			t.Fatalf("%s: %d stored sessions of alice (%v), want 1", tc.name, len(list), err)
		}
		rec := list[0]
		tc.change(&rec)
		if err := h.store.DeleteSession(ctx, "alice", rec.ID); err != nil {
			t.Fatal(err)
		}
		if err := h.store.CreateSession(ctx, &rec); err != nil {
			t.Fatal(err)
		}
		if signedIn(b) {
			t.Errorf("%s: the cookie still signs in", tc.name)
		}
		if err := h.store.DeleteSession(ctx, "", rec.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAFormEndsAtItsFlowTokensExpiry: a login form is accepted up to the
// second before its flow token expires (FlowTTL after it was served) and
// refused at that second.
func TestAFormEndsAtItsFlowTokensExpiry(t *testing.T) {
	clk := newFrozenClock()
	start := clk.Now()
	h := newHarness(t, func(c *Config) { c.Now = clk.Now })
	early, late := h.browser(), h.browser()
	fe := early.get("/consents").form(t, "username", "alice", "password", alicePW)
	fl := late.get("/consents").form(t, "username", "alice", "password", alicePW)
	clk.Set(start.Add(10*time.Minute - time.Second))
	if got := early.submit(fe); !strings.Contains(got.Body, "Signed in as") {
		t.Fatalf("a second before the form's expiry: status %d, want signed in", got.StatusCode)
	}
	clk.Set(start.Add(10 * time.Minute))
	if got := late.submit(fl); got.StatusCode != http.StatusForbidden || !strings.Contains(got.Body, "This sign-in form has expired") {
		t.Fatalf("at the form's expiry: status %d, want 403", got.StatusCode)
	}
}
