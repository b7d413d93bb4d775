package tracing

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func newProvider() (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	return sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)), exp
}

func attrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

func TestOffReturnsTheHandlerAndTransportThemselves(t *testing.T) {
	handler := http.Handler(http.NewServeMux()) // a pointer: comparable
	for _, tp := range []trace.TracerProvider{nil, noop.NewTracerProvider()} {
		if got := Handler(tp, handler, HandlerConfig{}); got != handler {
			t.Fatal("handler wrapped with tracing off")
		}
		if Transport(tp, http.DefaultTransport, "") != http.DefaultTransport {
			t.Fatal("transport wrapped with tracing off")
		}
		if Enabled(tp) {
			t.Fatal("enabled")
		}
	}
}

func TestServerSpanContinuesTheCallerAndRecordsNoQueryNorHeader(t *testing.T) {
	tp, exp := newProvider()
	var inner trace.SpanContext
	h := Handler(tp, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner = trace.SpanContextFromContext(r.Context())
		w.WriteHeader(http.StatusTeapot)
	}), HandlerConfig{})
	r := httptest.NewRequest("POST", "http://as.example:8443/token?code=secretcode", nil)
	r.Header.Set("Traceparent", parent)
	r.Header.Set("Authorization", "Bearer secrettoken")
	h.ServeHTTP(httptest.NewRecorder(), r)
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.SpanKind != trace.SpanKindServer || s.Parent.SpanID().String() != "00f067aa0ba902b7" || s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("span %v parent %v", s.SpanContext, s.Parent)
	}
	if inner.SpanID() != s.SpanContext.SpanID() {
		t.Fatal("the handler's context does not hold the server span")
	}
	a := attrs(s)
	want := map[string]string{"http.request.method": "POST", "url.path": "/token", "http.response.status_code": "418", "server.address": "as.example", "server.port": "8443"}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("%s = %q, want %q", k, a[k], v)
		}
	}
	for k, v := range a {
		if strings.Contains(v, "secret") || strings.Contains(k, "query") || strings.Contains(k, "header") {
			t.Errorf("attribute %s=%q", k, v)
		}
	}
}

func TestCarrierIsReadWithoutTraceparentHeader(t *testing.T) {
	tp, exp := newProvider()
	h := Handler(tp, http.NotFoundHandler(), HandlerConfig{Carrier: func(http.ResponseWriter, *http.Request) propagation.TextMapCarrier {
		return propagation.MapCarrier{"traceparent": parent}
	}})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil))
	if s := exp.GetSpans(); len(s) != 1 || s[0].SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("spans %v", s)
	}
}

func TestTransportInjectsItsClientSpan(t *testing.T) {
	tp, exp := newProvider()
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Get("Traceparent") }))
	defer srv.Close()
	ctx, root := tp.Tracer("t").Start(context.Background(), "root")
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/jwks?x=secretq", nil)
	resp, err := (&http.Client{Transport: Transport(tp, nil, "")}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	root.End()
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	c := spans[0]
	if c.SpanKind != trace.SpanKindClient || c.Parent.SpanID() != root.SpanContext().SpanID() {
		t.Fatalf("client span %v", c)
	}
	if want := "00-" + c.SpanContext.TraceID().String() + "-" + c.SpanContext.SpanID().String() + "-01"; got != want {
		t.Fatalf("traceparent %q, want %q", got, want)
	}
	if a := attrs(c); a["url.full"] != srv.URL+"/jwks" || a["http.response.status_code"] != "200" {
		t.Fatalf("attributes %v", a)
	}
}

func TestLogHandlerAddsTheIDs(t *testing.T) {
	tp, _ := newProvider()
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil)))
	log.InfoContext(context.Background(), "none")
	ctx, span := tp.Tracer("t").Start(context.Background(), "x")
	log.InfoContext(ctx, "one")
	span.End()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if strings.Contains(lines[0], "trace_id") {
		t.Fatalf("ids without a span: %s", lines[0])
	}
	tid, sid := IDs(ctx)
	if !strings.Contains(lines[1], `"trace_id":"`+tid+`"`) || !strings.Contains(lines[1], `"span_id":"`+sid+`"`) || tid == "" {
		t.Fatalf("line %s, want %s %s", lines[1], tid, sid)
	}
}

// FetchTransport records the same client span as Transport but sends the
// third party no trace context field.
func TestFetchTransportSendsNoTraceContext(t *testing.T) {
	tp, exp := newProvider()
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	defer srv.Close()
	ctx, root := tp.Tracer("t").Start(context.Background(), "root")
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/client.json?x=secretq", nil)
	resp, err := (&http.Client{Transport: FetchTransport(tp, nil, "cimd fetch")}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	root.End()
	if got.Get("Traceparent") != "" || got.Get("Tracestate") != "" {
		t.Fatalf("trace context sent to a third party: %v", got)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	c := spans[0]
	if c.Name != "cimd fetch" || c.SpanKind != trace.SpanKindClient || c.Parent.SpanID() != root.SpanContext().SpanID() {
		t.Fatalf("client span %v", c)
	}
	if a := attrs(c); a["url.full"] != srv.URL+"/client.json" || a["http.response.status_code"] != "200" || a["http.request.method"] != "GET" {
		t.Fatalf("attributes %v", a)
	}
	if off := FetchTransport(noop.NewTracerProvider(), http.DefaultTransport, ""); off != http.DefaultTransport {
		t.Fatalf("FetchTransport with tracing off = %T, want the base itself", off)
	}
}
