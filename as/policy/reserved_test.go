package policy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
)

func TestCapOnLeavesAReservedScopeToThePeopleItNames(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	const admin = "https://as.example/admin"
	p := NewPeople(PeopleConfig{
		Local:     LocalUsers{"alice": false, "bob": false},
		Upstreams: []Upstream{{ID: "corp"}, {ID: "mapped", Claims: mapping{}}},
		Records:   store,
		Reserved:  []Reserved{{Resource: admin, Scope: "admin", Subjects: []string{"alice"}, Groups: []string{"security"}}},
	})
	for _, u := range []*storage.User{
		{Subject: "corp:sec", Upstream: "corp", Groups: []string{"staff", "security"}},
		{Subject: "corp:dev", Upstream: "corp", Groups: []string{"staff"}},
		{Subject: "mapped:admin", Upstream: "mapped", Claims: map[string][]string{"group": {"admins"}}},
		{Subject: "mapped:sec", Upstream: "mapped", Groups: []string{"security"}},
	} {
		u.LastSeen = time.Now()
		if _, err := store.RecordLogin(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	adminScopes := []string{"admin"}
	mcpScopes := []string{"mcp:tools", "mcp:admin"}
	for _, tc := range []struct {
		name, subject, resource string
		scopes, allowed         []string
		capped                  bool
	}{
		{"a listed subject holds it", "alice", admin, adminScopes, nil, false},
		{"a local person not listed is capped to nothing", "bob", admin, adminScopes, []string{}, true},
		{"a person holding a listed group holds it", "corp:sec", admin, adminScopes, nil, false},
		{"a person without a listed group is capped", "corp:dev", admin, adminScopes, []string{}, true},
		{"a person without a record is capped", "nobody", admin, adminScopes, []string{}, true},
		{"another resource is not touched", "bob", "http://mcp.example", mcpScopes, nil, false},
		{"the claim mapping still applies and loses the reserved scope", "mapped:admin", admin, adminScopes, []string{"mcp:tools", "mcp:admin"}, true},
		{"the reservation, not the claim mapping, gives the reserved scope", "mapped:sec", admin, adminScopes, []string{"mcp:tools", "admin"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allowed, capped, err := p.CapOn(ctx, tc.subject, tc.resource, tc.scopes)
			if err != nil || capped != tc.capped || !slices.Equal(allowed, tc.allowed) {
				t.Errorf("CapOn(%q, %q) = %q, %v, %v; want %q, %v", tc.subject, tc.resource, allowed, capped, err, tc.allowed, tc.capped)
			}
			// A request naming the reserved scope is refused for whom it caps.
			if !tc.capped || tc.resource != admin {
				return // nothing caps the consent
			}
			if _, err := Consent(adminScopes, true, allowed); slices.Contains(allowed, "admin") != (err == nil) {
				t.Errorf("consent to admin: %v", err)
			}
		})
	}
	broken := NewPeople(PeopleConfig{Records: brokenRecords{}, Reserved: []Reserved{{Resource: admin, Scope: "admin"}}})
	if _, capped, err := broken.CapOn(ctx, "bob", admin, adminScopes); !capped || err == nil {
		t.Errorf("an unreadable record: capped %v err %v; want capped with the error", capped, err)
	}
}
