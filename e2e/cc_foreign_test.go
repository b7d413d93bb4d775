package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestForeignClientCredentialsProviders runs the TypeScript MCP SDK's
// ClientCredentialsProvider and PrivateKeyJwtProvider (npm, pinned) against
// the real authserver and examples/mcpserver: two clients of the
// configuration file, one with a secret, one with a JWK Set (clients[].jwks),
// each get a client-credentials token for the MCP server and call whoami.
// The SDK's assertion names the issuer as its audience and is typed JWT.
func TestForeignClientCredentialsProviders(t *testing.T) {
	dir := foreignClients(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "sdk-1", Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	const ccSecret = "sdk-cc-secret-0123456789abcdef"
	s := startStack(t, stackOptions{storage: "memory", editConfig: func(c string) string {
		return strings.Replace(c, "\nclients:\n", "\nclients:\n"+
			"  - id: sdk-cc-secret\n    secret: "+ccSecret+"\n    grant_types: [client_credentials]\n    scopes: [mcp:tools]\n"+
			"  - id: sdk-cc-jwt\n    jwks: "+string(jwks)+"\n    grant_types: [client_credentials]\n    scopes: [mcp:tools]\n", 1)
	}})

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "sdk-cc.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MCP_URL="+s.MCPURL, "AS_ISSUER="+s.Issuer, "NO_COLOR=1",
		"CC_CLIENT_ID=sdk-cc-secret", "CC_CLIENT_SECRET="+ccSecret, "JWT_CLIENT_ID=sdk-cc-jwt", "JWT_CLIENT_KEY="+pemKey)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sdk-cc.mjs: %v\n--- stderr ---\n%s\n--- stdout ---\n%s", err, stderr.String(), out)
	}
	var res struct {
		Type        string
		Secret, JWT struct {
			WhoAmI    whoamiResult `json:"whoami"`
			TokenType string
			Refresh   bool
			Aud       string
			Scope     string
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, `"type":"result"`) {
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res.Type != "result" {
		t.Fatalf("no result\n--- stderr ---\n%s\n--- stdout ---\n%s", stderr.String(), out)
	}
	for name, r := range map[string]struct {
		got struct {
			WhoAmI    whoamiResult `json:"whoami"`
			TokenType string
			Refresh   bool
			Aud       string
			Scope     string
		}
		client string
	}{"secret": {res.Secret, "sdk-cc-secret"}, "private_key_jwt": {res.JWT, "sdk-cc-jwt"}} {
		g := r.got
		if g.WhoAmI.Sub != r.client || g.WhoAmI.ClientID != r.client || g.Aud != s.MCPURL || g.Refresh ||
			!strings.EqualFold(g.TokenType, "bearer") || g.Scope != "mcp:tools" {
			t.Errorf("%s: %+v; want sub and client_id %s, aud %s, scope mcp:tools, no refresh token", name, g, r.client, s.MCPURL)
		}
	}
}
