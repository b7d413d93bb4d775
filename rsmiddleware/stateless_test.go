package rsmiddleware

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// statelessServer is an MCP server of revision 2026-07-28 behind the
// Middleware and SessionBinding: raw JSON-RPC over HTTP, a tool "deploy"
// that needs mcp:read and mcp:deploy, a prompt "p" that needs mcp:prompts.
// The handler mints an Mcp-Session-Id on every answer (as a server of an
// older revision would on initialize) and echoes the session ID it saw.
func statelessServer(t *testing.T) (*httptest.Server, *keyServer) {
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm,
		Scopes: Scopes{Base: []string{"mcp:read"}, Tools: map[string][]string{"deploy": {"mcp:deploy"}},
			Methods: map[string][]string{"prompts/get": {"mcp:prompts"}}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var b SessionBinding
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen := r.Header.Get(SessionHeader)
		w.Header().Set(SessionHeader, "minted-session")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"sawSession": seen}})
	})
	srv := httptest.NewServer(mw.Wrap(b.Wrap(handler)))
	t.Cleanup(srv.Close)
	return srv, ks
}

func (ks *keyServer) tokenWith(sub, scope string) string {
	c := ks.claims()
	c["sub"], c["scope"] = sub, scope
	return ks.mint(c)
}

type statelessAnswer struct {
	status  int
	header  http.Header
	body    map[string]any
	rawBody string
}

func postRPC(t *testing.T, url, token, version, body string, headers ...string) statelessAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if version != "" {
		req.Header.Set(ProtocolVersionHeader, version)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return statelessAnswer{resp.StatusCode, resp.Header, m, string(raw)}
}

func TestStatelessRequestsNeverUseSessions(t *testing.T) {
	srv, ks := statelessServer(t)
	alice := ks.tokenWith("alice", "mcp:read")
	body := rpc("tools/list", nil)
	// 2026-07-28: the session header is neither honoured nor minted.
	a := postRPC(t, srv.URL, alice, StatelessVersion, body, MethodHeader, "tools/list", SessionHeader, "someone-elses")
	if a.status != 200 || a.header.Get(SessionHeader) != "" {
		t.Fatalf("%d %s, Mcp-Session-Id %q", a.status, a.rawBody, a.header.Get(SessionHeader))
	}
	if res, _ := a.body["result"].(map[string]any); res["sawSession"] != "" {
		t.Errorf("the handler saw Mcp-Session-Id %v", res["sawSession"])
	}
	// A later revision is stateless too.
	if a := postRPC(t, srv.URL, alice, "2027-01-01", body, MethodHeader, "tools/list"); a.status != 200 || a.header.Get(SessionHeader) != "" {
		t.Errorf("later revision: %d, Mcp-Session-Id %q", a.status, a.header.Get(SessionHeader))
	}
	// 2025-11-25: the session is minted and bound to its principal.
	old := postRPC(t, srv.URL, alice, "2025-11-25", body)
	sid := old.header.Get(SessionHeader)
	if old.status != 200 || sid != "minted-session" {
		t.Fatalf("older revision: %d, Mcp-Session-Id %q", old.status, sid)
	}
	bob := ks.tokenWith("bob", "mcp:read")
	if a := postRPC(t, srv.URL, bob, "2025-11-25", body, SessionHeader, sid); a.status != http.StatusNotFound {
		t.Errorf("another principal's session, older revision: %d; want 404", a.status)
	}
	// The same ID under 2026-07-28 is not a session: bob's request stands
	// on its own token and the ID never reaches the handler.
	a = postRPC(t, srv.URL, bob, StatelessVersion, body, MethodHeader, "tools/list", SessionHeader, sid)
	if res, _ := a.body["result"].(map[string]any); a.status != 200 || res["sawSession"] != "" {
		t.Errorf("stateless with a bound session id: %d %s", a.status, a.rawBody)
	}
	// Without a token, a stateless request is refused like any other.
	if a := postRPC(t, srv.URL, "", StatelessVersion, body, MethodHeader, "tools/list"); a.status != http.StatusUnauthorized {
		t.Errorf("no token: %d", a.status)
	}
}

