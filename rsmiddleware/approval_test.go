package rsmiddleware_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// approvalsStub answers POST /approvals as the approval protocol says an
// authorization server does, with what answer returns; it records each
// question. It stands in for the AS only to produce the answers and
// failures a real one rarely gives.
type approvalsStub struct {
	srv    *httptest.Server
	mu     sync.Mutex
	asked  []map[string]any
	raw    [][]byte
	auth   []string
	answer func(q map[string]any) (int, string)
}

func newApprovalsStub(t *testing.T, answer func(q map[string]any) (int, string)) *approvalsStub {
	s := &approvalsStub{answer: answer}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var q map[string]any
		_ = json.Unmarshal(b, &q)
		s.mu.Lock()
		s.asked = append(s.asked, q)
		s.raw = append(s.raw, b)
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		status, body := s.answer(q)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *approvalsStub) questions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.asked)
}

// approvalStack is MCPFilter with an Approval in front of an upstream that
// records the bodies it receives and answers each request with a result
// naming its method and tool.
type approvalStack struct {
	srv      *httptest.Server
	mu       sync.Mutex
	bodies   []string
	events   []rsmiddleware.AuditEvent
	upstream func(w http.ResponseWriter, body []byte)
}

func newApprovalStack(t *testing.T, endpoint string, timeout time.Duration) *approvalStack {
	t.Helper()
	st := &approvalStack{}
	a, err := rsmiddleware.NewApproval(rsmiddleware.ApprovalConfig{
		Tools: []string{"delete_*", "send_email"}, TTL: 90 * time.Second, Endpoint: endpoint,
		ClientID: "gateway", ClientSecret: "gw secret/+", HTTPClient: &http.Client{Timeout: timeout},
	})
	if err != nil {
		t.Fatal(err)
	}
	filter := rsmiddleware.NewMCPFilter(rsmiddleware.MCPFilterConfig{Approval: a, Logger: slog.New(slog.DiscardHandler), Audit: func(e rsmiddleware.AuditEvent) {
		st.mu.Lock()
		st.events = append(st.events, e)
		st.mu.Unlock()
	}})
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		st.mu.Lock()
		st.bodies = append(st.bodies, string(b))
		st.mu.Unlock()
		if st.upstream != nil {
			st.upstream(w, b)
			return
		}
		answer := func(m json.RawMessage) string {
			var q struct {
				ID     json.RawMessage `json:"id"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			_ = json.Unmarshal(m, &q)
			return `{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"content":[{"type":"text","text":"ran ` + q.Params.Name + `"}]}}`
		}
		w.Header().Set("Content-Type", "application/json")
		if bytes.HasPrefix(b, []byte("[")) {
			var msgs []json.RawMessage
			_ = json.Unmarshal(b, &msgs)
			var out []string
			for _, m := range msgs {
				if bytes.Contains(m, []byte(`"id"`)) {
					out = append(out, answer(m))
				}
			}
			if len(out) == 0 {
				w.WriteHeader(http.StatusAccepted) // notifications only
				return
			}
			io.WriteString(w, "["+strings.Join(out, ",")+"]")
			return
		}
		io.WriteString(w, answer(b))
	})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &rsmiddleware.Principal{Subject: "alice", ClientID: "app"}
		filter.Wrap(upstream).ServeHTTP(w, r.WithContext(rsmiddleware.ContextWithPrincipal(r.Context(), p, "the-access-token")))
	})
	st.srv = httptest.NewServer(h)
	t.Cleanup(st.srv.Close)
	return st
}

func (st *approvalStack) call(t *testing.T, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, st.srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func (st *approvalStack) forwarded() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]string(nil), st.bodies...)
}

func (st *approvalStack) audit() []rsmiddleware.AuditEvent {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]rsmiddleware.AuditEvent(nil), st.events...)
}

const sendEmail = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"send_email","arguments":{"to":"bob@example.com","body":"hi"}}}`

// The question sent to the AS: client_secret_basic with the form-encoded
// credentials, the call's access token, tool, RFC 8785 canonical arguments
// and the ttl in seconds.
func TestApprovalQuestion(t *testing.T) {
	as := newApprovalsStub(t, func(map[string]any) (int, string) {
		return 200, `{"status":"approved","approval_id":"appr-1"}`
	})
	st := newApprovalStack(t, as.srv.URL+"/approvals", 5*time.Second)
	status, body := st.call(t, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"send_email","arguments":{ "to" : "bob@example.com", "n": 1.0, "a": [true, null] }}}`)
	if status != 200 || !strings.Contains(body, "ran send_email") {
		t.Fatalf("%d %s", status, body)
	}
	want := `{"token":"the-access-token","tool":"send_email","arguments":{"a":[true,null],"n":1,"to":"bob@example.com"},"ttl":90}`
	if string(as.raw[0]) != want {
		t.Fatalf("question %s\nwant     %s", as.raw[0], want)
	}
	// "gateway" and "gw secret/+" form-encoded (RFC 6749 §2.3.1), then Basic.
	if as.auth[0] != "Basic Z2F0ZXdheTpndytzZWNyZXQlMkYlMkI=" {
		t.Fatalf("Authorization %q", as.auth[0])
	}
	// A call of a tool no glob names is not asked about.
	st.call(t, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	if as.questions() != 1 || len(st.forwarded()) != 2 {
		t.Fatalf("%d questions, %d forwarded", as.questions(), len(st.forwarded()))
	}
	ev := st.audit()
	if ev[0].Tool != "send_email" || ev[0].ApprovalID != "appr-1" || ev[0].Result != rsmiddleware.AuditOK || ev[1].ApprovalID != "" {
		t.Fatalf("audit %+v", ev)
	}
}

// Whatever goes wrong in asking the AS, the call is refused (fail closed)
// with a JSON-RPC error saying why, never forwarded, and audited.
func TestApprovalFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		answer string
		slow   bool
		down   bool
		reason string
	}{
		{"client authentication failed", 401, `{"error":"invalid_client","error_description":"bad secret"}`, false, false, "not allowed to ask"},
		{"client not in approval_clients", 400, `{"error":"unauthorized_client"}`, false, false, "not allowed to ask"},
		{"token no longer active", 400, `{"error":"invalid_token"}`, false, false, "does not take the access token"},
		{"request refused", 400, `{"error":"invalid_request","error_description":"duplicate keys"}`, false, false, "invalid_request"},
		{"server error", 500, `oops`, false, false, "HTTP 500"},
		{"redirect", 302, ``, false, false, "HTTP 302"},
		{"not JSON", 200, `<html>`, false, false, "could not be read"},
		{"unknown status", 200, `{"status":"maybe","approval_id":"x"}`, false, false, "could not be read"},
		{"approved without id", 200, `{"status":"approved"}`, false, false, "could not be read"},
		{"pending without page", 200, `{"status":"pending","approval_id":"x"}`, false, false, "could not be read"},
		{"pending with a javascript page", 200, `{"status":"pending","approval_id":"x","approval_uri":"javascript:alert(1)"}`, false, false, "could not be read"},
		{"too slow", 200, `{"status":"approved","approval_id":"x"}`, true, false, "could not be reached"},
		{"unreachable", 0, ``, false, true, "could not be reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			as := newApprovalsStub(t, func(map[string]any) (int, string) {
				if tc.slow {
					<-release
				}
				return tc.status, tc.answer
			})
			defer close(release)
			endpoint := as.srv.URL + "/approvals"
			if tc.down {
				as.srv.Close()
			}
			st := newApprovalStack(t, endpoint, 300*time.Millisecond)
			status, body := st.call(t, sendEmail)
			var m struct {
				ID    int `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &m); err != nil {
				t.Fatalf("%d %s", status, body)
			}
			if status != 200 || m.ID != 5 || m.Error.Code != rsmiddleware.ErrCodeApprovalUnavailable || !strings.Contains(m.Error.Message, tc.reason) ||
				!strings.Contains(m.Error.Message, `"send_email"`) {
				t.Fatalf("%d %s", status, body)
			}
			if strings.Contains(m.Error.Message, "bad secret") || strings.Contains(m.Error.Message, "oops") {
				t.Fatalf("the AS's own words reached the client: %s", body)
			}
			if f := st.forwarded(); len(f) != 0 {
				t.Fatalf("forwarded %v", f)
			}
			ev := st.audit()
			if len(ev) != 1 || ev[0].Result != rsmiddleware.AuditApprovalUnavailable || ev[0].ErrorCode != rsmiddleware.ErrCodeApprovalUnavailable {
				t.Fatalf("audit %+v", ev)
			}
		})
	}
}

