package as

import (
	"context"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// The MCP Go SDK's discovery accepts the metadata at every location it may
// try: issuer identical, PKCE advertised, safe endpoint URLs.
func TestMCPGoSDKDiscoversTheMetadata(t *testing.T) {
	h := newHarness(t, nil)
	for _, p := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		m, err := oauthex.GetAuthServerMeta(context.Background(), h.issuer+p, h.issuer, http.DefaultClient)
		if err != nil || m == nil {
			t.Fatalf("%s: %v %v", p, m, err)
		}
		if m.TokenEndpoint != h.issuer+"/token" || len(m.CodeChallengeMethodsSupported) != 1 || m.CodeChallengeMethodsSupported[0] != "S256" {
			t.Errorf("%s: %+v", p, m)
		}
	}
}
