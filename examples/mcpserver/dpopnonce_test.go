package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpauth/mcpauth/as"
	"github.com/mcpauth/mcpauth/dpop"
	"github.com/mcpauth/mcpauth/storage/memory"
)

// TestDPoPNonceIsRequiredAndSharedByInstances runs the real AS and two
// instances of this server started with --dpop-nonce and one nonce
// secret over loopback HTTP: a proof without a nonce gets 401
// use_dpop_nonce with a DPoP-Nonce header (RFC 9449 §9), the retry with
// that nonce is accepted, by the other instance too, and a made-up nonce
// is refused.
func TestDPoPNonceIsRequiredAndSharedByInstances(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	asSrv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + asSrv.Listener.Addr().String()
	mcpA, mcpB := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	// Both instances serve one public URL, as behind a load balancer; the
	// test reaches each directly and names the public URL in the proofs.
	resource := "http://" + mcpA.Listener.Addr().String() + "/mcp"
	const secret = "ci-bot-secret-0123456789abcdef"
	authz, err := as.New(ctx, as.Config{
		Issuer:    issuer,
		Resources: []as.Resource{{URI: resource, Scopes: []string{ScopeTools, ScopeAdmin}}},
		Clients:   []as.Client{{ID: "ci-bot", Secret: secret, GrantTypes: []string{"client_credentials"}}},
		Store:     memory.New(),
		Secret:    bytes.Repeat([]byte{9}, 32),
	})
	if err != nil {
		t.Fatal(err)
	}
	asSrv.Config.Handler = authz.Handler()
	asSrv.Start()
	defer asSrv.Close()

	t.Setenv("MCPSERVER_DPOP_NONCE_SECRET", "nonce-secret-shared-by-instances-0123456789")
	for _, srv := range []*httptest.Server{mcpA, mcpB} {
		cfg, err := parseFlags([]string{"--resource", resource, "--issuer", issuer, "--dpop-nonce"})
		if err != nil {
			t.Fatal(err)
		}
		h, err := newServer(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		srv.Config.Handler = h
		srv.Start()
		defer srv.Close()
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
	req.SetBasicAuth("ci-bot", secret)
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
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
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
