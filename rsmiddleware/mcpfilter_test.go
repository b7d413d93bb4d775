package rsmiddleware

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/internal/syncbuf"
)

var filterScopes = Scopes{
	Base:    []string{"mcp:tools"},
	Tools:   map[string][]string{"admin_stats": {"mcp:admin"}},
	Methods: map[string][]string{"resources/read": {"mcp:read"}},
}

const toolsResult = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"admin_stats","description":"secret ops","inputSchema":{"type":"object"}}],"nextCursor":"c2"}`

// syncBuffer is a bytes.Buffer safe for the audit's concurrent writes.
type syncBuffer = syncbuf.Buffer

// mcpUpstream answers like a Streamable HTTP MCP server: initialize,
// tools/list, tools/call (echo, a failing tool, an unknown tool),
// resources/list, and 202 for notifications; in JSON or SSE form.
func mcpUpstream(sse bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &msg) != nil {
			http.Error(w, "bad", 400)
			return
		}
		if msg.ID == nil || msg.Method == "" {
			// A notification, or a response to a request of the server.
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var answer string
		switch msg.Method {
		case "tools/list":
			answer = `"result":` + toolsResult
		case "resources/list":
			answer = `"result":{"resources":[{"uri":"file:///a","name":"a"}]}`
		case "tools/call":
			switch msg.Params.Name {
			case "echo", "admin_stats":
				answer = `"result":{"content":[{"type":"text","text":"done"}]}`
			case "fails":
				answer = `"result":{"content":[{"type":"text","text":"boom"}],"isError":true}`
			default:
				answer = `"error":{"code":-32602,"message":"unknown tool"}`
			}
		default:
			answer = `"result":{}`
		}
		out := `{"jsonrpc":"2.0","id":` + string(msg.ID) + `,` + answer + `}`
		if !sse {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, out)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, "id: ev-7\nevent: message\ndata: %s\n\n", out)
	})
}

type filterFixture struct {
	ks    *keyServer
	srv   *httptest.Server
	audit *syncBuffer
}

func newFilterFixture(t testing.TB, upstream http.Handler, mod func(*MCPFilterConfig)) *filterFixture {
	t.Helper()
	ks := newKeyServer(t)
	audit := &syncBuffer{}
	cfg := MCPFilterConfig{Scopes: filterScopes, Audit: AuditLog(audit, "json"), TenantClaim: "tenant",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	f := NewMCPFilter(cfg)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm, Scopes: cfg.Scopes,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnInsufficientScope: f.AuditDenied, OnRefused: f.AuditRefused})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(f.Wrap(upstream)))
	t.Cleanup(srv.Close)
	return &filterFixture{ks: ks, srv: srv, audit: audit}
}

func (fx *filterFixture) token(scope string) string {
	c := fx.ks.claims()
	c["scope"] = scope
	c["tenant"] = "acme"
	return fx.ks.mint(c)
}

func (fx *filterFixture) post(t *testing.T, token, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, fx.srv.URL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// rpcAnswers returns the JSON-RPC answers (messages with an id) of resp, JSON or SSE.
func rpcAnswers(t *testing.T, resp *http.Response) []map[string]json.RawMessage {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var datas [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				datas = append(datas, []byte(d))
			}
		}
	} else {
		datas = [][]byte{body}
	}
	var out []map[string]json.RawMessage
	for _, d := range datas {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(d, &m); err != nil {
			t.Fatalf("answer is not JSON: %s", d)
		}
		if _, ok := m["id"]; ok {
			out = append(out, m)
		}
	}
	return out
}

func toolNames(t *testing.T, result json.RawMessage) []string {
	t.Helper()
	var r struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatal(err)
	}
	if r.NextCursor != "c2" {
		t.Errorf("nextCursor lost: %s", result)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func TestMCPFilterTrimsToolsListToTheCallersScopes(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			fx := newFilterFixture(t, mcpUpstream(sse), nil)
			list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
			answers := rpcAnswers(t, fx.post(t, fx.token("mcp:tools"), list))
			if len(answers) != 1 {
				t.Fatalf("answers: %v", answers)
			}
			if got := toolNames(t, answers[0]["result"]); !slices.Equal(got, []string{"echo"}) {
				t.Errorf("tools for mcp:tools = %v, want [echo]", got)
			}
			answers = rpcAnswers(t, fx.post(t, fx.token("mcp:tools mcp:admin"), list))
			if got := toolNames(t, answers[0]["result"]); !slices.Equal(got, []string{"echo", "admin_stats"}) {
				t.Errorf("tools for mcp:admin = %v, want both", got)
			}
			// Holding every scope but the tool's still hides the tool.
			answers = rpcAnswers(t, fx.post(t, fx.token("mcp:tools mcp:read"), list))
			if got := toolNames(t, answers[0]["result"]); !slices.Equal(got, []string{"echo"}) {
				t.Errorf("tools for mcp:tools mcp:read = %v, want [echo]", got)
			}
			// Holding every scope but mcp:read still hides the resources.
			answers = rpcAnswers(t, fx.post(t, fx.token("mcp:tools mcp:admin"), `{"jsonrpc":"2.0","id":2,"method":"resources/list"}`))
			if string(answers[0]["result"]) != `{"resources":[]}` {
				t.Errorf("resources without mcp:read, with mcp:admin: %s", answers[0]["result"])
			}
			// resources/read needs mcp:read: without it, no resource is listed.
			answers = rpcAnswers(t, fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":2,"method":"resources/list"}`))
			if string(answers[0]["result"]) != `{"resources":[]}` {
				t.Errorf("resources without mcp:read: %s", answers[0]["result"])
			}
			answers = rpcAnswers(t, fx.post(t, fx.token("mcp:tools mcp:read"), `{"jsonrpc":"2.0","id":2,"method":"resources/list"}`))
			if !strings.Contains(string(answers[0]["result"]), "file:///a") {
				t.Errorf("resources with mcp:read: %s", answers[0]["result"])
			}
		})
	}
}

