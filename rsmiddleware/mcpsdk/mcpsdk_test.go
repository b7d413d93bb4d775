package mcpsdk_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/mcpauth/mcpauth/metadata"
	"github.com/mcpauth/mcpauth/rsmiddleware"
	"github.com/mcpauth/mcpauth/rsmiddleware/mcpsdk"
)

// testAS serves AS metadata and a JWKS and mints RFC 9068 tokens.
type testAS struct {
	issuer string
	key    *ecdsa.PrivateKey
}

func newTestAS(t *testing.T) *testAS {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	as := &testAS{key: k}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	as.issuer = srv.URL
	mh, _ := metadata.Handler(metadata.AuthorizationServerMetadata{Issuer: as.issuer, JWKSURI: as.issuer + "/jwks", ResponseTypesSupported: []string{"code"}})
	mux.Handle("/.well-known/oauth-authorization-server", mh)
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	})
	return as
}

func (as *testAS) mint(t *testing.T, sub, aud, scope string) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: as.key}, (&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	b, _ := json.Marshal(map[string]any{"iss": as.issuer, "sub": sub, "aud": aud, "client_id": "client-1", "scope": scope,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": sub + scope + now.String()})
	j, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := j.CompactSerialize()
	return out
}

// mcpServer is a real go-sdk MCP server with a whoami and a delete_repo tool.
func mcpServer() *mcp.StreamableHTTPHandler {
	type none struct{}
	server := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	whoami := func(ctx context.Context, req *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
		who := "nobody"
		if p, ok := rsmiddleware.PrincipalFromContext(ctx); ok {
			who = "middleware:" + p.Subject
		} else if ti := req.Extra.TokenInfo; ti != nil {
			if p, ok := ti.Extra[mcpsdk.ExtraPrincipal].(*rsmiddleware.Principal); ok {
				who = "sdk:" + p.Subject
			}
		}
		if req.Extra.Header.Get("Authorization") != "" {
			who += "+header"
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: who}}}, nil, nil
	}
	mcp.AddTool(server, &mcp.Tool{Name: "whoami"}, whoami)
	mcp.AddTool(server, &mcp.Tool{Name: "delete_repo"}, whoami)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

func connect(t *testing.T, endpoint, token string) (*mcp.ClientSession, error) {
	hc := oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: token, TokenType: "Bearer"}))
	c := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil)
	return c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
}

func callText(t *testing.T, cs *mcp.ClientSession, tool string) (string, error) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) == 0 {
		return "", io.ErrUnexpectedEOF
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

func TestSDKRequireBearerTokenWithOurVerifier(t *testing.T) {
	as := newTestAS(t)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resource := srv.URL + "/mcp"
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{Issuer: as.issuer, Resource: resource})
	if err != nil {
		t.Fatal(err)
	}
	prm, _ := rsmiddleware.ResourceMetadataURL(resource)
	mux.Handle("/mcp", auth.RequireBearerToken(mcpsdk.TokenVerifier(v), &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm, Scopes: []string{"mcp:read"}})(mcpServer()))

	t.Run("serves a client with a token for this resource", func(t *testing.T) {
		cs, err := connect(t, resource, as.mint(t, "alice", resource, "mcp:read"))
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if got, err := callText(t, cs, "whoami"); err != nil || !strings.HasPrefix(got, "sdk:alice") {
			t.Fatalf("whoami = %q, %v", got, err)
		}
	})
	t.Run("refuses a token for another resource", func(t *testing.T) {
		if cs, err := connect(t, resource, as.mint(t, "alice", "https://other.example.com/mcp", "mcp:read")); err == nil {
			cs.Close()
			t.Fatal("connected with a token for another resource")
		}
	})
	t.Run("maps verification failures to auth.ErrInvalidToken", func(t *testing.T) {
		_, err := mcpsdk.TokenVerifier(v)(context.Background(), "garbage", nil)
		if err == nil || !strings.Contains(err.Error(), auth.ErrInvalidToken.Error()) || !errors.Is(err, auth.ErrInvalidToken) {
			t.Fatalf("err = %v", err)
		}
	})
	// The SDK writes the verifier's error text into the response body.
	t.Run("answers a refused token without the cause", func(t *testing.T) {
		other := "https://other.example.com/mcp"
		initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		status, body := post(t, resource, as.mint(t, "alice", other, "mcp:read"), initialize, nil)
		if status != http.StatusUnauthorized || !strings.Contains(body, auth.ErrInvalidToken.Error()) ||
			strings.Contains(body, other) || strings.Contains(body, "aud") {
			t.Fatalf("answered %d %q", status, body)
		}
	})
}

