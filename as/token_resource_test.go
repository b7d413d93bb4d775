package as

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ory/fosite"
)

// TestClientCredentialsRefusalsAreOurs: the client-credentials refusals of
// resourcePreHandler carry its own description; fosite's handler, which
// runs after it, would refuse a client without the grant with another text.
func TestClientCredentialsRefusalsAreOurs(t *testing.T) {
	h := newHarness(t, nil)
	cc := url.Values{"grant_type": {"client_credentials"}}
	for _, tc := range []struct {
		name       string
		form       url.Values
		user, pass string
	}{
		{"a confidential client without the grant", cc, "web-app", webSecret},
		{"a public client", url.Values{"grant_type": {"client_credentials"}, "client_id": {"demo-app"}}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post("/token", tc.form, tc.user, tc.pass)
			desc, _ := body["error_description"].(string)
			if resp.StatusCode != 400 || body["error"] != "unauthorized_client" ||
				!strings.Contains(desc, "This client may not use the client_credentials grant.") {
				t.Fatalf("got %d %v, want 400 unauthorized_client naming the client_credentials grant", resp.StatusCode, body)
			}
		})
	}
}

// TestNoDefaultResourceIsInvalidTarget: a request without `resource` by a
// client allowed several resources, none of them the default, is
// invalid_target (RFC 8707 §2), not a token for the first of them.
func TestNoDefaultResourceIsInvalidTarget(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Resources[0].Default = false
		c.Clients = append(c.Clients, Client{ID: "two-res", Secret: "two-res-secret-0123456789abcdef",
			GrantTypes: []string{"client_credentials"}, Resources: []string{mcpURI, otherURI}})
	})
	resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "two-res", "two-res-secret-0123456789abcdef")
	if resp.StatusCode != 400 || body["error"] != "invalid_target" ||
		body["error_description"] != "No resource was requested and there is no default resource for this client." {
		t.Fatalf("got %d %v, want 400 invalid_target for no default resource", resp.StatusCode, body)
	}
	// Naming one of them works.
	resp, body = h.post("/token", url.Values{"grant_type": {"client_credentials"}, "resource": {otherURI}}, "two-res", "two-res-secret-0123456789abcdef")
	if resp.StatusCode != 200 {
		t.Fatalf("with resource: %d %v", resp.StatusCode, body)
	}
	if _, c := h.claims(body["access_token"].(string)); c["aud"] != otherURI {
		t.Fatalf("aud = %v, want %s", c["aud"], otherURI)
	}
}

// TestCappedTTL pins the lifetime of a token capped by its session's
// access-token expiry: AccessTokenTTL when the cap is later, the time left
// when it is sooner, and no token when less than a second is left.
func TestCappedTTL(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AccessTokenTTL = 10 * time.Minute })
	now := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name   string
		left   time.Duration
		want   time.Duration
		wantOK bool
	}{
		{"a cap after AccessTokenTTL", time.Hour, 10 * time.Minute, true},
		{"a cap exactly at AccessTokenTTL", 10 * time.Minute, 10 * time.Minute, true},
		{"a cap sooner than AccessTokenTTL", 5 * time.Minute, 5 * time.Minute, true},
		{"exactly one second left", time.Second, time.Second, true},
		{"less than a second left", time.Second - time.Millisecond, time.Second - time.Millisecond, false},
		{"a cap in the past", -time.Second, -time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sess := newSession("alice")
			sess.SetExpiresAt(fosite.AccessToken, now.Add(tc.left))
			ttl, ok := h.as.cappedTTL(sess, now)
			if ttl != tc.want || ok != tc.wantOK {
				t.Fatalf("cappedTTL = %s, %v; want %s, %v", ttl, ok, tc.want, tc.wantOK)
			}
		})
	}
}