func TestMCPFilterHiddenToolCallGetsTheStepUpChallenge(t *testing.T) {
	fx := newFilterFixture(t, mcpUpstream(false), nil)
	resp := fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"admin_stats","arguments":{}}}`)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want 403", resp.StatusCode)
	}
	if h := resp.Header.Get("WWW-Authenticate"); !strings.Contains(h, `scope="mcp:tools mcp:admin"`) || !strings.Contains(h, `error="insufficient_scope"`) {
		t.Errorf("challenge %q", h)
	}
	// The refused call is audited too.
	lines := auditLines(t, fx.audit.String())
	if len(lines) != 1 || lines[0].Event != "tool.call" || lines[0].Tool != "admin_stats" || lines[0].Result != AuditDenied ||
		lines[0].Status != http.StatusForbidden || lines[0].Tenant != "acme" || len(lines[0].Args) != 64 {
		t.Errorf("audit of the refused call: %+v", lines)
	}
}

type auditLine struct {
	Event     string  `json:"event"`
	Method    string  `json:"method"`
	Tool      string  `json:"tool"`
	ID        any     `json:"id"`
	Sub       string  `json:"sub"`
	ClientID  string  `json:"client_id"`
	Tenant    string  `json:"tenant"`
	Args      string  `json:"args_sha256"`
	Result    string  `json:"result"`
	ErrorCode int     `json:"error_code"`
	IsError   bool    `json:"is_error"`
	Status    int     `json:"status"`
	LatencyMS float64 `json:"latency_ms"`
}

func auditLines(t *testing.T, s string) []auditLine {
	t.Helper()
	var out []auditLine
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var l auditLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

func TestMCPFilterAuditsEveryRequestWithADigestOfTheArguments(t *testing.T) {
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", sse), func(t *testing.T) {
			fx := newFilterFixture(t, mcpUpstream(sse), nil)
			tok := fx.token("mcp:tools")
			const secret = "the-argument-text-0xC0FFEE"
			io.ReadAll(fx.post(t, tok, `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo","arguments":{"text":"`+secret+`","n":1.0}}}`).Body)
			io.ReadAll(fx.post(t, tok, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fails","arguments":{}}}`).Body)
			io.ReadAll(fx.post(t, tok, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}}`).Body)
			io.ReadAll(fx.post(t, tok, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body)
			io.ReadAll(fx.post(t, tok, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`).Body)

			log := fx.audit.String()
			if strings.Contains(log, secret) {
				t.Fatalf("the audit contains the argument text:\n%s", log)
			}
			lines := auditLines(t, log)
			if len(lines) != 5 {
				t.Fatalf("%d audit lines, want 5:\n%s", len(lines), log)
			}
			sum := sha256.Sum256([]byte(`{"n":1,"text":"` + secret + `"}`))
			want := []auditLine{
				{Event: "tool.call", Method: "tools/call", Tool: "echo", ID: "a", Args: hex.EncodeToString(sum[:]), Result: AuditOK},
				{Event: "tool.call", Method: "tools/call", Tool: "fails", ID: 2.0, Result: AuditToolError, IsError: true},
				{Event: "tool.call", Method: "tools/call", Tool: "nope", ID: 3.0, Result: AuditRPCError, ErrorCode: -32602},
				{Event: "notifications/initialized", Method: "notifications/initialized", Result: AuditAccepted},
				{Event: "tools/list", Method: "tools/list", ID: 4.0, Result: AuditOK},
			}
			for i, w := range want {
				l := lines[i]
				if l.Event != w.Event || l.Method != w.Method || l.Tool != w.Tool || l.ID != w.ID || l.Result != w.Result ||
					l.ErrorCode != w.ErrorCode || l.IsError != w.IsError {
					t.Errorf("line %d = %+v, want %+v", i, l, w)
				}
				if w.Args != "" && l.Args != w.Args {
					t.Errorf("line %d args_sha256 = %s, want %s", i, l.Args, w.Args)
				}
				if w.Method == "tools/call" && len(l.Args) != 64 {
					t.Errorf("line %d has no digest: %+v", i, l)
				}
				if l.Sub != "alice" || l.ClientID != "client-1" || l.Tenant != "acme" || l.LatencyMS < 0 {
					t.Errorf("line %d principal/latency = %+v", i, l)
				}
			}
			if lines[3].Status != http.StatusAccepted {
				t.Errorf("notification status %d", lines[3].Status)
			}
		})
	}
}

