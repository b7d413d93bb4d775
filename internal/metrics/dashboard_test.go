package metrics

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := grafana.Check(grafana.AuthServer, strings.NewReader(string(body))); err != nil {
		t.Error(err)
	}
}
