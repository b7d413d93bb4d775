package rsmiddleware

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// batchOf is a JSON-RPC batch of n requests of method with ids 1..n.
func batchOf(n int, method, params string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `{"jsonrpc":"2.0","id":` + strconv.Itoa(i+1) + `,"method":"` + method + `"` + params + `}`
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func (fx *filterFixture) postVersion(t *testing.T, token, version, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fx.srv.URL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if version != "" {
		req.Header.Set(ProtocolVersionHeader, version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// wantInvalidRequest checks resp is 400 with the JSON-RPC error -32600, id
// null.
func wantInvalidRequest(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(b, &m) != nil || m.Error.Code != -32600 || string(m.ID) != "null" {
		t.Fatalf("%s: %d %s, want 400 with the JSON-RPC error -32600 and id null", what, resp.StatusCode, b)
	}
}

// A JSON-RPC batch of more than MaxBatchRequests messages, or any batch of
// an MCP revision without batches (2025-06-18 and later), never reaches the
// server: it is answered 400 -32600 Invalid Request and written to the
// audit as one event, not one per message. A batch of MaxBatchRequests
// without the version header (2025-03-26) passes, one event per request.
func TestMCPFilterBoundsBatches(t *testing.T) {
	var reached atomic.Int32
	fx := newFilterFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}), nil)
	tok := fx.token("mcp:tools")
	refused := func(what, version, body string) {
		t.Helper()
		mark := len(fx.audit.String())
		wantInvalidRequest(t, what, fx.postVersion(t, tok, version, body))
		if n := reached.Load(); n != 0 {
			t.Fatalf("%s reached the server", what)
		}
		lines := auditLines(t, fx.audit.String()[mark:])
		if len(lines) != 1 || lines[0].Method != "batch" || lines[0].Result != AuditRPCError || lines[0].ErrorCode != -32600 ||
			lines[0].Status != http.StatusBadRequest || lines[0].Sub != "alice" || lines[0].Tenant != "acme" {
			t.Fatalf("%s: audit %+v, want one batch event", what, lines)
		}
	}
	refused("a batch one longer than the bound", "", batchOf(MaxBatchRequests+1, "tools/list", ""))
	refused("a batch of 20000", "2025-03-26", batchOf(20000, "ping", ""))
	refused("a batch of two under 2025-06-18", "2025-06-18", batchOf(2, "tools/list", ""))
	refused("a batch of one under 2025-11-25", "2025-11-25", batchOf(1, "ping", ""))

	mark := len(fx.audit.String())
	if resp := fx.postVersion(t, tok, "", batchOf(MaxBatchRequests, "tools/list", "")); resp.StatusCode != http.StatusAccepted || reached.Load() != 1 {
		t.Fatalf("a batch at the bound: %d, reached %d", resp.StatusCode, reached.Load())
	}
	if lines := auditLines(t, fx.audit.String()[mark:]); len(lines) != MaxBatchRequests {
		t.Fatalf("a batch at the bound: %d audit events, want %d", len(lines), MaxBatchRequests)
	}
	if resp := fx.postVersion(t, tok, "2025-03-26", batchOf(2, "tools/list", "")); resp.StatusCode != http.StatusAccepted || reached.Load() != 2 {
		t.Fatalf("a batch under 2025-03-26: %d, reached %d", resp.StatusCode, reached.Load())
	}
	if resp := fx.postVersion(t, tok, "2025-06-18", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); resp.StatusCode != http.StatusAccepted || reached.Load() != 3 {
		t.Fatalf("a single request under 2025-06-18: %d, reached %d", resp.StatusCode, reached.Load())
	}

	// A long batch of hidden tool calls is refused for its length before
	// its scopes are read (its messages past the bound are not), and is
	// one audit event.
	mark = len(fx.audit.String())
	wantInvalidRequest(t, "a long batch of hidden tool calls", fx.postVersion(t, tok, "", batchOf(5000, "tools/call", `,"params":{"name":"admin_stats"}`)))
	if lines := auditLines(t, fx.audit.String()[mark:]); len(lines) != 1 || lines[0].Method != "batch" || lines[0].Result != AuditRPCError {
		t.Fatalf("a long batch of hidden tool calls: audit %+v", lines)
	}
	if n := reached.Load(); n != 3 {
		t.Fatalf("a long batch of hidden tool calls reached the server")
	}
}

// A batch with two requests under one id (1 and 1.0 are one id to a
// JavaScript server) never reaches the server: the tools/list answer could
// otherwise be taken for the answer of the other request, which is not
// trimmed, and show a hidden tool. Answered 400 with an array of -32600
// errors, one under the id of each request (JSON-RPC 2.0 §6), audited as
// one batch event; distinct ids pass.
func TestMCPFilterRefusesBatchesReusingAnID(t *testing.T) {
	var reached atomic.Int32
	fx := newFilterFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `[{"jsonrpc":"2.0","id":1,"result":`+toolsResult+`},{"jsonrpc":"2.0","id":2,"result":{}}]`)
	}), nil)
	tok := fx.token("mcp:tools")
	for _, body := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1.0,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/x"}]`,
		`[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","id":"\u0061","method":"tools/list"}]`,
	} {
		mark := len(fx.audit.String())
		resp := fx.postVersion(t, tok, "", body)
		var sent []struct {
			ID json.RawMessage `json:"id"`
		}
		var got []struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal([]byte(body), &sent); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &got) != nil || len(got) != 2 {
			t.Fatalf("%s: %d %s, want 400 with two JSON-RPC errors", body, resp.StatusCode, b)
		}
		for i, e := range got {
			if e.JSONRPC != "2.0" || e.Error.Code != -32600 || string(e.ID) != string(sent[i].ID) {
				t.Errorf("%s: answer %d %s", body, i, b)
			}
		}
		if reached.Load() != 0 {
			t.Fatalf("%s reached the server", body)
		}
		if lines := auditLines(t, fx.audit.String()[mark:]); len(lines) != 1 || lines[0].Method != "batch" || lines[0].Status != http.StatusBadRequest {
			t.Fatalf("%s: audit %+v, want one batch event", body, lines)
		}
	}
	resp := fx.postVersion(t, tok, "", `[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || reached.Load() != 1 || strings.Contains(string(b), "admin_stats") || !strings.Contains(string(b), `"echo"`) {
		t.Fatalf("distinct ids: %d %s", resp.StatusCode, b)
	}
}

// A content-coded answer the filter would trim (a compressing handler
// inside MCPFilter.Wrap) is refused 502, never passed on whole: the
// client would decompress it and see every tool.
func TestMCPFilterRefusesContentCodedAnswers(t *testing.T) {
	for _, ct := range []string{"application/json", "text/event-stream"} {
		t.Run(ct, func(t *testing.T) {
			fx := newFilterFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				msg := `{"jsonrpc":"2.0","id":1,"result":` + toolsResult + `}`
				if ct == "text/event-stream" {
					msg = "event: message\ndata: " + msg + "\n\n"
				}
				var b bytes.Buffer
				zw := gzip.NewWriter(&b)
				io.WriteString(zw, msg)
				zw.Close()
				w.Header().Set("Content-Type", ct)
				w.Header().Set("Content-Encoding", "gzip")
				w.Write(b.Bytes())
			}), nil)
			req, _ := http.NewRequest(http.MethodPost, fx.srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Authorization", "Bearer "+fx.token("mcp:tools"))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept-Encoding", "gzip") // no transparent decompression by the client
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
				body, _ = io.ReadAll(zr)
			}
			if strings.Contains(string(body), "admin_stats") {
				t.Fatalf("the answer shows admin_stats: %s", body)
			}
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Content-Encoding") != "" || !strings.Contains(string(body), "-32603") {
				t.Errorf("%d %v %s, want a 502 JSON-RPC error", resp.StatusCode, resp.Header, body)
			}
		})
	}
}
