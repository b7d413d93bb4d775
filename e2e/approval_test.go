package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
	"github.com/mcpauth/mcpauth/internal/freeport"
	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// approvalEnv is the real AS, the TypeScript upstream with send_email and
// delete_repo, and mcpgateway with approval.tools in front of it.
type approvalEnv struct {
	s         *launch.Stack
	upstream  *tsServer
	auditFile string
	resource  string // the gateway's
	// restart kills the gateway (as a crash) and starts it again.
	restart func()
	// asLogs is the AS's output (its audit lines among it).
	asLogs *lockedBuffer
}

// asDigest returns the args_digest the AS's audit gives the approval id:
// the SHA-256 of the canonical arguments the approval is bound to and the
// page renders.
func (e *approvalEnv) asDigest(id string) string {
	for _, line := range strings.Split(e.asLogs.String(), "\n") {
		if strings.Contains(line, "event=approval.requested") && strings.Contains(line, "approval_id="+id+" ") {
			if m := regexp.MustCompile(`args_digest=([0-9a-f]{64})`).FindStringSubmatch(line); m != nil {
				return m[1]
			}
		}
	}
	return ""
}

// startApprovalStack starts the stack with the gateway's client
// (mcpgateway) listed in approval_clients of the gateway's resource and of
// the example MCP server's, and the gateway with approval.tools
// [delete_*, send_email] and ttl.
func startApprovalStack(t *testing.T, ttl string) *approvalEnv {
	t.Helper()
	logs := &lockedBuffer{}
	gw, ts := freeport.Addr(t), freeport.Addr(t)
	upstream := startTSServer(t, logs, ts, false, "APPROVAL_TOOLS=1")
	asLogs := &lockedBuffer{}
	s := startStack(t, stackOptions{logs: asLogs, editConfig: func(c string) string {
		c = strings.NewReplacer(gatewayAddr, gw, tsServerAddr, ts).Replace(c)
		for _, name := range []string{"    name: MCP server behind mcpgateway\n", "    name: Example MCP server\n"} {
			if !strings.Contains(c, name) {
				t.Fatal("deploy/authserver.yaml changed shape: update the test's edit")
			}
			c = strings.Replace(c, name, name+"    approval_clients: [mcpgateway]\n", 1)
		}
		return c
	}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- gateway and upstream output ---\n%s", logs)
		}
	})
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	cfgPath := gatewayConfig(t, s, gw, ts, auditFile, false)
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// session_key: sessions outlive a restart of the gateway.
	extra := fmt.Sprintf("approval: {tools: [\"delete_*\", \"send_email\"], ttl: %s, client_id: mcpgateway, client_secret: \"${MCPGATEWAY_CLIENT_SECRET}\"}\n"+
		"session_key: approval-e2e-session-key-0123456789abcdef\n", ttl)
	if err := os.WriteFile(cfgPath, append(raw, extra...), 0o600); err != nil {
		t.Fatal(err)
	}
	kill := startGateway(t, s, logs, cfgPath, gw, ts)
	e := &approvalEnv{s: s, upstream: upstream, auditFile: auditFile, resource: "http://" + gw + "/mcp", asLogs: asLogs}
	e.restart = func() {
		kill()
		kill = startGateway(t, s, logs, cfgPath, gw, ts)
	}
	return e
}

// auditLines returns the gateway's audit lines of tools/call.
func (e *approvalEnv) auditLines(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(e.auditFile)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(string(raw), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["method"] == "tools/call" {
			out = append(out, m)
		}
	}
	return out
}

// receivedArguments returns the arguments of every tools/call of tool the
// upstream received, as JSON.parse read them (re-encoded by
// JSON.stringify).
func (e *approvalEnv) receivedArguments(t *testing.T, tool string) []json.RawMessage {
	t.Helper()
	var seen []struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	getJSON(t, strings.TrimSuffix(e.upstream.url, "/mcp")+"/_arguments", &seen)
	var out []json.RawMessage
	for _, s := range seen {
		if s.Name == tool {
			out = append(out, s.Arguments)
		}
	}
	return out
}

