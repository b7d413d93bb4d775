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

// TestMCPFilterRefusesAnswersOfOtherMediaTypes: a 2xx answer that is
// neither application/json nor text/event-stream, to a request whose
// answer MCPFilter would trim, is refused 502 with the JSON-RPC error
// -32603 under the request's id (JSON-RPC 2.0 §5.1): passed on, it would
// show a client that reads it anyway every tool. The MCP server is a real
// HTTP server behind a reverse proxy, as in a gateway. An answer that needs
// no trimming (a caller who sees every tool, a request of another method)
// passes as before.
func TestMCPFilterRefusesAnswersOfOtherMediaTypes(t *testing.T) {
	for _, ct := range []string{"text/plain", "application/jsonx", "application/json-seq", ""} {
		t.Run("content type "+ct, func(t *testing.T) {
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var msg struct {
					ID json.RawMessage `json:"id"`
				}
				_ = json.NewDecoder(r.Body).Decode(&msg)
				if ct == "" {
					w.Header()["Content-Type"] = nil // no sniffed type either
				} else {
					w.Header().Set("Content-Type", ct)
				}
				io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+toolsResult+`}`)
			}))
			t.Cleanup(upstream.Close)
			u, err := url.Parse(upstream.URL)
			if err != nil {
				t.Fatal(err)
			}
			fx := newFilterFixture(t, httputil.NewSingleHostReverseProxy(u), nil)

			resp := fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":"l-7","method":"tools/list"}`)
			body, _ := io.ReadAll(resp.Body)
			if strings.Contains(string(body), "admin_stats") {
				t.Fatalf("the answer shows the hidden tool: %s", body)
			}
			var e struct {
				ID    string `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if resp.StatusCode != http.StatusBadGateway || json.Unmarshal(body, &e) != nil || e.ID != "l-7" || e.Error.Code != -32603 ||
				!strings.Contains(e.Error.Message, "could not be checked") || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %v %s; want 502, a JSON-RPC error -32603 under id l-7", resp.StatusCode, resp.Header, body)
			}

			// A caller who may see every tool gets the answer as it was.
			resp = fx.post(t, fx.token("mcp:tools mcp:admin"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || !strings.Contains(string(body), "admin_stats") {
				t.Errorf("untrimmed caller: %d %s", resp.StatusCode, body)
			}
			// So does an answer to a request of a method that is not trimmed.
			resp = fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
			if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || !strings.Contains(string(body), `"id":2`) {
				t.Errorf("ping: %d %s", resp.StatusCode, body)
			}
		})
	}
}
