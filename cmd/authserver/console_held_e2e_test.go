package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/connections"
	"github.com/mcpauth/mcpauth/internal/testprovider"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/open"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
	"github.com/mcpauth/mcpauth/upstream"
)

// argumentValue is in the arguments of the held call alice was asked to
// approve: only she sees it, on the approval page, never the console.
const argumentValue = "hunter2-argument-value"

// held is what startConsoleWithHeld stored: alice's approval of a held
// tool call and her github connection, with the provider's tokens.
type held struct {
	store      storage.Store
	approval   string
	connTokens []string
	provider   *testprovider.Provider
}

// startConsoleWithHeld starts a server with the console on dsn (a new
// SQLite database when "") and a connection "github" at a test provider,
// then stores, as the server would, a pending approval of alice's (a
// call of send_email through demo-app) and alice's connected github
// account.
func startConsoleWithHeld(t *testing.T, dsn string) (issuer, consoleURL string, p *proc, h held) {
	t.Helper()
	ctx := context.Background()
	tp := testprovider.New(testprovider.Config{})
	srv := httptest.NewServer(tp.Handler())
	t.Cleanup(srv.Close)
	tp.Issuer = srv.URL
	dir := t.TempDir()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	issuer = "http://" + addr
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(dir, "a.db")
	}
	cfg := consoleConfig(t, issuer, addr, adminAddr, dsn) + fmt.Sprintf(`connections:
  - id: github
    authorization_endpoint: %s
    token_endpoint: %s
    revocation_endpoint: %s
    client_id: client
    client_secret: client-secret
    scopes: [repo]
    resource: https://api.github.example
    clients: [exchanger]
`, tp.AuthorizationEndpoint(), tp.TokenEndpoint(), tp.RevocationEndpoint())
	p = start(t, dir, issuer, testEnv, "--config", writeConfig(t, dir, cfg))

	st, err := open.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h = held{store: st, provider: tp, approval: "AAAAAAAAAAAAAAAAAAAAAA"}
	now := time.Now()
	if _, err := st.CreateApproval(ctx, &storage.Approval{ID: h.approval,
		ApprovalBinding: storage.ApprovalBinding{Subject: "alice", ClientID: "demo-app", Resource: "http://127.0.0.1:8080/mcp",
			Tool: "send_email", ArgsDigest: "sha256-3q2-7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		Arguments: []byte(`{"to":"bob@example.com","body":"` + argumentValue + `"}`), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	prov, err := connections.NewProvider(connections.Config{ID: "github", AuthorizationEndpoint: tp.AuthorizationEndpoint(), TokenEndpoint: tp.TokenEndpoint(),
		ClientID: "client", ClientSecret: "client-secret", Scopes: []string{"repo"}, Resource: "https://api.github.example", RedirectURL: issuer + "/connections/github/callback"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := connections.NewVault(connections.VaultConfig{Providers: []*connections.Provider{prov}, Store: st, Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	verifier := upstream.NewVerifier()
	u, _ := prov.AuthCodeURL(ctx, "s", verifier)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	tok, err := prov.Exchange(ctx, loc.Query().Get("code"), verifier)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Save(ctx, "alice", "github", tok); err != nil {
		t.Fatal(err)
	}
	h.connTokens = []string{tok.AccessToken, tok.RefreshToken}
	return issuer, "http://" + adminAddr + "/console", p, h
}

// The approvals and connections pages over plain HTTP: alice's approval
// and connection are listed, on their pages and on her person page,
// without the call's arguments or any token; revoking either refuses a
// missing or foreign CSRF token, asks for a confirmation, then deletes
// the record (the connection's tokens revoked at the provider) and writes
// the audit event under alice's name.
func TestConsoleApprovalsAndConnectionsOverHTTP(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) { consoleApprovalsAndConnections(t, "") })
	t.Run("PostgreSQL", func(t *testing.T) {
		dsn, _ := pgtest.Schema(t)
		consoleApprovalsAndConnections(t, dsn)
	})
}

func consoleApprovalsAndConnections(t *testing.T, dsn string) {
	_, consoleURL, p, h := startConsoleWithHeld(t, dsn)
	ctx := context.Background()
	alice, resp, page := consoleSignIn(t, consoleURL, "alice", alicePW)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<h1 id="title">Overview</h1>`) {
		t.Fatalf("alice: %d\n%s", resp.StatusCode, page)
	}
	if !regexp.MustCompile(`<strong id="pending-approvals">1</strong>`).MatchString(page) {
		t.Errorf("the overview does not count the pending approval:\n%s", page)
	}
	_, _, otherPage := consoleSignIn(t, consoleURL, "alice", alicePW)
	foreign := csrfOf(t, otherPage)

	secrets := map[string]string{"argument value": argumentValue, "provider access token": h.connTokens[0], "provider refresh token": h.connTokens[1],
		"server secret": testSecret, "provider client secret": "client-secret"}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, page, err := readPage(alice.Get(consoleURL + path))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %d\n%s", path, err, resp.StatusCode, page)
		}
		checkPageHeaders(t, path, resp.Header)
		for what, v := range secrets {
			if v != "" && strings.Contains(page, v) {
				t.Errorf("%s shows the %s", path, what)
			}
		}
		return resp, page
	}
	approvalRow := regexp.MustCompile(`(?s)<tr><td><a href="/console/person\?sub=alice">alice</a></td><td><a [^>]*>demo-app</a></td>\s*<td><code>http://127.0.0.1:8080/mcp</code></td><td><code>send_email</code></td><td><code class="digest"[^>]*>sha256-3q2-7wAAA…</code></td>\s*<td class="nowrap">pending</td>`)
	connRow := regexp.MustCompile(`(?s)<tr><td><a href="/console/person\?sub=alice">alice</a></td><td><code>github</code></td><td>repo</td>`)
	for _, path := range []string{"/approvals", "/approvals?user=alice", "/person?sub=alice"} {
		if _, page := get(path); !approvalRow.MatchString(page) {
			t.Errorf("%s does not list alice's approval:\n%s", path, page)
		}
	}
	if _, page := get("/approvals?user=bob"); approvalRow.MatchString(page) || !strings.Contains(page, "No approval.") {
		t.Errorf("bob's approvals list alice's:\n%s", page)
	}
	for _, path := range []string{"/connections", "/connections?user=alice", "/person?sub=alice"} {
		if _, page := get(path); !connRow.MatchString(page) {
			t.Errorf("%s does not list alice's connection:\n%s", path, page)
		}
	}
	if _, page := get("/connections?user=bob"); connRow.MatchString(page) || !strings.Contains(page, "No connection.") {
		t.Errorf("bob's connections list alice's:\n%s", page)
	}

	// A missing or foreign CSRF token is refused and changes nothing.
	for path, form := range map[string]url.Values{
		"/approvals/revoke":   {"id": {h.approval}, "confirm": {"yes"}},
		"/connections/revoke": {"sub": {"alice"}, "connection": {"github"}, "confirm": {"yes"}},
	} {
		for _, token := range []string{"", foreign} {
			f := url.Values{"csrf": {token}}
			for k, v := range form {
				f[k] = v
			}
			resp, page, err := readPage(alice.PostForm(consoleURL+path, f))
			if err != nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "CSRF") {
				t.Errorf("POST %s with csrf %q: %v %d\n%s", path, token, err, resp.StatusCode, page)
			}
		}
	}
	if _, err := h.store.GetApproval(ctx, h.approval); err != nil {
		t.Fatalf("a refused form revoked the approval: %v", err)
	}
	if cs, err := h.store.ListConnections(ctx, "alice"); err != nil || len(cs) != 1 {
		t.Fatalf("a refused form revoked the connection: %v %v", cs, err)
	}
	// A revocation of what is not there: not found, nothing written.
	csrf := csrfOf(t, page)
	if resp, page, _ := readPage(alice.PostForm(consoleURL+"/approvals/revoke", url.Values{"csrf": {csrf}, "id": {"nope"}, "confirm": {"yes"}})); resp.StatusCode != http.StatusNotFound {
		t.Errorf("revoking an unknown approval: %d\n%s", resp.StatusCode, page)
	}
	if resp, page, _ := readPage(alice.PostForm(consoleURL+"/connections/revoke", url.Values{"csrf": {csrf}, "sub": {"alice"}, "connection": {"slack"}, "confirm": {"yes"}})); resp.StatusCode != http.StatusNotFound {
		t.Errorf("revoking an unknown connection: %d\n%s", resp.StatusCode, page)
	}
	if resp, page, _ := readPage(alice.PostForm(consoleURL+"/connections/revoke", url.Values{"csrf": {csrf}, "sub": {"alice"}, "confirm": {"yes"}})); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("revoking without naming a connection: %d\n%s", resp.StatusCode, page)
	}
	if strings.Contains(p.stderr.String(), "event=admin.approval") || strings.Contains(p.stderr.String(), "event=admin.connections") {
		t.Fatalf("a refused form wrote an audit event:\n%s", p.stderr)
	}

	submit := func(resp *http.Response, page, marker string, want string) (*http.Response, string) {
		t.Helper()
		resp, page, err := postForm(alice, resp.Request.URL, page, marker, nil)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(page, want) {
			t.Fatalf("form %s: %v %d, want %q\n%s", marker, err, resp.StatusCode, want, page)
		}
		return resp, page
	}
	// The approval, from the approvals page: a confirmation, then gone.
	resp, page = get("/approvals")
	resp, page = submit(resp, page, `revoke-approval`, `id="confirm"`)
	if !strings.Contains(page, "approval "+h.approval+" (send_email)") {
		t.Errorf("the confirmation does not name the approval:\n%s", page)
	}
	if _, err := h.store.GetApproval(ctx, h.approval); err != nil {
		t.Fatalf("the approval went before the confirmation: %v", err)
	}
	submit(resp, page, `id="confirm"`, "Revoked approval "+h.approval+".")
	if _, err := h.store.GetApproval(ctx, h.approval); err != storage.ErrNotFound {
		t.Fatalf("the approval is still stored: %v", err)
	}
	// The connection, from alice's person page: back to it afterwards.
	resp, page = get("/person?sub=alice")
	resp, page = submit(resp, page, `revoke-connection`, `id="confirm"`)
	if cs, _ := h.store.ListConnections(ctx, "alice"); len(cs) != 1 {
		t.Fatal("the connection went before the confirmation")
	}
	_, page = submit(resp, page, `id="confirm"`, "Revoked 1 connection(s) of alice.")
	if !strings.Contains(page, `href="/console/person?sub=alice" id="next"`) {
		t.Errorf("no way back to alice's page:\n%s", page)
	}
	if cs, err := h.store.ListConnections(ctx, "alice"); err != nil || len(cs) != 0 {
		t.Fatalf("the connection is still stored: %v %v", cs, err)
	}
	if r := h.provider.Revoked(); len(r) != 1 || r[0] != h.connTokens[1] {
		t.Errorf("revoked at the provider: %d token(s)", len(r))
	}
	_, page = get("/person?sub=alice")
	if approvalRow.MatchString(page) || connRow.MatchString(page) {
		t.Errorf("alice's page still lists what was revoked:\n%s", page)
	}
	for _, ev := range []string{"admin.approval.revoked", "admin.connections.revoked"} {
		if !regexp.MustCompile(`event=` + regexp.QuoteMeta(ev) + `[^\n]*admin_client=mcpauth-console admin_subject=alice`).MatchString(p.stderr.String()) {
			t.Errorf("no audit line %s by alice through the console:\n%s", ev, p.stderr)
		}
	}
	for what, v := range secrets {
		if v != "" && v != testSecret && strings.Contains(p.stderr.String(), v) {
			t.Errorf("the log shows the %s", what)
		}
	}
}
