package rsmiddleware

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
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
		attrs := []slog.Attr{
			slog.String("event", e.Event),
			slog.String("method", e.Method),
		}
		str := func(k, v string) {
			if v != "" {
				attrs = append(attrs, slog.String(k, v))
			}
		}
		str("tool", e.Tool)
		if e.RequestID != "" {
			attrs = append(attrs, slog.Any("id", json.RawMessage(e.RequestID)))
		}
		str("session", e.Session)
		str("sub", e.Subject)
		str("client_id", e.ClientID)
		str("tenant", e.Tenant)
		str("args_sha256", e.ArgsSHA256)
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
