package tracedstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/storage/storagetest"
	"github.com/mcpauth/mcpauth/storage/tracedstore"
)

// The wrapped store is still a conforming storage.Store: every call,
// transactions included, reaches the backend unchanged.
func TestWrappedStoreConforms(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	storagetest.RunTests(t, func(t *testing.T) storage.Store {
		return tracedstore.New(memory.New(), tp, "memory")
	})
}

// A call under a span is a child span "storage <Method>" with db.system.name
// and db.operation.name and, when it fails, error.type; never its
// arguments. A call outside any span starts none.
func TestSpanPerCall(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	st := tracedstore.New(memory.New(), tp, "memory")
	defer st.Close()
	if _, ok := st.(storage.TokenPersonReader); !ok {
		t.Fatal("the wrapper hides the backend's TokenPersonReader")
	}

	const signature, subject = "sig-4e9a1c", "alice-subject"
	if _, err := st.GetToken(context.Background(), storage.KindAccessToken, signature); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("GetToken outside a span: %v", err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans for a call outside any span, want 0", n)
	}

	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	if _, err := st.GetToken(ctx, storage.KindAccessToken, signature); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("GetToken: %v", err)
	}
	if err := st.UseJTI(ctx, "jti-"+subject, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	parent.End()

	want := map[string]string{"storage GetToken": "not_found", "storage UseJTI": ""}
	for _, sp := range rec.Ended() {
		if sp.Name() == "request" {
			continue
		}
		errType, ok := want[sp.Name()]
		if !ok {
			t.Errorf("unexpected span %q", sp.Name())
			continue
		}
		delete(want, sp.Name())
		if sp.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("%q is not a child of the request's span", sp.Name())
		}
		if sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("%q kind %v, want client", sp.Name(), sp.SpanKind())
		}
		got := map[attribute.Key]string{}
		for _, a := range sp.Attributes() {
			got[a.Key] = a.Value.Emit()
			for _, secret := range []string{signature, subject} {
				if v := a.Value.Emit(); strings.Contains(v, secret) {
					t.Errorf("%q attribute %s carries %q", sp.Name(), a.Key, secret)
				}
			}
		}
		if got["db.system.name"] != "memory" || got["db.operation.name"] != sp.Name()[len("storage "):] || got["error.type"] != errType {
			t.Errorf("%q attributes %v", sp.Name(), got)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing spans %v", want)
	}
}

// With tracing off New returns the backend itself.
func TestOffIsTheStoreItself(t *testing.T) {
	m := memory.New()
	for _, tp := range []trace.TracerProvider{nil, noop.NewTracerProvider()} {
		if got := tracedstore.New(m, tp, "memory"); got != storage.Store(m) {
			t.Errorf("New with %T = %T, want the store itself", tp, got)
		}
	}
}

// BenchmarkGetToken prices the wrapper on a memory store's GetToken: off
// (the store itself), on outside a span (no span), on under a sampled span.
func BenchmarkGetToken(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	parentCtx, parent := tp.Tracer("bench").Start(context.Background(), "request")
	defer parent.End()
	for _, c := range []struct {
		name string
		st   storage.Store
		ctx  context.Context
	}{
		{"off", tracedstore.New(memory.New(), nil, "memory"), parentCtx},
		{"on-no-parent", tracedstore.New(memory.New(), tp, "memory"), context.Background()},
		{"on-sampled", tracedstore.New(memory.New(), tp, "memory"), parentCtx},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.st.GetToken(c.ctx, storage.KindAccessToken, "sig")
			}
		})
	}
}
