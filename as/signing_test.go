package as

import (
	"net/url"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// Access tokens are ES256 by default, RS256 and EdDSA selectable.
// Each configured algorithm signs the RFC 9068 token, names it in the JWS
// header (RFC 7515 §4.1.1) with a kid, and the published JWKS verifies it.
func TestAccessTokensAreSignedWithTheConfiguredAlgorithm(t *testing.T) {
	cases := []struct {
		name       string
		configured string
		want       jose.SignatureAlgorithm
	}{
		{"signs with ES256 when nothing is configured", "", jose.ES256},
		{"signs with ES256 when asked", "ES256", jose.ES256},
		{"signs with RS256 when asked", "RS256", jose.RS256},
		{"signs with EdDSA when asked", "EdDSA", jose.EdDSA},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.SigningAlg = tc.configured })
			resp, body := h.post("/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", ciSecret)
			if resp.StatusCode != 200 {
				t.Fatalf("client credentials: %d %v", resp.StatusCode, body)
			}
			token := body["access_token"].(string)
			jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256, jose.RS256, jose.EdDSA})
			if err != nil {
				t.Fatal(err)
			}
			hd := jws.Signatures[0].Header
			if got := jose.SignatureAlgorithm(hd.Algorithm); got != tc.want {
				t.Errorf("alg = %s, want %s", got, tc.want)
			}
			if hd.KeyID == "" {
				t.Error("no kid in the header")
			}
			typ, claims := h.claims(token) // verified against /jwks.json
			if typ != "at+jwt" || claims["aud"] != mcpURI {
				t.Errorf("typ %q aud %v", typ, claims["aud"])
			}
		})
	}
}
