// Package e2e holds the end-to-end tests of the example stack: the
// authorization server, the example MCP server and the downstream API run as
// real processes (built from this module into a temporary directory, on free
// loopback ports, from the configuration files in deploy/), and real clients
// drive them: the MCP Go SDK's auth.AuthorizationCodeHandler and mcp.Client
// over Streamable HTTP, an http.Client submitting the real login and consent
// forms, headless chromium through the Chrome DevTools Protocol, and the
// examples/client binary.
//
// Clients written by others run too: the TypeScript MCP SDK 1.x and v2
// clients and oauth4webapi from npm (testdata/foreign, pinned by its lock
// file), in front of which mcpgateway is tested with the TypeScript SDK's
// server (testdata/tsserver), and mcp-go (github.com/mark3labs/mcp-go), a
// Go MCP implementation independent of the official SDK, imported by these
// tests only: a second Go client with its own OAuth discovery,
// registration and token handling finds interoperability faults that one
// written here, sharing our reading of the RFCs, would not.
//
// Run them with
//
//	go test ./e2e/
//
// They need the Go toolchain (to build the binaries). The PostgreSQL variant
// runs when AUTHSERVER_TEST_POSTGRES is set; the browser test when chromium is
// installed. Both skip otherwise, and fail instead when CI is set. Screenshots
// go to $ARTIFACTS_DIR, or e2e/testdata/artifacts.
package e2e
