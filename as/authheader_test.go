package as

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestTwoAuthorizationHeadersAreInvalidRequest: /token, /introspect and
// /revoke refuse a request carrying two Authorization headers, even when the
// first one alone is valid, so no parser picks one silently.
func TestTwoAuthorizationHeadersAreInvalidRequest(t *testing.T) {
	h := newHarness(t, nil)
	basic := func(id, secret string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
	}
	good, other := basic("ci-bot", ciSecret), basic("rs", rsSecret)
	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"mcp:tools"}}},
		{"/introspect", url.Values{"token": {"not-a-token"}}},
		{"/revoke", url.Values{"token": {"not-a-token"}}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			send := func(auth ...string) (int, map[string]any, http.Header) {
				req, _ := http.NewRequest(http.MethodPost, h.issuer+tc.path, strings.NewReader(tc.form.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				for _, a := range auth {
					req.Header.Add("Authorization", a)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var m map[string]any
				_ = json.NewDecoder(resp.Body).Decode(&m)
				return resp.StatusCode, m, resp.Header
			}
			// The client alone is accepted (introspection of an unknown
			// token is 200 active=false, revocation 200), so what follows
			// is about the second header only.
			if code, body, _ := send(good); code != http.StatusOK {
				t.Fatalf("one header: %d %v", code, body)
			}
			for name, pair := range map[string][]string{"another client": {good, other}, "the same twice": {good, good}, "basic and bearer": {good, "Bearer x"}} {
				code, body, hdr := send(pair...)
				if code != http.StatusBadRequest || body["error"] != "invalid_request" {
					t.Errorf("two headers (%s): %d error=%v, want 400 invalid_request", name, code, body["error"])
				}
				if hdr.Get("Cache-Control") != "no-store" {
					t.Errorf("two headers: Cache-Control = %q", hdr.Get("Cache-Control"))
				}
			}
		})
	}
}
