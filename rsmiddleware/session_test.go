package rsmiddleware

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestSessionBinding(t *testing.T) {
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	// A stand-in for an MCP Streamable HTTP server: initialize creates a
	// session, anything else with a known session ID succeeds.
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(SessionHeader) == "" {
			w.Header().Set(SessionHeader, "session-"+string(rune('a'+n.Add(1))))
		}
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "ok")
	})
	var b SessionBinding
	srv := httptest.NewServer(mw.Wrap(b.Wrap(handler)))
	defer srv.Close()

	token := func(sub, client string) string {
		c := ks.claims()
		c["sub"], c["client_id"] = sub, client
		return ks.mint(c)
	}
	alice, aliceOtherClient, bob := token("alice", "client-1"), token("alice", "client-2"), token("bob", "client-1")
	do := func(method, tok, session string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL, strings.NewReader(rpc("tools/list", nil)))
		req.Header.Set("Authorization", "Bearer "+tok)
		if session != "" {
			req.Header.Set(SessionHeader, session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	sid := do("POST", alice, "").Header.Get(SessionHeader)
	if sid == "" {
		t.Fatal("no session created")
	}
	tests := []struct {
		name, method, token string
		status              int
	}{
		{"lets the creator use the session", "POST", alice, 200},
		{"refuses another user's session ID (hijack attempt)", "POST", bob, 404},
		{"refuses the same user through another client", "POST", aliceOtherClient, 404},
		{"refuses another user's DELETE of the session", "DELETE", bob, 404},
		{"lets the creator use the session after refusals", "POST", alice, 200},
		{"lets the creator delete the session", "DELETE", alice, 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := do(tt.method, tt.token, sid).StatusCode; got != tt.status {
				t.Fatalf("status %d, want %d", got, tt.status)
			}
		})
	}
	t.Run("forgets a deleted session", func(t *testing.T) {
		b.mu.Lock()
		_, ok := b.owner[sid]
		b.mu.Unlock()
		if ok {
			t.Fatal("deleted session still bound")
		}
	})
}

func TestSessionBindingIsBounded(t *testing.T) {
	b := SessionBinding{MaxSessions: 3}
	for i := 0; i < 10; i++ {
		b.bind(strings.Repeat("s", i+1), "alice\x00c")
	}
	if len(b.owner) > 3 {
		t.Fatalf("%d sessions kept, bound is 3", len(b.owner))
	}
	if !b.check(strings.Repeat("s", 10), "alice\x00c") || b.check(strings.Repeat("s", 10), "bob\x00c") {
		t.Fatal("most recent session lost or not bound")
	}
}

// TestSessionBindingEvictionKeepsLiveSessions: when full, sessions idle
// longer than IdleTimeout (24 h by default) go first, then the oldest; a
// session idle exactly IdleTimeout is still live; with the default
// MaxSessions two sessions are both kept. A forgotten session would be
// open to another principal.
func TestSessionBindingEvictionKeepsLiveSessions(t *testing.T) {
	t0 := time.Now()
	now := t0
	clock := func() time.Time { return now }
	at := func(d time.Duration) { now = t0.Add(d) }

	b := SessionBinding{Now: clock}
	b.bind("a", "alice")
	at(23 * time.Hour)
	b.bind("b", "bob")
	if b.check("a", "mallory") || b.check("b", "mallory") {
		t.Fatal("default bounds: a bound session was forgotten")
	}

	for _, idle := range []time.Duration{0, time.Hour} {
		b := SessionBinding{Now: clock, MaxSessions: 2, IdleTimeout: idle}
		at(0)
		b.bind("a", "alice")
		at(time.Hour)
		b.bind("b", "bob")
		at(2 * time.Hour)
		b.bind("c", "carol") // full: a is idle over 1 h (or the oldest), b is not
		if b.check("b", "mallory") || b.check("c", "mallory") {
			t.Errorf("IdleTimeout %v: a live session was dropped", idle)
		}
	}
}

