package rsmiddleware

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// postHeader sends body with the Authorization header auth ("" for none).
func (fx *filterFixture) postHeader(t *testing.T, auth, body string) *http.Response {
	t.Helper()
	return postAuth(t, fx.srv.URL, auth, body)
}

// postAuth POSTs the JSON-RPC body to url with the Authorization header auth
// ("" for none), reads the answer and returns it.
func postAuth(t *testing.T, url, auth, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestMCPFilterAuditsRequestsRefusedWithoutAVerifiedToken(t *testing.T) {
	fx := newFilterFixture(t, mcpUpstream(false), nil)
	expired := fx.ks.claims()
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	expired["scope"] = "mcp:tools"
	otherAud := fx.ks.claims()
	otherAud["aud"] = "https://other.example/mcp"
	otherAud["scope"] = "mcp:tools"
	const call = `{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":{"name":"echo","arguments":{"text":"hidden"}}}`
	for _, c := range []struct {
		name, auth string
		status     int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a token that is no JWT", "Bearer not-a-token", http.StatusUnauthorized},
		{"an expired token", "Bearer " + fx.ks.mint(expired), http.StatusUnauthorized},
		{"a token of another audience", "Bearer " + fx.ks.mint(otherAud), http.StatusUnauthorized},
		{"a malformed Authorization header", "Bearer", http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(fx.audit.String())
			if resp := fx.postHeader(t, c.auth, call); resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			log := fx.audit.String()[before:]
			lines := auditLines(t, log)
			if len(lines) != 1 {
				t.Fatalf("%d audit lines, want 1:\n%s", len(lines), log)
			}
			l := lines[0]
			if l.Event != "tool.call" || l.Method != "tools/call" || l.Tool != "echo" || l.ID != "c-1" ||
				l.Result != AuditUnauthorized || l.Status != c.status || len(l.Args) != 64 {
				t.Errorf("audit line %+v", l)
			}
			if l.Sub != "" || l.ClientID != "" || l.Tenant != "" || strings.Contains(log, "alice") || strings.Contains(log, "hidden") {
				t.Errorf("the line names a principal no token proved, or the arguments: %s", log)
			}
		})
	}
}

func TestMCPFilterAuditOfRefusedRequestsIsBounded(t *testing.T) {
	fx := newFilterFixture(t, mcpUpstream(false), nil)
	long := strings.Repeat("m", 10000)
	longID := `"` + strings.Repeat("i", 10000) + `"`
	fx.postHeader(t, "", `{"jsonrpc":"2.0","id":`+longID+`,"method":"tools/call","params":{"name":"`+long+`é"}}`)
	fx.postHeader(t, "", `{"jsonrpc":"2.0","id":1,"method":"`+long+`"}`)
	// A body past MaxRefusedPeekBytes is not read: one line, method unknown.
	fx.postHeader(t, "", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`+strings.Repeat("p", MaxRefusedPeekBytes)+`"}}`)
	// Not JSON-RPC at all.
	fx.postHeader(t, "", `{{{`)
	log := fx.audit.String()
	lines := auditLines(t, log)
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%.2000s", len(lines), log)
	}
	for i, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if len(line) > 1024 {
			t.Errorf("line %d is %d bytes long", i, len(line))
		}
	}
	if l := lines[0]; len(l.Tool) > MaxAuditNameBytes || !strings.HasSuffix(l.Tool, "...") || l.Method != "tools/call" ||
		l.ID != "sha256:"+sha256Hex(longID) {
		t.Errorf("line 0: %+v", l)
	}
	if l := lines[1]; len(l.Method) != MaxAuditNameBytes || !strings.HasPrefix(l.Method, "mmm") || len(l.Event) != MaxAuditNameBytes {
		t.Errorf("line 1: %+v", l)
	}
	if l := lines[2]; l.Method != MethodUnknown || l.Result != AuditUnauthorized || l.Status != http.StatusUnauthorized {
		t.Errorf("line 2: %+v", l)
	}
	if l := lines[3]; l.Method != MethodUnknown || l.Result != AuditUnauthorized {
		t.Errorf("line 3: %+v", l)
	}
}

// A request with a verified token whose body is no JSON-RPC the Middleware
// passes on is refused with the same JSON-RPC error (here -32602, a tool
// name given twice, under the request's id) wherever it is read (by the Middleware, when the scopes depend
// on it, or by the filter), and audited with the principal.
func TestMCPFilterAuditsAuthenticatedRequestsRefusedForTheirForm(t *testing.T) {
	for _, c := range []struct {
		name   string
		scopes Scopes
	}{
		{"read by the Middleware", filterScopes},
		{"read by the filter", Scopes{Base: []string{"mcp:tools"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fx := newFilterFixture(t, mcpUpstream(false), func(cfg *MCPFilterConfig) { cfg.Scopes = c.scopes })
			resp := fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"admin_stats"}}`)
			if id, code := rpcErrorOf(t, resp); resp.StatusCode != http.StatusBadRequest || code != -32602 || string(id) != "1" {
				t.Fatalf("duplicate names: %d %d id %s", resp.StatusCode, code, id)
			}
			lines := auditLines(t, fx.audit.String())
			if len(lines) != 1 || lines[0].Method != MethodUnknown || lines[0].Result != AuditInvalid || lines[0].Status != http.StatusBadRequest ||
				lines[0].Sub != "alice" || lines[0].Tenant != "acme" {
				t.Errorf("audit: %+v", lines)
			}
		})
	}
}

// JSON-RPC responses the client sends (answers to the server's requests,
// such as elicitation/create) are forwarded, and audited as one event
// each, with the id they answer.
func TestMCPFilterAuditsResponsesTheClientSends(t *testing.T) {
	fx := newFilterFixture(t, mcpUpstream(false), nil)
	resp := fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":"srv-9","result":{"action":"accept","content":{"ok":true}}}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202 from the handler", resp.StatusCode)
	}
	lines := auditLines(t, fx.audit.String())
	if len(lines) != 1 || lines[0].Event != EventResponse || lines[0].Method != "" || lines[0].ID != "srv-9" ||
		lines[0].Result != AuditAccepted || lines[0].Status != http.StatusAccepted || lines[0].Sub != "alice" {
		t.Errorf("audit: %+v", lines)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// rpcErrorOf reads the id and code of a JSON-RPC error answer.
func rpcErrorOf(t *testing.T, resp *http.Response) (json.RawMessage, int) {
	t.Helper()
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("not a JSON-RPC answer (%d): %s", resp.StatusCode, body)
	}
	return m.ID, m.Error.Code
}
