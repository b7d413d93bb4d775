// Package otelsetup makes the OpenTelemetry TracerProvider of a command
// from the standard environment variables of the OpenTelemetry SDK
// specification (Environment Variable Specification, "General SDK
// Configuration" and "OTLP Exporter"):
//
//   - OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:
//     where spans go. Without either, tracing is off: the provider is
//     the no-op one and nothing is started or sent.
//   - OTEL_EXPORTER_OTLP_PROTOCOL (or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL):
//     http/protobuf (the default) or grpc.
//   - OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: the resource.
//   - OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG: the sampler (default
//     parentbased_always_on), read by the SDK from the process
//     environment.
//   - OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _INSECURE, _CERTIFICATE, ...:
//     read by the exporters themselves from the process environment.
//
// An OTEL_SDK_DISABLED of true turns tracing off as well.
package otelsetup

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Provider is a TracerProvider and the function that flushes and stops it.
type Provider struct {
	trace.TracerProvider
	// Shutdown exports the spans still buffered and stops the exporter;
	// a no-op when tracing is off.
	Shutdown func(context.Context) error
}

// New returns the provider the environment (lookup: os.LookupEnv) asks
// for; service names the service when OTEL_SERVICE_NAME is unset.
func New(ctx context.Context, service string, lookup func(string) (string, bool)) (Provider, error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	off := Provider{TracerProvider: noop.NewTracerProvider(), Shutdown: func(context.Context) error { return nil }}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return off, nil
	}
	if get("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return off, nil
	}
	protocol := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	// The endpoints are read through lookup (the exporters would read the
	// process environment only): the traces endpoint as it is, the
	// general one with /v1/traces appended for HTTP (OTLP Exporter
	// specification, "Endpoint URLs for OTLP/HTTP").
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case "", "http/protobuf":
		var opts []otlptracehttp.Option
		if u := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); u != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(u))
		} else {
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(get("OTEL_EXPORTER_OTLP_ENDPOINT"), "/")+"/v1/traces"))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	case "grpc":
		u := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
		if u == "" {
			u = get("OTEL_EXPORTER_OTLP_ENDPOINT")
		}
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(u))
	default:
		return off, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", protocol)
	}
	if err != nil {
		return off, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	// The service name given here yields to OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES (WithFromEnv comes after it).
	res, err := resource.New(ctx,
		resource.WithAttributes(serviceName(service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return off, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	// NewTracerProvider reads OTEL_TRACES_SAMPLER and _ARG, and the batch
	// processor OTEL_BSP_*.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return Provider{TracerProvider: tp, Shutdown: tp.Shutdown}, nil
}

func serviceName(s string) attribute.KeyValue { return attribute.String("service.name", s) }

// Flush exports the spans still buffered and stops the exporter, within
// 5 s, logging a failure to log: what a command defers at its exit.
func (p Provider) Flush(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("exporting the last spans", "err", err)
	}
}
