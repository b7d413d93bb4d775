package rsmiddleware

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// principalFrom puts a principal named by the test's X-Sub header in the
// context, as Middleware would after verifying a token; a request without
// X-Sub carries none.
func principalFrom(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sub := r.Header.Get("X-Sub"); sub != "" {
			r = r.WithContext(ContextWithPrincipal(r.Context(), &Principal{Subject: sub, ClientID: "client-1"}, "token-of-"+sub))
		}
		next.ServeHTTP(w, r)
	})
}

func send(t *testing.T, srv *httptest.Server, method, sub, session string, header ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL, nil)
	if sub != "" {
		req.Header.Set("X-Sub", sub)
	}
	if session != "" {
		req.Header.Set(SessionHeader, session)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// Only a CORS preflight passes the binding without a principal; any other
// request without one (the binding wrapped outside Middleware) is 401 and
// never reaches the handler.
func TestSessionBindingNeedsAPrincipal(t *testing.T) {
	for _, key := range [][]byte{nil, keyA} {
		reached := 0
		b := &SessionBinding{Key: key}
		srv := httptest.NewServer(principalFrom(b.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached++
			w.WriteHeader(http.StatusNoContent)
		}))))
		if got := send(t, srv, http.MethodPost, "", "").StatusCode; got != http.StatusUnauthorized || reached != 0 {
			t.Errorf("key %v: a POST without a principal: %d, handler reached %d times; want 401, 0", key != nil, got, reached)
		}
		if got := send(t, srv, http.MethodOptions, "", "").StatusCode; got != http.StatusUnauthorized || reached != 0 {
			t.Errorf("key %v: an OPTIONS that is no preflight: %d, handler reached %d times; want 401, 0", key != nil, got, reached)
		}
		if got := send(t, srv, http.MethodOptions, "", "", "Origin", "https://app.example", "Access-Control-Request-Method", "POST").StatusCode; got != http.StatusNoContent || reached != 1 {
			t.Errorf("key %v: a preflight: %d, handler reached %d times; want 204, 1", key != nil, got, reached)
		}
		srv.Close()
	}
}

// Interim answers are 1xx but 101 (RFC 9110 §15.2): 100 and 199 included.
func TestInterimCodes(t *testing.T) {
	for code, want := range map[int]bool{99: false, 100: true, 101: false, 103: true, 199: true, 200: false, 204: false} {
		if got := interim(code); got != want {
			t.Errorf("interim(%d) = %v, want %v", code, got, want)
		}
	}
}

// A session ID whose MAC part has the wrong length, or that has no '.',
// is 404 before any decoding; so is an empty id with its valid MAC, which
// the binding never hands out (the MAC is HMAC-SHA256 under Key of
// "mcp-session" 0x00 owner 0x00 id, as SessionBinding documents).
func TestSignedSessionIDShapes(t *testing.T) {
	reached := 0
	b := &SessionBinding{Key: keyA}
	srv := httptest.NewServer(principalFrom(b.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		if r.Header.Get(SessionHeader) == "" {
			w.Header().Set(SessionHeader, "s1")
		}
		w.WriteHeader(http.StatusOK)
	}))))
	defer srv.Close()
	sid := send(t, srv, http.MethodPost, "alice", "").Header.Get(SessionHeader)
	macOf := func(owner, id string) string {
		h := hmac.New(sha256.New, keyA)
		h.Write([]byte("mcp-session\x00" + owner + "\x00" + id))
		return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	}
	owner := ownerKey(&Principal{Subject: "alice", ClientID: "client-1"})
	if want := "s1." + macOf(owner, "s1"); sid != want {
		t.Fatalf("signed ID %q, want %q", sid, want)
	}
	_, mac, _ := strings.Cut(sid, ".")
	if got := send(t, srv, http.MethodPost, "alice", sid).StatusCode; got != http.StatusOK {
		t.Fatalf("the signed ID: %d, want 200", got)
	}
	for name, id := range map[string]string{
		"a MAC one character too long":   sid + "A",
		"a MAC four characters too long": sid + "AAAA",
		"a MAC alone, without a dot":     mac,
		"the MAC of an empty id":         "." + macOf(owner, ""),
	} {
		before := reached
		if got := send(t, srv, http.MethodPost, "alice", id).StatusCode; got != http.StatusNotFound || reached != before {
			t.Errorf("%s (%q): %d, handler reached: %v; want 404, not reached", name, id, got, reached != before)
		}
	}
}

