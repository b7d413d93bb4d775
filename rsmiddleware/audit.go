package rsmiddleware

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"time"
)

// Results of an audited JSON-RPC request (AuditEvent.Result).
const (
	AuditOK         = "ok"          // a JSON-RPC result (for tools/call: isError false)
	AuditToolError  = "tool_error"  // a tools/call result with isError true
	AuditRPCError   = "error"       // a JSON-RPC error; ErrorCode says which
	AuditAccepted   = "accepted"    // a notification, answered 202 Accepted
	AuditHTTPError  = "http_error"  // the server answered the HTTP request with a failure status
	AuditNoResponse = "no_response" // the exchange ended without a response for this id
	AuditDenied     = "denied"      // refused with 403 insufficient_scope before reaching the server
)

// AuditEvent is one JSON-RPC request seen by MCPFilter. It names the call,
// who made it (from the verified token, never from the arguments) and its
// outcome; the arguments appear only as ArgsSHA256.
type AuditEvent struct {
	Time       time.Time     // when the request arrived
	Event      string        // "tool.call" for tools/call, else the JSON-RPC method
	Method     string        // JSON-RPC method
	Tool       string        // params.name of a tools/call or prompts/get
	RequestID  string        // the JSON-RPC id, as JSON text; empty for a notification
	Session    string        // Mcp-Session-Id of the request
	Subject    string        // token sub
	ClientID   string        // token client_id
	Tenant     string        // the configured tenant claim of the token
	ArgsSHA256 string        // ArgumentsDigest of params.arguments (tools/call, prompts/get)
	Result     string        // AuditOK, AuditToolError, AuditRPCError, ...
	ErrorCode  int           // the JSON-RPC error code when Result is AuditRPCError
	IsError    bool          // the isError flag of a tools/call result
	Status     int           // HTTP status of the response
	Latency    time.Duration // from the request's arrival to its response
}

// AuditFunc receives audit events. It is called from request goroutines
// and must be safe for concurrent use.
type AuditFunc func(AuditEvent)

// AuditLog returns an AuditFunc writing one line per event to w: format
// "json" gives JSON lines, "text" logfmt-style key=value lines (both through
// log/slog, with the keys time, event, method, tool, id, session, sub,
// client_id, tenant, args_sha256, result, error_code, is_error, status,
// latency_ms). Each line is one Write; the slog handler serialises them.
func AuditLog(w io.Writer, format string) AuditFunc {
	var h slog.Handler
	if format == "text" {
		h = slog.NewTextHandler(w, nil)
	} else {
		h = slog.NewJSONHandler(w, nil)
	}
	return func(e AuditEvent) {
		var buf [16]slog.Attr // every attribute an event can have: no growth
		attrs := append(buf[:0], slog.String("event", e.Event), slog.String("method", e.Method))
		attrs = appendNonEmpty(attrs, "tool", e.Tool)
		if e.RequestID != "" {
			attrs = append(attrs, idAttr(e.RequestID, format != "text"))
		}
		attrs = appendNonEmpty(attrs, "session", e.Session)
		attrs = appendNonEmpty(attrs, "sub", e.Subject)
		attrs = appendNonEmpty(attrs, "client_id", e.ClientID)
		attrs = appendNonEmpty(attrs, "tenant", e.Tenant)
		attrs = appendNonEmpty(attrs, "args_sha256", e.ArgsSHA256)
		attrs = append(attrs, slog.String("result", e.Result))
		if e.Result == AuditRPCError {
			attrs = append(attrs, slog.Int("error_code", e.ErrorCode))
		}
		if e.Method == "tools/call" {
			attrs = append(attrs, slog.Bool("is_error", e.IsError))
		}
		attrs = append(attrs, slog.Int("status", e.Status),
			slog.Float64("latency_ms", float64(e.Latency.Microseconds())/1000))
		r := slog.NewRecord(e.Time, slog.LevelInfo, "mcp.request", 0)
		r.AddAttrs(attrs...)
		_ = h.Handle(context.Background(), r)
	}
}

func appendNonEmpty(attrs []slog.Attr, k, v string) []slog.Attr {
	if v == "" {
		return attrs
	}
	return append(attrs, slog.String(k, v))
}

// idAttr is the JSON-RPC id as its JSON text. In JSON lines an integer id
// (the usual kind, already in canonical form) is written as the number it
// is, without the JSON encoder a raw value goes through.
func idAttr(id string, jsonLines bool) slog.Attr {
	if jsonLines && len(id) <= 15 {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil && strconv.FormatInt(n, 10) == id {
			return slog.Int64("id", n)
		}
	}
	return slog.Any("id", json.RawMessage(id))
}
