package as

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// directory is a PersonDirectory of fixed people.
type directory map[string]Person

func (d directory) Person(_ context.Context, sub string) (Person, bool, error) {
	p, ok := d[sub]
	return p, ok, nil
}

func tokenClaimsHarness(t *testing.T, people PersonDirectory) *harness {
	return exchangeHarness(t, func(c *Config) {
		c.Attributes = people
		for i := range c.Resources {
			switch c.Resources[i].URI {
			case mcpURI:
				c.Resources[i].TokenClaims = []string{"email", "groups", "tenant"}
			case otherURI:
				c.Resources[i].TokenClaims = []string{"groups"}
			}
		}
	})
}

func TestAccessTokensCarryThePersonClaimsOfTheirResource(t *testing.T) {
	h := tokenClaimsHarness(t, directory{"alice": {Email: "alice@example.com", Groups: []string{"ops", "dev"}, Tenant: "acme"}})
	user := h.codeFlow("mcp:tools")
	_, c := h.claims(user.AccessToken)
	if c["email"] != "alice@example.com" || c["tenant"] != "acme" || !slices.Equal(toStrings(c["groups"]), []string{"ops", "dev"}) {
		t.Errorf("claims %v", c)
	}
	// Token exchange keeps them, as the target resource's TokenClaims say.
	resp, body := h.post("/token", exchangeForm(user.AccessToken, otherURI), "mcp-server", mcpSrvSecret)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	_, ec := h.claims(body["access_token"].(string))
	if !slices.Equal(toStrings(ec["groups"]), []string{"ops", "dev"}) || ec["email"] != nil || ec["tenant"] != nil {
		t.Errorf("exchanged claims %v", ec)
	}
	// A refreshed token keeps them too.
	resp, body = h.post("/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {user.RefreshToken}, "client_id": {"demo-app"}}, "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("refresh: %d %v", resp.StatusCode, body)
	}
	if _, rc := h.claims(body["access_token"].(string)); rc["tenant"] != "acme" {
		t.Errorf("refreshed claims %v", rc)
	}
	// Introspection answers them for the resource's server.
	_, in := h.post("/introspect", url.Values{"token": {user.AccessToken}}, "rs", rsSecret)
	if in["email"] != "alice@example.com" || in["tenant"] != "acme" {
		t.Errorf("introspection %v", in)
	}
}

func TestClientCredentialsTokensCarryNoPersonClaims(t *testing.T) {
	// A client whose id is a person's name gets none of theirs.
	h := tokenClaimsHarness(t, directory{"ci-bot": {Email: "x@example.com", Groups: []string{"ops"}, Tenant: "t"}})
	resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"}, "resource": {mcpURI}}, "ci-bot", ciSecret)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", resp.StatusCode, body)
	}
	_, c := h.claims(body["access_token"].(string))
	for _, k := range []string{"email", "groups", "tenant"} {
		if c[k] != nil {
			t.Errorf("claim %s = %v in a client credentials token", k, c[k])
		}
	}
}

func TestTokenClaimsWithoutAttributesAndUnknownNames(t *testing.T) {
	h := tokenClaimsHarness(t, directory{})
	_, c := h.claims(h.codeFlow("mcp:tools").AccessToken)
	if c["email"] != nil || c["groups"] != nil {
		t.Errorf("claims of a person without attributes %v", c)
	}
	_, err := New(context.Background(), Config{Issuer: "http://x.example", Resources: []Resource{{URI: mcpURI, TokenClaims: []string{"phone"}}},
		Store: h.store, Secret: []byte(strings.Repeat("s", 32))})
	if err == nil || !strings.Contains(err.Error(), "TokenClaims") {
		t.Errorf("an unknown claim: %v", err)
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}
