// Package rsmiddleware protects an MCP server (an OAuth 2.1 resource server)
// the way the MCP authorization specification requires:
//
//   - ProtectedResourceMetadata and PRMHandler serve the RFC 9728 document at
//     the path-inserted well-known URL, so clients discover the AS.
//   - Verifier checks RFC 9068 JWT access tokens against the AS's JWKS, found
//     through the AS's RFC 8414 metadata; or, in introspection mode, asks the
//     AS (RFC 7662) about every token.
//   - Middleware takes the token from the Authorization header only
//     (RFC 6750 §2.1), answers RFC 6750 §3 / RFC 9728 §5.1 challenges, maps MCP
//     tools and JSON-RPC methods to scopes (403 insufficient_scope step-up),
//     puts the Principal in the request context and strips the header.
//   - SessionBinding binds Mcp-Session-Id values to the principal that opened
//     the session: recorded in memory, or, with a Key, signed into the ID
//     handed to the client (HMAC-SHA256), so nothing is kept and an ID
//     without a valid MAC for the caller is 404 after a restart and at
//     every instance sharing the key.
//   - MCPFilter cuts tools/list (and resources/list, prompts/list) answers
//     to what the caller's scopes allow, and writes one AuditEvent per
//     JSON-RPC request with a SHA-256 of the RFC 8785 canonical arguments
//     instead of the arguments. cmd/mcpgateway uses the same filter.
//   - Exchanger and its Transport obtain downstream tokens by RFC 8693 token
//     exchange, and refuse to forward the inbound token.
//   - RewriteOrigins lets a server reach the AS (or a downstream API) at an
//     internal address, such as a container network's service name, while
//     the issuer and resource URIs stay the public ones.
//
// The package imports only the standard library, go-jose and metadata; it
// never imports the authorization server. The adapter for the official MCP Go
// SDK lives in the subpackage mcpsdk.
package rsmiddleware
