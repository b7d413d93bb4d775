package rsmiddleware

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/metadata"
)

// An introspected token carries its tenant in the RFC 7662 answer, not in
// the token (which may be opaque): the audit reads it from there, for
// answered, denied and refused requests alike.
func TestMCPFilterReadsTheTenantOfAnIntrospectedToken(t *testing.T) {
	mux := http.NewServeMux()
	as := httptest.NewServer(mux)
	defer as.Close()
	mh, _ := metadata.Handler(metadata.AuthorizationServerMetadata{Issuer: as.URL, IntrospectionEndpoint: as.URL + "/introspect", ResponseTypesSupported: []string{"code"}})
	mux.Handle("/.well-known/oauth-authorization-server", mh)
	mux.HandleFunc("/introspect", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		scope := "mcp:tools"
		if r.PostForm.Get("token") == "opaque-admin" {
			scope = "mcp:tools mcp:admin"
		}
		writeJSON(w, 200, map[string]any{"active": true, "iss": as.URL, "sub": "alice", "aud": testResource, "client_id": "c",
			"scope": scope, "exp": time.Now().Add(time.Minute).Unix(), "tenant": "acme-from-introspection"})
	})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	v, err := NewVerifier(Config{Issuer: as.URL, Resource: testResource, Logger: logger,
		Introspection: &ClientCredentials{ClientID: rsClientID, ClientSecret: rsClientSecret}})
	if err != nil {
		t.Fatal(err)
	}
	audit := &syncBuffer{}
	f := NewMCPFilter(MCPFilterConfig{Scopes: filterScopes, Audit: AuditLog(audit, "json"), TenantClaim: "tenant", Logger: logger})
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: v, ResourceMetadataURL: prm, Scopes: filterScopes, Logger: logger,
		OnInsufficientScope: f.AuditDenied, OnRefused: f.AuditRefused})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(f.Wrap(mcpUpstream(false))))
	defer srv.Close()
	for _, c := range []struct{ token, body string }{
		{"opaque-admin", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"admin_stats"}}`},
		{"opaque-user", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"admin_stats"}}`},
		{"opaque-user", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","name":"x"}}`},
	} {
		postAuth(t, srv.URL, "Bearer "+c.token, c.body)
	}
	lines := auditLines(t, audit.String())
	want := []string{AuditOK, AuditDenied, AuditInvalid}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), audit.String())
	}
	for i, l := range lines {
		if l.Result != want[i] || l.Tenant != "acme-from-introspection" || l.Sub != "alice" {
			t.Errorf("line %d: %+v, want result %s and the introspection answer's tenant", i, l, want[i])
		}
	}
}