// An answer replayed on a GET stream (Last-Event-ID resumption) has no
// request on this exchange; it is recognised by its shape and cut too.
func TestMCPFilterTrimsListAnswersOnResumedStreams(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.Header.Get("Last-Event-ID") != "ev-6" {
			http.Error(w, "unexpected", 400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		// CRLF line ends, and the event split in the middle of a CRLF.
		fmt.Fprint(w, "id: ev-7\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":"+toolsResult+"}\r")
		w.(http.Flusher).Flush()
		fmt.Fprint(w, "\n\r\n: keep-alive\n\n")
	})
	fx := newFilterFixture(t, upstream, nil)
	req, _ := http.NewRequest(http.MethodGet, fx.srv.URL, nil)
	req.Header.Set("Authorization", "Bearer "+fx.token("mcp:tools"))
	req.Header.Set("Last-Event-ID", "ev-6")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), "admin_stats") {
		t.Fatalf("hidden tool on the resumed stream:\n%s", body)
	}
	if !strings.HasPrefix(string(body), "id: ev-7\nevent: message\ndata: ") || !strings.HasSuffix(string(body), "\n\n: keep-alive\n\n") ||
		!strings.Contains(string(body), `"name":"echo"`) {
		t.Fatalf("stream not kept intact:\n%q", body)
	}
}

// Events are forwarded as soon as they are complete, before the stream ends.
func TestMCPFilterStreamsEventsAsTheyComplete(t *testing.T) {
	release := make(chan struct{})
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n")
	})
	fx := newFilterFixture(t, upstream, nil)
	resp := fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	close(release)
	if err != nil || !strings.Contains(first, "notifications/progress") {
		t.Fatalf("first event before the end of the stream: %q, %v", first, err)
	}
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), `"id":1`) {
		t.Fatalf("rest: %q", rest)
	}
}

