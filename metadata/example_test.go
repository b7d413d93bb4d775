package metadata_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/mcpauth/mcpauth/metadata"
)

func ExampleWellKnownURL() {
	u, _ := metadata.WellKnownURL("https://mcp.example.com/mcp", metadata.SuffixProtectedResource)
	fmt.Println(u)
	// Output: https://mcp.example.com/.well-known/oauth-protected-resource/mcp
}

func ExampleDiscoveryURLs() {
	urls, _ := metadata.DiscoveryURLs("https://auth.example.com/tenant1")
	for _, u := range urls {
		fmt.Println(u)
	}
	// Output:
	// https://auth.example.com/.well-known/oauth-authorization-server/tenant1
	// https://auth.example.com/.well-known/openid-configuration/tenant1
	// https://auth.example.com/tenant1/.well-known/openid-configuration
	// https://auth.example.com/.well-known/oauth-authorization-server
}

func ExampleCanonicalResource() {
	a, _ := metadata.CanonicalResource("https://MCP.example.com:443/mcp/")
	b, _ := metadata.CanonicalResource("https://mcp.example.com/mcp")
	fmt.Println(a, a == b)
	// Output: https://mcp.example.com/mcp true
}

func ExampleHandler() {
	h, _ := metadata.Handler(metadata.ProtectedResourceMetadata{
		Resource:               "https://mcp.example.com/mcp",
		AuthorizationServers:   []string{"https://auth.example.com"},
		BearerMethodsSupported: []string{"header"},
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/.well-known/oauth-protected-resource/mcp", nil))
	fmt.Println(rec.Code, rec.Header().Get("Access-Control-Allow-Origin"))
	fmt.Print(rec.Body.String())
	// Output:
	// 200 *
	// {
	//   "resource": "https://mcp.example.com/mcp",
	//   "authorization_servers": [
	//     "https://auth.example.com"
	//   ],
	//   "bearer_methods_supported": [
	//     "header"
	//   ]
	// }
}
