package as

import (
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// TestValidJKT: a thumbprint is 43 base64url characters decoding to 32
// bytes. Fails if a value the decoder reads without error but to fewer
// bytes (it skips CR and LF) is taken for one.
func TestValidJKT(t *testing.T) {
	for v, want := range map[string]bool{
		strings.Repeat("A", 43):        true,
		strings.Repeat("_", 43):        true,
		strings.Repeat("A", 42):        false,
		strings.Repeat("A", 44):        false,
		strings.Repeat("A", 42) + "\n": false,
		"\r" + strings.Repeat("A", 42): false,
		strings.Repeat("A", 42) + "!":  false,
		strings.Repeat("A", 42) + "=":  false,
	} {
		if got := validJKT(v); got != want {
			t.Errorf("validJKT(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestDPoPProofAtRefreshOfAnUnboundToken: a refresh token bound to no key
// (a confidential client's) may be refreshed with a DPoP proof of any key,
// and the new access token is bound to it (RFC 9449 §5). Fails if an
// unbound refresh token is treated as bound.
func TestDPoPProofAtRefreshOfAnUnboundToken(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("web-app", webSecret, "mcp:tools", "offline_access")
	verifier := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI)))
	form := url.Values{"grant_type": {"authorization_code"}, "code": {u.Query().Get("code")}, "code_verifier": {verifier}, "redirect_uri": {appRedirect}}
	resp, body := h.postProof(form, "web-app", webSecret)
	if resp.StatusCode != 200 || body["token_type"] == "DPoP" {
		t.Fatalf("redeem without proof: %d %v", resp.StatusCode, body)
	}
	k := newKey(t)
	resp, body = h.postProof(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {body["refresh_token"].(string)}}, "web-app", webSecret, h.proof(k, ""))
	if resp.StatusCode != 200 || body["token_type"] != "DPoP" {
		t.Fatalf("refresh with a proof: %d %v", resp.StatusCode, body)
	}
	if _, c := h.claims(body["access_token"].(string)); c["cnf"].(map[string]any)["jkt"] != k.Thumbprint() {
		t.Errorf("cnf %v", c["cnf"])
	}
}
