package as

import (
	"net/url"
	"testing"

	"github.com/mcpauth/mcpauth/storage"
)

// exchangeOnStore runs a delegation chain and its revocation on store: the
// grant family (request ID) that links exchanged tokens to the user's grant
// must hold on every backend, not just in memory.
func exchangeOnStore(t *testing.T, store storage.Store) {
	h := exchangeHarness(t, func(c *Config) { c.Store = store })
	user := h.codeFlow("mcp:tools")
	first := h.exchange(t, user.AccessToken, otherURI, "mcp-server", mcpSrvSecret)["access_token"].(string)
	second := h.exchange(t, first, thirdURI, "other-rs", otherRSSecret)["access_token"].(string)
	if _, c := h.claims(second); c["sub"] != "alice" || c["aud"] != thirdURI {
		t.Fatalf("claims %v", c)
	}
	if !introspectAs(t, h, first, "mcp-server", mcpSrvSecret) || !introspectAs(t, h, second, "other-rs", otherRSSecret) {
		t.Fatal("exchanged tokens not active")
	}
	if resp, _ := h.post("/revoke", url.Values{"token": {user.RefreshToken}, "client_id": {"demo-app"}}, "", ""); resp.StatusCode != 200 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if introspectAs(t, h, first, "mcp-server", mcpSrvSecret) || introspectAs(t, h, second, "other-rs", otherRSSecret) {
		t.Error("exchanged tokens still active after the user's grant was revoked")
	}
	resp, body := h.post("/token", exchangeForm(user.AccessToken, otherURI), "mcp-server", mcpSrvSecret)
	if resp.StatusCode != 400 || body["error"] != "invalid_grant" {
		t.Errorf("exchanging a revoked token: %d %v", resp.StatusCode, body)
	}
}

// TestTokenExchangeOnPostgreSQL needs AUTHSERVER_TEST_POSTGRES (skipped
// when unset unless CI is set).
func TestTokenExchangeOnPostgreSQL(t *testing.T) {
	s := openPostgres(t, 4)
	exchangeOnStore(t, s)
}

func TestTokenExchangeOnSQLite(t *testing.T) {
	s := openSQLite(t)
	exchangeOnStore(t, s)
}
