package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpauth/mcpauth/internal/freeport"
)

// TestMCPGoClientAcrossGatewayRestarts runs mcp-go through the gateway
// binary in front of the TypeScript server while the gateway is killed and
// started again on its address. With the same session_key the session goes
// on as if nothing happened. Started without one (a random key of its own),
// the gateway answers the session's ID 404 before the server; mcp-go
// reports ErrSessionTerminated, the application initializes again, as MCP
// Streamable HTTP asks, and goes on in a new session. The server only ever
// sees its own session IDs.
func TestMCPGoClientAcrossGatewayRestarts(t *testing.T) {
	logs := &lockedBuffer{}
	gw, ts := freeport.Addr(t), freeport.Addr(t)
	upstream := startTSServer(t, logs, ts, false)
	s := startStack(t, stackOptions{editConfig: func(c string) string {
		return strings.NewReplacer(gatewayAddr, gw, tsServerAddr, ts).Replace(c)
	}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- gateway and upstream output ---\n%s", logs)
		}
	})
	unkeyed := gatewayConfig(t, s, gw, ts, filepath.Join(t.TempDir(), "audit.jsonl"), false)
	text, err := os.ReadFile(unkeyed)
	if err != nil {
		t.Fatal(err)
	}
	keyed := filepath.Join(t.TempDir(), "keyed.yaml")
	if err := os.WriteFile(keyed, append(text, "session_key: \"e2e session key, the same at every start\"\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	kill := startGateway(t, s, logs, keyed, gw, ts)
	resource := "http://" + gw + "/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c := mcpgoConnect(t, ctx, resource, "", []string{"mcp:tools"})
	echo := func(text string) error {
		res, err := c.call(ctx, "echo", map[string]any{"text": text})
		if err != nil {
			return err
		}
		if res.IsError || len(res.Content) != 1 || res.Content[0].(mcpgomcp.TextContent).Text != text {
			t.Fatalf("echo %q: %+v", text, res)
		}
		return nil
	}
	if err := echo("before"); err != nil {
		t.Fatalf("echo: %v", err)
	}
	kill()
	kill = startGateway(t, s, logs, keyed, gw, ts)
	if err := echo("after a restart with the same session_key"); err != nil {
		t.Fatalf("echo after a restart with the same key: %v", err)
	}

	kill()
	startGateway(t, s, logs, unkeyed, gw, ts)
	before := len(upstream.seen(t))
	if err := echo("after a restart without session_key"); !errors.Is(err, transport.ErrSessionTerminated) {
		t.Fatalf("echo in a session of the old key: %v, want mcp-go's ErrSessionTerminated (404)", err)
	}
	for _, r := range upstream.seen(t)[before:] {
		if r.Session != "" {
			t.Fatalf("a request of the refused session reached the server: %+v", r)
		}
	}
	req := mcpgomcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcpgomcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcpgomcp.Implementation{Name: "mcpauth-e2e-mcp-go", Version: "0"}
	if _, err := c.c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize again: %v", err)
	}
	if err := echo("in a new session"); err != nil {
		t.Fatalf("echo in the new session: %v", err)
	}
	sessions := map[string]bool{}
	for _, r := range upstream.seen(t) {
		if strings.Contains(r.Session, ".") {
			t.Fatalf("the server got a signed session ID %q", r.Session)
		}
		if r.Session != "" {
			sessions[r.Session] = true
		}
	}
	if len(sessions) != 2 {
		t.Errorf("the server saw %d sessions, want 2 (before and after the key changed)", len(sessions))
	}
}
