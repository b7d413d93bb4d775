package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// do sends one request to url with the headers and returns the status and
// the body.
func do(t *testing.T, method, url, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// openSession initializes a session of token at the gateway.
func openSession(t *testing.T, s *stack, token string) string {
	t.Helper()
	resp := rawPost(t, s, token, "", initialize, nil)
	io.ReadAll(resp.Body)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %q", resp.StatusCode, session)
	}
	if resp := rawPost(t, s, token, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Protocol-Version": "2025-06-18"}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	return session
}

// What the MCP transport leaves to the server, the gateway leaves to the
// upstream: a GET that does not accept text/event-stream (MCP 2025-06-18
// and 2025-11-25 basic/transports: 405 when the server offers no stream)
// and a MCP-Protocol-Version the server does not support (400) get the
// upstream's answer, as a client calling the upstream itself would.
func TestGatewayLeavesTransportRefusalsToTheUpstream(t *testing.T) {
	s := newStack(t, false, baseConfig)
	tok := s.token(t, "user-bot")
	gwSession := openSession(t, s, tok)
	// The same exchange straight with the upstream, for the answer to compare.
	direct := func(method, body string, header map[string]string) int {
		st, h, _ := do(t, http.MethodPost, s.up.srv.URL, initialize, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
		if st != http.StatusOK {
			t.Fatalf("direct initialize: %d", st)
		}
		header["Mcp-Session-Id"] = h.Get("Mcp-Session-Id")
		st, _, _ = do(t, method, s.up.srv.URL, body, header)
		return st
	}
	for _, c := range []struct {
		name, method, body string
		header             map[string]string
	}{
		{"a GET accepting only JSON", http.MethodGet, "", map[string]string{"Accept": "application/json", "Mcp-Protocol-Version": "2025-06-18"}},
		{"a GET accepting nothing said", http.MethodGet, "", map[string]string{"Mcp-Protocol-Version": "2025-06-18"}},
		{"an unknown MCP-Protocol-Version", http.MethodPost, `{"jsonrpc":"2.0","id":"v-1","method":"tools/list"}`,
			map[string]string{"Mcp-Protocol-Version": "1999-01-01", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}},
		{"a MCP-Protocol-Version that is no date", http.MethodPost, `{"jsonrpc":"2.0","id":"v-2","method":"tools/list"}`,
			map[string]string{"Mcp-Protocol-Version": "latest", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := map[string]string{}
			for k, v := range c.header {
				h[k] = v
			}
			want := direct(c.method, c.body, h)
			if want/100 == 2 {
				t.Fatalf("the upstream accepts it (%d): not an edge", want)
			}
			h["Mcp-Session-Id"] = gwSession
			h["Authorization"] = "Bearer " + tok
			if got, _, body := do(t, c.method, s.resource, c.body, h); got != want {
				t.Errorf("gateway %d %q, upstream %d", got, body, want)
			}
		})
	}
}

// A JSON-RPC response the client POSTs (the answer to a request of the
// server, such as elicitation/create or roots/list) reaches the upstream
// and is audited as one response line with the id it answers.
func TestGatewayForwardsAndAuditsResponsesOfTheClient(t *testing.T) {
	s := newStack(t, false, baseConfig)
	tok := s.token(t, "user-bot")
	session := openSession(t, s, tok)
	before := len(s.up.seen())
	resp := rawPost(t, s, tok, session, `{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}`, map[string]string{"Mcp-Protocol-Version": "2025-06-18"})
	io.ReadAll(resp.Body)
	if resp.StatusCode/100 == 5 || len(s.up.seen()) != before+1 {
		t.Fatalf("response: %d, upstream saw %d more", resp.StatusCode, len(s.up.seen())-before)
	}
	var last map[string]any
	lines := strings.Split(strings.TrimSpace(s.audit.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last["event"] != "response" || last["method"] != "" || last["id"] != "srv-1" || last["sub"] != "user-bot" || last["status"] != float64(resp.StatusCode) {
		t.Errorf("audit line %v", last)
	}
}

// Bodies that are not JSON-RPC get a JSON-RPC error, application/json,
// never a 500, and never reach the upstream: -32700 with id null for what
// is not JSON, -32600 for JSON that is no Request object and for an empty
// batch, -32602 for a tools/call that names no tool, -32020 for headers
// that do not mirror the body, under the request's id when it can be read
// (JSON-RPC 2.0 §5.1), null otherwise.
func TestGatewayAnswersMalformedAndOversizedBodiesWithJSONRPCErrors(t *testing.T) {
	s := newStack(t, true, baseConfig+"limits: {max_request_bytes: 2000, max_response_bytes: 1000}\n")
	tok := s.token(t, "user-bot")
	session := openSession(t, s, tok)
	seen := len(s.up.seen())
	v := map[string]string{"Mcp-Protocol-Version": "2025-06-18"}
	stateless := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
	for _, c := range []struct {
		name, body   string
		header       map[string]string
		status, code int
		id           any
	}{
		{"not JSON", `{"jsonrpc":"2.0","id":"x-1","method":`, v, http.StatusBadRequest, -32700, nil},
		{"JSON of a duplicated method", `{"jsonrpc":"2.0","id":"x-2","method":"ping","method":"tools/call"}`, v, http.StatusBadRequest, -32600, "x-2"},
		{"larger than max_request_bytes", `{"jsonrpc":"2.0","id":"x-3","method":"ping","params":{"pad":"` + strings.Repeat("a", 3000) + `"}}`, v, http.StatusRequestEntityTooLarge, -32600, nil},
		{"a batch of 2025-06-18", `[{"jsonrpc":"2.0","id":"x-4","method":"ping"}]`, v, http.StatusBadRequest, -32600, nil},
		{"a number", `42`, v, http.StatusBadRequest, -32600, nil},
		{"a string", `"x"`, v, http.StatusBadRequest, -32600, nil},
		{"an empty object", `{}`, v, http.StatusBadRequest, -32600, nil},
		{"an empty batch", `[]`, v, http.StatusBadRequest, -32600, nil},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":"x-5","method":"ping"}`, v, http.StatusBadRequest, -32600, "x-5"},
		{"a method that is no string", `{"jsonrpc":"2.0","id":6,"method":["ping"]}`, v, http.StatusBadRequest, -32600, float64(6)},
		{"an id that is an object", `{"jsonrpc":"2.0","id":{"n":7},"method":"ping"}`, v, http.StatusBadRequest, -32600, nil},
		{"a response without result or error", `{"jsonrpc":"2.0","id":"srv-8"}`, v, http.StatusBadRequest, -32600, nil},
		{"a tools/call without a tool name", `{"jsonrpc":"2.0","id":"x-9","method":"tools/call","params":{"arguments":{}}}`, v, http.StatusBadRequest, -32602, "x-9"},
		{"an Mcp-Method of another method", `{"jsonrpc":"2.0","id":"x-10","method":"tools/call","params":{"name":"echo"}}`, stateless, http.StatusBadRequest, -32020, "x-10"},
		{"a stateless batch", `[{"jsonrpc":"2.0","id":"x-11","method":"tools/list"}]`, stateless, http.StatusBadRequest, -32600, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := rawPost(t, s, tok, session, c.body, c.header)
			ct := resp.Header.Get("Content-Type")
			id, code, _ := rpcError(t, resp)
			if resp.StatusCode != c.status || ct != "application/json" || code != c.code || id != c.id {
				t.Errorf("%d %q code %d id %v, want %d application/json code %d id %v", resp.StatusCode, ct, code, id, c.status, c.code, c.id)
			}
		})
	}
	if n := len(s.up.seen()); n != seen {
		t.Errorf("the upstream saw %d of the refused bodies", n-seen)
	}
	// An answer too large to filter is replaced by an error with the id.
	resp := rawPost(t, s, tok, session, `{"jsonrpc":"2.0","id":"big-\u0031","method":"tools/call","params":{"name":"echo","arguments":{"text":"`+strings.Repeat("b", 1500)+`"}}}`,
		map[string]string{"Mcp-Protocol-Version": "2025-06-18"})
	if id, code, _ := rpcError(t, resp); resp.StatusCode != http.StatusBadGateway || id != "big-1" || code != -32603 {
		t.Errorf("oversized answer: %d id %v code %d", resp.StatusCode, id, code)
	}
}

// A POST whose body cannot be read (a chunked body with a malformed chunk
// size, RFC 9112 §7.1) is answered 400 with the JSON-RPC error -32700, id
// null, application/json, by the gateway and by its forwarder alone (the
// last reader of the body when nothing in front reads it); the upstream
// sees nothing.
func TestGatewayAnswersAnUnreadableBodyWithAJSONRPCParseError(t *testing.T) {
	s := newStack(t, true, baseConfig)
	tok := s.token(t, "user-bot")
	target, _ := url.Parse(s.up.srv.URL + "/mcp")
	fw := &forwarder{target: target, transport: http.DefaultTransport, onError: func(w http.ResponseWriter, _ *http.Request, _ []byte, err error) {
		t.Errorf("upstream: %v", err)
		w.WriteHeader(http.StatusBadGateway)
	}}
	alone := httptest.NewServer(fw)
	t.Cleanup(alone.Close)
	seen := len(s.up.seen())
	for name, addr := range map[string]string{"gateway": s.gw.Listener.Addr().String(), "forwarder": alone.Listener.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
				"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"jso\r\nzz\r\n", addr, tok)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			ct := resp.Header.Get("Content-Type")
			id, code, _ := rpcError(t, resp)
			if resp.StatusCode != http.StatusBadRequest || ct != "application/json" || code != -32700 || id != nil {
				t.Errorf("%d %q code %d id %v, want 400 application/json -32700 id null", resp.StatusCode, ct, code, id)
			}
		})
	}
	if n := len(s.up.seen()); n != seen {
		t.Errorf("the upstream saw %d requests", n-seen)
	}
}

// An upstream answer whose status code is outside 100..599 (RFC 9110 §15:
// such values are invalid; 099 and 000 parse as three digits) gets the
// client a 502 JSON-RPC error under the request's id, not a panic of the
// handler that writes that status and a connection closed without answer.
func TestGatewayAnswersAnInvalidUpstreamStatusWith502(t *testing.T) {
	for _, status := range []string{"000", "099", "600"} {
		t.Run(status, func(t *testing.T) {
			url := earlyGatewayUpstream(t, func(int, *http.Request) (string, bool) {
				return "HTTP/1.1 " + status + " Odd\r\nContent-Type: application/json\r\nContent-Length: 36\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", false
			})
			s := newStack(t, false, earlyConfig(url))
			resp := rawPost(t, s, s.token(t, "user-bot"), "", initialize, nil)
			id, code, msg := rpcError(t, resp)
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Content-Type") != "application/json" || code != -32603 || id != float64(1) ||
				!strings.Contains(msg, "invalid status code") {
				t.Fatalf("status %d %q, JSON-RPC code %d id %v %q; want 502 application/json -32603 under id 1 naming the status", resp.StatusCode, resp.Header.Get("Content-Type"), code, id, msg)
			}
		})
	}
}