func TestMCPFilterRefusesAnswersLargerThanItsLimit(t *testing.T) {
	big := strings.Repeat("x", 2000)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"%s"}]}}`, big)
	})
	fx := newFilterFixture(t, upstream, func(c *MCPFilterConfig) { c.MaxResponseBytes = 1000 })
	resp := fx.post(t, fx.token("mcp:tools"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), `"id":1`) || !strings.Contains(string(body), "-32603") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestMCPFilterRefusesAmbiguousRequests(t *testing.T) {
	fx := newFilterFixture(t, mcpUpstream(false), func(c *MCPFilterConfig) { c.MaxBodyBytes = 200 })
	tok := fx.token("mcp:tools mcp:admin")
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","Name":"admin_stats"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`,
		`not json`,
	} {
		if resp := fx.post(t, tok, body); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", body, resp.StatusCode)
		}
	}
	if resp := fx.post(t, tok, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"`+strings.Repeat("a", 300)+`"}}`); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("large body: status %d, want 413", resp.StatusCode)
	}
}

func FuzzTrimResult(f *testing.F) {
	f.Add("tools/list", toolsResult)
	f.Add("", `{"tools":[{"name":"admin_stats","name":"echo"}],"resources":[{"uri":"x"}]}`)
	f.Add("", `{"tools":{"name":"admin_stats"}}`)
	f.Add("prompts/list", `{"prompts":[{"name":"p"}]}`)
	f.Add("tools/list", `{"tools":[{"Name":"admin_stats","name":"echo"},{},1,null]}`)
	filter := NewMCPFilter(MCPFilterConfig{Scopes: Scopes{Base: []string{"a"}, Tools: map[string][]string{"admin_stats": {"admin"}},
		Methods: map[string][]string{"resources/read": {"read"}, "prompts/get": {"read"}}}})
	p := &Principal{Subject: "s", Scopes: []string{"a"}}
	f.Fuzz(func(t *testing.T, method, result string) {
		out, changed := filter.trimResult(method, json.RawMessage(result), p)
		if !changed {
			if string(out) != result {
				t.Fatal("unchanged result rewritten")
			}
			return
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(out, &obj); err != nil {
			t.Fatalf("trimmed result is not a JSON object: %s", out)
		}
		// What a client reads from the trimmed result never names a hidden
		// tool, resource or prompt.
		for _, member := range []string{"tools", "resources", "resourceTemplates", "prompts"} {
			raw, ok := obj[member]
			if !ok || method != "" && method != map[string]string{"tools": "tools/list", "resources": "resources/list",
				"resourceTemplates": "resources/templates/list", "prompts": "prompts/list"}[member] {
				continue
			}
			var entries []map[string]any
			if err := json.Unmarshal(raw, &entries); err != nil {
				t.Fatalf("%s is not a list of objects: %s", member, raw)
			}
			for _, e := range entries {
				if member != "tools" || e["name"] == "admin_stats" || e["name"] == nil {
					t.Fatalf("hidden entry kept in %s: %v (from %s)", member, e, result)
				}
			}
		}
	})
}

func FuzzFilterEventStream(f *testing.F) {
	f.Add("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":"+toolsResult+"}\n\n", 5)
	f.Add("id: 1\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":2,\"result\":{\"tools\":[]}}\r\n\r\n: c\r\r", 30)
	f.Add("event: x\n\ndata:\n\n", 1)
	f.Fuzz(func(t *testing.T, stream string, split int) {
		filter := NewMCPFilter(MCPFilterConfig{Scopes: filterScopes, MaxResponseBytes: 1 << 16})
		p := &Principal{Subject: "s", Scopes: []string{"mcp:tools"}}
		run := func(chunks ...string) string {
			var rec httptest.ResponseRecorder
			rec.HeaderMap = http.Header{"Content-Type": {"text/event-stream"}}
			rec.Body = &bytes.Buffer{}
			fw := &filterWriter{w: &rec, f: filter, p: p, byID: map[string]*rpcRequest{}, start: time.Now(), inspect: true}
			for _, c := range chunks {
				if _, err := fw.Write([]byte(c)); err != nil {
					return "error"
				}
			}
			fw.finish()
			return rec.Body.String()
		}
		whole := run(stream)
		if split < 0 {
			split = -split
		}
		split %= len(stream) + 1
		// Where the upstream's writes fall never changes what the client gets.
		if parts := run(stream[:split], stream[split:]); parts != whole {
			t.Fatalf("split at %d changes the output:\n%q\n%q", split, whole, parts)
		}
		if strings.Contains(whole, "admin_stats") && !strings.Contains(stream, "admin_stats") {
			t.Fatal("output invents content")
		}
	})
}

// A handler that aborts its answer (http.ErrAbortHandler, as a proxy does
// when the server behind it breaks off) still leaves one audit line per
// request, with the result no_response; the abort reaches the client.
func TestMCPFilterAuditsAnAbortedAnswer(t *testing.T) {
	fx := newFilterFixture(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}), nil)
	resp := fx.post(t, fx.token("mcp:tools"), `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}},{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`)
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("the aborted answer ended cleanly")
	}
	var lines []auditLine
	for deadline := time.Now().Add(5 * time.Second); len(lines) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		lines = auditLines(t, fx.audit.String())
	}
	if len(lines) != 2 || lines[0].Event != "tool.call" || lines[1].Method != "tools/list" {
		t.Fatalf("audit: %+v", lines)
	}
	for _, l := range lines {
		if l.Result != AuditNoResponse || l.Status != http.StatusOK || l.Sub != "alice" {
			t.Errorf("audit line %+v", l)
		}
	}
}
