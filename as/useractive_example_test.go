package as_test

import (
	"fmt"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/storage"
)

// UserActive is the rule the AS applies to the person of a grant at every
// refresh and introspection: a disabled record never; a person who signed
// in through an upstream while that upstream is configured; anyone else as
// the directory of local users says (nil: every local person).
func ExampleUserActive() {
	upstreams := []string{"corp"}
	fmt.Println(as.UserActive("corp:00u1", &storage.User{Subject: "corp:00u1", Upstream: "corp"}, upstreams, nil))
	fmt.Println(as.UserActive("old:1", &storage.User{Subject: "old:1", Upstream: "old"}, upstreams, nil))
	fmt.Println(as.UserActive("alice", &storage.User{Subject: "alice", Disabled: true}, upstreams, nil))
	fmt.Println(as.UserActive("bob", nil, upstreams, nil))
	// Output:
	// true
	// false
	// false
	// true
}
