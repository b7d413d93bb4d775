package storagetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mcpauth/mcpauth/storage"
)

// auditEvent is an event with every field set.
func auditEvent(event, subject, clientID string, at time.Time) storage.AuditEvent {
	return storage.AuditEvent{
		Time: at, Event: event, Subject: subject, ClientID: clientID, AdminSubject: "root",
		Detail: []byte(`{"resource":"https://mcp.example/"}`),
	}
}

// listAudit lists the events matching f, failing t on an error.
func listAudit(t *testing.T, s storage.Store, f storage.AuditFilter) []storage.AuditEvent {
	t.Helper()
	got, err := s.ListAuditEvents(context.Background(), f)
	ok(t, err, "ListAuditEvents")
	if got == nil {
		t.Fatal("ListAuditEvents returned nil, want an empty list")
	}
	for i := range got {
		got[i].Time = normTime(got[i].Time)
		got[i].Detail = normBytes(got[i].Detail)
	}
	return got
}

// auditEvents returns the Event of each event.
func auditEvents(es []storage.AuditEvent) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Event)
	}
	return out
}

// seedAudit appends, oldest first, events of two people and two clients.
func seedAudit(t *testing.T, s storage.Store, at time.Time) {
	t.Helper()
	ok(t, s.AppendAuditEvents(context.Background(), []storage.AuditEvent{
		auditEvent("token.issued", "alice", "app", at),
		auditEvent("token.refreshed", "alice", "app", at.Add(time.Second)),
		auditEvent("login.failed", "bob", "", at.Add(2*time.Second)),
		auditEvent("token.issued", "bob", "cli", at.Add(3*time.Second)),
		auditEvent("tokens.odd", "bob", "cli", at.Add(4*time.Second)),
		auditEvent("token", "alice", "cli", at.Add(5*time.Second)),
		auditEvent("admin.grant_revoked", "alice", "app", at.Add(6*time.Second)),
	}), "AppendAuditEvents")
}