func TestSDKVerifierHidesUnreachableAS(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	issuer := down.URL
	down.Close()
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{Issuer: issuer, Resource: "https://mcp.example.com/mcp", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, err = mcpsdk.TokenVerifier(v)(context.Background(), "eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIiwidHlwIjoiYXQrand0In0.e30.AAAA", nil)
	if !errors.Is(err, rsmiddleware.ErrUnavailable) || errors.Is(err, auth.ErrInvalidToken) {
		t.Fatalf("err = %v, want rsmiddleware.ErrUnavailable", err)
	}
	host := strings.TrimPrefix(issuer, "http://")
	if strings.Contains(err.Error(), host) || err.Error() != rsmiddleware.ErrUnavailable.Error() {
		t.Fatalf("error text %q carries the cause", err)
	}
}

// post sends the JSON-RPC body with token (and the headers hdr) as a
// Streamable HTTP client would, and returns the status and body of the answer.
func post(t *testing.T, resource, token, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", resource, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestOurMiddlewareInFrontOfTheSDKServer(t *testing.T) {
	as := newTestAS(t)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resource := srv.URL + "/mcp"
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{Issuer: as.issuer, Resource: resource})
	if err != nil {
		t.Fatal(err)
	}
	prmURL, _ := rsmiddleware.ResourceMetadataURL(resource)
	mw, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{
		Verifier: v, ResourceMetadataURL: prmURL,
		Scopes: rsmiddleware.Scopes{Base: []string{"mcp:read"}, Tools: map[string][]string{"delete_repo": {"repo:admin"}}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := rsmiddleware.NewProtectedResourceMetadata(resource, []string{as.issuer}, []string{"mcp:read", "repo:admin"})
	if err := rsmiddleware.MountPRM(mux, doc, false); err != nil {
		t.Fatal(err)
	}
	var binding rsmiddleware.SessionBinding
	mux.Handle("/mcp", mw.Wrap(binding.Wrap(mcpServer())))

	t.Run("publishes metadata that a client can fetch and validate", func(t *testing.T) {
		// The test's own loopback server: a client without an address policy.
		got, err := metadata.FetchProtectedResourceMetadata(context.Background(), http.DefaultClient, resource)
		if err != nil || got.AuthorizationServers[0] != as.issuer {
			t.Fatalf("PRM = %+v, %v", got, err)
		}
	})
	cs, err := connect(t, resource, as.mint(t, "alice", resource, "mcp:read"))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	t.Run("puts the principal in the tool's context and strips the header", func(t *testing.T) {
		if got, err := callText(t, cs, "whoami"); err != nil || got != "middleware:alice" {
			t.Fatalf("whoami = %q, %v", got, err)
		}
	})
	t.Run("refuses a tools/call that needs a scope the token lacks", func(t *testing.T) {
		if got, err := callText(t, cs, "delete_repo"); err == nil {
			t.Fatalf("delete_repo ran: %q", got)
		}
	})
	t.Run("refuses another user's use of the session", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
		status, _ := post(t, resource, as.mint(t, "mallory", resource, "mcp:read"), body,
			map[string]string{"Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-06-18"})
		if status != http.StatusNotFound {
			t.Fatalf("hijack attempt answered %d", status)
		}
	})
	t.Run("a client with the tool's scope may call it", func(t *testing.T) {
		cs2, err := connect(t, resource, as.mint(t, "alice", resource, "mcp:read repo:admin"))
		if err != nil {
			t.Fatal(err)
		}
		defer cs2.Close()
		if got, err := callText(t, cs2, "delete_repo"); err != nil || got != "middleware:alice" {
			t.Fatalf("delete_repo = %q, %v", got, err)
		}
	})
}
