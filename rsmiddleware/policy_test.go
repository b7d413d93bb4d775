package rsmiddleware

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/toolpolicy"
)

// policyUpstream answers tools/list with delete_thing, echo and
// create_ticket, every tools/call with the arguments it got, and records
// the bodies it was sent.
type policyUpstream struct {
	mu     sync.Mutex
	bodies []string
}

func (u *policyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, string(body))
	u.mu.Unlock()
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	result := `{}`
	switch msg.Method {
	case "tools/list":
		result = `{"tools":[{"name":"delete_thing","inputSchema":{"type":"object"}},{"name":"echo","inputSchema":{"type":"object"}},{"name":"create_ticket","inputSchema":{"type":"object"}}],"nextCursor":"c2"}`
	case "tools/call":
		text, _ := json.Marshal(string(msg.Params.Arguments))
		result = `{"content":[{"type":"text","text":` + string(text) + `}]}`
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
}

func (u *policyUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.bodies)
}

const opsMessage = "Only ops may delete, and never in production."

func newPolicyFixture(t *testing.T, limits []toolpolicy.RateLimit) (*filterFixture, *policyUpstream) {
	t.Helper()
	engine, err := toolpolicy.New(toolpolicy.Config{
		Rules: []toolpolicy.Rule{
			{Match: toolpolicy.Match{Methods: []string{"notifications/cancelled"}}, Allow: "false", Message: "no cancelling"},
			{Match: toolpolicy.Match{Tools: []string{"delete_*"}}, Allow: "'ops' in claims.groups && args.environment != 'production'", Message: opsMessage},
			{Match: toolpolicy.Match{Tools: []string{"create_ticket"}}, Allow: "args.reporter == claims.sub"},
		},
		Inject: map[string]map[string]string{"create_ticket": {"reporter": "claims.sub", "tenant": "claims.tenant"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := toolpolicy.NewLimiter(limits, nil)
	if err != nil {
		t.Fatal(err)
	}
	up := &policyUpstream{}
	fx := newFilterFixture(t, up, func(c *MCPFilterConfig) {
		c.Scopes = Scopes{}
		c.Policy, c.RateLimits = engine, lim
	})
	return fx, up
}

func (fx *filterFixture) tokenIn(groups ...string) string {
	c := fx.ks.claims()
	c["scope"] = "mcp:tools"
	c["tenant"] = "acme"
	c["groups"] = groups
	return fx.ks.mint(c)
}

func policyCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// rpcError reads the one JSON-RPC error answer of resp.
func rpcError(t *testing.T, resp *http.Response) (code int, msg string) {
	t.Helper()
	answers := rpcAnswers(t, resp)
	if len(answers) != 1 || answers[0]["error"] == nil {
		t.Fatalf("answers %v, want one error", answers)
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(answers[0]["error"], &e)
	return e.Code, e.Message
}

func TestPolicyDeniesWithTheRulesMessage(t *testing.T) {
	fx, up := newPolicyFixture(t, nil)
	ops := fx.tokenIn("ops")
	resp := fx.post(t, ops, policyCall(1, "delete_thing", `{"environment":"staging"}`))
	if a := rpcAnswers(t, resp); resp.StatusCode != 200 || len(a) != 1 || a[0]["result"] == nil {
		t.Fatalf("ops in staging: %d %v", resp.StatusCode, a)
	}
	resp = fx.post(t, ops, policyCall(2, "delete_thing", `{"environment":"production"}`))
	if code, msg := rpcError(t, resp); resp.StatusCode != 200 || code != ErrCodeDeniedByPolicy || msg != opsMessage {
		t.Fatalf("ops in production: %d %d %q", resp.StatusCode, code, msg)
	}
	if n := len(up.seen()); n != 1 {
		t.Errorf("the upstream got %d calls, want the allowed one only", n)
	}
	audit := fx.audit.String()
	if !strings.Contains(audit, `"result":"denied_by_policy","rule":1,`) || strings.Contains(audit, "production") {
		t.Errorf("audit %s: want denied_by_policy with rule 1, and never the arguments", audit)
	}
	dev := fx.tokenIn("dev")
	if code, msg := rpcError(t, fx.post(t, dev, policyCall(3, "delete_thing", `{"environment":"staging"}`))); code != ErrCodeDeniedByPolicy || msg != opsMessage {
		t.Fatalf("dev: %d %q", code, msg)
	}
}

func TestPolicyListsMatchCalls(t *testing.T) {
	fx, _ := newPolicyFixture(t, nil)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, tc := range []struct {
		groups []string
		want   []string
	}{
		{[]string{"ops"}, []string{"delete_thing", "echo", "create_ticket"}},
		{[]string{"dev"}, []string{"echo", "create_ticket"}},
		{nil, []string{"echo", "create_ticket"}},
	} {
		a := rpcAnswers(t, fx.post(t, fx.tokenIn(tc.groups...), list))
		if got := toolNames(t, a[0]["result"]); !slices.Equal(got, tc.want) {
			t.Errorf("groups %v: tools %v, want %v", tc.groups, got, tc.want)
		}
	}
}

func TestPolicyInjectOverridesWhatTheModelSent(t *testing.T) {
	fx, up := newPolicyFixture(t, nil)
	resp := fx.post(t, fx.tokenIn(), policyCall(7, "create_ticket", `{"title":"t","reporter":"mallory","reporter":"eve","tenant":"other"}`))
	a := rpcAnswers(t, resp)
	if len(a) != 1 || a[0]["result"] == nil {
		t.Fatalf("answers %v", a)
	}
	seen := up.seen()
	var sent struct {
		Params struct {
			Arguments map[string]any `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(seen[0]), &sent); err != nil {
		t.Fatal(err)
	}
	if got := sent.Params.Arguments; got["reporter"] != "alice" || got["tenant"] != "acme" || got["title"] != "t" || len(got) != 3 {
		t.Fatalf("forwarded arguments %v", got)
	}
	if strings.Contains(seen[0], "mallory") || strings.Contains(seen[0], "eve") {
		t.Errorf("a reporter the model sent reached the server: %s", seen[0])
	}
	digest, _ := ArgumentsDigest(json.RawMessage(`{"reporter":"alice","tenant":"acme","title":"t"}`))
	if !strings.Contains(fx.audit.String(), `"args_sha256":"`+digest+`"`) {
		t.Errorf("audit %s: want the digest of the forwarded arguments %s", fx.audit.String(), digest)
	}
	// Without arguments at all, and in a batch.
	batch := `[` + `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"create_ticket"}},` + policyCall(9, "echo", `{"reporter":"x"}`) + `]`
	// (The test upstream reads single messages only: it answers 202.)
	if resp = fx.post(t, fx.tokenIn(), batch); resp.StatusCode >= 300 {
		t.Fatalf("batch: %d", resp.StatusCode)
	}
	last := up.seen()[1]
	if !strings.Contains(last, `"arguments":{"reporter":"alice","tenant":"acme"}`) || !strings.Contains(last, `"arguments":{"reporter":"x"}`) {
		t.Errorf("forwarded batch %s", last)
	}
}

func TestPolicyInjectWithoutAValueDenies(t *testing.T) {
	fx, up := newPolicyFixture(t, nil)
	c := fx.ks.claims()
	c["scope"] = "mcp:tools" // no tenant claim
	code, _ := rpcError(t, fx.post(t, fx.ks.mint(c), policyCall(1, "create_ticket", `{"tenant":"chosen-by-model"}`)))
	if code != ErrCodeDeniedByPolicy || len(up.seen()) != 0 {
		t.Fatalf("code %d, upstream saw %v", code, up.seen())
	}
	if !strings.Contains(fx.audit.String(), `"result":"denied_by_policy","rule":-1`) {
		t.Errorf("audit %s", fx.audit.String())
	}
}

func TestPolicyHostileForms(t *testing.T) {
	fx, up := newPolicyFixture(t, nil)
	dev := fx.tokenIn("dev")
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"an escaped tool name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete\u005fthing","arguments":{}}}`, 200},
		{"a tool name twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"delete_thing","arguments":{}}}`, 400},
		{"a case-folded name member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","NAME":"delete_thing"}}`, 400},
		{"params twice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"params":{"name":"delete_thing"}}`, 400},
		{"a denied call in a batch", `[` + policyCall(1, "echo", `{}`) + `,` + policyCall(2, "delete_thing", `{}`) + `]`, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := fx.post(t, dev, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			b, _ := io.ReadAll(resp.Body)
			var answers []map[string]json.RawMessage
			if json.Unmarshal(b, &answers) != nil {
				var one map[string]json.RawMessage
				if err := json.Unmarshal(b, &one); err != nil {
					t.Fatalf("answer %s", b)
				}
				answers = append(answers, one)
			}
			if tc.body[0] == '[' && (len(answers) != 2 || !strings.Contains(string(answers[1]["error"]), opsMessage) || !strings.Contains(string(answers[0]["error"]), "Not run")) {
				t.Errorf("batch answer %s", b)
			}
			for _, a := range answers {
				if a["error"] == nil {
					t.Errorf("an answer without error: %v", a)
				}
			}
		})
	}
	ops := fx.tokenIn("ops")
	for _, args := range []string{
		`{"environment":"staging","environment":"production"}`,
		`{"environment":"production","environment":"staging"}`,
		`{"environment":"staging","Environment":"production","x":{"a":1,"a":2}}`,
	} {
		if code, _ := rpcError(t, fx.post(t, ops, policyCall(1, "delete_thing", args))); code != ErrCodeDeniedByPolicy {
			t.Errorf("%s: code %d", args, code)
		}
	}
	if n := len(up.seen()); n != 0 {
		t.Errorf("the upstream got %d requests: %v", n, up.seen())
	}
	// A notification a rule denies: an HTTP error status (MCP Streamable
	// HTTP), and the error without id.
	resp := fx.post(t, ops, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `"id":null`) || !strings.Contains(string(b), "no cancelling") {
		t.Errorf("notification: %d %s", resp.StatusCode, b)
	}
}

func TestRateLimit429(t *testing.T) {
	fx, up := newPolicyFixture(t, []toolpolicy.RateLimit{{Match: toolpolicy.Match{Tools: []string{"*"}}, Per: toolpolicy.PerSubject, Rate: 3, Interval: time.Hour}})
	tok := fx.tokenIn("ops")
	for i := range 3 {
		if resp := fx.post(t, tok, policyCall(i, "echo", `{}`)); resp.StatusCode != 200 {
			t.Fatalf("call %d: %d", i+1, resp.StatusCode)
		}
	}
	// tools/list is not limited by a tools glob.
	if resp := fx.post(t, tok, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); resp.StatusCode != 200 {
		t.Fatalf("tools/list: %d", resp.StatusCode)
	}
	resp := fx.post(t, tok, policyCall(4, "echo", `{}`))
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1200" {
		t.Fatalf("4th call: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code, _ := rpcError(t, resp); code != ErrCodeRateLimited {
		t.Errorf("code %d", code)
	}
	if !strings.Contains(fx.audit.String(), `"result":"rate_limited","rate_limit":0,`) {
		t.Errorf("audit %s", fx.audit.String())
	}
	if n := len(up.seen()); n != 4 {
		t.Errorf("upstream got %d requests, want 4", n)
	}
}

// TestPolicyHeadersAndSizes: headers that name another tool than the body
// are refused before the rules (the body decides, never the header), and
// huge or deeply nested arguments are decided quickly.
func TestPolicyHeadersAndSizes(t *testing.T) {
	fx, up := newPolicyFixture(t, nil)
	dev := fx.tokenIn("dev")
	req, _ := http.NewRequest(http.MethodPost, fx.srv.URL, strings.NewReader(policyCall(1, "delete_thing", `{"environment":"staging"}`)))
	req.Header.Set("Authorization", "Bearer "+dev)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(ProtocolVersionHeader, StatelessVersion)
	req.Header.Set(MethodHeader, "tools/call")
	req.Header.Set(NameHeader, "echo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("Mcp-Name echo on a call of delete_thing: %d, want 400", resp.StatusCode)
	}
	ops := fx.tokenIn("ops")
	deep := strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200)
	huge := `{"environment":"staging","items":[` + strings.Repeat(`"xxxxxxxxxxxxxxxx",`, 100000) + `"x"]}`
	for name, args := range map[string]string{"200 levels deep": `{"environment":"staging","x":` + deep + `}`, "2 MB": huge} {
		start := time.Now()
		resp := fx.post(t, ops, policyCall(2, "delete_thing", args))
		took := time.Since(start)
		if name == "2 MB" {
			// Allowed: the rule reads one member; the size costs a decode.
			if a := rpcAnswers(t, resp); len(a) != 1 || a[0]["result"] == nil {
				t.Errorf("%s: %v", name, a)
			}
		} else if code, _ := rpcError(t, resp); code != ErrCodeDeniedByPolicy {
			t.Errorf("%s: code %d, want a denial", name, code)
		}
		if took > 2*time.Second {
			t.Errorf("%s: %v", name, took)
		}
	}
	if n := len(up.seen()); n != 1 {
		t.Errorf("the upstream got %d requests, want the 2 MB call only", n)
	}
}

// TestPolicyConcurrentCallsOfOneToken: the claims decoded once per token
// are shared by its concurrent requests (run with -race).
func TestPolicyConcurrentCallsOfOneToken(t *testing.T) {
	fx, _ := newPolicyFixture(t, []toolpolicy.RateLimit{{Match: toolpolicy.Match{Tools: []string{"*"}}, Per: toolpolicy.PerTenant, Rate: 1000, Interval: time.Minute}})
	ops := fx.tokenIn("ops")
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 8 {
				env := "staging"
				if (i+j)%2 == 1 {
					env = "production"
				}
				req, _ := http.NewRequest(http.MethodPost, fx.srv.URL, strings.NewReader(policyCall(i*10+j, "delete_thing", `{"environment":"`+env+`"}`)))
				req.Header.Set("Authorization", "Bearer "+ops)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if denied := strings.Contains(string(b), opsMessage); denied != (env == "production") {
					errs <- fmt.Sprintf("%s: %s", env, b)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