var auditCases = []testCase{
	{"appended events are listed newest first with increasing ids and every field", func(t *testing.T, s storage.Store) {
		at := now()
		seedAudit(t, s, at)
		got := listAudit(t, s, storage.AuditFilter{Limit: 100})
		same(t, "events", auditEvents(got), []string{"admin.grant_revoked", "token", "tokens.odd", "token.issued", "login.failed", "token.refreshed", "token.issued"})
		for i := 1; i < len(got); i++ {
			if got[i].ID >= got[i-1].ID {
				t.Fatalf("ids not decreasing: %d then %d", got[i-1].ID, got[i].ID)
			}
		}
		want := auditEvent("admin.grant_revoked", "alice", "app", at.Add(6*time.Second))
		want.ID = got[0].ID
		same(t, "newest", got[0], want)
		same(t, "limit 2", auditEvents(listAudit(t, s, storage.AuditFilter{Limit: 2})), []string{"admin.grant_revoked", "token"})
		same(t, "limit 0", listAudit(t, s, storage.AuditFilter{}), []storage.AuditEvent{})
		same(t, "negative limit", listAudit(t, s, storage.AuditFilter{Limit: -1}), []storage.AuditEvent{})
	}},
	{"filters select by person, client, event and event prefix", func(t *testing.T, s storage.Store) {
		seedAudit(t, s, now())
		for _, c := range []struct {
			f    storage.AuditFilter
			want []string
		}{
			{storage.AuditFilter{Subject: "bob"}, []string{"tokens.odd", "token.issued", "login.failed"}},
			{storage.AuditFilter{ClientID: "cli"}, []string{"token", "tokens.odd", "token.issued"}},
			{storage.AuditFilter{Event: "token.issued"}, []string{"token.issued", "token.issued"}},
			{storage.AuditFilter{Event: "token."}, []string{"token.issued", "token.refreshed", "token.issued"}},
			{storage.AuditFilter{Event: "token"}, []string{"token"}},
			{storage.AuditFilter{Event: "admin."}, []string{"admin.grant_revoked"}},
			{storage.AuditFilter{Event: "token.iss"}, nil},
			{storage.AuditFilter{Subject: "alice", ClientID: "app", Event: "token."}, []string{"token.refreshed", "token.issued"}},
			{storage.AuditFilter{Subject: "alice", ClientID: "cli"}, []string{"token"}},
			{storage.AuditFilter{Subject: "carol"}, nil},
			{storage.AuditFilter{Subject: "bob", ClientID: "app"}, nil},
		} {
			c.f.Limit = 100
			want := c.want
			if want == nil {
				want = []string{}
			}
			same(t, fmt.Sprintf("%+v", c.f), auditEvents(listAudit(t, s, c.f)), want)
		}
	}},
	{"paging by BeforeID visits every matching event once, newest first", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		var batch []storage.AuditEvent
		for i := range 23 {
			subject := "alice"
			if i%3 == 0 {
				subject = "bob"
			}
			batch = append(batch, auditEvent(fmt.Sprintf("token.issued.%02d", i), subject, "app", at.Add(time.Duration(i)*time.Second)))
		}
		ok(t, s.AppendAuditEvents(ctx, batch[:10]), "AppendAuditEvents")
		ok(t, s.AppendAuditEvents(ctx, batch[10:]), "AppendAuditEvents")
		for _, f := range []storage.AuditFilter{{}, {Subject: "bob"}, {Event: "token."}, {Subject: "bob", Event: "token.issued."}} {
			var seen []string
			var before int64
			for pages := 0; ; pages++ {
				if pages > 30 {
					t.Fatal("paging does not end")
				}
				f.BeforeID, f.Limit = before, 4
				page := listAudit(t, s, f)
				if len(page) == 0 {
					break
				}
				for _, e := range page {
					if before != 0 && e.ID >= before {
						t.Fatalf("%+v: id %d on the page before id %d", f, e.ID, before)
					}
				}
				seen = append(seen, auditEvents(page)...)
				before = page[len(page)-1].ID
			}
			var want []string
			for i := 22; i >= 0; i-- {
				if f.Subject == "" || batch[i].Subject == f.Subject {
					want = append(want, batch[i].Event)
				}
			}
			same(t, fmt.Sprintf("paged events of %+v", f), seen, want)
		}
	}},
	{"an event's text that cannot be kept is stored replaced, and a filter by it matches nothing", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		ok(t, s.AppendAuditEvents(ctx, []storage.AuditEvent{
			auditEvent("token.failed", "a\x00b", "c\xffd", now()),
		}), "AppendAuditEvents of unstorable text")
		got := listAudit(t, s, storage.AuditFilter{Limit: 10})
		if len(got) != 1 || got[0].Subject != "a\uFFFDb" || got[0].ClientID != "c\uFFFDd" {
			t.Fatalf("stored %+v, want the subject and client with U+FFFD in place of NUL and the invalid byte", got)
		}
		same(t, "filter by invalid client", listAudit(t, s, storage.AuditFilter{ClientID: "c\xffd", Limit: 10}), []storage.AuditEvent{})
		same(t, "filter by NUL subject", listAudit(t, s, storage.AuditFilter{Subject: "a\x00b", Limit: 10}), []storage.AuditEvent{})
		same(t, "filter by the stored text", len(listAudit(t, s, storage.AuditFilter{Subject: "a\uFFFDb", Limit: 10})), 1)
	}},
	{"an event without a time gets the time of the call; nil and empty detail read as nil", func(t *testing.T, s storage.Store) {
		before := time.Now().Add(-time.Second)
		ok(t, s.AppendAuditEvents(context.Background(), []storage.AuditEvent{
			{Event: "login.succeeded", Subject: "alice"},
			{Event: "login.succeeded", Subject: "alice", Detail: []byte{}},
		}), "AppendAuditEvents")
		got := listAudit(t, s, storage.AuditFilter{Limit: 10})
		for _, e := range got {
			if e.Time.Before(before) || e.Time.After(time.Now().Add(time.Second)) {
				t.Fatalf("Time = %v, want about now", e.Time)
			}
			if e.Detail != nil || e.ClientID != "" || e.AdminSubject != "" {
				t.Fatalf("event %+v, want no detail, client or admin subject", e)
			}
		}
	}},
	{"old events are deleted in batches, and ids keep increasing after", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		at := now()
		var old []storage.AuditEvent
		for i := range 5 {
			old = append(old, auditEvent("token.issued", "alice", "app", at.Add(-time.Duration(10-i)*time.Hour)))
		}
		ok(t, s.AppendAuditEvents(ctx, old), "AppendAuditEvents")
		ok(t, s.AppendAuditEvents(ctx, []storage.AuditEvent{auditEvent("token.kept", "alice", "app", at)}), "AppendAuditEvents")
		top := listAudit(t, s, storage.AuditFilter{Limit: 1})[0].ID
		for _, want := range []int{2, 2, 1, 0} {
			n, err := s.DeleteAuditEventsBefore(ctx, at.Add(-time.Minute), 2)
			ok(t, err, "DeleteAuditEventsBefore")
			if n != want {
				t.Fatalf("DeleteAuditEventsBefore = %d, want %d", n, want)
			}
		}
		n, err := s.DeleteAuditEventsBefore(ctx, at.Add(time.Minute), 0)
		ok(t, err, "DeleteAuditEventsBefore with limit 0")
		same(t, "deleted with limit 0", n, 0)
		same(t, "kept", auditEvents(listAudit(t, s, storage.AuditFilter{Limit: 10})), []string{"token.kept"})
		n, err = s.DeleteAuditEventsBefore(ctx, at.Add(time.Minute), 10)
		ok(t, err, "DeleteAuditEventsBefore")
		same(t, "deleted the newest", n, 1)
		ok(t, s.AppendAuditEvents(ctx, []storage.AuditEvent{auditEvent("token.after", "alice", "app", at)}), "AppendAuditEvents")
		if id := listAudit(t, s, storage.AuditFilter{Limit: 1})[0].ID; id <= top {
			t.Fatalf("id %d after deleting id %d, want a greater one", id, top)
		}
	}},
	{"concurrent appends keep every event under its own id", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		n, errs := race(Concurrency, func(i int) error {
			return s.AppendAuditEvents(ctx, []storage.AuditEvent{
				auditEvent("token.issued", fmt.Sprintf("p%d", i), "app", now()),
				auditEvent("token.refreshed", fmt.Sprintf("p%d", i), "app", now()),
			})
		})
		if n != Concurrency {
			t.Fatalf("%d of %d appends succeeded: %v", n, Concurrency, errs)
		}
		got := listAudit(t, s, storage.AuditFilter{Limit: 1000})
		ids := map[int64]bool{}
		for _, e := range got {
			ids[e.ID] = true
		}
		if len(got) != 2*Concurrency || len(ids) != 2*Concurrency {
			t.Fatalf("%d events with %d distinct ids, want %d", len(got), len(ids), 2*Concurrency)
		}
		// One call's events are in their order.
		for i := range Concurrency {
			es := auditEvents(listAudit(t, s, storage.AuditFilter{Subject: fmt.Sprintf("p%d", i), Limit: 10}))
			same(t, "one call's events", es, []string{"token.refreshed", "token.issued"})
		}
	}},
}

