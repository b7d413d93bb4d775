// Package otlptest is an OTLP/HTTP trace receiver for tests: an
// httptest server accepting POST /v1/traces with a binary protobuf
// ExportTraceServiceRequest (OTLP specification, "OTLP/HTTP Request"),
// keeping the spans it decodes.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a received span, its ids in lowercase hex.
type Span struct {
	Service                 string // the resource's service.name
	Scope                   string
	Name                    string
	Kind                    tracepb.Span_SpanKind
	TraceID, SpanID, Parent string
	Attrs                   map[string]string // values as text
	// Strings are every string the span carried: its name, status
	// message, attribute keys and values (resource, scope, span, events,
	// links), event names, trace state.
	Strings []string
}

// Receiver collects the spans POSTed to URL()+"/v1/traces".
type Receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []Span
}

// New starts a Receiver, closed at the end of t.
func New(t testing.TB) *Receiver {
	rc := &Receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

// URL is the receiver's base URL (OTEL_EXPORTER_OTLP_ENDPOINT).
func (rc *Receiver) URL() string { return rc.srv.URL }

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		var resStrings []string
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			resStrings = append(resStrings, kv.GetKey(), text(kv.GetValue()))
			if kv.GetKey() == "service.name" {
				service = text(kv.GetValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			scopeStrings := []string{ss.GetScope().GetName()}
			for _, kv := range ss.GetScope().GetAttributes() {
				scopeStrings = append(scopeStrings, kv.GetKey(), text(kv.GetValue()))
			}
			for _, sp := range ss.GetSpans() {
				s := Span{
					Service: service, Scope: ss.GetScope().GetName(), Name: sp.GetName(), Kind: sp.GetKind(),
					TraceID: hex.EncodeToString(sp.GetTraceId()), SpanID: hex.EncodeToString(sp.GetSpanId()),
					Parent: hex.EncodeToString(sp.GetParentSpanId()), Attrs: map[string]string{},
				}
				s.Strings = append(append(append(s.Strings, resStrings...), scopeStrings...),
					sp.GetName(), sp.GetStatus().GetMessage(), sp.GetTraceState())
				s.Strings = appendKVs(s.Strings, s.Attrs, sp.GetAttributes())
				for _, ev := range sp.GetEvents() {
					s.Strings = appendKVs(append(s.Strings, ev.GetName()), nil, ev.GetAttributes())
				}
				for _, l := range sp.GetLinks() {
					s.Strings = appendKVs(append(s.Strings, l.GetTraceState()), nil, l.GetAttributes())
				}
				got = append(got, s)
			}
		}
	}
	rc.mu.Lock()
	rc.spans = append(rc.spans, got...)
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func appendKVs(dst []string, m map[string]string, kvs []*commonpb.KeyValue) []string {
	for _, kv := range kvs {
		v := text(kv.GetValue())
		dst = append(dst, kv.GetKey(), v)
		if m != nil {
			m[kv.GetKey()] = v
		}
	}
	return dst
}

// text is an attribute value as text (arrays and maps flattened).
func text(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BytesValue:
		return string(x.BytesValue)
	case *commonpb.AnyValue_ArrayValue:
		s := ""
		for _, e := range x.ArrayValue.GetValues() {
			s += text(e) + "\n"
		}
		return s
	case *commonpb.AnyValue_KvlistValue:
		s := ""
		for _, kv := range x.KvlistValue.GetValues() {
			s += kv.GetKey() + "=" + text(kv.GetValue()) + "\n"
		}
		return s
	}
	return ""
}

// Spans returns the spans received so far.
func (rc *Receiver) Spans() []Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Span(nil), rc.spans...)
}

// WaitFor polls until ok holds for the spans received, or fails t after
// timeout.
func (rc *Receiver) WaitFor(t testing.TB, timeout time.Duration, ok func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := rc.Spans()
		if ok(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("otlptest: the spans wanted did not arrive in %v; got %d:\n%s", timeout, len(spans), Describe(spans))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Describe lists spans one a line, for failure messages.
func Describe(spans []Span) string {
	s := ""
	for _, sp := range spans {
		s += fmt.Sprintf("%s %s %q kind=%v trace=%s span=%s parent=%s %v\n", sp.Service, sp.Scope, sp.Name, sp.Kind, sp.TraceID, sp.SpanID, sp.Parent, sp.Attrs)
	}
	return s
}
