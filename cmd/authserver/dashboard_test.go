package main

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/deploy/grafana"
)

// The running server's /metrics (the admin listener) holds every series
// the authorization server's Grafana dashboard queries, with every label
// it selects or groups by, once a token was issued and one refused.
func TestDashboardQueriesWhatTheServerExports(t *testing.T) {
	dir := t.TempDir()
	addr, adminAddr := freeAddr(t), freeAddr(t)
	issuer := "http://" + addr
	cfgPath := writeConfig(t, dir, adminConfig(t, issuer, addr, adminAddr, "sqlite:"+filepath.Join(dir, "a.db"), "ops-bot"))
	start(t, dir, issuer, testEnv, "--config", cfgPath)
	md := discover(t, issuer)
	tokenFor(t, md, "ops-bot", opsSecret, issuer+"/admin", "admin")
	if _, err := clientToken(t, md, "ops-bot", "wrong-secret", url.Values{"resource": {issuer + "/admin"}}, "admin"); !isOAuthError(err, "invalid_client") {
		t.Fatalf("a wrong secret: %v", err)
	}

	resp, err := http.Get("http://" + adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	if err := grafana.Check(grafana.AuthServer, strings.NewReader(string(body))); err != nil {
		t.Error(err)
	}
}
