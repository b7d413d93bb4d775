// Package tracedstore wraps a storage.Store with one OpenTelemetry client
// span per call, named "storage <Method>" ("storage GetToken"), with the
// database semantic convention attributes db.system.name (and the older
// db.system) and db.operation.name. It never records an argument or a
// result: no key, signature, subject, identifier or data. A call made
// outside a span (the expiry sweeps) starts none.
package tracedstore

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpauth/mcpauth/internal/tracing"
	"github.com/mcpauth/mcpauth/storage"
)

// New returns st with a span per call recorded by tp. system is the
// backend's db.system value ("postgresql", "sqlite", "memory"). With
// tracing off (tp nil or the no-op provider) it returns st itself, so that
// a server without traces pays nothing.
func New(st storage.Store, tp trace.TracerProvider, system string) storage.Store {
	if !tracing.Enabled(tp) {
		return st
	}
	s := &store{next: st, tr: tp.Tracer(tracing.ScopeName), system: system}
	if r, ok := st.(storage.TokenPersonReader); ok {
		return &personStore{store: s, reader: r}
	}
	return s
}

type store struct {
	next   storage.Store
	tr     trace.Tracer
	system string
}

// start starts the span of one call under the span of ctx. A call made
// outside any span (the expiry sweeps, start-up) starts none: its span
// would be a trace of its own.
func (s *store) start(ctx context.Context, op string) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := s.tr.Start(ctx, "storage "+op, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("db.system.name", s.system),
			attribute.String("db.system", s.system),
			attribute.String("db.operation.name", op),
		)
	}
	return ctx, span
}

// end records a failure and ends span. storage.ErrNotFound and the other
// sentinel errors are answers, not failures, but a span still marks them
// with error.type so that a trace shows a lookup that found nothing.
func end(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		if t := errorType(err); t == "unavailable" || t == "other" {
			span.SetStatus(codes.Error, t)
		}
	}
	span.End()
}

func (s *store) Close() error { return s.next.Close() }

// personStore is store for a backend that reads a token with its person's
// status in one round trip (storage.TokenPersonReader).
type personStore struct {
	*store
	reader storage.TokenPersonReader
}

func (s *personStore) GetTokenWithPerson(ctx context.Context, kind storage.TokenKind, signature string) (*storage.Token, storage.PersonStatus, error) {
	ctx, span := s.start(ctx, "GetTokenWithPerson")
	t, p, err := s.reader.GetTokenWithPerson(ctx, kind, signature)
	end(span, err)
	return t, p, err
}

// errorType names err by the storage sentinel it wraps, never by its text
// (which may quote a value).
func errorType(err error) string {
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return "not_found"
	case errors.Is(err, storage.ErrAlreadyExists):
		return "already_exists"
	case errors.Is(err, storage.ErrInactive):
		return "inactive"
	case errors.Is(err, storage.ErrAlreadyUsed):
		return "already_used"
	case errors.Is(err, storage.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "other"
}

var _ storage.Store = (*store)(nil)
