package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/internal/password"
)

// TestApprovalsThroughTheServedBinary runs the approval of a held tool
// call against `authserver serve` on SQLite: the gateway client registers
// the call, the person approves it on the served page, the retry is
// approved once, and an approval given before a restart is used after it.
func TestApprovalsThroughTheServedBinary(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	issuer := "http://" + addr
	hash, err := password.Hash("alice-password-1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, dir, fmt.Sprintf(`issuer: %s
listen: %s
storage: sqlite:%s
secret: ${AUTHSERVER_SECRET}
resources:
  - uri: http://127.0.0.1:8080/mcp
    name: Example MCP server
    scopes: [mcp:tools]
    approval_clients: [gateway]
clients:
  - id: demo-app
    public: true
    redirect_uris: [https://app.example/cb]
  - id: gateway
    secret: ${CI_BOT_SECRET}
    grant_types: [client_credentials]
users:
  - username: alice
    password_hash: '%s'
`, issuer, addr, filepath.Join(dir, "auth.db"), hash))
	p := start(t, dir, issuer, testEnv, "--config", cfg)
	tok := codeFlowThroughForms(t, issuer, "alice", "alice-password-1")
	ask := func(args map[string]any) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"token": tok.AccessToken, "tool": "send_email", "arguments": args, "ttl": 600})
		req, _ := http.NewRequest(http.MethodPost, issuer+"/approvals", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("gateway", botSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("approvals: %d %v %v", resp.StatusCode, m, err)
		}
		return m
	}
	args := map[string]any{"to": "bob@example.com", "body": "<i>hi</i>"}
	m := ask(args)
	if m["status"] != "pending" || !strings.HasPrefix(m["approval_uri"].(string), issuer+"/approve/") {
		t.Fatalf("first ask: %v", m)
	}
	id := m["approval_id"].(string)

	// The person signs in on the page the answer names and approves.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	page := func(resp *http.Response, err error) (string, url.Values, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		f := url.Values{}
		fm := formRE.FindStringSubmatch(string(b))
		if fm == nil {
			return string(b), f, ""
		}
		for _, h := range hiddenInput.FindAllStringSubmatch(fm[2], -1) {
			f.Set(h[1], html.UnescapeString(h[2]))
		}
		action := html.UnescapeString(fm[1])
		if strings.HasPrefix(action, "/") {
			action = issuer + action
		}
		return string(b), f, action
	}
	_, f, action := page(c.Get(m["approval_uri"].(string)))
	f.Set("username", "alice")
	f.Set("password", "alice-password-1")
	body, f, action := page(c.PostForm(action, f))
	if !strings.Contains(body, "Approve this tool call?") || !strings.Contains(body, "Example MCP server") || !strings.Contains(body, "&lt;i&gt;hi&lt;/i&gt;") {
		t.Fatalf("approval page:\n%s", body)
	}
	f.Set("action", "approve")
	if body, _, _ = page(c.PostForm(action, f)); !strings.Contains(body, "try again") {
		t.Fatalf("after approving:\n%s", body)
	}
	if m := ask(args); m["status"] != "approved" || m["approval_id"] != id {
		t.Fatalf("retry: %v", m)
	}
	if m := ask(args); m["status"] != "pending" || m["approval_id"] == id {
		t.Fatalf("second retry: %v", m)
	}

	// Approved before a restart, used after it.
	other := map[string]any{"to": "carol@example.com"}
	id2 := ask(other)["approval_id"].(string)
	_, f, action = page(c.Get(issuer + "/approve/" + id2))
	f.Set("action", "approve")
	page(c.PostForm(action, f))
	p.stop(t)
	logs := p.stderr.String()
	if !strings.Contains(logs, "approval.requested") || !strings.Contains(logs, "approval.approved") || !strings.Contains(logs, "approval.used") {
		t.Fatalf("audit events missing from the log:\n%s", logs)
	}
	p = start(t, dir, issuer, testEnv, "--config", cfg)
	defer p.stop(t)
	if m := ask(other); m["status"] != "approved" || m["approval_id"] != id2 {
		t.Fatalf("after restart: %v", m)
	}
	logs += p.stderr.String()
	for _, secret := range []string{"carol@example.com", "bob@example.com", tok.AccessToken} {
		if strings.Contains(logs, secret) {
			t.Fatalf("the server's log holds %q", secret)
		}
	}
}
