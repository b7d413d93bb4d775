package rsmiddleware_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// Protecting an MCP endpoint: publish the RFC 9728 document, verify tokens,
// map tools to scopes, and bind sessions to their creator.
func ExampleMiddleware() {
	const resource = "https://mcp.example.com/mcp"
	const issuer = "https://auth.example.com"

	verifier, err := rsmiddleware.NewVerifier(rsmiddleware.Config{Issuer: issuer, Resource: resource})
	if err != nil {
		log.Fatal(err)
	}
	prmURL, _ := rsmiddleware.ResourceMetadataURL(resource)
	mw, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{
		Verifier:            verifier,
		ResourceMetadataURL: prmURL,
		Scopes: rsmiddleware.Scopes{
			Base:  []string{"mcp:read"},
			Tools: map[string][]string{"delete_repo": {"repo:admin"}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	doc, _ := rsmiddleware.NewProtectedResourceMetadata(resource, []string{issuer}, []string{"mcp:read", "repo:admin"})

	mux := http.NewServeMux()
	_ = rsmiddleware.MountPRM(mux, doc, true)
	var sessions rsmiddleware.SessionBinding
	mcpHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := rsmiddleware.PrincipalFromContext(r.Context())
		fmt.Fprintln(w, "hello", p.Subject)
	})
	mux.Handle("/mcp", mw.Wrap(sessions.Wrap(mcpHandler)))

	// A request without a token is told where to find the metadata.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/mcp", nil))
	fmt.Println(rec.Code)
	fmt.Println(rec.Header().Get("WWW-Authenticate"))
	// Output:
	// 401
	// Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:read"
}

// Calling a downstream API with a token of the server's own, obtained by
// RFC 8693 token exchange of the request's token; the inbound token is never
// forwarded.
func ExampleExchanger_Transport() {
	ex, err := rsmiddleware.NewExchanger(rsmiddleware.ExchangeConfig{
		Issuer:       "https://auth.example.com",
		ClientID:     "mcp-server",
		ClientSecret: "secret",
	})
	if err != nil {
		log.Fatal(err)
	}
	api := &http.Client{Transport: ex.Transport(nil, "https://api.example.com")}
	handler := func(w http.ResponseWriter, r *http.Request) {
		// r comes through Middleware.Wrap; keep its context.
		req, _ := http.NewRequestWithContext(r.Context(), "GET", "https://api.example.com/items", nil)
		resp, err := api.Do(req)
		if err != nil {
			http.Error(w, "downstream unavailable", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
	}
	_ = handler
	// Outside a verified request there is no token to exchange.
	_, err = ex.Token(context.Background(), "https://api.example.com")
	fmt.Println(err)
	// Output: rsmiddleware: no inbound token in context
}

func ExampleChallenge() {
	c := rsmiddleware.Challenge{
		ResourceMetadata: "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
		Scopes:           []string{"mcp:read", "repo:admin"},
		Error:            rsmiddleware.ErrCodeInsufficientScope,
	}
	fmt.Println(c)
	// Output: Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="mcp:read repo:admin", error="insufficient_scope"
}

func ExampleParseAuthorization() {
	tok, err := rsmiddleware.ParseAuthorization("Bearer eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
	fmt.Println(tok, err)
	// Output: eyJhbGciOiJFUzI1NiJ9.e30.c2ln <nil>
}

// A resource server in a container network reaches the AS by its service
// name while the issuer, the metadata's URLs and the tokens' iss stay the
// public URL.
func ExampleRewriteOrigins() {
	rt, err := rsmiddleware.RewriteOrigins(nil, map[string]string{
		"http://127.0.0.1:9000": "http://authserver:9000",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: rt, Timeout: 10 * time.Second}
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{
		Issuer:     "http://127.0.0.1:9000",
		Resource:   "http://127.0.0.1:8080/mcp",
		HTTPClient: client,
	})
	fmt.Println(v.Issuer(), err)
	// Output: http://127.0.0.1:9000 <nil>
}

// The AS's answer when the person has not connected the account a
// Connection transport needs becomes the URL elicitation answer.
func ExampleConnectURLRequired() {
	err := &rsmiddleware.ExchangeError{Status: 400, Code: "interaction_required",
		ConnectURI: "https://auth.example.com/connections?connection=github"}
	u, ok := rsmiddleware.ConnectURLRequired(err, "github", "alice")
	fmt.Println(ok, u.URL)
	_, ok = rsmiddleware.ConnectURLRequired(&rsmiddleware.ExchangeError{Status: 400, Code: "invalid_grant"}, "github", "alice")
	fmt.Println(ok)
	// Output:
	// true https://auth.example.com/connections?connection=github
	// false
}
