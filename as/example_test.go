package as_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// A machine client gets an RFC 9068 access token for the default resource
// with client credentials.
func ExampleNew() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	srv, err := as.New(ctx, as.Config{
		Issuer: issuer,
		Resources: []as.Resource{
			{URI: "http://127.0.0.1:8080/mcp", Name: "Example MCP server", Scopes: []string{"mcp:tools"}, Default: true},
		},
		Clients: []as.Client{
			{ID: "ci-bot", Secret: "a-long-random-secret-for-ci-bot", GrantTypes: []string{"client_credentials"}},
		},
		Store:  memory.New(),
		Secret: bytes.Repeat([]byte{7}, 32), // use 32 random bytes
	})
	if err != nil {
		panic(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	defer ts.Close()

	req, _ := http.NewRequest(http.MethodPost, issuer+"/token",
		strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("ci-bot", "a-long-random-secret-for-ci-bot")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Cache-Control"))
	fmt.Println(srv.Metadata().CodeChallengeMethodsSupported)
	// Output:
	// 200 no-store
	// [S256]
}

// RotateKey adds a signing key and retires the others; running servers pick
// it up at their next reload.
func ExampleRotateKey() {
	store := memory.New()
	kid, err := as.RotateKey(context.Background(), store, bytes.Repeat([]byte{7}, 32), "EdDSA")
	if err != nil {
		panic(err)
	}
	keys, _ := store.ListKeys(context.Background())
	fmt.Println(len(keys), keys[0].ID == kid, keys[0].Algorithm)
	// Output: 1 true EdDSA
}

// An operator revokes every grant of one client: its tokens stop working
// at once (refresh, introspection) and their bits are set in the Token
// Status List that resource servers check.
func ExampleServer_RevokeGrants() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	srv, err := as.New(ctx, as.Config{
		Issuer:    issuer,
		Resources: []as.Resource{{URI: "http://127.0.0.1:8080/mcp", Scopes: []string{"mcp:tools"}}},
		Clients: []as.Client{
			{ID: "ci-bot", Secret: "a-long-random-secret-for-ci-bot", GrantTypes: []string{"client_credentials"}},
		},
		Store:  memory.New(),
		Secret: bytes.Repeat([]byte{7}, 32),
	})
	if err != nil {
		panic(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	defer ts.Close()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, issuer+"/token",
			strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("ci-bot", "a-long-random-secret-for-ci-bot")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
	}

	live, _ := srv.ListGrants(ctx, as.GrantFilter{Client: "ci-bot"}, 0)
	revoked, err := srv.RevokeGrants(ctx, as.GrantFilter{Client: "ci-bot"})
	left, _ := srv.ListGrants(ctx, as.GrantFilter{Client: "ci-bot"}, 0)
	fmt.Println(len(live), len(revoked), err, len(left))
	fmt.Println(srv.StatusListURI() == issuer+"/statuslists/1")
	// Output:
	// 2 2 <nil> 0
	// true
}
