package rsmiddleware

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpauth/mcpauth/toolpolicy"
)

// A Go server passing its TracerProvider to the Middleware and MCPFilter
// joins its caller's trace: a server span continuing traceparent, with the
// MCP attributes (never an argument's value or the token), the token's
// verification and the policy's decision as its children, and the audit
// line carrying the server span's ids.
func TestMiddlewareAndFilterJoinTheCallersTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ks := newKeyServer(t)
	engine, err := toolpolicy.New(toolpolicy.Config{Rules: []toolpolicy.Rule{
		{Match: toolpolicy.Match{Tools: []string{"delete_*"}}, Allow: "args.environment != 'production'", Message: "not in production"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	audit := &syncBuffer{}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := NewMCPFilter(MCPFilterConfig{Audit: AuditLog(audit, "json"), Policy: engine, Logger: discard, TracerProvider: tp})
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm, Logger: discard, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(f.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a denied call reached the server")
	}))))
	defer srv.Close()
	token := ks.mint(ks.claims())
	const secretArg = "argument-value-3b9f"
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_thing","arguments":{"environment":"production","note":"` + secretArg + `"}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK && !strings.Contains(audit.String(), "denied") {
		t.Fatalf("status %d, audit %s", resp.StatusCode, audit)
	}
	spans := exp.GetSpans()
	var server tracetest.SpanStub
	names := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		names[s.Name] = s
		if s.SpanKind == trace.SpanKindServer {
			server = s
		}
		for _, kv := range s.Attributes {
			if v := kv.Value.Emit(); strings.Contains(v, secretArg) || strings.Contains(v, token) {
				t.Errorf("span %q attribute %s holds a secret: %q", s.Name, kv.Key, v)
			}
		}
	}
	if server.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || server.Parent.SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("no server span continuing traceparent: %v", spans)
	}
	attrs := map[string]string{}
	for _, kv := range server.Attributes {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "delete_thing" || attrs["oauth.client_id"] != "client-1" ||
		len(attrs["mcp.arguments.sha256"]) == 0 || attrs["jsonrpc.request.id"] != "7" || attrs["url.path"] != "/mcp" {
		t.Errorf("server span attributes %v", attrs)
	}
	for _, name := range []string{"verify token", "policy"} {
		s, ok := names[name]
		if !ok || s.Parent.SpanID() != server.SpanContext.SpanID() {
			t.Errorf("no %q span under the server span: %v", name, spans)
		}
	}
	if names["policy"].Status.Code != codes.Error || names["verify token"].Status.Code == codes.Error {
		t.Errorf("statuses: policy %v, verify %v", names["policy"].Status, names["verify token"].Status)
	}
	ids := `"trace_id":"` + server.SpanContext.TraceID().String() + `","span_id":"` + server.SpanContext.SpanID().String() + `"`
	if !strings.Contains(audit.String(), ids) {
		t.Errorf("audit line without %s: %s", ids, audit)
	}
}

// A refused token ends its verification span with an error status that
// names the refusal's kind only.
func TestVerifySpanOfARefusedToken(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm, TracerProvider: tp,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer not-a-token")
	mw.Wrap(http.NotFoundHandler()).ServeHTTP(rec, r)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("status %d", rec.Code)
	}
	var verify, server bool
	for _, s := range exp.GetSpans() {
		switch s.Name {
		case "verify token":
			verify = s.Status.Code == codes.Error && s.Status.Description == "token refused"
		case "GET":
			for _, kv := range s.Attributes {
				server = server || kv.Key == "http.response.status_code" && kv.Value.AsInt64() == 401
			}
		}
	}
	if !verify || !server {
		t.Fatalf("spans %v", exp.GetSpans())
	}
}

// The audit line writes trace_id and span_id, in both formats, when the
// event has them, after latency_ms; the JSON appender writes what slog's
// handler writes.
func TestAuditLogWritesTheTraceIDs(t *testing.T) {
	e := AuditEvent{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Event: "tool.call", Method: "tools/call", Tool: "echo",
		RequestID: "1", Result: AuditOK, Status: 200, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}
	var fast, slow, text bytes.Buffer
	AuditLog(&fast, "json")(e)
	slogAudit(slog.NewJSONHandler(&slow, nil), true)(e)
	AuditLog(&text, "text")(e)
	if fast.String() != slow.String() {
		t.Fatalf("appender %s\nslog     %s", fast.String(), slow.String())
	}
	if !strings.HasSuffix(fast.String(), `,"latency_ms":0,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}`+"\n") ||
		!strings.Contains(text.String(), "trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7") {
		t.Fatalf("lines:\n%s%s", fast.String(), text.String())
	}
	e.TraceID, e.SpanID = "", ""
	fast.Reset()
	AuditLog(&fast, "json")(e)
	if strings.Contains(fast.String(), "trace_id") {
		t.Fatalf("ids without a span: %s", fast.String())
	}
}

// Without a TracerProvider the Middleware uses the global one, looked up
// per request: nothing before a program sets it, spans after.
func TestMiddlewareDefaultsToTheGlobalProvider(t *testing.T) {
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, nil), ResourceMetadataURL: prm,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var seen trace.SpanContext
	h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = trace.SpanContextFromContext(r.Context()) }))
	call := func() {
		r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+ks.mint(ks.claims()))
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	call()
	if seen.IsValid() {
		t.Fatal("a span before any provider was set")
	}
	exp := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	call()
	if !seen.IsValid() || len(exp.GetSpans()) < 2 {
		t.Fatalf("spans after the global provider was set: %v", exp.GetSpans())
	}
}

// The Verifier's fetches from the AS (metadata, then JWKS) caused by a
// request are client spans under that request's span, each with its
// url.full (no query), method and status, and no token in any attribute.
func TestVerifierFetchesAreChildSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ks := newKeyServer(t)
	prm, _ := ResourceMetadataURL(testResource)
	mw, err := NewMiddleware(MiddlewareConfig{Verifier: ks.verifier(t, func(c *Config) { c.TracerProvider = tp }), ResourceMetadataURL: prm,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	token := ks.mint(ks.claims())
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	spans := rec.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	var server sdktrace.ReadOnlySpan
	for _, sp := range spans {
		byID[sp.SpanContext().SpanID()] = sp
		if sp.SpanKind() == trace.SpanKindServer {
			server = sp
		}
	}
	if server == nil {
		t.Fatal("no server span")
	}
	urls := map[string]bool{}
	for _, sp := range spans {
		for _, a := range sp.Attributes() {
			if strings.Contains(a.Value.Emit(), token) {
				t.Errorf("span %q attribute %s carries the token", sp.Name(), a.Key)
			}
		}
		if sp.SpanKind() != trace.SpanKindClient {
			continue
		}
		if sp.Name() != "authorization server" {
			t.Errorf("client span %q", sp.Name())
		}
		p := sp
		for p != nil && p != server {
			p = byID[p.Parent().SpanID()]
		}
		if p != server {
			t.Errorf("client span %q is not under the request's span", sp.Name())
		}
		attrs := map[string]string{}
		for _, a := range sp.Attributes() {
			attrs[string(a.Key)] = a.Value.Emit()
		}
		if attrs["http.request.method"] != "GET" || attrs["http.response.status_code"] != "200" || attrs["server.address"] != "127.0.0.1" {
			t.Errorf("client span attributes %v", attrs)
		}
		urls[attrs["url.full"]] = true
	}
	if !urls[ks.issuer+"/jwks.json"] {
		t.Errorf("no client span of the JWKS fetch among %v", urls)
	}
}
