package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"
)

// TestRevokedTokenIsRefusedWithinTheStatusMaxAge runs the real
// authorization server and this MCP server over loopback HTTP: a token the
// AS revokes (RFC 7009) is refused by the MCP server, which verifies tokens
// locally, once its cached Token Status List is older than
// --status-max-age, without any introspection call.
func TestRevokedTokenIsRefusedWithinTheStatusMaxAge(t *testing.T) {
	ctx := context.Background()
	asSrv, mcpSrv := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	resource := "http://" + mcpSrv.Listener.Addr().String() + "/mcp"
	issuer := startAS(t, asSrv, resource)
	const maxAge = 2 * time.Second
	serveMCP(t, mcpSrv, "--resource", resource, "--issuer", issuer, "--status-max-age", maxAge.String())

	cc := clientcredentials.Config{ClientID: "ci-bot", ClientSecret: botSecret, TokenURL: issuer + "/token",
		Scopes: []string{ScopeTools}, EndpointParams: url.Values{"resource": {resource}}}
	tok, err := cc.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	initialize := func() (int, string) {
		req, _ := http.NewRequest(http.MethodPost, resource, strings.NewReader(initializeBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
	}
	if status, ch := initialize(); status != http.StatusOK {
		t.Fatalf("initialize with a valid token: %d %q", status, ch)
	}

	form := url.Values{"token": {tok.AccessToken}}
	req, _ := http.NewRequest(http.MethodPost, issuer+"/revoke", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("ci-bot", botSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	revokedAt := time.Now()

	// The MCP server's list is at most maxAge old and the AS caches its own
	// for a second; after that (with room for a slow machine) the token
	// must be refused with invalid_token.
	deadline := revokedAt.Add(maxAge + time.Second + 10*time.Second)
	for {
		status, ch := initialize()
		if status == http.StatusUnauthorized && strings.Contains(ch, `error="invalid_token"`) {
			break
		}
		if status != http.StatusOK {
			t.Fatalf("revoked token: %d %q, want 200 until the list is refreshed, then 401 invalid_token", status, ch)
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoked token still accepted %s after its revocation (status max age %s)", time.Since(revokedAt), maxAge)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
