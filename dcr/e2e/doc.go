// Package e2e holds end-to-end tests of client registration with the real
// authorization server (as/, as/loginui) over HTTP: DCR and CIMD clients as
// real MCP clients register them, through login, consent and the token
// endpoint, with golang.org/x/oauth2 as the client. It has no non-test code.
package e2e
