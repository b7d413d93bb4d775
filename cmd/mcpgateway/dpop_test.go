package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/rsmiddleware"
)

const dpopConfig = baseConfig + "dpop: {required: false, algs: [ES256]}\n"

// dpopToken obtains a DPoP-bound client credentials token of client for
// the gateway (RFC 9449 §5), with a proof of key.
func (s *stack) dpopToken(t *testing.T, client string, key *dpop.Signer) string {
	t.Helper()
	proof, err := key.Proof(http.MethodPost, s.issuer+"/token", "", "")
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {s.resource}}
	req, _ := http.NewRequest(http.MethodPost, s.issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("DPoP", proof)
	req.SetBasicAuth(client, botSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(body, &tr) != nil || tr.TokenType != "DPoP" {
		t.Fatalf("DPoP token for %s: %d %s", client, resp.StatusCode, body)
	}
	return tr.AccessToken
}

// dpopTransport sends a DPoP-bound token under the DPoP scheme with a
// fresh proof for each request (RFC 9449 §7.1).
type dpopTransport struct {
	t     *testing.T
	token string
	key   *dpop.Signer
}

func (d dpopTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	proof, err := d.key.Proof(r.Method, r.URL.String(), d.token, "")
	if err != nil {
		return nil, err
	}
	r.Header.Set("Authorization", "DPoP "+d.token)
	r.Header.Set("DPoP", proof)
	return http.DefaultTransport.RoundTrip(r)
}

// initialize posts an MCP initialize request to the gateway with the given
// Authorization and DPoP headers and returns the response.
func (s *stack) initialize(t *testing.T, authorization, proof string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	req, _ := http.NewRequest(http.MethodPost, s.resource, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", authorization)
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// A DPoP-bound token with its proofs works through the gateway with the
// MCP Go SDK client; the upstream sees neither the token nor the proof.
func TestGatewayAcceptsDPoPBoundTokensAndKeepsTheProofFromTheUpstream(t *testing.T) {
	s := newStack(t, true, dpopConfig)
	key, err := dpop.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	tok := s.dpopToken(t, "user-bot", key)
	client := &http.Client{Transport: dpopTransport{t, tok, key}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: s.resource, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "bound"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "bound" {
		t.Fatalf("echo through the gateway: %v %+v", err, res)
	}
	seen := s.up.seenDPoP()
	if len(seen) < 2 {
		t.Fatalf("upstream saw %d requests, want initialize and tools/call at least", len(seen))
	}
	for i, h := range seen {
		if h != "" {
			t.Fatalf("upstream request %d carried the DPoP header %.20s...", i, h)
		}
	}
	for i, h := range s.up.seen() {
		if h != "" {
			t.Fatalf("upstream request %d carried Authorization %.20s...", i, h)
		}
	}
}

// A DPoP-bound token is refused as a Bearer token (RFC 9449 §7.2), and
// under the DPoP scheme without a proof, with a replayed proof, or with a
// proof for another URL or of another key.
func TestGatewayRefusesDPoPBoundTokensWithoutTheirProof(t *testing.T) {
	s := newStack(t, true, dpopConfig)
	key, err := dpop.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := dpop.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	tok := s.dpopToken(t, "user-bot", key)
	proof := func(k *dpop.Signer, u string) string {
		p, err := k.Proof(http.MethodPost, u, tok, "")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := proof(key, s.resource)
	if resp := s.initialize(t, "DPoP "+tok, good); resp.StatusCode != http.StatusOK {
		t.Fatalf("bound token with its proof: status %d, want 200", resp.StatusCode)
	}
	// RFC 9449 §7.1-7.2: the error goes in the challenge of the scheme the
	// request used, listed first.
	for name, c := range map[string]struct{ auth, proof, scheme, wantErr string }{
		"bearer downgrade":          {"Bearer " + tok, "", "Bearer", "invalid_token"},
		"bearer downgrade, proof":   {"Bearer " + tok, proof(key, s.resource), "Bearer", "invalid_token"},
		"no proof":                  {"DPoP " + tok, "", "DPoP", "invalid_dpop_proof"},
		"replayed proof":            {"DPoP " + tok, good, "DPoP", "invalid_dpop_proof"},
		"proof for the upstream":    {"DPoP " + tok, proof(key, s.cfg.Upstream), "DPoP", "invalid_dpop_proof"},
		"proof of another key":      {"DPoP " + tok, proof(other, s.resource), "DPoP", "invalid_token"},
		"proof for the AS endpoint": {"DPoP " + tok, proof(key, s.issuer+"/token"), "DPoP", "invalid_dpop_proof"},
	} {
		resp := s.initialize(t, c.auth, c.proof)
		chs := resp.Header.Values("WWW-Authenticate")
		if resp.StatusCode != http.StatusUnauthorized || len(chs) != 2 || !strings.HasPrefix(chs[0], c.scheme+" ") ||
			!strings.Contains(chs[0], `error="`+c.wantErr+`"`) || !strings.Contains(strings.Join(chs, ", "), "DPoP ") {
			t.Errorf("%s: %d %q, want 401 with %s error=%q first and a DPoP challenge", name, resp.StatusCode, chs, c.scheme, c.wantErr)
		}
	}
	if n := len(s.up.seen()); n != 1 {
		t.Fatalf("upstream saw %d requests, want only the accepted one", n)
	}
}

// With dpop.required a Bearer token is refused and PRM says so.
func TestGatewayDPoPRequired(t *testing.T) {
	s := newStack(t, true, baseConfig+"dpop: {required: true}\n")
	if resp := s.initialize(t, "Bearer "+s.token(t, "user-bot"), ""); resp.StatusCode != http.StatusUnauthorized ||
		len(resp.Header.Values("WWW-Authenticate")) != 1 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "DPoP ") {
		t.Fatalf("Bearer token with dpop.required: %d %q, want 401 with a DPoP challenge only", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}
	prm, _ := url.Parse(s.resource)
	resp, err := http.Get(s.gw.URL + "/.well-known/oauth-protected-resource" + prm.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc["dpop_bound_access_tokens_required"] != true || doc["dpop_signing_alg_values_supported"] == nil {
		t.Fatalf("PRM %v does not advertise required DPoP", doc)
	}
	key, err := dpop.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	tok := s.dpopToken(t, "user-bot", key)
	p, err := key.Proof(http.MethodPost, s.resource, tok, "")
	if err != nil {
		t.Fatal(err)
	}
	if resp := s.initialize(t, "DPoP "+tok, p); resp.StatusCode != http.StatusOK {
		t.Fatalf("bound token with dpop.required: status %d, want 200", resp.StatusCode)
	}
}

func TestConfigDPoPAlgs(t *testing.T) {
	base := "resource: https://gw.example/mcp\nissuer: https://as.example\nupstream: http://127.0.0.1:1/mcp\n"
	for _, alg := range []string{"none", "HS256", "ES256K", ""} {
		if _, err := ParseConfig([]byte(base+"dpop: {algs: ["+`"`+alg+`"`+"]}\n"), func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "dpop.algs") {
			t.Errorf("alg %q: err %v, want a dpop.algs error", alg, err)
		}
	}
	c, err := ParseConfig([]byte(base+"dpop: {required: true, algs: [ES256, EdDSA]}\n"), func(string) (string, bool) { return "", false })
	if err != nil || c.DPoP == nil || !c.DPoP.Required || len(c.DPoP.Algs) != 2 {
		t.Fatalf("config %+v, err %v", c, err)
	}
}

// TestGatewayAcceptsDPoPWithoutConfiguration: with no dpop key, a client
// that sent a proof to the AS (and so holds a DPoP-bound token) is let in
// under the DPoP scheme; the same token sent as Bearer is still refused
// (RFC 9449 §7.2), and PRM names the proof algorithms.
func TestGatewayAcceptsDPoPWithoutConfiguration(t *testing.T) {
	s := newStack(t, true, baseConfig)
	key, err := dpop.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	tok := s.dpopToken(t, "user-bot", key)
	proof, err := key.Proof(http.MethodPost, s.resource, tok, "")
	if err != nil {
		t.Fatal(err)
	}
	if resp := s.initialize(t, "DPoP "+tok, proof); resp.StatusCode != http.StatusOK {
		t.Fatalf("DPoP scheme: %d %q", resp.StatusCode, resp.Header.Values("WWW-Authenticate"))
	}
	if resp := s.initialize(t, "Bearer "+tok, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a bound token as Bearer: %d", resp.StatusCode)
	}
	if resp := s.initialize(t, "Bearer "+s.token(t, "user-bot"), ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("a Bearer token: %d", resp.StatusCode)
	}
	prm, _ := rsmiddleware.ResourceMetadataURL(s.resource)
	resp, err := http.Get(prm)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "dpop_signing_alg_values_supported") || strings.Contains(string(body), "dpop_bound_access_tokens_required") {
		t.Errorf("PRM %s", body)
	}
}
