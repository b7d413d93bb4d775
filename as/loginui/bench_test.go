package loginui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

func benchPrompt() Prompt {
	return Prompt{
		ClientID: "demo-app", ClientName: "Demo app", RedirectURI: "https://app.example/callback",
		RedirectHost: "app.example", Resource: "http://127.0.0.1:8080/mcp", ResourceName: "Example MCP server",
		Scopes: []string{"mcp:tools"},
	}
}

// BenchmarkAuthorizeRememberedConsent is the path of a returning person:
// decode the session cookie, look up the stored session and the consent,
// answer.
func BenchmarkAuthorizeRememberedConsent(b *testing.B) {
	h := newHarness(b, nil)
	p := benchPrompt()
	if err := h.store.PutConsent(context.Background(), &storage.Consent{Subject: "alice", ClientID: p.ClientID, Resource: p.Resource, Scopes: p.Scopes, GrantedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	cookie := &http.Cookie{Name: "mcpauth_session", Value: h.encodeSession(h.storedSession(b, "alice"))}
	path := authorizePath()
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.AddCookie(cookie)
		if _, ok := h.ui.Authorize(httptest.NewRecorder(), r, p); !ok {
			b.Fatal("not authorized")
		}
	}
}

// BenchmarkLoginPage renders the login form for a new visitor (session,
// CSRF and flow token minted, template executed).
func BenchmarkLoginPage(b *testing.B) {
	h := newHarness(b, nil)
	p := benchPrompt()
	path := authorizePath()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		if _, ok := h.ui.Authorize(rec, httptest.NewRequest(http.MethodGet, path, nil), p); ok || rec.Code != http.StatusOK {
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
