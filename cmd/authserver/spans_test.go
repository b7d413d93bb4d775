package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/internal/testop"
	"github.com/mcpauth/mcpauth/internal/tracing"
)

// With tracing on, the time a token request spends elsewhere shows in its
// trace: fetching the client's metadata document (CIMD) and its jwks_uri
// are client spans, and each storage call (the assertion's jti, the
// code's lookup) a span "storage <Method>", all under the request's
// server span; the client's server receives no trace context. No
// attribute carries the assertion, the code, a key, the
// jwks_uri's query or the client's secrets.
func TestAuthServerSpansOfFetchesAndStorage(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const querySecret = "q-7c1e5d"
	docs := httptest.NewTLSServer(nil)
	defer docs.Close()
	clientID := docs.URL + "/client.json"
	jwksURI := docs.URL + "/jwks.json?v=" + querySecret
	var sawTraceparent atomic.Bool
	docs.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Traceparent") != "" {
			sawTraceparent.Store(true)
		}
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/client.json":
			json.NewEncoder(w).Encode(map[string]any{
				"client_id": clientID, "client_name": "Traced", "redirect_uris": []string{"http://127.0.0.1:7777/cb"},
				"grant_types": []string{"authorization_code"}, "response_types": []string{"code"},
				"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": jwksURI,
			})
		case "/jwks.json":
			json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
		default:
			http.NotFound(w, r)
		}
	})
	docsHost := strings.TrimPrefix(docs.URL, "https://")

	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, `issuer: http://127.0.0.1:9000
listen: 127.0.0.1:9000
storage: sqlite:`+filepath.Join(dir, "a.db")+`
secret: ${AUTHSERVER_SECRET}
resources:
  - uri: http://127.0.0.1:8080/mcp
    scopes: [mcp:tools]
cimd:
  allow_hosts: [`+docsHost+`]
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := loadTestConfig(t, cfgPath, strings.Repeat("k3y-m4t3r1al-", 4))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s, err := build(ctx, cfg, true, discardLogger(), env{
		lookup:  func(string) (string, bool) { return "", false },
		tp:      tp,
		rootCAs: docs.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.store.Close()
	srv := httptest.NewServer(tracing.Handler(tp, s.handler, tracing.HandlerConfig{}))
	defer srv.Close()

	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	assertion, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: clientID, Subject: clientID, Audience: jwt.Audience{"http://127.0.0.1:9000"},
		ID: "jti-traced-1", IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Minute)),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	const code = "code-never-issued-5d2a"
	resp, err := http.PostForm(srv.URL+"/token", url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {"http://127.0.0.1:7777/cb"},
		"code_verifier": {strings.Repeat("v", 43)}, "client_id": {clientID},
		"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {assertion},
	})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400 (an authenticated client, a code never issued)", resp.StatusCode)
	}

	spans := rec.Ended()
	var server sdktrace.ReadOnlySpan
	for _, sp := range spans {
		if sp.SpanKind() == trace.SpanKindServer {
			server = sp
		}
	}
	if server == nil {
		t.Fatal("no server span")
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		byName[sp.Name()] = sp
		byID[sp.SpanContext().SpanID()] = sp
		for _, a := range sp.Attributes() {
			v := a.Value.Emit()
			for _, secret := range []string{querySecret, assertion, code, "jti-traced-1", "k1"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %q attribute %s = %q carries %q", sp.Name(), a.Key, v, secret)
				}
			}
		}
	}
	child := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		sp := byName[name]
		if sp == nil {
			names := make([]string, 0, len(spans))
			for _, s := range spans {
				names = append(names, s.Name())
			}
			t.Fatalf("no span %q among %q", name, names)
		}
		// A child of the server span, or of one of its children (fosite's
		// Fosite.NewAccessRequest span is in between).
		p := sp
		for p != nil && p != server {
			p = byID[p.Parent().SpanID()]
		}
		if p != server || sp.SpanContext().TraceID() != server.SpanContext().TraceID() {
			t.Errorf("span %q is not under the request's span", name)
		}
		return sp
	}
	attr := func(sp sdktrace.ReadOnlySpan, k string) string {
		for _, a := range sp.Attributes() {
			if a.Key == attribute.Key(k) {
				return a.Value.Emit()
			}
		}
		return ""
	}
	for name, want := range map[string]string{"cimd fetch": clientID, "jwks fetch": docs.URL + "/jwks.json"} {
		sp := child(name)
		if sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("%q is a %v span, want client", name, sp.SpanKind())
		}
		if got := attr(sp, "url.full"); got != want {
			t.Errorf("%q url.full = %q, want %q", name, got, want)
		}
		if got := attr(sp, "http.response.status_code"); got != "200" {
			t.Errorf("%q http.response.status_code = %q", name, got)
		}
		if got := attr(sp, "server.address"); got != "127.0.0.1" {
			t.Errorf("%q server.address = %q", name, got)
		}
	}
	if sawTraceparent.Load() {
		t.Error("the client's document server received a traceparent")
	}
	for _, op := range []string{"UseJTI", "GetTokenWithPerson"} {
		sp := child("storage " + op)
		if got := attr(sp, "db.operation.name"); got != op {
			t.Errorf("storage %s db.operation.name = %q", op, got)
		}
		if got := attr(sp, "db.system.name"); got != "sqlite" {
			t.Errorf("storage %s db.system.name = %q", op, got)
		}
	}
}

// With tracing off the store is the backend itself: no wrapper, no cost.
func TestAuthServerStoreUnwrappedWithoutTracing(t *testing.T) {
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, `issuer: http://127.0.0.1:9000
listen: 127.0.0.1:9000
storage: sqlite:`+filepath.Join(dir, "a.db")+`
secret: ${AUTHSERVER_SECRET}
resources:
  - uri: http://127.0.0.1:8080/mcp
    scopes: [mcp:tools]
