package dpop_test

import (
	"context"
	"fmt"

	"github.com/mcpauth/mcpauth/dpop"
)

// A client makes a proof for a token request; the server checks it and
// binds the token to the key's thumbprint.
func ExampleChecker_Check() {
	client, err := dpop.GenerateKey()
	if err != nil {
		panic(err)
	}
	proof, err := client.Proof("POST", "https://as.example/token", "", "")
	if err != nil {
		panic(err)
	}
	var c dpop.Checker
	p, err := c.Check(context.Background(), proof, dpop.Request{Method: "POST", URI: "https://as.example/token"})
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Thumbprint == client.Thumbprint())
	// Output: true
}

// A resource server checks the proof that comes with a bound access token:
// ath must hash the token.
func ExampleSigner_Proof() {
	client, _ := dpop.GenerateKey()
	proof, _ := client.Proof("GET", "https://mcp.example/mcp", "the-access-token", "")
	var c dpop.Checker
	_, err := c.Check(context.Background(), proof, dpop.Request{Method: "GET", URI: "https://mcp.example/mcp", AccessToken: "another-token"})
	fmt.Println(err)
	// Output: invalid_dpop_proof: the proof's ath does not match the access token
}

func ExampleAccessTokenHash() {
	fmt.Println(dpop.AccessTokenHash("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"))
	// Output: fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo
}
