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
		for _, id := range []string{"7", "-3", "0", "123456789012345", "1234567890123456", `"a"`, `"<&>"`, "1.5", "-0"} {
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
