package dcr_test

import (
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/dcr"
)

// TestCheckRedirectURI pins each rule of CheckRedirectURI with the reason it
// gives, so that no check can be dropped or widened unseen.
func TestCheckRedirectURI(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		kind dcr.RedirectKind
		err  string // the reason, when refused
	}{
		{"accepts https", "https://claude.ai/api/mcp/auth_callback", dcr.RedirectHTTPS, ""},
		{"accepts a tilde, the last printable ASCII character before DEL", "https://a.example/~user/cb", dcr.RedirectHTTPS, ""},
		{"accepts http on 127.0.0.1", "http://127.0.0.1:33418/", dcr.RedirectLoopback, ""},
		{"accepts http on [::1]", "http://[::1]/cb", dcr.RedirectLoopback, ""},
		{"accepts http on localhost", "http://localhost:8787/callback", dcr.RedirectLoopback, ""},
		{"accepts a private-use scheme with host and path", "cursor://anysphere.cursor-mcp/oauth/callback", dcr.RedirectPrivateUse, ""},
		{"accepts a private-use scheme with a path only", "com.example.app:/cb", dcr.RedirectPrivateUse, ""},
		{"accepts a private-use scheme with a host only", "x-app://host", dcr.RedirectPrivateUse, ""},
		{"refuses an empty URI", "", 0, "is empty"},
		{"refuses a fragment", "https://a.example/cb#f", 0, "has a fragment"},
		{"refuses a wildcard", "https://*.example/cb", 0, "has a wildcard"},
		{"refuses a space", "https://a.example/a b", 0, "contains whitespace, control characters or backslashes"},
		{"refuses a control character", "https://a.example/a\x01b", 0, "contains whitespace, control characters or backslashes"},
		{"refuses DEL", "https://a.example/a\x7fb", 0, "contains whitespace, control characters or backslashes"},
		{"refuses a backslash", `https://a.example/a\b`, 0, "contains whitespace, control characters or backslashes"},
		{"refuses non-ASCII", "https://аpple.example/cb", 0, "contains non-ASCII characters (use punycode or percent-encoding)"},
		{"refuses a relative URI", "/cb", 0, "is not an absolute URI"},
		{"refuses a URI that does not parse", "https://a.example:x/cb", 0, "is not an absolute URI"},
		{"refuses userinfo", "https://user@a.example/cb", 0, "has userinfo"},
		{"refuses userinfo on loopback", "http://evil.example@127.0.0.1/cb", 0, "has userinfo"},
		{"refuses https without host", "https:///cb", 0, "has no host"},
		{"refuses opaque https", "https:a.example", 0, "has no host"},
		{"refuses http without host", "http:///cb", 0, "has no host"},
		{"refuses opaque http", "http:127.0.0.1", 0, "has no host"},
		{"refuses http off loopback", "http://example.com/cb", 0, "uses http on a host other than 127.0.0.1, [::1] or localhost"},
		{"refuses http on another loopback address", "http://127.0.0.2/cb", 0, "uses http on a host other than 127.0.0.1, [::1] or localhost"},
		{"refuses http on a private address", "http://10.0.0.1/cb", 0, "uses http on a host other than 127.0.0.1, [::1] or localhost"},
		{"refuses javascript", "javascript:/alert(1)", 0, "uses a forbidden scheme"},
		{"refuses a forbidden scheme in capitals", "FILE:///etc/passwd", 0, "uses a forbidden scheme"},
		{"refuses an opaque private-use URI", "com.example.app:cb", 0, "is not hierarchical (want scheme:/path or scheme://host/path)"},
		{"refuses a private-use URI with neither host nor path", "x-app://", 0, "has neither host nor path"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kind, err := dcr.CheckRedirectURI(tc.raw)
			if tc.err == "" {
				if err != nil || kind != tc.kind {
					t.Fatalf("CheckRedirectURI(%q) = %v, %v; want kind %v", tc.raw, kind, err, tc.kind)
				}
				return
			}
			if err == nil || err.Error() != tc.err || kind != 0 {
				t.Fatalf("CheckRedirectURI(%q) = %v, %v; want %q", tc.raw, kind, err, tc.err)
			}
		})
	}
}

func TestIsLoopbackHost(t *testing.T) {
	cases := []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true},
		{"::1", true},
		{"localhost", true},
		{"LocalHost.", true},
		{"127.0.0.2", false},
		{"10.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"example.com", false},
		{"", false},
	}
	for _, tc := range cases {
		if got := dcr.IsLoopbackHost(tc.host); got != tc.want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	cases := []struct {
		name string
		uris []string
		want bool
	}{
		{"no URIs is not loopback only", nil, false},
		{"one loopback URI", []string{"http://127.0.0.1/cb"}, true},
		{"every URI on loopback", []string{"http://127.0.0.1/cb", "http://localhost:3000/cb", "http://[::1]/cb"}, true},
		{"a loopback URI next to an https one", []string{"http://127.0.0.1/cb", "https://a.example/cb"}, false},
		{"an https URI before a loopback one", []string{"https://a.example/cb", "http://127.0.0.1/cb"}, false},
		{"https on loopback is not a loopback redirect", []string{"https://127.0.0.1/cb"}, false},
		{"a private-use scheme", []string{"cursor://anysphere.cursor-mcp/oauth/callback"}, false},
	}
	for _, tc := range cases {
		if got := dcr.LoopbackOnly(tc.uris); got != tc.want {
			t.Errorf("%s: LoopbackOnly(%q) = %v, want %v", tc.name, strings.Join(tc.uris, " "), got, tc.want)
		}
	}
}