// Arguments a JSON parser may read otherwise than the canonical form the
// person sees are refused before the AS is asked.
func TestApprovalRefusesAmbiguousArguments(t *testing.T) {
	as := newApprovalsStub(t, func(map[string]any) (int, string) {
		return 200, `{"status":"approved","approval_id":"x"}`
	})
	st := newApprovalStack(t, as.srv.URL, 5*time.Second)
	for _, tc := range []struct{ name, args, reason string }{
		{"a member named twice", `{"to":"bob@example.com","to":"eve@example.com"}`, "twice"},
		{"a member named twice, once escaped", `{"to":"bob@example.com","t\u006f":"eve@example.com"}`, "twice"},
		{"a member named twice in a nested object", `{"msg":{"to":"a","x":[{"k":1,"k":2}]}}`, "twice"},
		{"an unpaired high surrogate", `{"to":"\ud800"}`, "surrogate"},
		{"an unpaired low surrogate", `{"to":"a\udc00b"}`, "surrogate"},
		{"invalid UTF-8", "{\"to\":\"\xf0\x9f\x98\"}", "UTF-8"},
		{"not an object", `["bob@example.com"]`, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, body := st.call(t, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"delete_repo","arguments":`+tc.args+`}}`)
			if !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, tc.reason) || !strings.Contains(body, `"id":9`) {
				t.Fatalf("%s", body)
			}
		})
	}
	if n := as.questions(); n != 0 {
		t.Fatalf("the AS was asked %d times", n)
	}
	if f := st.forwarded(); len(f) != 0 {
		t.Fatalf("forwarded %v", f)
	}
	// What is not ambiguous passes: a surrogate pair, the same name in two
	// objects, escapes of other characters.
	_, body := st.call(t, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"delete_repo","arguments":{"e":"\ud83d\ude00","a":{"k":1},"b":{"k":1},"q":"\"\\u"}}}`)
	if !strings.Contains(body, "ran delete_repo") || as.questions() != 1 {
		t.Fatalf("%s", body)
	}
}

