package upstream_test

import (
	"fmt"

	"github.com/mcpauth/mcpauth/upstream"
)

// The claim_scopes of an upstream give each claim value the scopes a person
// holding it may be granted; a person's cap is the union over their values.
func ExampleMapScopes() {
	mapping := map[string]map[string][]string{
		"groups": {
			"mcp-admins": {"mcp:admin", "mcp:tools"},
			"mcp-users":  {"mcp:tools"},
		},
		"hd": {"acme.example": {"mcp:read"}},
	}
	person := map[string][]string{"groups": {"mcp-users", "sales"}, "hd": {"acme.example"}}
	fmt.Println(upstream.MapScopes(mapping, person))
	fmt.Println(upstream.MapScopes(mapping, map[string][]string{"groups": {"sales"}}))
	// Output:
	// [mcp:read mcp:tools]
	// []
}
