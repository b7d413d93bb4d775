package rsmiddleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// testPage is the page the tests' open_page tool and prompt ask for.
var testPage = rsmiddleware.URLRequired{
	URL:           "https://as.example.com/approve/Zm9v",
	ElicitationID: "Zm9v",
	Message:       "A person must approve this call.",
}

// urlGate answers tools/call of open_page and prompts/get of open_page with
// WriteURLRequired and passes everything else to next. It also records
// URLElicitationDeclared of each request it sees, by method.
func urlGate(next http.Handler, declared map[string]bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(b, &m)
		if declared != nil {
			declared[m.Method] = rsmiddleware.URLElicitationDeclared(r.Context())
		}
		if (m.Method == "tools/call" || m.Method == "prompts/get") && m.Params.Name == "open_page" {
			rsmiddleware.WriteURLRequired(w, r, m.Method, m.ID, testPage)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withPrincipal puts a principal in the context, as Middleware.Wrap does.
func withPrincipal(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &rsmiddleware.Principal{Subject: "alice", ClientID: "app"}
		next.ServeHTTP(w, r.WithContext(rsmiddleware.ContextWithPrincipal(r.Context(), p, "")))
	})
}

// goSDKServer is a real MCP server of the Go SDK with an echo tool and an
// open_page tool (never reached: urlGate answers its calls); stateless, it
// speaks MCP 2026-07-28 too.
func goSDKServer(stateless bool) http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "urlrequired-test", Version: "1.0.0"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes."}, func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: a.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "open_page", Description: "Needs a page."}, func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: stateless})
}

// The official Go SDK client reads the answers of WriteURLRequired: with URL
// elicitation declared (in initialize, or per request in _meta as 2026-07-28
// requests carry it) a -32042 error whose data its own URL elicitation
// handling decodes; without, a tool result isError with the URL in its text.
func TestWriteURLRequiredWithTheGoSDKClient(t *testing.T) {
	methods := map[string]bool{}
	var mu sync.Mutex
	seen := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			methods[r.Header.Get(rsmiddleware.ProtocolVersionHeader)] = true
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}
	filter := rsmiddleware.NewMCPFilter(rsmiddleware.MCPFilterConfig{})
	stateful := httptest.NewServer(withPrincipal(filter.Wrap(urlGate(goSDKServer(false), nil))))
	defer stateful.Close()
	stateless := httptest.NewServer(seen(withPrincipal(filter.Wrap(urlGate(goSDKServer(true), nil)))))
	defer stateless.Close()

	urlCaps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	formCaps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
	for _, tc := range []struct {
		name     string
		version  string // "" for the SDK's latest (2026-07-28: capabilities in _meta)
		caps     *mcp.ClientCapabilities
		declared bool
	}{
		{"declared in initialize (2025-11-25)", "2025-11-25", urlCaps, true},
		{"declared in the request's _meta (2026-07-28)", "", urlCaps, true},
		{"form elicitation only (2025-11-25)", "2025-11-25", formCaps, false},
		{"no elicitation (2025-11-25)", "2025-11-25", nil, false},
		{"no elicitation (2026-07-28)", "", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := mcp.NewClient(&mcp.Implementation{Name: "go-client", Version: "1.0.0"}, &mcp.ClientOptions{Capabilities: tc.caps})
			endpoint := stateful.URL
			if tc.version == "" {
				endpoint = stateless.URL
			}
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, &mcp.ClientSessionOptions{ProtocolVersion: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			echo, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil || echo.IsError || echo.Content[0].(*mcp.TextContent).Text != "hi" {
				t.Fatalf("echo: %+v, %v", echo, err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "open_page", Arguments: map[string]any{"text": "x"}})
			if !tc.declared {
				if err != nil {
					t.Fatalf("without URL elicitation: error %v, want a tool result", err)
				}
				want := "A person must approve this call. Open https://as.example.com/approve/Zm9v and then try again."
				if !res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != want {
					t.Fatalf("tool result %+v, want isError with %q", res, want)
				}
				return
			}
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeURLElicitationRequired {
				t.Fatalf("got %+v, %v; want JSON-RPC error %d", res, err, mcp.CodeURLElicitationRequired)
			}
			if rpcErr.Code != rsmiddleware.ErrCodeURLElicitationRequired {
				t.Fatalf("code %d", rpcErr.Code)
			}
			// Decoded as the SDK's URL elicitation middleware decodes it.
			var data struct {
				Elicitations []*mcp.ElicitParams `json:"elicitations"`
			}
			if err := json.Unmarshal(rpcErr.Data, &data); err != nil {
				t.Fatal(err)
			}
			if len(data.Elicitations) != 1 {
				t.Fatalf("elicitations %s", rpcErr.Data)
			}
			e := data.Elicitations[0]
			if e.Mode != "url" || e.URL != testPage.URL || e.ElicitationID != testPage.ElicitationID || e.Message != testPage.Message {
				t.Fatalf("elicitation %+v", e)
			}
			if rpcErr.Message != testPage.Message {
				t.Fatalf("error message %q", rpcErr.Message)
			}
		})
	}
	if !methods["2026-07-28"] {
		t.Fatalf("the stateless server saw protocol versions %v, not 2026-07-28", methods)
	}
}

