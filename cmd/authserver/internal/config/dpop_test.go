package config

import (
	"strings"
	"testing"
)

func TestParseDPoP(t *testing.T) {
	src := base + `
dpop:
  nonce: true
  required_for: [HTTPS://MCP.example.com/mcp]
`
	src = strings.Replace(src, "    grant_types: [client_credentials]\n", "    grant_types: [client_credentials]\n    dpop_bound_access_tokens: true\n", 1)
	c, err := Parse([]byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !c.DPoP.Nonce || len(c.DPoP.RequiredFor) != 1 || c.DPoP.RequiredFor[0] != "https://mcp.example.com/mcp" {
		t.Fatalf("dpop %+v", c.DPoP)
	}
	if !c.Clients[0].DPoPBoundAccessTokens || c.Clients[1].DPoPBoundAccessTokens {
		t.Fatalf("clients %+v", c.Clients)
	}
	for bad, want := range map[string]string{
		"dpop:\n  required_for: [https://unknown.example/mcp]\n": "config: dpop.required_for[0]: https://unknown.example/mcp is not a configured resource",
		"dpop:\n  nonces: true\n":                                "config: dpop.nonces: unknown key",
	} {
		if _, err := Parse([]byte(base+bad), envOf(nil)); err == nil || err.Error() != want {
			t.Errorf("%q: err = %v, want %q", bad, err, want)
		}
	}
}
