package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpauth/mcpauth/internal/freeport"
	"github.com/mcpauth/mcpauth/internal/testprovider"
)

const githubGatewaySecret = "github-gateway-secret-0123456789abcdef"

// TestConnectedAccountThroughTheGateway runs the whole connected-account
// story with real processes: a test OAuth provider with a user API (GitHub
// standing in), the authserver with connections[github], the TypeScript MCP
// server whose provider_user tool calls the provider's /user with the bearer
// token it received, and mcpgateway with upstream_auth.connection in front
// of it. The official Go SDK client signs in (DCR, login and consent forms)
// and calls provider_user: first it gets the connect URL; a headless
// Chromium signs in on /connections and connects; the call then answers the
// provider's user name; the provider token expires and is refreshed; the
// person disconnects in the browser and the next call gets the connect URL
// again.
func TestConnectedAccountThroughTheGateway(t *testing.T) {
	chromium := chromiumPath()
	if chromium == "" {
		requireCI(t, "chromium is not installed (apt-get install -y chromium)")
	}
	// Access tokens live 40 s: the AS refreshes one within 30 s of its
	// expiry, and the gateway reuses one until 30 s before it, so a call
	// 11 s after connecting gets a refreshed token.
	tp := testprovider.New(testprovider.Config{Login: "octocat-e2e", AccessTTL: 40 * time.Second})
	psrv := httptest.NewServer(tp.Handler())
	t.Cleanup(psrv.Close)
	tp.Issuer = psrv.URL

	logs := &lockedBuffer{}
	gw, ts := freeport.Addr(t), freeport.Addr(t)
	upstream := startTSServer(t, logs, ts, true, "PROVIDER_USER_URL="+tp.UserEndpoint())
	s := startStack(t, stackOptions{editConfig: func(c string) string {
		c = strings.NewReplacer(gatewayAddr, gw, tsServerAddr, ts).Replace(c)
		if !strings.Contains(c, "\nclients:\n") {
			t.Fatal("deploy/authserver.yaml changed shape: update this test")
		}
		c = strings.Replace(c, "\nclients:\n", fmt.Sprintf("\nclients:\n  - id: github-gateway\n    secret: %s\n    resources: [http://%s/mcp]\n", githubGatewaySecret, gw), 1)
		return c + fmt.Sprintf(`
connections:
  - id: github
    name: GitHub
    authorization_endpoint: %s
    token_endpoint: %s
    revocation_endpoint: %s
    client_id: client
    client_secret: client-secret
    scopes: [repo, "read:user"]
    resource: https://api.github.example
    clients: [github-gateway]
`, tp.AuthorizationEndpoint(), tp.TokenEndpoint(), tp.RevocationEndpoint())
	}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- gateway and upstream output ---\n%s", logs)
		}
	})
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	cfgPath := gatewayConfig(t, s, gw, ts, auditFile, false)
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw, fmt.Sprintf("upstream_auth: {connection: github, client_id: github-gateway, client_secret: %q}\n", githubGatewaySecret)...)
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	startGateway(t, s, logs, cfgPath, gw, ts)
	resource := "http://" + gw + "/mcp"
	connectURL := s.Issuer + "/connections?connection=github"

	// The MCP client: the official Go SDK with its OAuth handler, through
	// the login and consent forms.
	redirect := loopbackRedirect(t)
	driver := newFormLogin(demoUser, demoPassword, redirect)
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: driver.fetch,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "mcpauth e2e connections client", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "connections-e2e", Version: "0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: resource, OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer session.Close()
	call := func() (string, bool) {
		t.Helper()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "provider_user"})
		if err != nil {
			t.Fatalf("tools/call provider_user: %v", err)
		}
		if len(res.Content) != 1 {
			t.Fatalf("content %+v", res.Content)
		}
		tc, _ := res.Content[0].(*mcp.TextContent)
		if tc == nil {
			t.Fatalf("content %+v", res.Content[0])
		}
		return tc.Text, res.IsError
	}

	// 1. Not connected: the answer names the page where to connect.
	if text, isErr := call(); !isErr || !strings.Contains(text, connectURL) {
		t.Fatalf("before connecting: isError %v, %q", isErr, text)
	}

	// 2. The person connects in a browser.
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1024, 800),
	)...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	bctx, cancelB := context.WithTimeout(browser, 90*time.Second)
	defer cancelB()
	password := chromedp.CSS(`input[type=password]`)
	if err := chromedp.Do(bctx, chromedp.Navigate(connectURL), chromedp.WaitVisible(password),
		chromedp.SendKeys(chromedp.CSS(`input[name=username]`), demoUser),
		chromedp.SendKeys(password, demoPassword),
		chromedp.Submit(password),
		chromedp.WaitVisible(chromedp.CSS(`#connect-github`)),
	); err != nil {
		body, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`body`)))
		t.Fatalf("browser: signing in on /connections: %v\n%s", err, body)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#connect-github`)), chromedp.WaitVisible(chromedp.CSS(`#disconnect-github`))); err != nil {
		body, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`body`)))
		t.Fatalf("browser: connecting: %v\n%s", err, body)
	}
	connected, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#connection-github`)))
	if err != nil || !strings.Contains(connected, "connected") || strings.Contains(connected, "not connected") {
		t.Fatalf("the page after connecting: %v %q", err, connected)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil || len(shot) < 1000 {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(artifactsDir(t), "chromium-connections.png")
	if err := os.WriteFile(p, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)

	// 3. The call works, as the person's account at the provider.
	if text, isErr := call(); isErr || text != "octocat-e2e" {
		t.Fatalf("after connecting: isError %v, %q", isErr, text)
	}
	if n := tp.Count("refresh"); n != 0 {
		t.Fatalf("%d refreshes before the token expired", n)
	}

	// 4. The provider token nears its expiry: it is refreshed, and works.
	time.Sleep(11 * time.Second)
	if text, isErr := call(); isErr || text != "octocat-e2e" {
		t.Fatalf("after the token expired: isError %v, %q", isErr, text)
	}
	if n := tp.Count("refresh"); n < 1 {
		t.Fatalf("the expired provider token was not refreshed (%d refreshes)", n)
	}

	// 5. The person disconnects: the next call gets the connect URL again.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#disconnect-github`)), chromedp.WaitNotPresent(chromedp.CSS(`#disconnect-github`))); err != nil {
		t.Fatalf("browser: disconnecting: %v", err)
	}
	if len(tp.Revoked()) != 1 {
		t.Fatalf("revoked at the provider: %d", len(tp.Revoked()))
	}
	if text, isErr := call(); !isErr || !strings.Contains(text, connectURL) {
		t.Fatalf("after disconnecting: isError %v, %q", isErr, text)
	}

	// The provider's tokens reached the upstream, never a token of ours.
	for i, r := range upstream.seen(t) {
		if r.Authorization != "" && strings.Count(r.Authorization, ".") == 2 {
			t.Errorf("upstream request %d (%s) carried a JWT", i, r.Method)
		}
	}
}
