package loginui

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

func sessionCount(t *testing.T, s *memory.Store, subject string) int {
	t.Helper()
	list, err := s.ListSessions(context.Background(), subject)
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// recordOnTheStore makes the harness record logins and keep sessions in
// its store.
func recordOnTheStore(c *Config) {
	s := c.Consents.(*memory.Store)
	c.Records, c.Sessions = s, s
}

func TestLoginsAreRecordedWithFirstAndLastSeen(t *testing.T) {
	h := newHarness(t, recordOnTheStore)
	ctx := context.Background()
	first := h.clock.Now()
	if p := h.browser().login(authorizePath(), "alice", alicePW); p.StatusCode != http.StatusOK || !strings.Contains(p.Body, "Allow access?") {
		t.Fatalf("first login: %d", p.StatusCode)
	}
	u, err := h.store.GetUser(ctx, "alice")
	if err != nil {
		t.Fatalf("no record after the first login: %v", err)
	}
	if u.Upstream != "" || u.Disabled || u.FirstSeen.Before(first.Add(-time.Second)) || !u.FirstSeen.Equal(u.LastSeen) {
		t.Fatalf("record after the first login: %+v", u)
	}
	h.clock.Advance(time.Hour)
	if p := h.browser().login(authorizePath(), "alice", alicePW); p.StatusCode != http.StatusOK {
		t.Fatalf("second login: %d", p.StatusCode)
	}
	again, err := h.store.GetUser(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !again.FirstSeen.Equal(u.FirstSeen) || again.LastSeen.Sub(u.LastSeen) < time.Hour-time.Second {
		t.Fatalf("after a second login an hour later: first %v last %v (before: %v, %v)", again.FirstSeen, again.LastSeen, u.FirstSeen, u.LastSeen)
	}
	// A wrong password records nothing.
	p := h.browser().login(authorizePath(), "bob", "wrong password")
	if p.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d", p.StatusCode)
	}
	if _, err := h.store.GetUser(ctx, "bob"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a failed login left a record: %v", err)
	}
}

func TestARecordDisabledByAnOperatorCannotLogIn(t *testing.T) {
	h := newHarness(t, recordOnTheStore)
	if err := h.store.SetUserDisabled(context.Background(), "alice", true); err != nil {
		t.Fatal(err)
	}
	p := h.browser().login(authorizePath(), "alice", alicePW)
	if p.StatusCode != http.StatusUnauthorized || !strings.Contains(p.Body, "Incorrect username or password.") || !strings.Contains(p.Body, `name="password"`) {
		t.Fatalf("login of a disabled record: %d\n%s", p.StatusCode, p.Body)
	}
	if n := sessionCount(t, h.store, "alice"); n != 0 {
		t.Fatalf("%d sessions stored for a refused login", n)
	}
	// Another person is not affected.
	if p := h.browser().login(authorizePath(), "bob", bobPW); p.StatusCode != http.StatusOK {
		t.Fatalf("login of bob: %d", p.StatusCode)
	}
	if err := h.store.SetUserDisabled(context.Background(), "alice", false); err != nil {
		t.Fatal(err)
	}
	if p := h.browser().login(authorizePath(), "alice", alicePW); p.StatusCode != http.StatusOK {
		t.Fatalf("login after enabling: %d", p.StatusCode)
	}
}

func TestALoginThatCannotBeRecordedIsRefusedWithoutASession(t *testing.T) {
	sessions := memory.New()
	down := memory.New()
	down.Close() // a store that answers storage.ErrUnavailable
	h := newHarness(t, func(c *Config) { c.Records, c.Sessions = down, sessions })
	p := h.browser().login(authorizePath(), "alice", alicePW)
	if p.StatusCode != http.StatusServiceUnavailable || !strings.Contains(p.Body, "Temporarily unavailable") || strings.Contains(p.Body, "memory") {
		t.Fatalf("login with the records unavailable: %d\n%s", p.StatusCode, p.Body)
	}
	if n := sessionCount(t, sessions, "alice"); n != 0 {
		t.Fatalf("%d sessions stored for a login that was not recorded", n)
	}
}