// In a batch each call is decided on its own: the approved one and the
// call that needs no approval are forwarded, the pending and the denied
// ones answered by the filter, all answers in one batch.
func TestApprovalDecidesEachCallOfABatch(t *testing.T) {
	as := newApprovalsStub(t, func(q map[string]any) (int, string) {
		switch q["tool"] {
		case "delete_a":
			return 200, `{"status":"approved","approval_id":"id-a"}`
		case "delete_b":
			return 200, `{"status":"denied","approval_id":"id-b"}`
		}
		return 200, `{"status":"pending","approval_id":"id-c","approval_uri":"https://as.example.com/approve/id-c","expires_in":90}`
	})
	st := newApprovalStack(t, as.srv.URL, 5*time.Second)
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_a","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_b","arguments":{}}},` +
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send_email","arguments":{"to":"x"}}},` +
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{}}}]`
	status, body := st.call(t, batch)
	var answers []map[string]any
	if err := json.Unmarshal([]byte(body), &answers); err != nil || status != 200 || len(answers) != 4 {
		t.Fatalf("%d %s", status, body)
	}
	byID := map[float64]string{}
	for _, a := range answers {
		b, _ := json.Marshal(a)
		byID[a["id"].(float64)] = string(b)
	}
	if !strings.Contains(byID[1], "ran delete_a") || !strings.Contains(byID[4], "ran echo") ||
		!strings.Contains(byID[2], "denied") || !strings.Contains(byID[2], `"isError":true`) ||
		!strings.Contains(byID[3], "https://as.example.com/approve/id-c") || !strings.Contains(byID[3], `"isError":true`) {
		t.Fatalf("answers %v", byID)
	}
	f := st.forwarded()
	if len(f) != 1 || strings.Contains(f[0], "delete_b") || strings.Contains(f[0], "send_email") || !strings.Contains(f[0], "delete_a") {
		t.Fatalf("forwarded %v", f)
	}
	results := map[string]string{}
	for _, e := range st.audit() {
		results[e.Tool] = e.Result + " " + e.ApprovalID
	}
	want := map[string]string{"delete_a": "ok id-a", "delete_b": "approval_denied id-b", "send_email": "approval_pending id-c", "echo": "ok "}
	for k, v := range want {
		if results[k] != v {
			t.Fatalf("audit %v, want %v", results, want)
		}
	}

	// A tools/call notification of an approval tool is neither asked about
	// nor run.
	asked := as.questions()
	if status, body := st.call(t, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"send_email","arguments":{}}}`); status != http.StatusAccepted || body != "" {
		t.Fatalf("notification: %d %q", status, body)
	}
	if as.questions() != asked || len(st.forwarded()) != 1 {
		t.Fatalf("the notification was asked about or forwarded")
	}

	// A batch of held calls alone reaches nobody; answered by the filter.
	status, body = st.call(t, `[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send_email","arguments":{}}},{"jsonrpc":"2.0","method":"notifications/x"}]`)
	if status != 200 || !strings.Contains(body, "approve/id-c") {
		t.Fatalf("%d %s", status, body)
	}
	if f := st.forwarded(); len(f) != 2 || strings.Contains(f[1], "send_email") || !strings.Contains(f[1], "notifications/x") {
		t.Fatalf("forwarded %v", f)
	}

	// An SSE answer to the forwarded part ends with the held answers.
	st.upstream = func(w http.ResponseWriter, b []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"content\":[]}}\n\n")
	}
	status, body = st.call(t, `[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"send_email","arguments":{}}},{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{}}}]`)
	if status != 200 || !strings.Contains(body, `"id":4`) || !strings.Contains(body, "data: {\"jsonrpc\":\"2.0\",\"id\":3,") {
		t.Fatalf("%d %q", status, body)
	}
}

