package config

import (
	"strings"
	"testing"
)

func TestParseTokenClaimsAndPersonAttributes(t *testing.T) {
	text := strings.Replace(base, "    default: true\n", "    default: true\n    token_claims: [email, groups, tenant]\n", 1) +
		"    email: alice@example.com\n    groups: [ops]\n    tenant: acme\n" +
		"upstreams:\n  - id: corp\n    issuer: https://login.acme.example\n    client_id: c\n    client_secret: s\n    tenant_claim: org\n" +
		"  - id: fixed\n    issuer: https://login.fixed.example\n    client_id: c\n    client_secret: s\n    tenant: fixed-co\n"
	c, err := Parse([]byte(text), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	u := c.Users[0]
	if strings.Join(c.Resources[0].TokenClaims, ",") != "email,groups,tenant" || u.Email != "alice@example.com" || u.Groups[0] != "ops" || u.Tenant != "acme" {
		t.Errorf("read as %+v %+v", c.Resources[0], u)
	}
	if c.Upstreams[0].TenantClaim != "org" || c.Upstreams[1].Tenant != "fixed-co" {
		t.Errorf("upstreams %+v", c.Upstreams)
	}
}

func TestParseRejectsBadTokenClaims(t *testing.T) {
	one := "upstreams:\n  - id: corp\n    issuer: https://login.acme.example\n    client_id: mcpauth\n    client_secret: s\n"
	for _, tc := range []struct{ name, text, want string }{
		{"an unknown token claim", strings.Replace(base, "    default: true\n", "    default: true\n    token_claims: [phone]\n", 1), "resources[0].token_claims[0]"},
		{"an empty group", base + "    groups: [\"\"]\n", "users[0].groups[0]"},
		{"tenant and tenant_claim", base + one + "    tenant: a\n    tenant_claim: b\n", "upstreams[0].tenant"},
		{"a tenant claim that is no claim name", base + one + "    tenant_claim: \"a b\"\n", "upstreams[0].tenant_claim"},
	} {
		if _, err := Parse([]byte(tc.text), envOf(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %s", tc.name, err, tc.want)
		}
	}
}
