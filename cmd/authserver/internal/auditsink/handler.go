package auditsink

import (
	"context"
	"log/slog"
	"slices"

	"github.com/mcpauth/mcpauth/storage"
)

// Handler returns a slog.Handler that passes every record to next (as
// far as next is enabled for it) and takes the audit records (message
// "audit") whatever level next logs at.
func (s *Sink) Handler(next slog.Handler) slog.Handler {
	return &handler{s: s, next: next}
}

// handler is Sink.Handler. attrs are those of WithAttrs, each under the
// groups open when it was added.
type handler struct {
	s      *Sink
	next   slog.Handler
	attrs  []groupedAttr
	groups []string
}

type groupedAttr struct {
	groups []string
	attr   slog.Attr
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "audit" {
		if h.s.cfg.KeepEvents {
			h.s.record(h.event(r))
		} else {
			h.s.count(eventName(r))
		}
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = slices.Clip(h.attrs)
	for _, a := range as {
		n.attrs = append(n.attrs, groupedAttr{h.groups, a})
	}
	n.next = h.next.WithAttrs(as)
	return &n
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.groups = append(slices.Clip(h.groups), name)
	n.next = h.next.WithGroup(name)
	return &n
}

// event turns an audit record into an AuditEvent: the attributes event,
// sub, client_id and admin_subject (else admin_client, the admin API's
// client or "cli") become its fields, the others (admin_client included)
// its Detail, a JSON object written in the order of the attributes, with
// the groups of WithGroup as nested objects. It runs on a request's path,
// so it writes the JSON itself rather than through a map.
func (h *handler) event(r slog.Record) storage.AuditEvent {
	e := storage.AuditEvent{Time: r.Time}
	var adminClient string
	w := detailWriter{b: make([]byte, 0, 256)}
	w.open()
	field := func(a slog.Attr) bool {
		var p *string
		switch a.Key {
		case "event":
			p = &e.Event
		case "sub":
			p = &e.Subject
		case "client_id":
			p = &e.ClientID
		case "admin_subject":
			p = &e.AdminSubject
		case "admin_client":
			adminClient = a.Value.Resolve().String()
			return false
		default:
			return false
		}
		*p = a.Value.Resolve().String()
		return true
	}
	// The handler's groups only grow, so its attributes come in order of
	// depth, each under a prefix of h.groups.
	next := 0
	for depth := 0; depth <= len(h.groups); depth++ {
		for ; next < len(h.attrs) && len(h.attrs[next].groups) == depth; next++ {
			if a := h.attrs[next].attr; depth > 0 || !field(a) {
				w.attr(a)
			}
		}
		if depth < len(h.groups) {
			w.key(h.groups[depth])
			w.open()
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		if len(h.groups) > 0 || !field(a) {
			w.attr(a)
		}
		return true
	})
	for range len(h.groups) {
		w.close()
	}
	w.close()
	if e.AdminSubject == "" {
		e.AdminSubject = adminClient
	}
	if len(w.b) > 2 {
		e.Detail = w.b
	}
	return e
}

// eventName is the record's event attribute.
func eventName(r slog.Record) string {
	var name string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "event" {
			name = a.Value.Resolve().String()
			return false
		}
		return true
	})
	return name
}
