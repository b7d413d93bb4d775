package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
	"github.com/mcpauth/mcpauth/internal/freeport"
)

// tsServerDir holds the TypeScript MCP server the gateway is tested in front
// of; .ci/run installs its pinned packages with npm ci.
var tsServerDir = filepath.Join("testdata", "tsserver")

// The addresses deploy/mcpgateway.yaml and deploy/authserver.yaml name for
// the gateway and the server behind it; the tests replace them by free ports.
const (
	gatewayAddr  = "127.0.0.1:8090"
	tsServerAddr = "127.0.0.1:3001"
)

var (
	gatewayOnce sync.Once
	gatewayErr  error
)

// gatewayBinary builds cmd/mcpgateway next to the stack's binaries.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	dir := binaries(t)
	gatewayOnce.Do(func() {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "mcpgateway"), "./cmd/mcpgateway")
		cmd.Dir = moduleRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			gatewayErr = fmt.Errorf("go build ./cmd/mcpgateway: %v\n%s", err, out)
		}
	})
	if gatewayErr != nil {
		t.Fatal(gatewayErr)
	}
	return filepath.Join(dir, "mcpgateway")
}

// startProcess runs name with args and env until the test ends, and waits
// for a line of its output containing ready. Its output goes to logs. The
// function it returns kills the process (SIGKILL, as a crash) and waits
// for it to exit.
func startProcess(t *testing.T, logs *lockedBuffer, ready string, env []string, name string, args ...string) (kill func()) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); pw.Close(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	kill = func() {
		cmd.Process.Kill()
		<-done
	}
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			fmt.Fprintf(logs, "[%s] %s\n", filepath.Base(name), sc.Text())
			if strings.Contains(sc.Text(), ready) {
				once.Do(func() { close(up) })
			}
		}
	}()
	select {
	case <-up:
	case <-done:
		t.Fatalf("%s exited before it was ready:\n%s", name, logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s not ready after 60s:\n%s", name, logs)
	}
	return kill
}

// tsServer is the TypeScript MCP server, with what it recorded.
type tsServer struct {
	url string // its MCP endpoint, which is also its resource URI
}

type seenRequest struct {
	Method        string `json:"method"`
	Session       string `json:"session"`
	Authorization string `json:"authorization"`
	Traceparent   string `json:"traceparent"`
}

func (s *tsServer) seen(t *testing.T) []seenRequest {
	t.Helper()
	var out []seenRequest
	getJSON(t, strings.TrimSuffix(s.url, "/mcp")+"/_seen", &out)
	return out
}

// traces returns the params._meta.traceparent of every echo call, as the
// TypeScript SDK handed it to the tool.
func (s *tsServer) traces(t *testing.T) []string {
	t.Helper()
	var out []string
	getJSON(t, strings.TrimSuffix(s.url, "/mcp")+"/_traces", &out)
	return out
}

// calls returns the name of every tool the server ran, in order.
func (s *tsServer) calls(t *testing.T) []string {
	t.Helper()
	var out []string
	getJSON(t, strings.TrimSuffix(s.url, "/mcp")+"/_calls", &out)
	return out
}

// startTSServer starts the TypeScript server on addr; jsonResponse makes it
// answer POSTs with application/json instead of an event stream. env adds
// to its environment (EXPRESS=1: the SDK's Express app).
func startTSServer(t *testing.T, logs *lockedBuffer, addr string, jsonResponse bool, env ...string) *tsServer {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		requireCI(t, "node is not installed")
	}
	if _, err := os.Stat(filepath.Join(tsServerDir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		requireCI(t, "the TypeScript MCP SDK is not installed: (cd e2e/testdata/tsserver && npm ci)")
	}
	_, port, _ := strings.Cut(addr, ":")
	env = append([]string{"PORT=" + port, "JSON_RESPONSE=0"}, env...)
	if jsonResponse {
		env[1] = "JSON_RESPONSE=1"
	}
	startProcess(t, logs, "listening on", env, node, filepath.Join(tsServerDir, "server.mjs"))
	return &tsServer{url: "http://" + addr + "/mcp"}
}

