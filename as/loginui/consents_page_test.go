package loginui

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTheConsentsPageSignsOutADisabledUpstreamPerson: once an operator
// disables the record of a person signed in through a provider, /consents
// shows the sign-in page instead of their consents and sessions.
func TestTheConsentsPageSignsOutADisabledUpstreamPerson(t *testing.T) {
	e := newUpstreamEnv(t, false, "")
	b := e.browser()
	at := e.toProvider(b, "/consents")
	cb, err := e.op.SignIn(b.c, at.String(), "alice", "alice-pw")
	if err != nil {
		t.Fatal(err)
	}
	if p := b.open(cb); p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "Signed in as") {
		t.Fatalf("after the callback: %d\n%s", p.StatusCode, p.Body)
	}
	if err := e.store.SetUserDisabled(context.Background(), "corp:u-alice", true); err != nil {
		t.Fatal(err)
	}
	p := b.get("/consents")
	if p.StatusCode != http.StatusOK || strings.Contains(p.Body, "Signed in as") || strings.Contains(p.Body, "Applications with access") || !upstreamFormRE.MatchString(p.Body) {
		t.Fatalf("/consents for a disabled person: %d\n%s", p.StatusCode, p.Body)
	}
}

// TestTheConsentsPageListsOnlyLiveSessions: a session past its idle
// lifetime is not listed, though its absolute lifetime has not ended, and
// the live sessions after it in the list (older ones still in use) are.
func TestTheConsentsPageListsOnlyLiveSessions(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.SessionIdleTTL = 30 * time.Minute; c.SessionTTL = 12 * time.Hour })
	old, idle, current := h.browser(), h.browser(), h.browser()
	old.login("/consents", "alice", alicePW)
	h.clock.Advance(20 * time.Minute)
	idle.login("/consents", "alice", alicePW)
	h.clock.Advance(5 * time.Minute)
	if !signedIn(old) {
		t.Fatal("the oldest session ended after 25 idle minutes")
	}
	h.clock.Advance(29 * time.Minute)
	// Now the second session was last used 34 minutes ago; the oldest 29.
	current.login("/consents", "alice", alicePW)
	page := current.get("/consents")
	n := 0
	for _, f := range page.forms() {
		if f.Fields.Get(stepField) == "end_session" {
			n++
		}
	}
	if page.StatusCode != http.StatusOK || n != 2 || !strings.Contains(page.Body, "(this browser)") {
		t.Fatalf("%d sessions listed, want this browser's and the oldest:\n%s", n, page.Body)
	}
}