// A DELETE the server refuses with a body (http.Error, 405) leaves the
// session bound; one answered with a body and no WriteHeader (200) ends it.
func TestSessionBindingReadsTheStatusOfADeleteWithABody(t *testing.T) {
	deleteStatus := http.StatusMethodNotAllowed
	b := &SessionBinding{}
	srv := httptest.NewServer(principalFrom(b.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodDelete && deleteStatus == http.StatusOK:
			_, _ = w.Write([]byte("ended"))
		case r.Method == http.MethodDelete:
			http.Error(w, "clients may not end sessions", deleteStatus)
		default:
			w.Header().Set(SessionHeader, "s1")
			w.WriteHeader(http.StatusOK)
		}
	}))))
	defer srv.Close()
	send(t, srv, http.MethodPost, "alice", "")
	if got := send(t, srv, http.MethodDelete, "alice", "s1").StatusCode; got != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d, want 405", got)
	}
	if got := send(t, srv, http.MethodPost, "bob", "s1").StatusCode; got != http.StatusNotFound {
		t.Errorf("bob with alice's session after a refused DELETE: %d, want 404", got)
	}
	deleteStatus = http.StatusOK
	if got := send(t, srv, http.MethodDelete, "alice", "s1").StatusCode; got != http.StatusOK {
		t.Fatalf("DELETE: %d, want 200", got)
	}
	if !b.check("s1", "someone else") {
		t.Error("a session the server ended with 200 and a body is still bound")
	}
}

// Binding an ID again refreshes the session of its owner only: a handler
// handing out another owner's ID keeps that session no fresher, and the
// owner's own refresh keeps it among the live ones when the binding is full.
func TestSessionBindingRefreshesOnlyItsOwnersSession(t *testing.T) {
	t0 := time.Now()
	now := t0
	at := func(d time.Duration) { now = t0.Add(d) }
	newBinding := func() *SessionBinding {
		at(0)
		b := &SessionBinding{Now: func() time.Time { return now }, MaxSessions: 2, IdleTimeout: 10 * time.Minute}
		b.bind("x", "alice")
		at(time.Minute)
		b.bind("w", "bob")
		return b
	}

	b := newBinding()
	at(9 * time.Minute)
	b.bind("x", "bob") // alice's: not refreshed
	at(10*time.Minute + 30*time.Second)
	b.bind("z", "carol") // full: x is idle past 10 min and goes, w is live
	if b.check("w", "mallory") {
		t.Error("bob's live session was dropped for alice's idle one")
	}
	if !b.check("x", "bob") {
		t.Error("alice's idle session was kept")
	}

	b = newBinding()
	at(9 * time.Minute)
	b.bind("x", "alice") // refreshed
	at(10*time.Minute + 30*time.Second)
	b.bind("z", "carol") // full, none idle: w is the least recently used
	if b.check("x", "mallory") {
		t.Error("alice's refreshed session was dropped")
	}
}

// When the binding is full, every session idle past IdleTimeout goes, not
// only the first.
func TestSessionBindingDropsEveryIdleSessionWhenFull(t *testing.T) {
	t0 := time.Now()
	now := t0
	at := func(d time.Duration) { now = t0.Add(d) }
	b := &SessionBinding{Now: func() time.Time { return now }, MaxSessions: 3, IdleTimeout: 10 * time.Minute}
	b.bind("x", "alice")
	at(time.Minute)
	b.bind("y", "alice")
	at(20 * time.Minute)
	b.bind("w", "bob")
	b.bind("z", "carol")
	if len(b.owner) != 2 || !b.check("x", "mallory") || !b.check("y", "mallory") || b.check("w", "mallory") || b.check("z", "mallory") {
		t.Errorf("%d sessions kept; want w and z, bound", len(b.owner))
	}
}