func TestStatelessHeadersMustMirrorTheBody(t *testing.T) {
	srv, ks := statelessServer(t)
	tok := ks.tokenWith("alice", "mcp:read mcp:deploy mcp:prompts")
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	prompt := `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p"}}`
	read := `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///é"}}`
	ok := []struct {
		name, body string
		headers    []string
	}{
		{"a tool call", toolCall("deploy"), []string{MethodHeader, "tools/call", NameHeader, "deploy"}},
		{"a base64 name", toolCall("deploy"), []string{MethodHeader, "tools/call", NameHeader, b64("deploy")}},
		{"a prompt", prompt, []string{MethodHeader, "prompts/get", NameHeader, "p"}},
		{"a non-ASCII uri, base64", read, []string{MethodHeader, "resources/read", NameHeader, b64("file:///é")}},
		{"a method without a name", rpc("tools/list", nil), []string{MethodHeader, "tools/list"}},
	}
	for _, tc := range ok {
		t.Run("accepts "+tc.name, func(t *testing.T) {
			if a := postRPC(t, srv.URL, tok, StatelessVersion, tc.body, tc.headers...); a.status != 200 {
				t.Errorf("%d %s", a.status, a.rawBody)
			}
		})
	}
	bad := []struct {
		name, body string
		headers    []string
	}{
		{"no Mcp-Method", toolCall("deploy"), []string{NameHeader, "deploy"}},
		{"no Mcp-Name", toolCall("deploy"), []string{MethodHeader, "tools/call"}},
		{"another method", toolCall("deploy"), []string{MethodHeader, "tools/list", NameHeader, "deploy"}},
		{"another tool", toolCall("deploy"), []string{MethodHeader, "tools/call", NameHeader, "read_only"}},
		{"the name in another case", toolCall("deploy"), []string{MethodHeader, "tools/call", NameHeader, "Deploy"}},
		{"two Mcp-Name headers", toolCall("deploy"), []string{MethodHeader, "tools/call", NameHeader, "deploy", NameHeader, "deploy"}},
		{"malformed base64", toolCall("deploy"), []string{MethodHeader, "tools/call", NameHeader, "=?base64?%%%?="}},
		{"base64 of another name", toolCall("deploy"), []string{MethodHeader, "tools/call", NameHeader, b64("other")}},
		{"a raw non-ASCII name", read, []string{MethodHeader, "resources/read", NameHeader, "file:///\u00e9"}},
		{"a name on a method without one", rpc("tools/list", nil), []string{MethodHeader, "tools/list", NameHeader, "x"}},
	}
	for _, tc := range bad {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			a := postRPC(t, srv.URL, tok, StatelessVersion, tc.body, tc.headers...)
			e, _ := a.body["error"].(map[string]any)
			// The answer carries the request's id (MCP Streamable HTTP,
			// "Server Validation").
			if a.status != http.StatusBadRequest || e["code"] != float64(ErrCodeHeaderMismatch) || a.body["jsonrpc"] != "2.0" || a.body["id"] != float64(1) {
				t.Errorf("%d %s; want 400 with JSON-RPC error -32020 and id 1", a.status, a.rawBody)
			}
		})
	}
	// A batch is no message of this revision: -32600, id null, as MCPFilter
	// answers it.
	a := postRPC(t, srv.URL, tok, StatelessVersion, "["+rpc("tools/list", nil)+"]", MethodHeader, "tools/list")
	if e, _ := a.body["error"].(map[string]any); a.status != http.StatusBadRequest || e["code"] != float64(-32600) || a.body["id"] != nil {
		t.Errorf("a batch: %d %s; want 400 with JSON-RPC error -32600 and id null", a.status, a.rawBody)
	}
	// Older revisions send no such headers and are not checked.
	if a := postRPC(t, srv.URL, tok, "2025-11-25", toolCall("deploy")); a.status != 200 {
		t.Errorf("older revision without mirrored headers: %d %s", a.status, a.rawBody)
	}
}

