package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestToolListGolden pins the tools/list answer (names, descriptions, input
// and output schemas): it goes on the wire to every client, and the scope
// mapping in server.go refers to these names.
func TestToolListGolden(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "mcpauth-example-server", Version: "0.1.0"}, nil)
	tl := testTools(rsmiddleware.Scopes{Base: []string{ScopeTools}, Tools: map[string][]string{"admin_stats": {ScopeAdmin}}})
	tl.register(server)
	cs := connectInMemory(t, server)
	ctx := context.Background()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(res.Tools, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "tools.golden.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("tools/list changed; run go test ./examples/mcpserver -update if intended.\ngot:\n%s\nwant:\n%s", got, want)
	}
	for _, tool := range res.Tools {
		if _, ok := tl.scopes.Tools[tool.Name]; tool.Name == "admin_stats" && !ok {
			t.Errorf("admin_stats is not in the scope mapping")
		}
	}
}

// TestToolsRefuseACallWithoutItsHTTPRequest: over a transport that did not
// pass the guard (here in memory), the tools have no principal and fail
// rather than answer anonymously.
func TestToolsRefuseACallWithoutItsHTTPRequest(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "x", Version: "0"}, nil)
	tl := testTools(rsmiddleware.Scopes{Base: []string{ScopeTools}})
	tl.register(server)
	cs := connectInMemory(t, server)
	ctx := context.Background()
	for _, name := range []string{"whoami", "admin_stats", "fetch_report"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err == nil && !res.IsError {
			t.Errorf("%s answered without an authenticated request: %+v", name, res)
		}
	}
}

// TestCapabilitiesAnnounceAuthExtensions checks what a client sees at
// initialize: the tools, and the two authorization extensions the server's
// tokens may come from.
func TestCapabilitiesAnnounceAuthExtensions(t *testing.T) {
	server := newMCPServer()
	tl := testTools(rsmiddleware.Scopes{Base: []string{ScopeTools}})
	tl.register(server)
	cs := connectInMemory(t, server)
	caps := cs.InitializeResult().Capabilities
	for _, ext := range []string{ExtensionClientCredentials, ExtensionEnterpriseAuth} {
		if _, ok := caps.Extensions[ext]; !ok {
			t.Errorf("extension %s not announced: %v", ext, caps.Extensions)
		}
	}
	if caps.Tools == nil || caps.Logging == nil {
		t.Errorf("tools %v logging %v: the inferred capabilities are gone", caps.Tools, caps.Logging)
	}
}
