package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// A console session ends, before any token is looked at, once
// admin.console_session_ttl has passed since the sign-in, and when the
// sign-in session at the server is gone, has ended or is someone else's.
func TestSessionEndsWithItsTTLAndTheServersSession(t *testing.T) {
	c := listConsole(t, 0)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	c.cfg.SessionTTL = 8 * time.Hour
	st := c.cfg.Sessions.(storage.SessionStore)
	ctx := context.Background()
	for _, s := range []storage.Session{
		{ID: "live", Subject: "alice", CreatedAt: now.Add(-time.Hour), LastSeenAt: now, IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)},
		{ID: "idle", Subject: "alice", CreatedAt: now.Add(-3 * time.Hour), LastSeenAt: now.Add(-3 * time.Hour), IdleExpiresAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour)},
	} {
		if err := st.CreateSession(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		s    session
	}{
		{"after console_session_ttl", session{Subject: "alice", SignedIn: now.Add(-8 * time.Hour).Unix(), ASSession: "live"}},
		{"when the server's session is gone", session{Subject: "alice", SignedIn: now.Unix(), ASSession: "logged-out"}},
		{"when the server's session is idle", session{Subject: "alice", SignedIn: now.Unix(), ASSession: "idle"}},
		{"when the server's session is another person's", session{Subject: "mallory", SignedIn: now.Unix(), ASSession: "live"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A cookie the console sealed itself, at the time of the sign-in.
			rec := httptest.NewRecorder()
			tc.s.CSRF = "x"
			if err := c.setCookie(rec, sessionCookie, &tc.s, time.Hour); err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/console/", nil)
			for _, ck := range rec.Result().Cookies() {
				req.AddCookie(ck)
			}
			w := httptest.NewRecorder()
			c.ServeHTTP(w, req)
			if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), `id="signin"`) {
				t.Fatalf("%d\n%s", w.Code, w.Body)
			}
			if ck := w.Result().Cookies(); len(ck) != 1 || ck[0].Name != sessionCookie || ck[0].MaxAge >= 0 {
				t.Fatalf("the cookie is not cleared: %v", ck)
			}
		})
	}
	// A cookie sealed under another secret is nobody's session.
	other := listConsole(t, 0)
	other.cfg.Secret = []byte(strings.Repeat("o", 32))
	forged := httptest.NewRecorder()
	o2, err := New(other.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o2.setCookie(forged, sessionCookie, &session{Subject: "alice", SignedIn: now.Unix(), ASSession: "live", CSRF: "x"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/console/keys/rotate", strings.NewReader("csrf=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(forged.Result().Cookies()[0])
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "Not signed in") {
		t.Fatalf("a cookie of another secret: %d\n%s", w.Code, w.Body)
	}
}

// Over https the cookies are Secure, with the __Host- prefix and path /;
// over http scoped to the console's pages. Both are HttpOnly and
// SameSite=Lax.
func TestCookieAttributes(t *testing.T) {
	for _, tc := range []struct{ base, name, path string }{
		{"http://127.0.0.1:9001/console", "mcpauth_console_signin", "/console/"},
		{"https://admin.example/console", "__Host-mcpauth_console_signin", "/"},
	} {
		c := listConsole(t, 0)
		cfg := c.cfg
		cfg.BaseURL = tc.base
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequest("GET", "/console/signin", nil))
		cks := w.Result().Cookies()
		if w.Code != http.StatusSeeOther || len(cks) != 1 {
			t.Fatalf("%s: %d %v", tc.base, w.Code, cks)
		}
		ck := cks[0]
		if ck.Name != tc.name || ck.Path != tc.path || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Secure != strings.HasPrefix(tc.base, "https") {
			t.Errorf("%s: %+v", tc.base, ck)
		}
		loc := w.Header().Get("Location")
		for _, want := range []string{"code_challenge_method=S256", "scope=admin", "resource=r", "client_id=c", "redirect_uri=" + url.QueryEscape(tc.base+"/callback")} {
			if !strings.Contains(loc, want) {
				t.Errorf("%s: the authorization request %s lacks %s", tc.base, loc, want)
			}
		}
	}
}
