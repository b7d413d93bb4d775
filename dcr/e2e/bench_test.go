package e2e_test

import (
	"testing"

	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/as"
)

// BenchmarkAuthorizeWarmCIMDAgainstPreRegistered checks that authorization
// for a CIMD client with a warm document cache costs no more than for a
// pre-registered (configuration) client. Each
// operation is one whole GET /authorize over HTTP for a logged-in person whose
// consent is remembered: client lookup, redirect URI and PKCE checks, resource
// and scopes, consent lookup, a code written to storage and the 303. Only the
// client differs: the same Claude profile, once from configuration, once as a
// Client ID Metadata Document fetched before the timer starts.
//
//	go test ./dcr/e2e -run XXX -bench AuthorizeWarmCIMD -benchtime 2000x -count 3
func BenchmarkAuthorizeWarmCIMDAgainstPreRegistered(b *testing.B) {
	const redirect = "https://claude.ai/api/mcp/auth_callback"
	w := newWorld(b, func(c *as.Config) {
		c.Clients = append(c.Clients, as.Client{ID: "claude-static", Public: true, Name: "Claude", RedirectURIs: []string{redirect}})
	})
	cimdID := w.docs.URL + "/claude.json"
	w.publish("/claude.json", map[string]any{
		"client_id": cimdID, "client_name": "Claude", "redirect_uris": []string{redirect},
		"grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none",
	})
	browser := w.browser()
	verifier := oauth2.GenerateVerifier()
	for _, c := range []struct{ name, id string }{
		{"pre-registered", "claude-static"},
		{"CIMD warm cache", cimdID},
	} {
		authURL := w.oauth(c.id, "", redirect).AuthCodeURL("state-0123456789", oauth2.S256ChallengeOption(verifier))
		w.authorizeAs(browser, authURL) // log in, consent, fetch the document
		b.Run(c.name, func(b *testing.B) {
			w.t = b
			b.ReportAllocs()
			for b.Loop() {
				w.authorizeAs(browser, authURL)
			}
		})
	}
}
