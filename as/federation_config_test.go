package as

import (
	"strings"
	"testing"
)

// TestFederationJWKSURIAndRuleChecks: compileFederation accepts an
// absolute http(s) JWKSURI with a host and nothing else, and a workload
// rule only with a resource and a scope. Each case fails if one condition
// of its check is dropped.
func TestFederationJWKSURIAndRuleChecks(t *testing.T) {
	base := func() Config {
		return Config{Issuer: "https://as.example", Resources: []Resource{{URI: mcpURI, Scopes: []string{"mcp:tools"}}}}
	}
	idp := func(uri string) func(*Config) {
		return func(c *Config) {
			c.EnterpriseIdPs = []EnterpriseIdP{{Issuer: idpIssuer, JWKSURI: uri, Clients: []string{"a"}}}
		}
	}
	rule := func(r WorkloadRule) func(*Config) {
		return func(c *Config) {
			c.WorkloadIssuers = []WorkloadIssuer{{Issuer: "https://wl.example", Rules: []WorkloadRule{r}}}
		}
	}
	const badURI = "is not an absolute http(s) URL"
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // "" when accepted
	}{
		{"an https JWKSURI", idp("https://idp.example/jwks"), ""},
		{"an http JWKSURI", idp("http://idp.example/jwks"), ""},
		{"a JWKSURI that does not parse", idp("https://idp.example/%zz"), badURI},
		{"a relative JWKSURI", idp("/jwks"), badURI},
		{"a JWKSURI without host", idp("https:///jwks"), badURI},
		{"an ftp JWKSURI", idp("ftp://idp.example/jwks"), badURI},
		{"a rule with a resource and a scope", rule(WorkloadRule{Subject: "*", ClientID: "w", Resources: []string{mcpURI}, Scopes: []string{"mcp:tools"}}), ""},
		{"a rule without scopes", rule(WorkloadRule{Subject: "*", ClientID: "w", Resources: []string{mcpURI}}), "at least one resource and one scope"},
		{"a rule without resources", rule(WorkloadRule{Subject: "*", ClientID: "w", Scopes: []string{"mcp:tools"}}), "at least one resource and one scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.mod(&c)
			_, _, err := compileFederation(&c, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err %v; want %q", err, tc.want)
			}
		})
	}
}
