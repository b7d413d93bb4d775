package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/dpop"
)

// TestDPoPNonceIsRequiredAndSharedByInstances runs the real AS and two
// instances of this server started with --dpop-nonce and one nonce
// secret over loopback HTTP: a proof without a nonce gets 401
// use_dpop_nonce with a DPoP-Nonce header (RFC 9449 §9), the retry with
// that nonce is accepted, by the other instance too, and a made-up nonce
// is refused.
func TestDPoPNonceIsRequiredAndSharedByInstances(t *testing.T) {
	asSrv := httptest.NewUnstartedServer(nil)
	mcpA, mcpB := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	// Both instances serve one public URL, as behind a load balancer; the
	// test reaches each directly and names the public URL in the proofs.
	resource := "http://" + mcpA.Listener.Addr().String() + "/mcp"
	issuer := startAS(t, asSrv, resource)
	t.Setenv("MCPSERVER_DPOP_NONCE_SECRET", "nonce-secret-shared-by-instances-0123456789")
	for _, srv := range []*httptest.Server{mcpA, mcpB} {
		serveMCP(t, srv, "--resource", resource, "--issuer", issuer, "--dpop-nonce")
	}

	key, err := dpop.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	proof := func(u, tok, nonce string) string {
		p, err := key.Proof(http.MethodPost, u, tok, nonce)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {ScopeTools}}
	req, _ := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("DPoP", proof(issuer+"/token", "", ""))
	req.SetBasicAuth("ci-bot", botSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Unmarshal(body, &tr) != nil || tr.TokenType != "DPoP" {
		t.Fatalf("DPoP token: %d %s", resp.StatusCode, body)
	}

	initialize := func(srv *httptest.Server, p string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(initializeBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "DPoP "+tr.AccessToken)
		req.Header.Set("DPoP", p)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	resp = initialize(mcpA, proof(resource, tr.AccessToken, ""))
	nonce := resp.Header.Get("DPoP-Nonce")
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(ch, `error="use_dpop_nonce"`) || nonce == "" {
		t.Fatalf("proof without a nonce: %d %q nonce %q, want 401 use_dpop_nonce with a DPoP-Nonce", resp.StatusCode, ch, nonce)
	}
	if resp := initialize(mcpA, proof(resource, tr.AccessToken, nonce)); resp.StatusCode != http.StatusOK {
		t.Fatalf("proof with the server's nonce: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	if resp := initialize(mcpB, proof(resource, tr.AccessToken, nonce)); resp.StatusCode != http.StatusOK {
		t.Fatalf("the other instance refused the nonce: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	resp = initialize(mcpA, proof(resource, tr.AccessToken, "made-up-nonce"))
	if ch := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(ch, `error="use_dpop_nonce"`) {
		t.Fatalf("made-up nonce: %d %q, want 401 use_dpop_nonce", resp.StatusCode, ch)
	}
}

// A nonce secret shorter than 32 bytes is refused at start.
func TestDPoPNonceRefusesAShortSecret(t *testing.T) {
	t.Setenv("MCPSERVER_DPOP_NONCE_SECRET", "short")
	cfg, err := parseFlags([]string{"--resource", "http://127.0.0.1:1/mcp", "--issuer", unreachableIssuer, "--dpop-nonce"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newServer(cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "MCPSERVER_DPOP_NONCE_SECRET") {
		t.Fatalf("newServer with a 5-byte nonce secret: %v", err)
	}
}

// TestDPoPAcceptedWithoutFlags: started without --dpop, the server lets a
// DPoP-bound token in under the DPoP scheme with a proof for --resource,
// and refuses it as Bearer (RFC 9449 §7.2).
func TestDPoPAcceptedWithoutFlags(t *testing.T) {
	asSrv, mcpSrv := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	resource := "http://" + mcpSrv.Listener.Addr().String() + "/mcp"
	issuer := startAS(t, asSrv, resource)
	serveMCP(t, mcpSrv, "--resource", resource, "--issuer", issuer)
	key, err := dpop.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := key.Proof(http.MethodPost, issuer+"/token", "", "")
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {ScopeTools}}
	req, _ := http.NewRequest(http.MethodPost, issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("DPoP", p)
	req.SetBasicAuth("ci-bot", botSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if json.Unmarshal(body, &tr) != nil || tr.TokenType != "DPoP" {
		t.Fatalf("DPoP token: %d %s", resp.StatusCode, body)
	}
	send := func(scheme string, withProof bool) int {
		req, _ := http.NewRequest(http.MethodPost, resource, strings.NewReader(initializeBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", scheme+" "+tr.AccessToken)
		if withProof {
			p, _ := key.Proof(http.MethodPost, resource, tr.AccessToken, "")
			req.Header.Set("DPoP", p)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send("DPoP", true); got != http.StatusOK {
		t.Fatalf("DPoP scheme: %d", got)
	}
	if got := send("Bearer", false); got != http.StatusUnauthorized {
		t.Fatalf("a bound token as Bearer: %d", got)
	}
}
