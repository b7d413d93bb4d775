package as

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// TestOnlyDeclaredResourceServersIntrospect: RFC 7662 §4. A self-registered
// confidential client allowed the resource may not introspect at all, a
// configured client allowed the resource but not declared its server learns
// nothing about others' tokens, and the declared server ("rs", in
// IntrospectionClients) sees them.
func TestOnlyDeclaredResourceServersIntrospect(t *testing.T) {
	h := newHarness(t, nil)
	const dcrSecret = "dcr-secret-0123456789abcdefghij"
	if err := h.store.CreateClient(context.Background(), &storage.Client{
		ID: "registered", SecretHash: h.as.clients.hasher.Hash(dcrSecret), GrantTypes: []string{"client_credentials"},
		TokenEndpointAuthMethod: "client_secret_basic", Source: "dcr", Scopes: []string{"mcp:tools"}, Resources: []string{mcpURI},
	}); err != nil {
		t.Fatal(err)
	}
	alice := h.codeFlow("mcp:tools").AccessToken
	ask := func(user, pass, token string) (int, map[string]any) {
		resp, body := h.post("/introspect", url.Values{"token": {token}}, user, pass)
		return resp.StatusCode, body
	}

	if status, body := ask("registered", dcrSecret, alice); status != http.StatusUnauthorized || body["error"] != "invalid_client" {
		t.Errorf("a registered client introspecting: %d %v, want 401 invalid_client", status, body)
	}
	if status, body := ask("ci-bot", ciSecret, alice); status != http.StatusOK || body["active"] != false || len(body) != 1 {
		t.Errorf("a configured client that is not the resource's server: %d %v, want active:false only", status, body)
	}
	if status, body := ask("rs", rsSecret, alice); status != http.StatusOK || body["active"] != true || body["sub"] != "alice" {
		t.Errorf("the declared resource server: %d %v, want alice's active token", status, body)
	}
	// A configured client still learns about its own tokens.
	resp, tok := h.post("/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"mcp:tools"}}, "ci-bot", ciSecret)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("client credentials: %d %v", resp.StatusCode, tok)
	}
	if status, body := ask("ci-bot", ciSecret, tok["access_token"].(string)); status != http.StatusOK || body["active"] != true {
		t.Errorf("ci-bot introspecting its own token: %d %v", status, body)
	}
}

func TestIntrospectionClientsMustBeConfiguredConfidentialClients(t *testing.T) {
	for _, id := range []string{"nobody", "demo-app"} {
		_, err := New(context.Background(), Config{
			Issuer:    "http://127.0.0.1:9",
			Resources: []Resource{{URI: mcpURI, IntrospectionClients: []string{id}}},
			Clients:   []Client{{ID: "demo-app", Public: true, RedirectURIs: []string{appRedirect}}},
			Store:     memory.New(),
			Secret:    []byte("0123456789abcdef0123456789abcdef-test-secret"),
		})
		if err == nil || !strings.Contains(err.Error(), "IntrospectionClients[0]") {
			t.Errorf("IntrospectionClients [%q]: %v, want an error naming the field", id, err)
		}
	}
}
