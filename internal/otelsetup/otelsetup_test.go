package otelsetup

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpauth/mcpauth/internal/otlptest"
)

func lookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestOffWithoutEndpoint(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"no variable":         {},
		"a service name only": {"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"},
		"the SDK disabled":    {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := New(context.Background(), "svc", lookup(env))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := p.TracerProvider.(noop.TracerProvider); !ok {
				t.Fatalf("provider %T, want the no-op one", p.TracerProvider)
			}
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRefusesAnUnknownProtocol(t *testing.T) {
	_, err := New(context.Background(), "svc", lookup(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
	}))
	if err == nil {
		t.Fatal("http/json accepted")
	}
}

func TestGRPCExporterIsBuilt(t *testing.T) {
	p, err := New(context.Background(), "svc", lookup(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.TracerProvider.(noop.TracerProvider); ok {
		t.Fatal("no-op provider with an endpoint")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = p.Shutdown(ctx) // nothing listens: the error is expected
}

// Spans reach the endpoint named by OTEL_EXPORTER_OTLP_ENDPOINT (with
// /v1/traces appended) or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is), under
// the service name of OTEL_SERVICE_NAME (else the command's), with the
// attributes of OTEL_RESOURCE_ATTRIBUTES; Shutdown flushes them.
func TestExportsOnShutdown(t *testing.T) {
	rc := otlptest.New(t)
	cases := []struct {
		name, service string
		env           map[string]string
	}{
		{"general endpoint", "cmd", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL() + "/"}},
		{"traces endpoint and names", "mine", map[string]string{
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": rc.URL() + "/v1/traces", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_SERVICE_NAME": "mine", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				// The exporters read the process environment too.
				t.Setenv(k, v)
			}
			p, err := New(context.Background(), "cmd", lookup(c.env))
			if err != nil {
				t.Fatal(err)
			}
			_, span := p.Tracer("test").Start(context.Background(), c.name, trace.WithSpanKind(trace.SpanKindServer))
			span.End()
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := rc.WaitFor(t, 5*time.Second, func(s []otlptest.Span) bool {
				for _, sp := range s {
					if sp.Name == c.name {
						return true
					}
				}
				return false
			})
			for _, sp := range spans {
				if sp.Name != c.name {
					continue
				}
				if sp.Service != c.service {
					t.Errorf("service %q, want %q", sp.Service, c.service)
				}
				if c.env["OTEL_RESOURCE_ATTRIBUTES"] != "" && !contains(sp.Strings, "deployment.environment.name") {
					t.Errorf("resource attributes missing: %v", sp.Strings)
				}
			}
		})
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// OTEL_TRACES_SAMPLER (read by the SDK from the process environment)
// decides which spans are exported: always_off exports none.
func TestSamplerFromTheEnvironment(t *testing.T) {
	rc := otlptest.New(t)
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL()}
	p, err := New(context.Background(), "svc", lookup(env))
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer("test").Start(context.Background(), "dropped")
	if span.IsRecording() {
		t.Error("always_off records")
	}
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := rc.Spans(); len(s) != 0 {
		t.Fatalf("exported %d spans", len(s))
	}
}
