package connections_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpauth/mcpauth/connections"
)

func github() *connections.Provider {
	p, err := connections.NewProvider(connections.Config{
		ID: "github", Name: "GitHub",
		AuthorizationEndpoint: "https://github.com/login/oauth/authorize",
		TokenEndpoint:         "https://github.com/login/oauth/access_token",
		ClientID:              "Iv1.example", ClientSecret: "secret",
		Scopes:      []string{"repo"},
		Resource:    "https://api.github.com",
		Clients:     []string{"github-gateway"},
		RedirectURL: "https://auth.example.com/connections/github/callback",
	})
	if err != nil {
		panic(err)
	}
	return p
}

// The authorization request carries our state and the PKCE S256 challenge
// of the verifier (RFC 7636 Appendix B's example verifier here).
func ExampleProvider_AuthCodeURL() {
	u, _ := github().AuthCodeURL(context.Background(), "sealed-state", "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
	fmt.Println(u)
	// Output:
	// https://github.com/login/oauth/authorize?client_id=Iv1.example&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&redirect_uri=https%3A%2F%2Fauth.example.com%2Fconnections%2Fgithub%2Fcallback&response_type=code&scope=repo&state=sealed-state
}

// RFC 9207: an answer naming another issuer is refused before its code is
// redeemed; GitHub sends none.
func ExampleProvider_CheckResponseIssuer() {
	p, ctx := github(), context.Background()
	fmt.Println(p.CheckResponseIssuer(ctx, "") == nil)
	fmt.Println(p.CheckResponseIssuer(ctx, "https://github.com") == nil)
	fmt.Println(errors.Is(p.CheckResponseIssuer(ctx, "https://evil.example"), connections.ErrWrongIssuer))
	// Output:
	// true
	// true
	// true
}
