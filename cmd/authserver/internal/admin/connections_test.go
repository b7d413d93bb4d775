package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/connections"
	"github.com/mcpauth/mcpauth/internal/testprovider"
	"github.com/mcpauth/mcpauth/upstream"
)

// seedConnections connects ada and bob to "github" at a test provider
// through its code flow, and gives the fixture's Ops the vault.
func seedConnections(t *testing.T, f *fixture) (*testprovider.Provider, map[string]*connections.Token) {
	t.Helper()
	tp := testprovider.New(testprovider.Config{})
	srv := httptest.NewServer(tp.Handler())
	t.Cleanup(srv.Close)
	tp.Issuer = srv.URL
	p, err := connections.NewProvider(connections.Config{ID: "github", AuthorizationEndpoint: tp.AuthorizationEndpoint(),
		TokenEndpoint: tp.TokenEndpoint(), RevocationEndpoint: tp.RevocationEndpoint(), ClientID: "client", ClientSecret: "client-secret",
		Resource: "https://api.github.example", Clients: []string{"gateway"}, RedirectURL: "https://as.example/connections/github/callback"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := connections.NewVault(connections.VaultConfig{Providers: []*connections.Provider{p}, Store: f.store, Secret: []byte(testSecret)})
	if err != nil {
		t.Fatal(err)
	}
	f.ops.Connections = v
	toks := map[string]*connections.Token{}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, who := range []string{"ada", "bob"} {
		verifier := upstream.NewVerifier()
		u, _ := p.AuthCodeURL(context.Background(), "s", verifier)
		resp, err := noRedirect.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		tok, err := p.Exchange(context.Background(), loc.Query().Get("code"), verifier)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Save(context.Background(), who, "github", tok); err != nil {
			t.Fatal(err)
		}
		toks[who] = tok
	}
	return tp, toks
}

func TestAdminConnectionsAPI(t *testing.T) {
	f := start(t)
	tp, toks := seedConnections(t, f)
	tok := f.token(t, "ops-bot", f.issuer+"/admin", "admin")

	status, _, body := call(t, "GET", f.adminURL+"connections", tok, "")
	list, _ := body["connections"].([]any)
	if status != 200 || len(list) != 2 {
		t.Fatalf("list: %d %v", status, body)
	}
	first := list[0].(map[string]any)
	if first["subject"] != "ada" || first["connection"] != "github" || first["configured"] != true || first["needs_reconnect"] != false {
		t.Fatalf("first %v", first)
	}
	status, _, body = call(t, "GET", f.adminURL+"connections?user=bob", tok, "")
	if list, _ := body["connections"].([]any); status != 200 || len(list) != 1 {
		t.Fatalf("bob's: %d %v", status, body)
	}

	if status, _, _ := call(t, "DELETE", f.adminURL+"connections", tok, ""); status != http.StatusBadRequest {
		t.Fatalf("revoke without a user: %d", status)
	}
	if status, _, _ := call(t, "DELETE", f.adminURL+"connections?user=ada&connection=slack", tok, ""); status != http.StatusNotFound {
		t.Fatalf("revoke of a connection ada has not: %d", status)
	}
	stranger := f.token(t, "stranger", f.issuer+"/admin", "admin")
	if status, _, _ := call(t, "DELETE", f.adminURL+"connections?user=ada", stranger, ""); status != http.StatusForbidden {
		t.Fatalf("a client not in admin.clients: %d", status)
	}
	status, _, body = call(t, "DELETE", f.adminURL+"connections?user=ada&connection=github", tok, "")
	if revoked, _ := body["revoked"].([]any); status != 200 || len(revoked) != 1 {
		t.Fatalf("revoke: %d %v", status, body)
	}
	if _, err := f.ops.Connections.(*connections.Vault).Token(context.Background(), "ada", "github"); err != connections.ErrNotConnected {
		t.Fatalf("ada's token after revoke: %v", err)
	}
	if tp.Active(toks["ada"].AccessToken) || !tp.Active(toks["bob"].AccessToken) {
		t.Fatal("revocation at the provider did not end ada's grant alone")
	}
	audit := f.audit.String()
	if !strings.Contains(audit, "event=admin.connections.revoked admin_client=ops-bot sub=ada connection=github") {
		t.Fatalf("audit:\n%s", audit)
	}
	for _, tk := range toks {
		if strings.Contains(audit, tk.AccessToken) || strings.Contains(audit, tk.RefreshToken) {
			t.Fatal("a provider token is in the audit log")
		}
	}
}
