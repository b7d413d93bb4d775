package rsmiddleware

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// BenchmarkAuditLog formats the JSON audit line of one tools/call.
//
//	go test ./rsmiddleware -run '^$' -bench AuditLog -benchmem
func BenchmarkAuditLog(b *testing.B) {
	audit := AuditLog(io.Discard, "json")
	e := AuditEvent{Time: time.Now(), Event: "tool.call", Method: "tools/call", Tool: "echo", RequestID: "7",
		Session: "SESSIONID0123456789", Subject: "user-bot", ClientID: "user-bot", Tenant: "user-bot",
		ArgsSHA256: "n4bQgYhMfWWaL-qgxVrQFaO_TxsrC4Is0V1sFbDwCgg", Result: AuditOK, Status: 200, Latency: 1234 * time.Microsecond}
	b.ReportAllocs()
	for b.Loop() {
		audit(e)
	}
}

// TestAuditLogIDIsItsJSONText checks that the id of an audit line is the
// request's id as JSON text, whatever its kind, in both formats.
func TestAuditLogIDIsItsJSONText(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, format := range []string{"json", "text"} {
		// Besides JSON ids, texts that are not JSON, which must still come
		// out as slog writes them (through the handler, not as raw bytes).
		for _, id := range []string{"7", "-3", "0", "123456789012345", "1234567890123456", `"a"`, `"<&>"`, "1.5", "-0",
			"abc", "01", "-", "+", "x7", "-01", "00"} {
			var got, want strings.Builder
			AuditLog(&got, format)(AuditEvent{Time: at, Event: "ping", Method: "ping", RequestID: id, Result: AuditOK, Status: 200})
			var h slog.Handler = slog.NewJSONHandler(&want, nil)
			if format == "text" {
				h = slog.NewTextHandler(&want, nil)
			}
			r := slog.NewRecord(at, slog.LevelInfo, "mcp.request", 0)
			r.AddAttrs(slog.String("event", "ping"), slog.String("method", "ping"), slog.Any("id", json.RawMessage(id)),
				slog.String("result", AuditOK), slog.Int("status", 200), slog.Float64("latency_ms", 0))
			_ = h.Handle(context.Background(), r)
			if got.String() != want.String() {
				t.Errorf("%s id %s:\n got %s\nwant %s", format, id, got.String(), want.String())
			}
		}
	}
}

// FuzzAuditLogJSON checks the JSON lines of AuditLog against what slog's
// JSONHandler writes for the same event's record.
func FuzzAuditLogJSON(f *testing.F) {
	f.Add(int64(1764590400123456789), "tool.call", "tools/call", "echo", "7", "SESSION", "user-bot", "user-bot", "acme",
		"n4bQgYhMfWWaL-qgxVrQFaO_TxsrC4Is0V1sFbDwCgg", AuditOK, 0, false, 200, int64(1234567))
	f.Add(int64(0), "x\"\\\n\r\t\x01\x7f<&>", "tools/call", "\xff\u2028\u2029é", "-3", "", "", "", "", "", AuditRPCError, -32602, true, 502, int64(-5))
	f.Add(int64(-1), "a", "b", "", `"str"`, "", "", "", "", "", AuditToolError, 1, true, 0, int64(1))
	f.Add(int64(1<<62), "a", "b", "", "1.5", "", "", "", "", "", AuditOK, 0, false, 0, int64(1<<62))
	f.Add(int64(5), "a", "b", "", "0", "", "", "", "", "", AuditOK, 0, false, 0, int64(0))
	f.Add(int64(5), "a", "b", "", "-0", "", "", "", "", "", AuditOK, 0, false, 0, int64(999))
	f.Add(int64(5), "tool call", "tools/call", "a\x80b", "7", "s s", "", "", "", "", AuditOK, 0, false, 200, int64(1500000))
	f.Fuzz(func(t *testing.T, ns int64, event, method, tool, id, session, sub, client, tenant, args, result string,
		code int, isError bool, status int, latency int64) {
		e := AuditEvent{Time: time.Unix(0, ns).UTC(), Event: event, Method: method, Tool: tool, RequestID: id, Session: session,
			Subject: sub, ClientID: client, Tenant: tenant, ArgsSHA256: args, Result: result, ErrorCode: code, IsError: isError,
			Status: status, Latency: time.Duration(latency)}
		for _, e := range []AuditEvent{e, func() AuditEvent { e.Time = e.Time.In(time.FixedZone("X", 5*3600+1800)); return e }()} {
			var got, want strings.Builder
			AuditLog(&got, "json")(e)
			slogAudit(slog.NewJSONHandler(&want, nil), true)(e)
			if got.String() != want.String() {
				t.Fatalf("AuditLog:\n%s\nslog:\n%s", got.String(), want.String())
			}
		}
	})
}

// Times outside the years RFC 3339 can write go through slog's handler,
// which says so in the line.
func TestAuditLogJSONOutOfRangeYear(t *testing.T) {
	for _, at := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)} {
		e := AuditEvent{Time: at, Event: "ping", Method: "ping", RequestID: "1", Result: AuditOK, Status: 200}
		var got, want strings.Builder
		AuditLog(&got, "json")(e)
		slogAudit(slog.NewJSONHandler(&want, nil), true)(e)
		if got.String() != want.String() || !strings.Contains(got.String(), "year outside") {
			t.Errorf("AuditLog:\n%s\nslog:\n%s", got.String(), want.String())
		}
	}
}

// TestAuditLogLatencyIsInMilliseconds: latency_ms is the latency in
// milliseconds, to the microsecond, in both formats.
func TestAuditLogLatencyIsInMilliseconds(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var b strings.Builder
		AuditLog(&b, format)(AuditEvent{Time: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Event: "ping", Method: "ping",
			Result: AuditOK, Status: 200, Latency: 1500*time.Microsecond + 700*time.Nanosecond})
		want := `"latency_ms":1.5}`
		if format == "text" {
			want = "latency_ms=1.5\n"
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s: %q; want it to contain %q", format, b.String(), want)
		}
	}
}
