package rsmiddleware

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/mcpauth/mcpauth/internal/jsonstr"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
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
	// AuditUnauthorized: refused before a token was verified (no token,
	// or an invalid, expired or wrong-audience one): 401, or 400 for a
	// malformed Authorization header. The event has no subject.
	AuditUnauthorized = "unauthorized"
	// AuditUnavailable: the token could not be checked (503, the AS
	// unreachable).
	AuditUnavailable = "unavailable"
	// AuditInvalid: a verified token, a body refused for its form (not
	// JSON-RPC, headers that differ from it, too large).
	AuditInvalid = "invalid"
)

// EventResponse is the Event of a JSON-RPC response the client sends (the
// answer to a request of the server, JSON-RPC 2.0 §5): its Method is
// empty, its RequestID the id of the server's request.
const EventResponse = "response"

// MaxAuditNameBytes bounds the text an event takes from the request: a
// longer Method, Tool or Session is cut to this many bytes (at a UTF-8
// boundary) and ends in "...", and a longer RequestID is replaced by the
// JSON string "sha256:" and the hex SHA-256 of its JSON text. A client,
// authenticated or not, cannot make an audit line much longer than this.
const MaxAuditNameBytes = 128

// bound applies MaxAuditNameBytes to the fields taken from the request.
func (e *AuditEvent) bound() {
	e.Event = cutName(e.Event)
	e.Method = cutName(e.Method)
	e.Tool = cutName(e.Tool)
	e.Session = cutName(e.Session)
	if len(e.RequestID) > MaxAuditNameBytes {
		sum := sha256.Sum256([]byte(e.RequestID))
		e.RequestID = `"sha256:` + hex.EncodeToString(sum[:]) + `"`
	}
}

