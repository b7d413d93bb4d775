package policy_test

import (
	"context"
	"fmt"

	"github.com/mcpauth/mcpauth/as/policy"
	"github.com/mcpauth/mcpauth/storage"
)

// Active is the rule the AS applies to the person of a grant at every
// refresh and introspection, and the login pages at every step: a disabled
// record never; a person who signed in through an upstream while that
// upstream is configured; anyone else as the directory of local users says
// (none: every local person).
func ExamplePeople_Active() {
	people := policy.NewPeople(policy.PeopleConfig{Upstreams: []policy.Upstream{{ID: "corp"}}})
	fmt.Println(people.Active("corp:00u1", &storage.User{Subject: "corp:00u1", Upstream: "corp"}))
	fmt.Println(people.Active("old:1", &storage.User{Subject: "old:1", Upstream: "old"}))
	fmt.Println(people.Active("alice", &storage.User{Subject: "alice", Disabled: true}))
	fmt.Println(people.Active("bob", nil))
	// Output:
	// true
	// false
	// false
	// true
}

// Consent caps what the consent page offers: default scopes beyond the
// person's mapped scopes are left out; a named one is refused.
func ExampleConsent() {
	allowed := []string{"mcp:tools"}
	fmt.Println(policy.Consent([]string{"mcp:tools", "mcp:admin"}, false, allowed))
	fmt.Println(policy.Consent([]string{"mcp:tools", "mcp:admin"}, true, allowed))
	// Output:
	// [mcp:tools] <nil>
	// [] policy: the person's claims do not permit the scopes mcp:admin
}

// CapOn keeps a reserved scope to the people the reservation names: the
// admin resource's admin scope, here for alice and the security group.
// Anyone else is capped to the resource's other scopes (none here), so a
// request naming admin is refused.
func ExamplePeople_CapOn() {
	people := policy.NewPeople(policy.PeopleConfig{Reserved: []policy.Reserved{
		{Resource: "https://as.example/admin", Scope: "admin", Subjects: []string{"alice"}, Groups: []string{"security"}},
	}})
	ctx := context.Background()
	fmt.Println(people.CapOn(ctx, "alice", "https://as.example/admin", []string{"admin"}))
	allowed, capped, _ := people.CapOn(ctx, "bob", "https://as.example/admin", []string{"admin"})
	fmt.Println(allowed, capped)
	fmt.Println(policy.Consent([]string{"admin"}, true, allowed))
	// Output:
	// [] false <nil>
	// [] true
	// [] policy: the person's claims do not permit the scopes admin
}
