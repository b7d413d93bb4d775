// Package as is the OAuth 2.1 authorization server of mcpauth: the protocol
// part. It is the only package of the module that imports fosite.
//
// Endpoints (paths relative to the issuer's path):
//
//   - /authorize: authorization code flow only (RFC 6749 §4.1), PKCE S256 for
//     every client (RFC 7636), one resource indicator per grant (RFC 8707),
//     iss on every response (RFC 9207). The person-facing part is as/loginui.
//   - /token: authorization_code, refresh_token (rotated on every use; replay
//     after the grace window revokes the family), client_credentials
//     (confidential clients only). Client authentication: none,
//     client_secret_basic, client_secret_post, private_key_jwt (RFC 7523).
//   - /introspect (RFC 7662), /revoke (RFC 7009), /jwks.json (RFC 7517).
//   - RFC 8414 metadata at /.well-known/oauth-authorization-server{path} and
//     the OpenID Connect discovery locations.
//
// Access tokens are RFC 9068 JWTs (typ at+jwt) whose aud is exactly one
// canonical resource URI (metadata.CanonicalResource). Codes and refresh
// tokens are opaque 256-bit values kept under their HMAC. Every record's
// payload is sealed (internal/seal) with its signature as associated data.
//
// Every access token carries a Token Status List claim
// (draft-ietf-oauth-status-list) for its grant's index, and the list is
// served at /statuslists/1. An instance rebuilds it at most once a second
// when asked, from storage, and compresses it again only when the store's
// answer changed, at zlib.BestSpeed: at 1e6 indices that is 1.4-3.7 ms of
// CPU against 16-86 ms at BestCompression (status.go, docs/BENCHMARKS.md).
//
// fosite is wired with typed struct literals (no compose factories), so a
// missing storage method fails at compile time. Where fosite falls short the
// gaps are filled here: RFC 8707 (resourcePreHandler, resourcePostHandler),
// exact audience and scope matching, RFC 9068 tokens (tokenStrategy), RFC 9207
// iss, and a fast introspection answered from the stored record.
package as
