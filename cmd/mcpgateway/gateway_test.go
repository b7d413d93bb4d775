package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/internal/freeport"
)

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func TestGatewayTrimsToolListsAndStepsUpHiddenTools(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonResponse), func(t *testing.T) {
			s := newStack(t, jsonResponse, baseConfig)
			ctx := context.Background()
			user := s.connect(t, s.token(t, "user-bot"))
			if got := toolNames(t, user); !slices.Equal(got, []string{"echo"}) {
				t.Errorf("tools/list for mcp:tools = %v, want [echo]", got)
			}
			const secret = "argument-text-that-must-not-be-logged"
			res, err := user.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": secret}})
			if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != secret {
				t.Fatalf("echo: %v %+v", err, res)
			}
			if _, err := user.CallTool(ctx, &mcp.CallToolParams{Name: "admin_stats"}); err == nil || !strings.Contains(err.Error(), "Forbidden") {
				t.Errorf("hidden tool called without mcp:admin: %v", err)
			}

			admin := s.connect(t, s.token(t, "admin-bot"))
			if got := toolNames(t, admin); !slices.Equal(got, []string{"admin_stats", "echo"}) {
				t.Errorf("tools/list for mcp:admin = %v", got)
			}
			res, err = admin.CallTool(ctx, &mcp.CallToolParams{Name: "admin_stats"})
			if err != nil || res.IsError {
				t.Fatalf("admin_stats: %v %+v", err, res)
			}

			for i, a := range s.up.seen() {
				if a != "" {
					t.Errorf("upstream request %d carried Authorization %q", i, a)
				}
			}
			log := s.audit.String()
			if strings.Contains(log, secret) {
				t.Fatalf("the audit holds the argument text:\n%s", log)
			}
			if !strings.Contains(log, `"event":"tool.call","method":"tools/call","tool":"echo"`) ||
				!strings.Contains(log, `"tool":"admin_stats"`) || !strings.Contains(log, `"args_sha256":"`) ||
				!strings.Contains(log, `"tenant":"user-bot"`) || !strings.Contains(log, `"event":"initialize"`) {
				t.Errorf("audit:\n%s", log)
			}
			denied := false
			for _, line := range strings.Split(log, "\n") {
				denied = denied || strings.Contains(line, `"tool":"admin_stats"`) && strings.Contains(line, `"sub":"user-bot"`) &&
					strings.Contains(line, `"result":"denied"`) && strings.Contains(line, `"status":403`)
			}
			if !denied {
				t.Errorf("no denied line for user-bot's admin_stats call:\n%s", log)
			}
		})
	}
}

