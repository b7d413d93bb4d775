package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// gatewayToken signs in as alice through the MCP Go SDK's OAuth client and
// returns her access token for the gateway's resource, with mcp:tools and
// without mcp:admin.
func gatewayToken(t *testing.T, resource string) string {
	t.Helper()
	redirect := loopbackRedirect(t)
	tokens := &tokenSources{}
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL: redirect, AuthorizationCodeFetcher: newFormLogin(demoUser, demoPassword, redirect).fetch,
		NewTokenSource: tokens.newTokenSource,
		ScopeFilter: func(d []string) []string {
			return slices.DeleteFunc(slices.Clone(d), func(s string) bool { return s == "mcp:admin" })
		},
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "mcpauth e2e hostile client", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "hostile", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: resource, HTTPClient: &http.Client{}, OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatal(err)
	}
	session.Close()
	tok := tokens.all()[0].AccessToken
	if sc := scopesOf(t, tok); !slices.Contains(sc, "mcp:tools") || slices.Contains(sc, "mcp:admin") {
		t.Fatalf("token scopes %q, want mcp:tools without mcp:admin", sc)
	}
	return tok
}

// readOf is a resources/read of uri (a JSON string's content).
func readOf(uri string) string {
	return `{"jsonrpc":"2.0","id":30,"method":"resources/read","params":{"uri":"` + uri + `"}}`
}

const adminCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"admin_stats","arguments":{}}}`

// TestGatewayHostileInput sends requests crafted to make the gateway
// authorize one thing while the TypeScript server behind it (the SDK's
// Express app, whose JSON parser honours the charset and content coding of
// a request) runs another: with a token holding mcp:tools only, none of
// them may run admin_stats, which needs mcp:admin. The gateway decides on
// the decoded value the server will run (escapes), refuses what two JSON
// parsers may read differently (duplicate or case-folded members, a BOM, a
// charset or content coding), reframes every request it forwards (no
// smuggling through Content-Length and Transfer-Encoding), and refuses a
// second Mcp-Session-Id.
func TestGatewayHostileInput(t *testing.T) {
	_, upstream, _, resource := startGatewayStack(t, false, "EXPRESS=1")
	tok := gatewayToken(t, resource)
	post := func(body []byte, header ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, resource, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(header); i += 2 {
			if header[i+1] == "" {
				req.Header.Del(header[i])
			} else {
				req.Header[http.CanonicalHeaderKey(header[i])] = append(req.Header[http.CanonicalHeaderKey(header[i])][:0:0], header[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, _ := post([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	session := []string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-06-18"}
	if resp, _ := post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), session...); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	// The same call, accepted, is what the server runs when it may.
	if resp, body := post([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"plain"}}}`), session...); resp.StatusCode != 200 || !strings.Contains(body, `"plain"`) {
		t.Fatalf("echo: %d %s", resp.StatusCode, body)
	}

	// An unguarded resource is read.
	if resp, body := post([]byte(readOf("file:///readme")), session...); resp.StatusCode != 200 || !strings.Contains(body, "contents of readme") ||
		!slices.Contains(upstream.calls(t), "resource file:///readme") {
		t.Fatalf("file:///readme: %d %s", resp.StatusCode, body)
	}

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, adminCall)
	zw.Close()
	deep := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"admin_stats","arguments":{"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}}`
	for _, tc := range []struct {
		name   string
		body   string
		header []string
		status int
	}{
		{"a UTF-7 body whose tools+AC8-call is tools/call of admin+AF8-stats", `{"jsonrpc":"2.0","id":5,"method":"tools+AC8-call","params":{"name":"admin+AF8-stats","arguments":{}}}`,
			[]string{"Content-Type", "application/json; charset=utf-7"}, http.StatusUnsupportedMediaType},
		{"a gzip-coded call", gz.String(), []string{"Content-Encoding", "gzip"}, http.StatusUnsupportedMediaType},
		{"the method spelt with an escape", `{"jsonrpc":"2.0","id":6,"method":"tools\u002fcall","params":{"name":"admin_stats","arguments":{}}}`, nil, http.StatusForbidden},
		{"the tool name spelt with an escape", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"admin\u005fstats","arguments":{}}}`, nil, http.StatusForbidden},
		{"method twice, tools/call last (JSON.parse keeps the last)", `{"jsonrpc":"2.0","id":8,"method":"tools/list","method":"tools/call","params":{"name":"admin_stats","arguments":{}}}`, nil, http.StatusBadRequest},
		{"name twice, admin_stats last", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","name":"admin_stats","arguments":{}}}`, nil, http.StatusBadRequest},
		{"params twice, admin_stats last", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}},"params":{"name":"admin_stats","arguments":{}}}`, nil, http.StatusBadRequest},
		{"a Method member beside method", `{"jsonrpc":"2.0","id":11,"Method":"tools/list","method":"tools/call","params":{"name":"admin_stats","arguments":{}}}`, nil, http.StatusBadRequest},
		{"a null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"admin_stats","arguments":{}}}`, nil, http.StatusForbidden},
		{"a byte order mark", "\ufeff" + adminCall, nil, http.StatusBadRequest},
		{"arguments nested 20000 deep", deep, nil, http.StatusBadRequest},
		{"the call inside a batch of MCP 2025-03-26", `[{"jsonrpc":"2.0","id":12,"method":"tools/list"},` + adminCall + `]`,
			[]string{"Mcp-Protocol-Version", ""}, http.StatusForbidden},
		// deploy/mcpgateway.yaml guards file:///var/log/{name} with
		// mcp:admin; the server looks resources up by new URL(uri).toString().
		{"a read of FILE:///var/log/audit, which the server reads as file:///var/log/audit", readOf("FILE:///var/log/audit"), nil, http.StatusForbidden},
		{"a read of a path with a dot segment", readOf("file:///var/x/../log/audit"), nil, http.StatusBadRequest},
		{"a read of a path with an encoded dot segment", readOf("file:///var/x/%2E%2e/log/audit"), nil, http.StatusBadRequest},
		{"a read of a file URI with the host localhost", readOf("file://localhost/var/log/audit"), nil, http.StatusBadRequest},
		{"a read with a newline in the URI", readOf("file:///var/lo\ng/audit"), nil, http.StatusBadRequest},
		{"a read with a leading space", readOf(" file:///var/log/audit"), nil, http.StatusBadRequest},
		// deploy/mcpgateway.yaml guards the prompt incident_report too.
		{"the completion of the guarded prompt's arguments", `{"jsonrpc":"2.0","id":31,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"incident_report"},"argument":{"name":"a","value":""}}}`, nil, http.StatusForbidden},
		{"the completion of the guarded template's arguments", `{"jsonrpc":"2.0","id":32,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///var/log/{name}"},"argument":{"name":"name","value":""}}}`, nil, http.StatusForbidden},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			resp, body := post([]byte(tc.body), append(slices.Clone(session), tc.header...)...)
			if resp.StatusCode != tc.status {
				t.Errorf("%d %.200s, want %d", resp.StatusCode, body, tc.status)
			}
			for _, c := range upstream.calls(t) {
				if c == "admin_stats" || strings.HasPrefix(c, "resource file:///var/log/") {
					t.Fatalf("the server ran %s: %q", c, upstream.calls(t))
				}
			}
		})
	}

	// A batch of MCP 2025-03-26 with tools/list and another request under
	// one id: the answers cannot be told apart, and the tools/list answer
	// must not be passed on untrimmed as the other request's.
	for _, batch := range []string{
		`[{"jsonrpc":"2.0","id":20,"method":"tools/list"},{"jsonrpc":"2.0","id":20,"method":"ping"}]`,
		`[{"jsonrpc":"2.0","id":21,"method":"ping"},{"jsonrpc":"2.0","id":21.0,"method":"tools/list"}]`,
	} {
		t.Run("never shows admin_stats to a batch reusing an id: "+batch, func(t *testing.T) {
			resp, body := post([]byte(batch), "Mcp-Session-Id", sid)
			if strings.Contains(body, "admin_stats") {
				t.Errorf("%d: the answer lists admin_stats: %s", resp.StatusCode, body)
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%d %s, want 400", resp.StatusCode, body)
			}
		})
	}

	t.Run("refuses two Mcp-Session-Id fields", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, resource, strings.NewReader(`{"jsonrpc":"2.0","id":13,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		req.Header["Mcp-Session-Id"] = []string{sid, "another-session"}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%d, want 400", resp.StatusCode)
		}
	})

	// Raw HTTP/1.1 on one connection: what the gateway reads as one request
	// is sent upstream as one request of its own framing, and whatever
	// follows on the connection is a request of its own, authorized as such.
	u, _ := url.Parse(resource)
	head := func(framing string) string {
		return "POST " + u.Path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: " + sid +
			"\r\nMcp-Protocol-Version: 2025-06-18\r\n" + framing + "\r\n"
	}
	echo := `{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"echo","arguments":{"text":"framed"}}}`
	smuggled := head(fmt.Sprintf("Content-Length: %d\r\nConnection: close\r\n", len(adminCall))) + adminCall
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(echo), echo)
	for _, tc := range []struct {
		name string
		raw  string
		want []int
	}{
		{"Content-Length and Transfer-Encoding: the chunked body counts, the rest is a request of its own",
			head(fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n", len(chunked)+len(smuggled))) + chunked + smuggled, []int{200, 403}},
		{"two different Content-Length fields", head(fmt.Sprintf("Content-Length: %d\r\nContent-Length: 5\r\nConnection: close\r\n", len(echo))) + echo, []int{400}},
		{"a Transfer-Encoding other than chunked", head("Transfer-Encoding: gzip, chunked\r\nConnection: close\r\n") + chunked, []int{501}},
		{"a pipelined admin call after an echo", head(fmt.Sprintf("Content-Length: %d\r\n", len(echo))) + echo + smuggled, []int{200, 403}},
		{"a header line folded onto Authorization", head(fmt.Sprintf("X-Note: a\r\n Authorization: Bearer other\r\nContent-Length: %d\r\nConnection: close\r\n", len(adminCall))) + adminCall, []int{403}},
		{"a bare CR in a header value", head(fmt.Sprintf("X-Note: a\rAuthorization: Bearer other\r\nContent-Length: %d\r\nConnection: close\r\n", len(adminCall))) + adminCall, []int{400}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rawExchange(t, u.Host, tc.raw)
			if !slices.Equal(got, tc.want) {
				t.Errorf("statuses %v, want %v", got, tc.want)
			}
			if slices.Contains(upstream.calls(t), "admin_stats") {
				t.Fatalf("the server ran admin_stats: %q", upstream.calls(t))
			}
		})
	}
	for i, r := range upstream.seen(t) {
		if r.Authorization != "" {
			t.Errorf("upstream request %d carried Authorization", i)
		}
	}
}

// rawExchange writes raw to a new connection to addr and returns the status
// of every response read until the server closes it.
func rawExchange(t *testing.T, addr, raw string) []int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A bound on a server that never answers, not a measurement.
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	var statuses []int
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return statuses
		}
		statuses = append(statuses, resp.StatusCode)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close {
			return statuses
		}
	}
}
