package rsmiddleware

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func newExchanger(t *testing.T, ks *keyServer, mod func(*ExchangeConfig)) *Exchanger {
	cfg := ExchangeConfig{Issuer: ks.issuer, ClientID: rsClientID, ClientSecret: rsClientSecret, HTTPClient: ks.srv.Client()}
	if mod != nil {
		mod(&cfg)
	}
	e, err := NewExchanger(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestExchangerCachesPerSubjectTokenAndAudience(t *testing.T) {
	ks := newKeyServer(t)
	now := time.Now()
	e := newExchanger(t, ks, func(c *ExchangeConfig) { c.Now = func() time.Time { return now } })
	inbound := ks.mint(ks.claims())
	ctx := ContextWithPrincipal(context.Background(), &Principal{Subject: "alice"}, inbound)

	t1, err := e.Token(ctx, downstreamRes)
	if err != nil {
		t.Fatal(err)
	}
	if t1.AccessToken == inbound || t1.TokenType != "Bearer" {
		t.Fatalf("exchanged token %+v", t1)
	}
	c, ok := ks.parse(t1.AccessToken)
	if !ok || c["aud"] != downstreamRes || c["sub"] != "alice" {
		t.Fatalf("downstream token claims %v", c)
	}
	if act, _ := c["act"].(map[string]any); act["sub"] != rsClientID {
		t.Fatalf("act claim %v", c["act"])
	}
	t2, err := e.Token(ctx, downstreamRes+"/") // same resource, other spelling
	if err != nil || t2 != t1 {
		t.Fatalf("second exchange not cached: %v", err)
	}
	if got := ks.tokenHits.Load(); got != 1 {
		t.Fatalf("token endpoint called %d times, want 1", got)
	}
	other := ContextWithPrincipal(context.Background(), &Principal{Subject: "alice"}, ks.mint(ks.claims()))
	if _, err := e.Token(other, downstreamRes); err != nil || ks.tokenHits.Load() != 2 {
		t.Fatalf("another subject token must be exchanged anew: %v", err)
	}
	now = now.Add(5*time.Minute - 10*time.Second) // within RefreshBefore of expiry
	t3, err := e.Token(ctx, downstreamRes)
	if err != nil || t3 == t1 || ks.tokenHits.Load() != 3 {
		t.Fatalf("token near expiry not replaced: %v", err)
	}
}

func TestExchangerReportsOAuthErrors(t *testing.T) {
	ks := newKeyServer(t)
	e := newExchanger(t, ks, nil)
	ctx := ContextWithPrincipal(context.Background(), &Principal{}, ks.mint(ks.claims()))
	tests := []struct {
		name, resource, code string
		ctx                  context.Context
	}{
		{"reports invalid_target for a disallowed downstream resource", "https://forbidden.example.com", "invalid_target", ctx},
		{"reports invalid_grant for a subject token of another audience", downstreamRes, "invalid_grant",
			ContextWithPrincipal(context.Background(), &Principal{}, func() string { c := ks.claims(); c["aud"] = otherResource; return ks.mint(c) }())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.Token(tt.ctx, tt.resource)
			var xe *ExchangeError
			if !errors.As(err, &xe) || xe.Code != tt.code || xe.Status != 400 {
				t.Fatalf("err = %v, want %s", err, tt.code)
			}
		})
	}
	t.Run("reports invalid_client for wrong credentials", func(t *testing.T) {
		bad := newExchanger(t, ks, func(c *ExchangeConfig) { c.ClientSecret = "nope" })
		var xe *ExchangeError
		if _, err := bad.Token(ctx, downstreamRes); !errors.As(err, &xe) || xe.Code != "invalid_client" {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("refuses a context without an inbound token", func(t *testing.T) {
		if _, err := e.Token(context.Background(), downstreamRes); !errors.Is(err, ErrNoInboundToken) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("refuses an incomplete config", func(t *testing.T) {
		if _, err := NewExchanger(ExchangeConfig{Issuer: ks.issuer}); err == nil {
			t.Fatal("accepted a config without client credentials")
		}
		if _, err := NewExchanger(ExchangeConfig{ClientID: "a", ClientSecret: "b"}); err == nil {
			t.Fatal("accepted a config without issuer or token URL")
		}
	})
}

// TestDownstreamCallsUseExchangedTokens runs the whole path: a client calls
// the protected MCP handler, which calls a downstream API through the
// Exchanger's Transport.
func TestDownstreamCallsUseExchangedTokens(t *testing.T) {
	ks := newKeyServer(t)
	var downstreamHits atomic.Int32
	var seen atomic.Value
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downstreamHits.Add(1)
		seen.Store(r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusOK)
	}))
	defer downstream.Close()

	e := newExchanger(t, ks, nil)
	client := &http.Client{Transport: e.Transport(nil, downstreamRes)}
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// The handler tries what the test asks for via the X-Mode header.
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, downstream.URL, nil)
		switch r.Header.Get("X-Mode") {
		case "smuggle-header":
			// A handler that got hold of the inbound token (here: the test
			// passes it in a header) and tries to forward it.
			req.Header.Set("X-Forwarded-Token", r.Header.Get("X-Inbound"))
		case "smuggle-query":
			req.URL.RawQuery = "token=" + r.Header.Get("X-Inbound")
		case "smuggle-basic":
			req.SetBasicAuth("u", r.Header.Get("X-Inbound"))
		case "smuggle-base64":
			req.Header.Set("X-Credential", "Token "+base64.StdEncoding.EncodeToString([]byte(r.Header.Get("X-Inbound"))))
		case "proxy-basic":
			req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:pw")))
		case "detached":
			req = req.WithContext(context.Background())
		}
		resp, err := client.Do(req)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			_ = json.NewEncoder(w).Encode(err.Error())
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})))
	defer srv.Close()

	inbound := ks.mint(ks.claims())
	call := func(mode string) int {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(rpc("tools/list", nil)))
		req.Header.Set("Authorization", "Bearer "+inbound)
		req.Header.Set("X-Mode", mode)
		req.Header.Set("X-Inbound", inbound)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := call("plain"); got != 200 {
		t.Fatalf("plain downstream call: %d", got)
	}
	auth, _ := seen.Load().(string)
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || tok == inbound {
		t.Fatalf("downstream saw %q", auth)
	}
	if c, ok := ks.parse(tok); !ok || c["aud"] != downstreamRes {
		t.Fatalf("downstream token claims %v", c)
	}
	// Basic credentials of something else are sent.
	if got := call("proxy-basic"); got != 200 {
		t.Fatalf("downstream call with other Basic credentials: %d", got)
	}
	tests := []struct{ name, mode string }{
		{"refuses to send the inbound token in another header", "smuggle-header"},
		{"refuses to send the inbound token in the query string", "smuggle-query"},
		{"refuses to send the inbound token inside Basic credentials", "smuggle-basic"},
		{"refuses to send the inbound token base64-encoded under another scheme", "smuggle-base64"},
		{"refuses a request without the inbound context", "detached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := downstreamHits.Load()
			if got := call(tt.mode); got != http.StatusBadGateway {
				t.Fatalf("status %d, want 502 (transport error)", got)
			}
			if downstreamHits.Load() != before {
				t.Fatal("the refused request reached the downstream server")
			}
		})
	}
}

// okTransport answers every request 204 without a network.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
}

// BenchmarkExchangeTransportCached is a downstream call whose exchanged
// token is cached: the cost the transport adds to each request.
func BenchmarkExchangeTransportCached(b *testing.B) {
	ks := newKeyServer(b)
	e, err := NewExchanger(ExchangeConfig{Issuer: ks.issuer, ClientID: rsClientID, ClientSecret: rsClientSecret, HTTPClient: ks.srv.Client()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := ContextWithPrincipal(context.Background(), &Principal{Subject: "alice"}, ks.mint(ks.claims()))
	tr := e.Transport(okTransport{}, downstreamRes)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, downstreamRes, nil)
	if _, err := tr.RoundTrip(req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
}