// A request carrying Mcp-Session-Id more than once is refused before the
// handler: the binding checks one value, and a server that reads another
// (the last, or each of a joined list) would serve another user's session.
func TestSessionBindingRefusesSeveralSessionIDs(t *testing.T) {
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	var seen atomic.Value
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(strings.Join(r.Header.Values(SessionHeader), ","))
		if r.Header.Get(SessionHeader) == "" {
			w.Header().Set(SessionHeader, "session-"+string(rune('a'+n.Add(1))))
		}
		w.WriteHeader(http.StatusOK)
	})
	var b SessionBinding
	srv := httptest.NewServer(mw.Wrap(b.Wrap(handler)))
	defer srv.Close()
	token := func(sub string) string {
		c := ks.claims()
		c["sub"] = sub
		return ks.mint(c)
	}
	alice, bob := token("alice"), token("bob")
	do := func(tok string, sessions ...string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(rpc("tools/list", nil)))
		req.Header.Set("Authorization", "Bearer "+tok)
		for _, s := range sessions {
			req.Header.Add(SessionHeader, s)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	aliceSID := do(alice).Header.Get(SessionHeader)
	bobSID := do(bob).Header.Get(SessionHeader)
	if aliceSID == "" || bobSID == "" || aliceSID == bobSID {
		t.Fatalf("sessions %q %q", aliceSID, bobSID)
	}
	for _, tc := range []struct {
		name     string
		sessions []string
	}{
		{"refuses bob's session followed by alice's", []string{bobSID, aliceSID}},
		{"refuses an empty value followed by alice's session", []string{"", aliceSID}},
		{"refuses bob's session twice", []string{bobSID, bobSID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen.Store("")
			if got := do(bob, tc.sessions...).StatusCode; got != http.StatusBadRequest {
				t.Errorf("status %d, want 400", got)
			}
			if s := seen.Load().(string); s != "" {
				t.Errorf("the handler was reached with Mcp-Session-Id %q", s)
			}
		})
	}
	if got := do(bob, bobSID).StatusCode; got != http.StatusOK {
		t.Errorf("bob's own session: %d, want 200", got)
	}
}

// A DELETE the server refuses (405: clients may not end its sessions)
// leaves the session alive, and bound: another user presenting its ID
// still gets 404. One the server accepts, or does not know, is forgotten.
func TestSessionBindingKeepsASessionTheServerDidNotEnd(t *testing.T) {
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	deleteStatus := http.StatusMethodNotAllowed
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.WriteHeader(deleteStatus)
			return
		}
		if r.Header.Get(SessionHeader) == "" {
			w.Header().Set(SessionHeader, "session-"+string(rune('a'+n.Add(1))))
		}
		w.WriteHeader(http.StatusOK)
	})
	var b SessionBinding
	srv := httptest.NewServer(mw.Wrap(b.Wrap(handler)))
	defer srv.Close()
	token := func(sub string) string {
		c := ks.claims()
		c["sub"] = sub
		return ks.mint(c)
	}
	alice, bob := token("alice"), token("bob")
	do := func(method, tok, session string) int {
		req, _ := http.NewRequest(method, srv.URL, strings.NewReader(rpc("tools/list", nil)))
		req.Header.Set("Authorization", "Bearer "+tok)
		if session != "" {
			req.Header.Set(SessionHeader, session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if session == "" {
			return int(n.Load())
		}
		return resp.StatusCode
	}
	do("POST", alice, "")
	sid := "session-" + string(rune('a'+n.Load()))
	if got := do("DELETE", alice, sid); got != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d", got)
	}
	if got := do("POST", bob, sid); got != http.StatusNotFound {
		t.Errorf("bob with alice's session after a refused DELETE: %d, want 404", got)
	}
	deleteStatus = http.StatusNoContent
	if got := do("DELETE", alice, sid); got != http.StatusNoContent {
		t.Fatalf("DELETE: %d", got)
	}
	b.mu.Lock()
	_, bound := b.owner[sid]
	b.mu.Unlock()
	if bound {
		t.Errorf("a session the server ended is still bound")
	}
}
