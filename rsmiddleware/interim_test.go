package rsmiddleware

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
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