`)
	cfg := loadTestConfig(t, cfgPath, strings.Repeat("k3y-m4t3r1al-", 4))
	s, err := build(context.Background(), cfg, true, discardLogger(), env{lookup: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.store.Close()
	if got := fmt.Sprintf("%T", s.store); strings.Contains(got, "tracedstore") {
		t.Fatalf("store is %s with tracing off, want the backend itself", got)
	}
}

// With tracing on, the calls to an upstream identity provider are client
// spans "upstream <id>" under the span of the request that makes them,
// and the provider receives no trace context.
func TestUpstreamCallsAreClientSpans(t *testing.T) {
	op := testop.Start(t, nil, testop.Client{ID: "as", Secret: "as-secret-2f7e", RedirectURIs: []string{"http://127.0.0.1:9000/upstream/corp/callback"}})
	var sawTraceparent atomic.Bool
	inner := op.Server.Config.Handler
	op.Server.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Traceparent") != "" {
			sawTraceparent.Store(true)
		}
		inner.ServeHTTP(w, r)
	})
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, `issuer: http://127.0.0.1:9000
listen: 127.0.0.1:9000
storage: memory
secret: ${AUTHSERVER_SECRET}
resources:
  - uri: http://127.0.0.1:8080/mcp
    scopes: [mcp:tools]
upstreams:
  - id: corp
    name: Corp
    issuer: `+op.Issuer+`
    client_id: as
    client_secret: as-secret-2f7e
`)
	cfg := loadTestConfig(t, cfgPath, strings.Repeat("k3y-m4t3r1al-", 4))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := &server{cfg: cfg, tp: tp, log: discardLogger()}
	ups, _, err := s.upstreamProviders(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	if _, err := ups[0].Provider.AuthCodeURL(ctx, "state", "nonce", strings.Repeat("v", 43)); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var found bool
	for _, sp := range rec.Ended() {
		if sp.SpanKind() != trace.SpanKindClient {
			continue
		}
		if sp.Name() != "upstream corp" || sp.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("client span %q, parent %s", sp.Name(), sp.Parent().SpanID())
		}
		for _, a := range sp.Attributes() {
			if a.Key == "url.full" && a.Value.AsString() == strings.TrimSuffix(op.Issuer, "/")+"/.well-known/openid-configuration" {
				found = true
			}
		}
	}
	if !found {
		t.Error("no client span of the provider's discovery document")
	}
	if sawTraceparent.Load() {
		t.Error("the upstream provider received a traceparent")
	}
}

// The storage spans' db.system.name is the OpenTelemetry name of the
// configured backend.
func TestDBSystemOfStorage(t *testing.T) {
	for storageURL, want := range map[string]string{
		"memory":                        "memory",
		"sqlite:/var/lib/authserver.db": "sqlite",
		"postgres://db/authserver":      "postgresql",
		"postgresql://db/authserver":    "postgresql",
	} {
		if got := dbSystem(&config.Config{Storage: storageURL}); got != want {
			t.Errorf("dbSystem(%q) = %q, want %q", storageURL, got, want)
		}
	}
}
