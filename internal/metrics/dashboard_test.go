package metrics

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/deploy/grafana"
)

// Every series the authorization server's Grafana dashboard queries, and
// every label it selects or groups by, is one this registry exports: the
// requests and audit events it counts are made first, since a labelled
// metric appears once one of its series was counted. A panel naming a
// metric or label that is not (or no longer) exported fails here.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	m := New()
	m.Request(Token, http.StatusOK, 3*time.Millisecond)
	m.Request(Token, http.StatusBadRequest, time.Millisecond)
	m.OAuthError(Token, "invalid_grant")
	log := slog.New(m.AuditHandler(slog.NewTextHandler(io.Discard, nil)))
	for _, ev := range []string{"token.issued", "login.failed", "login.throttled", "client.registered", "token.revoked"} {
		log.Info("audit", "event", ev, "grant_type", "client_credentials")
	}
	m.CIMDFetched(nil)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if err := grafana.Check(grafana.AuthServer, rec.Body); err != nil {
		t.Error(err)
	}
}
