package main

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// The gateway passes on POST, GET, DELETE and CORS preflights only, and a
// body only with a POST: a PUT or PATCH carrying JSON-RPC, or a GET with a
// body, would reach a server that may read it without the scopes of its
// content being checked. A preflight reaches the server, which answers it.
func TestGatewayPassesMCPMethodsAndPreflightsOnly(t *testing.T) {
	s := newStack(t, false, baseConfig)
	var reached atomic.Int32
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	tok := s.token(t, "user-bot")
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"admin_stats","arguments":{}}}`
	for _, tc := range []struct {
		name, method, body string
		header             map[string]string
		status             int
		reaches            bool
	}{
		{"passes a preflight to the server", http.MethodOptions, "", map[string]string{"Origin": "http://localhost:6274", "Access-Control-Request-Method": "POST"}, http.StatusNoContent, true},
		{"refuses a PUT", http.MethodPut, call, nil, http.StatusMethodNotAllowed, false},
		{"refuses a PATCH", http.MethodPatch, call, nil, http.StatusMethodNotAllowed, false},
		{"refuses a GET with a body", http.MethodGet, call, nil, http.StatusBadRequest, false},
		{"refuses a DELETE with a body", http.MethodDelete, call, nil, http.StatusBadRequest, false},
		{"refuses a preflight with a body", http.MethodOptions, call, map[string]string{"Origin": "http://localhost:6274", "Access-Control-Request-Method": "POST"}, http.StatusBadRequest, false},
		{"passes a GET", http.MethodGet, "", nil, http.StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := reached.Load()
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequest(tc.method, s.resource, body)
			if tc.method != http.MethodOptions {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			req.Header.Set("Content-Type", "application/json")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status || (reached.Load() > before) != tc.reaches {
				t.Errorf("%d (reached the server %v), want %d (%v)", resp.StatusCode, reached.Load() > before, tc.status, tc.reaches)
			}
			if tc.method == http.MethodOptions && tc.reaches && resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:6274" {
				t.Errorf("the server's CORS answer did not come back: %v", resp.Header)
			}
		})
	}
}

// The gateway asks the upstream for uncompressed answers whatever the
// client accepts, so that a server that compresses when it may (Starlette's
// GZipMiddleware, Express's compression) still has its tools/list trimmed.
func TestGatewayAsksForUncompressedAnswers(t *testing.T) {
	s := newStack(t, true, baseConfig)
	var seen atomic.Value
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		seen.Store(strings.Join(r.Header.Values("Accept-Encoding"), ","))
		msg := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"admin_stats","inputSchema":{"type":"object"}}]}}`
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, msg)
			zw.Close()
			return
		}
		io.WriteString(w, msg)
	})
	resp := rawPost(t, s, s.token(t, "user-bot"), "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Accept-Encoding": "gzip, br"})
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" || strings.Contains(string(body), "admin_stats") || !strings.Contains(string(body), `"echo"`) {
		t.Fatalf("%d %v %q, want the trimmed list", resp.StatusCode, resp.Header, body)
	}
	if got := seen.Load(); got != "identity" {
		t.Errorf("the upstream got Accept-Encoding %q, want identity", got)
	}
}

// An upstream tools/list answer of a media type the filter does not read
// (text/plain) is not passed on to a caller whose list would be trimmed:
// the gateway answers 502 with the JSON-RPC error -32603 under the
// request's id, and the hidden tool's name never reaches the client.
func TestGatewayRefusesUnreadableListAnswers(t *testing.T) {
	s := newStack(t, true, baseConfig)
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, `{"jsonrpc":"2.0","id":9,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"admin_stats","inputSchema":{"type":"object"}}]}}`)
	})
	resp := rawPost(t, s, s.token(t, "user-bot"), "", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, nil)
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), "admin_stats") {
		t.Fatalf("the answer shows the hidden tool: %s", body)
	}
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"id":9`) || !strings.Contains(string(body), "-32603") {
		t.Fatalf("%d %s, want 502 with a JSON-RPC error -32603 under id 9", resp.StatusCode, body)
	}
}
