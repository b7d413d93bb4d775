package mcpsdk_test

import (
	"context"
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

// Giving tool handlers the principal and context of the HTTP request that
// carries their call, behind rsmiddleware.Middleware.
func ExampleRequestContexts() {
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{
		Issuer:   "https://auth.example.com",
		Resource: "https://mcp.example.com/mcp",
	})
	if err != nil {
		log.Fatal(err)
	}
	prm, _ := rsmiddleware.ResourceMetadataURL("https://mcp.example.com/mcp")
	mw, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{
		Verifier:            v,
		ResourceMetadataURL: prm,
		Scopes:              rsmiddleware.Scopes{Base: []string{"mcp:read"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	var requests mcpsdk.RequestContexts
	server := mcp.NewServer(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	type none struct{}
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		// Not rsmiddleware.PrincipalFromContext(ctx): ctx belongs to the
		// request that opened the session.
		p, reqCtx, err := requests.Principal(req)
		if err != nil {
			return nil, nil, err
		}
		_ = reqCtx // holds the current inbound token for an rsmiddleware.Exchanger
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: p.Subject}}}, nil, nil
	})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	var binding rsmiddleware.SessionBinding
	http.Handle("/mcp", mw.Wrap(binding.Wrap(requests.Wrap(handler))))
}