// A client that declared URL elicitation gets the pending approval as the
// -32042 error, with the approval id as elicitationId.
func TestApprovalPendingAsURLElicitation(t *testing.T) {
	as := newApprovalsStub(t, func(map[string]any) (int, string) {
		return 200, `{"status":"pending","approval_id":"q3Yx","approval_uri":"https://as.example.com/approve/q3Yx","expires_in":300}`
	})
	st := newApprovalStack(t, as.srv.URL, 5*time.Second)
	_, body := st.call(t, `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"send_email","arguments":{},"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}}}`)
	want := `{"jsonrpc":"2.0","id":"c","error":{"code":-32042,"message":"The call of tool \"send_email\" needs your approval.","data":{"elicitations":[{"mode":"url","elicitationId":"q3Yx","url":"https://as.example.com/approve/q3Yx","message":"The call of tool \"send_email\" needs your approval."}]}}}`
	if body != want {
		t.Fatalf("%s\nwant %s", body, want)
	}
}

func TestNewApprovalChecksItsConfiguration(t *testing.T) {
	good := rsmiddleware.ApprovalConfig{Tools: []string{"x"}, Endpoint: "https://as.example.com/approvals", ClientID: "g", ClientSecret: "s"}
	if _, err := rsmiddleware.NewApproval(good); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*rsmiddleware.ApprovalConfig){
		"no tools":         func(c *rsmiddleware.ApprovalConfig) { c.Tools = nil },
		"an empty glob":    func(c *rsmiddleware.ApprovalConfig) { c.Tools = []string{""} },
		"ttl over an hour": func(c *rsmiddleware.ApprovalConfig) { c.TTL = 2 * time.Hour },
		"ttl not seconds":  func(c *rsmiddleware.ApprovalConfig) { c.TTL = 1500 * time.Millisecond },
		"negative ttl":     func(c *rsmiddleware.ApprovalConfig) { c.TTL = -time.Second },
		"no endpoint":      func(c *rsmiddleware.ApprovalConfig) { c.Endpoint = "" },
		"endpoint not URL": func(c *rsmiddleware.ApprovalConfig) { c.Endpoint = "as.example.com/approvals" },
		"no secret":        func(c *rsmiddleware.ApprovalConfig) { c.ClientSecret = "" },
	} {
		c := good
		mod(&c)
		if _, err := rsmiddleware.NewApproval(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
