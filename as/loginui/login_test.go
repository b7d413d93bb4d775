package loginui

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAGoodLoginLogsNoError: clearing the counters and ending the visitor's
// anonymous session succeed on a good login, so nothing is logged at error
// level, nor when the session's idle deadline is refreshed; the login is
// audited. Fails if a success is logged as an error.
func TestAGoodLoginLogsNoError(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	b := h.browser()
	b.login("/consents", "alice", "wrong")
	if p := b.login("/consents", "alice", alicePW); !strings.Contains(p.Body, "Signed in as") {
		t.Fatalf("status %d, want the consents page", p.StatusCode)
	}
	// A page two minutes later refreshes the session's idle deadline.
	h.clock.Advance(2 * time.Minute)
	if !signedIn(b) {
		t.Fatal("signed out two minutes after the login")
	}
	if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "event=login.succeeded") {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

// TestALoginPostedWithTheRequestInItsBody: a login form posted to
// /authorize with the authorization request in its body (RFC 6749 §3.1
// allows POST) is answered with a 303 to /authorize with those parameters
// in the query, so the next step still carries them.
func TestALoginPostedWithTheRequestInItsBody(t *testing.T) {
	h := newHarness(t, nil)
	b := h.browser()
	path := authorizePath("state", "in-body")
	f := b.get(path).form(t, "username", "alice", "password", alicePW)
	// Parameters of another request in the body change nothing: the step
	// goes on with the transaction it carries.
	params, _ := url.ParseQuery(strings.TrimPrefix(authorizePath("state", "other", "scope", "mcp:tools mcp:admin"), "/authorize?"))
	for k, vs := range params {
		f.Fields[k] = vs
	}
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+f.Action, strings.NewReader(f.Fields.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c := &http.Client{Jar: b.c.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), ContinuePath+"?txn=") {
		t.Fatalf("status %d Location %q, want 303 back to the transaction", resp.StatusCode, resp.Header.Get("Location"))
	}
	p := b.get(resp.Header.Get("Location"))
	if !strings.Contains(p.Body, "Allow access?") || strings.Contains(p.Body, "mcp:admin") {
		t.Fatalf("after the login: status %d, want the consent page for mcp:tools only", p.StatusCode)
	}
	if loc := b.submit(p.form(t, "action", "approve")).redirectedTo(t); loc.Query().Get("state") != "in-body" || loc.Query().Get("granted") != "mcp:tools" {
		t.Fatalf("redirected to %s", loc)
	}
}
