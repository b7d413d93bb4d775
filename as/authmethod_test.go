package as

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
)

// TestRegisteredAuthMethodIsRequired: a registered client authenticates at
// /token with the token_endpoint_auth_method it registered (RFC 7591 §2),
// client_secret_post in the body or client_secret_basic in the header, and
// the other way is invalid_client even with the right secret. Configured
// clients, which register nothing, may use either.
func TestRegisteredAuthMethodIsRequired(t *testing.T) {
	h := newHarness(t, nil)
	const sec = "registered-secret-0123456789abcdef"
	for _, m := range []string{authSecretPost, authSecretBasic} {
		err := h.store.CreateClient(context.Background(), &storage.Client{
			ID: "reg-" + m, SecretHash: h.as.clients.hasher.Hash(sec),
			TokenEndpointAuthMethod: m, GrantTypes: []string{"client_credentials"}, Resources: []string{mcpURI},
			Source: "dcr", CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now(),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	type call struct {
		name, id, secret string
		basic            bool
		status           int
	}
	for _, tc := range []call{
		{"client_secret_post in the body", "reg-client_secret_post", sec, false, 200},
		{"client_secret_post by HTTP Basic", "reg-client_secret_post", sec, true, 401},
		{"client_secret_basic by HTTP Basic", "reg-client_secret_basic", sec, true, 200},
		{"client_secret_basic in the body", "reg-client_secret_basic", sec, false, 401},
		{"client_secret_post, wrong secret, in the body", "reg-client_secret_post", sec + "x", false, 401},
		{"a configured client by HTTP Basic", "ci-bot", ciSecret, true, 200},
		{"a configured client in the body", "ci-bot", ciSecret, false, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := url.Values{"grant_type": {"client_credentials"}}
			user, pass := tc.id, tc.secret
			if !tc.basic {
				form.Set("client_id", tc.id)
				form.Set("client_secret", tc.secret)
				user, pass = "", ""
			}
			resp, body := h.post("/token", form, user, pass)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%v %v), want %d", resp.StatusCode, body["error"], body["error_description"], tc.status)
			}
			if tc.status == 401 && body["error"] != "invalid_client" {
				t.Errorf("error = %v, want invalid_client", body["error"])
			}
			if tc.status == 401 && tc.secret == sec && !strings.Contains(body["error_description"].(string), "registered client_secret_") {
				t.Errorf("description %q does not name the registered method", body["error_description"])
			}
		})
	}
}
