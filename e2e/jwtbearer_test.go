package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"
)

// mcpResource finds the example MCP server's resource URI in the stack's
// configuration (its port is chosen per test).
var mcpResource = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/mcp\b`)

// TestJWTBearerFromConfigFile configures an enterprise IdP
// (enterprise.idps) and a workload issuer (workload.issuers) in the real
// authserver's YAML file, each with its JWK Set written inline, redeems an
// ID-JAG and a workload token at /token, and calls the example MCP server
// with the tokens (golang.org/x/oauth2 transport, MCP Go SDK client).
func TestJWTBearerFromConfigFile(t *testing.T) {
	idpKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	wlKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set := func(k *ecdsa.PrivateKey, kid string) string {
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.Public(), KeyID: kid, Algorithm: "ES256"}}})
		return string(b)
	}
	const agentSecret = "e2e-xaa-agent-secret-0123456789"
	s := startStack(t, stackOptions{storage: "memory", editConfig: func(c string) string {
		c = strings.Replace(c, "\nclients:\n", "\nclients:\n  - id: xaa-agent\n    secret: "+agentSecret+"\n    grant_types: [urn:ietf:params:oauth:grant-type:jwt-bearer]\n", 1)
		return c + `
enterprise:
  idps:
    - issuer: https://idp.e2e.example
      jwks: ` + set(idpKey, "idp-1") + `
      clients: [xaa-agent]
workload:
  issuers:
    - issuer: spiffe://e2e.example
      jwks: ` + set(wlKey, "wl-1") + `
      rules:
        - subject: spiffe://e2e.example/ns/prod/sa/*
          client_id: spiffe-prod
          resources: [` + mcpResource.FindString(c) + `]
          scopes: [mcp:tools]
`
	}})

	var md struct {
		GrantTypes []string `json:"grant_types_supported"`
		Profiles   []string `json:"authorization_grant_profiles_supported"`
	}
	resp, err := http.Get(s.Issuer + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&md)
	resp.Body.Close()
	if !slices.Contains(md.GrantTypes, "urn:ietf:params:oauth:grant-type:jwt-bearer") || !slices.Equal(md.Profiles, []string{"urn:ietf:params:oauth:grant-profile:id-jag"}) {
		t.Errorf("metadata grants %v profiles %v", md.GrantTypes, md.Profiles)
	}

	mint := func(k *ecdsa.PrivateKey, kid, typ string, claims map[string]any) string {
		opts := (&jose.SignerOptions{}).WithHeader("kid", kid)
		if typ != "" {
			opts = opts.WithType(jose.ContentType(typ))
		}
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, opts)
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := json.Marshal(claims)
		jws, err := signer.Sign(payload)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := jws.CompactSerialize()
		return out
	}
	redeem := func(assertion, user, pass string) map[string]any {
		form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion}, "resource": {s.MCPURL}}
		req, _ := http.NewRequest(http.MethodPost, s.Issuer+"/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		if resp.StatusCode != 200 || m["access_token"] == nil || m["refresh_token"] != nil {
			t.Fatalf("token: %d %v", resp.StatusCode, m)
		}
		return m
	}
	whoami := func(tok string) whoamiResult {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hc := oauth2.NewClient(ctx, oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok, TokenType: "Bearer"}))
		session, err := mcp.NewClient(&mcp.Implementation{Name: "mcpauth-e2e-jwt-bearer", Version: "0"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.MCPURL, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer session.Close()
		return callTool[whoamiResult](t, ctx, session, "whoami")
	}
	now := time.Now()

	idjag := mint(idpKey, "idp-1", "oauth-id-jag+jwt", map[string]any{"iss": "https://idp.e2e.example", "sub": "alice-at-idp", "aud": s.Issuer,
		"client_id": "xaa-agent", "resource": s.MCPURL, "scope": "mcp:tools", "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": "e2e-idjag-1"})
	tok := redeem(idjag, "xaa-agent", agentSecret)
	if w := whoami(tok["access_token"].(string)); w.Sub != "https://idp.e2e.example#alice-at-idp" || w.ClientID != "xaa-agent" {
		t.Errorf("ID-JAG token: whoami %+v", w)
	}

	wl := mint(wlKey, "wl-1", "", map[string]any{"iss": "spiffe://e2e.example", "sub": "spiffe://e2e.example/ns/prod/sa/api", "aud": s.Issuer,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": "e2e-wl-1"})
	tok = redeem(wl, "", "")
	if w := whoami(tok["access_token"].(string)); w.Sub != "spiffe://e2e.example#spiffe://e2e.example/ns/prod/sa/api" || w.ClientID != "spiffe-prod" {
		t.Errorf("workload token: whoami %+v", w)
	}
}
