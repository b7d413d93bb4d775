package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/examples/stack/launch"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// connect authorizes a Go SDK client by DCR and the form driver as alice, and
// returns its session.
func connect(tb testing.TB, s *launch.Stack) *mcp.ClientSession {
	tb.Helper()
	session, _ := connectAs(tb, s, demoUser, demoPassword)
	return session
}

// connectAs is connect for any user; it also returns the client's tokens.
func connectAs(tb testing.TB, s *launch.Stack, user, password string) (*mcp.ClientSession, *tokenSources) {
	tb.Helper()
	a, err := launch.FreeAddr()
	if err != nil {
		tb.Fatal(err)
	}
	redirect := "http://" + a + "/callback"
	driver := newFormLogin(user, password, redirect)
	tokens := &tokenSources{}
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: driver.fetch,
		NewTokenSource:           tokens.newTokenSource,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{
				ClientName:              "mcpauth e2e benchmark",
				RedirectURIs:            []string{redirect},
				TokenEndpointAuthMethod: "none",
			},
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: s.MCPURL, OAuthHandler: handler, HTTPClient: &http.Client{}}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { session.Close() })
	return session, tokens
}

// BenchmarkToolCall measures one tools/call over Streamable HTTP through the
// whole stack, one client, sequential calls:
//
//   - whoami: bearer verification (cached after the first call) + SDK;
//   - fetch_report: that, plus the exchanged token (cached per subject token
//     and audience) and a verified call to the downstream API.
//
// go test ./e2e -run '^$' -bench ToolCall -benchtime 200x
func BenchmarkToolCall(b *testing.B) {
	s := startStack(b, stackOptions{})
	session := connect(b, s)
	ctx := context.Background()
	for _, tool := range []string{"whoami", "fetch_report"} {
		b.Run(tool, func(b *testing.B) {
			for b.Loop() {
				res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %+v", tool, err, res)
				}
			}
		})
	}
}
