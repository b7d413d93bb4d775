package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2/clientcredentials"
)

// A single configured resource stays the default when the admin API adds
// its own resource: an admin client asking for a token without `resource`
// gets one for the configured resource, not invalid_target.
func TestSingleResourceStaysDefaultWithAdminAPI(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, `issuer: http://127.0.0.1:9000
listen: 127.0.0.1:9000
storage: sqlite:`+filepath.Join(dir, "a.db")+`
secret: ${AUTHSERVER_SECRET}
resources:
  - uri: http://127.0.0.1:8080/mcp
    scopes: [mcp:tools]
clients:
  - id: ci-bot
    secret: ${CI_BOT_SECRET}
    grant_types: [client_credentials]
admin:
  listen: 127.0.0.1:9001
  clients: [ci-bot]
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := loadTestConfig(t, cfgPath, strings.Repeat("k3y-m4t3r1al-", 4))
	s, err := build(ctx, cfg, true, discardLogger(), env{lookup: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.store.Close()
	srv := httptest.NewServer(s.handler)
	defer srv.Close()

	cc := clientcredentials.Config{ClientID: "ci-bot", ClientSecret: botSecret, TokenURL: srv.URL + "/token"}
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatalf("token without resource: %v", err)
	}
	parsed, err := jwt.ParseSigned(tok.AccessToken, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		t.Fatal(err)
	}
	var claims jwt.Claims
	if err := parsed.UnsafeClaimsWithoutVerification(&claims); err != nil {
		t.Fatal(err)
	}
	if len(claims.Audience) != 1 || claims.Audience[0] != "http://127.0.0.1:8080/mcp" {
		t.Fatalf("aud = %v, want the configured resource", claims.Audience)
	}
}
