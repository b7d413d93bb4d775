package as

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage/memory"
)

// validConfig is the smallest Config that validate accepts: each case of
// TestConfigValidation breaks one field of it.
func validConfig() Config {
	return Config{
		Issuer:    "https://as.example",
		Store:     memory.New(),
		Secret:    []byte(strings.Repeat("s", 32)),
		Resources: []Resource{{URI: "https://api.example/mcp", Scopes: []string{"mcp:tools"}}},
	}
}

// TestConfigValidation pins every refusal of Config.validate and, next to
// each, a value just inside the rule that is accepted.
func TestConfigValidation(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string // "" means accepted
	}{
		{"accepts the minimal config", func(*Config) {}, ""},
		{"accepts an http issuer with a port and a path", func(c *Config) { c.Issuer = "http://127.0.0.1:8080/tenant" }, ""},
		{"refuses a missing issuer", func(c *Config) { c.Issuer = "" }, "Issuer is required"},
		{"refuses an issuer that does not parse", func(c *Config) { c.Issuer = "https://as.example/%zz" }, "must be an http(s) URL"},
		{"refuses a relative issuer", func(c *Config) { c.Issuer = "as.example/tenant" }, "must be an http(s) URL"},
		{"refuses an issuer without host", func(c *Config) { c.Issuer = "https:///tenant" }, "must be an http(s) URL"},
		{"refuses an issuer with a query", func(c *Config) { c.Issuer = "https://as.example?tenant=a" }, "must be an http(s) URL"},
		{"refuses an issuer with a fragment", func(c *Config) { c.Issuer = "https://as.example#a" }, "must be an http(s) URL"},
		{"refuses an issuer with userinfo", func(c *Config) { c.Issuer = "https://admin@as.example" }, "must be an http(s) URL"},
		{"refuses an issuer of another scheme", func(c *Config) { c.Issuer = "ftp://as.example" }, "must be an http(s) URL"},
		{"refuses an issuer with a trailing slash", func(c *Config) { c.Issuer = "https://as.example/" }, "must be an http(s) URL"},
		{"refuses a missing store", func(c *Config) { c.Store = nil }, "Store is required"},
		{"refuses a 31-byte secret", func(c *Config) { c.Secret = c.Secret[:31] }, "Secret must be at least 32 bytes"},
		{"refuses no resource", func(c *Config) { c.Resources = nil }, "at least one Resource"},
		{"accepts a CodeTTL of exactly MaxCodeTTL", func(c *Config) { c.CodeTTL = MaxCodeTTL }, ""},
		{"refuses a CodeTTL above MaxCodeTTL", func(c *Config) { c.CodeTTL = MaxCodeTTL + time.Nanosecond }, "CodeTTL 10m0.000000001s exceeds 10m0s"},
		{"refuses a negative AccessTokenTTL", func(c *Config) { c.AccessTokenTTL = -time.Nanosecond }, "TTLs must not be negative"},
		{"refuses a negative RefreshTokenTTL", func(c *Config) { c.RefreshTokenTTL = -time.Nanosecond }, "TTLs must not be negative"},
		{"refuses a negative CodeTTL", func(c *Config) { c.CodeTTL = -time.Nanosecond }, "TTLs must not be negative"},
		{"refuses a negative GrantLifetime", func(c *Config) { c.GrantLifetime = -time.Nanosecond }, "TTLs must not be negative"},
		{"accepts positive TTLs of one nanosecond", func(c *Config) {
			c.AccessTokenTTL, c.RefreshTokenTTL, c.CodeTTL, c.GrantLifetime = 1, 1, 1, 1
		}, ""},
		{"accepts EdDSA", func(c *Config) { c.SigningAlg = "EdDSA" }, ""},
		{"refuses HS256", func(c *Config) { c.SigningAlg = "HS256" }, `SigningAlg "HS256"`},
		{"accepts a registration scope", func(c *Config) { c.RegistrationScopes = []string{"mcp:tools"} }, ""},
		{"refuses a registration scope with a space", func(c *Config) { c.RegistrationScopes = []string{"mcp tools"} }, `RegistrationScopes: invalid scope "mcp tools"`},
		{"accepts a registration resource in another spelling of a configured one", func(c *Config) {
			c.RegistrationResources = []string{"HTTPS://API.example/mcp/"}
		}, ""},
		{"refuses a registration resource that is not configured", func(c *Config) {
			c.RegistrationResources = []string{"https://api.example/other"}
		}, `RegistrationResources: "https://api.example/other" is not a configured resource`},
		{"refuses a registration resource that is no resource URI", func(c *Config) {
			c.RegistrationResources = []string{"not a uri"}
		}, `RegistrationResources: "not a uri" is not a configured resource`},
		{"refuses a registration resource when the configured one does not canonicalise", func(c *Config) {
			c.Resources = []Resource{{URI: "ftp://api.example/mcp"}}
			c.RegistrationResources = []string{"https://api.example/mcp"}
		}, "is not a configured resource"},
		{"refuses an exchange rule to an unknown resource", func(c *Config) {
			c.ExchangePolicy = []ExchangeRule{{From: "https://api.example/mcp", To: "https://api.example/other", Scopes: []string{"x"}}}
		}, "ExchangePolicy[0].To"},
		{"refuses an enterprise IdP without keys", func(c *Config) {
			c.EnterpriseIdPs = []EnterpriseIdP{{Issuer: "https://idp.example", Clients: []string{"c"}}}
		}, "JWKS or JWKSURI is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mod(&c)
			err := c.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("validate() = %v, want nil", err)
			case tc.want != "" && err == nil:
				t.Fatalf("validate() = nil, want an error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestBuildResources pins the refusals of buildResources and the defaults
// it fills in (DefaultScopes, the one Default resource).
func TestBuildResources(t *testing.T) {
	refused := []struct {
		name string
		in   []Resource
		want string
	}{
		{"refuses a URI that is no resource indicator", []Resource{{URI: "https://api.example/mcp?x=1"}}, `Resources[0].URI "https://api.example/mcp?x=1"`},
		{"refuses one resource listed twice in two spellings", []Resource{{URI: "https://api.example/mcp"}, {URI: "HTTPS://api.example/mcp/"}}, `Resources[1].URI "HTTPS://api.example/mcp/" is listed twice`},
		{"refuses an invalid scope", []Resource{{URI: "https://api.example/mcp", Scopes: []string{"a", "b c"}}}, `Resources[0].Scopes: invalid scope "b c"`},
		{"refuses two default resources", []Resource{{URI: "https://a.example", Default: true}, {URI: "https://b.example", Default: true}}, "more than one Resource is marked Default"},
		{"refuses two default resources among three", []Resource{{URI: "https://a.example", Default: true}, {URI: "https://b.example"}, {URI: "https://c.example", Default: true}}, "more than one Resource is marked Default"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := buildResources(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("buildResources() error = %v, want one containing %q", err, tc.want)
			}
		})
	}

	t.Run("one resource is the default even when not marked", func(t *testing.T) {
		out, err := buildResources([]Resource{{URI: "HTTPS://API.example/mcp/", Scopes: []string{"a", "b"}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || out[0].URI != "https://api.example/mcp" || !out[0].Default {
			t.Fatalf("got %+v, want the canonical URI marked Default", out)
		}
		if !slices.Equal(out[0].DefaultScopes, []string{"a", "b"}) {
			t.Fatalf("DefaultScopes = %q, want every scope when none is listed", out[0].DefaultScopes)
		}
	})
	t.Run("of two unmarked resources neither is the default", func(t *testing.T) {
		out, err := buildResources([]Resource{{URI: "https://a.example"}, {URI: "https://b.example"}})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].Default || out[1].Default {
			t.Fatalf("got %+v, want no Default", out)
		}
	})
	t.Run("one marked default among two is accepted and kept", func(t *testing.T) {
		out, err := buildResources([]Resource{{URI: "https://a.example"}, {URI: "https://b.example", Default: true, Scopes: []string{"a", "b"}, DefaultScopes: []string{"b"}}})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].Default || !out[1].Default {
			t.Fatalf("got %+v, want only the second Default", out)
		}
		if !slices.Equal(out[1].DefaultScopes, []string{"b"}) {
			t.Fatalf("DefaultScopes = %q, want the listed ones", out[1].DefaultScopes)
		}
	})
}

// TestValidScopeToken pins the RFC 6749 §3.3 scope-token characters
// (%x21 / %x23-5B / %x5D-7E), the length cap and the refused wildcard.
func TestValidScopeToken(t *testing.T) {
	cases := []struct {
		s    string
		want bool
	}{
		{"mcp:tools", true},
		{"!", true},
		{"~", true},
		{"#[]", true},
		{strings.Repeat("a", 200), true},
		{strings.Repeat("a", 201), false},
		{"", false},
		{"*", false},
		{"**", true},
		{"a b", false},
		{"a\x00", false},
		{`a"b`, false},
		{`a\b`, false},
		{"a\x7f", false},
		{"aé", false},
	}
	for _, tc := range cases {
		if got := validScopeToken(tc.s); got != tc.want {
			t.Errorf("validScopeToken(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