// gatewayConfig is deploy/mcpgateway.yaml on the test's addresses, with its
// audit going to auditFile and, unless withUpstreamAuth, no upstream_auth.
func gatewayConfig(t *testing.T, s *launch.Stack, gw, ts, auditFile string, withUpstreamAuth bool) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(moduleRoot, "deploy", "mcpgateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer(gatewayAddr, gw, tsServerAddr, ts, "http://127.0.0.1:9000", s.Issuer).Replace(string(raw))
	if !strings.Contains(text, "audit: {format: json}\n") || !strings.Contains(text, "\nupstream_auth:\n") {
		t.Fatal("deploy/mcpgateway.yaml changed shape: update gatewayConfig")
	}
	text = strings.Replace(text, "audit: {format: json}\n", fmt.Sprintf("audit: {format: json, file: %q}\n", auditFile), 1)
	if !withUpstreamAuth {
		i := strings.Index(text, "\nupstream_auth:\n")
		j := strings.Index(text[i+1:], "\n\n")
		text = text[:i+1] + text[i+1+j+2:]
	}
	p := filepath.Join(t.TempDir(), "mcpgateway.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startGateway runs the gateway binary with configPath; the function it
// returns kills it.
func startGateway(t *testing.T, s *launch.Stack, logs *lockedBuffer, configPath, gw, ts string, env ...string) (kill func()) {
	t.Helper()
	return startProcess(t, logs, "mcpgateway: listening", append([]string{
		"MCPGATEWAY_CLIENT_SECRET=" + s.Env["MCPGATEWAY_CLIENT_SECRET"],
		"MCPGATEWAY_LISTEN=" + gw, "MCPGATEWAY_UPSTREAM=http://" + ts + "/mcp", "MCPGATEWAY_ISSUER_INTERNAL=",
	}, env...), gatewayBinary(t), "--config", configPath)
}

// startGatewayStack starts the TypeScript MCP server (answering in JSON
// when withUpstreamAuth, else in event streams), the stack, and the gateway
// of deploy/mcpgateway.yaml in front of the server, each on a reserved
// address, with upstream_auth only when withUpstreamAuth and serverEnv in
// the server's environment. It returns the
// stack, the server, the gateway's audit file and its resource URL; the
// gateway's and the server's output is logged when t fails.
func startGatewayStack(t *testing.T, withUpstreamAuth bool, serverEnv ...string) (*launch.Stack, *tsServer, string, string) {
	t.Helper()
	return startGatewayStackOf(t, withUpstreamAuth, "", nil, serverEnv...)
}

// startGatewayStackWith is startGatewayStack without upstream_auth, with
// extraConfig appended to the gateway's configuration.
func startGatewayStackWith(t *testing.T, extraConfig string, serverEnv ...string) (*launch.Stack, *tsServer, string, string) {
	t.Helper()
	return startGatewayStackOf(t, false, extraConfig, nil, serverEnv...)
}

// startGatewayStackEnv is startGatewayStack with env added to the
// environment of the AS's stack and of the gateway.
func startGatewayStackEnv(t *testing.T, withUpstreamAuth bool, env []string, serverEnv ...string) (*launch.Stack, *tsServer, string, string) {
	t.Helper()
	return startGatewayStackOf(t, withUpstreamAuth, "", env, serverEnv...)
}

func startGatewayStackOf(t *testing.T, withUpstreamAuth bool, extraConfig string, env []string, serverEnv ...string) (*launch.Stack, *tsServer, string, string) {
	t.Helper()
	logs := &lockedBuffer{}
	gw, ts := freeport.Addr(t), freeport.Addr(t)
	upstream := startTSServer(t, logs, ts, withUpstreamAuth, serverEnv...)
	s := startStack(t, stackOptions{extraEnv: env, editConfig: func(c string) string {
		return strings.NewReplacer(gatewayAddr, gw, tsServerAddr, ts).Replace(c)
	}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- gateway and upstream output ---\n%s", logs)
		}
	})
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	cfgPath := gatewayConfig(t, s, gw, ts, auditFile, withUpstreamAuth)
	if extraConfig != "" {
		raw, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfgPath, append(raw, extraConfig...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startGateway(t, s, logs, cfgPath, gw, ts, env...)
	return s, upstream, auditFile, "http://" + gw + "/mcp"
}

// TestGatewayInFrontOfATypeScriptServer runs deploy/mcpgateway.yaml in front
// of an MCP server written with the TypeScript SDK, against the real AS, and
// drives it with the MCP Go SDK's OAuth client through the whole story.
func TestGatewayInFrontOfATypeScriptServer(t *testing.T) {
	s, upstream, auditFile, resource := startGatewayStack(t, false)
	gateway := strings.TrimSuffix(resource, "/mcp") // the gateway's origin

	// The Go SDK's OAuth client: 401 -> PRM -> AS metadata -> DCR -> the
	// login and consent forms -> token; first without mcp:admin.
	redirect := loopbackRedirect(t)
	driver := newFormLogin(demoUser, demoPassword, redirect)
	rec := &recorder{base: http.DefaultTransport}
	tokens := &tokenSources{}
	var mu sync.Mutex
	authorizations := 0
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL: redirect,
		AuthorizationCodeFetcher: func(ctx context.Context, a *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			mu.Lock()
			authorizations++
			mu.Unlock()
			return driver.fetch(ctx, a)
		},
		ScopeFilter: func(discovered []string) []string {
			mu.Lock()
			defer mu.Unlock()
			if authorizations == 0 {
				return slices.DeleteFunc(slices.Clone(discovered), func(s string) bool { return s == "mcp:admin" })
			}
			return discovered
		},
		Client:         &http.Client{Transport: rec},
		NewTokenSource: tokens.newTokenSource,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "mcpauth e2e gateway client", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	var ticks []string
	client := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "0"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			logMu.Lock()
			ticks = append(ticks, fmt.Sprint(r.Params.Data))
			logMu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: resource, HTTPClient: &http.Client{Transport: rec}, OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, rec)
	}
	defer session.Close()

	t.Run("the client was challenged and discovered the AS through the gateway", func(t *testing.T) {
		first := rec.find(0, "POST", resource, 401)
		prm := rec.find(first, "GET", gateway+"/.well-known/oauth-protected-resource", 200)
		asm := rec.find(prm, "GET", s.Issuer+"/.well-known/", 200)
		if first != 0 || prm < 0 || asm < 0 {
			t.Fatalf("no 401 -> PRM -> AS sequence:\n%s", rec)
		}
		if ch := rec.exchanges()[first].WWWAuth; !strings.Contains(ch, `resource_metadata="`+gateway+`/.well-known/oauth-protected-resource/mcp"`) {
			t.Errorf("challenge %q", ch)
		}
		c := jwtClaims(t, tokens.all()[0].AccessToken)
		if c["aud"] != resource && !containsAny(c["aud"], resource) {
			t.Errorf("token aud %v, want %s", c["aud"], resource)
		}
	})

	names := func() []string {
		res, err := session.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		slices.Sort(out)
		return out
	}
	t.Run("tools/list hides the admin tool", func(t *testing.T) {
		if got := names(); !slices.Equal(got, []string{"countdown", "echo"}) {
			t.Errorf("tools = %v, want [countdown echo]", got)
		}
	})
	// entries lists the prompts, resources and resource templates shown.
	entries := func() (prompts, resources, templates []string) {
		pr, err := session.ListPrompts(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pr.Prompts {
			prompts = append(prompts, p.Name)
		}
		rr, err := session.ListResources(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rr.Resources {
			resources = append(resources, r.URI)
		}
		tr, err := session.ListResourceTemplates(ctx, nil)
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
	t.Run("prompts and resources are listed by their own scopes", func(t *testing.T) {
		p, r, tm := entries()
		if !slices.Equal(p, []string{"greeting"}) || !slices.Equal(r, []string{"file:///readme"}) || len(tm) != 0 {
			t.Errorf("prompts %v, resources %v, templates %v; want [greeting] [file:///readme] []", p, r, tm)
		}
		if res, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///readme"}); err != nil || res.Contents[0].Text != "contents of readme" {
			t.Errorf("readme: %v", err)
		}
	})

	t.Run("calling the hidden tool steps up, then it is listed", func(t *testing.T) {
		before := len(rec.exchanges())
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "admin_stats"})
		if err != nil || res.IsError {
			t.Fatalf("admin_stats: %v %+v\n%s", err, res, rec)
		}
		i := rec.find(before, "POST", resource, 403)
		if i < 0 {
			t.Fatalf("no 403 step-up challenge:\n%s", rec)
		}
		if ch := rec.exchanges()[i].WWWAuth; !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="mcp:tools mcp:admin"`) {
			t.Errorf("step-up challenge %q", ch)
		}
		if authorizations != 2 {
			t.Errorf("%d authorizations, want 2", authorizations)
		}
		if got := names(); !slices.Equal(got, []string{"admin_stats", "countdown", "echo"}) {
			t.Errorf("tools after step-up = %v", got)
		}
		p, r, tm := entries()
		if !slices.Equal(p, []string{"greeting", "incident_report"}) || !slices.Equal(r, []string{"file:///readme", "file:///var/log/audit"}) ||
			!slices.Equal(tm, []string{"file:///var/log/{name}"}) {
			t.Errorf("after step-up: prompts %v, resources %v, templates %v", p, r, tm)
		}
		if _, err := session.GetPrompt(ctx, &mcp.GetPromptParams{Name: "incident_report"}); err != nil {
			t.Errorf("incident_report after step-up: %v", err)
		}
	})

	t.Run("a streamed answer arrives whole, notifications first", func(t *testing.T) {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "countdown", Arguments: map[string]any{"n": 3}})
		if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "liftoff" {
			t.Fatalf("countdown: %v %+v", err, res)
		}
		logMu.Lock()
		defer logMu.Unlock()
		if !slices.Equal(ticks, []string{"tick 3", "tick 2", "tick 1"}) {
			t.Errorf("log messages %v", ticks)
		}
	})

	const secret = "text-the-audit-must-never-hold-5f1c"
	t.Run("the audit holds the digest, never the arguments", func(t *testing.T) {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": secret}})
		if err != nil || res.Content[0].(*mcp.TextContent).Text != secret {
			t.Fatalf("echo: %v %+v", err, res)
		}
		b, err := os.ReadFile(auditFile)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Fatalf("the audit holds the argument text:\n%s", b)
		}
		sub := jwtClaims(t, tokens.all()[0].AccessToken)["sub"]
		var found bool
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var e map[string]any
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("audit line %q: %v", line, err)
			}
			if e["event"] == "tool.call" && e["tool"] == "echo" {
				found = true
				if d, _ := e["args_sha256"].(string); len(d) != 64 || e["sub"] != sub || e["result"] != "ok" || e["client_id"] == "" || e["tenant"] != e["client_id"] {
					t.Errorf("echo audit line %v", e)
				}
			}
		}
		if !found {
			t.Errorf("no tool.call line for echo:\n%s", b)
		}
	})

	// Raw Streamable HTTP through the gateway with the first (mcp:tools)
	// token: 202 for a notification, a resumed stream, DELETE.
	first := tokens.all()[0].AccessToken
	post := func(session, body string, header ...string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, resource, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+first)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	t.Run("sessions, notifications, resumption and DELETE pass through", func(t *testing.T) {
		resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
		sid := resp.Header.Get("Mcp-Session-Id")
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || sid == "" {
			t.Fatalf("initialize: %d %q", resp.StatusCode, sid)
		}
		resp = post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("notification: %d, want 202", resp.StatusCode)
		}
		resp = post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		primingID := ""
		for _, line := range strings.Split(string(body), "\n") {
			if id, ok := strings.CutPrefix(line, "id: "); ok && primingID == "" {
				primingID = id
			}
		}
		if strings.Contains(string(body), "admin_stats") || !strings.Contains(string(body), `"echo"`) || primingID == "" {
			t.Fatalf("tools/list stream:\n%s", body)
		}
		// Resume the answer's stream after its first event: the server
		// replays the tools/list answer on a GET stream, and it is cut there
		// too.
		// The replay comes at once or never (the stream then carries only
		// keep-alives): bound the wait.
		gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
		defer gcancel()
		get, _ := http.NewRequestWithContext(gctx, http.MethodGet, resource, nil)
		get.Header.Set("Authorization", "Bearer "+first)
		get.Header.Set("Accept", "text/event-stream")
		get.Header.Set("Mcp-Session-Id", sid)
		get.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		get.Header.Set("Last-Event-ID", primingID)
		gresp, err := http.DefaultClient.Do(get)
		if err != nil {
			t.Fatal(err)
		}
		replayed := readUntil(t, gresp.Body, `"tools"`)
		gresp.Body.Close()
		if gresp.StatusCode != 200 || strings.Contains(replayed, "admin_stats") || !strings.Contains(replayed, `"echo"`) {
			t.Fatalf("resumed stream (%d):\n%s", gresp.StatusCode, replayed)
		}

		del, _ := http.NewRequestWithContext(ctx, http.MethodDelete, resource, nil)
		del.Header.Set("Authorization", "Bearer "+first)
		del.Header.Set("Mcp-Session-Id", sid)
		del.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		dresp, err := http.DefaultClient.Do(del)
		if err != nil {
			t.Fatal(err)
		}
		dresp.Body.Close()
		if dresp.StatusCode != 200 {
			t.Fatalf("DELETE: %d", dresp.StatusCode)
		}
		resp = post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("after DELETE: %d, want 404", resp.StatusCode)
		}
	})

	t.Run("the upstream never saw an Authorization header", func(t *testing.T) {
		seen := upstream.seen(t)
		if len(seen) < 10 {
			t.Fatalf("the upstream saw only %d requests", len(seen))
		}
		for i, r := range seen {
			if r.Authorization != "" {
				t.Errorf("request %d (%s) carried Authorization %.20q", i, r.Method, r.Authorization)
			}
		}
	})
}

// readUntil reads an event stream until want appears in a complete event.
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	var b strings.Builder
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if line == "\n" && strings.Contains(b.String(), want) || err != nil {
			return b.String()
		}
	}
}

// TestGatewayGivesTheTypeScriptServerItsOwnToken runs the shipped
// configuration as it is, with upstream_auth: the server behind the gateway
// sees a token whose aud is its own resource and whose act names the gateway.
// The server answers in JSON here (the other test has event streams), and
// the tool list is cut in that form too.
func TestGatewayGivesTheTypeScriptServerItsOwnToken(t *testing.T) {
	_, upstream, _, resource := startGatewayStack(t, true)

	redirect := loopbackRedirect(t)
	tokens := &tokenSources{}
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: newFormLogin(demoUser, demoPassword, redirect).fetch,
		NewTokenSource:           tokens.newTokenSource,
		ScopeFilter: func(discovered []string) []string {
			return slices.DeleteFunc(slices.Clone(discovered), func(s string) bool { return s == "mcp:admin" })
		},
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "mcpauth e2e gateway client", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: resource, HTTPClient: &http.Client{}, OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	list, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if tl.Name == "admin_stats" {
			t.Errorf("the JSON tools/list answer shows admin_stats to a token without mcp:admin")
		}
	}
	if len(list.Tools) != 2 {
		t.Errorf("tools %v, want countdown and echo", list.Tools)
	}
	user := jwtClaims(t, tokens.all()[0].AccessToken)
	seen := upstream.seen(t)
	if len(seen) < 3 {
		t.Fatalf("the upstream saw %d requests", len(seen))
	}
	for i, r := range seen {
		tok, ok := strings.CutPrefix(r.Authorization, "Bearer ")
		if !ok {
			t.Fatalf("request %d (%s) had no bearer token", i, r.Method)
		}
		for _, mine := range tokens.all() {
			if tok == mine.AccessToken {
				t.Fatalf("request %d carried the client's own token", i)
			}
		}
		c := jwtClaims(t, tok)
		act, _ := c["act"].(map[string]any)
		if !containsAny(toList(c["aud"]), upstream.url) || c["sub"] != user["sub"] || act == nil ||
			(act["sub"] != "mcpgateway" && act["client_id"] != "mcpgateway") {
			t.Fatalf("request %d token claims %v", i, c)
		}
	}
}
