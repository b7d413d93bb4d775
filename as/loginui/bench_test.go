package loginui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// BenchmarkAuthorizeRememberedConsent is the path of a returning person:
// decode the session cookie, look up the stored session and the consent,
// answer.
func BenchmarkAuthorizeRememberedConsent(b *testing.B) {
	h := newHarness(b, nil)
	if err := h.store.PutConsent(context.Background(), &storage.Consent{Subject: "alice", ClientID: "demo-app", Resource: "http://127.0.0.1:8080/mcp",
		Scopes: []string{"mcp:tools"}, RedirectURIs: []string{"https://app.example/callback"}, GrantedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	cookie := &http.Cookie{Name: "mcpauth_session", Value: h.encodeSession(h.storedSession(b, "alice"))}
	path := authorizePath()
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.AddCookie(cookie)
		rec := httptest.NewRecorder()
		h.serveAuthorize(rec, r)
		if rec.Code != http.StatusSeeOther || !strings.Contains(rec.Header().Get("Location"), "code=") {
			b.Fatalf("not authorized: status %d", rec.Code)
		}
	}
}

// BenchmarkLoginPage renders the login form for a new visitor (session,
// CSRF token and transaction sealed, template executed).
func BenchmarkLoginPage(b *testing.B) {
	h := newHarness(b, nil)
	path := authorizePath()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		if h.serveAuthorize(rec, httptest.NewRequest(http.MethodGet, path, nil)); rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}

// BenchmarkFailedLogin compares a wrong password for a known user with an
// unknown user: both compute one argon2id hash, so they take about as long.
func BenchmarkFailedLogin(b *testing.B) {
	h := newHarness(b, nil)
	for _, bc := range []struct{ name, user string }{
		{"known user wrong password", "alice"},
		{"unknown user", "nobody"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if ok, err := h.ui.checkPassword(context.Background(), bc.user, "wrong"); ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
