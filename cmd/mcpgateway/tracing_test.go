package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/mcpauth/mcpauth/internal/otelsetup"
	"github.com/mcpauth/mcpauth/internal/otlptest"
	"github.com/mcpauth/mcpauth/internal/tracing"
	"github.com/mcpauth/mcpauth/rsmiddleware"
)

// tracedStack is a stack whose AS, gateway and upstream export their spans
// to one OTLP/HTTP receiver, each through the provider internal/otelsetup
// makes from OTEL_EXPORTER_OTLP_ENDPOINT. The upstream is a Go MCP server
// behind rsmiddleware (with its TracerProvider option), verifying the
// gateway's exchanged tokens.
type tracedStack struct {
	*stack
	rc        *otlptest.Receiver
	providers []otelsetup.Provider
	mu        sync.Mutex
	upAuth    []string // Authorization headers the upstream received
	upParent  []string // traceparent headers the upstream received
	upMeta    []string // params._meta.traceparent of the upstream's POSTs
}

func newTracedStack(t *testing.T, configText string) *tracedStack {
	t.Helper()
	ts := &tracedStack{rc: otlptest.New(t)}
	provider := func(service string) trace.TracerProvider {
		p, err := otelsetup.New(context.Background(), service, func(k string) (string, bool) {
			if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
				return ts.rc.URL(), true
			}
			return "", false
		})
		if err != nil {
			t.Fatal(err)
		}
		ts.providers = append(ts.providers, p)
		return p.TracerProvider
	}
	s := &stack{audit: &syncBuffer{}}
	ts.stack = s
	upSrv := httptest.NewUnstartedServer(nil)
	upRes := "http://" + upSrv.Listener.Addr().String() + "/mcp"
	gw := httptest.NewUnstartedServer(nil)
	s.resource = "http://" + gw.Listener.Addr().String() + "/mcp"
	asTP := provider("authserver")
	// The AS's handler as authserver serve wraps it.
	s.issuer = startASWith(t, s.resource, upRes, func(h http.Handler) http.Handler {
		return tracing.Handler(asTP, h, tracing.HandlerConfig{})
	})

	upTP := provider("upstream")
	verifier, err := rsmiddleware.NewVerifier(rsmiddleware.Config{Issuer: s.issuer, Resource: upRes})
	if err != nil {
		t.Fatal(err)
	}
	prm, _ := rsmiddleware.ResourceMetadataURL(upRes)
	mw, err := rsmiddleware.NewMiddleware(rsmiddleware.MiddlewareConfig{
		Verifier: verifier, ResourceMetadataURL: prm, Scopes: rsmiddleware.Scopes{Base: []string{"upstream:call"}},
		Logger: slog.New(slog.DiscardHandler), TracerProvider: upTP,
	})
	if err != nil {
		t.Fatal(err)
	}
	mcpHandler := mw.Wrap(goUpstreamHandler(false))
	upSrv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.upAuth = append(ts.upAuth, r.Header.Get("Authorization"))
		ts.upParent = append(ts.upParent, r.Header.Get("Traceparent"))
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			var m struct {
				Params struct {
					Meta map[string]any `json:"_meta"`
				} `json:"params"`
			}
			_ = json.Unmarshal(b, &m)
			tp, _ := m.Params.Meta["traceparent"].(string)
			ts.upMeta = append(ts.upMeta, tp)
		}
		ts.mu.Unlock()
		mcpHandler.ServeHTTP(w, r)
	})
	upSrv.Start()
	t.Cleanup(upSrv.Close)

	s.startGateway(t, gw, configText, upRes, provider("mcpgateway"))
	return ts
}

// flush exports every span still buffered, as the commands do at exit.
func (ts *tracedStack) flush(t *testing.T) []otlptest.Span {
	t.Helper()
	for _, p := range ts.providers {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return ts.rc.Spans()
}

const exchangeConfig = baseConfig + `
upstream_auth:
  exchange: {client_id: gw, client_secret: "${GW_SECRET}", resource: UPSTREAM, scopes: [upstream:call]}
`

// clientTrace sends the traceparent of a client span with every request.
type clientTrace struct {
	ctx  context.Context
	base http.RoundTripper
}

func (c clientTrace) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	tracing.Inject(c.ctx, r.Header)
	return c.base.RoundTrip(r)
}

const argumentValue = "argument-value-never-in-a-span-7f3a"