// personBrowser is a headless Chromium of its own (its own cookies) for
// one person of the stack.
type personBrowser struct {
	ctx            context.Context
	user, password string
	shots          string // where screenshots go
}

func newPersonBrowser(t *testing.T, user, password string) *personBrowser {
	t.Helper()
	chromium := chromiumPath()
	if chromium == "" {
		requireCI(t, "chromium is not installed (apt-get install -y chromium)")
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1024, 1100),
	)...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return &personBrowser{ctx: ctx, user: user, password: password, shots: artifactsDir(t)}
}

// approvalPage is what the person saw on an approval page.
type approvalPage struct {
	Text, HTML string
	Buttons    []string // the texts of its approve and deny buttons
}

// open opens url, signing in first when the AS asks, and returns the page
// once it has settled (no login form, the document loaded).
func (b *personBrowser) open(url string) (approvalPage, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		return approvalPage{}, err
	}
	password := chromedp.CSS(`input[type=password]`)
	hasLogin, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('input[type=password]')`))
	if err != nil {
		return approvalPage{}, err
	}
	if hasLogin {
		err = chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS(`form input:not([type=hidden]):not([type=password]):not([type=submit]):not([type=checkbox])`), b.user),
			chromedp.SendKeys(password, b.password),
			chromedp.Submit(password),
			chromedp.WaitNotPresent(password),
		)
		if err != nil {
			return approvalPage{}, fmt.Errorf("signing in: %w", err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`h1`))); err != nil {
		return approvalPage{}, err
	}
	return b.page(ctx)
}

func (b *personBrowser) page(ctx context.Context) (approvalPage, error) {
	var p approvalPage
	var err error
	if p.Text, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.textContent`)); err != nil {
		return p, err
	}
	if p.HTML, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); err != nil {
		return p, err
	}
	p.Buttons, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('button, input[type=submit]')]
		.map(e => (e.textContent + ' ' + (e.value || '')).trim()).filter(s => /approve|deny|allow|reject/i.test(s))`))
	return p, err
}

// screenshot saves the page as name in the artifacts and returns its path.
func (b *personBrowser) screenshot(t *testing.T, name string) string {
	t.Helper()
	var shot []byte
	var err error
	for try := 0; try < 20; try++ {
		if shot, err = chromedp.Run(b.ctx, chromedp.FullScreenshot(100)); err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond) // a page still being laid out has no size yet
	}
	if err != nil || len(shot) < 1000 || string(shot[1:4]) != "PNG" {
		t.Fatalf("screenshot %s: %v (%d bytes)", name, err, len(shot))
	}
	p := filepath.Join(b.shots, name)
	if err := os.WriteFile(p, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	return p
}

// decide clicks the approve (or deny) button of the open page and returns
// the page it leads to.
func (b *personBrowser) decide(approve bool) (approvalPage, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	re := "deny|reject"
	if approve {
		re = "approve|allow"
	}
	found, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const b = [...document.querySelectorAll('button, input[type=submit]')]
			.find(e => /`+re+`/i.test(e.textContent + ' ' + (e.value || '')));
		if (!b) return false;
		b.setAttribute('data-e2e', 'decide');
		return true;
	})()`))
	if err != nil || !found {
		return approvalPage{}, fmt.Errorf("no %s button: %v", re, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-e2e=decide]`)), chromedp.WaitNotPresent(chromedp.CSS(`[data-e2e=decide]`))); err != nil {
		return approvalPage{}, err
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`h1`))); err != nil {
		return approvalPage{}, err
	}
	return b.page(ctx)
}

// approvalResult is what approval.mjs reports.
type approvalResult struct {
	Client        string
	Registrations []string
	First         heldCall
	Retried       string
	Second, Other heldCall
}

type heldCall struct {
	Mode, URL, ElicitationID, Message, ErrorMessage string
}

// runApprovalScript runs approval.mjs (SDK sdk) against the gateway,
// signing in with the login and consent forms as alice, and calling
// onApprove with the URL of the held call.
func runApprovalScript(t *testing.T, dir, resource, sdk string, args, otherArgs string, onApprove func(url string) error) approvalResult {
	t.Helper()
	redirect := loopbackRedirect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "approval.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+resource, "REDIRECT_URI="+redirect, "NO_COLOR=1", "SDK="+sdk, "ARGS="+args, "OTHER_ARGS="+otherArgs)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	login := newFormLogin(demoUser, demoPassword, redirect)
	var result *approvalResult
	var other []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var msg struct{ Type, URL string }
		if json.Unmarshal(line, &msg) != nil {
			other = append(other, string(line))
			continue
		}
		answer := map[string]string{}
		switch msg.Type {
		case "authorize":
			target, err := login.authorize(ctx, msg.URL)
			if err != nil {
				answer["error"] = err.Error()
			} else {
				answer["redirect"] = target
			}
		case "approve":
			if err := onApprove(msg.URL); err != nil {
				answer["error"] = err.Error()
				t.Errorf("approving %s: %v", msg.URL, err)
			} else {
				answer["done"] = "true"
			}
		case "result":
			result = &approvalResult{}
			if err := json.Unmarshal(line, result); err != nil {
				t.Fatal(err)
			}
			continue
		default:
			other = append(other, string(line))
			continue
		}
		b, _ := json.Marshal(answer)
		_, _ = stdin.Write(append(b, '\n'))
	}
	_, _ = io.Copy(io.Discard, stdout)
	stdin.Close()
	if err := cmd.Wait(); err != nil || result == nil {
		t.Fatalf("approval.mjs (%s): exit %v\n--- stderr ---\n%s\n--- other output ---\n%s", sdk, err, stderr.String(), strings.Join(other, "\n"))
	}
	return *result
}

// canonical is the RFC 8785 form of a JSON text.
func canonical(t *testing.T, raw []byte) string {
	t.Helper()
	c, err := rsmiddleware.CanonicalJSON(raw)
	if err != nil {
		t.Fatalf("canonical %s: %v", raw, err)
	}
	return string(c)
}

func sha256Hex(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

var approvalURLPattern = regexp.MustCompile(`https?://\S+/approve/[A-Za-z0-9_-]+`)

// TestApprovalOfToolCallsThroughTheGateway: a person's approval of
// dangerous calls, end to end, with the real authserver, mcpgateway, the
// TypeScript upstream, the TypeScript SDK v2 client (URL elicitation), the
// Go SDK client (text fallback) and headless Chromium on the AS's page.
func TestApprovalOfToolCallsThroughTheGateway(t *testing.T) {
	dir := foreignClients(t)
	env := startApprovalStack(t, "5m")
	alice := newPersonBrowser(t, demoUser, demoPassword)
	bob := newPersonBrowser(t, "bob", "bob-demo-password")

	// Hostile arguments: markup, control characters, a bidi override and a
	// long value, as a poisoned model might send them.
	hostile := map[string]any{
		"to":      "bob@example.com",
		"subject": `<script>alert(1)</script><b>quarterly</b> report`,
		"body":    "line one\nline two\u0000\u001b[31mred\u202eevil" + strings.Repeat(" padding", 200),
	}
	argsJSON, _ := json.Marshal(hostile)
	otherJSON, _ := json.Marshal(map[string]any{"to": "eve@example.com", "subject": "other"})

	var shown approvalPage
	var bobSaw approvalPage
	res := runApprovalScript(t, dir, env.resource, "v2", string(argsJSON), string(otherJSON), func(url string) error {
		// Another person signed in cannot decide.
		var err error
		if bobSaw, err = bob.open(url); err != nil {
			return fmt.Errorf("bob: %w", err)
		}
		bob.screenshot(t, "approval-other-person.png")
		if shown, err = alice.open(url); err != nil {
			return err
		}
		alice.screenshot(t, "approval-page.png")
		done, err := alice.decide(true)
		if err != nil {
			return err
		}
		alice.screenshot(t, "approval-approved.png")
		if !strings.Contains(strings.ToLower(done.Text), "try again") {
			return fmt.Errorf("the page after approving says %q", done.Text)
		}
		return nil
	})

	t.Run("the TypeScript v2 client got -32042 with the approval page", func(t *testing.T) {
		f := res.First
		if f.Mode != "url" || !strings.HasPrefix(f.URL, env.s.Issuer+"/approve/") || f.ElicitationID == "" || !strings.HasSuffix(f.URL, "/"+f.ElicitationID) {
			t.Fatalf("elicitation %+v", f)
		}
		if !strings.Contains(f.Message, `"send_email"`) {
			t.Errorf("message %q", f.Message)
		}
	})
	t.Run("the retry ran once, a second retry and other arguments are held again", func(t *testing.T) {
		if !strings.HasPrefix(res.Retried, "sent to bob@example.com") {
			t.Errorf("retried: %q", res.Retried)
		}
		if res.Second.URL == "" || res.Second.ElicitationID == res.First.ElicitationID {
			t.Errorf("second retry: %+v (first %s)", res.Second, res.First.ElicitationID)
		}
		if res.Other.URL == "" || res.Other.ElicitationID == res.First.ElicitationID || res.Other.ElicitationID == res.Second.ElicitationID {
			t.Errorf("other arguments: %+v", res.Other)
		}
		if n := countOf(env.upstream.calls(t), "send_email"); n != 1 {
			t.Errorf("the upstream ran send_email %d times, want 1", n)
		}
		if got := env.auditLines(t); len(got) == 0 {
			t.Error("no audit lines")
		}
	})
	t.Run("the arguments shown are the arguments forwarded", func(t *testing.T) {
		got := env.receivedArguments(t, "send_email")
		if len(got) != 1 {
			t.Fatalf("the upstream received %d send_email calls", len(got))
		}
		sent := canonical(t, argsJSON)
		if c := canonical(t, got[0]); c != sent {
			t.Errorf("forwarded %s\nsent      %s", c, sent)
		}
		for _, want := range []string{"bob@example.com", `<script>alert(1)</script><b>quarterly</b> report`, "line one", "padding padding", "send_email",
			"MCP server behind mcpgateway", "mcpauth approval client: SDK v2"} {
			if !strings.Contains(shown.Text, want) {
				t.Errorf("the page does not show %q:\n%s", want, shown.Text)
			}
		}
		var forwarded map[string]any
		for _, l := range env.auditLines(t) {
			if l["approval_id"] == res.First.ElicitationID && l["result"] == "ok" {
				forwarded = l
			}
		}
		if forwarded == nil || forwarded["args_sha256"] != sha256Hex(sent) {
			t.Errorf("audit of the forwarded call %v, want approval_id %s and args_sha256 %s", forwarded, res.First.ElicitationID, sha256Hex(sent))
		}
		// The canonical bytes the approval is bound to (and the page
		// renders) are the ones the upstream read.
		if d := env.asDigest(res.First.ElicitationID); d != sha256Hex(canonical(t, got[0])) {
			t.Errorf("the AS bound approval %s to digest %q, the upstream read arguments of digest %s", res.First.ElicitationID, d, sha256Hex(canonical(t, got[0])))
		}
	})
	t.Run("markup and control characters are escaped on the page", func(t *testing.T) {
		if strings.Contains(shown.HTML, "<script>alert") || strings.Contains(shown.HTML, "<b>quarterly") {
			t.Errorf("the arguments' markup reached the page's HTML")
		}
		if strings.ContainsAny(shown.Text, "\x00\x1b\u202e") {
			t.Errorf("control characters reached the page's text")
		}
	})
	t.Run("another person signed in cannot approve", func(t *testing.T) {
		if len(bobSaw.Buttons) != 0 || strings.Contains(bobSaw.Text, "bob@example.com") {
			t.Errorf("bob saw buttons %v and text:\n%s", bobSaw.Buttons, bobSaw.Text)
		}
	})
	t.Run("held and forwarded calls are audited with the approval", func(t *testing.T) {
		results := map[string]int{}
		for _, l := range env.auditLines(t) {
			if l["tool"] == "send_email" {
				results[fmt.Sprint(l["result"])]++
				if l["approval_id"] == nil {
					t.Errorf("audit line without approval_id: %v", l)
				}
			}
		}
		if results["approval_pending"] != 3 || results["ok"] != 1 {
			t.Errorf("audit results %v, want 3 approval_pending and 1 ok", results)
		}
		raw, _ := os.ReadFile(env.auditFile)
		if strings.Contains(string(raw), "quarterly") || strings.Contains(string(raw), "bob@example.com") {
			t.Errorf("the audit holds arguments")
		}
	})

	t.Run("the TypeScript SDK 1.x client reads the same answer", func(t *testing.T) {
		args := `{"to":"carol@example.com","subject":"from v1"}`
		r := runApprovalScript(t, dir, env.resource, "v1", args, `{"to":"carol@example.com","subject":"other"}`, func(url string) error {
			if _, err := alice.open(url); err != nil {
				return err
			}
			_, err := alice.decide(true)
			return err
		})
		if r.First.Mode != "url" || !strings.HasSuffix(r.First.URL, "/"+r.First.ElicitationID) || r.Retried != "sent to carol@example.com: from v1" ||
			r.Second.ElicitationID == "" || r.Other.ElicitationID == "" || r.Second.ElicitationID == r.First.ElicitationID {
			t.Errorf("v1: %+v", r)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t.Run("the Go SDK client gets the text answer; deny works", func(t *testing.T) {
		u := connectThroughGateway(t, ctx, env.resource, demoUser, demoPassword)
		call := func(args map[string]any) *mcp.CallToolResult {
			r, err := u.session.CallTool(ctx, &mcp.CallToolParams{Name: "delete_repo", Arguments: args})
			if err != nil {
				t.Fatalf("delete_repo: %v", err)
			}
			return r
		}
		text := func(r *mcp.CallToolResult) string { return r.Content[0].(*mcp.TextContent).Text }
		r := call(map[string]any{"name": "acme/site"})
		page := approvalURLPattern.FindString(text(r))
		if !r.IsError || page == "" || !strings.Contains(text(r), "and then try again") {
			t.Fatalf("first call: %+v %q", r, text(r))
		}
		if _, err := alice.open(page); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.decide(true); err != nil {
			t.Fatal(err)
		}
		// The approval is the AS's: it holds across a restart of the
		// gateway.
		env.restart()
		if r := call(map[string]any{"name": "acme/site"}); r.IsError || text(r) != "deleted acme/site" {
			t.Fatalf("after approval and a restart of the gateway: %q", text(r))
		}
		// Deny.
		r = call(map[string]any{"name": "acme/prod"})
		page = approvalURLPattern.FindString(text(r))
		if _, err := alice.open(page); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.decide(false); err != nil {
			t.Fatal(err)
		}
		if r := call(map[string]any{"name": "acme/prod"}); !r.IsError || !strings.Contains(text(r), "denied") {
			t.Fatalf("after denial: %q", text(r))
		}
		// The denial is spent: asked again, the call is held anew.
		if r := call(map[string]any{"name": "acme/prod"}); !r.IsError || approvalURLPattern.FindString(text(r)) == page {
			t.Fatalf("after the denial was reported: %q", text(r))
		}
		if calls := env.upstream.calls(t); countOf(calls, "delete_repo") != 1 {
			t.Errorf("upstream calls %v: want delete_repo once", calls)
		}
	})
	t.Run("an approval is for one client and one resource", func(t *testing.T) {
		first := connectThroughGateway(t, ctx, env.resource, demoUser, demoPassword)
		second := connectThroughGateway(t, ctx, env.resource, demoUser, demoPassword)
		if jwtClaims(t, first.token)["client_id"] == jwtClaims(t, second.token)["client_id"] {
			t.Fatal("the two connections share a client")
		}
		args := map[string]any{"name": "acme/shared"}
		call := func(u policyUser) (string, bool) {
			r, err := u.session.CallTool(ctx, &mcp.CallToolParams{Name: "delete_repo", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			return r.Content[0].(*mcp.TextContent).Text, r.IsError
		}
		text, _ := call(first)
		page := approvalURLPattern.FindString(text)
		if page == "" {
			t.Fatalf("not held: %q", text)
		}
		// The same person asks, for the same call, through a client of
		// another resource (the example MCP server): its own approval.
		other := connectThroughGateway(t, ctx, env.s.MCPURL, demoUser, demoPassword)
		ask := func(token string) map[string]any {
			body, _ := json.Marshal(map[string]any{"token": token, "tool": "delete_repo", "arguments": args, "ttl": 300})
			req, _ := http.NewRequest(http.MethodPost, env.s.Issuer+"/approvals", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.SetBasicAuth("mcpgateway", env.s.Env["MCPGATEWAY_CLIENT_SECRET"])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&m)
			if resp.StatusCode != 200 {
				t.Fatalf("approvals: %d %v", resp.StatusCode, m)
			}
			return m
		}
		if _, err := alice.open(page); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.decide(true); err != nil {
			t.Fatal(err)
		}
		if text, isErr := call(second); !isErr || approvalURLPattern.FindString(text) == page || approvalURLPattern.FindString(text) == "" {
			t.Errorf("another client's identical call: %q", text)
		}
		if m := ask(other.token); m["status"] != "pending" || strings.HasSuffix(page, "/"+fmt.Sprint(m["approval_id"])) {
			t.Errorf("the same call for another resource: %v (approved page %s)", m, page)
		}
		if text, isErr := call(first); isErr || text != "deleted acme/shared" {
			t.Errorf("the approved client's retry: %q", text)
		}
		if calls := env.upstream.calls(t); countOf(calls, "delete_repo") != 2 {
			t.Errorf("upstream calls %v: want delete_repo twice (acme/site, acme/shared)", calls)
		}
	})
}

// TestApprovalExpires: with approval.ttl 3s, a page left undecided past it
// can no longer be approved, and an approved call not retried within it
// is held again.
func TestApprovalExpires(t *testing.T) {
	env := startApprovalStack(t, "3s")
	alice := newPersonBrowser(t, demoUser, demoPassword)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u := connectThroughGateway(t, ctx, env.resource, demoUser, demoPassword)
	call := func() (string, bool) {
		r, err := u.session.CallTool(ctx, &mcp.CallToolParams{Name: "send_email", Arguments: map[string]any{"to": "bob@example.com"}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Content[0].(*mcp.TextContent).Text, r.IsError
	}
	text, _ := call()
	first := approvalURLPattern.FindString(text)
	if first == "" {
		t.Fatalf("not held: %q", text)
	}
	time.Sleep(4 * time.Second)
	p, err := alice.open(first)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Buttons) != 0 {
		t.Errorf("an expired approval offers %v", p.Buttons)
	}
	text, _ = call()
	second := approvalURLPattern.FindString(text)
	if second == "" || second == first {
		t.Fatalf("after expiry: %q (first %s)", text, first)
	}
	if _, err := alice.open(second); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.decide(true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	if text, isErr := call(); !isErr || approvalURLPattern.FindString(text) == "" {
		t.Errorf("an approved call retried after the ttl: %q", text)
	}
	if calls := env.upstream.calls(t); countOf(calls, "send_email") != 0 {
		t.Errorf("upstream ran %v", calls)
	}
}
