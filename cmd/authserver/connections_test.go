package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/connections"
	"github.com/mcpauth/mcpauth/internal/testprovider"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
	"github.com/mcpauth/mcpauth/upstream"
)

// connectionsConfig is a configuration on storage with a connection
// "github" at the test provider tp, released to gateway.
func connectionsConfig(t *testing.T, storage string, tp *testprovider.Provider) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "authserver.yaml")
	text := fmt.Sprintf(`issuer: http://127.0.0.1:1
storage: %s
secret: ${AUTHSERVER_SECRET}
resources:
  - uri: http://127.0.0.1:8080/mcp
    scopes: [mcp:tools]
clients:
  - id: gateway
    secret: gateway-secret-0123456789
    resources: [http://127.0.0.1:8080/mcp]
connections:
  - id: github
    authorization_endpoint: %s
    token_endpoint: %s
    revocation_endpoint: %s
    client_id: client
    client_secret: client-secret
    scopes: [repo]
    resource: https://api.github.example
    clients: [gateway]
log:
  level: info
`, storage, tp.AuthorizationEndpoint(), tp.TokenEndpoint(), tp.RevocationEndpoint())
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// connectionCommands drives `connections list|revoke` on the configured
// storage: ada and bob connected github, and ada has a record of a
// connection "gone" that the file no longer configures.
func connectionCommands(t *testing.T, storageDSN string) {
	const secret = "operator-secret-operator-secret-0123456"
	ctx := context.Background()
	tp := testprovider.New(testprovider.Config{})
	srv := httptest.NewServer(tp.Handler())
	t.Cleanup(srv.Close)
	tp.Issuer = srv.URL
	cfgPath := connectionsConfig(t, storageDSN, tp)
	cfg := loadTestConfig(t, cfgPath, secret)
	st, err := openStore(ctx, cfg, true, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := connections.NewProvider(connections.Config{ID: "github", AuthorizationEndpoint: tp.AuthorizationEndpoint(), TokenEndpoint: tp.TokenEndpoint(),
		ClientID: "client", ClientSecret: "client-secret", Resource: "https://api.github.example", RedirectURL: "http://127.0.0.1:1/connections/github/callback"})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := connections.NewProvider(connections.Config{ID: "gone", AuthorizationEndpoint: tp.AuthorizationEndpoint(), TokenEndpoint: tp.TokenEndpoint(),
		ClientID: "client", ClientSecret: "client-secret", Resource: "https://api.gone.example", RedirectURL: "http://127.0.0.1:1/connections/gone/callback"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := connections.NewVault(connections.VaultConfig{Providers: []*connections.Provider{p, gone}, Store: st, Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordLogin(ctx, &storage.User{Subject: "ada", Name: "Ada"}); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, k := range [][2]string{{"ada", "github"}, {"bob", "github"}, {"ada", "gone"}} {
		prov := p
		if k[1] == "gone" {
			prov = gone
		}
		verifier := upstream.NewVerifier()
		u, _ := prov.AuthCodeURL(ctx, "s", verifier)
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
		if err := v.Save(ctx, k[0], k[1], tok); err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok.AccessToken, tok.RefreshToken)
	}

	var cs []ops.Connection
	out := mustCLI(t, secret, "connections", "list", "--config", cfgPath, "--format", "json")
	if err := json.Unmarshal([]byte(out), &cs); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(cs) != 3 || cs[0].Subject != "ada" || cs[0].Connection != "github" || !cs[0].Configured ||
		cs[1].Connection != "gone" || cs[1].Configured || cs[2].Subject != "bob" {
		t.Fatalf("connections list: %+v", cs)
	}
	table := mustCLI(t, secret, "connections", "list", "--user", "bob", "--config", cfgPath)
	if !strings.HasPrefix(table, "SUBJECT") || strings.Count(table, "\n") != 2 || !strings.Contains(table, "github") {
		t.Fatalf("connections list --user bob:\n%s", table)
	}
	for _, text := range []string{out, table, mustCLI(t, secret, "users", "show", "ada", "--config", cfgPath, "--format", "json")} {
		for _, tok := range tokens {
			if strings.Contains(text, tok) {
				t.Fatal("a provider token is printed")
			}
		}
	}

	if code, _, errOut := cli(t, secret, "connections", "revoke", "--config", cfgPath); code != 2 || !strings.Contains(errOut, "--user") {
		t.Fatalf("revoke without --user: %d %s", code, errOut)
	}
	if code, _, errOut := cli(t, secret, "connections", "revoke", "--user", "bob", "--connection", "slack", "--config", cfgPath); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("revoke of a connection bob has not: %d %s", code, errOut)
	}
	code, out, errOut := cli(t, secret, "connections", "revoke", "--user", "ada", "--config", cfgPath)
	if code != 0 || !strings.HasPrefix(out, "revoked 2 connection(s)") {
		t.Fatalf("revoke --user ada: %d %s %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "admin.connections.revoked") || !strings.Contains(errOut, "admin_client=cli") {
		t.Fatalf("no audit event:\n%s", errOut)
	}
	for _, tok := range tokens {
		if strings.Contains(errOut, tok) {
			t.Fatal("a provider token is in the log")
		}
	}
	// The configured connection was revoked at its provider; the one no
	// longer configured was only deleted.
	if r := tp.Revoked(); len(r) != 1 || r[0] != tokens[1] {
		t.Fatalf("revoked at the provider: %d", len(r))
	}
	left, err := st.ListConnections(ctx, "")
	if err != nil || len(left) != 1 || left[0].Subject != "bob" {
		t.Fatalf("left %+v %v", left, err)
	}
}

func TestConnectionCommandsOnSQLite(t *testing.T) {
	connectionCommands(t, "sqlite:"+filepath.Join(t.TempDir(), "as.db"))
}

func TestConnectionCommandsOnPostgreSQL(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	connectionCommands(t, dsn)
}
