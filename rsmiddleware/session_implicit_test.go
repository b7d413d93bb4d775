package rsmiddleware

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestSessionBindingSeesAnAnswerTheHandlerNeverWrote: a handler that sets
// Mcp-Session-Id and returns without writing gets the 200 net/http sends
// for it, and its session ID is bound as any other: signed with Key,
// recorded without it, dropped for a stateless request.
func TestSessionBindingSeesAnAnswerTheHandlerNeverWrote(t *testing.T) {
	for _, key := range [][]byte{keyA, nil} {
		name := "signed"
		if key == nil {
			name = "recorded"
		}
		t.Run(name, func(t *testing.T) {
			f := newSignedFixture(t)
			var n atomic.Int32
			quiet := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get(SessionHeader) == "" {
					m := n.Add(1)
					w.Header().Set(SessionHeader, "quiet-"+string(rune('a'+m)))
				}
				// Returns without WriteHeader or Write: net/http sends 200.
			})
			srv := httptest.NewServer(f.mw.Wrap((&SessionBinding{Key: key}).Wrap(quiet)))
			t.Cleanup(srv.Close)
			alice, bob := f.token("alice", "c1"), f.token("bob", "c1")

			resp := f.do(srv, http.MethodPost, alice, "")
			id := resp.Header.Get(SessionHeader)
			if resp.StatusCode != 200 || id == "" {
				t.Fatalf("initialize: %d %q", resp.StatusCode, id)
			}
			if key != nil && id == "quiet-b" {
				t.Fatalf("the client got the handler's unsigned ID %q", id)
			}
			if resp := f.do(srv, http.MethodPost, bob, id); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("another subject with alice's session: %d, want 404", resp.StatusCode)
			}
			if resp := f.do(srv, http.MethodPost, alice, id); resp.StatusCode != 200 {
				t.Fatalf("the session's owner: %d", resp.StatusCode)
			}
			resp = f.do(srv, http.MethodPost, alice, "", "MCP-Protocol-Version", "2026-07-28")
			if got := resp.Header.Values(SessionHeader); len(got) != 0 {
				t.Fatalf("a stateless answer carries Mcp-Session-Id %q", got)
			}
		})
	}
}

// TestSessionBindingHandsOutOneSessionID: a handler answer with more than
// one Mcp-Session-Id field reaches the client with one, the ID the binding
// bound (signed with Key, recorded without), so no ID reaches the client
// unbound.
func TestSessionBindingHandsOutOneSessionID(t *testing.T) {
	for _, key := range [][]byte{keyA, nil} {
		name := "signed"
		if key == nil {
			name = "recorded"
		}
		t.Run(name, func(t *testing.T) {
			f := newSignedFixture(t)
			for _, ids := range [][]string{{"two-a", "two-b"}, {"", "two-c"}} {
				twice := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get(SessionHeader) == "" {
						w.Header()[SessionHeader] = ids
					}
					w.WriteHeader(http.StatusOK)
				})
				srv := httptest.NewServer(f.mw.Wrap((&SessionBinding{Key: key}).Wrap(twice)))
				t.Cleanup(srv.Close)
				alice, bob := f.token("alice", "c1"), f.token("bob", "c1")
				resp := f.do(srv, http.MethodPost, alice, "")
				got := resp.Header.Values(SessionHeader)
				if ids[0] == "" {
					if len(got) != 0 {
						t.Fatalf("%q handed out as %q, want none (the first is empty)", ids, got)
					}
					continue
				}
				if len(got) != 1 {
					t.Fatalf("%q handed out as %q, want one", ids, got)
				}
				if resp := f.do(srv, http.MethodPost, bob, got[0]); resp.StatusCode != http.StatusNotFound {
					t.Fatalf("another subject with alice's session: %d, want 404", resp.StatusCode)
				}
			}
		})
	}
}
