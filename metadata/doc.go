// Package metadata holds the wire types shared by the authorization server and
// the resource-server middleware: RFC 8414 authorization server metadata,
// RFC 9728 protected resource metadata, well-known URL construction with path
// insertion, canonical resource URIs (RFC 8707), HTTP handlers with CORS, and
// fetch-and-validate helpers. It imports the standard library only.
package metadata
