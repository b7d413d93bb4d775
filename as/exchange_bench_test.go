package as

import "testing"

// BenchmarkTokenExchange drives /token with RFC 8693 token exchange over
// HTTP (benchHTTP: 32 connections, memory storage, ES256): the MCP-side
// client exchanges one user's access token (from the code flow) for the
// downstream resource, again and again (exchange is not single-use). Each
// request verifies the subject's ES256 signature, reads its record, signs
// and stores a new token, and re-reads the subject record.
func BenchmarkTokenExchange(b *testing.B) {
	h := exchangeHarness(b, nil)
	user := h.codeFlow("mcp:tools")
	benchHTTP(b, h, "/token", exchangeForm(user.AccessToken, otherURI), "mcp-server", mcpSrvSecret)
}
