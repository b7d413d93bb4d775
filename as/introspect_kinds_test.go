package as

import (
	"context"
	"net/url"
	"testing"

	"golang.org/x/oauth2"
)

// TestIntrospectingARefreshToken: a refresh token is found without a
// token_type_hint (RFC 7662 §2.1: the hint only orders the lookups), by
// the client it was issued to; a declared resource server learns about
// access tokens for its resource, never about other clients' refresh
// tokens (RFC 7662 §4).
func TestIntrospectingARefreshToken(t *testing.T) {
	h := newHarness(t, nil)
	conf := h.oauthConfig("web-app", webSecret)
	verifier := oauth2.GenerateVerifier()
	u := h.browser().authorize(conf.AuthCodeURL("state-123456", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", mcpURI)))
	tok, err := conf.Exchange(context.Background(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil || tok.RefreshToken == "" {
		t.Fatalf("code flow: %v %+v", err, tok)
	}
	for _, tc := range []struct {
		name       string
		form       url.Values
		user, pass string
		active     bool
	}{
		{"by its client, without a hint", url.Values{"token": {tok.RefreshToken}}, "web-app", webSecret, true},
		{"by its client, with the access_token hint", url.Values{"token": {tok.RefreshToken}, "token_type_hint": {"access_token"}}, "web-app", webSecret, true},
		{"by the resource server of its audience", url.Values{"token": {tok.RefreshToken}}, "rs", rsSecret, false},
		{"by the resource server, with the refresh_token hint", url.Values{"token": {tok.RefreshToken}, "token_type_hint": {"refresh_token"}}, "rs", rsSecret, false},
		{"the access token, by the resource server", url.Values{"token": {tok.AccessToken}}, "rs", rsSecret, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post("/introspect", tc.form, tc.user, tc.pass)
			if resp.StatusCode != 200 || body["active"] != tc.active {
				t.Fatalf("%d %v, want active %v", resp.StatusCode, body, tc.active)
			}
			if tc.active && tc.form.Get("token") == tok.RefreshToken && (body["token_type"] != "refresh_token" || body["client_id"] != "web-app") {
				t.Fatalf("%v, want web-app's refresh token", body)
			}
			if !tc.active && len(body) != 1 {
				t.Fatalf("%v, want active:false alone", body)
			}
		})
	}
}
