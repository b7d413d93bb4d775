package as

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// oneSentence reports why d is not one clear sentence, or "".
func oneSentence(d string) string {
	switch {
	case d == "":
		return "empty"
	case !strings.HasSuffix(d, "."):
		return "does not end with a period"
	case strings.Contains(d, "Make sure"):
		return "carries fosite's stock hint"
	}
	inner := strings.NewReplacer("e.g.", "eg", "i.e.", "ie").Replace(strings.TrimSuffix(d, "."))
	if strings.Contains(inner, ". ") {
		return "more than one sentence"
	}
	return ""
}

// TestErrorDescriptionsAreOneSentence: every error an endpoint answers with
// (RFC 6749 §4.1.2.1, §5.2; RFC 7009 §2.2.1; RFC 7662 §2.3) carries one
// clear error_description, not fosite's generic text followed by a hint
// that repeats it.
func TestErrorDescriptionsAreOneSentence(t *testing.T) {
	h := newHarness(t, nil)
	cases := []struct {
		name, path string
		form       url.Values
		user, pass string
		wantCode   string
		wantDesc   string // exact, when set
	}{
		{"a wrong client secret", "/token", url.Values{"grant_type": {"client_credentials"}}, "ci-bot", "wrong-secret-0123456789", "invalid_client", "Client authentication failed."},
		{"an unknown client", "/token", url.Values{"grant_type": {"client_credentials"}}, "nobody", "whatever-secret-0123456789", "invalid_client", "The client is unknown."},
		{"no client authentication", "/token", url.Values{"grant_type": {"client_credentials"}}, "", "", "invalid_client", ""},
		{"a missing grant type", "/token", url.Values{"scope": {"mcp:tools"}}, "ci-bot", ciSecret, "invalid_request", ""},
		{"the password grant", "/token", url.Values{"grant_type": {"password"}, "username": {"alice"}, "password": {"x"}}, "ci-bot", ciSecret, "unsupported_grant_type", ""},
		{"an unknown refresh token", "/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"abc.def"}, "client_id": {"demo-app"}}, "", "", "invalid_grant", ""},
		{"an unknown code", "/token", url.Values{"grant_type": {"authorization_code"}, "code": {"abc.def"}, "code_verifier": {strings.Repeat("v", 43)}, "redirect_uri": {appRedirect}, "client_id": {"demo-app"}}, "", "", "invalid_grant", ""},
		{"no grantable scope", "/token", url.Values{"grant_type": {"client_credentials"}, "scope": {"openid"}}, "ci-bot", ciSecret, "invalid_scope", ""},
		{"a public client asking for client credentials", "/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {"demo-app"}}, "", "", "unauthorized_client", ""},
		{"introspection without authentication", "/introspect", url.Values{"token": {"x"}}, "", "", "invalid_client", ""},
		{"introspection without a token", "/introspect", url.Values{"token_type_hint": {"access_token"}}, "rs", rsSecret, "invalid_request", ""},
		{"revocation without a token", "/revoke", url.Values{"client_id": {"demo-app"}}, "", "", "invalid_request", ""},
		{"revocation with a wrong secret", "/revoke", url.Values{"token": {"x"}}, "web-app", "wrong-secret-0123456789", "invalid_client", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.post(tc.path, tc.form, tc.user, tc.pass)
			if resp.StatusCode < 400 || body["error"] != tc.wantCode {
				t.Fatalf("%d %v, want error %s", resp.StatusCode, body, tc.wantCode)
			}
			d, _ := body["error_description"].(string)
			if why := oneSentence(d); why != "" {
				t.Errorf("error_description %q: %s", d, why)
			}
			if tc.wantDesc != "" && d != tc.wantDesc {
				t.Errorf("error_description %q, want %q", d, tc.wantDesc)
			}
		})
	}
	t.Run("an authorization error redirect", func(t *testing.T) {
		conf := h.oauthConfig("demo-app", "")
		u := redirected(t, h.browser().get(conf.AuthCodeURL("s", oauth2.SetAuthURLParam("code_challenge", strings.Repeat("a", 43)),
			oauth2.SetAuthURLParam("code_challenge_method", "plain"))))
		d := u.Query().Get("error_description")
		if why := oneSentence(d); why != "" {
			t.Errorf("error_description %q: %s", d, why)
		}
	})
	t.Run("a repeated parameter at the authorization endpoint", func(t *testing.T) {
		conf := h.oauthConfig("demo-app", "")
		p := h.browser().get(conf.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())) + "&scope=a&scope=b")
		if p.StatusCode != http.StatusSeeOther {
			t.Fatalf("status %d", p.StatusCode)
		}
		u := redirected(t, p)
		if d := u.Query().Get("error_description"); oneSentence(d) != "" || u.Query().Get("error") != "invalid_request" {
			t.Errorf("error %q description %q", u.Query().Get("error"), d)
		}
	})
}
