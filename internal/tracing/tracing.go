// Package tracing starts the OpenTelemetry spans of HTTP servers and
// clients with the W3C Trace Context propagator (traceparent and
// tracestate, https://www.w3.org/TR/trace-context/ §3), and the attributes
// of the OpenTelemetry HTTP semantic conventions: http.request.method,
// url.path (never the query), http.response.status_code, server.address,
// server.port. It never records a header, a query or a body.
//
// It depends on the OpenTelemetry API only (no SDK, no exporter), so that
// rsmiddleware can use it and stay light. A nil or no-op TracerProvider
// turns everything off: Handler returns its handler unchanged and
// Transport its round tripper.
package tracing

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of the spans started here.
const ScopeName = "github.com/mcpauth/mcpauth"

// Propagator reads and writes the W3C traceparent and tracestate fields.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Enabled reports whether tp records anything: false for nil and for the
// no-op provider.
func Enabled(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, off := tp.(noop.TracerProvider)
	return !off
}

// Tracer returns tp's tracer of ScopeName; a no-op one when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(ScopeName)
	}
	return tp.Tracer(ScopeName)
}

// HandlerConfig configures Handler.
type HandlerConfig struct {
	// Name is the span's name; empty: the request method.
	Name string
	// Carrier returns the trace context fields of a request that has no
	// traceparent header (MCP carries them in params._meta of a JSON-RPC
	// request); it may replace r.Body with one that reads the same bytes.
	// Nil: the headers only.
	Carrier func(w http.ResponseWriter, r *http.Request) propagation.TextMapCarrier
}

// Handler returns h with one server span per request, continuing the
// caller's trace (its traceparent header, else cfg.Carrier's). With tracing
// off it returns h itself.
func Handler(tp trace.TracerProvider, h http.Handler, cfg HandlerConfig) http.Handler {
	if !Enabled(tp) {
		return h
	}
	tr := tp.Tracer(ScopeName)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveSpan(tr, cfg, w, r, h) })
}

// ServeSpan serves r with h under a server span of tp, as Handler does.
func ServeSpan(tp trace.TracerProvider, w http.ResponseWriter, r *http.Request, h http.Handler, cfg HandlerConfig) {
	serveSpan(tp.Tracer(ScopeName), cfg, w, r, h)
}

func serveSpan(tr trace.Tracer, cfg HandlerConfig, w http.ResponseWriter, r *http.Request, h http.Handler) {
	{
		ctx := r.Context()
		if _, ok := r.Header["Traceparent"]; ok || cfg.Carrier == nil {
			ctx = Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
		} else if c := cfg.Carrier(w, r); c != nil {
			ctx = Propagator.Extract(ctx, c)
		}
		name := cfg.Name
		if name == "" {
			name = r.Method
		}
		ctx, span := tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		if !span.IsRecording() {
			// Not sampled: the context goes on (and upstream), nothing is
			// recorded, so nothing is computed for it.
			defer span.End()
			h.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		span.SetAttributes(ServerAttributes(r)...)
		rw := &statusWriter{ResponseWriter: w}
		defer func() {
			status := rw.status
			if status == 0 {
				status = http.StatusOK
			}
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if status >= 500 {
				span.SetStatus(codes.Error, "")
			}
			span.End()
		}()
		h.ServeHTTP(rw, r.WithContext(ctx))
	}
}

// defaultGlobal is the global provider before any program sets one: a
// delegate that records nothing.
var defaultGlobal = otel.GetTracerProvider()

// Global returns the global TracerProvider (otel.SetTracerProvider), or
// nil while no program has set one, so that a library defaulting to the
// global provider costs nothing until then.
func Global() trace.TracerProvider {
	tp := otel.GetTracerProvider()
	if tp == defaultGlobal || !Enabled(tp) {
		return nil
	}
	return tp
}

// ServerAttributes are the HTTP server span attributes of r: method, path,
// scheme and the host the client named (RFC 9110 §7.2).
func ServerAttributes(r *http.Request) []attribute.KeyValue {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", r.Method),
		attribute.String("url.path", r.URL.Path),
		attribute.String("url.scheme", scheme),
	}
	return appendHost(attrs, r.Host)
}

func appendHost(attrs []attribute.KeyValue, hostport string) []attribute.KeyValue {
	if hostport == "" {
		return attrs
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return append(attrs, attribute.String("server.address", hostport))
	}
	attrs = append(attrs, attribute.String("server.address", host))
	if n, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attribute.Int("server.port", n))
	}
	return attrs
}

// statusWriter records the status a handler sends. Unwrap lets
// http.ResponseController reach the connection (deadlines, flushes).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Transport returns base (nil: http.DefaultTransport) with one client span
// per request, named name (empty: the method), its context injected into
// the request's traceparent and tracestate headers. With tracing off it
// returns base itself.
func Transport(tp trace.TracerProvider, base http.RoundTripper, name string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if !Enabled(tp) {
		return base
	}
	return &transport{tr: tp.Tracer(ScopeName), base: base, name: name, inject: true}
}

// FetchTransport is Transport without the trace context header fields: a
// client span per request, nothing added to the request. It is for the
// fetches from third parties (a client's metadata document or jwks_uri, an
// upstream identity provider), which take no part in the trace and need
// not learn its identifiers (W3C Trace Context §8, privacy considerations).
func FetchTransport(tp trace.TracerProvider, base http.RoundTripper, name string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if !Enabled(tp) {
		return base
	}
	return &transport{tr: tp.Tracer(ScopeName), base: base, name: name}
}

type transport struct {
	tr     trace.Tracer
	base   http.RoundTripper
	name   string
	inject bool
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, span := StartClient(req.Context(), t.tr, t.name, req)
	defer span.End()
	req = req.Clone(ctx)
	if t.inject {
		Inject(ctx, req.Header)
	}
	resp, err := t.base.RoundTrip(req)
	EndClient(span, resp, err)
	return resp, err
}

// StartClient starts a client span for req with the HTTP client
// attributes (url.full without its query and fragment).
func StartClient(ctx context.Context, tr trace.Tracer, name string, req *http.Request) (context.Context, trace.Span) {
	if name == "" {
		name = req.Method
	}
	ctx, span := tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	u := *req.URL
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment, u.User = "", false, "", "", nil
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", req.Method),
		attribute.String("url.full", u.String()),
	}
	span.SetAttributes(appendHost(attrs, req.URL.Host)...)
	return ctx, span
}

// EndClient records the answer (or the error) of a client span; it does
// not end it.
func EndClient(span trace.Span, resp *http.Response, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, "request failed")
		return
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, "")
	}
}

// Inject writes the span context of ctx into h (traceparent, tracestate).
func Inject(ctx context.Context, h http.Header) {
	Propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// IDs returns the hexadecimal trace and span ids of the span in ctx, or
// empty strings when there is none.
func IDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

// LogHandler returns h adding trace_id and span_id (W3C ids, lowercase
// hex) to each record logged with a context that holds a span, before h
// formats (and, for an audit chain, hashes) the record.
func LogHandler(h slog.Handler) slog.Handler { return &logHandler{h} }

type logHandler struct{ slog.Handler }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{h.Handler.WithAttrs(as)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h.Handler.WithGroup(name)}
}