// post sends one JSON-RPC message and returns the answer's status, body
// and session header.
func post(t *testing.T, url, session, body string) (int, map[string]any, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set(rsmiddleware.SessionHeader, session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("answer %q: %v", b, err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
	}
	return resp.StatusCode, m, resp.Header.Get(rsmiddleware.SessionHeader)
}

// MCPFilter records what each session's initialize declared, bounded to the
// session the server's answer names, and a request's own _meta; what it does
// not know reads as not declared.
func TestURLElicitationDeclaredIsRecordedBySession(t *testing.T) {
	declared := map[string]bool{}
	n := 0
	server := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(b, []byte(`"initialize"`)) {
			if bytes.Contains(b, []byte(`"fail"`)) {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"no"}}`)
				return
			}
			n++
			w.Header().Set(rsmiddleware.SessionHeader, "session-"+string(rune('0'+n)))
		}
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusOK)
			return
		}
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	filter := rsmiddleware.NewMCPFilter(rsmiddleware.MCPFilterConfig{})
	srv := httptest.NewServer(withPrincipal(filter.Wrap(urlGate(server, declared))))
	defer srv.Close()

	initialize := func(caps string) string {
		_, _, sid := post(t, srv.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"c","version":"1"}}}`)
		return sid
	}
	call := func(session, meta string) map[string]any {
		params := `{"name":"open_page","arguments":{}`
		if meta != "" {
			params += `,"_meta":` + meta
		}
		_, m, _ := post(t, srv.URL, session, `{"jsonrpc":"2.0","id":"call-1","method":"tools/call","params":`+params+`}}`)
		if m["id"] != "call-1" {
			t.Fatalf("answer id %v", m["id"])
		}
		return m
	}
	isURLError := func(m map[string]any) bool {
		e, _ := m["error"].(map[string]any)
		return e != nil && e["code"] == float64(rsmiddleware.ErrCodeURLElicitationRequired)
	}

	withURL := initialize(`{"elicitation":{"url":{}}}`)
	formOnly := initialize(`{"elicitation":{}}`)
	urlTrue := initialize(`{"elicitation":{"url":true}}`)
	none := initialize(`{}`)
	if withURL == "" || formOnly == "" || urlTrue == "" || none == "" {
		t.Fatal("no session ids")
	}
	if !isURLError(call(withURL, "")) || !declared["tools/call"] {
		t.Fatal("a session whose initialize declared elicitation.url did not get -32042")
	}
	for _, sid := range []string{formOnly, urlTrue, none, "never-seen", ""} {
		if m := call(sid, ""); isURLError(m) || m["result"].(map[string]any)["isError"] != true {
			t.Fatalf("session %q: %v, want the text answer", sid, m)
		}
	}
	// 2026-07-28: the request's own capabilities, whatever the session.
	if !isURLError(call("", `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`)) {
		t.Fatal("_meta client capabilities with elicitation.url: no -32042")
	}
	if isURLError(call("", `{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`)) {
		t.Fatal("_meta with form elicitation only got -32042")
	}
	// Not under the capabilities key: nothing.
	if isURLError(call("", `{"elicitation":{"url":{}}}`)) {
		t.Fatal("a bare _meta.elicitation was read as a declaration")
	}
	// A failed initialize records nothing, whatever session header its
	// answer has.
	if sid := initialize(`{"elicitation":{"url":{}},"x":"fail"}`); sid != "" {
		t.Fatalf("failed initialize answered session %q", sid)
	}
	// Other methods get the -32042 error even without a declaration.
	_, m, _ := post(t, srv.URL, none, `{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"open_page"}}`)
	if !isURLError(m) || m["id"] != float64(7) {
		t.Fatalf("prompts/get: %v", m)
	}
	// DELETE ends the session: forgotten.
	req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
	req.Header.Set(rsmiddleware.SessionHeader, withURL)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if isURLError(call(withURL, "")) {
		t.Fatal("a deleted session is still remembered")
	}
}