func TestStatelessChallengeNamesTheOperationsScopesInOneHeader(t *testing.T) {
	srv, ks := statelessServer(t)
	tok := ks.tokenWith("alice", "mcp:read mcp:prompts")
	a := postRPC(t, srv.URL, tok, StatelessVersion, toolCall("deploy"), MethodHeader, "tools/call", NameHeader, "deploy")
	// One Bearer challenge (and its DPoP twin: DPoP is accepted by
	// default).
	var challenges []string
	for _, c := range a.header.Values("WWW-Authenticate") {
		if strings.HasPrefix(c, "Bearer ") {
			challenges = append(challenges, c)
		}
	}
	if a.status != http.StatusForbidden || len(challenges) != 1 {
		t.Fatalf("%d, challenges %q", a.status, challenges)
	}
	if c := challenges[0]; !strings.Contains(c, `error="insufficient_scope"`) || !strings.Contains(c, `scope="mcp:read mcp:deploy"`) || strings.Contains(c, "mcp:prompts") {
		t.Errorf("challenge %q: want the scopes of this tools/call, and only those", c)
	}
	// A mismatch is refused before the scopes are judged: the headers
	// cannot pass a forbidden call off as an allowed one.
	a = postRPC(t, srv.URL, tok, StatelessVersion, toolCall("deploy"), MethodHeader, "tools/list")
	if a.status != http.StatusBadRequest {
		t.Errorf("mismatch: %d %s", a.status, a.rawBody)
	}
}

func TestStateKeyIsPerSubject(t *testing.T) {
	alice, bob := &Principal{Subject: "alice"}, &Principal{Subject: "bob"}
	if StateKey(alice, "h1") == StateKey(bob, "h1") || StateKey(alice, "h1") != "alice:h1" {
		t.Errorf("keys %q %q", StateKey(alice, "h1"), StateKey(bob, "h1"))
	}
}

func TestDecodeHeaderValue(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"tools/call", "tools/call", true},
		{"=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界", true},
		{"=?base64?SGVsbG8?", "", false},
		{"=?base64?/w==?=", "", false}, // not UTF-8
		{"a b", "", false},
		{"line\n", "", false},
		{"", "", true},
		{"!~", "!~", true}, // the ends of visible ASCII
		{"a\x7f", "", false},
	}
	for _, tc := range cases {
		got, ok := decodeHeaderValue(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("decodeHeaderValue(%q) = %q, %v", tc.in, got, ok)
		}
	}
}

func FuzzMirroredHeaders(f *testing.F) {
	f.Add(toolCall("deploy"), "tools/call", "deploy")
	f.Add(`{"method":"resources/read","params":{"uri":"x"}}`, "resources/read", "=?base64?eA==?=")
	f.Fuzz(func(t *testing.T, body, method, name string) {
		calls, err := peekJSONRPC([]byte(body))
		if err != nil {
			return
		}
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header[MethodHeader] = []string{method}
		r.Header[NameHeader] = []string{name}
		if checkMirroredHeaders(r, []byte(body), calls) {
			m, _ := decodeHeaderValue(method)
			if len(calls) != 1 || m != calls[0].Method {
				t.Fatalf("accepted %q for %+v", method, calls)
			}
		}
	})
}

// TestCheckMirroredHeadersWithNothingToMirror: an empty body, or a body
// that is no request (a response: no calls), fails the check without a
// Mcp-Method header being looked at.
func TestCheckMirroredHeadersWithNothingToMirror(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set(MethodHeader, "tools/call")
	for _, body := range []string{"", "  ", `{"jsonrpc":"2.0","id":1,"result":{}}`} {
		if checkMirroredHeaders(r, []byte(body), nil) {
			t.Errorf("body %q with no calls passed", body)
		}
	}
}
