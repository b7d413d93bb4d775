package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/mcpauth/mcpauth/internal/otlptest"
)

// The mcpgateway and authserver commands, given OTEL_EXPORTER_OTLP_ENDPOINT,
// export the spans of a tool call made through the gateway (with the token
// exchange) to a TypeScript MCP server: the gateway's request, its hop
// upstream (whose trace context reaches the server in the traceparent
// header and, through the TypeScript SDK, in params._meta), and the AS's span of the exchange under the gateway's
// call; no span holds the password, a token or an argument's value.
func TestGatewayAndASExportTheirSpans(t *testing.T) {
	rc := otlptest.New(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.URL(), "OTEL_BSP_SCHEDULE_DELAY=50"}
	_, upstream, _, resource := startGatewayStackEnv(t, true, env)

	redirect := loopbackRedirect(t)
	tokens := &tokenSources{}
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: newFormLogin(demoUser, demoPassword, redirect).fetch,
		NewTokenSource:           tokens.newTokenSource,
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "mcpauth e2e traced client", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "gateway-e2e", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: resource, HTTPClient: &http.Client{}, OAuthHandler: handler}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	const argument = "e2e-argument-value-5c1d"
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": argument}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}

	var call, hop, asToken otlptest.Span
	spans := rc.WaitFor(t, 20*time.Second, func(spans []otlptest.Span) bool {
		call, hop, asToken = otlptest.Span{}, otlptest.Span{}, otlptest.Span{}
		byID := map[string]otlptest.Span{}
		for _, s := range spans {
			byID[s.SpanID] = s
		}
		for _, s := range spans {
			switch {
			case s.Service == "mcpgateway" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Attrs["gen_ai.tool.name"] == "echo":
				call = s
			case s.Service == "authserver" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Attrs["url.path"] == "/token":
				if p, ok := byID[s.Parent]; ok && p.Service == "mcpgateway" && p.Kind == tracepb.Span_SPAN_KIND_CLIENT {
					asToken = s
				}
			}
		}
		for _, s := range spans {
			if call.SpanID != "" && s.Name == "upstream" && s.Parent == call.SpanID {
				hop = s
			}
		}
		return call.SpanID != "" && hop.SpanID != "" && asToken.SpanID != ""
	})
	if hop.Attrs["http.response.status_code"] != "200" || call.Attrs["http.response.status_code"] != "200" {
		t.Errorf("statuses: call %v, hop %v", call.Attrs, hop.Attrs)
	}
	// The hop's context reached the server in the header and, through the
	// TypeScript SDK, in params._meta.
	want := "00-" + hop.TraceID + "-" + hop.SpanID + "-01"
	if tr := upstream.traces(t); len(tr) != 1 || tr[0] != want {
		t.Errorf("the tool got params._meta.traceparent %q, want %q", tr, want)
	}
	header := false
	for _, r := range upstream.seen(t) {
		header = header || r.Traceparent == want
	}
	if !header {
		t.Errorf("no request to the server had the traceparent header %s", want)
	}
	secrets := []string{demoPassword, argument}
	for _, tok := range tokens.all() {
		secrets = append(secrets, tok.AccessToken, tok.RefreshToken)
	}
	for _, s := range spans {
		for _, v := range s.Strings {
			for _, secret := range secrets {
				if secret != "" && strings.Contains(v, secret) {
					t.Errorf("span %q (%s) holds a secret (%.6s...)", s.Name, s.Service, secret)
				}
			}
		}
	}
}
