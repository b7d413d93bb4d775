package mcpsdk_test

import (
	"log"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/rsmiddleware/mcpsdk"
)

// Plugging the verifier into the SDK's own bearer middleware.
func ExampleTokenVerifier() {
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{
		Issuer:   "https://auth.example.com",
		Resource: "https://mcp.example.com/mcp",
	})
	if err != nil {
		log.Fatal(err)
	}
	prm, _ := rsmiddleware.ResourceMetadataURL("https://mcp.example.com/mcp")
	server := mcp.NewServer(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	http.Handle("/mcp", auth.RequireBearerToken(mcpsdk.TokenVerifier(v), &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: prm,
		Scopes:              []string{"mcp:read"},
	})(handler))
}
