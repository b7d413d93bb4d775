package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The GET stream of a session (MCP Streamable HTTP, listening for messages
// from the server) is bound as a POST is: the caller's signed ID opens it,
// reaching the upstream with the upstream's own ID, while another user's
// request with it and the upstream's raw ID are 404 before the upstream.
func TestGatewayBindsTheGETStreamToItsSession(t *testing.T) {
	s := newStack(t, false, baseConfig+"session_key: "+sessionKey+"\n")
	alice, bob := s.token(t, "user-bot"), s.token(t, "admin-bot")
	resp := rawPost(t, s, alice, "", initialize, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(sid, ".") {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	if resp := postTo(t, s, s.gw, http.MethodPost, alice, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notification: %d", resp.StatusCode)
	}
	u, _ := url.Parse(s.resource)
	get := func(token, session string) *http.Response {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.gw.URL+u.Path, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := (&http.Client{}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for _, tc := range []struct {
		name           string
		token, session string
	}{
		{"refuses bob with alice's session ID", bob, sid},
		{"refuses alice with the upstream's raw ID", alice, rawID(sid)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(s.up.seenSessions())
			if resp := get(tc.token, tc.session); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("GET: %d, want 404", resp.StatusCode)
			}
			if got := s.up.seenSessions(); len(got) != before {
				t.Fatalf("the refused GET reached the upstream: %q", got[before:])
			}
		})
	}
	before := len(s.up.seenSessions())
	resp = get(alice, sid)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("alice's GET stream: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got := s.up.seenSessions(); len(got) != before+1 || got[before] != rawID(sid) {
		t.Fatalf("the upstream saw %q after the GET, want one request with %q", got[before:], rawID(sid))
	}
}