// A tool call of a real MCP client through the gateway, with the token
// exchange, is one trace: the client's span, the gateway's server spans
// (with the MCP attributes), its call to the AS's token endpoint and the
// AS's own span under it, the upstream hop, and the upstream's server span
// under that (rsmiddleware's TracerProvider option), the hop's context also
// in params._meta.traceparent.
func TestOneToolCallIsOneTraceAcrossGatewayASAndUpstream(t *testing.T) {
	ts := newTracedStack(t, exchangeConfig)
	caller := ts.token(t, "user-bot")

	clientTP := trace.TracerProvider(nil)
	{
		p, err := otelsetup.New(context.Background(), "client", func(k string) (string, bool) {
			if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
				return ts.rc.URL(), true
			}
			return "", false
		})
		if err != nil {
			t.Fatal(err)
		}
		ts.providers = append(ts.providers, p)
		clientTP = p.TracerProvider
	}
	ctx, root := clientTP.Tracer("client").Start(context.Background(), "agent step")
	traceID := root.SpanContext().TraceID().String()
	client := &http.Client{Transport: clientTrace{ctx, bearer{caller, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: ts.resource, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": argumentValue}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %v", err, res)
	}
	cs.Close()
	root.End()
	spans := ts.flush(t)

	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	var call, hop, asToken, upServer *otlptest.Span
	for i, s := range spans {
		if s.TraceID != traceID {
			continue
		}
		switch {
		case s.Service == "mcpgateway" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Attrs["mcp.method.name"] == "tools/call":
			call = &spans[i]
		case s.Service == "authserver" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Attrs["url.path"] == "/token":
			asToken = &spans[i]
		case s.Service == "upstream" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && upServer == nil:
			upServer = &spans[i]
		}
	}
	if call == nil || asToken == nil || upServer == nil {
		t.Fatalf("trace %s misses the gateway's tools/call span (%v), the AS's /token span (%v) or the upstream's span (%v):\n%s",
			traceID, call != nil, asToken != nil, upServer != nil, otlptest.Describe(spans))
	}
	if call.Parent != root.SpanContext().SpanID().String() {
		t.Errorf("the gateway's span does not continue the client's: parent %s", call.Parent)
	}
	a := call.Attrs
	if a["gen_ai.tool.name"] != "echo" || a["oauth.client_id"] != "user-bot" || len(a["mcp.arguments.sha256"]) == 0 ||
		a["http.request.method"] != "POST" || a["url.path"] != "/mcp" || a["http.response.status_code"] != "200" {
		t.Errorf("tools/call span attributes: %v", a)
	}
	// The AS's span continues a client span of the gateway's, POST to the
	// token endpoint, in the same trace.
	exch, ok := byID[asToken.Parent]
	if !ok || exch.Service != "mcpgateway" || exch.Kind != tracepb.Span_SPAN_KIND_CLIENT || !strings.HasSuffix(exch.Attrs["url.full"], "/token") {
		t.Errorf("the AS's /token span's parent is not the gateway's exchange: %+v", exch)
	}
	// The tools/call's upstream hop is a client span under the gateway's
	// tools/call span; an upstream span continues it.
	for _, s := range spans {
		if s.Name == "upstream" && s.Parent == call.SpanID {
			hop = &s
			break
		}
	}
	if hop == nil || hop.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Fatalf("no upstream hop under the tools/call span:\n%s", otlptest.Describe(spans))
	}
	found := false
	for _, s := range spans {
		if s.Service == "upstream" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Parent == hop.SpanID {
			found = true
		}
	}
	if !found {
		t.Errorf("no upstream server span under the hop %s:\n%s", hop.SpanID, otlptest.Describe(spans))
	}
	// The hop's context went in the header and in params._meta.
	want := "00-" + traceID + "-" + hop.SpanID + "-01"
	ts.mu.Lock()
	headerSeen, metaSeen := false, false
	for i := range ts.upParent {
		headerSeen = headerSeen || ts.upParent[i] == want
	}
	for _, m := range ts.upMeta {
		metaSeen = metaSeen || m == want
	}
	upAuth := append([]string(nil), ts.upAuth...)
	ts.mu.Unlock()
	if !headerSeen || !metaSeen {
		t.Errorf("the upstream did not get traceparent %s in the header (%v) and in params._meta (%v)", want, headerSeen, metaSeen)
	}

	// No span holds a token, a secret or an argument's value.
	secrets := []string{caller, botSecret, gwSecret, argumentValue}
	for _, h := range upAuth {
		if tok, ok := strings.CutPrefix(h, "Bearer "); ok {
			secrets = append(secrets, tok)
		}
	}
	for _, s := range spans {
		for _, v := range s.Strings {
			for _, secret := range secrets {
				if secret != "" && strings.Contains(v, secret) {
					t.Errorf("span %q (%s) holds %.12s...: %q", s.Name, s.Service, secret, v)
				}
			}
		}
	}
	if len(secrets) < 5 {
		t.Errorf("the upstream saw no exchanged token to look for")
	}

	// The gateway's audit lines carry the ids of their request's span.
	var line struct {
		Method  string `json:"method"`
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	}
	audited := false
	for l := range strings.SplitSeq(ts.audit.String(), "\n") {
		if json.Unmarshal([]byte(l), &line) == nil && line.Method == "tools/call" {
			audited = true
			if line.TraceID != traceID || line.SpanID != call.SpanID {
				t.Errorf("audit line ids %s/%s, want %s/%s: %s", line.TraceID, line.SpanID, traceID, call.SpanID, l)
			}
		}
	}
	if !audited {
		t.Errorf("no tools/call audit line:\n%s", ts.audit.String())
	}
}

