package mcpsdk_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/rsmiddleware/mcpsdk"
)

func (as *testAS) mintBound(t *testing.T, aud, jkt string) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: as.key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	b, _ := json.Marshal(map[string]any{"iss": as.issuer, "sub": "alice", "aud": aud, "client_id": "client-1", "scope": "mcp:read",
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": "j-" + now.String(), "cnf": map[string]any{"jkt": jkt}})
	j, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := j.CompactSerialize()
	return out
}

// dpopTransport sends every request with a fresh proof for uri.
type dpopTransport struct {
	key    *dpop.Signer
	token  string
	uri    string
	scheme string
}

func (d dpopTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	p, err := d.key.Proof(r.Method, d.uri, d.token, "")
	if err != nil {
		return nil, err
	}
	r.Header.Set("Authorization", d.scheme+" "+d.token)
	r.Header.Set("DPoP", p)
	return http.DefaultTransport.RoundTrip(r)
}

func TestSDKAcceptsDPoPThroughTheAdapter(t *testing.T) {
	as := newTestAS(t)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resource := srv.URL + "/mcp"
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{Issuer: as.issuer, Resource: resource})
	if err != nil {
		t.Fatal(err)
	}
	d, err := rsmiddleware.NewDPoP(rsmiddleware.DPoPConfig{PublicURL: resource, JTIs: dpop.NewMemoryJTIs(0)})
	if err != nil {
		t.Fatal(err)
	}
	prm, _ := rsmiddleware.ResourceMetadataURL(resource)
	mux.Handle("/mcp", mcpsdk.AcceptDPoP(auth.RequireBearerToken(mcpsdk.DPoPTokenVerifier(v, d), &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm})(mcpServer())))
	k, _ := dpop.GenerateKey()
	other, _ := dpop.GenerateKey()
	tok := as.mintBound(t, resource, k.Thumbprint())
	dial := func(tr dpopTransport) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil)
		return c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: resource, HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	}
	cs, err := dial(dpopTransport{key: k, token: tok, uri: resource, scheme: "DPoP"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := callText(t, cs, "whoami"); err != nil || !strings.HasPrefix(got, "sdk:alice") {
		t.Fatalf("whoami = %q, %v", got, err)
	}
	cs.Close()
	for name, tr := range map[string]dpopTransport{
		"bound token as Bearer": {key: k, token: tok, uri: resource, scheme: "Bearer"},
		"proof of another key":  {key: other, token: tok, uri: resource, scheme: "DPoP"},
		"proof for another URL": {key: k, token: tok, uri: srv.URL + "/other", scheme: "DPoP"},
	} {
		if cs, err := dial(tr); err == nil {
			cs.Close()
			t.Errorf("%s: connected", name)
		}
	}
	// The Bearer-only adapter refuses the bound token too (RFC 9449 §7.2).
	r := httptest.NewRequest("POST", resource, nil)
	if _, err := mcpsdk.TokenVerifier(v)(context.Background(), tok, r); err == nil {
		t.Error("TokenVerifier accepted a DPoP-bound token sent as Bearer")
	}
}
