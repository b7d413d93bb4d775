package as

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestClientAuthenticationForms pins how authenticate reads the credentials
// of a token request (RFC 6749 §2.3, RFC 7523 §2.2): either assertion
// parameter alone selects assertion authentication, a client_id in the body
// must equal the HTTP Basic user, and the assertion is refused by size,
// shape and exp before fosite sees it. Each case names the check by the
// error_description only that check gives.
func TestClientAuthenticationForms(t *testing.T) {
	h := newHarness(t, nil)
	b64 := base64.RawURLEncoding.EncodeToString
	header := b64([]byte(`{"alg":"ES256","kid":"k1"}`))
	noExp := b64([]byte(`{"iss":"jwt-bot","sub":"jwt-bot","aud":"` + h.issuer + `","jti":"no-exp"}`))
	assertionForm := func(a string) url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {clientAssertionType}, "client_assertion": {a}}
	}
	for _, tc := range []struct {
		name       string
		form       url.Values
		user, pass string
		status     int
		code, hint string // hint: in error_description
	}{
		// Fails if an assertion needs both parameters to be recognised:
		// the secret would then authenticate the client.
		{"refuses a client_assertion without client_assertion_type, even with a valid secret",
			url.Values{"grant_type": {"client_credentials"}, "client_id": {"ci-bot"}, "client_secret": {ciSecret}, "client_assertion": {"a.b.c"}},
			"", "", 401, "invalid_client", "The client_assertion_type must be " + clientAssertionType + "."},
		{"refuses a client_assertion_type without client_assertion, even with valid HTTP Basic credentials",
			url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {clientAssertionType}},
			"ci-bot", ciSecret, 401, "invalid_client", "The client assertion is not a JWS."},
		{"accepts HTTP Basic with the same client_id in the body",
			url.Values{"grant_type": {"client_credentials"}, "client_id": {"ci-bot"}},
			"ci-bot", ciSecret, 200, "", ""},
		{"accepts HTTP Basic without client_id in the body",
			url.Values{"grant_type": {"client_credentials"}},
			"ci-bot", ciSecret, 200, "", ""},
		{"refuses HTTP Basic with another client_id in the body",
			url.Values{"grant_type": {"client_credentials"}, "client_id": {"web-app"}},
			"ci-bot", ciSecret, 400, "invalid_request", "client_id in the body differs from the HTTP Basic user."},
		{"refuses HTTP Basic with a client_secret in the body too",
			url.Values{"grant_type": {"client_credentials"}, "client_secret": {ciSecret}},
			"ci-bot", ciSecret, 400, "invalid_request", "Use one client authentication method, not several."},
		// 8192 bytes is the largest assertion read; this one is no JWS.
		{"reads an assertion of 8192 bytes", assertionForm(strings.Repeat("a", 8192)),
			"", "", 401, "invalid_client", "The client assertion is not a JWS."},
		{"refuses an assertion of 8193 bytes", assertionForm(strings.Repeat("a", 8193)),
			"", "", 401, "invalid_client", "The client assertion is too large."},
		{"refuses an assertion whose header is not base64url", assertionForm("!!!." + noExp + ".c2ln"),
			"", "", 401, "invalid_client", "The client assertion is not a JWS."},
		{"refuses an assertion whose payload is not base64url", assertionForm(header + ".!!!.c2ln"),
			"", "", 401, "invalid_client", "The client assertion is not a JWS."},
		{"accepts a signed assertion with exp", assertionForm(h.assertion(t, h.jwtKey, "jti-forms", h.issuer, time.Minute)),
			"", "", 200, "", ""},
		// Fails if a JSON payload without exp gets past the exp check.
		{"refuses an assertion without exp", assertionForm(header + "." + noExp + ".c2ln"),
			"", "", 401, "invalid_client", "The client assertion must carry exp."},
		{"refuses an assertion whose payload is not JSON", assertionForm(header + "." + b64([]byte("not json")) + ".c2ln"),
			"", "", 401, "invalid_client", "The client assertion must carry exp."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post("/token", tc.form, tc.user, tc.pass)
			desc, _ := body["error_description"].(string)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%v: %s), want %d", resp.StatusCode, body["error"], desc, tc.status)
			}
			if tc.status == 200 {
				if body["access_token"] == nil {
					t.Errorf("no access token: %v", body)
				}
				return
			}
			if body["error"] != tc.code || !strings.Contains(desc, tc.hint) || body["access_token"] != nil {
				t.Errorf("%v: %q; want %s saying %q", body["error"], desc, tc.code, tc.hint)
			}
		})
	}
}