// listStats lists the counts since since, failing t on an error.
func listStats(t *testing.T, s storage.Store, since time.Time) []storage.StatCount {
	t.Helper()
	got, err := s.ListStats(context.Background(), since)
	ok(t, err, "ListStats")
	if got == nil {
		t.Fatal("ListStats returned nil, want an empty list")
	}
	for i := range got {
		got[i].Hour = normTime(got[i].Hour)
	}
	return got
}

var statsCases = []testCase{
	{"counts add up per hour and name, listed by hour then name", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		h := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
		ok(t, s.AddStats(ctx, []storage.StatCount{
			{Hour: h.Add(25 * time.Minute), Name: "tokens_issued", Count: 3},
			{Hour: h.Add(59 * time.Minute), Name: "tokens_issued", Count: 2},
			{Hour: h.Add(time.Hour).In(time.FixedZone("X", 3600)), Name: "logins", Count: 1},
			{Hour: h, Name: "refusals", Count: 0},
			{Hour: h.Add(-time.Hour), Name: "logins", Count: 7},
		}), "AddStats")
		ok(t, s.AddStats(ctx, []storage.StatCount{
			{Hour: h, Name: "tokens_issued", Count: 10},
			{Hour: h, Name: "login_failures", Count: 1},
		}), "AddStats")
		ok(t, s.AddStats(ctx, nil), "AddStats of nothing")
		same(t, "since the hour", listStats(t, s, h), []storage.StatCount{
			{Hour: h, Name: "login_failures", Count: 1},
			{Hour: h, Name: "tokens_issued", Count: 15},
			{Hour: h.Add(time.Hour), Name: "logins", Count: 1},
		})
		same(t, "since the hour after", listStats(t, s, h.Add(time.Minute)), []storage.StatCount{
			{Hour: h.Add(time.Hour), Name: "logins", Count: 1},
		})
		same(t, "all", len(listStats(t, s, time.Time{})), 4)
	}},
	{"a count without an hour is the current hour's", func(t *testing.T, s storage.Store) {
		ok(t, s.AddStats(context.Background(), []storage.StatCount{{Name: "logins", Count: 2}}), "AddStats")
		got := listStats(t, s, time.Now().Add(-2*time.Hour))
		h := time.Now().UTC().Truncate(time.Hour)
		if len(got) != 1 || got[0].Count != 2 || (!got[0].Hour.Equal(h) && !got[0].Hour.Equal(h.Add(-time.Hour))) {
			t.Fatalf("ListStats = %+v, want 2 logins in the hour %v", got, h)
		}
	}},
	{"concurrent additions to the same counts lose none", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		h := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
		n, errs := race(Concurrency, func(i int) error {
			// Half name the counts in one order, half in the other: no deadlock.
			cs := []storage.StatCount{{Hour: h, Name: "tokens_issued", Count: 1}, {Hour: h, Name: "logins", Count: 2}}
			if i%2 == 1 {
				slices.Reverse(cs)
			}
			return s.AddStats(ctx, cs)
		})
		if n != Concurrency {
			t.Fatalf("%d of %d additions succeeded: %v", n, Concurrency, errs)
		}
		same(t, "counts", listStats(t, s, h), []storage.StatCount{
			{Hour: h, Name: "logins", Count: 2 * Concurrency},
			{Hour: h, Name: "tokens_issued", Count: Concurrency},
		})
	}},
	{"old counts are deleted in batches", func(t *testing.T, s storage.Store) {
		ctx := context.Background()
		h := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
		var cs []storage.StatCount
		for i := range 5 {
			cs = append(cs, storage.StatCount{Hour: h.Add(-time.Duration(i+1) * time.Hour), Name: "logins", Count: 1})
		}
		cs = append(cs, storage.StatCount{Hour: h, Name: "logins", Count: 1})
		ok(t, s.AddStats(ctx, cs), "AddStats")
		for _, want := range []int{2, 2, 1, 0} {
			n, err := s.DeleteStatsBefore(ctx, h, 2)
			ok(t, err, "DeleteStatsBefore")
			if n != want {
				t.Fatalf("DeleteStatsBefore = %d, want %d", n, want)
			}
		}
		same(t, "kept", listStats(t, s, time.Time{}), []storage.StatCount{{Hour: h, Name: "logins", Count: 1}})
	}},
}
