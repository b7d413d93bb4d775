package password_test

import (
	"fmt"
	"strings"

	"github.com/mcpauth/mcpauth/internal/password"
)

func ExampleHash() {
	h, err := password.Hash("correct horse battery staple")
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.HasPrefix(h, "$argon2id$v=19$"))
	ok, _ := password.Check(h, "correct horse battery staple")
	fmt.Println(ok)
	ok, _ = password.Check(h, "wrong")
	fmt.Println(ok)
	// Output:
	// true
	// true
	// false
}

// Check also accepts bcrypt hashes imported from elsewhere; a malformed hash
// is an error, not a mismatch.
func ExampleCheck() {
	ok, err := password.Check("$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy", "wrong")
	fmt.Println(ok, err)
	_, err = password.Check("plain-text", "plain-text")
	fmt.Println(err != nil)
	// Output:
	// false <nil>
	// true
}
