package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// botSecret is the secret of ci-bot, the client credentials client of the
// authorization server startAS runs.
const botSecret = "ci-bot-secret-0123456789abcdef"

// initializeBody is an MCP initialize request.
const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`

// startAS runs the real authorization server (memory storage) on srv, an
// unstarted httptest server, for resource with the scopes of this server
// and the client credentials client ci-bot. It returns the issuer.
func startAS(t *testing.T, srv *httptest.Server, resource string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	issuer := "http://" + srv.Listener.Addr().String()
	authz, err := as.New(ctx, as.Config{
		Issuer:    issuer,
		Resources: []as.Resource{{URI: resource, Scopes: []string{ScopeTools, ScopeAdmin}}},
		Clients:   []as.Client{{ID: "ci-bot", Secret: botSecret, GrantTypes: []string{"client_credentials"}}},
		Store:     memory.New(),
		Secret:    bytes.Repeat([]byte{9}, 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = authz.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return issuer
}

// serveMCP runs this server, configured by the command-line args, on srv,
// an unstarted httptest server.
func serveMCP(t *testing.T, srv *httptest.Server, args ...string) {
	t.Helper()
	cfg, err := parseFlags(args)
	if err != nil {
		t.Fatal(err)
	}
	h, err := newServer(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
}

// testTools are the tools with scopes, a discarding logger and a downstream
// nothing listens on.
func testTools(scopes rsmiddleware.Scopes) *tools {
	return &tools{scopes: scopes, logger: slog.New(slog.DiscardHandler), started: time.Now(),
		downstream: "http://127.0.0.1:1/api", downstreamClient: &http.Client{}}
}

// connectInMemory connects an MCP Go SDK client to server over in-memory
// transports (which bypass the HTTP guard); both ends close when t ends.
func connectInMemory(t *testing.T, server *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
