package config_test

import (
	"fmt"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
)

func ExampleParse() {
	env := func(name string) (string, bool) {
		if name == "CI_BOT_SECRET" {
			return "a-long-random-client-secret", true
		}
		return "", false
	}
	c, err := config.Parse([]byte(`
issuer: http://127.0.0.1:9000
storage: memory
resources:
  - uri: HTTP://127.0.0.1:8080/mcp/
    scopes: [mcp:tools]
    default: true
clients:
  - id: ci-bot
    secret: ${CI_BOT_SECRET}
    grant_types: [client_credentials]
`), env)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Resources[0].URI, c.Clients[0].Secret, c.Tokens.AccessTTL.D())

	_, err = config.Parse([]byte("resources:\n  - uri: /mcp\n"), env)
	fmt.Println(err)
	// Output:
	// http://127.0.0.1:8080/mcp a-long-random-client-secret 15m0s
	// config: resources[0].uri: not an absolute http(s) URI without query or fragment: "/mcp"
}
