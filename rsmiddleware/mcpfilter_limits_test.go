package rsmiddleware

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// fixedUpstream answers every request 200 with answer as JSON.
func fixedUpstream(answer string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, answer)
	})
}

// TestMCPFilterLimitsAreInclusive: a request body of exactly MaxBodyBytes
// and an answer of exactly MaxResponseBytes pass.
func TestMCPFilterLimitsAreInclusive(t *testing.T) {
	const req = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	answer := `{"jsonrpc":"2.0","id":1,"result":` + toolsResult + `}`
	fx := newFilterFixture(t, fixedUpstream(answer), func(c *MCPFilterConfig) {
		c.MaxBodyBytes, c.MaxResponseBytes = int64(len(req)), int64(len(answer))
	})
	resp := fx.post(t, fx.token("mcp:tools mcp:admin mcp:read"), req)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "admin_stats") {
		t.Fatalf("status %d, %s; want the answer", resp.StatusCode, body)
	}
}

// TestMCPFilterReadsOnlyPOSTBodies: a GET with a body is passed on
// without the body being parsed as JSON-RPC.
func TestMCPFilterReadsOnlyPOSTBodies(t *testing.T) {
	fx := newFilterFixture(t, fixedUpstream(`{}`), nil)
	req, _ := http.NewRequest(http.MethodGet, fx.srv.URL, strings.NewReader("not json"))
	req.Header.Set("Authorization", "Bearer "+fx.token("mcp:tools"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET with a body: status %d; want 200", resp.StatusCode)
	}
}

// TestMCPFilterAuditsAnswersOfACallerWithEveryScope: with nothing to trim
// the answers are still read for the audit (result, isError).
func TestMCPFilterAuditsAnswersOfACallerWithEveryScope(t *testing.T) {
	fx := newFilterFixture(t, mcpUpstream(false), nil)
	io.ReadAll(fx.post(t, fx.token("mcp:tools mcp:admin mcp:read"), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fails","arguments":{}}}`).Body)
	lines := auditLines(t, fx.audit.String())
	if len(lines) != 1 || lines[0].Result != AuditToolError || !lines[0].IsError {
		t.Fatalf("audit %+v; want one tool_error line with is_error", lines)
	}
}

// TestMCPFilterAuditsEveryRequestOfABatch: a batch whose answer leaves
// out its first request still has an audit line per request.
func TestMCPFilterAuditsEveryRequestOfABatch(t *testing.T) {
	upstream := fixedUpstream(`[{"jsonrpc":"2.0","id":2,"result":{}}]`)
	fx := newFilterFixture(t, upstream, nil)
	io.ReadAll(fx.post(t, fx.token("mcp:tools"), `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping"}]`).Body)
	lines := auditLines(t, fx.audit.String())
	if len(lines) != 3 {
		t.Fatalf("%d audit lines, want 3: %+v", len(lines), lines)
	}
}

// TestAuditDeniedOfABodyWithoutRequests: a refused request whose body
// holds no message is audited once, as method unknown; a refused response
// of the client is audited as a response.
func TestAuditDeniedOfABodyWithoutRequests(t *testing.T) {
	var events []AuditEvent
	f := NewMCPFilter(MCPFilterConfig{Scopes: filterScopes, Audit: func(e AuditEvent) { events = append(events, e) }})
	r, _ := http.NewRequest(http.MethodPost, "https://mcp.example.com/mcp", nil)
	f.AuditDenied(r, &Principal{Subject: "alice"}, []byte(`[]`))
	if len(events) != 1 || events[0].Method != MethodUnknown {
		t.Fatalf("events %+v; want one of method unknown", events)
	}
	events = nil
	f.AuditDenied(r, &Principal{Subject: "alice"}, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	if len(events) != 1 || events[0].Event != EventResponse || events[0].Method != "" || events[0].RequestID != "1" || events[0].Result != AuditDenied {
		t.Fatalf("events %+v; want one response, id 1, denied", events)
	}
}

// TestForEachLine: lines end in CRLF, LF or CR (WHATWG HTML §9.2.5).
func TestForEachLine(t *testing.T) {
	for in, want := range map[string][]string{
		"":            nil,
		"a":           {"a"},
		"a\r\nb":      {"a", "b"},
		"a\nb":        {"a", "b"},
		"a\rb":        {"a", "b"},
		"a\r":         {"a"},
		"a\r\n":       {"a"},
		"\nb":         {"", "b"},
		"a\n\nb":      {"a", "", "b"},
		"a\r\rb":      {"a", "", "b"},
		"a\n\r\nb\rc": {"a", "", "b", "c"},
	} {
		var got []string
		forEachLine([]byte(in), func(l []byte) { got = append(got, string(l)) })
		if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
			t.Errorf("forEachLine(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestIsBatch: only an array is a batch.
func TestIsBatch(t *testing.T) {
	for in, want := range map[string]bool{"": false, "  ": false, " [1]": true, "{}": false, `"["`: false} {
		if got := isBatch([]byte(in)); got != want {
			t.Errorf("isBatch(%q) = %v", in, got)
		}
	}
}

// TestMCPFilterTrimsWithoutAudit: without an audit, list answers are still
// cut for a caller lacking only one of the scopes that decide them.
func TestMCPFilterTrimsWithoutAudit(t *testing.T) {
	noAudit := func(c *MCPFilterConfig) { c.Audit = nil }
	fx := newFilterFixture(t, mcpUpstream(false), noAudit)
	answers := rpcAnswers(t, fx.post(t, fx.token("mcp:tools mcp:read"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if got := toolNames(t, answers[0]["result"]); len(got) != 1 || got[0] != "echo" {
		t.Errorf("tools without mcp:admin = %v, want [echo]", got)
	}
	answers = rpcAnswers(t, fx.post(t, fx.token("mcp:tools mcp:admin"), `{"jsonrpc":"2.0","id":2,"method":"resources/list"}`))
	if string(answers[0]["result"]) != `{"resources":[]}` {
		t.Errorf("resources without mcp:read: %s", answers[0]["result"])
	}
	prompts := newFilterFixture(t, fixedUpstream(`{"jsonrpc":"2.0","id":3,"result":{"prompts":[{"name":"p"}]}}`), func(c *MCPFilterConfig) {
		c.Audit = nil
		c.Scopes = Scopes{Base: filterScopes.Base, Tools: filterScopes.Tools,
			Methods: map[string][]string{"resources/read": {"mcp:read"}, "prompts/get": {"mcp:prompts"}}}
	})
	answers = rpcAnswers(t, prompts.post(t, prompts.token("mcp:tools mcp:admin mcp:read"), `{"jsonrpc":"2.0","id":3,"method":"prompts/list"}`))
	if string(answers[0]["result"]) != `{"prompts":[]}` {
		t.Errorf("prompts without mcp:prompts: %s", answers[0]["result"])
	}
}

// TestMCPFilterLogsToItsLogger: an answer too large to filter is logged to
// the configured Logger.
func TestMCPFilterLogsToItsLogger(t *testing.T) {
	var logs lockedBuffer
	fx := newFilterFixture(t, fixedUpstream(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"`+strings.Repeat("x", 2000)+`"}]}}`), func(c *MCPFilterConfig) {
		c.MaxResponseBytes = 1000
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	io.ReadAll(fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).Body)
	if !strings.Contains(logs.String(), "too large to filter") {
		t.Fatalf("log %q; want the oversized answer named", logs.String())
	}
}

// TestMCPFilterTrimsEachEntry: a hidden tool before a visible one, and a
// tool with an empty name, are cut; the visible ones after them are kept.
func TestMCPFilterTrimsEachEntry(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"admin_stats"},{"name":""},{"name":"echo"}],"nextCursor":"c2"}}`
	fx := newFilterFixture(t, fixedUpstream(answer), nil)
	answers := rpcAnswers(t, fx.post(t, fx.token("mcp:tools mcp:read"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if got := toolNames(t, answers[0]["result"]); len(got) != 1 || got[0] != "echo" {
		t.Fatalf("tools = %q; want [echo]", got)
	}
}

// TestTrimResultOfUnknownMethodAppliesEveryRule: an answer recognised by
// its shape (no request known) is cut by every list rule, whichever
// members come before: an absent one, or one that is not a list.
func TestTrimResultOfUnknownMethodAppliesEveryRule(t *testing.T) {
	f := NewMCPFilter(MCPFilterConfig{Scopes: filterScopes})
	p := &Principal{Subject: "alice", Scopes: []string{"mcp:tools"}}
	for in, want := range map[string]string{
		`{"resources":[{"uri":"file:///a"}]}`:                  `{"resources":[]}`,
		`{"tools":"x","resources":[{"uri":"file:///a"}]}`:      `{"resources":[],"tools":[]}`,
		`{"tools":[{"name":"echo"}],"resourceTemplates":[{}]}`: `{"resourceTemplates":[],"tools":[{"name":"echo"}]}`,
	} {
		got, _ := f.trimResult("", json.RawMessage(in), p)
		if string(got) != want {
			t.Errorf("trimResult(%s) = %s; want %s", in, got, want)
		}
	}
}

// TestMCPFilterEventStreamWrites: an unfinished event of exactly
// MaxResponseBytes is held and forwarded once complete, each Write of the
// handler taking every byte; one byte more cuts the stream and the
// handler's Write returns errTooLarge.
func TestMCPFilterEventStreamWrites(t *testing.T) {
	const head = `data: {"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
	type written struct {
		n   int
		err error
	}
	for _, tc := range []struct {
		limit int64
		ok    bool
	}{{int64(len(head)), true}, {int64(len(head)) - 1, false}} {
		got := make(chan []written, 1)
		upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			var res []written
			for _, p := range []string{head, "\n\n"} {
				n, err := w.Write([]byte(p))
				res = append(res, written{n, err})
			}
			got <- res
		})
		fx := newFilterFixture(t, upstream, func(c *MCPFilterConfig) { c.MaxResponseBytes = tc.limit })
		resp := fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
		body, _ := io.ReadAll(resp.Body)
		res := <-got
		if tc.ok {
			if res[0] != (written{len(head), nil}) || res[1] != (written{2, nil}) || string(body) != head+"\n\n" {
				t.Fatalf("limit %d: writes %v, body %q; want both taken whole and the event forwarded", tc.limit, res, body)
			}
			continue
		}
		if res[0] != (written{0, errTooLarge}) || res[1] != (written{0, errTooLarge}) || strings.Contains(string(body), `"id":1`) {
			t.Fatalf("limit %d: writes %v, body %q; want errTooLarge and the event dropped", tc.limit, res, body)
		}
	}
}

// TestMCPFilterOversizedAnswerNamesOnlyASingleRequest: the JSON-RPC error
// for an answer over MaxResponseBytes carries the id of a single request,
// and null for a batch (JSON-RPC 2.0 §5: null when it cannot be told).
func TestMCPFilterOversizedAnswerNamesOnlyASingleRequest(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"` + strings.Repeat("x", 2000) + `"}]}}`
	fx := newFilterFixture(t, fixedUpstream(answer), func(c *MCPFilterConfig) { c.MaxResponseBytes = 1000 })
	for _, tc := range []struct{ body, id string }{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, "7"},
		{`[{"jsonrpc":"2.0","id":7,"method":"tools/list"},{"jsonrpc":"2.0","id":8,"method":"tools/list"}]`, "null"},
	} {
		resp := fx.postVersion(t, fx.token("mcp:tools"), "", tc.body)
		b, _ := io.ReadAll(resp.Body)
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if resp.StatusCode != http.StatusBadGateway || json.Unmarshal(b, &m) != nil || m.Error.Code != -32603 || string(m.ID) != tc.id {
			t.Fatalf("%s: %d %s; want 502, -32603 and id %s", tc.body, resp.StatusCode, b, tc.id)
		}
	}
}
