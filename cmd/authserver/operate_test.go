package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

// operatorConfig is a configuration on storage with one configured client.
func operatorConfig(t *testing.T, storage string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "authserver.yaml")
	text := fmt.Sprintf(`issuer: http://127.0.0.1:1
storage: %s
secret: ${AUTHSERVER_SECRET}
resources:
  - uri: http://127.0.0.1:8080/mcp
    scopes: [mcp:tools]
clients:
  - id: ci-bot
    secret: ci-bot-secret-0123456789
log:
  level: error
`, storage)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func cli(t *testing.T, secret string, args ...string) (int, string, string) {
	t.Helper()
	return runCLI(t, "", map[string]string{"AUTHSERVER_SECRET": secret}, args...)
}

func mustCLI(t *testing.T, secret string, args ...string) string {
	t.Helper()
	code, out, errOut := cli(t, secret, args...)
	if code != 0 {
		t.Fatalf("authserver %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// operatorCommands drives clients and keys subcommands against the
// configured storage, as an operator would, in both output formats.
func operatorCommands(t *testing.T, cfg string) {
	const secret = "operator-secret-operator-secret-0123456"

	// clients create: a confidential client gets a secret shown once.
	var created ops.CreatedClient
	out := mustCLI(t, secret, "clients", "create", "--config", cfg, "--name", "Docs App",
		"--redirect-uri", "https://docs.example/cb", "--redirect-uri", "http://127.0.0.1/cb", "--format", "json")
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("clients create --format json: %v\n%s", err, out)
	}
	if created.ID == "" || len(created.Secret) < 32 || created.Source != "admin" || created.Public ||
		strings.Join(created.RedirectURIs, " ") != "https://docs.example/cb http://127.0.0.1/cb" {
		t.Fatalf("created client: %+v", created)
	}
	out = mustCLI(t, secret, "clients", "create", "--config", cfg, "--name", "CLI tool", "--redirect-uri", "http://127.0.0.1/callback", "--public")
	if !strings.Contains(out, "public:") || !strings.Contains(out, "true") || strings.Contains(out, "client_secret:") {
		t.Fatalf("public client create (table):\n%s", out)
	}

	// A bad redirect URI is refused with the reason, nothing stored.
	code, _, errOut := cli(t, secret, "clients", "create", "--config", cfg, "--name", "Bad", "--redirect-uri", "https://bad.example/cb#frag")
	if code != 1 || !strings.Contains(errOut, "fragment") {
		t.Fatalf("bad redirect URI: exit %d, %s", code, errOut)
	}
	code, _, errOut = cli(t, secret, "clients", "create", "--config", cfg, "--redirect-uri", "https://docs.example/cb")
	if code != 2 || !strings.Contains(errOut, "--name") {
		t.Fatalf("create without --name: exit %d, %s", code, errOut)
	}

	// clients list: the configured client, then the two stored ones.
	var listed []ops.Client
	out = mustCLI(t, secret, "clients", "list", "--config", cfg, "--format", "json")
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 3 || listed[0].ID != "ci-bot" || listed[0].Source != "config" {
		t.Fatalf("clients list: %+v", listed)
	}
	table := mustCLI(t, secret, "clients", "list", "--config", cfg)
	if !strings.HasPrefix(table, "CLIENT_ID") || !strings.Contains(table, created.ID) || !strings.Contains(table, "Docs App") {
		t.Fatalf("clients list (table):\n%s", table)
	}
	if strings.Contains(table, created.Secret) || strings.Contains(out, created.Secret) {
		t.Fatal("clients list shows a client secret")
	}

	// clients show
	var shown ops.Client
	out = mustCLI(t, secret, "clients", "show", created.ID, "--config", cfg, "--format", "json")
	if err := json.Unmarshal([]byte(out), &shown); err != nil || shown.ID != created.ID || shown.Name != "Docs App" {
		t.Fatalf("clients show: %v %+v", err, shown)
	}
	code, _, errOut = cli(t, secret, "clients", "show", "nope", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("show unknown: exit %d %s", code, errOut)
	}

	// clients delete: stored clients go; configured ones are refused.
	var deleted map[string]string
	out = mustCLI(t, secret, "clients", "delete", created.ID, "--config", cfg, "--format", "json")
	if err := json.Unmarshal([]byte(out), &deleted); err != nil || deleted["deleted"] != created.ID {
		t.Fatalf("clients delete --format json: %v %s", err, out)
	}
	code, _, errOut = cli(t, secret, "clients", "show", created.ID, "--config", cfg)
	if code != 1 {
		t.Fatalf("deleted client still shown: exit %d %s", code, errOut)
	}
	code, _, errOut = cli(t, secret, "clients", "delete", "ci-bot", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "configuration file") {
		t.Fatalf("delete configured client: exit %d %s", code, errOut)
	}

	// grants: one client-credentials grant, issued by the server built on
	// this storage, listed and revoked from the command line.
	issueClientCredentials(t, cfg, secret)
	var grants []as.Grant
	out = mustCLI(t, secret, "grants", "list", "--client", "ci-bot", "--config", cfg, "--format", "json")
	if err := json.Unmarshal([]byte(out), &grants); err != nil || len(grants) != 1 || grants[0].Client != "ci-bot" || grants[0].ID == "" {
		t.Fatalf("grants list: %v %s", err, out)
	}
	table = mustCLI(t, secret, "grants", "list", "--config", cfg)
	if !strings.HasPrefix(table, "GRANT_ID") || !strings.Contains(table, grants[0].ID) {
		t.Fatalf("grants list (table):\n%s", table)
	}
	if code, _, errOut := cli(t, secret, "grants", "revoke", "--config", cfg); code != 2 || !strings.Contains(errOut, "--user, --client or --grant") {
		t.Fatalf("grants revoke without a filter: exit %d %s", code, errOut)
	}
	out = mustCLI(t, secret, "grants", "revoke", "--grant", grants[0].ID, "--config", cfg)
	if !strings.Contains(out, "revoked 1 grant") {
		t.Fatalf("grants revoke: %s", out)
	}
	out = mustCLI(t, secret, "grants", "list", "--config", cfg, "--format", "json")
	if strings.TrimSpace(out) != "[]" {
		t.Fatalf("grants after revoke: %s", out)
	}

	// keys: rotate twice, list, retire, prune.
	var rotated map[string]string
	out = mustCLI(t, secret, "keys", "rotate", "--config", cfg, "--format", "json") // the server above made the first key
	if err := json.Unmarshal([]byte(out), &rotated); err != nil || rotated["signing_kid"] == "" || rotated["alg"] != "ES256" {
		t.Fatalf("keys rotate --format json: %v %s", err, out)
	}
	var keys []as.KeyInfo
	out = mustCLI(t, secret, "keys", "list", "--config", cfg, "--format", "json")
	if err := json.Unmarshal([]byte(out), &keys); err != nil || len(keys) != 2 || !keys[0].Signing || keys[1].Signing || keys[1].RetiredAt == nil {
		t.Fatalf("keys list: %v %+v", err, keys)
	}
	// A kid is a base64url thumbprint and may start with '-': after --
	// it is an argument whatever it looks like.
	out = mustCLI(t, secret, "keys", "retire", "--config", cfg, "--", keys[0].ID)
	if !strings.Contains(out, "retired "+keys[0].ID) {
		t.Fatalf("keys retire: %s", out)
	}
	table = mustCLI(t, secret, "keys", "list", "--config", cfg)
	if strings.Count(table, "\n") != 4 || !strings.HasPrefix(table, "KID") {
		t.Fatalf("keys list (table) after retire, want 3 keys:\n%s", table)
	}

	// A key written under another secret is not loadable; with the wrong
	// secret nothing is pruned, with the right one it goes.
	const wrong = "wrong-secret-wrong-secret-wrong-secret-0"
	code, _, errOut = cli(t, wrong, "keys", "rotate", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "wrong secret") {
		t.Fatalf("keys rotate with the wrong secret: exit %d %s", code, errOut)
	}
	out = mustCLI(t, wrong, "keys", "list", "--config", cfg, "--format", "json")
	if err := json.Unmarshal([]byte(out), &keys); err != nil || len(keys) != 3 || keys[0].Loadable {
		t.Fatalf("keys list with the wrong secret: %v %+v", err, keys)
	}
	code, _, errOut = cli(t, wrong, "keys", "prune", "--unloadable", "--config", cfg)
	if code != 1 || !strings.Contains(errOut, "wrong secret") {
		t.Fatalf("prune --unloadable with the wrong secret: exit %d %s", code, errOut)
	}
	plantForeignKey(t, cfg, wrong)
	var pruned struct{ Deleted []string }
	out = mustCLI(t, secret, "keys", "prune", "--unloadable", "--config", cfg, "--format", "json")
	if err := json.Unmarshal([]byte(out), &pruned); err != nil || len(pruned.Deleted) != 1 {
		t.Fatalf("prune --unloadable: %v %s", err, out)
	}
	out = mustCLI(t, secret, "keys", "list", "--config", cfg, "--format", "json")
	if err := json.Unmarshal([]byte(out), &keys); err != nil || len(keys) != 3 {
		t.Fatalf("keys after prune: %v %+v", err, keys)
	}
	for _, k := range keys {
		if !k.Loadable || k.ID == pruned.Deleted[0] {
			t.Fatalf("keys after prune: %+v", keys)
		}
	}
}

// issueClientCredentials gets one token for ci-bot from the server as serve
// builds it on cfg's storage, over real HTTP.
func issueClientCredentials(t *testing.T, cfgPath, secret string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := loadTestConfig(t, cfgPath, secret)
	s, err := build(ctx, cfg, true, discardLogger(), env{lookup: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.store.Close()
	srv := httptest.NewServer(s.handler)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/token", strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("ci-bot", "ci-bot-secret-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("client credentials: %d", resp.StatusCode)
	}
}

// plantForeignKey stores a key sealed under wrong, as an instance started
// with that secret did before it refused to.
func plantForeignKey(t *testing.T, cfgPath, wrong string) {
	t.Helper()
	cfg := loadTestConfig(t, cfgPath, wrong)
	st, err := openStore(context.Background(), cfg, false, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// A fresh store under the wrong secret: RotateKey refuses on the shared
	// one, so seal on a scratch one and copy the record over.
	scratch := loadTestConfig(t, cfgPath, wrong)
	scratch.Storage = "sqlite:" + filepath.Join(t.TempDir(), "scratch.db")
	sst, err := openStore(context.Background(), scratch, true, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer sst.Close()
	if _, err := as.RotateKey(context.Background(), sst, []byte(wrong), "ES256"); err != nil {
		t.Fatal(err)
	}
	recs, err := sst.ListKeys(context.Background())
	if err != nil || len(recs) != 1 {
		t.Fatal(err)
	}
	if err := st.CreateKey(context.Background(), &recs[0]); err != nil {
		t.Fatal(err)
	}
}

func TestOperatorCommandsOnSQLite(t *testing.T) {
	operatorCommands(t, operatorConfig(t, "sqlite:"+filepath.Join(t.TempDir(), "op.db")))
}

func TestOperatorCommandsOnPostgreSQL(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	operatorCommands(t, operatorConfig(t, dsn))
}

func loadTestConfig(t *testing.T, path, secret string) *config.Config {
	t.Helper()
	cfg, err := config.Load(path, func(k string) (string, bool) {
		switch k {
		case "AUTHSERVER_SECRET":
			return secret, true
		case "CI_BOT_SECRET":
			return botSecret, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// `<subcommand> --help` prints that subcommand's usage, not the global one.
func TestSubcommandHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"serve", "--help"}, []string{"authserver [--config FILE] serve", "-no-migrate"}},
		{[]string{"clients", "create", "--help"}, []string{"clients create", "-redirect-uri", "-public", "-name", "-format"}},
		{[]string{"clients", "--help"}, []string{"clients <subcommand>", "list", "show ID", "create", "delete ID"}},
		{[]string{"keys", "prune", "-h"}, []string{"keys prune", "-unloadable"}},
		{[]string{"--config", "x.yaml", "keys", "retire", "--help"}, []string{"keys retire [flags] KID"}},
		{[]string{"migrate", "status", "--help"}, []string{"migrate status"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, "", nil, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("usage lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "commands:\n  serve [--no-migrate]") {
				t.Errorf("printed the global usage:\n%s", out)
			}
		})
	}
}

func TestEndpointClassification(t *testing.T) {
	for _, issuer := range []string{"https://auth.example.com", "https://auth.example.com/tenant"} {
		cfg := &config.Config{Issuer: issuer}
		classify := classifier(cfg)
		base := strings.TrimPrefix(issuer, "https://auth.example.com")
		for path, want := range map[string]string{
			"/authorize": "authorize", "/token": "token", "/introspect": "introspect", "/revoke": "revoke",
			"/jwks.json": "jwks", "/register": "register", "/register/mcp_x": "register_client",
			"/consents": "consents", "/logout": "logout", "/ui/style.css": "ui", "/healthz": "health",
			"/livez": "health", "/readyz": "health", "/statuslists/1": "status_list", "/statuslists": "status_list",
			"/approvals": "approvals", "/approve/AAAAAAAAAAAAAAAAAAAAAA": "approve",
			"/nowhere": "other",
		} {
			if got := classify(base + path).String(); got != want {
				t.Errorf("%s%s: %s, want %s", issuer, path, got, want)
			}
		}
		if got := classify("/.well-known/oauth-authorization-server" + base).String(); got != "metadata" {
			t.Errorf("metadata: %s", got)
		}
	}
	if adminClassifier("/metrics").String() != "metrics" || adminClassifier("/admin/v1/keys").String() != "admin" || adminClassifier("/x").String() != "other" {
		t.Error("admin listener paths")
	}
}
