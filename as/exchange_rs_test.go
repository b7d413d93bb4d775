package as

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// protect wraps h in the real rsmiddleware Bearer middleware for resource,
// verifying tokens against the AS's JWKS as a resource server would.
func protect(t *testing.T, h *harness, resource string, next http.Handler) http.Handler {
	t.Helper()
	v, err := rsmiddleware.NewVerifier(rsmiddleware.Config{Issuer: h.issuer, Resource: resource})
	if err != nil {
		t.Fatal(err)
	}
	prm, err := rsmiddleware.ResourceMetadataURL(resource)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{Verifier: v, ResourceMetadataURL: prm})
	if err != nil {
		t.Fatal(err)
	}
	return m.Wrap(next)
}

// TestTokenExchangeEndToEndWithRSMiddleware runs the whole delegation over
// real HTTP: a user's token reaches an MCP-side server (resource mcpURI)
// through rsmiddleware; that server calls a downstream API (resource
// otherURI) through rsmiddleware's exchange Transport, which exchanges the
// token at this AS; the downstream API, behind its own rsmiddleware,
// accepts the exchanged token and never sees the user's.
func TestTokenExchangeEndToEndWithRSMiddleware(t *testing.T) {
	h := exchangeHarness(t, nil)
	user := h.codeFlow("mcp:tools")

	var mu sync.Mutex
	var downstreamAuth []string
	api := protect(t, h, otherURI, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := rsmiddleware.PrincipalFromContext(r.Context())
		_ = json.NewEncoder(w).Encode(p)
	}))
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		downstreamAuth = append(downstreamAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		api.ServeHTTP(w, r)
	}))
	defer downstream.Close()

	ex, err := rsmiddleware.NewExchanger(rsmiddleware.ExchangeConfig{Issuer: h.issuer, ClientID: "mcp-server", ClientSecret: mcpSrvSecret})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: ex.Transport(nil, otherURI)}
	mcp := httptest.NewServer(protect(t, h, mcpURI, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, downstream.URL+"/report", nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})))
	defer mcp.Close()

	call := func() (int, *rsmiddleware.Principal) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, mcp.URL, nil)
		req.Header.Set("Authorization", "Bearer "+user.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("MCP-side server answered %d: %s", resp.StatusCode, body)
		}
		var p rsmiddleware.Principal
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return resp.StatusCode, &p
	}
	_, p := call()
	if p.Subject != "alice" || p.ClientID != "mcp-server" || !slices.Equal(p.Audience, []string{otherURI}) || !slices.Equal(p.Scopes, []string{"other:read"}) {
		t.Errorf("downstream principal %+v", p)
	}
	if p.Actor == nil || p.Actor.Subject != "mcp-server" || p.Actor.Actor != nil {
		t.Errorf("downstream actor %+v", p.Actor)
	}
	_, p2 := call()
	if p2.TokenID != p.TokenID {
		t.Error("the exchanger did not reuse its cached token for the same subject token")
	}
	mu.Lock()
	for _, a := range downstreamAuth {
		if a == "Bearer "+user.AccessToken {
			t.Error("the downstream API received the user's token")
		}
	}
	mu.Unlock()

	t.Run("the user's token is refused by the downstream API", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, downstream.URL, nil)
		req.Header.Set("Authorization", "Bearer "+user.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status %d", resp.StatusCode)
		}
	})
	t.Run("the exchanger reports a target the policy refuses", func(t *testing.T) {
		_, err := ex.Exchange(t.Context(), user.AccessToken, thirdURI)
		var ee *rsmiddleware.ExchangeError
		if !errors.As(err, &ee) || ee.Code != "invalid_grant" || ee.Status != 400 {
			t.Errorf("err %v", err)
		}
		_, err = ex.Exchange(t.Context(), user.AccessToken, "https://elsewhere.example/api")
		if !errors.As(err, &ee) || ee.Code != "invalid_target" {
			t.Errorf("err %v", err)
		}
	})
	t.Run("the exchanger of a client outside the policy gets invalid_target", func(t *testing.T) {
		stranger, err := rsmiddleware.NewExchanger(rsmiddleware.ExchangeConfig{Issuer: h.issuer, ClientID: "stranger", ClientSecret: strangerSecret})
		if err != nil {
			t.Fatal(err)
		}
		_, err = stranger.Exchange(t.Context(), user.AccessToken, otherURI)
		var ee *rsmiddleware.ExchangeError
		if !errors.As(err, &ee) || ee.Code != "invalid_target" {
			t.Errorf("err %v", err)
		}
	})
}
