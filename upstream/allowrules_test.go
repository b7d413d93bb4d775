package upstream_test

import (
	"errors"
	"testing"

	"github.com/mcpauth/mcpauth/upstream"
)

// TestCheckAllowRules applies allowed_domains and allowed_groups to
// identities directly; without rules everyone is admitted, and Capped says
// whether claim_scopes is set.
func TestCheckAllowRules(t *testing.T) {
	newP := func(domains, groups []string, mapping map[string]map[string][]string) *upstream.Provider {
		p, err := upstream.New(upstream.Config{ID: "corp", Issuer: "https://op.example", ClientID: "c", ClientSecret: "s", RedirectURL: callback,
			Scopes: []string{"openid"}, AllowedDomains: domains, AllowedGroups: groups, ClaimScopes: mapping})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := newP(nil, nil, nil)
	domains := newP([]string{"acme.example"}, nil, nil)
	groups := newP(nil, []string{"staff", "admins"}, nil)
	for _, tc := range []struct {
		name string
		p    *upstream.Provider
		id   upstream.Identity
		rule string // "" admitted
	}{
		{"no rules: an unverified email and no groups", open, upstream.Identity{Subject: "u", Email: "x@elsewhere.example"}, ""},
		{"no rules: no email at all", open, upstream.Identity{Subject: "u"}, ""},
		{"a verified email at the domain, in capitals", domains, upstream.Identity{Subject: "u", Email: "ann@ACME.Example", EmailVerified: true}, ""},
		{"an unverified email at the domain", domains, upstream.Identity{Subject: "u", Email: "ann@acme.example"}, "allowed_domains"},
		{"a subdomain", domains, upstream.Identity{Subject: "u", Email: "ann@sub.acme.example", EmailVerified: true}, "allowed_domains"},
		{"two @", domains, upstream.Identity{Subject: "u", Email: "ann@evil.example@acme.example", EmailVerified: true}, "allowed_domains"},
		{"no @", domains, upstream.Identity{Subject: "u", Email: "acme.example", EmailVerified: true}, "allowed_domains"},
		{"one of the groups among others", groups, upstream.Identity{Subject: "u", Groups: []string{"sales", "admins"}}, ""},
		{"none of the groups", groups, upstream.Identity{Subject: "u", Groups: []string{"sales", "Staff"}}, "allowed_groups"},
		{"no groups", groups, upstream.Identity{Subject: "u"}, "allowed_groups"},
	} {
		err := tc.p.Check(&tc.id)
		var de *upstream.DeniedError
		switch {
		case tc.rule == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.rule != "" && (!errors.As(err, &de) || de.Rule != tc.rule || !errors.Is(err, upstream.ErrDenied)):
			t.Errorf("%s: got %v, want a refusal by %s", tc.name, err, tc.rule)
		}
	}
	if open.Capped() || !newP(nil, nil, map[string]map[string][]string{"groups": {"staff": {"s"}}}).Capped() {
		t.Fatal("Capped is not whether claim_scopes is set")
	}
}
