package as_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// A resource's DefaultScopes are what a request naming no scope gets; a
// request naming scopes gets those the client may have, and one naming
// nothing grantable gets invalid_scope.
func ExampleResource_defaultScopes() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	srv, err := as.New(ctx, as.Config{
		Issuer: issuer,
		Resources: []as.Resource{{
			URI: "http://127.0.0.1:8080/mcp", Scopes: []string{"mcp:tools", "mcp:admin"},
			DefaultScopes: []string{"mcp:tools"}, Default: true,
		}},
		Clients: []as.Client{
			{ID: "ops-bot", Secret: "a-long-random-secret-for-ops-bot", GrantTypes: []string{"client_credentials"}},
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

	for _, scope := range []string{"", "openid mcp:admin", "openid"} {
		form := url.Values{"grant_type": {"client_credentials"}}
		if scope != "" {
			form.Set("scope", scope)
		}
		req, _ := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("ops-bot", "a-long-random-secret-for-ops-bot")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		var body struct{ Scope, Error string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		fmt.Printf("%q -> %d %s%s\n", scope, resp.StatusCode, body.Scope, body.Error)
	}
	// Output:
	// "" -> 200 mcp:tools
	// "openid mcp:admin" -> 200 mcp:admin
	// "openid" -> 400 invalid_scope
}