// The answers' exact bytes: what the MCP 2025-11-25 schema names
// (URLElicitationRequiredError, CallToolResult).
func TestWriteURLRequiredBytes(t *testing.T) {
	for _, tc := range []struct {
		name, method, id string
		declared         bool
		want             string
	}{
		{"declared tools/call", "tools/call", `1`, true,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32042,"message":"A person must approve this call.","data":{"elicitations":[{"mode":"url","elicitationId":"Zm9v","url":"https://as.example.com/approve/Zm9v","message":"A person must approve this call."}]}}}`},
		{"undeclared tools/call", "tools/call", `"a"`, false,
			`{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"A person must approve this call. Open https://as.example.com/approve/Zm9v and then try again."}],"isError":true}}`},
		{"undeclared resources/read", "resources/read", `2`, false,
			`{"jsonrpc":"2.0","id":2,"error":{"code":-32042,"message":"A person must approve this call. Open https://as.example.com/approve/Zm9v and then try again.","data":{"elicitations":[{"mode":"url","elicitationId":"Zm9v","url":"https://as.example.com/approve/Zm9v","message":"A person must approve this call."}]}}}`},
		{"an id that is not JSON", "tools/call", `{`, false,
			`{"jsonrpc":"2.0","id":null,"result":{"content":[{"type":"text","text":"A person must approve this call. Open https://as.example.com/approve/Zm9v and then try again."}],"isError":true}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			filter := rsmiddleware.NewMCPFilter(rsmiddleware.MCPFilterConfig{})
			h := withPrincipal(filter.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rsmiddleware.WriteURLRequired(w, r, tc.method, json.RawMessage(tc.id), testPage)
			})))
			srv := httptest.NewServer(h)
			defer srv.Close()
			params := `{}`
			if tc.declared {
				params = `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}}`
			}
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping","params":`+params+`}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != tc.want {
				t.Fatalf("%d %s\nwant %s", resp.StatusCode, b, tc.want)
			}
		})
	}
}

// Behind a signing SessionBinding (outside MCPFilter, as in mcpgateway) the
// client holds the signed session id and the filter the handler's: the
// declaration is recorded and found under the handler's.
func TestURLElicitationDeclaredBehindASignedSessionBinding(t *testing.T) {
	server := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(b, []byte(`"initialize"`)) {
			w.Header().Set(rsmiddleware.SessionHeader, "inner-session")
		}
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	filter := rsmiddleware.NewMCPFilter(rsmiddleware.MCPFilterConfig{})
	binding := &rsmiddleware.SessionBinding{Key: bytes.Repeat([]byte{9}, 32)}
	srv := httptest.NewServer(withPrincipal(binding.Wrap(filter.Wrap(urlGate(server, nil)))))
	defer srv.Close()
	_, _, sid := post(t, srv.URL, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"c","version":"1"}}}`)
	if !strings.HasPrefix(sid, "inner-session.") {
		t.Fatalf("session id %q is not the signed one", sid)
	}
	_, m, _ := post(t, srv.URL, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"open_page","arguments":{}}}`)
	if e, _ := m["error"].(map[string]any); e == nil || e["code"] != float64(rsmiddleware.ErrCodeURLElicitationRequired) {
		t.Fatalf("answer %v, want -32042", m)
	}
}
