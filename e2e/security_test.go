package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestSessionsBelongToTheirUser: bob, with a valid token of his own, cannot
// use alice's MCP session (rsmiddleware.SessionBinding answers 404, as for an
// unknown session), while alice still can.
func TestSessionsBelongToTheirUser(t *testing.T) {
	s := startStack(t, stackOptions{})
	alice, aliceTokens := connectAs(t, s, demoUser, demoPassword)
	_, bobTokens := connectAs(t, s, "bob", "bob-demo-password")
	last := func(ts *tokenSources) string { all := ts.all(); return all[len(all)-1].AccessToken }

	call := func(token string) int {
		body := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
		req, _ := http.NewRequest(http.MethodPost, s.MCPURL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", alice.ID())
		req.Header.Set("Mcp-Protocol-Version", alice.InitializeResult().ProtocolVersion)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := call(last(aliceTokens)); got != http.StatusOK {
		t.Fatalf("alice's own raw call on her session: %d, want 200 (the request itself is wrong)", got)
	}
	if got := call(last(bobTokens)); got != http.StatusNotFound {
		t.Errorf("bob on alice's session: %d, want 404", got)
	}
	me := callTool[whoami](t, context.Background(), alice, "whoami")
	if me.Subject != demoUser {
		t.Errorf("alice's session now says sub %q", me.Subject)
	}
}

// TestDeniedConsentReachesTheClientAsAccessDenied: pressing Deny sends the
// client access_denied with iss (RFC 6749 §4.1.2.1, RFC 9207), and the SDK
// client fails to connect instead of getting a token.
func TestDeniedConsentReachesTheClientAsAccessDenied(t *testing.T) {
	s := startStack(t, stackOptions{})
	redirect := loopbackRedirect(t)
	driver := newFormLogin(demoUser, demoPassword, redirect)
	driver.deny = true
	var denied *authzError
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL: redirect,
		AuthorizationCodeFetcher: func(ctx context.Context, a *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			res, err := driver.fetch(ctx, a)
			errors.As(err, &denied)
			return res, err
		},
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{ClientName: "mcpauth e2e denied", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "denied", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: s.MCPURL, OAuthHandler: handler}, nil)
	if err == nil {
		session.Close()
		t.Fatal("connected although the person pressed Deny")
	}
	if denied == nil {
		t.Fatalf("no error authorization response; connect error: %v", err)
	}
	if denied.Code != "access_denied" || denied.Iss != s.Issuer {
		t.Errorf("authorization response error %q iss %q, want access_denied from %s", denied.Code, denied.Iss, s.Issuer)
	}
}
