package envvar_test

import (
	"fmt"

	"github.com/mcpauth/mcpauth/internal/envvar"
)

func ExampleExpand() {
	env := func(name string) (string, bool) {
		v, ok := map[string]string{"HOST": "auth.example.com"}[name]
		return v, ok
	}
	s, err := envvar.Expand("https://${HOST}/tenant", env)
	fmt.Println(s, err)
	_, err = envvar.Expand("${MISSING}", env)
	fmt.Println(err)
	// Output:
	// https://auth.example.com/tenant <nil>
	// environment variable MISSING is not set (nor MISSING_FILE)
}
