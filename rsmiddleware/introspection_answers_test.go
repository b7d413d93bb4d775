package rsmiddleware

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/metadata"
)

// TestIntrospectionAnswerChecks: what an active RFC 7662 answer must say
// for the token to be accepted: an access token type (DPoP only with cnf),
// the configured issuer when iss is given (and that issuer when not); and
// the token sent at all only when it is 1 to 16384 bytes.
func TestIntrospectionAnswerChecks(t *testing.T) {
	var answer atomic.Value
	var hits atomic.Int32
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	mh, _ := metadata.Handler(metadata.AuthorizationServerMetadata{Issuer: srv.URL, IntrospectionEndpoint: srv.URL + "/introspect", ResponseTypesSupported: []string{"code"}})
	mux.Handle("/.well-known/oauth-authorization-server", mh)
	mux.HandleFunc("/introspect", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		writeJSON(w, 200, answer.Load())
	})
	v, err := NewVerifier(Config{Issuer: srv.URL, Resource: testResource, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Introspection: &ClientCredentials{ClientID: rsClientID, ClientSecret: rsClientSecret}})
	if err != nil {
		t.Fatal(err)
	}
	base := func(mod func(map[string]any)) map[string]any {
		a := map[string]any{"active": true, "iss": srv.URL, "sub": "alice", "aud": testResource, "client_id": "c",
			"exp": time.Now().Add(time.Minute).Unix()}
		if mod != nil {
			mod(a)
		}
		return a
	}
	for _, tc := range []struct {
		name   string
		answer map[string]any
		ok     bool
	}{
		{"accepts a Bearer token", base(func(a map[string]any) { a["token_type"] = "Bearer" }), true},
		{"accepts an answer without iss", base(func(a map[string]any) { delete(a, "iss") }), true},
		{"refuses another issuer", base(func(a map[string]any) { a["iss"] = "https://evil.example" }), false},
		{"refuses token_type N_A", base(func(a map[string]any) { a["token_type"] = "N_A" }), false},
		{"refuses a DPoP token without cnf", base(func(a map[string]any) { a["token_type"] = "DPoP" }), false},
		{"accepts a DPoP token with cnf", base(func(a map[string]any) {
			a["token_type"], a["cnf"] = "DPoP", map[string]any{"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}
		}), true},
	} {
		answer.Store(tc.answer)
		_, err := v.Verify(context.Background(), "opaque-token")
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidToken)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	answer.Store(base(nil))
	before := hits.Load()
	if _, err := v.Verify(context.Background(), strings.Repeat("t", 16<<10)); err != nil {
		t.Errorf("a token of 16 KiB: %v", err)
	}
	for _, tok := range []string{"", strings.Repeat("t", 16<<10+1)} {
		if _, err := v.Verify(context.Background(), tok); err == nil || !strings.Contains(err.Error(), "malformed token") {
			t.Errorf("a token of %d bytes: %v; want malformed", len(tok), err)
		}
	}
	if got := hits.Load() - before; got != 1 {
		t.Errorf("%d introspection calls; want 1 (only the 16 KiB token)", got)
	}
}