// Without a traceparent header the gateway continues the trace of
// params._meta.traceparent, where MCP carries it; the body reaches the
// handler intact.
func TestGatewayReadsTheTraceContextOfParamsMeta(t *testing.T) {
	ts := newTracedStack(t, exchangeConfig)
	caller := ts.token(t, "user-bot")
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"_meta":{"traceparent":"` + parent + `"},"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	req, _ := http.NewRequest(http.MethodPost, ts.resource, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+caller)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(answer), "protocolVersion") {
		t.Fatalf("initialize: %d %s", resp.StatusCode, answer)
	}
	spans := ts.flush(t)
	for _, s := range spans {
		if s.Service == "mcpgateway" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Attrs["mcp.method.name"] == "initialize" {
			if s.TraceID != "0af7651916cd43dd8448eb211c80319c" || s.Parent != "b7ad6b7169203331" {
				t.Fatalf("the gateway's span does not continue params._meta's context: %+v", s)
			}
			return
		}
	}
	t.Fatalf("no initialize span:\n%s", otlptest.Describe(spans))
}

// injectMeta keeps every other member's value and sets the trace context
// fields in params._meta, creating params and _meta when absent; it leaves
// batches and non-objects alone.
func TestInjectMeta(t *testing.T) {
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: [16]byte{1}, SpanID: [8]byte{2}, TraceFlags: trace.FlagsSampled,
	}))
	want := "00-01000000000000000000000000000000-0200000000000000-01"
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a<b","arguments":{"n":1.50000000000000000001,"s":"x&y"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/x","params":{"_meta":{"progressToken":7,"traceparent":"00-ff000000000000000000000000000000-0100000000000000-01","tracestate":"a=b"}}}`,
	} {
		out, ok := injectMeta(ctx, []byte(in))
		if !ok {
			t.Fatalf("%s: not injected", in)
		}
		c := readMeta(out)
		if c == nil || c.Get("traceparent") != want || c.Get("tracestate") != "" {
			t.Fatalf("%s -> %s", in, out)
		}
		var a, b map[string]any
		_ = json.Unmarshal([]byte(in), &a)
		_ = json.Unmarshal(out, &b)
		delete(b, "params")
		delete(a, "params")
		if len(a) != len(b) {
			t.Fatalf("members changed: %s -> %s", in, out)
		}
		if strings.Contains(in, "1.50000000000000000001") && !strings.Contains(string(out), `"n":1.50000000000000000001`) ||
			strings.Contains(in, "a<b") && !strings.Contains(string(out), `"a<b"`) {
			t.Fatalf("an argument's text changed: %s", out)
		}
		if strings.Contains(in, "progressToken") && !strings.Contains(string(out), `"progressToken":7`) {
			t.Fatalf("_meta lost a member: %s", out)
		}
	}
	for _, in := range []string{`[{"jsonrpc":"2.0","id":1,"method":"a"}]`, `{"jsonrpc":"2.0","id":1,"result":{}}`, `{"method":"a","params":[1]}`, ``} {
		if out, ok := injectMeta(ctx, []byte(in)); ok || string(out) != in {
			t.Fatalf("%s changed to %s", in, out)
		}
	}
	if _, ok := injectMeta(context.Background(), []byte(`{"method":"a"}`)); ok {
		t.Fatal("injected without a span")
	}
}
