package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/auditsink"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/config"
	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/internal/password"
	"github.com/mcpauth/mcpauth/storage"
	"github.com/mcpauth/mcpauth/storage/memory"
	"github.com/mcpauth/mcpauth/storage/postgres"
	"github.com/mcpauth/mcpauth/storage/postgres/pgtest"
)

// kept lists the audit events of one event name kept in st.
func kept(t *testing.T, st storage.Store, event string) []storage.AuditEvent {
	t.Helper()
	es, err := st.ListAuditEvents(context.Background(), storage.AuditFilter{Event: event, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// counted sums the hourly counts in st by name.
func counted(t *testing.T, st storage.Store) map[string]int64 {
	t.Helper()
	cs, err := st.ListStats(context.Background(), time.Now().Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, c := range cs {
		out[c.Name] += c.Count
	}
	return out
}

// Two instances on one PostgreSQL database each issue tokens, refuse a
// wrong client secret and take a good and a bad login: every audit event
// reaches the database while they run, and the hourly counts of both add
// up there (each instance's are written at the latest when it stops).
// `authserver audit list` reads them back; `authserver gc` with a short
// admin.audit_retention deletes them and keeps the counts.
func TestAuditEventsAndCountsOfTwoInstancesOnOnePostgres(t *testing.T) {
	dsn, _ := pgtest.Schema(t)
	const alicePassword = "alice-password-4711"
	hash, err := password.Hash(alicePassword)
	if err != nil {
		t.Fatal(err)
	}
	users := fmt.Sprintf("users:\n  - username: alice\n    password_hash: %q\n", hash)
	procs := startMany(t, 2, func(issuer, listen string) string { return stackConfig(issuer, listen, dsn) + users })
	for i, p := range procs {
		md := discover(t, p.issuer)
		for range 2 {
			if _, err := clientToken(t, md, "ci-bot", botSecret, nil, "mcp:tools"); err != nil {
				t.Fatalf("instance %d: %v", i, err)
			}
		}
		if _, err := clientToken(t, md, "ci-bot", "not-the-secret-0123", nil, "mcp:tools"); err == nil {
			t.Fatalf("instance %d issued a token for a wrong secret", i)
		}
		if got := login(t, p.issuer, "alice", alicePassword); got != http.StatusOK {
			t.Fatalf("instance %d: login = %d", i, got)
		}
		if got := login(t, p.issuer, "alice", "wrong-password-0815"); got != http.StatusUnauthorized {
			t.Fatalf("instance %d: wrong login = %d", i, got)
		}
	}

	st, err := postgres.Open(context.Background(), dsn, postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Appended as they come, not at shutdown.
	deadline := time.Now().Add(20 * time.Second)
	for len(kept(t, st, "token.issued")) < 4 || len(kept(t, st, "login.")) < 4 || len(kept(t, st, "client.auth_failed")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("events in storage while running: %d token.issued, %d login, %d client.auth_failed",
				len(kept(t, st, "token.issued")), len(kept(t, st, "login.")), len(kept(t, st, "client.auth_failed")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, e := range kept(t, st, "token.issued") {
		var d map[string]any
		if e.ClientID != "ci-bot" || e.Subject != "" || json.Unmarshal(e.Detail, &d) != nil || d["grant_type"] != "client_credentials" {
			t.Fatalf("token.issued event %+v %s", e, e.Detail)
		}
	}
	var good, bad int
	for _, e := range kept(t, st, "login.") {
		switch {
		case e.Event == "login.succeeded" && e.Subject == "alice":
			good++
		case e.Event == "login.failed" && e.Subject == "":
			bad++
		}
	}
	if good != 2 || bad != 2 {
		t.Fatalf("%d login.succeeded of alice and %d login.failed, want 2 and 2", good, bad)
	}
	all := kept(t, st, "")
	for _, e := range all {
		for _, secret := range []string{botSecret, "not-the-secret-0123", alicePassword, "wrong-password-0815", testSecret} {
			if strings.Contains(string(e.Detail), secret) || strings.Contains(e.Subject+e.ClientID, secret) {
				t.Fatalf("a kept event holds a secret: %+v %s", e, e.Detail)
			}
		}
	}

	// Each instance adds its counts; stopping writes what it holds.
	want := map[string]int64{auditsink.TokensIssued: 2, auditsink.Refusals: 1, auditsink.Logins: 1, auditsink.LoginFailures: 1}
	procs[0].stop(t)
	if got := counted(t, st); !atLeast(got, want) {
		t.Fatalf("counts after the first instance stopped: %v, want at least %v", got, want)
	}
	procs[1].stop(t)
	for k := range want {
		want[k] *= 2
	}
	if got := counted(t, st); len(got) != len(want) || !atLeast(got, want) || !atLeast(want, got) {
		t.Fatalf("counts after both stopped: %v, want %v", got, want)
	}

	// The command line reads them back.
	cfg := writeConfig(t, t.TempDir(), stackConfig(procs[0].issuer, "127.0.0.1:1", dsn)+users)
	out, errOut, err := runBin(t, t.TempDir(), testEnv, "", "audit", "list", "--config", cfg, "--event", "login.", "--format", "json")
	if err != nil {
		t.Fatalf("audit list: %v\n%s", err, errOut)
	}
	var page ops.AuditPage
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Events) != 4 || page.NextBefore != 0 {
		t.Fatalf("audit list --event login. = %v %s", err, out)
	}
	out, errOut, err = runBin(t, t.TempDir(), testEnv, "", "audit", "list", "--config", cfg, "--client", "ci-bot", "--limit", "1")
	if err != nil || !strings.Contains(out, "client.auth_failed") || !strings.Contains(out, "more: --before ") {
		t.Fatalf("audit list --client ci-bot --limit 1: %v\n%s%s", err, out, errOut)
	}

	// A retention shorter than their age: gc deletes the events, keeps the counts.
	short := writeConfig(t, t.TempDir(), stackConfig(procs[0].issuer, "127.0.0.1:1", dsn)+users+"admin:\n  audit_retention: 1ms\n")
	out, errOut, err = runBin(t, t.TempDir(), testEnv, "", "gc", "--config", short)
	if err != nil || !strings.Contains(out, fmt.Sprintf("%d audit events", len(all))) {
		t.Fatalf("gc: %v\n%s%s", err, out, errOut)
	}
	if n := len(kept(t, st, "")); n != 0 {
		t.Fatalf("%d events left after gc with a retention of 1ms", n)
	}
	if got := counted(t, st); got[auditsink.TokensIssued] != 4 {
		t.Fatalf("counts after gc: %v", got)
	}
}

// atLeast reports whether every count of want is in got, at least as high.
func atLeast(got, want map[string]int64) bool {
	for k, n := range want {
		if got[k] < n {
			return false
		}
	}
	return true
}

// Refusals are counted at the token, authorization (and its consent and
// continue steps) and registration endpoints under the issuer's path, not
// at the login step, the other endpoints or outside the path.
func TestRefusalsAreCountedAtTheirEndpoints(t *testing.T) {
	st := memory.New()
	sink := auditsink.New(auditsink.Config{})
	sink.Start(st, st)
	observe := refusals(&config.Config{Issuer: "https://as.example/tenant"}, sink)
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/tenant/token", 400, "invalid_grant"},              // counted
		{"/tenant/authorize", 400, ""},                       // counted
		{"/tenant/authorize/consent", 303, "access_denied"},  // counted
		{"/tenant/authorize/continue", 302, "invalid_scope"}, // counted
		{"/tenant/register", 429, ""},                        // counted
		{"/tenant/token", 503, "temporarily_unavailable"},    // the server's failure
		{"/tenant/token", 200, ""},                           // a token
		{"/tenant/authorize/login", 401, ""},                 // a failed login, counted as such
		{"/tenant/introspect", 401, "invalid_client"},        // not a refusal to grant
		{"/token", 400, "invalid_grant"},                     // outside the issuer's path
		{"/tenant/register/mcp_x", 401, "invalid_token"},     // RFC 7592 management
	} {
		observe(httptest.NewRequest(http.MethodPost, c.path, nil), c.status, c.code)
	}
	if err := sink.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := counted(t, st); len(got) != 1 || got[auditsink.Refusals] != 5 {
		t.Fatalf("counts %v, want 5 refusals", got)
	}
}
