package rsmiddleware

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/metadata"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

var testScopes = Scopes{
	Base:    []string{"mcp:read"},
	Methods: map[string][]string{"resources/subscribe": {"mcp:subscribe"}},
	Tools: map[string][]string{
		"delete_repo": {"repo:admin"},
		"write_file":  {"mcp:write"},
	},
}

// echo reports what the protected handler saw.
type echo struct {
	Subject       string `json:"sub"`
	Authorization string `json:"authorization"`
	Body          string `json:"body"`
}

type rsFixture struct {
	ks  *keyServer
	srv *httptest.Server
	prm string
}

func newRS(t *testing.T, mod func(*MiddlewareConfig)) *rsFixture {
	ks := newKeyServer(t)
	v := ks.verifier(t, nil)
	prm, err := ResourceMetadataURL(testResource)
	if err != nil {
		t.Fatal(err)
	}
	cfg := MiddlewareConfig{Verifier: v, ResourceMetadataURL: prm, Scopes: testScopes, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	mw, err := NewMiddleware(cfg)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := NewProtectedResourceMetadata(testResource, []string{ks.issuer}, []string{"mcp:read", "mcp:write", "offline_access"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if err := MountPRM(mux, doc, true); err != nil {
		t.Fatal(err)
	}
	mux.Handle("/mcp", mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		p, _ := PrincipalFromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		e := echo{Body: string(body), Authorization: r.Header.Get("Authorization")}
		if p != nil {
			e.Subject = p.Subject
		}
		writeJSON(w, 200, e)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &rsFixture{ks: ks, srv: srv, prm: prm}
}

func (f *rsFixture) do(t *testing.T, method, path string, header map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n got: %s\nwant: %s", name, got, want)
	}
}

func rpc(method string, params any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	return string(b)
}

func toolCall(name string) string {
	return rpc("tools/call", map[string]any{"name": name, "arguments": map[string]any{}})
}

func TestMiddlewareChallenges(t *testing.T) {
	f := newRS(t, nil)
	bearer := func(scope string) map[string]string {
		c := f.ks.claims()
		c["scope"] = scope
		return map[string]string{"Authorization": "Bearer " + f.ks.mint(c)}
	}
	otherAud := func() map[string]string {
		c := f.ks.claims()
		c["aud"] = otherResource
		return map[string]string{"Authorization": "Bearer " + f.ks.mint(c)}
	}()
	tests := []struct {
		name, file string
		method     string
		path       string
		header     map[string]string
		body       string
		status     int
	}{
		{"asks for a token when none was sent", "challenge-no-token.txt", "POST", "/mcp", nil, rpc("initialize", nil), 401},
		{"treats another scheme as no token", "challenge-no-token.txt", "POST", "/mcp", map[string]string{"Authorization": "Basic dXNlcjpwdw=="}, rpc("initialize", nil), 401},
		{"refuses an invalid token", "challenge-invalid-token.txt", "POST", "/mcp", map[string]string{"Authorization": "Bearer abc.def.ghi"}, rpc("initialize", nil), 401},
		{"refuses a valid token for another resource", "challenge-invalid-token.txt", "POST", "/mcp", otherAud, rpc("initialize", nil), 401},
		{"refuses a token in the query string", "challenge-query-token.txt", "POST", "/mcp?access_token=" + f.ks.mint(f.ks.claims()), nil, rpc("initialize", nil), 400},
		{"refuses a malformed bearer header", "challenge-malformed.txt", "POST", "/mcp", map[string]string{"Authorization": "Bearer a b"}, rpc("initialize", nil), 400},
		{"steps up a tools/call the token lacks scopes for", "challenge-step-up-tool.txt", "POST", "/mcp", bearer("mcp:read"), toolCall("delete_repo"), 403},
		{"steps up a batch with the union of its scopes", "challenge-step-up-batch.txt", "POST", "/mcp", bearer("mcp:read"),
			"[" + toolCall("write_file") + "," + rpc("tools/list", nil) + "," + toolCall("delete_repo") + "]", 403},
		{"refuses a token without the base scope", "challenge-base-scope.txt", "POST", "/mcp", bearer("mcp:write"), rpc("tools/list", nil), 403},
		{"steps up a method mapped to scopes", "challenge-step-up-method.txt", "POST", "/mcp", bearer("mcp:read"), rpc("resources/subscribe", map[string]any{"uri": "x"}), 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.do(t, tt.method, tt.path, tt.header, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			if got := resp.Header.Get("Access-Control-Expose-Headers"); got != "WWW-Authenticate" {
				t.Errorf("Access-Control-Expose-Headers = %q", got)
			}
			wa := resp.Header.Get("WWW-Authenticate")
			if !strings.Contains(wa, `resource_metadata="`+f.prm+`"`) {
				t.Errorf("WWW-Authenticate %q lacks resource_metadata", wa)
			}
			// The PRM URL depends on nothing random; the golden file holds the header and body.
			golden(t, tt.file, []byte(fmt.Sprintf("HTTP %d\nWWW-Authenticate: %s\n\n%s", resp.StatusCode, wa, body)))
		})
	}
}

func TestMiddlewarePassesAuthorizedRequests(t *testing.T) {
	f := newRS(t, nil)
	c := f.ks.claims()
	c["scope"] = "mcp:read mcp:write"
	auth := map[string]string{"Authorization": "Bearer " + f.ks.mint(c)}
	tests := []struct {
		name, body string
	}{
		{"passes an initialize request", rpc("initialize", map[string]any{"protocolVersion": "2025-06-18"})},
		{"passes a tools/call the token has scopes for", toolCall("write_file")},
		{"passes a tools/call of an unmapped tool on base scopes", toolCall("echo")},
		{"passes a batch whose scopes are all granted", "[" + toolCall("write_file") + "," + rpc("tools/list", nil) + "]"},
		{"passes a notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.do(t, "POST", "/mcp", auth, tt.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			var e echo
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatal(err)
			}
			if e.Subject != "alice" {
				t.Errorf("handler saw principal %q", e.Subject)
			}
			if e.Authorization != "" {
				t.Errorf("handler saw the Authorization header %q", e.Authorization)
			}
			if e.Body != tt.body {
				t.Errorf("handler read body %q, want %q", e.Body, tt.body)
			}
		})
	}
	t.Run("passes a GET stream request on base scopes", func(t *testing.T) {
		resp, body := f.do(t, "GET", "/mcp", auth, "")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
	})
}

func TestMiddlewareRefusesOddRequests(t *testing.T) {
	f := newRS(t, func(c *MiddlewareConfig) { c.MaxBodyBytes = 1024 })
	c := f.ks.claims()
	c["scope"] = "mcp:read mcp:write repo:admin"
	tok := "Bearer " + f.ks.mint(c)
	const parseError = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
	tests := []struct {
		name, body string
		status     int
		want       string // the answer's body
	}{
		{"refuses a body larger than the bound", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"p":"` + strings.Repeat("a", 2000) + `"}}`, 413,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the request body is larger than the server accepts"}}`},
		{"refuses a body that is not JSON", `{"jsonrpc":`, 400, parseError},
		{"refuses a duplicated method key", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"x"}}`, 400,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: method or params given twice"}}`},
		{"refuses a method key differing only by case", `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call"}`, 400,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: method or params given twice"}}`},
		{"refuses a tool name key differing only by case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","NAME":"delete_repo"}}`, 400,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params: params.name given twice"}}`},
		{"refuses a tools/call without a tool name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, 400,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Invalid params: tools/call names its tool in params.name"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.do(t, "POST", "/mcp", map[string]string{"Authorization": tok}, tt.body)
			if resp.StatusCode != tt.status || strings.TrimSpace(string(body)) != tt.want {
				t.Fatalf("status %d, body %q; want %d, %q", resp.StatusCode, body, tt.status, tt.want)
			}
			// The token was good: the refusal is about the body, not a challenge.
			if h := resp.Header.Get("WWW-Authenticate"); h != "" {
				t.Errorf("WWW-Authenticate %q on a refused body", h)
			}
		})
	}
	t.Run("refuses two Authorization headers", func(t *testing.T) {
		req, _ := http.NewRequest("POST", f.srv.URL+"/mcp", strings.NewReader(rpc("tools/list", nil)))
		req.Header.Add("Authorization", tok)
		req.Header.Add("Authorization", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != 400 || !strings.Contains(h, `error="invalid_request"`) || !strings.Contains(h, "more than one Authorization header") {
			t.Fatalf("status %d, WWW-Authenticate %q; want 400 invalid_request naming the two headers", resp.StatusCode, h)
		}
	})
}

