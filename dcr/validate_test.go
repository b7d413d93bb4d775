package dcr_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/dcr"
)

// TestAcceptedMetadataIsNormalised pins what validate makes of accepted
// metadata: duplicates dropped, application_type inferred, scope narrowed.
func TestAcceptedMetadataIsNormalised(t *testing.T) {
	cases := []struct {
		name       string
		policy     func(*dcr.Policy)
		body       string
		wantURIs   []string
		wantApp    string
		wantGrants []string
		wantScope  string
	}{
		{"drops a repeated redirect URI", nil,
			`{"redirect_uris":["https://a.example/cb","https://a.example/cb","https://a.example/2"],"token_endpoint_auth_method":"none"}`,
			[]string{"https://a.example/cb", "https://a.example/2"}, "web", []string{"authorization_code"}, "mcp:read mcp:write"},
		{"drops a repeated grant type", nil,
			`{"redirect_uris":["https://a.example/cb"],"grant_types":["refresh_token","authorization_code","refresh_token"]}`,
			[]string{"https://a.example/cb"}, "web", []string{"refresh_token", "authorization_code"}, "mcp:read mcp:write"},
		{"drops a repeated scope", nil,
			`{"redirect_uris":["https://a.example/cb"],"scope":"mcp:write mcp:write"}`,
			[]string{"https://a.example/cb"}, "web", []string{"authorization_code"}, "mcp:write"},
		{"makes a public loopback client native", nil,
			`{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"none"}`,
			[]string{"http://127.0.0.1/cb"}, "native", []string{"authorization_code"}, "mcp:read mcp:write"},
		{"leaves a confidential loopback client web", nil,
			`{"redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"client_secret_basic"}`,
			[]string{"http://127.0.0.1/cb"}, "web", []string{"authorization_code"}, "mcp:read mcp:write"},
		{"makes a confidential client with a private-use scheme native", nil,
			`{"redirect_uris":["com.example.app:/cb"],"token_endpoint_auth_method":"client_secret_basic"}`,
			[]string{"com.example.app:/cb"}, "native", []string{"authorization_code"}, "mcp:read mcp:write"},
		{"keeps a declared native type for an https client", nil,
			`{"redirect_uris":["https://a.example/cb"],"application_type":"native"}`,
			[]string{"https://a.example/cb"}, "native", []string{"authorization_code"}, "mcp:read mcp:write"},
		{"applies the redirect host allow list only to URIs with a host",
			func(p *dcr.Policy) { p.RedirectHostAllow = []string{"a.example"} },
			`{"redirect_uris":["https://a.example/cb","com.example.app:/cb"],"token_endpoint_auth_method":"none"}`,
			[]string{"https://a.example/cb", "com.example.app:/cb"}, "native", []string{"authorization_code"}, "mcp:read mcp:write"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			if tc.policy != nil {
				tc.policy(&p)
			}
			e := newEnv(t, p)
			r := e.register(tc.body)
			if r.status != http.StatusCreated {
				t.Fatalf("status %d, want 201: %s", r.status, r.body)
			}
			ci := r.info(t)
			c := e.stored(t, ci.ClientID)
			if !slices.Equal(ci.RedirectURIs, tc.wantURIs) || !slices.Equal(c.RedirectURIs, tc.wantURIs) {
				t.Errorf("redirect_uris %q, stored %q; want %q", ci.RedirectURIs, c.RedirectURIs, tc.wantURIs)
			}
			if ci.ApplicationType != tc.wantApp || c.ApplicationType != tc.wantApp {
				t.Errorf("application_type %q, stored %q; want %q", ci.ApplicationType, c.ApplicationType, tc.wantApp)
			}
			if !slices.Equal(ci.GrantTypes, tc.wantGrants) || !slices.Equal(c.GrantTypes, tc.wantGrants) {
				t.Errorf("grant_types %q, stored %q; want %q", ci.GrantTypes, c.GrantTypes, tc.wantGrants)
			}
			if ci.Scope != tc.wantScope {
				t.Errorf("scope %q, want %q", ci.Scope, tc.wantScope)
			}
		})
	}
}

func TestSafeString(t *testing.T) {
	cases := []struct {
		s    string
		want bool
	}{
		{"Claude", true},
		{"Café ☕ 日本", true},
		{"", true},
		{"tab\there", false},
		{"new\nline", false},
		{"del\x7f", false},
		{"c1 \u0085 control", false},
		{"zero\u200bwidth", false},
		{"bidi \u202e override", false},
		{"replacement \ufffd character", false},
		{"line\u2028separator", false},
		{"paragraph\u2029separator", false},
		{"invalid \xff UTF-8", false},
	}
	for _, tc := range cases {
		if got := dcr.SafeString(tc.s); got != tc.want {
			t.Errorf("SafeString(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// TestWebURLFields pins the rule for client_uri, logo_uri, tos_uri,
// policy_uri and jwks_uri: an absolute https URL with a host and without
// userinfo or fragment.
func TestWebURLFields(t *testing.T) {
	cases := []struct {
		url string
		ok  bool
	}{
		{"https://a.example/", true},
		{"https://a.example/~team/logo.png", true},
		{"https://a.example:8443/tos?lang=en", true},
		{"http://a.example/", false},
		{"https://a.example/a b", false},
		{"https://a.example/\u00e9", false},
		{"https://:443/", false},
		{"https:///path", false},
		{"https://user@a.example/", false},
		{"https://a.example/#", false},
		{"https://a.example/#top", false},
		{"//a.example/", false},
	}
	for _, tc := range cases {
		for _, field := range []string{"client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri"} {
			method := "none"
			if field == "jwks_uri" {
				method = "private_key_jwt"
			}
			e := newEnv(t, defaultPolicy())
			r := e.register(`{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"` + method + `","` + field + `":` + mustJSON(tc.url) + `}`)
			if tc.ok {
				if r.status != http.StatusCreated {
					t.Errorf("%s %q: status %d, want 201: %s", field, tc.url, r.status, r.body)
				}
				continue
			}
			m := r.json(t)
			want := field + ": must be an absolute https URL without userinfo or fragment"
			if d, _ := m["error_description"].(string); r.status != http.StatusBadRequest || m["error"] != "invalid_client_metadata" || !strings.HasPrefix(d, want) {
				t.Errorf("%s %q: %d %v; want 400 invalid_client_metadata %q", field, tc.url, r.status, m, want)
			}
		}
	}
}
