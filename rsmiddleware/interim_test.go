package rsmiddleware

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// earlyHintsServer is an MCP server that sends 103 Early Hints (RFC 8297)
// before each answer, as a server may before any final answer (RFC 9110
// §15.2); httputil.ReverseProxy passes interim answers on.
func earlyHintsServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) http.Handler {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		answer(w, r)
	}))
	t.Cleanup(upstream.Close)
	u, err := url.Parse(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	return httputil.NewSingleHostReverseProxy(u)
}

// TestMCPFilterTrimsAnswersAfterEarlyHints: an interim answer (1xx, RFC 9110
// §15.2) is not the answer: it goes on to the client, and the final answer
// that follows it is filtered as any other, so a tools/list answer after 103
// Early Hints still hides the tools the caller may not see.
func TestMCPFilterTrimsAnswersAfterEarlyHints(t *testing.T) {
	for _, ct := range []string{"application/json", "text/plain"} {
		t.Run(ct, func(t *testing.T) {
			up := earlyHintsServer(t, func(w http.ResponseWriter, r *http.Request) {
				var msg struct {
					ID json.RawMessage `json:"id"`
				}
				_ = json.NewDecoder(r.Body).Decode(&msg)
				w.Header().Set("Content-Type", ct)
				io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+toolsResult+`}`)
			})
			fx := newFilterFixture(t, up, nil)
			resp := fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":"l-1","method":"tools/list"}`)
			body, _ := io.ReadAll(resp.Body)
			if strings.Contains(string(body), "admin_stats") {
				t.Fatalf("%d: the answer after 103 shows the hidden tool: %s", resp.StatusCode, body)
			}
			want := http.StatusOK
			if ct != "application/json" {
				want = http.StatusBadGateway
			}
			if resp.StatusCode != want || !strings.Contains(string(body), `"l-1"`) {
				t.Fatalf("%d %s; want %d under id l-1", resp.StatusCode, body, want)
			}
			if want == http.StatusOK && !strings.Contains(string(body), "echo") {
				t.Fatalf("the visible tool is gone: %s", body)
			}
		})
	}
}

// TestSessionBindingSeesTheFinalAnswerAfterEarlyHints: the session ID a
// handler hands out in its final answer after an interim one (103 Early
// Hints, RFC 9110 §15.2) is bound as any other: signed with Key, recorded
// without it, dropped for a stateless request; and an interim answer never
// shows the handler's unsigned ID.
func TestSessionBindingSeesTheFinalAnswerAfterEarlyHints(t *testing.T) {
	for _, key := range [][]byte{keyA, nil} {
		name := "signed"
		if key == nil {
			name = "recorded"
		}
		t.Run(name, func(t *testing.T) {
			f := newSignedFixture(t)
			hinted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get(SessionHeader) != "" {
					// The session's ID is set before the interim answer.
					w.Header().Set(SessionHeader, r.Header.Get(SessionHeader))
				}
				w.Header().Set("Link", "</style.css>; rel=preload; as=style")
				w.WriteHeader(http.StatusEarlyHints)
				w.Header().Del("Link")
				f.stand.ServeHTTP(w, r)
			})
			b := &SessionBinding{Key: key}
			srv := httptest.NewServer(f.mw.Wrap(b.Wrap(hinted)))
			t.Cleanup(srv.Close)
			var mu sync.Mutex
			var interimIDs []string
			send := func(tok, session string, header ...string) *http.Response {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(rpc("tools/list", nil)))
				req.Header.Set("Authorization", "Bearer "+tok)
				if session != "" {
					req.Header.Set(SessionHeader, session)
				}
				for i := 0; i+1 < len(header); i += 2 {
					req.Header.Set(header[i], header[i+1])
				}
				req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
					Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
						mu.Lock()
						interimIDs = append(interimIDs, h.Values(SessionHeader)...)
						mu.Unlock()
						return nil
					},
				}))
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp
			}
			alice, bob := f.token("alice", "c1"), f.token("bob", "c1")

			resp := send(alice, "")
			id := resp.Header.Get(SessionHeader)
			if resp.StatusCode != 200 || id == "" {
				t.Fatalf("initialize: %d %q", resp.StatusCode, id)
			}
			if key != nil && id == "session-x" {
				t.Fatalf("the client got the handler's unsigned ID %q", id)
			}
			if resp := send(bob, id); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("another subject with alice's session: %d, want 404", resp.StatusCode)
			}
			if resp := send(alice, id); resp.StatusCode != 200 {
				t.Fatalf("the session's owner: %d", resp.StatusCode)
			}
			mu.Lock()
			for _, v := range interimIDs {
				if v == "session-x" && key != nil {
					t.Errorf("an interim answer showed the unsigned ID %q", v)
				}
			}
			mu.Unlock()

			resp = send(alice, "", "MCP-Protocol-Version", "2026-07-28")
			if got := resp.Header.Values(SessionHeader); len(got) != 0 {
				t.Fatalf("a stateless answer carries Mcp-Session-Id %q", got)
			}
		})
	}
}
