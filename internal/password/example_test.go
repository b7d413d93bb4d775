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
