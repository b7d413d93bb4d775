package admin

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/cmd/authserver/internal/ops"
	"github.com/mcpauth/mcpauth/storage"
)

// seedPeople configures alice and a disabled carol, upstream "corp", and
// records two corp people (one whose subject needs escaping in a path,
// with a live grant and a browser session) and one of a removed upstream.
func seedPeople(t *testing.T, f *fixture) {
	t.Helper()
	ctx := context.Background()
	f.ops.Users = []ops.LocalUser{{Username: "alice"}, {Username: "carol", Disabled: true}}
	f.ops.Upstreams = []string{"corp"}
	now := time.Now()
	for _, u := range []storage.User{
		{Subject: "corp:a/b c%", Upstream: "corp", UpstreamSubject: "a/b c%", Name: "Ada", Email: "ada@acme.example", Groups: []string{"mcp-users"}, LastSeen: now},
		{Subject: "corp:x", Upstream: "corp", UpstreamSubject: "x", LastSeen: now},
		{Subject: "old:1", Upstream: "old", UpstreamSubject: "1", LastSeen: now},
		{Subject: "alice", LastSeen: now},
	} {
		if _, err := f.store.RecordLogin(ctx, &u); err != nil {
			t.Fatal(err)
		}
	}
	for _, tok := range []storage.Token{
		{Kind: storage.KindRefreshToken, Signature: "rt-ada", RequestID: "grant-ada", ClientID: "demo-app", Subject: "corp:a/b c%", Active: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		{Kind: storage.KindRefreshToken, Signature: "rt-x", RequestID: "grant-x", ClientID: "demo-app", Subject: "corp:x", Active: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
	} {
		if err := f.store.CreateToken(ctx, &tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.store.CreateSession(ctx, &storage.Session{ID: "sess-ada", Subject: "corp:a/b c%", CreatedAt: now, LastSeenAt: now,
		IdleExpiresAt: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

// userPath escapes subject as one path segment ("/" as %2F).
func userPath(subject string) string { return "users/" + url.PathEscape(subject) }

func tokenActive(t *testing.T, f *fixture, sig string) bool {
	t.Helper()
	tok, err := f.store.GetToken(context.Background(), storage.KindRefreshToken, sig)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Active
}

func TestAdminUsersAPI(t *testing.T) {
	f := start(t)
	seedPeople(t, f)
	ctx := context.Background()
	tok := f.token(t, "ops-bot", f.issuer+"/admin", "admin")

	// Paging: two at a time through configured users and records merged.
	var subjects []string
	byID := map[string]map[string]any{}
	after := ""
	for range 10 {
		status, _, body := call(t, "GET", f.adminURL+"users?limit=2&after="+url.QueryEscape(after), tok, "")
		if status != 200 {
			t.Fatalf("list users: %d %v", status, body)
		}
		page, _ := body["users"].([]any)
		if len(page) > 2 {
			t.Fatalf("limit 2 returned %d users", len(page))
		}
		for _, u := range page {
			m := u.(map[string]any)
			subjects = append(subjects, m["subject"].(string))
			byID[m["subject"].(string)] = m
		}
		next, more := body["next_after"].(string)
		if !more {
			break
		}
		after = next
	}
	if got, want := strings.Join(subjects, " | "), "alice | carol | corp:a/b c% | corp:x | old:1"; got != want {
		t.Fatalf("listed %s, want %s", got, want)
	}
	if c := byID["carol"]; c["configured"] != true || c["disabled_by"] != "config" || c["active"] != false || c["last_seen"] != nil {
		t.Errorf("carol (configured, disabled, never seen): %v", c)
	}
	if o := byID["old:1"]; o["source"] != "upstream" || o["upstream"] != "old" || o["active"] != false || o["disabled"] != false {
		t.Errorf("old:1 (its upstream is gone): %v", o)
	}
	if x := byID["corp:x"]; x["active"] != true || x["configured"] != false {
		t.Errorf("corp:x: %v", x)
	}

	// One person, by a subject that needs escaping.
	ada := "corp:a/b c%"
	status, _, body := call(t, "GET", f.adminURL+userPath(ada), tok, "")
	if status != 200 || body["subject"] != ada || body["name"] != "Ada" || body["email"] != "ada@acme.example" || body["active"] != true {
		t.Fatalf("show %q: %d %v", ada, status, body)
	}
	if _, leaked := body["upstream_refresh"]; leaked {
		t.Fatal("the upstream refresh token is shown")
	}
	if status, _, body := call(t, "GET", f.adminURL+"users/nobody", tok, ""); status != 404 || body["error"] != "not_found" {
		t.Fatalf("show unknown: %d %v", status, body)
	}

	// Disable: the record, the grant and the session.
	status, _, body = call(t, "POST", f.adminURL+userPath(ada)+"/disable", tok, "")
	if status != 200 {
		t.Fatalf("disable: %d %v", status, body)
	}
	u := body["user"].(map[string]any)
	if u["disabled"] != true || u["disabled_by"] != "admin" || u["active"] != false || body["ended_sessions"] != float64(1) || len(body["revoked_grants"].([]any)) != 1 {
		t.Fatalf("disable answer: %v", body)
	}
	rec, err := f.store.GetUser(ctx, ada)
	if err != nil || !rec.Disabled {
		t.Fatalf("record after disable: %+v %v", rec, err)
	}
	if tokenActive(t, f, "rt-ada") || !tokenActive(t, f, "rt-x") {
		t.Fatal("disable must revoke the person's grant and nobody else's")
	}
	if ss, _ := f.store.ListSessions(ctx, ada); len(ss) != 0 {
		t.Fatalf("%d sessions left after disable", len(ss))
	}
	if !strings.Contains(f.audit.String(), "event=admin.user.disabled admin_client=ops-bot sub=\"corp:a/b c%\" grants=1 sessions=1") {
		t.Fatalf("audit: %s", f.audit)
	}

	// Enable: the flag only; the revoked grant stays revoked.
	status, _, body = call(t, "POST", f.adminURL+userPath(ada)+"/enable", tok, "")
	if status != 200 || body["disabled"] != false || body["active"] != true {
		t.Fatalf("enable: %d %v", status, body)
	}
	if tokenActive(t, f, "rt-ada") {
		t.Fatal("enable brought a revoked grant back")
	}
	if !strings.Contains(f.audit.String(), "event=admin.user.enabled admin_client=ops-bot") {
		t.Fatalf("audit: %s", f.audit)
	}

	// Refusals write nothing.
	if status, _, body := call(t, "POST", f.adminURL+"users/carol/enable", tok, ""); status != 409 || body["error"] != "conflict" || !strings.Contains(body["error_description"].(string), "users[].disabled") {
		t.Fatalf("enable a user disabled in the configuration: %d %v", status, body)
	}
	if _, err := f.store.GetUser(ctx, "carol"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused enable wrote a record: %v", err)
	}
	if status, _, body := call(t, "POST", f.adminURL+"users/nobody/disable", tok, ""); status != 404 || body["error"] != "not_found" {
		t.Fatalf("disable unknown: %d %v", status, body)
	}
	if _, err := f.store.GetUser(ctx, "nobody"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused disable wrote a record: %v", err)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=two", "after=%FF"} {
		if status, _, body := call(t, "GET", f.adminURL+"users?"+q, tok, ""); status != 400 || body["error"] != "invalid_request" {
			t.Errorf("list users?%s: %d %v", q, status, body)
		}
	}
	if status, _, _ := call(t, "DELETE", f.adminURL+"users/alice", tok, ""); status != 405 && status != 404 {
		t.Errorf("DELETE users/alice: %d", status)
	}
}