func TestCORSPreflightPassesUnauthenticated(t *testing.T) {
	f := newRS(t, nil)
	resp, _ := f.do(t, "OPTIONS", "/mcp", map[string]string{"Origin": "https://inspector.example", "Access-Control-Request-Method": "POST"}, "")
	if resp.StatusCode != 204 {
		t.Fatalf("preflight status %d", resp.StatusCode)
	}
	resp, _ = f.do(t, "POST", "/mcp", map[string]string{"Origin": "https://inspector.example"}, rpc("initialize", nil))
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Expose-Headers") != "WWW-Authenticate" {
		t.Fatalf("browser 401: status %d headers %v", resp.StatusCode, resp.Header)
	}
	// Without Origin the 401 is no CORS response.
	resp, _ = f.do(t, "POST", "/mcp", nil, rpc("initialize", nil))
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("401 without Origin: status %d, Access-Control-Allow-Origin %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

func TestMiddlewareAnswers503WhenTheASIsUnreachable(t *testing.T) {
	f := newRS(t, nil)
	f.ks.down.Store(true)
	resp, _ := f.do(t, "POST", "/mcp", map[string]string{"Authorization": "Bearer " + f.ks.mint(f.ks.claims())}, rpc("tools/list", nil))
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestProtectedResourceMetadata(t *testing.T) {
	f := newRS(t, nil)
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, body := f.do(t, "GET", path, nil, "")
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		var doc metadata.ProtectedResourceMetadata
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Resource != testResource || doc.AuthorizationServers[0] != f.ks.issuer || doc.BearerMethodsSupported[0] != "header" {
			t.Fatalf("document %+v", doc)
		}
		for _, s := range doc.ScopesSupported {
			if s == "offline_access" {
				t.Fatal("offline_access advertised")
			}
		}
	}
	doc, _ := NewProtectedResourceMetadata("https://MCP.example.com/mcp/", []string{"https://auth.example.com"}, []string{"mcp:read", "mcp:write"})
	b, _ := json.MarshalIndent(doc, "", "  ")
	golden(t, "prm.json", append(b, '\n'))
	if _, err := NewProtectedResourceMetadata(testResource, nil, nil); err == nil {
		t.Fatal("accepted a document without authorization servers")
	}
}

func TestNewMiddlewareRefusesIncompleteConfig(t *testing.T) {
	ks := newKeyServer(t)
	if _, err := NewMiddleware(MiddlewareConfig{ResourceMetadataURL: "https://h/.well-known/oauth-protected-resource"}); err == nil {
		t.Error("accepted a missing verifier")
	}
	if _, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil)}); err == nil {
		t.Error("accepted a missing resource metadata URL")
	}
}
