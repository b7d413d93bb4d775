package admin

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// seedAudit stores 7 events, oldest first: five token.issued of alice at
// app, one admin.grants.revoked by ops-bot naming alice, and one
// login.failed without a person.
func seedAudit(t *testing.T, f *fixture) {
	t.Helper()
	at := time.Now().Add(-time.Hour)
	var es []storage.AuditEvent
	for i := range 5 {
		es = append(es, storage.AuditEvent{Time: at.Add(time.Duration(i) * time.Second), Event: "token.issued", Subject: "alice",
			ClientID: "app", Detail: []byte(fmt.Sprintf(`{"grant_type":"authorization_code","n":%d}`, i))})
	}
	es = append(es,
		storage.AuditEvent{Time: at.Add(10 * time.Second), Event: "admin.grants.revoked", Subject: "alice", AdminSubject: "ops-bot", Detail: []byte(`{"count":1}`)},
		storage.AuditEvent{Time: at.Add(11 * time.Second), Event: "login.failed", Detail: []byte(`{"user_digest":"abc"}`)},
	)
	if err := f.store.AppendAuditEvents(context.Background(), es); err != nil {
		t.Fatal(err)
	}
}

func events(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	raw, ok := body["events"].([]any)
	if !ok {
		t.Fatalf("no events list in %v", body)
	}
	out := make([]map[string]any, len(raw))
	for i, e := range raw {
		out[i] = e.(map[string]any)
	}
	return out
}

func TestAdminAuditAPI(t *testing.T) {
	f := start(t)
	seedAudit(t, f)
	tok := f.token(t, "ops-bot", f.issuer+"/admin", "admin")

	t.Run("lists newest first with every field", func(t *testing.T) {
		status, h, body := call(t, "GET", f.adminURL+"audit", tok, "")
		if status != 200 || h.Get("Cache-Control") != "no-store" {
			t.Fatalf("GET audit: %d %v %v", status, h, body)
		}
		es := events(t, body)
		if len(es) != 7 || es[0]["event"] != "login.failed" || es[1]["event"] != "admin.grants.revoked" {
			t.Fatalf("events %v", es)
		}
		if es[1]["admin_subject"] != "ops-bot" || es[1]["sub"] != "alice" || es[1]["detail"].(map[string]any)["count"] != 1.0 {
			t.Fatalf("admin event %v", es[1])
		}
		if _, ok := es[0]["sub"]; ok {
			t.Fatalf("an event without a person has sub: %v", es[0])
		}
		if _, err := time.Parse(time.RFC3339, es[0]["time"].(string)); err != nil {
			t.Fatalf("time %v: %v", es[0]["time"], err)
		}
		if _, ok := body["next_before"]; ok {
			t.Fatalf("next_before on the only page: %v", body)
		}
	})
	t.Run("filters by person, client and event prefix", func(t *testing.T) {
		for q, want := range map[string]int{
			"user=alice":                         6,
			"client=app":                         5,
			"event=admin.":                       1,
			"event=token.issued":                 5,
			"event=token.":                       5,
			"event=token":                        0,
			"user=alice&event=admin.":            1,
			"user=bob":                           0,
			"client=" + url.QueryEscape("a\x00"): 0,
		} {
			status, _, body := call(t, "GET", f.adminURL+"audit?"+q, tok, "")
			if q == "client="+url.QueryEscape("a\x00") {
				if status != 400 || body["error"] != "invalid_request" {
					t.Fatalf("%s: %d %v, want 400 invalid_request", q, status, body)
				}
				continue
			}
			if status != 200 || len(events(t, body)) != want {
				t.Fatalf("%s: %d, %d events, want %d: %v", q, status, len(events(t, body)), want, body)
			}
		}
	})
	t.Run("pages by before", func(t *testing.T) {
		var seen []float64
		q := "audit?limit=3"
		for range 5 {
			status, _, body := call(t, "GET", f.adminURL+q, tok, "")
			if status != 200 {
				t.Fatalf("%s: %d %v", q, status, body)
			}
			for _, e := range events(t, body) {
				seen = append(seen, e["id"].(float64))
			}
			next, ok := body["next_before"].(float64)
			if !ok {
				break
			}
			q = fmt.Sprintf("audit?limit=3&before=%d", int64(next))
		}
		if len(seen) != 7 {
			t.Fatalf("paged through %d events, want 7: %v", len(seen), seen)
		}
		for i := 1; i < len(seen); i++ {
			if seen[i] >= seen[i-1] {
				t.Fatalf("ids not decreasing across pages: %v", seen)
			}
		}
	})
	t.Run("refuses bad paging parameters", func(t *testing.T) {
		for _, q := range []string{"limit=0", "limit=501", "limit=x", "before=0", "before=-3", "before=x", "event=" + url.QueryEscape("\xff")} {
			status, _, body := call(t, "GET", f.adminURL+"audit?"+q, tok, "")
			if status != 400 || body["error"] != "invalid_request" {
				t.Fatalf("%s: %d %v, want 400 invalid_request", q, status, body)
			}
		}
	})
	t.Run("needs an admin token", func(t *testing.T) {
		if status, _, _ := call(t, "GET", f.adminURL+"audit", "", ""); status != 401 {
			t.Fatalf("without a token: %d, want 401", status)
		}
		other := f.token(t, "stranger", f.issuer+"/admin", "admin")
		if status, _, _ := call(t, "GET", f.adminURL+"audit", other, ""); status != 403 {
			t.Fatalf("with a token of a client not in admin.clients: %d, want 403", status)
		}
	})
}
