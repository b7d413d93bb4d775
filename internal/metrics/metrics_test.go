package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcpauth/mcpauth/storage"
)

func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("text parser: %v", err)
	}
	return fams
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && got[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		if m.Counter != nil {
			return m.GetCounter().GetValue()
		}
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

// The audit events the server writes feed the counters, whatever level the
// log itself is at, and the records still reach the log when it is enabled.
func TestAuditEventsFeedTheCounters(t *testing.T) {
	m := New()
	var buf bytes.Buffer
	log := slog.New(m.AuditHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))).With("component", "as")
	audit := func(event string, args ...any) { log.Info("audit", append([]any{"event", event}, args...)...) }
	audit("token.issued", "client_id", "a", "grant_type", "client_credentials")
	audit("token.issued", "client_id", "a", "grant_type", "client_credentials")
	audit("token.issued", "grant_type", "urn:ietf:params:oauth:grant-type:token-exchange")
	audit("token.issued", "grant_type", "made-up")
	audit("refresh.reused")
	audit("code.replayed")
	audit("client.registered")
	audit("login.failed")
	audit("login.failed")
	audit("login.throttled")
	audit("client.auth_failed")
	audit("admin.client.created", "admin_client", "ops-bot")
	audit("grants.revoked", "sub", "alice", "count", 2)
	log.Error("storage unavailable", "err", fmt.Errorf("get token: %w", storage.ErrUnavailable))
	log.Error("internal error", "err", errors.New("not a storage outage"))
	log.Warn("dcr: storage unavailable", "err", storage.ErrUnavailable)
	log.Info("not an audit event", "err", storage.ErrUnavailable)
	m.CIMDFetched(nil)
	m.CIMDFetched(errors.New("refused"))
	m.CIMDCacheHit()
	m.CIMDCacheHit()
	m.AuditDropped(3, false)
	m.AuditDropped(2, true)
	m.AuditDropped(0, true)

	fams := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"mcpauth_tokens_issued_total", []string{"grant_type", "client_credentials"}, 2},
		{"mcpauth_tokens_issued_total", []string{"grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"}, 1},
		{"mcpauth_tokens_issued_total", []string{"grant_type", "other"}, 1},
		{"mcpauth_refresh_replays_total", nil, 1},
		{"mcpauth_code_replays_total", nil, 1},
		{"mcpauth_registrations_total", nil, 1},
		{"mcpauth_login_failures_total", nil, 2},
		{"mcpauth_login_throttled_total", nil, 1},
		{"mcpauth_client_auth_failures_total", nil, 1},
		{"mcpauth_admin_actions_total", nil, 1},
		{"mcpauth_grant_revocations_total", nil, 1},
		{"mcpauth_storage_errors_total", nil, 2},
		{"mcpauth_cimd_fetches_total", []string{"result", "ok"}, 1},
		{"mcpauth_cimd_fetches_total", []string{"result", "error"}, 1},
		{"mcpauth_cimd_cache_hits_total", nil, 2},
		{"mcpauth_audit_events_dropped_total", []string{"reason", "full"}, 3},
		{"mcpauth_audit_events_dropped_total", []string{"reason", "failed"}, 2},
	} {
		if got := value(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The log at warn shows the warning and the errors, not the audit lines.
	out := buf.String()
	if strings.Contains(out, "msg=audit") || strings.Count(out, "storage unavailable") != 2 || !strings.Contains(out, "component=as") {
		t.Fatalf("log at warn:\n%s", out)
	}
}

func TestRequestsAndErrorsByEndpoint(t *testing.T) {
	m := New()
	m.Request(Token, 200, time.Millisecond)
	m.Request(Token, 200, 2*time.Millisecond)
	m.Request(Token, 400, time.Millisecond)
	m.Request(Authorize, 303, time.Millisecond)
	m.Request(Endpoint(200), 999, time.Millisecond) // out of range: other, 599
	m.OAuthError(Token, "invalid_grant")
	m.OAuthError(Token, "no-such-code")
	m.OAuthError(Token, "")
	var nilM *Metrics
	nilM.Request(Token, 200, time.Second)
	nilM.OAuthError(Token, "invalid_grant")

	fams := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"mcpauth_http_requests_total", []string{"endpoint", "token", "code", "200"}, 2},
		{"mcpauth_http_requests_total", []string{"endpoint", "token", "code", "400"}, 1},
		{"mcpauth_http_requests_total", []string{"endpoint", "authorize", "code", "303"}, 1},
		{"mcpauth_http_requests_total", []string{"endpoint", "other", "code", "599"}, 1},
		{"mcpauth_http_request_duration_seconds", []string{"endpoint", "token"}, 3},
		{"mcpauth_oauth_errors_total", []string{"endpoint", "token", "error", "invalid_grant"}, 1},
		{"mcpauth_oauth_errors_total", []string{"endpoint", "token", "error", "other"}, 1},
	} {
		if got := value(t, fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// Counting a request allocates nothing once its status has been seen.
func TestRequestCountingDoesNotAllocate(t *testing.T) {
	m := New()
	m.Request(Token, 200, time.Millisecond)
	allocs := testing.AllocsPerRun(1000, func() {
		m.Request(Token, 200, time.Millisecond)
		m.OAuthError(Token, "invalid_grant")
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per counted request", allocs)
	}
}

func BenchmarkRequest(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		m.Request(Token, 200, time.Millisecond)
	}
}

func BenchmarkAuditHandler(b *testing.B) {
	m := New()
	log := slog.New(m.AuditHandler(slog.DiscardHandler))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		log.InfoContext(ctx, "audit", "event", "token.issued", "client_id", "c", "grant_type", "client_credentials")
	}
}
