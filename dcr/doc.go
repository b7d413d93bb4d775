// Package dcr lets MCP clients become clients of this authorization server
// without an operator: OAuth 2.0 Dynamic Client Registration (RFC 7591), its
// management protocol (RFC 7592), and Client ID Metadata Documents
// (draft-ietf-oauth-client-id-metadata-document, "CIMD"), all behind one
// registration Policy.
//
// Flow of a registration (Handler, POST {Endpoint}):
//
//  1. CORS headers; OPTIONS preflight answered 204.
//  2. Per-address token-bucket rate limit (429 temporarily_unavailable).
//  3. Initial access token (RFC 7591 §3) when registration is not open.
//  4. Body size cap, JSON parse, metadata validation (RFC 7591 §2): redirect
//     URIs, authentication method, grant types narrowed to what policy allows,
//     scopes and resources taken from policy, strings safe to show a person.
//  5. A client id, a client secret for confidential clients and an RFC 7592
//     registration access token are generated (internal/secret); only keyed
//     hashes are stored (storage.ClientStore, Source "dcr").
//  6. 201 with the client information response (RFC 7591 §3.2.1), no-store.
//
// RFC 7592 GET/PUT/DELETE {Endpoint}/{client_id} need the registration access
// token as a Bearer token; anything else is 401 invalid_token.
//
// CIMDResolver implements the authorization server's ClientResolver for
// client ids that are https URLs with a path: it fetches the document through
// internal/safehttp, validates it with the same rules, caches it by
// Cache-Control within bounds and saves it as a Source "cimd" client.
//
// (*Handler).Reap deletes registered and CIMD clients that were never used or
// have been idle too long; the server's GC loop calls it.
package dcr
