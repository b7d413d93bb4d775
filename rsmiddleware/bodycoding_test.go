package rsmiddleware

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// The scopes of a request are read from its body as UTF-8 JSON; a body the
// server behind may decode otherwise is refused before it gets there.
// Express's JSON parser (the TypeScript MCP SDK's createMcpExpressApp)
// decodes charset=utf-7, where "tools+AC8-call" is tools/call and
// "admin+AF8-stats" is admin_stats, and inflates a gzip body: read as
// UTF-8 the same bytes name no method with scopes of its own, so a token
// with the base scope would call the admin tool.
func TestMiddlewareRefusesBodiesDecodedOtherwise(t *testing.T) {
	var reached atomic.Int32
	fx := newFilterFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}), nil)
	tok := fx.token("mcp:tools")
	const utf7Call = `{"jsonrpc":"2.0","id":1,"method":"tools+AC8-call","params":{"name":"admin+AF8-stats","arguments":{}}}`
	const plain = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	send := func(body string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, fx.srv.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "application/json, text/event-stream")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for _, tc := range []struct {
		name   string
		body   string
		header []string
	}{
		{"refuses charset=utf-7", utf7Call, []string{"Content-Type", "application/json; charset=utf-7"}},
		{"refuses a quoted, upper-case UTF-7 charset", utf7Call, []string{"Content-Type", `application/json;charset="UTF-7"`}},
		{"refuses charset=utf-16le", utf7Call, []string{"Content-Type", "application/json; charset=utf-16le"}},
		{"refuses charset=iso-8859-1", utf7Call, []string{"Content-Type", "application/json; charset=iso-8859-1"}},
		{"refuses two Content-Type fields", utf7Call, []string{"Content-Type", "application/json", "Content-Type", "application/json; charset=utf-7"}},
		{"refuses a Content-Type with the charset twice", utf7Call, []string{"Content-Type", "application/json; charset=utf-8; charset=utf-7"}},
		{"refuses a malformed Content-Type", utf7Call, []string{"Content-Type", "application/json; charset"}},
		{"refuses a gzip content coding", plain, []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}},
		{"refuses a content coding after identity", plain, []string{"Content-Type", "application/json", "Content-Encoding", "identity, br"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, mark := reached.Load(), len(fx.audit.String())
			resp := send(tc.body, tc.header...)
			var m struct {
				ID    json.RawMessage `json:"id"`
				Error struct{ Code int }
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusUnsupportedMediaType || json.Unmarshal(b, &m) != nil || m.Error.Code != -32600 || string(m.ID) != "null" {
				t.Errorf("%d %s, want 415 with the JSON-RPC error -32600", resp.StatusCode, b)
			}
			if reached.Load() != before {
				t.Errorf("the request reached the server")
			}
			if lines := auditLines(t, fx.audit.String()[mark:]); len(lines) != 1 || lines[0].Status != http.StatusUnsupportedMediaType || lines[0].Sub != "alice" {
				t.Errorf("audit %+v, want one event of the 415 refusal", lines)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		header []string
	}{
		{"passes application/json", []string{"Content-Type", "application/json"}},
		{"passes charset=utf-8", []string{"Content-Type", "application/json; charset=utf-8"}},
		{"passes charset=UTF-8 quoted", []string{"Content-Type", `application/json;charset="UTF-8"`}},
		{"passes the identity coding", []string{"Content-Type", "application/json", "Content-Encoding", "identity"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := reached.Load()
			if resp := send(plain, tc.header...); resp.StatusCode != http.StatusAccepted || reached.Load() != before+1 {
				t.Errorf("%d, reached %v: want 202 from the server", resp.StatusCode, reached.Load() != before)
			}
		})
	}
}
