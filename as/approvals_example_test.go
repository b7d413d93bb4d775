package as_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// A gateway that holds a tool call asks the approvals endpoint about it,
// authenticated as a client its resource lists in ApprovalClients, with the
// access token the call carried. Here the token is not one the server
// issued, so the answer is invalid_token; with a person's live token it is
// "pending" with the page where they decide, and "approved" once they did.
func ExampleResource_approvalClients() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := httptest.NewUnstartedServer(nil)
	issuer := "http://" + ts.Listener.Addr().String()
	srv, err := as.New(ctx, as.Config{
		Issuer: issuer,
		Resources: []as.Resource{{URI: "http://127.0.0.1:8080/mcp", Name: "Example MCP", Scopes: []string{"mcp:tools"},
			ApprovalClients: []string{"gateway"}}},
		Clients: []as.Client{
			{ID: "gateway", Secret: "a-long-random-secret-for-the-gateway", GrantTypes: []string{"client_credentials"}},
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

	body, _ := json.Marshal(map[string]any{"token": "eyJhbGciOiJFUzI1NiJ9.e30.c2ln", "tool": "send_email",
		"arguments": map[string]any{"to": "bob@example.com"}, "ttl": 300})
	for _, secret := range []string{"wrong", "a-long-random-secret-for-the-gateway"} {
		req, _ := http.NewRequest(http.MethodPost, issuer+as.ApprovalsPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("gateway", secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		var answer map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, answer["error"])
	}
	// Output:
	// 401 invalid_client
	// 400 invalid_token
}
