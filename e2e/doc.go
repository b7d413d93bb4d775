// Package e2e holds the end-to-end tests of the example stack: the
// authorization server, the example MCP server and the downstream API run as
// real processes (built from this module into a temporary directory, on free
// loopback ports, from the configuration files in deploy/), and real clients
// drive them: the MCP Go SDK's auth.AuthorizationCodeHandler and mcp.Client
// over Streamable HTTP, an http.Client submitting the real login and consent
// forms, headless chromium through the Chrome DevTools Protocol, and the
// examples/client binary.
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
