package as_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// An MCP server (client "mcp-server") exchanges a token issued for itself
// for a token for the reports API it calls (RFC 8693). The policy names
// which client may exchange from which resource to which, and the scopes.
func ExampleExchangeRule() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	const mcp, reports = "http://127.0.0.1:8080/mcp", "http://127.0.0.1:8081/api"
	srv, err := as.New(ctx, as.Config{
		Issuer: issuer,
		Resources: []as.Resource{
			{URI: mcp, Scopes: []string{"mcp:tools"}, Default: true},
			{URI: reports, Scopes: []string{"reports:read", "reports:write"}},
		},
		Clients: []as.Client{
			// A machine client standing in for a user's MCP client.
			{ID: "job", Secret: "a-long-random-secret-for-the-job", GrantTypes: []string{"client_credentials"}, Resources: []string{mcp}},
			{ID: "mcp-server", Secret: "a-long-random-secret-for-mcp-srv",
				GrantTypes: []string{as.GrantTypeTokenExchange}, Resources: []string{reports}},
		},
		ExchangePolicy: []as.ExchangeRule{
			{From: mcp, To: reports, Scopes: []string{"reports:read"}, Clients: []string{"mcp-server"}},
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

	post := func(form url.Values, id, secret string) map[string]any {
		req, _ := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(id, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return body
	}
	subject := post(url.Values{"grant_type": {"client_credentials"}}, "job", "a-long-random-secret-for-the-job")["access_token"].(string)
	out := post(url.Values{
		"grant_type":         {as.GrantTypeTokenExchange},
		"subject_token":      {subject},
		"subject_token_type": {as.TokenTypeAccessToken},
		"resource":           {reports},
	}, "mcp-server", "a-long-random-secret-for-mcp-srv")
	fmt.Println(out["issued_token_type"], out["scope"])

	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(out["access_token"].(string), ".")[1])
	var claims struct {
		Sub string         `json:"sub"`
		Aud string         `json:"aud"`
		Act map[string]any `json:"act"`
	}
	_ = json.Unmarshal(payload, &claims)
	fmt.Println(claims.Sub, claims.Aud, claims.Act)
	// Output:
	// urn:ietf:params:oauth:token-type:access_token reports:read
	// job http://127.0.0.1:8081/api map[sub:mcp-server]
}
