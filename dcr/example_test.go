package dcr_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/mcpauth/mcpauth/dcr"
	"github.com/mcpauth/mcpauth/internal/safehttp"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// Mount the registration endpoint next to the authorization server and let
// Cursor register itself.
func ExampleNew() {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()

	h, err := dcr.New(dcr.Config{
		Endpoint: srv.URL + "/register",
		Store:    memory.New(),
		Secret:   []byte("an example secret of at least 32 bytes!!"),
		Policy: dcr.Policy{
			Open:      true,
			Scopes:    []string{"mcp:read", "mcp:write"},
			Resources: []string{"https://mcp.example.com/mcp"},
		},
		Logger: quietLogger(),
	})
	if err != nil {
		panic(err)
	}
	h.Mount(mux)

	resp, err := http.Post(srv.URL+"/register", "application/json", strings.NewReader(`{
		"client_name": "Cursor",
		"redirect_uris": ["cursor://anysphere.cursor-mcp/oauth/callback",
		                  "https://www.cursor.com/agents/mcp/oauth/callback",
		                  "http://localhost:8787/callback"],
		"token_endpoint_auth_method": "none",
		"scope": "*"}`))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var info dcr.ClientInformation
	json.NewDecoder(resp.Body).Decode(&info)
	fmt.Println(resp.StatusCode, info.ApplicationType, info.Scope, info.ClientSecret == "")
	// Output: 201 native mcp:read mcp:write true
}

// Resolve a Client ID Metadata Document. Special-use addresses are refused at
// connect time, whatever the DNS says.
func ExampleCIMDResolver_ResolveClient() {
	r, err := dcr.NewCIMDResolver(dcr.CIMDConfig{Scopes: []string{"mcp:read"}, Logger: quietLogger()})
	if err != nil {
		panic(err)
	}
	_, err = r.ResolveClient(context.Background(), "https://169.254.169.254/latest/client.json")
	fmt.Println(errors.Is(err, dcr.ErrDocumentFetch), errors.Is(err, safehttp.ErrAddress))
	_, err = r.ResolveClient(context.Background(), "mcp_not_a_url")
	fmt.Println(errors.Is(err, dcr.ErrNotMetadataURL))
	// Output:
	// true true
	// true
}

// Loopback redirect URIs match on any port (RFC 8252 §7.3).
func ExampleMatchRedirectURI() {
	registered := []string{"http://127.0.0.1/callback"}
	fmt.Println(dcr.MatchRedirectURI(registered, "http://127.0.0.1:49152/callback"))
	fmt.Println(dcr.MatchRedirectURI(registered, "http://127.0.0.1:49152/other"))
	// Output:
	// true
	// false
}

// Refused redirect URIs say why.
func ExampleCheckRedirectURI() {
	for _, u := range []string{"https://claude.ai/api/mcp/auth_callback", "http://example.com/cb", "https://a.example/cb#frag"} {
		_, err := dcr.CheckRedirectURI(u)
		fmt.Println(u, err)
	}
	// Output:
	// https://claude.ai/api/mcp/auth_callback <nil>
	// http://example.com/cb uses http on a host other than 127.0.0.1, [::1] or localhost
	// https://a.example/cb#frag has a fragment
}
