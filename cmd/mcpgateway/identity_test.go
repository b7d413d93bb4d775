package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

const identityConfig = baseConfig + `
identity:
  header: X-MCP-Identity
`

func TestGatewaySendsTheUpstreamASignedIdentity(t *testing.T) {
	s := newStack(t, false, identityConfig)
	tok := s.token(t, "user-bot")
	// The client's own header of that name never reaches the upstream.
	client := &http.Client{Transport: headerAdder{bearer{tok, http.DefaultTransport}, "X-Mcp-Identity", "forged"}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: s.resource, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}); err != nil {
		t.Fatal(err)
	}
	v, err := rsmiddleware.NewIdentityVerifier(rsmiddleware.IdentityVerifierConfig{Issuer: s.resource, Audience: s.up.srv.URL + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	seen := s.up.seenIdentities()
	if len(seen) < 2 {
		t.Fatalf("identities %v", seen)
	}
	for _, id := range seen {
		if strings.Contains(id, "forged") || strings.Contains(id, ",") {
			t.Fatalf("the client's header reached the upstream: %q", id)
		}
		c, err := v.Verify(context.Background(), id)
		if err != nil {
			t.Fatalf("verify %q: %v", id, err)
		}
		if c.Subject != "user-bot" || c.ClientID != "user-bot" || c.Scope != "mcp:tools" || c.Expiry.Time().Sub(c.IssuedAt.Time()) != time.Minute || c.ID == "" {
			t.Errorf("claims %+v", c)
		}
	}
	if seen[0] == seen[1] {
		t.Error("two requests carried one JWT (jti reused)")
	}
	// Another audience (another upstream) refuses it.
	other, _ := rsmiddleware.NewIdentityVerifier(rsmiddleware.IdentityVerifierConfig{Issuer: s.resource, Audience: "http://elsewhere/mcp"})
	if _, err := other.Verify(context.Background(), seen[0]); !errors.Is(err, rsmiddleware.ErrIdentity) {
		t.Errorf("another audience: %v", err)
	}
	resp, err := http.Get(strings.TrimSuffix(s.resource, "/mcp") + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"alg":"ES256"`) || strings.Contains(string(body), `"d":`) {
		t.Errorf("JWKS %d %s", resp.StatusCode, body)
	}
}

type headerAdder struct {
	base      http.RoundTripper
	name, val string
}

func (h headerAdder) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.val)
	return h.base.RoundTrip(r)
}

func TestIdentityConfig(t *testing.T) {
	base := "resource: https://gw.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:1/mcp\n"
	for _, tc := range []struct{ extra, want string }{
		{"identity: {claims: [email]}\n", "identity.header"},
		{"identity: {header: X_Identity}\n", "identity.header"},
		{"identity: {header: authorization}\n", "identity.header"},
		{"identity: {header: X-Id, claims: [sub]}\n", "identity.claims"},
	} {
		if _, err := ParseConfig([]byte(base+tc.extra), env(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %s", tc.extra, err, tc.want)
		}
	}
	c, err := ParseConfig([]byte(base+"identity: {header: X-MCP-Identity}\n"), env(nil))
	if err != nil || strings.Join(c.Identity.Claims, ",") != "email,groups,tenant" {
		t.Fatalf("%v %+v", err, c.Identity)
	}
	// A key file: SEC 1 or PKCS #8, P-256 only.
	dir := t.TempDir()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	path := filepath.Join(dir, "id.pem")
	_ = os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	c.Identity.KeyFile = path
	sg, err := newIdentitySigner(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sg.jwks), `"kid":"`) {
		t.Errorf("jwks %s", sg.jwks)
	}
	k384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ = x509.MarshalECPrivateKey(k384)
	_ = os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
	if _, err := newIdentitySigner(c, nil); err == nil || !strings.Contains(err.Error(), "P-256") {
		t.Errorf("a P-384 key: %v", err)
	}
}