func cutName(s string) string {
	if len(s) <= MaxAuditNameBytes {
		return s
	}
	n := MaxAuditNameBytes - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// AuditEvent is one JSON-RPC request seen by MCPFilter. It names the call,
// who made it (from the verified token, never from the arguments) and its
// outcome; the arguments appear only as ArgsSHA256.
type AuditEvent struct {
	Time       time.Time     // when the request arrived
	Event      string        // "tool.call" for tools/call, EventResponse for a response, else the JSON-RPC method
	Method     string        // JSON-RPC method
	Tool       string        // params.name of a tools/call or prompts/get
	RequestID  string        // the JSON-RPC id, as JSON text; empty for a notification
	Session    string        // Mcp-Session-Id of the request
	Subject    string        // token sub
	ClientID   string        // token client_id
	Tenant     string        // the configured tenant claim of the token
	ArgsSHA256 string        // ArgumentsDigest of params.arguments (tools/call, prompts/get)
	Result     string        // AuditOK, AuditToolError, AuditRPCError, ...
	ErrorCode  int           // the JSON-RPC error code when Result is AuditRPCError or AuditApprovalUnavailable
	IsError    bool          // the isError flag of a tools/call result
	Status     int           // HTTP status of the response
	Latency    time.Duration // from the request's arrival to its response
	// Rule is the index of the policy rule (Result AuditDeniedByPolicy,
	// key "rule") or of the rate limit (AuditRateLimited, key
	// "rate_limit") that refused the request; not written otherwise.
	Rule int
	// ToolSHA256 is the digest of a listed tool definition (ToolDefinition)
	// and PinnedSHA256 the digest pinned for its name, of the events
	// EventToolUnpinned, EventToolDefinitionChanged and EventToolSuspicious
	// (keys "tool_sha256", "pinned_sha256").
	ToolSHA256, PinnedSHA256 string
	// Pattern names the screening pattern of EventToolSuspicious (key
	// "pattern"): a built-in name or "screening.patterns[i]".
	Pattern string
	// ApprovalID names the person's approval of a tools/call that needs
	// one (MCPFilterConfig.Approval, key "approval_id"): the approval used
	// by a forwarded call, or the pending or denied one of a held call.
	ApprovalID string
	// TraceID and SpanID are the W3C trace and span ids (lowercase hex)
	// of the request's OpenTelemetry span, keys trace_id and span_id;
	// empty (and not written) without a span.
	TraceID, SpanID string
}

// AuditFunc receives audit events. It is called from request goroutines
// and must be safe for concurrent use.
type AuditFunc func(AuditEvent)

// AuditLog returns an AuditFunc writing one line per event to w: format
// "json" gives JSON lines (the lines log/slog's JSONHandler writes), "text"
// logfmt-style key=value lines (through slog's TextHandler), with the keys
// time, event, method, tool, id, session, sub, client_id, tenant,
// args_sha256, tool_sha256, pinned_sha256, pattern (tool definition
// events), approval_id (calls that need a person's approval), result,
// error_code (AuditRPCError, AuditApprovalUnavailable), rule
// (AuditDeniedByPolicy), rate_limit (AuditRateLimited), is_error, status,
// latency_ms, trace_id, span_id (with an OpenTelemetry span). Each line is
// one Write, and the Writes come one after the other.
func AuditLog(w io.Writer, format string) AuditFunc {
	if format == "text" {
		return slogAudit(slog.NewTextHandler(w, nil), false)
	}
	// JSON lines are appended directly, byte for byte what the slog
	// handler writes for them (FuzzAuditLogJSON), without its attribute
	// values, its float encoder and its record; the handler writes the
	// rare events the appender leaves to it. Both write through lw, one
	// Write per line.
	lw := &lockedWriter{w: w}
	slow := slogAudit(slog.NewJSONHandler(lw, nil), true)
	return func(e AuditEvent) {
		if y := e.Time.Year(); y < 0 || y >= 10000 || e.RequestID != "" && !plainIntID(e.RequestID) {
			slow(e)
			return
		}
		bp := auditBuffers.Get().(*[]byte)
		line := appendAuditJSON((*bp)[:0], e)
		_, _ = lw.Write(line)
		if cap(line) <= 4<<10 {
			*bp = line
			auditBuffers.Put(bp)
		}
	}
}

// slogAudit writes each event as a record of h.
func slogAudit(h slog.Handler, jsonLines bool) AuditFunc {
	return func(e AuditEvent) {
		var buf [24]slog.Attr // every attribute an event can have: no growth
		attrs := append(buf[:0], slog.String("event", e.Event), slog.String("method", e.Method))
		attrs = appendNonEmpty(attrs, "tool", e.Tool)
		if e.RequestID != "" {
			attrs = append(attrs, idAttr(e.RequestID, jsonLines))
		}
		attrs = appendNonEmpty(attrs, "session", e.Session)
		attrs = appendNonEmpty(attrs, "sub", e.Subject)
		attrs = appendNonEmpty(attrs, "client_id", e.ClientID)
		attrs = appendNonEmpty(attrs, "tenant", e.Tenant)
		attrs = appendNonEmpty(attrs, "args_sha256", e.ArgsSHA256)
		attrs = appendNonEmpty(attrs, "tool_sha256", e.ToolSHA256)
		attrs = appendNonEmpty(attrs, "pinned_sha256", e.PinnedSHA256)
		attrs = appendNonEmpty(attrs, "pattern", e.Pattern)
		attrs = appendNonEmpty(attrs, "approval_id", e.ApprovalID)
		attrs = append(attrs, slog.String("result", e.Result))
		if e.Result == AuditRPCError || e.Result == AuditApprovalUnavailable {
			attrs = append(attrs, slog.Int("error_code", e.ErrorCode))
		}
		switch e.Result {
		case AuditDeniedByPolicy:
			attrs = append(attrs, slog.Int("rule", e.Rule))
		case AuditRateLimited:
			attrs = append(attrs, slog.Int("rate_limit", e.Rule))
		}
		if e.Method == "tools/call" {
			attrs = append(attrs, slog.Bool("is_error", e.IsError))
		}
		attrs = append(attrs, slog.Int("status", e.Status),
			slog.Float64("latency_ms", latencyMS(e.Latency)))
		attrs = appendNonEmpty(attrs, "trace_id", e.TraceID)
		attrs = appendNonEmpty(attrs, "span_id", e.SpanID)
		r := slog.NewRecord(e.Time, slog.LevelInfo, "mcp.request", 0)
		r.AddAttrs(attrs...)
		_ = h.Handle(context.Background(), r)
	}
}

func latencyMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// lockedWriter makes the Writes of the appender and of the slog handler
// one after the other.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

var auditBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendAuditJSON appends the JSON line of e as slog.NewJSONHandler writes
// the record slogAudit makes of it: e.Time within years 0-9999 and an
// empty or plainIntID RequestID.
func appendAuditJSON(b []byte, e AuditEvent) []byte {
	b = append(b, `{"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"mcp.request"`...)
	b = appendJSONMember(b, "event", e.Event)
	b = appendJSONMember(b, "method", e.Method)
	if e.Tool != "" {
		b = appendJSONMember(b, "tool", e.Tool)
	}
	if e.RequestID != "" {
		b = append(b, `,"id":`...)
		b = append(b, e.RequestID...)
	}
	for _, m := range [...]struct{ k, v string }{
		{"session", e.Session}, {"sub", e.Subject}, {"client_id", e.ClientID}, {"tenant", e.Tenant}, {"args_sha256", e.ArgsSHA256},
		{"tool_sha256", e.ToolSHA256}, {"pinned_sha256", e.PinnedSHA256}, {"pattern", e.Pattern}, {"approval_id", e.ApprovalID},
	} {
		if m.v != "" {
			b = appendJSONMember(b, m.k, m.v)
		}
	}
	b = appendJSONMember(b, "result", e.Result)
	if e.Result == AuditRPCError || e.Result == AuditApprovalUnavailable {
		b = append(b, `,"error_code":`...)
		b = strconv.AppendInt(b, int64(e.ErrorCode), 10)
	}
	switch e.Result {
	case AuditDeniedByPolicy:
		b = append(b, `,"rule":`...)
		b = strconv.AppendInt(b, int64(e.Rule), 10)
	case AuditRateLimited:
		b = append(b, `,"rate_limit":`...)
		b = strconv.AppendInt(b, int64(e.Rule), 10)
	}
	if e.Method == "tools/call" {
		b = append(b, `,"is_error":`...)
		b = strconv.AppendBool(b, e.IsError)
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"latency_ms":`...)
	b = appendJSONFloat(b, latencyMS(e.Latency))
	if e.TraceID != "" {
		b = appendJSONMember(b, "trace_id", e.TraceID)
	}
	if e.SpanID != "" {
		b = appendJSONMember(b, "span_id", e.SpanID)
	}
	return append(b, "}\n"...)
}

// appendJSONMember appends ,"k":"v" with v escaped as slog escapes JSON
// strings (jsonstr.Append).
func appendJSONMember(b []byte, k, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, k...)
	b = append(b, '"', ':')
	return jsonstr.Append(b, v)
}

// appendJSONFloat appends f as encoding/json encodes a float64 (slog's
// JSON handler goes through it): 'f' format, 'e' outside [1e-6, 1e21)
// with a one-digit exponent kept short.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// plainIntID reports whether the JSON-RPC id is an integer of at most 15
// characters in its shortest form, which idAttr writes as a number.
func plainIntID(id string) bool {
	if len(id) == 0 || len(id) > 15 {
		return false
	}
	i := 0
	if id[0] == '-' {
		i = 1
	}
	if i == len(id) || id[i] == '0' && len(id) > i+1 || id[i] == '0' && i == 1 {
		return false
	}
	for ; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
	}
	return true
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