func TestGatewayGivesTheUpstreamAnExchangedTokenOfItsOwn(t *testing.T) {
	s := newStack(t, false, baseConfig+`
upstream_auth:
  exchange: {client_id: gw, client_secret: "${GW_SECRET}", resource: UPSTREAM, scopes: [upstream:call]}
`)
	caller := s.token(t, "user-bot")
	cs := s.connect(t, caller)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	seen := s.up.seen()
	if len(seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	upRes := s.cfg.UpstreamAuth.Exchange.Resource
	for i, a := range seen {
		tok, ok := strings.CutPrefix(a, "Bearer ")
		if !ok || tok == caller {
			t.Fatalf("upstream request %d: Authorization %.30q is not a token of the gateway's", i, a)
		}
		c := claims(t, tok)
		act, _ := c["act"].(map[string]any)
		if c["aud"] != upRes && !slices.Contains(toStrings(c["aud"]), upRes) || act == nil || (act["sub"] != "gw" && act["client_id"] != "gw") {
			t.Fatalf("upstream token claims: %v", c)
		}
	}
}

func TestGatewayGivesTheUpstreamAClientCredentialsToken(t *testing.T) {
	s := newStack(t, false, baseConfig+`
upstream_auth:
  client_credentials: {client_id: gw, client_secret: "${GW_SECRET}", resource: UPSTREAM}
`)
	caller := s.token(t, "user-bot")
	cs := s.connect(t, caller)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	upRes := s.cfg.UpstreamAuth.ClientCredentials.Resource
	for i, a := range s.up.seen() {
		tok, ok := strings.CutPrefix(a, "Bearer ")
		if !ok || tok == caller {
			t.Fatalf("upstream request %d: Authorization %.30q", i, a)
		}
		if c := claims(t, tok); c["client_id"] != "gw" || c["aud"] != upRes && !slices.Contains(toStrings(c["aud"]), upRes) {
			t.Fatalf("upstream token claims: %v", c)
		}
	}
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// rawPost sends one JSON-RPC message to the gateway.
func rawPost(t *testing.T, s *stack, token, session, body string, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.resource, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 30 * time.Second} // a hang fails the test instead of stalling it
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

func rpcError(t *testing.T, resp *http.Response) (id any, code int, msg string) {
	t.Helper()
	var m struct {
		ID    any `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("not a JSON-RPC answer (%d): %s", resp.StatusCode, body)
	}
	return m.ID, m.Error.Code, m.Error.Message
}

func TestGatewayAnswersAJSONRPCErrorWhenTheUpstreamIsDown(t *testing.T) {
	// A reserved port nothing listens on (a port merely closed again may be
	// taken by another listener meanwhile, and then answers).
	dead := "http://" + freeport.Addr(t) + "/mcp"
	s := newStack(t, false, strings.Replace(baseConfig, "upstream: UPSTREAM", "upstream: "+dead, 1))
	resp := rawPost(t, s, s.token(t, "user-bot"), "", strings.Replace(initialize, `"id":1`, `"id":"init-7"`, 1), nil)
	id, code, msg := rpcError(t, resp)
	if resp.StatusCode != http.StatusBadGateway || id != "init-7" || code != -32603 || !strings.Contains(msg, "unreachable") {
		t.Fatalf("%d id=%v code=%d %q", resp.StatusCode, id, code, msg)
	}
}

func TestGatewayAnswersAJSONRPCErrorWhenTheUpstreamHangs(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stuck := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release })
	s := newStack(t, false, baseConfig+"limits: {upstream_header_timeout: 300ms}\n")
	s.up.srv.Config.Handler = stuck
	resp := rawPost(t, s, s.token(t, "user-bot"), "", initialize, nil)
	id, code, msg := rpcError(t, resp)
	if resp.StatusCode != http.StatusGatewayTimeout || id != 1.0 || code != -32603 || !strings.Contains(msg, "in time") {
		t.Fatalf("%d id=%v code=%d %q", resp.StatusCode, id, code, msg)
	}
}

func TestGatewayEnforcesItsRequestLimits(t *testing.T) {
	s := newStack(t, false, baseConfig+"limits: {max_request_bytes: 2000, max_header_bytes: 4096}\n")
	tok := s.token(t, "user-bot")
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("a", 3000) + `"}}`
	if resp := rawPost(t, s, tok, "", big, nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("large body: %d, want 413", resp.StatusCode)
	}
	// Chunked, without a Content-Length to refuse it by: read by the
	// Middleware (a tools/call, whose scopes depend on the tool) or by the
	// filter (a ping).
	for _, body := range []string{big, strings.Replace(big, `"method":"ping","params":{`, `"method":"tools/call","params":{"name":"admin_stats",`, 1)} {
		req, _ := http.NewRequest(http.MethodPost, s.resource, io.MultiReader(strings.NewReader(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || req.ContentLength != 0 {
			t.Errorf("large chunked body %.50s: %d, want 413", body, resp.StatusCode)
		}
	}
	if n := len(s.up.seen()); n != 0 {
		t.Errorf("the upstream saw %d of the refused requests", n)
	}
	if resp := rawPost(t, s, tok, "", initialize, map[string]string{"X-Pad": strings.Repeat("b", 8192)}); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("large header: %d, want 431", resp.StatusCode)
	}
	if resp := rawPost(t, s, tok, "", initialize, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a request within the limits: %d", resp.StatusCode)
	}
}

func TestGatewayPublishesProtectedResourceMetadataAndChallenges(t *testing.T) {
	s := newStack(t, false, baseConfig)
	base := strings.TrimSuffix(s.resource, "/mcp")
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Resource string   `json:"resource"`
			AS       []string `json:"authorization_servers"`
			Scopes   []string `json:"scopes_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil || doc.Resource != s.resource || !slices.Equal(doc.AS, []string{s.issuer}) ||
			!slices.Equal(doc.Scopes, []string{"mcp:tools", "mcp:read", "mcp:admin"}) {
			t.Errorf("%s: %+v %v", path, doc, err)
		}
	}
	resp := rawPost(t, s, "", "", initialize, nil)
	if h := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 ||
		!strings.Contains(h, `resource_metadata="`+base+`/.well-known/oauth-protected-resource/mcp"`) || !strings.Contains(h, `scope="mcp:tools"`) {
		t.Errorf("no token: %d %q", resp.StatusCode, h)
	}
	// A token for another audience (the upstream) is refused.
	if resp := rawPost(t, s, "not-a-token", "", initialize, nil); resp.StatusCode != 401 ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("bad token: %d", resp.StatusCode)
	}
	if len(s.up.seen()) != 0 {
		t.Errorf("refused requests reached the upstream: %d", len(s.up.seen()))
	}
}

// Sessions: the upstream's Mcp-Session-Id is bound to the user who opened
// it; notifications get 202, GET opens the server's stream, DELETE ends the
// session.
func TestGatewayPassesTheSessionLifecycleThrough(t *testing.T) {
	s := newStack(t, false, baseConfig)
	alice, bob := s.token(t, "user-bot"), s.token(t, "admin-bot")
	resp := rawPost(t, s, alice, "", initialize, nil)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || session == "" {
		t.Fatalf("initialize: %d session %q", resp.StatusCode, session)
	}
	io.ReadAll(resp.Body)
	if resp := rawPost(t, s, alice, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Protocol-Version": "2025-06-18"}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notification: %d", resp.StatusCode)
	}
	if resp := rawPost(t, s, bob, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"Mcp-Protocol-Version": "2025-06-18"}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another user's session: %d, want 404", resp.StatusCode)
	}

	ctx, cancel := context.WithCancel(context.Background())
	get, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.resource, nil)
	get.Header.Set("Authorization", "Bearer "+alice)
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Mcp-Session-Id", session)
	get.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	gresp, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	if gresp.StatusCode != 200 || !strings.HasPrefix(gresp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET stream: %d %s", gresp.StatusCode, gresp.Header.Get("Content-Type"))
	}
	cancel()
	gresp.Body.Close()

	del, _ := http.NewRequest(http.MethodDelete, s.resource, nil)
	del.Header.Set("Authorization", "Bearer "+alice)
	del.Header.Set("Mcp-Session-Id", session)
	del.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	dresp, err := http.DefaultClient.Do(del)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	if dresp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %d", dresp.StatusCode)
	}
	if resp := rawPost(t, s, alice, session, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, map[string]string{"Mcp-Protocol-Version": "2025-06-18"}); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("deleted session: %d, want 404", resp.StatusCode)
	}
}

// Each SSE event of the upstream reaches the client while the upstream is
// still working on the next: the gateway flushes, it does not buffer answers.
func TestGatewayStreamsEventsAsTheUpstreamSendsThem(t *testing.T) {
	release := make(chan struct{})
	s := newStack(t, false, baseConfig)
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"tick\"}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
			// The client never saw the first event: a buffering gateway.
			fmt.Fprint(w, "id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"error\":{\"code\":-1,\"message\":\"first event not delivered\"}}\n\n")
			return
		}
		fmt.Fprint(w, "id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n")
	})
	resp := rawPost(t, s, s.token(t, "user-bot"), "", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	var first strings.Builder
	for !strings.HasSuffix(first.String(), "\n\n") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("first event: %q %v", first.String(), err)
		}
		first.WriteString(line)
	}
	close(release) // only now may the upstream send its answer
	if !strings.Contains(first.String(), `"data":"tick"`) {
		t.Fatalf("first event %q", first.String())
	}
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), `"id":5`) || !strings.Contains(string(rest), "done") {
		t.Fatalf("rest %q", rest)
	}
}

// An upstream that refuses the gateway's credentials is the operator's
// problem: the client gets a JSON-RPC error, not the upstream's challenge
// (which would send it to the upstream's AS).
func TestGatewayHidesTheUpstreamsChallenge(t *testing.T) {
	s := newStack(t, false, baseConfig)
	s.up.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="http://upstream.example/.well-known/oauth-protected-resource"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	resp := rawPost(t, s, s.token(t, "user-bot"), "", initialize, nil)
	if h := resp.Header.Get("WWW-Authenticate"); h != "" {
		t.Errorf("the upstream's challenge reached the client: %q", h)
	}
	id, code, msg := rpcError(t, resp)
	if resp.StatusCode != http.StatusBadGateway || id != 1.0 || code != -32603 || !strings.Contains(msg, "refused the gateway's credentials") {
		t.Fatalf("%d id=%v code=%d %q", resp.StatusCode, id, code, msg)
	}
}

// Requests refused at the door are audited too: one line per JSON-RPC
// request, result unauthorized, no principal.
func TestGatewayAuditsRequestsRefusedWithoutAToken(t *testing.T) {
	s := newStack(t, false, baseConfig)
	call := `{"jsonrpc":"2.0","id":"r-1","method":"tools/call","params":{"name":"admin_stats","arguments":{"q":"not-for-the-log"}}}`
	for _, tok := range []string{"", "not-a-token"} {
		if resp := rawPost(t, s, tok, "", call, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: %d", tok, resp.StatusCode)
		}
	}
	log := s.audit.String()
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) != 2 || strings.Contains(log, "not-for-the-log") || strings.Contains(log, `"sub"`) {
		t.Fatalf("audit:\n%s", log)
	}
	for _, l := range lines {
		if !strings.Contains(l, `"event":"tool.call","method":"tools/call","tool":"admin_stats","id":"r-1"`) ||
			!strings.Contains(l, `"result":"unauthorized"`) || !strings.Contains(l, `"status":401`) {
			t.Errorf("line %s", l)
		}
	}
}

const entriesConfig = `
listen: 127.0.0.1:0
resource: RESOURCE
issuer: ISSUER
upstream: UPSTREAM
scopes:
  base: [mcp:tools]
  prompts: {incident_report: [mcp:admin]}
  resources: {"file:///etc/secrets": [mcp:admin], "db://{table}/rows": [mcp:admin]}
audit: {format: json}
`

func TestGatewayTrimsPromptAndResourceListsAndStepsUpHiddenEntries(t *testing.T) {
	s := newStack(t, false, entriesConfig)
	ctx := context.Background()
	names := func(cs *mcp.ClientSession) (prompts, resources, templates []string) {
		t.Helper()
		pr, err := cs.ListPrompts(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pr.Prompts {
			prompts = append(prompts, p.Name)
		}
		rr, err := cs.ListResources(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rr.Resources {
			resources = append(resources, r.URI)
		}
		tr, err := cs.ListResourceTemplates(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range tr.ResourceTemplates {
			templates = append(templates, r.URITemplate)
		}
		slices.Sort(prompts)
		slices.Sort(resources)
		return
	}
	user := s.connect(t, s.token(t, "user-bot"))
	if p, r, tm := names(user); !slices.Equal(p, []string{"greeting"}) || !slices.Equal(r, []string{"file:///readme"}) || len(tm) != 0 {
		t.Errorf("mcp:tools sees prompts %v, resources %v, templates %v", p, r, tm)
	}
	if _, err := user.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greeting"}); err != nil {
		t.Errorf("greeting: %v", err)
	}
	if _, err := user.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///readme"}); err != nil {
		t.Errorf("readme: %v", err)
	}
	if _, err := user.GetPrompt(ctx, &mcp.GetPromptParams{Name: "incident_report"}); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("hidden prompt: %v", err)
	}
	for _, uri := range []string{"file:///etc/secrets", "db://orders/rows"} {
		if _, err := user.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("hidden resource %s: %v", uri, err)
		}
	}
	resp := rawPost(t, s, s.token(t, "user-bot"), "", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"db://orders/rows"}}`, nil)
	if h := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusForbidden || !strings.Contains(h, `scope="mcp:tools mcp:admin"`) {
		t.Errorf("step-up challenge: %d %q", resp.StatusCode, h)
	}

	admin := s.connect(t, s.token(t, "admin-bot"))
	if p, r, tm := names(admin); !slices.Equal(p, []string{"greeting", "incident_report"}) ||
		!slices.Equal(r, []string{"file:///etc/secrets", "file:///readme"}) || !slices.Equal(tm, []string{"db://{table}/rows"}) {
		t.Errorf("mcp:admin sees prompts %v, resources %v, templates %v", p, r, tm)
	}
	if _, err := admin.ReadResource(ctx, &mcp.ReadResourceParams{URI: "db://orders/rows"}); err != nil {
		t.Errorf("admin reading db://orders/rows: %v", err)
	}
}

// With introspection, the tenant is a member of the AS's RFC 7662 answer.
// token_type is one the answer has and the JWT's claims have not (a JWT's
// type is in its header): the line's tenant can only come from the answer.
func TestGatewayReadsTheTenantFromTheIntrospectionAnswer(t *testing.T) {
	for _, c := range []struct{ claim, want string }{{"client_id", "user-bot"}, {"token_type", "Bearer"}} {
		t.Run(c.claim, func(t *testing.T) {
			s := newStack(t, false, strings.Replace(baseConfig, "tenant_claim: client_id", "tenant_claim: "+c.claim, 1)+
				"introspection: {client_id: gw, client_secret: \"${GW_SECRET}\"}\n")
			cs := s.connect(t, s.token(t, "user-bot"))
			if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
				t.Fatal(err)
			}
			log := s.audit.String()
			if !strings.Contains(log, `"event":"tool.call"`) || strings.Count(log, `"tenant":"`+c.want+`"`) != strings.Count(log, "\n") {
				t.Errorf("every line should name tenant %q:\n%s", c.want, log)
			}
		})
	}
}
